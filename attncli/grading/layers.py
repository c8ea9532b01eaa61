"""Grading a stack's homework layer by layer: each layer's attention by attncli.grading, its streams here.

A layer is graded as the one-layer problem it is, fed the stream the student reached it with:
the true one, or, when the student wrote the previous layer's stream in full and it is not
right, their own, so that a layer worked correctly from a wrong stream counts as carried
(right method, wrong inputs). The streams (N(X_l) placed pre, X_l + Attn placed post, and
X_{l+1}) are judged by the grader's rule: half a unit of the last decimal written, widened by
what the inputs carry in (the stream before, and the layer's output, as the student wrote
them or carried at the carry precision), propagated with attncli.grading.interval. A wrong stream is
replayed under the slips of a stack: the residual forgotten (the attention output alone
passed on) and the norm placed wrong (pre for post, or post for pre).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from attncli import layers
from attncli.core import Steps
from attncli.grading import interval, verdict
from attncli.grading.interval import Carried
from attncli.grading.report import CARRIED, MISSING, NOT_ANSWERED, RIGHT, WRONG, Cell, Report, StepReport
from attncli.grading.rule import Rule
from attncli.layers import LayerSteps, StackSteps
from attncli.parsing.answers import Answer, Answers, Entry, LayerAnswers, Settings, stream_steps
from attncli.problem import Norm
from attncli.steps import asked, order

CODES = ("residual_forgotten", "norm_misplaced")  # a stack's slips, beside attncli.grading.CODES


def grade(
    steps: StackSteps,
    answers: Sequence[LayerAnswers],
    settings: Settings,
    *,
    tolerance: float | None = None,
    carry: int | None = None,
    min_decimals: int | None = None,
    require: Sequence[str] | None = None,
    file: str = "-",
) -> Report:
    """The report on a stack's answers, layer after layer; keyword values win over `settings` (the key's or the file's).

    Each step report names its layer (`layer`, counting from 0, and the layer's name before any head's).
    """
    rule = Rule.chosen(tolerance, carry, min_decimals, settings)

    def graded(attention: Steps, given: Answers, explain: bool) -> Report:
        """A layer's attention graded as the one-layer problem it is, with this run's options; without `explain`,
        no mistake is looked for (a grading of a problem made for one file, whose replays are not kept)."""
        return verdict.grade(
            attention,
            given,
            tolerance=tolerance,
            carry=carry,
            min_decimals=min_decimals,
            require=require,
            file=file,
            diagnose=None if explain else (),
        )

    reports: list[StepReport] = []
    written: np.ndarray | None = None  # the stream the student passed on, when they wrote all of it
    stream = interval.exact(steps.stack.x)  # (S, d) X_l as the student has it
    stream_right = True  # ... and whether it was right
    for index, (truth, given) in enumerate(zip(steps.layers, answers)):
        fed = truth if written is None else layers.through(truth.layer, written)
        attention = given.attention
        found = _attention(truth, fed, attention, not stream_right, graded) if attention is not None else []
        output, output_right = _output(given, truth, found, rule)
        streams = _Streams(truth, stream, output, rule, {"x": stream_right, "z": output_right})
        judged = streams.judge(given.streams)
        if attention is not None and truth.layer.norm is not None and any(r.status == WRONG for r in found):
            moved = graded(streams.norm_moved(fed).attention, attention, False)  # only its statuses are read
            again = {(step.step, step.head): step.status for step in moved.steps}
            found = [_named(report, again) for report in found]
        normed = [report for report in judged if report.step == "normed"]  # before the attention that reads it
        later = [report for report in judged if report.step != "normed"]
        reports += [_tagged(report, index, truth.layer.label) for report in (*normed, *found, *later)]
        passed = next((report for report in judged if report.step == "stream"), None)
        stream, written = _passed_on(given, truth, rule)
        stream_right = written is None or (passed is not None and passed.status == RIGHT)
    if steps.backward is not None and any(layer.gradients or layer.attention_gradients for layer in answers):
        from attncli.grading import backward_stack  # a stack's gradients, graded after the forward pass

        found = backward_stack.grade(steps, answers, rule, lambda steps, given: graded(steps, given, True), normalise)
        reports += [_tagged(report, report.layer or 0, steps.layers[report.layer or 0].layer.label) for report in found]
    required = require if require is not None else settings.require
    return Report(file, tuple(_completed(steps, reports, required)) if required else tuple(reports))


def _completed(steps: StackSteps, reports: list[StepReport], required: Sequence[str]) -> list[StepReport]:
    """`reports` with every required step of every layer that is not answered (left out, a layer not answered at
    all, or every cell left `?`) a MISSING one, in its place: the layer's normed input, attention, residual, stream.
    (A layer's attention answered has its missing steps from attncli.grading.verdict already.) The reports on other
    steps (a stack's gradients) follow, in their order, each required one left all `?` missing."""
    found = {(report.layer, report.step, report.head): report for report in reports}
    completed: list[StepReport] = []
    placed = set()
    for index, layer in enumerate(steps.layers):
        attention, streams = layer.attention, list(stream_steps(layer))
        keys = [*((name, None) for name in streams if name == "normed"), *order(attention)]
        keys += [(name, None) for name in streams if name != "normed"]
        for name, head in keys:
            placed.add((index, name, head))
            report = found.get((index, name, head))
            wanted = name in required and (name in streams or asked(attention, name, head))
            if wanted and (report is None or report.status == NOT_ANSWERED):
                missing = StepReport(name, head, verdict.head_name(attention, head), (), (), (), MISSING, ())
                report = _tagged(missing, index, layer.layer.label)
            if report is not None:
                completed.append(report)
    others = [report for report in reports if (report.layer, report.step, report.head) not in placed]
    return completed + [
        dataclasses.replace(report, rows=(), columns=(), cells=(), status=MISSING)
        if report.step in required and report.status == NOT_ANSWERED
        else report
        for report in others
    ]


def _attention(
    truth: LayerSteps,
    fed: LayerSteps,
    given: Answers,
    inherited: bool,
    graded: Callable[[Steps, Answers, bool], Report],
) -> list[StepReport]:
    """The layer's attention against the truth, and against what the student's own stream gives (`fed`): a step
    right only from their stream is right when that stream was (their rounding), carried when it was not. Only
    the statuses of the second grading are read (a right step has no diagnosis): it looks for none."""
    report = graded(truth.attention, given, True)
    if fed is truth:
        return list(report.steps)
    own = {(step.step, step.head): step for step in graded(fed.attention, given, False).steps}
    return [
        (_carried(own[(step.step, step.head)]) if inherited else own[(step.step, step.head)])
        if _better(step, own.get((step.step, step.head)))
        else step
        for step in report.steps
    ]


def _better(step: StepReport, own: StepReport | None) -> bool:
    return step.status in (WRONG, CARRIED) and own is not None and own.status == RIGHT


def _carried(step: StepReport) -> StepReport:
    cells = tuple(dataclasses.replace(c, status=CARRIED) if c.status == RIGHT else c for c in step.cells)
    return dataclasses.replace(step, cells=cells, status=CARRIED)


def _tagged(report: StepReport, index: int, name: str) -> StepReport:
    head = name if report.head_name is None else f"{name} · {report.head_name}"
    return dataclasses.replace(report, head_name=head, layer=index)


def _output(given: LayerAnswers, truth: LayerSteps, found: list[StepReport], rule: Rule) -> tuple[Carried, bool]:
    """The layer's attention output (S, d) as the student has it: their `final` (or its head's `output`), or kept;
    and whether it was right (a kept one is)."""
    step = "final" if truth.attention.concat is not None else "output"
    answered = [] if given.attention is None else [a for a in given.attention.steps if a.step == step]
    if answered and _complete(answered[0]):
        status = next((report.status for report in found if report.step == step), RIGHT)
        return _known(answered[0], rule), status == RIGHT
    return _kept(truth.attention.output, rule), True


def _named(report: StepReport, again: dict[tuple[str, int | None], str]) -> StepReport:
    """A wrong step of the attention that is right with the layer's norm placed the other way: norm_misplaced."""
    if report.status != WRONG or again.get((report.step, report.head)) != RIGHT:
        return report
    return dataclasses.replace(report, diagnosis=(*report.diagnosis, "norm_misplaced"))


def _complete(answer: Answer) -> bool:
    """Every cell written, as a number, in the true orientation."""
    return answer.written is None and all(e is not None and e.value is not None for row in answer.cells for e in row)


def _kept(matrix: np.ndarray, rule: Rule) -> Carried:
    """A true matrix as a careful student keeps it: within half a unit of the carry's decimal."""
    return interval.known(matrix, np.full(matrix.shape, rule.carried))


def _known(answer: Answer, rule: Rule) -> Carried:
    """What a student wrote in a complete answer (`_complete`), each number standing for the one they kept."""
    entries = [[e for e in row if e is not None] for row in answer.cells]  # all of them: the answer is complete
    values = np.array([[e.value for e in row] for row in entries], dtype=np.float64)
    half = [[rule.kept(e) for e in row] for row in entries]
    return interval.known(values, np.array(half, dtype=np.float64))


def _passed_on(given: LayerAnswers, truth: LayerSteps, rule: Rule) -> tuple[Carried, np.ndarray | None]:
    """The stream the next layer reads as the student has it, and their numbers when they wrote all of it."""
    answer = next((a for a in given.streams if a.step == "stream"), None)
    if answer is None or not _complete(answer):
        return _kept(truth.output, rule), None
    known = _known(answer, rule)
    return known, known.t


class _Streams:
    """A layer's streams: the student's own (from the stream and output they have), the true ones, the slips.

    A stream is right when it follows from right inputs (the stream read, the attention output, the
    residual sum) by the rule, or lies within the rule of the truth; carried when it follows from
    wrong ones.
    """

    def __init__(self, truth: LayerSteps, stream: Carried, output: Carried, rule: Rule, right: dict) -> None:
        self.truth = truth
        self.rule = rule
        self.norm = truth.layer.norm
        self.place = None if self.norm is None else self.norm.place
        self.stream, self.output = stream, output
        self.right = dict(right)  # which inputs were right: x (the stream read), z (the output), residual
        self.true = self.chain(_kept(truth.input, rule), _kept(truth.attention.output, rule), self.place)
        self.own = self.chain(stream, output, self.place)

    def chain(self, x: Carried, z: Carried, place: str | None, residual: Carried | None = None) -> dict[str, Carried]:
        """normed, residual and stream from the stream x read, the attention output z (and a residual written)."""
        total = interval.add(x, z)
        summed = total if residual is None else residual
        out = {"residual": total, "stream": self.normed(summed) if place == "post" else total}
        if place == "pre":
            out["normed"] = self.normed(x)
        return out

    def normed(self, rows: Carried) -> Carried:
        """`rows` through the layer's norm (placed pre or post, wherever a chain places it: the layer has one)."""
        assert self.norm is not None, "a norm is placed only where the layer has one"
        return normalise(rows, self.norm)

    def judge(self, answers: Sequence[Answer]) -> list[StepReport]:
        """Each stream answered, in order: a residual sum written in full is what the student normalises after."""
        reports = []
        for answer in answers:
            report = self.report(answer)
            if answer.step == "residual" and _complete(answer):
                self.own = self.chain(self.stream, self.output, self.place, _known(answer, self.rule))
                self.right["residual"] = report.status == RIGHT
            reports.append(report)
        return reports

    def inputs_right(self, step: str) -> bool:
        needs = {"normed": ("x",), "residual": ("x", "z"), "stream": ("x", "z", "residual")}[step]
        return all(self.right.get(name, True) for name in needs)

    def report(self, answer: Answer) -> StepReport:
        rows, columns = self.truth.attention.problem.tokens, answer.columns
        if answer.written is not None:
            return StepReport(answer.step, None, None, rows, columns, (), WRONG, ())
        true, own = self.true[answer.step], self.own[answer.step]
        follows = RIGHT if self.inputs_right(answer.step) else CARRIED
        cells = []
        for i, j, entry in self.every(answer):
            expected = float(true.t[i, j])
            if entry is None:
                cells.append(Cell(i, j, None, expected, False, NOT_ANSWERED))
                continue
            status = follows if self.agrees(entry, own, i, j) else RIGHT if self.agrees(entry, true, i, j) else WRONG
            radius = float((own if status == follows else true).radius[i, j])
            cells.append(Cell(i, j, entry, expected, False, status, self.rule.own(entry), radius))
        statuses = {cell.status for cell in cells}
        status = next((s for s in (WRONG, CARRIED, RIGHT) if s in statuses), NOT_ANSWERED)
        diagnosis = self.diagnose(answer) if status == WRONG else ()
        return StepReport(answer.step, None, None, rows, columns, tuple(cells), status, diagnosis)

    def every(self, answer: Answer) -> list[tuple[int, int, Entry | None]]:
        return [(i, j, e) for i, row in enumerate(answer.cells) for j, e in enumerate(row)]

    def agrees(self, entry: Entry, num: Carried, i: int, j: int) -> bool:
        return self.rule.agrees(entry, float(num.t[i, j]), float(num.radius[i, j]), False)

    def diagnose(self, answer: Answer) -> tuple[str, ...]:
        """The slips whose replay, from the student's own numbers, gives every answered number of this stream."""
        cells = [(i, j, e) for i, j, e in self.every(answer) if e is not None]
        if answer.step == "normed" or not cells:
            return ()
        slips = {
            "residual_forgotten": self.chain(interval.exact(np.zeros_like(self.truth.input)), self.output, self.place)
        }
        if self.norm is not None and answer.step == "stream":
            slips["norm_misplaced"] = self.chain(self.stream, self.output, "post" if self.place == "pre" else "pre")
        return tuple(
            code
            for code, replay in slips.items()
            if all(self.agrees(e, replay[answer.step], i, j) for i, j, e in cells)
        )

    def norm_moved(self, fed: LayerSteps) -> LayerSteps:
        """The layer with its norm placed the other way, fed what the student read."""
        other = "post" if self.place == "pre" else "pre"
        layer, norm = self.truth.layer, self.norm
        assert norm is not None, "only a layer with a norm has it placed wrong"
        return layers.through(layer._replace(norm=norm._replace(place=other)), fed.input)


def normalise(rows: Carried, norm: Norm) -> Carried:
    """attncli.layers.normalise on carried numbers: (x − mean)/√(var + ε) or x/√(mean(x²) + ε), then gain and bias."""
    d = rows.t.shape[1]
    centred = interval.matmul(rows, interval.exact(np.eye(d) - 1 / d)) if norm.kind == "layer" else rows  # (S, d)
    mean_square = interval.times(interval.row_sums(interval.square(centred)), interval.exact(1 / d))  # (S, 1)
    root = interval.sqrt(interval.add(mean_square, interval.exact(np.full(mean_square.t.shape, norm.eps))), 0.0)
    wide = interval.Carried(
        np.broadcast_to(root.t, centred.t.shape),
        np.broadcast_to(root.g, (*centred.t.shape, root.g.shape[-1])),
        np.broadcast_to(root.e, centred.t.shape),
    )
    out = interval.quotient(centred, wide)
    if norm.gain is not None:
        out = interval.matmul(out, interval.exact(np.diag(norm.gain)))
    if norm.shift is not None:
        out = interval.add(out, interval.exact(np.broadcast_to(norm.shift, out.t.shape)))
    return out
