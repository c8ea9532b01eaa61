"""One record per student (or per file): what every gradebook format writes, Gradescope's, Canvas's and Moodle's.

A record is made from a file's grading result (attncli.grading.submissions.Result) and its Score, or for a student of
the class list who handed nothing in (status NO_FILE, 0 points). Statuses and codes stay English, for scripts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from attncli.errors import fail
from attncli.gradebook.points import Score, percent
from attncli.grading import Report, StepReport
from attncli.grading.submissions import Result

NO_FILE = "no_file"  # a student of the class list without a file


@dataclass(frozen=True)
class StudentRecord:
    """A student's (or a file's) line in a gradebook: who, which file, its verdict and its points."""

    file: str | None  # None: NO_FILE
    status: str  # one of attncli.grading.submissions.STATUSES, or NO_FILE
    student: str | None = None  # a name, from the file's student: or the class list
    student_id: str | None = None  # the file's student_id:, or the class list's match value
    exercise: str | None = None
    report: Report | None = None  # None when the file was not graded
    score: Score | None = None  # None when the file was not graded, or no points were counted
    error: str | None = None  # not_graded: the one-line error
    changed: tuple[str, ...] = ()  # problem_changed: the fields that differ from the key

    @property
    def first_mistake(self) -> str | None:
        """The first wrong or missing step (`weights`, `weights[2]`, `layers[2].weights`), None when there is none."""
        first = None if self.report is None else self.report.first_mistake
        return None if first is None else step_name(first)

    @property
    def codes(self) -> tuple[str, ...]:
        """Every diagnosis, `step:code`, in the order of the calculation."""
        steps = () if self.report is None else self.report.steps
        return tuple(f"{step_name(step)}:{code}" for step in steps for code in step.diagnosis)


def record(
    result: Result, score: Score | None = None, student: str | None = None, student_id: str | None = None
) -> StudentRecord:
    """The record of one graded (or ungradable) file: its score and who it is from, as the result says unless given."""
    return StudentRecord(
        result.file,
        result.status,
        student if student is not None else result.student.name,
        student_id if student_id is not None else result.student.id,
        result.exercise,
        result.report,
        (score if score is not None else result.score) if result.report is not None else None,
        result.error,
        result.changed,
    )


@dataclass(frozen=True)
class Tally:
    """What a class's records add up to, counted as they are written: files (or students) by status, and the key's
    cells right of all the key's cells."""

    statuses: tuple[tuple[str, int], ...] = ()  # (status, how many), in the order first met
    right: int = 0
    cells: int = 0

    def plus(self, record: StudentRecord) -> Tally:
        return self.counted(*counted(record))

    def counted(self, status: str, right: int, cells: int) -> Tally:
        """With one more record of `status`, `right` of the key's `cells` right."""
        counts = dict(self.statuses)
        counts[status] = counts.get(status, 0) + 1
        return Tally(tuple(counts.items()), self.right + right, self.cells + cells)

    def count(self, status: str) -> int:
        return dict(self.statuses).get(status, 0)

    @property
    def records(self) -> int:
        return sum(count for _, count in self.statuses)


def counted(record: StudentRecord) -> tuple[str, int, int]:
    """What a tally counts of a record: its status, and the key's cells right of all the key's cells."""
    steps = () if record.score is None else record.score.steps
    return record.status, sum(step.right for step in steps), sum(step.cells for step in steps)


def tally(records: Iterable[StudentRecord]) -> Tally:
    found = Tally()
    for each in records:
        found = found.plus(each)
    return found


def no_file(student: str | None, student_id: str | None, max_score: Fraction | None) -> StudentRecord:
    """A student who handed in nothing: 0 points of `max_score` (None: no score, the maximum being unknown)."""
    score = None if max_score is None else Score(Fraction(0), max_score, percent(Fraction(0), max_score), ())
    return StudentRecord(None, NO_FILE, student, student_id, score=score)


def step_name(step: StepReport) -> str:
    """A step as scripts name it: `weights`; `weights[2]` for one of several heads; `layers[2].` before a layer's."""
    name = step.step if step.head is None or step.head_name is None else f"{step.step}[{step.head + 1}]"
    return name if step.layer is None else f"layers[{step.layer + 1}].{name}"


def common_maximum(records: Iterable[StudentRecord]) -> Fraction | None:
    """The maximum score every scored record shares (one assignment column takes one), None when none is scored."""
    found = {record.score.max_score for record in records if record.score is not None and record.status != NO_FILE}
    if len(found) > 1:
        raise fail("gradebook.mixed_maximum", points=", ".join(sorted(map(str, found))))
    return found.pop() if found else None
