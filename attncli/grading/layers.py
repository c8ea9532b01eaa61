"""Grading a stack's homework layer by layer: each layer's attention by attncli.grading, its streams here.

A layer is graded as the one-layer problem it is, fed the stream the student reached it with:
the true one, or their own, so that a layer worked correctly from a wrong stream counts as carried
(right method, wrong inputs): the normalised input they wrote in full (norm placed pre), else the
previous layer's stream they wrote in full. The streams (a norm's mean and root, N(X_l) placed pre,
X_l + Attn placed post, and X_{l+1}) are judged by the grader's rule: half a unit of the last
decimal written, widened by what the inputs carry in (the stream before, the layer's output, the
norm's mean and root, as the student wrote them or carried at the carry precision), propagated with
attncli.grading.interval. A wrong stream is replayed under the slips of a stack: the residual
forgotten (the attention output alone passed on), the norm placed wrong (pre for post, or post for
pre), and the norm's own slips (attncli.grading.norms), alone or with the residual forgotten.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from attncli import core, layers
from attncli.core import Steps
from attncli.grading import interval, norms, verdict
from attncli.grading.interval import Carried
from attncli.grading.report import CARRIED, MISSING, NOT_ANSWERED, RIGHT, WRONG, Cell, Report, StepReport
from attncli.grading.rule import Rule
from attncli.layers import LayerSteps, StackSteps
from attncli.parsing.answers import Answer, Answers, Entry, LayerAnswers, Settings, before_attention, stream_steps
from attncli.problem import Norm
from attncli.steps import asked, order

CODES = ("residual_forgotten", "norm_misplaced", *norms.CODES)  # a stack's slips, beside attncli.grading.CODES
Graded = Callable[[Steps, Answers, bool, Carried | None], Report]


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

    def graded(attention: Steps, given: Answers, explain: bool, inputs: Carried | None = None) -> Report:
        """A layer's attention graded as the one-layer problem it is, with this run's options (`inputs`: the rows
        its projections multiply as a careful student has them); without `explain`, no mistake is looked for (a
        grading of a problem made for one file, whose replays are not kept)."""
        return verdict.grade(
            attention,
            given,
            tolerance=tolerance,
            carry=carry,
            min_decimals=min_decimals,
            require=require,
            file=file,
            diagnose=None if explain else (),
            inputs=inputs,
        )

    reports: list[StepReport] = []
    written: np.ndarray | None = None  # the stream the student passed on, when they wrote all of it
    stream = interval.exact(steps.stack.x)  # (S, d) X_l as the student has it
    stream_right = True  # ... and whether it was right
    for index, (truth, given) in enumerate(zip(steps.layers, answers)):
        streams = _Streams(truth, stream, rule, stream_right)
        early = streams.judge([a for a in given.streams if before_attention(truth, a.step)])
        found = _layer_attention(truth, given.attention, streams, written, graded)
        streams.attended(*_output(given, truth, found, rule))
        later = streams.judge([a for a in given.streams if not before_attention(truth, a.step)])
        reports += [_tagged(report, index, truth.layer.label) for report in (*early, *found, *later)]
        passed = next((report for report in later if report.step == "stream"), None)
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
        keys = [*((name, None) for name in streams if before_attention(layer, name)), *order(attention)]
        keys += [(name, None) for name in streams if not before_attention(layer, name)]
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


def _layer_attention(
    truth: LayerSteps, given: Answers | None, streams: _Streams, written: np.ndarray | None, graded: Graded
) -> list[StepReport]:
    """A layer's attention steps: against the truth, and against what the student's own input gives (their normed
    rows written in full, else their stream), each wrong step right with the norm placed the other way named
    norm_misplaced."""
    if given is None:
        return []
    normed = streams.written.get("normed")
    if normed is not None:  # Q, K and V multiply the student's own normalised rows
        own: Steps | None = core.compute(layers.feed(truth.layer.attention, normed.t))
        inherited = not (streams.right["x"] and streams.right.get("normed", True))
    else:
        own = None if written is None else layers.through(truth.layer, written).attention
        inherited = not streams.right["x"]
    found = _attention(truth.attention, own, given, inherited, graded, streams.read())
    if truth.layer.norm is not None and any(r.status == WRONG for r in found):
        moved = graded(streams.norm_moved(truth.input if written is None else written), given, False, None)
        again = {(step.step, step.head): step.status for step in moved.steps}  # only its statuses are read
        found = [_named(report, again) for report in found]
    return found


def _attention(
    truth: Steps, own: Steps | None, given: Answers, inherited: bool, graded: Graded, inputs: Carried | None
) -> list[StepReport]:
    """The layer's attention against the truth (its projections reading `inputs`, the rows as a careful student has
    them), and against what the student's own input gives (`own`): a step right only from their input is right when
    that input was (their rounding), carried when it was not. Only the statuses of the second grading are read (a
    right step has no diagnosis): it looks for none."""
    report = graded(truth, given, True, inputs)
    if own is None:
        return list(report.steps)
    mine = {(step.step, step.head): step for step in graded(own, given, False, None).steps}
    return [
        _own(mine[(step.step, step.head)], step, inherited) if _better(step, mine.get((step.step, step.head))) else step
        for step in report.steps
    ]


def _own(mine: StepReport, truth: StepReport, inherited: bool) -> StepReport:
    """A step right from the student's own input: each cell compared with what that input gives (`against`) and
    still showing the true value; carried when that input was wrong."""
    if len(mine.cells) == len(truth.cells):
        cells = tuple(
            dataclasses.replace(m, expected=t.expected, against=m.expected if m.against is None else m.against)
            for m, t in zip(mine.cells, truth.cells)
        )
        mine = dataclasses.replace(mine, cells=cells)
    return _carried(mine) if inherited else mine


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
    """A layer's streams: the student's own (from the stream, output and earlier streams they have), the true ones,
    the slips.

    A stream is right when it follows from right inputs (the stream read, the attention output, the
    residual sum, the norm's mean and root) by the rule, or lies within the rule of the truth; carried
    when it follows from wrong ones.
    """

    def __init__(self, truth: LayerSteps, stream: Carried, rule: Rule, stream_right: bool) -> None:
        self.truth = truth
        self.rule = rule
        self.norm = truth.layer.norm
        self.place = None if self.norm is None else self.norm.place
        self.stream = stream
        self.output = _kept(truth.attention.output, rule)  # the attention output, until the student's is known
        self.right = {"x": stream_right, "z": True}  # which inputs were right: x (the stream read), z, and each stream
        self.written: dict[str, Carried] = {}  # the streams the student wrote in full, as they have them

    def attended(self, output: Carried, right: bool) -> None:
        """The layer's attention output as the student has it, and whether it was right."""
        self.output, self.right["z"] = output, right

    def chain(
        self, x: Carried, z: Carried, written: dict[str, Carried], slip: norms.Slip = norms.NONE, **change: object
    ) -> dict[str, Carried]:
        """Every stream from the stream x read and the attention output z, each from the student's own earlier
        streams where `written` holds them; under `slip` (a norm's) and `change` (residual_forgotten: the output
        alone passed on; place: the norm placed the other way)."""
        place = change.get("place", self.place)
        total = z if change.get("forgotten") else interval.add(x, z)
        out = {"residual": total, "stream": total}
        if self.norm is None or place is None:
            return out
        rows = x if place == "pre" else written.get("residual", total)
        parts = norms.worked(rows, self.norm, self.rule.carry, written, slip)
        if place == "pre":
            return out | parts
        return out | {name: parts[name] for name in ("mean", "root") if name in parts} | {"stream": parts["normed"]}

    def true(self) -> dict[str, Carried]:
        return self.chain(_kept(self.truth.input, self.rule), _kept(self.truth.attention.output, self.rule), {})

    def own(self) -> dict[str, Carried]:
        return self.chain(self.stream, self.output, self.written)

    def read(self) -> Carried:
        """The rows the layer's projections multiply as a careful student has them: the normed stream (its mean and
        root carried in) with a norm placed pre, else the stream read."""
        return self.true()["normed"] if self.place == "pre" else _kept(self.truth.input, self.rule)

    def judge(self, answers: Sequence[Answer]) -> list[StepReport]:
        """Each stream answered, in order: one written in full is what the student works the next ones from."""
        reports = []
        for answer in answers:
            report = self.report(answer)
            if _complete(answer):
                self.written[answer.step] = _known(answer, self.rule)
                self.right[answer.step] = report.status == RIGHT
            reports.append(report)
        return reports

    def inputs_right(self, step: str) -> bool:
        """Whether what `step` is worked from was right: the stream read, the output, and the streams before it."""
        order = ("mean", "root", "normed") if self.place == "pre" else ("residual", "mean", "root")
        before = order[: order.index(step)] if step in order else order
        needs = ("x",) if step in ("mean", "root", "normed") and self.place == "pre" else ("x", "z")
        return all(self.right.get(name, True) for name in (*needs, *before))

    def report(self, answer: Answer) -> StepReport:
        rows, columns = self.truth.attention.problem.tokens, answer.columns
        if answer.written is not None:
            return StepReport(answer.step, None, None, rows, columns, (), WRONG, ())
        true, own = self.true()[answer.step], self.own()[answer.step]
        follows = RIGHT if self.inputs_right(answer.step) else CARRIED
        cells = []
        for i, j, entry in self.every(answer):
            expected = float(true.t[i, j])
            if entry is None:
                cells.append(Cell(i, j, None, expected, False, NOT_ANSWERED))
                continue
            on_own, on_truth = self.agrees(entry, own, i, j), self.agrees(entry, true, i, j)
            # Their own numbers decide (with their bound) when their inputs were right; the truth is right always.
            status = follows if on_own and (follows == RIGHT or not on_truth) else RIGHT if on_truth else WRONG
            decided = own if status == follows else true
            against = float(decided.t[i, j]) if decided is own else None
            radius = float(decided.radius[i, j])
            cells.append(Cell(i, j, entry, expected, False, status, self.rule.own(entry), radius, against))
        statuses = {cell.status for cell in cells}
        status = next((s for s in (WRONG, CARRIED, RIGHT) if s in statuses), NOT_ANSWERED)
        diagnosis = self.diagnose(answer) if status == WRONG else ()
        return StepReport(answer.step, None, None, rows, columns, tuple(cells), status, diagnosis)

    def every(self, answer: Answer) -> list[tuple[int, int, Entry | None]]:
        return [(i, j, e) for i, row in enumerate(answer.cells) for j, e in enumerate(row)]

    def agrees(self, entry: Entry, num: Carried, i: int, j: int) -> bool:
        return self.rule.agrees(entry, float(num.t[i, j]), float(num.radius[i, j]), False)

    def diagnose(self, answer: Answer) -> tuple[str, ...]:
        """The slips whose replay, from the student's own numbers, gives every answered number of this stream:
        single slips first, then the residual forgotten with one of the norm's."""
        cells = [(i, j, e) for i, j, e in self.every(answer) if e is not None]
        if not cells:
            return ()
        for candidates in (self.singles(), self.pairs()):
            found = [
                code
                for codes, replay in candidates
                if answer.step in replay and all(self.agrees(e, replay[answer.step], i, j) for i, j, e in cells)
                for code in codes
            ]
            if found:
                return tuple(code for code in CODES if code in found)
        return ()

    def singles(self) -> list[tuple[tuple[str, ...], dict[str, Carried]]]:
        """Each slip of a stack replayed from the student's own numbers: (its code, every stream it gives)."""
        x, z, written = self.stream, self.output, self.written
        forgotten: tuple[str, ...] = ("residual_forgotten",)
        found = [(forgotten, self.chain(interval.exact(np.zeros_like(x.t)), z, written))]
        if self.norm is None:
            return found
        other = "post" if self.place == "pre" else "pre"
        found.append((("norm_misplaced",), {"stream": self.chain(x, z, written, place=other)["stream"]}))
        found += [((slip.code,), self.chain(x, z, written, slip)) for slip in norms.slips(self.norm)]
        return found

    def pairs(self) -> list[tuple[tuple[str, ...], dict[str, Carried]]]:
        """The residual forgotten and a slip of the norm after it (placed post) in one stream."""
        if self.norm is None or self.place != "post":
            return []
        zero = interval.exact(np.zeros_like(self.stream.t))
        return [
            (("residual_forgotten", slip.code), self.chain(zero, self.output, self.written, slip, forgotten=True))
            for slip in norms.slips(self.norm)
        ]

    def norm_moved(self, read: np.ndarray) -> Steps:
        """The layer's attention with its norm placed the other way, fed the stream the student read."""
        other = "post" if self.place == "pre" else "pre"
        layer, norm = self.truth.layer, self.norm
        assert norm is not None, "only a layer with a norm has it placed wrong"
        return layers.through(layer._replace(norm=norm._replace(place=other)), read).attention


def normalise(rows: Carried, norm: Norm) -> Carried:
    """attncli.layers.normalise on carried numbers, its mean and root not rounded (a stack's backward replay)."""
    return norms.worked(rows, norm, None)["normed"]
