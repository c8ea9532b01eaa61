"""How numbers are written, for every reader (the human formats, the tutor, the exercises).

Fixed decimals, never cut, no negative zero; inputs as given; sums of products as by hand;
numbers that carry the way they are written (`Num`, `Vec`: a row condensed to its first and
last EDGE); and how one query and one key become their score before the scale, written out as
far as it can be followed by hand (`arithmetic`). The records are NamedTuples, cheap to create.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attncli.core import row_norms

if TYPE_CHECKING:
    from attncli.core import HeadSteps

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
    terms: list[Product] = []
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


# Numbers with the way they are written, as the walk and the tutor show them

EDGE = 4  # a condensed matrix shows its first and last EDGE rows and columns, a gap marked between
WRITE_OUT = 4  # q·k written term by term up to this many coordinates
FIXED, ENTRY, EXP = "fixed", "entry", "exp"  # how a number is written: see `Num`
ACROSS, DOWN = "across", "down"  # not a number: the place of those a condensed walk leaves out, ⋯ and ⋮
GAPS = {ACROSS: "⋯", DOWN: "⋮"}
EXP_FIXED_BELOW = 1e12  # an e^s this large or larger is written in scientific notation, 1.0686e+13


class Num(NamedTuple):
    """A number and how it is written: FIXED with `precision` decimals, ENTRY as an input (2, not 2.0000),
    EXP as e^s: scientific when fixed notation would show a tiny e^s as 0 or a huge one with 13 digits or more."""

    value: float
    style: str = FIXED

    def text(self, precision: int) -> str:
        if self.style in GAPS:
            return GAPS[self.style]
        if self.style == ENTRY:
            return entry(self.value, precision)
        if (
            self.style == EXP
            and self.value != 0
            and (abs(self.value) >= EXP_FIXED_BELOW or abs(self.value) < 10.0**-precision)
        ):
            return f"{self.value:.{precision}e}"
        return fixed(self.value, precision)


class Vec(NamedTuple):
    """A row of numbers written alike: [1, 0] or [1.4205, 0.5795]; condensed, [1, 2, ⋯, 9] (`gap`: where ⋯ goes).
    A row of style DOWN stands for the rows left out: ⋮."""

    values: tuple[float, ...]
    style: str = FIXED
    gap: int | None = None

    def text(self, precision: int) -> str:
        if self.style == DOWN:
            return GAPS[DOWN]
        return "[" + ", ".join(cell.text(precision) for cell in self.cells) + "]"

    @property
    def cells(self) -> tuple[Num, ...]:
        cells = [Num(value, self.style) for value in self.values]
        if self.gap is not None:
            cells.insert(self.gap, Num(0.0, ACROSS if self.style != DOWN else DOWN))
        return tuple(cells)


def vec(values: np.ndarray, style: str = FIXED, short: bool = False) -> Vec:
    """A row of numbers; `short`, its first and last EDGE when it has more."""
    shown, gap = shown_of(len(values), short)
    return Vec(tuple(float(values[j]) for j in shown), alike(values, style), gap)


def rows(matrix: np.ndarray, style: str = FIXED, short: bool = False) -> tuple[Vec, ...]:
    """A matrix as rows; `short`, its first and last EDGE rows and columns with a gap row (⋮) between."""
    shown, gap = shown_of(len(matrix), short)
    style = alike(matrix, style)
    out = [vec(matrix[i], style, short) for i in shown]
    if gap is not None:
        out.insert(gap, out[0]._replace(values=(0.0,) * len(out[0].values), style=DOWN))
    return tuple(out)


def alike(numbers: np.ndarray, style: str) -> str:
    """The style that writes all of `numbers` one way: ENTRY only when every one is whole ([1, 0]), so that an
    input matrix is never written [0.5000, 0] beside [1, 0]."""
    if style == ENTRY and not np.all(np.mod(numbers, 1) == 0):
        return FIXED
    return style


def shown_of(count: int, short: bool) -> tuple[list[int], int | None]:
    """Which of `count` rows (or columns) are shown, and where the gap goes: all of them unless `short`."""
    if not short or count <= 2 * EDGE + 1:
        return list(range(count)), None
    return [*range(EDGE), *range(count - EDGE, count)], EDGE


def names_of(names: tuple[str, ...], short: bool, mark: str = GAPS[DOWN]) -> tuple[str, ...]:
    """Token names as `rows` shows their rows: condensed, the first and last EDGE with `mark` between."""
    shown, gap = shown_of(len(names), short)
    out = [names[i] for i in shown]
    if gap is not None:
        out.insert(gap, mark)
    return tuple(out)


class Expr(NamedTuple):
    """A formula as text (X₂ + Attn(LN(X₂)), CE = ...) and in LaTeX's math mode."""

    text: str
    latex: str


# The written-out compatibility of one query and one key, for each kind of score


class Terms(NamedTuple):
    """q·k term by term, the inputs as written: 1.4142×2 + 0×0 = 2.8284."""

    pairs: tuple[tuple[Num, Num], ...]
    value: Num


class Cosine(NamedTuple):
    """cos(q, k) = q·k / (‖q‖×‖k‖): 2.0000 / (1.4142×2.0000) = 0.7071."""

    dot: Num
    norms: tuple[Num, Num]
    value: Num


class Additive(NamedTuple):
    """v·tanh(q·W_query + k·W_key) with the tanh written out: v·[0.7616, 0.0000] = 0.7616."""

    hidden: Vec
    value: Num


class Plain(NamedTuple):
    """The compatibility alone, when writing it out would not help (general scores, long dot products)."""

    value: Num


Arithmetic = Terms | Cosine | Additive | Plain


def arithmetic(head: HeadSteps, row: int, j: int) -> Arithmetic:
    """How query `row` and key `j` become their compatibility, as far as it can be followed by hand."""
    kind = head.spec.score.kind
    value = Num(float(head.dot[row, j]))
    if head.hidden is not None:  # additive scores, the only ones that keep tanh(q·W_query + k·W_key)
        return Additive(vec(head.hidden[row, j]), value)
    queries, keys, style = scored(head)
    q, k = queries[row], keys[j]
    if kind in ("scaled_dot", "dot") and len(k) <= WRITE_OUT:
        return Terms(tuple((Num(float(a), style), Num(float(b), style)) for a, b in zip(q, k)), value)
    if kind == "cosine":
        left, right = (Num(float(norm)) for norm in row_norms(np.stack([q, k])))  # ‖[1e200, 1e200]‖ stays finite
        with np.errstate(over="ignore"):  # a q·k beyond float's range is shown as ∞; the cosine itself is exact
            return Cosine(Num(float(q @ k)), (left, right), value)
    return Plain(value)


class Scored(NamedTuple):
    """The queries and keys a head's compatibility is computed from, and how they are written."""

    queries: np.ndarray  # (L, d_q)
    keys: np.ndarray  # (S, d_k)
    style: str  # ENTRY as given, FIXED for RoPE's turned ones (computed numbers)


def scored(head: HeadSteps) -> Scored:
    """The queries and keys the compatibility is computed from, and how they are written: as given,
    or RoPE's turned ones, computed numbers. Only a head that computes its scores has them."""
    if head.rotation is None:
        return Scored(head.q, head.k, ENTRY)
    return Scored(head.rotation.queries, head.rotation.keys, FIXED)


def arithmetic_text(written: Arithmetic, precision: int) -> str:
    """The arithmetic as plain text (terminal, Markdown); LaTeX writes the same records in math."""
    p = precision
    value = written.value.text(p)
    match written:
        case Terms(pairs=pairs):
            return sum_of_products((a.text(p), b.text(p)) for a, b in pairs) + f" = {value}"
        case Cosine(dot=dot, norms=(left, right)):
            return f"{dot.text(p)} / ({left.text(p)}×{right.text(p)}) = {value}"
        case Additive(hidden=hidden):
            return f"v·{hidden.text(p)} = {value}"
    return value
