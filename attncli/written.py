"""How numbers are written, for every reader (the human formats, the tutor, the exercises): fixed decimals, never
cut, no negative zero; inputs as given; sums of products as by hand."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

MASKED = "−∞"
SCIENTIFIC_FROM = 1e15  # from here on fixed notation would print up to 309 digits, so use 1.2346e+20


def fixed(value: float, precision: int) -> str:
    """`value` with exactly `precision` decimals: the article's 0.0900 stays 0.0900."""
    if math.isinf(value):
        return MASKED if value < 0 else "∞"
    if abs(value) >= SCIENTIFIC_FROM:
        return f"{value:.{precision}e}"
    text = f"{value:.{precision}f}"
    return text[1:] if text.startswith("-") and not text.strip("-0.") else text


def entry(value: float, precision: int) -> str:
    """An input number: whole numbers as written (2, not 2.0000), others with fixed decimals."""
    if float(value).is_integer() and abs(value) < SCIENTIFIC_FROM:
        return str(int(value))
    return fixed(value, precision)


def vector(values: Iterable[float], precision: int, style: str = "fixed") -> str:
    show = entry if style == "entry" else fixed
    return "[" + ", ".join(show(float(v), precision) for v in values) + "]"


MINUS = "−"


class Product(NamedTuple):
    """One term of a sum of products as it is written by hand: its operator, then its two factors."""

    sign: str  # "" for the first term, else "+" or "−" (a negative term after the first is subtracted)
    first: str  # the first factor, with its minus only when it leads the sum
    second: str  # the second factor, in parentheses when negative: (−1.2247)


def products(pairs: Iterable[tuple[str, str]]) -> list[Product]:
    """The terms of a sum of products of written numbers, for the terminal, the write-ups and the tutor alike:
    −1.2247×(−1.2247) − 1.2247×0, never -1.2247×-1.2247 + -1.2247×0."""
    terms = []
    for first, second in pairs:
        negative = first.startswith(("-", MINUS))
        magnitude = first[1:] if negative else first
        if second.startswith(("-", MINUS)):
            second = f"({MINUS}{second[1:]})"
        if not terms:
            terms.append(Product("", f"{MINUS}{magnitude}" if negative else magnitude, second))
        else:
            terms.append(Product(MINUS if negative else "+", magnitude, second))
    return terms


def sum_of_products(pairs: Iterable[tuple[str, str]]) -> str:
    """`products` as plain text: 1.2247×1.2247 − 1.2247×(−1.2247)."""
    return "".join(f"{f' {term.sign} ' if term.sign else ''}{term.first}×{term.second}" for term in products(pairs))
