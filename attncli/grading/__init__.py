"""Grading homework: the verdict on each answered cell and step, and the classic mistake that explains a wrong one.

`grade` (attncli.grading.verdict) grades one problem's answers; `layers` a stack's, layer by layer;
`submissions` a class's files against their keys; `templates` writes the blank answers a student fills in;
`interval` carries the student's rounding through the calculation. The public names are re-exported here,
so that `attncli.grading.grade` and `attncli.grading.Report` are where they always were.
"""

from attncli.grading.verdict import (
    CARRIED,
    CARRY,
    CODES,
    EXACT,
    EXACT_ZERO,
    MISSING,
    NOT_ANSWERED,
    RIGHT,
    TOO_FEW_DECIMALS,
    WRONG,
    Cell,
    Report,
    StepReport,
    grade,
)

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
    "StepReport",
    "grade",
]
