"""A stack's gradients (`answers: backward: layers:`): each layer's own by the rule, its attention's as one layer.

The gradients go from the last layer to the first. In each, a careful student's numbers are
followed as intervals (attncli.grading.interval), every number they write counted as kept to the
carry precision (attncli.grading.backward_replay.keep), so that the rounding a careful student
carries through the residual's two paths and the norm's backward is inside the rule's bound:

- the stream's gradient g reaching the layer: dO itself (given: exact or carried; a target's O − T
  from the last stream as carried), else what the layer after it handed on (grad_input);
- post-norm, grad_residual = the norm's backward of g at the residual sum X + Attn(X);
- the attention, graded as the one-layer problem it is (attncli.grading.backward through
  attncli.grading.verdict), its dO the gradient reaching it with how far a careful student's may be
  (attncli.problem.Backward.carried): the five slips are named inside it as in one layer; over the stream
  the student wrote (taken as exact) and, where a step is not right so, over the true one (a key's way);
- pre-norm, grad_normed = the attention's grad_x, and the norm's backward of it at X;
- grad_input = the residual's path (g, or grad_residual) + the branch's.

The norm's backward dx = (1/σ)·(dx̂ − mean(dx̂) − x̂·mean(dx̂ ∘ x̂)), dx̂ = dy ∘ gain (RMSNorm: no
mean(dx̂)), is bounded by interval arithmetic on its parts as the student has them: the rows (the
stream or residual sum: theirs when they wrote it in full, else the truth carried through the layers
before, each layer's attention output as far off as attncli.grading.replay's careful student's), x̂
and 1/σ computed from them and kept, the two row means kept, each product and difference bounded
by |a|·Δb + |b|·Δa + Δa·Δb. That bound is sound (it holds whatever the roundings were), not tight.

A gradient worked correctly from the student's own numbers (their dO, their grad_x, their rows) is
right when those numbers were, carried (↷) when they were not, as attncli.grading.layers does forward.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np

from attncli import layers
from attncli.backward import LayerGradients, layer_attention
from attncli.core import Steps
from attncli.grading import interval
from attncli.grading.backward_replay import RIGHT_WAY, flat, given, keep, minus, product, total
from attncli.grading.interval import Carried
from attncli.grading.mistakes import NO_MISTAKE
from attncli.grading.replay import Solved
from attncli.grading.report import CARRIED, NOT_ANSWERED, RIGHT, WRONG, Cell, Report, StepReport
from attncli.grading.rule import Rule
from attncli.layers import LayerSteps, StackSteps
from attncli.parsing.answers import Answer, Answers, LayerAnswers
from attncli.problem import Norm
from attncli.steps import position

B = "backward."
Graded = Callable[[Steps, Answers], Report]  # a layer's attention graded as one layer (attncli.grading.verdict)
Normalise = Callable[[Carried, Norm], Carried]  # a norm's bound forward (attncli.grading.layers.normalise, its caller)


def grade(
    steps: StackSteps, answers: Sequence[LayerAnswers], rule: Rule, graded: Graded, normalise: Normalise
) -> list[StepReport]:
    """The reports on a stack's answered gradients, in the order of the calculation, each with its layer."""
    record = steps.backward
    assert record is not None, "a stack asking for gradients"
    given_answers = [*answers, *[LayerAnswers(None, ())] * (len(steps.layers) - len(answers))]
    rows = _Rows(steps, given_answers, rule, normalise)
    true, own = rows.upstream()
    right = True
    found: list[tuple[int, StepReport]] = []
    for index in reversed(range(len(steps.layers))):
        layer = _Layer(steps.layers[index], record.layers[index], given_answers[index], rule, rows, index)
        reports, true, own, right = layer.grade(true, own, right, graded)
        found += [(index, report) for report in reports]
    tagged = [dataclasses.replace(report, layer=index) for index, report in found]
    return sorted(tagged, key=lambda report: position(report.step, report.head, report.layer))


class _Rows:
    """The rows the norms' backward reads, as a careful student has them and as this student has them."""

    def __init__(self, steps: StackSteps, answers: Sequence[LayerAnswers], rule: Rule, normalise: Normalise) -> None:
        self.steps, self.answers, self.rule = steps, answers, rule
        self.inputs: list[Carried] = []  # X_l as a careful student has it
        self.residuals: list[Carried] = []  # X_l + Attn(X_l)
        stream = given(steps.stack.x, rule.carry)
        for layer in steps.layers:
            self.inputs.append(stream)
            output = _careful_output(layer.attention, rule.carry)
            self.residuals.append(keep(total([stream, output]), rule.carry))
            norm = layer.layer.norm
            post = norm is not None and norm.place == "post"
            stream = (
                keep(flat(normalise(self.residuals[-1], norm)), rule.carry) if norm and post else self.residuals[-1]
            )
        self.output = stream  # (S, d) the last stream

    def own(self, index: int, name: str) -> Carried:
        """The stream layer `index` reads (`stream`: the layer before's, as written; index = the count of layers:
        the last stream) or its residual sum, as the student wrote it in full, else as a careful student has it."""
        if name == "stream":
            if index == 0:
                return self.inputs[0]
            careful = self.inputs[index] if index < len(self.inputs) else self.output
            answers = self.answers[index - 1].streams
        else:
            answers, careful = self.answers[index].streams, self.residuals[index]
        written = next((a for a in answers if a.step == name), None)
        return careful if written is None else _written(written, careful, self.rule)

    def upstream(self) -> tuple[Carried, Carried]:
        """dO of the last stream, as a careful student has it and as this student has it."""
        asked = self.steps.stack.backward
        assert asked is not None and self.steps.backward is not None
        if asked.loss == "target":
            assert asked.target is not None
            target = interval.exact(asked.target)
            return minus(self.output, target), minus(self.own(len(self.steps.layers), "stream"), target)
        start = given(self.steps.backward.grad_output, self.rule.carry)
        return start, start


class _Layer:
    """One layer backwards: its own gradients judged, its attention graded, what it hands the layer before."""

    def __init__(
        self, layer: LayerSteps, grads: LayerGradients, given: LayerAnswers, rule: Rule, rows: _Rows, index: int
    ) -> None:
        self.layer, self.grads, self.rule, self.rows, self.index = layer, grads, rule, rows, index
        self.given = given
        self.answered = {answer.step: answer for answer in given.gradients}
        norm = layer.layer.norm
        self.norm, self.place = norm, None if norm is None else norm.place

    def grade(
        self, true: Carried, own: Carried, right: bool, graded: Graded
    ) -> tuple[list[StepReport], Carried, Carried, bool]:
        """The layer's reports, and the stream's gradient it hands on: a careful student's, this student's, and
        whether theirs is right."""
        reports: list[StepReport] = []
        carry = self.rule.carry
        if self.place == "post":
            true_sum = self.norm_back(self.rows.residuals[self.index], true)
            own_sum = self.norm_back(self.rows.own(self.index, "residual"), own)
            report = self.judge(B + "grad_residual", true_sum, own_sum, right)
            right = _right(report, right)
            reports += [report] if report is not None else []
            true, own = keep(true_sum, carry), self.passed(B + "grad_residual", own_sum)
        attention, true_x, own_x = self.attention(true, own, right, graded)
        reports += attention
        right = right and all(r.status in (RIGHT, NOT_ANSWERED) for r in attention)
        if self.place == "pre":
            report = self.judge(B + "grad_normed", true_x, own_x, right)
            right = _right(report, right)
            reports += [report] if report is not None else []
            own_normed = self.passed(B + "grad_normed", own_x)
            true_x = self.norm_back(self.rows.inputs[self.index], keep(true_x, carry))
            own_x = self.norm_back(self.rows.own(self.index, "stream"), own_normed)
        true_input, own_input = total([true, keep(true_x, carry)]), total([own, keep(own_x, carry)])
        report = self.judge(B + "grad_input", true_input, own_input, right)
        right = _right(report, right)
        reports += [report] if report is not None else []
        return reports, keep(true_input, carry), self.passed(B + "grad_input", own_input), right

    def attention(
        self, true: Carried, own: Carried, right: bool, graded: Graded
    ) -> tuple[list[StepReport], Carried, Carried]:
        """The attention's gradients graded from this student's dO when it is right (their numbers, each within
        half a unit of its last decimal: the tightest fair bound), else against a careful student's and against
        theirs (right only from theirs: carried); its grad_x both ways."""
        exact = self.grads.attention.grad_output  # (S, d)
        truth = layer_attention(self.layer, self.grads, None, true.radius + np.abs(true.t - exact))
        stream = self.rows.own(self.index, "stream")  # the stream they read, theirs when they wrote it in full
        fed = self.layer if _same(stream, self.rows.inputs[self.index]) else layers.through(self.layer.layer, stream.t)
        same = _same(true, own) and fed is self.layer
        mine = truth if same else layer_attention(fed, self.grads, own.t, own.radius)
        true_x = _grad_x(truth, self.rule.carry)
        own_x = _grad_x(mine, self.rule.carry)
        answered = self.given.attention_gradients
        written = next((a for a in answered if (a.step, a.head) == (B + "grad_x", None)), None)
        own_x = own_x if written is None else _written(written, own_x, self.rule)
        if not answered:
            return [], true_x, own_x
        forward = self.given.attention
        asked = Answers(() if forward is None else forward.steps, self.rule.tolerance, self.rule.carry,
                        self.rule.min_decimals, (), answered)  # fmt: skip
        if right:  # their dO is right: the attention is graded from it, as the one-layer problem it then is
            return self.from_their_grad_output(mine, fed, own, asked, graded), true_x, own_x
        reports = [r for r in graded(truth, asked).steps if r.step.startswith(B)]
        if mine is not truth:
            theirs = {(r.step, r.head): r for r in graded(mine, asked).steps}
            reports = [_better(report, theirs.get((report.step, report.head)), right) for report in reports]
        return reports, true_x, own_x

    def from_their_grad_output(
        self, mine: Steps, fed: LayerSteps, own: Carried, asked: Answers, graded: Graded
    ) -> list[StepReport]:
        """The attention's gradients from the student's right dO: over the stream they wrote (`fed`), and where a
        step is not right so, over the true stream. Their stream's numbers are taken as exact in `mine`, so a
        careful student who worked the layer from the true stream (a key: the truth rounded to 4 decimals) is
        off from it by the stream's rounding, which no bound there holds; both ways are a careful student's."""
        reports = [r for r in graded(mine, asked).steps if r.step.startswith(B)]
        if fed is self.layer or all(r.status in (RIGHT, NOT_ANSWERED) for r in reports):
            return reports
        true_stream = layer_attention(self.layer, self.grads, own.t, own.radius)
        again = {(r.step, r.head): r for r in graded(true_stream, asked).steps}
        return [r if r.status == RIGHT else _right_or(r, again.get((r.step, r.head))) for r in reports]

    def norm_back(self, rows: Carried, grad: Carried) -> Carried:
        assert self.norm is not None, "a norm's backward only where the layer has one"
        return norm_backward(rows, grad, self.norm, self.rule.carry)

    def passed(self, name: str, own: Carried) -> Carried:
        """What the student hands on from gradient `name`: their numbers where they wrote them, else `own` kept."""
        answer = self.answered.get(name)
        kept = keep(own, self.rule.carry)
        return kept if answer is None else _written(answer, kept, self.rule, every=False)

    def judge(self, name: str, true: Carried, own: Carried, inputs_right: bool) -> StepReport | None:
        """Gradient `name` as answered: each cell right by the rule against a careful student's, else right (their
        inputs right) or carried (wrong) against what their own numbers give, else wrong; None: not answered."""
        answer = self.answered.get(name)
        if answer is None:
            return None
        rows, columns = answer.rows, answer.columns
        if answer.written is not None or answer.transposed:
            return StepReport(name, None, None, rows, columns, (), WRONG, ("transposed",) if answer.transposed else ())
        follows = RIGHT if inputs_right else CARRIED
        cells = []
        for i, row in enumerate(answer.cells):
            for j, entry in enumerate(row):
                expected = float(true.t[i, j])
                if entry is None:
                    cells.append(Cell(i, j, None, expected, False, NOT_ANSWERED))
                    continue
                if self.rule.agrees(entry, expected, float(true.radius[i, j])):
                    status, radius = RIGHT, float(true.radius[i, j])
                elif self.rule.agrees(entry, float(own.t[i, j]), float(own.radius[i, j])):
                    status, radius = follows, float(own.radius[i, j])
                else:
                    status, radius = WRONG, float(true.radius[i, j])
                cells.append(Cell(i, j, entry, expected, False, status, self.rule.own(entry), radius))
        statuses = {cell.status for cell in cells}
        status = next((s for s in (WRONG, CARRIED, RIGHT) if s in statuses), NOT_ANSWERED)
        return StepReport(name, None, None, rows, columns, tuple(cells), status, ())


def norm_backward(rows: Carried, grad: Carried, norm: Norm, carry: int) -> Carried:
    """The norm's backward at `rows` for dy = `grad`, bounded as a careful student works it (see the module's
    docstring): the mean, σ, x̂ and 1/σ kept, the row means kept, each product bounded."""
    d = rows.t.shape[1]
    centred = rows  # (S, d) x − mean(x), the mean kept, for LayerNorm
    if norm.kind == "layer":
        centred = keep(flat(interval.matmul(rows, interval.exact(np.eye(d) - 1 / d))), carry)
    root = keep(flat(_root(centred, norm.eps)), carry)  # (S, 1) σ, kept
    hat = keep(flat(interval.quotient(centred, _wide(root, centred.t.shape))), carry)  # (S, d) x̂
    inverse = keep(flat(interval.quotient(interval.exact(np.ones(root.t.shape)), root)), carry)  # (S, 1) 1/σ
    grad_hat = product(grad, interval.exact(norm.gain)) if norm.gain is not None else grad  # (S, d)
    means = interval.exact(np.full((d, 1), 1 / d))
    inner = minus(grad_hat, product(hat, keep(flat(interval.matmul(product(grad_hat, hat), means)), carry)))
    if norm.kind == "layer":
        inner = minus(inner, keep(flat(interval.matmul(grad_hat, means)), carry))  # (S, d)
    return product(inner, inverse)  # (S, d)


def _root(centred: Carried, eps: float) -> Carried:
    """σ = √(mean(x̄²) + ε) per row (S, 1), as attncli.grading.layers.normalise bounds it."""
    d = centred.t.shape[1]
    mean_square = interval.times(interval.row_sums(interval.square(centred)), interval.exact(1 / d))  # (S, 1)
    return interval.sqrt(interval.add(mean_square, interval.exact(np.full(mean_square.t.shape, eps))), 0.0)


def _wide(root: Carried, shape: tuple[int, ...]) -> Carried:
    return interval.Carried(
        np.broadcast_to(root.t, shape),
        np.broadcast_to(root.g, (*shape, root.g.shape[-1])),
        np.broadcast_to(root.e, shape),
    )


def _careful_output(attention: Steps, carry: int) -> Carried:
    """The attention's output (S, d) as a careful student has it (attncli.grading.replay, no mistake)."""
    whole = Solved.of(attention, carry).whole(NO_MISTAKE)
    return keep(flat(whole.computed[("final", None)]), carry)


def _grad_x(steps: Steps, carry: int) -> Carried:
    """The attention's grad_x as a careful student works it from the dO `steps` asks for (the one-layer replay)."""
    from attncli.grading.backward import truth_of  # the one-layer grading's replays, kept by the calculation

    return truth_of(steps, carry).replayed(RIGHT_WAY).computed[(B + "grad_x", None)]


def _written(answer: Answer, otherwise: Carried, rule: Rule, every: bool = True) -> Carried:
    """The student's numbers, each within what it may stand for (`Rule.kept`), where they wrote them, else
    `otherwise`; with `every`, only an answer written in full counts (else `otherwise` wholly)."""
    if answer.written is not None or answer.transposed or _shape(answer) != otherwise.t.shape[:2]:
        return otherwise
    cells = [e for row in answer.cells for e in row]
    if every and any(e is None or e.value is None for e in cells):
        return otherwise
    mask = np.array([[e is not None and e.value is not None for e in row] for row in answer.cells])
    t = np.array([[e.value if e is not None and e.value is not None else 0.0 for e in row] for row in answer.cells])
    r = np.array(
        [[rule.kept(e) if e is not None and e.value is not None else 0.0 for e in row] for row in answer.cells]
    )
    return interval.where(mask, interval.known(t, r), flat(otherwise))


def _shape(answer: Answer) -> tuple[int, int]:
    return len(answer.cells), len(answer.cells[0]) if answer.cells else 0


def _same(a: Carried, b: Carried) -> bool:
    return bool(np.array_equal(a.t, b.t) and np.array_equal(a.radius, b.radius))


def _right(report: StepReport | None, before: bool) -> bool:
    return before if report is None else before and report.status in (RIGHT, NOT_ANSWERED)


def _right_or(step: StepReport, other: StepReport | None) -> StepReport:
    """`other` when it is right, else `step`."""
    return other if other is not None and other.status == RIGHT else step


def _better(step: StepReport, own: StepReport | None, right: bool) -> StepReport:
    """A gradient wrong against a careful student's dO but right from the student's own: right when their dO was
    (their rounding), carried when it was not."""
    if step.status not in (WRONG, CARRIED) or own is None or own.status != RIGHT:
        return step
    if right:
        return own
    cells = tuple(dataclasses.replace(c, status=CARRIED) if c.status == RIGHT else c for c in own.cells)
    return dataclasses.replace(own, cells=cells, status=CARRIED)
