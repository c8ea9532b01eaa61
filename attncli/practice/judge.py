"""`check`'s verdict on one prompt: the steps `attncli check` grades are judged by the grading wing itself.

The session's answers as first given are what `--record` writes and `check` reads; a prompt's
cells, as now answered, are put among them and the file is graded as `check` would grade it
(attncli.grading.grade, or attncli.grading.layers.grade for a stack), so a first try gets the
verdict and the diagnosis `check` gives the record, cell by cell. Which steps `check` grades is
read from the steps table (attncli.steps): a step the tutor asks under an answer field `check`
knows, whose true numbers are the ones `check` holds for that field. The steps the tutor asks that
`check` does not grade (the scale, the angles, each weight × value; and, until `check` knows them,
e^s, their sums, RoPE's turned vectors, x + PE, s + b, a norm's mean and root) it judges itself
(attncli.practice.session), by the same rule.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from attncli import grading
from attncli.core import Steps
from attncli.grading import backward as grading_backward
from attncli.grading import layers as stacked
from attncli.grading.report import StepReport
from attncli.layers import LayerSteps, StackSteps
from attncli.parsing.answers import Answer, Answers, Entry, LayerAnswers, Settings
from attncli.practice.own import Own, Ref, part_of
from attncli.practice.plan import Prompt, Solved
from attncli.steps import ANSWERED, BACKWARD_STEPS, BY_NAME, STREAM_STEPS, coordinates, labels, matrix, order

RECORDED = {"sum": "sums"}  # the answer field a tutor's step is written under, where it is not the step's own name
UNRECORDED = ("scale", "angles", "product")  # the tutor's own steps no homework holds
ROWS_OF_TOKENS = ("keys", "values", "turned_keys", "positioned", "angles", "mean", "root", "normed", "residual")
COLUMNS_OF_KEYS = ("dot", "scores", "biased_scores", "exp", "weights")
RIGHT, CARRIED, WRONG = "right", "carried", "wrong"
Verdict = tuple[str, tuple[str, ...], tuple[int, ...]]  # RIGHT, CARRIED or WRONG; the codes; the wrong cells
Place = tuple[int | None, str, int | None]  # (layer, field, head) of one answered step


def field_of(step: str) -> str | None:
    """The answer field a tutor's step is recorded under; None for the steps no homework holds."""
    return None if step in UNRECORDED else RECORDED.get(step, step)


@dataclass(frozen=True)
class Recorded:
    """One answered step as a homework holds it: its place, its rows' and columns' names, its cells."""

    layer: int | None
    field: str
    head: int | None
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[tuple[Entry | None, ...], ...]


def shape(solved: Solved, place: Place, own: Own) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of a recorded step's rows and columns: as attncli.parsing.answers gives them for the fields `check`
    knows, and alike (query tokens or tokens; key tokens or coordinates) for the tutor's own."""
    layer, field, head = place
    steps = part_of(solved, layer)
    problem = steps.problem
    if field in BACKWARD_STEPS:  # a weight's gradient is as high as its weight: the table's own shape
        numbers = matrix(steps, field, head)
        assert numbers is not None, field
        return labels(problem, field, *numbers.shape[::-1])
    if field in BY_NAME and field in (*ANSWERED, *STREAM_STEPS):
        return labels(problem, field, _width(solved, place, own))
    rows = problem.tokens if field in ROWS_OF_TOKENS else problem.query_tokens
    columns = problem.tokens if field in COLUMNS_OF_KEYS else coordinates(_width(solved, place, own))
    return rows, columns


def _width(solved: Solved, place: Place, own: Own) -> int:
    layer, field, head = place
    return own.width(layer, _step_of(field), head)


def _step_of(field: str) -> str:
    return next((step for step, name in RECORDED.items() if name == field), field)


class Grader:
    """`check` on the session's answers, for the steps it grades."""

    def __init__(self, solved: Solved, own: Own, settings: Settings) -> None:
        self.solved = solved
        self.own = own
        self.settings = settings
        self._grades: dict[tuple[int | None, str, int | None], bool] = {}

    def grades(self, layer: int | None, step: str, head: int | None) -> bool:
        """Whether `check` grades this step as the tutor asks it: an answer field it knows, holding the same numbers."""
        key = (layer, step, head)
        if key not in self._grades:
            self._grades[key] = self._compare(layer, step, head)
        return self._grades[key]

    def records(self, layer: int | None, step: str, head: int | None) -> bool:
        """Whether a homework holds this step under its field: one `check` grades as the tutor asks it, or one it
        does not know yet (issue 25's e^s, sums, turned vectors, x + PE, s + b, mean, root); never a field whose
        numbers `check` reads as another step's (the scores before the bias, where `check`'s scores add it)."""
        field = field_of(step)
        if field is None:
            return False
        known = field in BY_NAME and field in (*ANSWERED, *STREAM_STEPS)
        return self.grades(layer, step, head) or not known

    def _compare(self, layer: int | None, step: str, head: int | None) -> bool:
        field = field_of(step)
        if field is None or field not in BY_NAME:
            return False
        record: Steps | LayerSteps
        if isinstance(self.solved, StackSteps) and field in STREAM_STEPS:
            record = self.solved.layers[_layer(layer)]
        elif field in ANSWERED:
            record = part_of(self.solved, layer)
        elif field in BACKWARD_STEPS:
            return not isinstance(self.solved, StackSteps)  # a stack's gradients are not graded yet
        else:
            return False
        truth = matrix(record, field, head) if BY_NAME[field].place != "head" or head is not None else None
        if truth is None:
            return False
        truth = truth.reshape(truth.shape[0], -1)
        mine = [[self.own.truth((layer, step, head, r, c)) for c in range(truth.shape[1])] for r in range(len(truth))]
        finite = np.isfinite(truth)
        return bool(np.allclose(np.array(mine)[finite], truth[finite], rtol=1e-12, atol=1e-12))

    def verdict(self, prompt: Prompt, answered: Iterable[Recorded]) -> Verdict:
        """`check`'s verdict on the prompt's cells in a homework holding `answered` (the prompt's step as now given)."""
        field = field_of(prompt.step)
        assert field is not None, prompt.step
        report = self._report(prompt, list(answered), field)
        wanted = (field, prompt.head, prompt.layer)
        step = next(s for s in report.steps if (s.step, s.head, s.layer) == wanted)
        return _cells(step, prompt)

    def _report(self, prompt: Prompt, answered: list[Recorded], field: str) -> grading.Report:
        known = [r for r in answered if self.grades(r.layer, _step_of(r.field), r.head)]
        s = self.settings
        if not isinstance(self.solved, StackSteps):
            answers = _answers(known, self.solved, s)
            return grading.grade(self.solved, answers, diagnose={(field, prompt.head)})
        last = max(r.layer for r in known if r.layer is not None)
        per_layer = []
        for index, layer in enumerate(self.solved.layers[: last + 1]):
            here = [r for r in known if r.layer == index]
            streams = tuple(answer_of(r) for name in STREAM_STEPS for r in here if r.field == name)
            attention = [r for r in here if r.field not in STREAM_STEPS]
            per_layer.append(LayerAnswers(_answers(attention, layer.attention, s) if attention else None, streams))
        return stacked.grade(self.solved, per_layer, s)


def _layer(layer: int | None) -> int:
    assert layer is not None, "a stack's steps name their layer"
    return layer


def answer_of(recorded: Recorded) -> Answer:
    """A recorded step as attncli.parsing.answers reads it."""
    return Answer(recorded.field, recorded.head, recorded.rows, recorded.columns, recorded.cells)


def _answers(answered: list[Recorded], steps: Steps, settings: Settings) -> Answers:
    """The answers of one attention problem in the order of the calculation, as attncli.parsing.answers makes them."""
    placed = {(r.field, r.head): r for r in answered}
    found = tuple(answer_of(placed[key]) for key in order(steps) if key in placed)
    gradients = tuple(answer_of(placed[key]) for key in grading_backward.asked(steps) if key in placed)
    return Answers(found, settings.tolerance, settings.carry, settings.min_decimals, backward=gradients)


def _cells(step: StepReport, prompt: Prompt) -> Verdict:
    """The verdict on the prompt's own cells from the step's report."""
    cells = {(c.row, c.column): c for c in step.cells}
    statuses = [cells[(prompt.row, c)].status for c in (prompt.columns or (0,))]
    wrong = tuple(k for k, status in enumerate(statuses) if status not in (grading.RIGHT, grading.CARRIED))
    if wrong:
        return WRONG, step.diagnosis, wrong
    if step.status == grading.WRONG:  # right only from inputs rounded too early
        return WRONG, step.diagnosis, tuple(k for k, s in enumerate(statuses) if s == grading.CARRIED)
    return (CARRIED if step.status == grading.CARRIED else RIGHT), (), ()


def moved(own: Own, refs: list[Ref], seen: dict[Ref, Entry], rule_carried: float) -> bool:
    """Whether a number these cells are worked from is one `check` cannot see and the student carries off the truth
    by more than careful rounding: a scale written 0.7, an e^s a homework has no field for, an answer shown after
    a wrong first try (`seen`: the entries as `check` reads them)."""
    for ref in {read for cell in refs for read in own.inputs(cell)}:
        entry = own.kept.get(ref)
        if entry is None or entry.value is None or seen.get(ref) == entry:
            continue
        if abs(entry.value - own.truth(ref)) > rule_carried * (1 + 1e-9) + 1e-12 or not math.isfinite(entry.value):
            return True
    return False
