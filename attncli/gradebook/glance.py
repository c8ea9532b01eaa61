"""The class at a glance: per step, how many students answered it, got it right, carried a mistake, got it wrong
only by rounding or for real, and the causes (diagnosis codes) found most often: what to go over next lesson.

Each graded report counts once in every step any report holds: as right, carried, rounded or wrong when the
student answered it (their step's status as gradebooks count it, attncli.gradebook.points.step_status), as
missing when a required step was not answered, else as not answered; so answered + missing + not_answered =
students, and answered = right + carried + rounded + wrong, in every row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from attncli.gradebook.points import ROUNDED, StepKey, step_key, step_status
from attncli.grading import CARRIED, MISSING, RIGHT, WRONG, Report, StepReport
from attncli.steps import position

CAUSES_SHOWN = 3


@dataclass(frozen=True)
class StepGlance:
    step: StepReport  # the first report of the step: names it
    right: int
    carried: int
    wrong: int
    missing: int
    not_answered: int
    causes: tuple[tuple[str, int], ...]  # the CAUSES_SHOWN commonest codes, most frequent first (ties by name)
    rounded: int = 0  # wrong only by rounding

    @property
    def answered(self) -> int:
        return self.right + self.carried + self.rounded + self.wrong


@dataclass(frozen=True)
class Glance:
    students: int  # the graded reports counted
    steps: tuple[StepGlance, ...]  # in the order of the calculation


def glance(reports: Iterable[Report]) -> Glance:
    """Every step of `reports` with its counts and commonest causes (see the module's docstring)."""
    reports = list(reports)
    named: dict[StepKey, StepReport] = {}
    statuses: dict[StepKey, Counter[str]] = {}
    causes: dict[StepKey, Counter[str]] = {}
    for report in reports:
        for step in report.steps:
            key = step_key(step)
            named.setdefault(key, step)
            statuses.setdefault(key, Counter())[step_status(step)] += 1
            causes.setdefault(key, Counter()).update(step.diagnosis)
    rows = []
    for key in sorted(named, key=lambda key: position(key[1], key[2], key[0])):
        count = statuses[key]
        answered = count[RIGHT] + count[CARRIED] + count[ROUNDED] + count[WRONG]
        commonest = tuple(sorted(causes[key].items(), key=lambda item: (-item[1], item[0]))[:CAUSES_SHOWN])
        missing = count[MISSING]
        absent = len(reports) - answered - missing
        rows.append(
            StepGlance(
                named[key], count[RIGHT], count[CARRIED], count[WRONG], missing, absent, commonest, count[ROUNDED]
            )
        )
    return Glance(len(reports), tuple(rows))
