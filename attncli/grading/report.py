"""What grading finds, as frozen records every report format renders: each cell's verdict, each step's, the file's.

Statuses stay English in the records (and in JSON and CSV, for scripts); the human reports translate them.
"""

from __future__ import annotations

from dataclasses import dataclass

from attncli.parsing.answers import Entry

RIGHT, CARRIED, WRONG = "right", "carried", "wrong"
NOT_ANSWERED, MISSING, TOO_FEW_DECIMALS = "not_answered", "missing", "too_few_decimals"


@dataclass(frozen=True)
class Cell:
    row: int
    column: int
    entry: Entry | None  # None: not answered
    expected: float  # the true value; -inf for a masked score
    masked: bool  # the mask excludes this cell
    status: str  # RIGHT, CARRIED (follows from the student's own wrong inputs), WRONG, NOT_ANSWERED, TOO_FEW_DECIMALS
    own: float = 0.0  # half a unit of the last decimal written (0 for exact entries; the tolerance when one is set)
    carried_in: float = 0.0  # the widening from the rounding the inputs carry in
    against: float | None = None  # what the rule compared with when not `expected`: the student's own inputs give it


@dataclass(frozen=True)
class StepReport:
    step: str
    head: int | None  # None for concat and final
    head_name: str | None  # None for concat and final, and when the problem has one head
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[Cell, ...]  # every cell the mask lets through, and the masked ones answered
    status: str  # RIGHT; CARRIED: right method, wrong inputs; WRONG: the mistake is here; NOT_ANSWERED; MISSING
    diagnosis: tuple[str, ...]  # CODES that reproduce the step's numbers
    layer: int | None = None  # with stacked layers (attncli.grading.layers): the layer, counting from 0

    def count(self, status: str) -> int:
        """How many cells have `status`."""
        return sum(cell.status == status for cell in self.cells)

    @property
    def correct(self) -> int:
        return self.count(RIGHT)

    @property
    def total(self) -> int:
        """The answered cells."""
        return sum(cell.entry is not None for cell in self.cells)


@dataclass(frozen=True)
class Report:
    file: str
    steps: tuple[StepReport, ...]

    @property
    def ok(self) -> bool:
        """No step is wrong or missing, and something was answered: carried steps only inherit a mistake."""
        return not self.wrong_steps and any(step.status != NOT_ANSWERED for step in self.steps)

    @property
    def first_mistake(self) -> StepReport | None:
        """The first step where a mistake was made, or that is missing."""
        return next(iter(self.wrong_steps), None)

    @property
    def wrong_steps(self) -> tuple[StepReport, ...]:
        """Every wrong or missing step, in the order of the calculation."""
        return tuple(step for step in self.steps if step.status in (WRONG, MISSING))
