"""The verdict on a file's answers: which answered cells are right, which step first goes wrong, and why.

Each answered cell is judged by the rounding rule (attncli.grading.rule) against the true value
and, where it is not right, against what the student's own earlier numbers give (error carried
forward, attncli.grading.replay), so a correct softmax of wrong scores counts as "right method,
wrong inputs". A wrong step is diagnosed by attncli.grading.diagnose. Pure functions of the
calculation and the answers: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import replace

from attncli.core import Steps
from attncli.grading.diagnose import Diagnosis
from attncli.grading.interval import Carried
from attncli.grading.mistakes import NO_MISTAKE, ordered
from attncli.grading.online import Online
from attncli.grading.replay import Listed, Replays, StepReplays
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
from attncli.grading.rule import Rule
from attncli.parsing.answers import Answer, Answers
from attncli.steps import TILE_STEPS, Key, asked, depends, order, position


def grade(
    steps: Steps,
    answers: Answers,
    *,
    tolerance: float | None = None,
    carry: int | None = None,
    min_decimals: int | None = None,
    require: Sequence[str] | None = None,
    file: str = "-",
    diagnose: Collection[Key] | None = None,
    inputs: Carried | None = None,
) -> Report:
    """The report on `answers` to the problem whose calculation is `steps`.

    Keyword values (from the command line) win over the file's own `tolerance:`, `carry:`, `min_decimals:`
    and `require:`. `diagnose` names the (step, head) whose mistakes are looked for (default: every
    step's); the tutor asks about one step, and the search is most of the cost of grading. `inputs`: the rows
    every projection multiplies as a careful student has them (a stacked layer's normalised stream).
    """
    rule = Rule.chosen(tolerance, carry, min_decimals, answers)
    # a grading that looks for no mistake is of a problem made for one file (grading.layers'): not kept for the next
    kept = diagnose is None or bool(diagnose)
    answered = sorted(as_before(steps, answers.steps), key=lambda a: position(a.step, a.head))
    graded = [a for a in answered if a.written is None and a.step not in TILE_STEPS]
    replays = Replays(steps, graded, rule, kept, inputs)
    online = Online(steps, replays, answers.steps, rule)  # the tiles' running values (attncli.grading.online)
    reports: dict[Key, StepReport] = {}  # by the step as the file names it
    coarse_steps: dict[Key, bool] = {}
    for answer in answered:
        key = (answer.called or answer.step, answer.head)
        upstream = [dep for dep in depends((answer.step, answer.head), len(steps.heads)) if dep in reports]
        wrong = any(reports[dep].status in (WRONG, CARRIED) for dep in upstream)
        coarse = any(coarse_steps[dep] for dep in upstream)
        explain = diagnose is None or key in diagnose
        judges = online.judges(answer) if answer.step in TILE_STEPS else None
        reports[key] = _Grader(steps, replays, rule, answer, judges).report(wrong, coarse, explain)
        coarse_steps[key] = _coarse(reports[key], rule.carry)
    required = require if require is not None else answers.require
    for key in _required(steps, required):
        if key not in reports or reports[key].status == NOT_ANSWERED:  # left out, or every cell left `?`
            reports[key] = StepReport(key[0], key[1], head_name(steps, key[1]), (), (), (), MISSING, ())
    found = tuple(reports[key] for key in order(steps) if key in reports)
    if answers.backward or (steps.backward is not None and any(name.startswith("backward.") for name in required)):
        from attncli.grading import backward  # the gradients, graded after the steps they are worked from

        found += tuple(backward.grade(steps, answers.backward, rule, reports, replays, require=required,
                                      diagnose=diagnose))  # fmt: skip
    return Report(file, found)


def as_before(steps: Steps, answers: Sequence[Answer]) -> list[Answer]:
    """The answers as graded: a head of a problem with a bias whose `scores` are answered without `biased_scores`
    beside them wrote what the softmax reads, s + b, as every file did before the two were told apart; those are
    graded as its biased scores, and reported as the file named them."""
    if steps.problem.bias is None:
        return list(answers)
    biased = {a.head for a in answers if a.step == "biased_scores"}
    return [
        replace(a, step="biased_scores", called="scores") if a.step == "scores" and a.head not in biased else a
        for a in answers
    ]


def _coarse(report: StepReport, carry: int) -> bool:
    """Whether a step holds a number written with fewer decimals than the carry precision."""
    return any(c.entry is not None and c.entry.decimals is not None and c.entry.decimals < carry for c in report.cells)


def head_name(steps: Steps, head: int | None) -> str | None:
    return steps.heads[head].spec.label if head is not None and len(steps.heads) > 1 else None


def _required(steps: Steps, names: Sequence[str]) -> list[Key]:
    """The steps `names` asks for that this problem has a student compute (every head's; no dot for given scores,
    no lone concat, no queries the problem gives)."""
    return [(step, head) for step, head in order(steps) if step in names and asked(steps, step, head)]


class _Grader:
    """One answered step: its cells, its status and, when it is wrong, what explains it."""

    def __init__(
        self, steps: Steps, replays: Replays, rule: Rule, answer: Answer, judges: tuple[StepReplays, Diagnosis] | None
    ) -> None:
        """`judges`: the step's references and diagnosis when they are not the forward replays' (a tile's)."""
        self.steps = steps
        self.rule = rule
        self.answer = answer
        self.view = StepReplays(replays, (answer.step, answer.head)) if judges is None else judges[0]
        self.diagnosis = Diagnosis(steps, self.view, rule, answer) if judges is None else judges[1]

    def report(self, upstream_wrong: bool, upstream_coarse: bool, explain: bool = True) -> StepReport:
        """The step's report; `upstream_wrong`: an earlier step it uses is wrong or carried; `upstream_coarse`:
        one has numbers with fewer decimals than the carry precision; without `explain`, a wrong step's
        diagnosis is not looked for."""
        answer = self.answer
        name = head_name(self.steps, answer.head)
        called = answer.called or answer.step
        if answer.written is not None:
            shaped = self.diagnosis.shaped()
            return StepReport(called, answer.head, name, answer.rows, answer.columns, (), WRONG, shaped)
        cells = self.cells()
        triples = [(c.row, c.column, c.entry) for c in cells if c.entry is not None]
        statuses = {cell.status for cell in cells} - {NOT_ANSWERED}

        def step(status: str, diagnosis: tuple[str, ...] = ()) -> StepReport:
            return StepReport(called, answer.head, name, answer.rows, answer.columns, tuple(cells), status, diagnosis)

        if not statuses:
            return step(NOT_ANSWERED)
        if answer.transposed:
            cells = [replace(c, status=WRONG) if c.entry is not None else c for c in cells]
            return step(WRONG, ordered(["transposed", *(self.diagnosis.diagnose(triples, True) if explain else ())]))
        if statuses == {RIGHT}:
            return step(RIGHT)
        if statuses <= {RIGHT, CARRIED}:
            if upstream_wrong:
                return step(CARRIED)
            if upstream_coarse:
                return step(WRONG, ("rounded_early",))  # right only from inputs rounded to fewer decimals
            cells = [replace(c, status=RIGHT) if c.status == CARRIED else c for c in cells]
            return step(RIGHT)  # right from the student's own right inputs, as precise as the carry
        return step(WRONG, self.diagnosis.diagnose(triples, transposed=False) if explain else ())

    def cells(self) -> list[Cell]:
        """Every answered cell and every unanswered one the mask lets through, judged against the truth and, only
        where it is not right, against the student's own inputs."""
        view = self.view
        t, r, excluded = view.listed(view.truth)
        own: Listed | None = None
        rule = self.rule
        fixed = rule.tolerance is not None
        cells = []
        for i, row in enumerate(self.answer.cells):
            values, radii, out = t[i], r[i], excluded[i]
            for j, entry in enumerate(row):
                if entry is None:
                    if out[j]:
                        continue
                    status, half = NOT_ANSWERED, 0.0
                else:
                    if rule.too_few(entry, values[j]):
                        status = TOO_FEW_DECIMALS
                    elif rule.agrees(entry, values[j], radii[j], out[j]):
                        status = RIGHT
                    else:
                        own = own or view.listed(view.reference(NO_MISTAKE, True))
                        status = CARRIED if rule.agrees(entry, own[0][i][j], own[1][i][j], own[2][i][j]) else WRONG
                    half = rule.own(entry)
                radius, against = radii[j], None
                if status == CARRIED and own is not None:  # decided by the student's own inputs: their bound
                    radius, against = own[1][i][j], own[0][i][j]
                carried_in = 0.0 if fixed or not math.isfinite(radius) else radius
                cells.append(Cell(i, j, entry, values[j], out[j], status, half, carried_in, against))
        return cells
