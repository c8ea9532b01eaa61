"""Points written down: for people (exact, or a fraction and its value, `13/3 ≈ 4.33`) and for spreadsheets and
course systems (the float's shortest round-trip decimal, plain digits). Every gradebook format writes points
through these two, so that the check report, feedback, Gradescope, Canvas and Moodle say the same numbers."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

EXACT_DECIMALS = 4  # points with at most this many decimals are shown exactly; others as a fraction and ≈ 2 decimals


def number(points: Fraction) -> str:
    """A score as its float's shortest round-trip decimal in plain digits (13/3: 4.333333333333333; 3: 3)."""
    if points.denominator == 1:
        return str(points.numerator)
    return format(Decimal(repr(float(points))), "f")


def points_text(points: Fraction) -> str:
    """Points for people: exact when they have at most EXACT_DECIMALS decimals (2, 0.5, 0.8333 is not), else the
    fraction and its value to 2 decimals (13/3 ≈ 4.33)."""
    if (points * 10**EXACT_DECIMALS).denominator == 1:
        whole, rest = divmod(points.numerator * 10**EXACT_DECIMALS // points.denominator, 10**EXACT_DECIMALS)
        return str(whole) if rest == 0 else f"{whole}.{rest:0{EXACT_DECIMALS}d}".rstrip("0")
    hundredths = round(points * 100)  # half to even, for a display only; the exact fraction is shown beside it
    return f"{points.numerator}/{points.denominator} ≈ {hundredths // 100}.{hundredths % 100:02d}"
