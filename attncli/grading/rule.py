"""The rounding rule, the one place that says how a written number is judged.

A written number is right when it lies within half a unit of its last written decimal of the
value it should have, widened only by what the rounding of its inputs can carry in when every
number before it is carried at the carry precision (CARRY decimals unless the key or --carry
says otherwise). How far the inputs' rounding carries in is computed elsewhere
(attncli.grading.interval, the replays of attncli.grading.replay); this module says what a
written number promises and how much room it is given. A number written with at least the
carry's decimals may stand for a more precise one the student kept; a coarser one was used as
written. Whole numbers and expressions are exact as written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

CARRY = 4  # decimals a careful student keeps from step to step, unless the key or --carry says otherwise
EXACT = 1e-9  # relative tolerance for whole numbers and expressions, which are exact as written
EXACT_ZERO = 1e-12  # ... and the absolute one, for true values that are zero up to floating-point noise


class Written(Protocol):
    """A number as a student wrote it (attncli.parsing.answers.Entry): its value, None for a "masked" mark, and
    the decimals it shows, None for a whole number or an expression."""

    @property
    def value(self) -> float | None: ...

    @property
    def decimals(self) -> int | None: ...


class Asked(Protocol):
    """How a file asks to be graded (attncli.parsing.answers.Settings, or its Answers)."""

    @property
    def tolerance(self) -> float | None: ...

    @property
    def carry(self) -> int | None: ...

    @property
    def min_decimals(self) -> int | None: ...


def half_unit(decimals: int) -> float:
    """Half a unit of the `decimals`-th decimal: how far rounding to it may move a number."""
    return 0.5 * 10.0**-decimals


def allowed(own: float, carried_in: float, value: float) -> float:
    """How far a written number may be from `value`: its own half unit and what its inputs carry in, with room for
    floating-point noise (EXACT relative, EXACT_ZERO absolute)."""
    return (own + carried_in) * (1 + EXACT) + EXACT * abs(value) + EXACT_ZERO


@dataclass(frozen=True)
class Rule:
    """How a written number is judged: the file's or the command line's tolerance, carry and min_decimals."""

    tolerance: float | None
    carry: int
    min_decimals: int | None

    @classmethod
    def chosen(
        cls,
        tolerance: float | None,
        carry: int | None,
        min_decimals: int | None,
        given: Asked,
    ) -> Rule:
        """The rule of a grading run: each value from the command line when it gives one, else the file's
        (`given`: the key's or the homework's settings), else the default carry."""
        return cls(
            tolerance if tolerance is not None else given.tolerance,
            next(c for c in (carry, given.carry, CARRY) if c is not None),
            min_decimals if min_decimals is not None else given.min_decimals,
        )

    def own(self, entry: Written) -> float:
        """Half a unit of the last decimal written; 0 for exact entries; the tolerance when one is set."""
        if self.tolerance is not None:
            return self.tolerance
        return 0.0 if entry.decimals is None else half_unit(entry.decimals)

    def kept(self, entry: Written) -> float:
        """How far the number a student wrote may be from the one they kept and carry on with: half a unit of its
        last decimal when it has at least the carry's decimals, else 0 (they used it as written)."""
        return half_unit(entry.decimals) if entry.decimals is not None and entry.decimals >= self.carry else 0.0

    @property
    def carried(self) -> float:
        """How far a number a careful student carries is from the true one: half a unit of the carry's decimal."""
        return half_unit(self.carry)

    def too_few(self, entry: Written, value: float) -> bool:
        """Whether a number shows fewer decimals than min_decimals asks for and is not the true `value` itself
        (0.5 for 0.5 is never wrong, whatever its decimals)."""
        if self.min_decimals is None or entry.decimals is None or entry.decimals >= self.min_decimals:
            return False
        return entry.value is None or not math.isfinite(value) or abs(entry.value - value) > allowed(0, 0, value)

    def agrees(self, entry: Written, value: float, radius: float, excluded: bool = False) -> bool:
        """Whether what the student wrote is `value` up to `radius` carried in (a "masked" mark: whether it is out)."""
        if entry.value is None:
            return bool(excluded)
        if not math.isfinite(value):
            return False
        if not math.isfinite(radius):
            radius = 0.0  # carrying can move it anywhere (e^s carried as 0.0000): judged by its own half unit
        if self.tolerance is not None:
            return abs(entry.value - value) <= self.tolerance
        return abs(entry.value - value) <= allowed(self.own(entry), radius, value)
