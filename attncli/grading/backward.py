"""The verdict on a file's gradients (`answers: backward:`): each cell by the rounding rule, each step carried or named.

The backward pass is graded as the forward one is (attncli.grading.verdict), by the same rule
(attncli.grading.rule): a number is right within half a unit of its last written decimal, widened
by what a careful student's carried numbers bring in (attncli.grading.backward_replay); a step
worked correctly from the student's own wrong numbers, forward or backward, is carried (↷); a wrong
step is named by the classic slips of the backward pass whose replay reproduces every answered cell
of it (CODES, beside attncli.grading.CODES). Pure functions of the calculation and the answers.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import ClassVar

import numpy as np

from attncli.core import Steps
from attncli.grading import interval
from attncli.grading.backward_replay import RIGHT_WAY, Replayed, Slip, forward_numbers, replay, slips
from attncli.grading.interval import Carried
from attncli.grading.mistakes import NO_MISTAKE
from attncli.grading.replay import Replays, Solved
from attncli.grading.report import CARRIED, MISSING, NOT_ANSWERED, RIGHT, TOO_FEW_DECIMALS, WRONG, Cell, StepReport
from attncli.grading.rule import Rule
from attncli.parsing.answers import Answer, Entry
from attncli.steps import BACKWARD_HEAD, BACKWARD_KV, BY_NAME, CALCULATION, HEAD, Key, position, present

CODES = (
    "jacobian_diagonal_only",
    "backward_scale_forgotten",
    "grad_values_not_transposed",
    "row_term_wrong_axis",
    "gqa_not_summed",
)  # the backward pass's slips, beside attncli.grading.CODES (and a shape's: transposed, too_few_decimals)
B = "backward."
Reference = tuple[np.ndarray, np.ndarray, np.ndarray]  # values, radii, excluded
Triple = tuple[int, int, Entry]  # an answered cell: row, column, what was written


def asked(steps: Steps) -> list[Key]:
    """The gradients a student computes, in order (templates, keys, `require:`): dO for a target, d(concat) and
    dW_O through W_O, each head's dV, dP, D, dS, d(q·k) (unless its scale is 1), dQ̃ and dK̃ (RoPE), dQ, dK, its
    dW; each kv head's sums, the sums of a field several heads read, the bias's, dX."""
    problem, record = steps.problem, steps.backward
    if record is None:
        return []
    found: list[Key] = []
    if problem.backward is not None and problem.backward.loss == "target":
        found.append((B + "grad_output", None))
    if problem.w_o is not None:
        found += [(B + "grad_concat", None), (B + "grad_w_o", None)]
    copies = {B + "grad_output", B + "grad_bias"}  # a head's dO is its columns of d(concat), its bias's its dS
    for h, head in enumerate(steps.heads):
        unit = head.queries is not None and math.isclose(head.spec.score.scale, 1.0)
        for step in CALCULATION:
            name = step.name
            if step.place == BACKWARD_HEAD and name not in copies and present(steps, name, h):
                found += [] if unit and name == B + "grad_dot" else [(name, h)]
    found += [(step.name, g) for g in range(len(record.kv_heads)) for step in CALCULATION
              if step.place == BACKWARD_KV and present(steps, step.name, g)]  # fmt: skip
    found += [(B + f"grad_{name}", None) for name, _ in problem.shared]
    found += [(name, None) for name in (B + "grad_bias", B + "grad_x", B + "grad_x_query") if present(steps, name)]
    return sorted(found, key=lambda key: position(*key))


def upstream(steps: Steps, key: Key) -> set[Key]:
    """Every step, forward or backward, whose numbers flow into gradient `key` (transitively)."""
    found: set[Key] = set()
    waiting = [key]
    while waiting:
        for need in _needs(steps, waiting.pop()):
            if need not in found:
                found.add(need)
                waiting.append(need)
    return found


def _needs(steps: Steps, key: Key) -> list[Key]:
    """The steps `key` is computed from directly."""
    name, head = key
    heads = range(len(steps.heads))
    problem, step = steps.problem, BY_NAME[name]
    if name == B + "grad_output":
        if head is not None:
            return [(B + "grad_concat", None), (B + "grad_output", None)]
        target = problem.backward is not None and problem.backward.loss == "target"
        return [("final", None)] if target else []
    if step.place == BACKWARD_KV:
        assert steps.backward is not None and head is not None
        return [(B + name.rpartition(".")[2], h) for h in steps.backward.kv_heads[head].heads]
    if step.place == BACKWARD_HEAD and head is None:  # a sum over the heads
        return [(B + "grad_scores" if name == B + "grad_bias" else name, h) for h in heads]
    found: list[Key] = []
    for need in step.needs:
        place = BY_NAME[need].place
        if place in (HEAD, BACKWARD_HEAD):
            found += [(need, head)] if head is not None else [(need, h) for h in heads]
        else:
            found.append((need, None))
    return found


class _Truth:
    """A problem's replays from the problem alone (the truth, each slip), worked out once however many files it
    grades (kept by the calculation itself, as attncli.grading.replay.Solved)."""

    KEPT = 8
    cache: ClassVar[dict[tuple[int, int], _Truth]] = {}

    def __init__(self, steps: Steps, carry: int) -> None:
        self.steps, self.carry = steps, carry
        solved = Solved.of(steps, carry)
        whole = solved.whole(NO_MISTAKE)
        self.forward = forward_numbers(steps, whole.passed, whole.computed[("final", None)], carry)
        self.replays: dict[Slip, Replayed] = {}
        self.slips = slips(steps)

    @classmethod
    def of(cls, steps: Steps, carry: int) -> _Truth:
        found = cls.cache.get((id(steps), carry))
        if found is None or found.steps is not steps:
            found = cls.cache[(id(steps), carry)] = cls(steps, carry)
            while len(cls.cache) > cls.KEPT:
                del cls.cache[next(iter(cls.cache))]
        return found

    def replayed(self, slip: Slip) -> Replayed:
        if slip not in self.replays:
            self.replays[slip] = replay(self.steps, self.forward, {}, self.carry, slip)
        return self.replays[slip]


def truth_of(steps: Steps, carry: int) -> _Truth:
    """The replays of `steps` from the problem alone (a stack's layers read their grad_x: grading.backward_stack)."""
    return _Truth.of(steps, carry)


class _Judge:
    """One file's gradients: the replays from the problem alone and from the student's own numbers."""

    def __init__(self, steps: Steps, answers: Sequence[Answer], rule: Rule, forward: Replays) -> None:
        self.steps, self.rule = steps, rule
        self.truth = _Truth.of(steps, rule.carry)
        self.student = {(a.step, a.head): _numbers(a, rule) for a in answers if a.written is None}
        self.forward = forward
        self.own: dict[Slip, Replayed] = {}

    def reference(self, slip: Slip, own: bool, key: Key) -> Reference | None:
        """Step `key` under `slip`, from the problem alone or (`own`) the student's numbers; None where the slip
        gives nothing for it."""
        replayed = self._own(slip) if own else self.truth.replayed(slip)
        num = replayed.computed.get(key)
        return None if num is None else (num.t, num.radius, replayed.excluded[key])

    def _own(self, slip: Slip) -> Replayed:
        if slip not in self.own:
            self.own[slip] = replay(self.steps, self._own_forward, self.student, self.rule.carry, slip)
        return self.own[slip]

    @property
    def _own_forward(self) -> dict[Key, Carried]:
        """The forward numbers as the student handed them on: theirs where written, else carried."""
        found = self.__dict__.get("_forward")
        if found is None:
            solved = self.forward.solved
            last = len(solved.stages) - 1
            ran = solved.run(NO_MISTAKE, last, self.forward.given, self.forward.passes)
            final = ran.computed[("final", None)]
            mine = self.forward.given.get(("final", None))
            if mine is not None and mine.t.shape == final.t.shape:  # their own final output where they wrote it
                answered = ~np.isnan(mine.t)
                final = interval.where(
                    answered, interval.known(np.nan_to_num(mine.t), mine.e), interval.known(final.t, final.radius)
                )
            found = self.__dict__["_forward"] = forward_numbers(self.steps, ran.passed, final, self.rule.carry)
        return found


def _numbers(answer: Answer, rule: Rule) -> Carried:
    """The student's gradients as a matrix: NaN where not answered, 0 for a masked mark (no gradient reaches it),
    each known up to how far it may be from the number they kept (`Rule.kept`)."""
    t = [[math.nan if e is None else 0.0 if e.value is None else e.value for e in row] for row in answer.cells]
    r = [[rule.kept(e) if e is not None else 0.0 for e in row] for row in answer.cells]
    return interval.known(np.array(t, dtype=np.float64), np.array(r, dtype=np.float64))


def grade(
    steps: Steps,
    answers: Sequence[Answer],
    rule: Rule,
    forward: Mapping[Key, StepReport],
    replays: Replays,
    *,
    require: Sequence[str] = (),
    diagnose: Collection[Key] | None = None,
) -> list[StepReport]:
    """The reports on the answered gradients, in order; `forward`: the forward steps' reports (a gradient
    worked from a wrong or carried one is carried); `require`: steps that must be answered (missing: MISSING);
    `diagnose`: the steps whose slips are looked for (default: every one)."""
    judge = _Judge(steps, answers, rule, replays)
    reports: dict[Key, StepReport] = {}
    for answer in answers:
        key = (answer.step, answer.head)
        before = [found for need in upstream(steps, key) if (found := reports.get(need) or forward.get(need))]
        wrong = any(report.status in (WRONG, CARRIED) for report in before)
        coarse = any(_coarse(report, rule.carry) for report in before)
        explain = diagnose is None or key in diagnose
        reports[key] = _Step(judge, answer).report(wrong, coarse, explain)
    for key in asked(steps):
        if key[0] in require and (key not in reports or reports[key].status == NOT_ANSWERED):  # or all `?`
            reports[key] = StepReport(key[0], key[1], _head_name(steps, key), (), (), (), MISSING, ())
    return [reports[key] for key in sorted(reports, key=lambda key: position(*key))]


def _coarse(report: StepReport, carry: int) -> bool:
    """Whether a step holds a number written with fewer decimals than the carry precision."""
    return any(c.entry is not None and c.entry.decimals is not None and c.entry.decimals < carry for c in report.cells)


def _head_name(steps: Steps, key: Key) -> str | None:
    """The head (or kv head) a gradient belongs to, by name, when the problem has several."""
    name, head = key
    if head is None or len(steps.heads) == 1:
        return None
    if BY_NAME[name].place == BACKWARD_KV:
        return steps.problem.kv_label(head)
    return steps.heads[head].spec.label


class _Step:
    """One answered gradient: its cells, its status and, when it is wrong, the slips that explain it."""

    def __init__(self, judge: _Judge, answer: Answer) -> None:
        self.judge, self.answer, self.rule = judge, answer, judge.rule
        self.key: Key = (answer.step, answer.head)
        truth = judge.reference(RIGHT_WAY, False, self.key)
        assert truth is not None, self.key
        self.truth = truth

    def report(self, upstream_wrong: bool, upstream_coarse: bool, explain: bool) -> StepReport:
        answer, judge = self.answer, self.judge

        def step(status: str, diagnosis: Sequence[str] = (), cells: Sequence[Cell] = ()) -> StepReport:
            name = _head_name(judge.steps, self.key)
            return StepReport(
                answer.step, answer.head, name, answer.rows, answer.columns, tuple(cells), status, tuple(diagnosis)
            )

        if answer.written is not None:
            return step(WRONG, self.shaped() if explain else ())
        cells = self.cells()
        statuses = {cell.status for cell in cells} - {NOT_ANSWERED}
        triples = [(c.row, c.column, c.entry) for c in cells if c.entry is not None]
        if not statuses:
            return step(NOT_ANSWERED, cells=cells)
        if answer.transposed:
            cells = [replace(c, status=WRONG) if c.entry is not None else c for c in cells]
            return step(WRONG, ("transposed",), cells)
        if statuses == {RIGHT}:
            return step(RIGHT, cells=cells)
        if statuses <= {RIGHT, CARRIED}:
            if upstream_wrong:
                return step(CARRIED, cells=cells)
            if upstream_coarse:
                return step(WRONG, ("rounded_early",), cells)  # right only from inputs rounded to fewer decimals
            return step(RIGHT, cells=[replace(c, status=RIGHT) if c.status == CARRIED else c for c in cells])
        return step(WRONG, self.diagnose(triples) if explain else (), cells)

    def cells(self) -> list[Cell]:
        """Every answered cell and every unanswered one the mask lets through, judged against the truth and, where
        it is not right, against the student's own numbers."""
        t, r, out = self.truth
        own = None
        rule = self.rule
        fixed = rule.tolerance is not None
        cells = []
        for i, row in enumerate(self.answer.cells):
            for j, entry in enumerate(row):
                value, radius, excluded = float(t[i, j]), float(r[i, j]), bool(out[i, j])
                if entry is None:
                    if not excluded:
                        cells.append(Cell(i, j, None, value, excluded, NOT_ANSWERED))
                    continue
                if rule.min_decimals is not None and entry.decimals is not None and entry.decimals < rule.min_decimals:
                    status = TOO_FEW_DECIMALS
                elif rule.agrees(entry, value, radius, excluded):
                    status = RIGHT
                else:
                    own = own or self.judge.reference(RIGHT_WAY, True, self.key)
                    status = CARRIED if own is not None and self._agrees(entry, own, i, j) else WRONG
                carried_in = 0.0 if fixed or not math.isfinite(radius) else radius
                cells.append(Cell(i, j, entry, value, excluded, status, rule.own(entry), carried_in))
        return cells

    def _agrees(self, entry: Entry, ref: Reference, i: int, j: int) -> bool:
        t, r, out = ref
        if t.shape != self.truth[0].shape or math.isnan(t[i, j]):
            return False
        return self.rule.agrees(entry, float(t[i, j]), float(r[i, j]), bool(out[i, j]))

    def fits(self, triples: list[Triple], ref: Reference | None) -> bool:
        """Whether `ref` gives every answered number (a cell it leaves undefined must be right)."""
        if ref is None or ref[0].shape != self.truth[0].shape:
            return False
        for i, j, entry in triples:
            source = self.truth if math.isnan(ref[0][i, j]) else ref
            if not self._agrees(entry, source, i, j):
                return False
        return True

    def diagnose(self, triples: list[Triple]) -> tuple[str, ...]:
        """Every slip whose replay, from the problem alone or from the student's own numbers, gives every answered
        number of the step where the slip-free replay of the same numbers does not."""
        judge = self.judge
        found = ["too_few_decimals"] if any(self._few(entry) for _, _, entry in triples) else []
        for own in (False, True):
            clean = judge.reference(RIGHT_WAY, own, self.key)
            if clean is None or self.fits(triples, clean):
                continue
            for slip in judge.truth.slips:
                if not set(slip.codes) <= set(found) and self.fits(triples, judge.reference(slip, own, self.key)):
                    found += slip.codes
            square = self.truth[0].shape[0] == self.truth[0].shape[1]
            if "transposed" not in found and square and self.fits(triples, _transposed(clean)):
                found.append("transposed")
        return _ordered(found)

    def _few(self, entry: Entry) -> bool:
        fewest = self.rule.min_decimals
        return fewest is not None and entry.decimals is not None and entry.decimals < fewest

    def shaped(self) -> tuple[str, ...]:
        """A step written in a shape that fits neither way: the row term summed over the queries (a number per key)."""
        written = self.answer.written or ()
        numbers = [entry for row in written for entry in row]
        if self.answer.step != B + "row_term" or not numbers or any(e is None or e.value is None for e in numbers):
            return ()
        for own in (False, True):
            ref = self.judge.reference(Slip(("row_term_wrong_axis",), columns=True), own, self.key)
            if ref is None or ref[0].size != len(numbers):
                continue
            t, r, _ = (part.ravel() for part in ref)
            if all(e is not None and self.rule.agrees(e, float(t[k]), float(r[k])) for k, e in enumerate(numbers)):
                return ("row_term_wrong_axis",)
        return ()


def _transposed(ref: Reference) -> Reference:
    return ref[0].T, ref[1].T, ref[2].T


def _ordered(codes: Sequence[str]) -> tuple[str, ...]:
    """`codes` once each: the slips first in the order of CODES, then a shape's."""
    return tuple(code for code in (*CODES, "transposed", "rounded_early", "too_few_decimals") if code in codes)
