"""How numbers look in human output: fixed decimals, never cut, no negative zero."""

from __future__ import annotations

import math
from collections.abc import Iterable

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
