"""Grading homework: the verdict on each answered cell and step, and the classic mistake that explains a wrong one.

The package, stage by stage:
- `report`: what grading finds, as frozen records (Cell, StepReport, Report) and their statuses;
- `rule`: the rounding rule, the one place that says how a written number is judged;
- `interval`: numbers as a careful student has them, and how far their rounding carries;
- `mistakes`: the classic mistakes, their codes, the ones a problem can show;
- `replay`: the calculation replayed as a student carries it, under no mistake or one;
- `diagnose`: which mistake reproduces a wrong step's numbers;
- `verdict`: `grade`, a file's answers against the calculation;
- `layers`: a stack's answers, layer by layer;
- `templates`: the blank answers a student fills in, and a key's;
- `submissions`: a class's files, each against its key.

The public names are re-exported here, so that `attncli.grading.grade` and `attncli.grading.Report` are where
they always were.
"""

from attncli.grading.mistakes import CODES
from attncli.grading.report import (
    CARRIED,
    MISSING,
    NOT_ANSWERED,
    RIGHT,
    TOO_FEW_DECIMALS,
    WRONG,
    Cell,
    Report,
    StepReport,
)
from attncli.grading.rule import CARRY, EXACT, EXACT_ZERO, Rule
from attncli.grading.verdict import grade

__all__ = [
    "CARRIED",
    "CARRY",
    "CODES",
    "EXACT",
    "EXACT_ZERO",
    "MISSING",
    "NOT_ANSWERED",
    "RIGHT",
    "TOO_FEW_DECIMALS",
    "WRONG",
    "Cell",
    "Report",
    "Rule",
    "StepReport",
    "grade",
]
