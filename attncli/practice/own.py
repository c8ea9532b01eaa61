"""The student's own numbers: every cell as they carry it, and what each step comes to from them.

Once an answer is accepted (right, carried, or shown after a second miss) it is the number the student
carries on with: every later step is worked from it, judged from it and shown worked out with it
(`2.8284 × 0.7 = 1.9799`, never a false equation). A cell is a `Ref` (layer, step, head, row,
column). Its value is the student's entry when they gave one, else what its step's formula makes of
the cells before it (a step not asked, as RoPE's angles at level 2, is worked exactly from the
student's numbers), else the problem's own number (a given q, a W). How far a step's value may move
is what the rounding of the entries it reads carries in: each entry read moves by what the rounding
rule says the student may have kept (attncli.grading.rule.Rule.kept), each constant looked up in a
table (a PE, a bias b) by half a unit of the carry's decimal, and the step's value is evaluated
again with each of them moved, one at a time; the widths add up.

Pure: the solved record (attncli.core.Steps or attncli.layers.StackSteps), the rule, the entries.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from attncli import core, positions
from attncli.core import HeadSteps, Steps
from attncli.grading.rule import Rule
from attncli.layers import LayerSteps, StackSteps, norm_parts
from attncli.parsing.answers import Entry
from attncli.practice.plan import Prompt, Solved, owner, scaled
from attncli.problem import Projection

Ref = tuple[int | None, str, int | None, int, int]  # (layer, step, head, row, column) of one number
LOOKED_UP = 4  # decimals of the tables a student reads constants from (PE, a bias b): the tutor's intro shows 4


def cells(prompt: Prompt, solved: Solved) -> list[Ref]:
    """The numbers a prompt asks for, in the order the answer gives them."""
    if prompt.step == "product":
        assert prompt.key is not None, "a product names its key"
        width = part_of(solved, prompt.layer).heads[_head(prompt.head)].values.shape[1]
        return [(prompt.layer, "product", prompt.head, prompt.row, prompt.key * width + c) for c in prompt.columns]
    return [(prompt.layer, prompt.step, prompt.head, prompt.row, c) for c in (prompt.columns or (0,))]


def part_of(solved: Solved, layer: int | None) -> Steps:
    """The attention problem a cell of `layer` belongs to: a stack's layer's, or the problem's."""
    if isinstance(solved, StackSteps):
        assert layer is not None, "a stack's cells name their layer"
        return solved.layers[layer].attention
    return solved


def _head(h: int | None) -> int:
    assert h is not None, "this step belongs to a head"
    return h


@dataclass
class _Reading:
    """One evaluation of a step's formula: the cells it moved (`moved`), and every entry and constant it read
    with how far each may move (`read`)."""

    moved: dict[Ref, float] = field(default_factory=dict)
    read: dict[Ref, float] = field(default_factory=dict)


class Own:
    """The cells a student carries (`kept`), and every step's value worked from them."""

    def __init__(self, solved: Solved, rule: Rule) -> None:
        self.solved = solved
        self.rule = rule
        self.kept: dict[Ref, Entry] = {}
        self._formulas: dict[str, Callable[[_Reading, Ref], float]] = {
            name: getattr(self, f"_{name}") for name in FORMULAS
        }

    # What the student carries

    def keep(self, refs: list[Ref], entries: tuple[Entry, ...]) -> None:
        """The numbers the student carries on with for these cells."""
        for ref, entry in zip(refs, entries):
            self.kept[ref] = entry

    def value(self, ref: Ref) -> float:
        """The number the student has for `ref`: theirs, else worked from theirs, else the problem's."""
        return self._read(_Reading(), ref)

    def expected(self, refs: list[Ref]) -> list[tuple[float, float]]:
        """What each cell comes to from the student's own numbers, and how far their rounding may move it."""
        found = []
        for ref in refs:
            reading = _Reading()
            value = self._derive(reading, ref)
            found.append((value, self._width(ref, value, reading.read)))
        return found

    def projection_input(self, ref: Ref, a: int) -> float:
        """Coordinate `a` of the x a projection's row reads, as the student has it."""
        layer, step, h, row, _ = ref
        steps = part_of(self.solved, layer)
        operand = getattr(steps.heads[_head(h)].spec, step)
        assert isinstance(operand, Projection), step
        return self._projection_input(_Reading(), steps, layer, _token_row(steps, step, row), row, a, operand)

    def norm_input(self, layer: int | None, row: int, column: int) -> float:
        """Coordinate `column` of the row a layer's norm reads (its input placed pre, its residual sum post)."""
        return self._norm_input(_Reading(), layer, row, column)

    def attention_input(self, layer: int | None, row: int, column: int) -> float:
        """Coordinate `column` of the row a layer's attention reads (normed placed pre, else the stream), as the
        student has it."""
        return self._attention_input(_Reading(), layer, row, column, None)

    def stream_in(self, layer: int | None, row: int, column: int) -> float:
        """Coordinate `column` of the residual stream reaching `layer`, as the student has it."""
        return self._stream_in(_Reading(), layer, row, column)

    def inputs(self, ref: Ref) -> dict[Ref, float]:
        """The entries and constants a cell's formula reads, with how far each may move."""
        reading = _Reading()
        self._derive(reading, ref)
        return reading.read

    def _width(self, ref: Ref, value: float, read: dict[Ref, float]) -> float:
        """How far `ref`'s value moves when each number it reads moves by its own width, one at a time, added up."""
        total = 0.0
        for moved, width in read.items():
            if width <= 0 or not math.isfinite(width):
                continue
            entry = self.kept.get(moved)
            base = entry.value if entry is not None and entry.value is not None else self._constant_value(moved)
            shifts = [self._derive(_Reading({moved: base + sign * width}), ref) for sign in (1.0, -1.0)]
            total += max(abs(shifted - value) for shifted in shifts)
        return total if math.isfinite(total) else math.inf

    def _read(self, reading: _Reading, ref: Ref) -> float:
        """A cell as a formula reads it: moved, the student's entry, or worked out."""
        if ref in reading.moved:
            return reading.moved[ref]
        entry = self.kept.get(ref)
        if entry is not None and entry.value is not None:
            reading.read[ref] = self.rule.kept(entry)
            return entry.value
        return self._derive(reading, ref)

    def _derive(self, reading: _Reading, ref: Ref) -> float:
        formula = self._formulas.get(ref[1])
        if formula is None:  # a step `check` grades with no formula here (the tiles', the gradients'): the truth
            return self.truth(ref)
        return _safely(lambda: formula(reading, ref))

    # The true numbers

    def width(self, layer: int | None, step: str, head: int | None) -> int:
        """How many numbers a row of `step` has: its coordinates, keys or pairs (1 for a sum, a mean, a root)."""
        steps = part_of(self.solved, layer)
        if step in ("scale", "sum", "mean", "root"):
            return 1
        if step not in FORMULAS:  # the tiles', the gradients': as the steps table holds them
            return int(_tabled(steps, step, head).shape[1])
        if step in ("dot", "scores", "biased_scores", "exp", "weights"):
            return len(steps.problem.tokens)
        if step in LAYER_TRUTH:
            return int(self._layer(layer).input.shape[1])
        if step == "positioned":
            encoding = steps.problem.positions
            assert encoding is not None and encoding.encoding is not None, "x + PE needs PE"
            return int(encoding.encoding.shape[1])
        if step in ("concat", "final"):
            found = steps.concat if step == "concat" else steps.output
            assert found is not None, step
            return int(found.shape[1])
        of = steps.heads[_head(head)]
        if step == "angles":
            return int(_rotation(of).key_angles.shape[1])
        if step == "product":
            return int(of.values.shape[1] * len(steps.problem.tokens))
        if step in ("queries", "turned_queries"):
            return int(of.q.shape[1])
        if step in ("keys", "turned_keys"):
            return int(of.k.shape[1])
        return int((of.values if step == "values" else of.output).shape[1])

    def truth(self, ref: Ref) -> float:
        """The right value of a cell, from the solved record."""
        layer, step, h, row, column = ref
        steps = part_of(self.solved, layer)
        if step in LAYER_TRUTH:
            return LAYER_TRUTH[step](self._layer(layer), row, column)
        if step in SHARED_TRUTH:
            return SHARED_TRUTH[step](steps, row, column)
        if step not in HEAD_TRUTH:
            return float(_tabled(steps, step, h)[row, column])
        return HEAD_TRUTH[step](steps.heads[_head(h)], row, column)

    def _layer(self, layer: int | None) -> LayerSteps:
        assert isinstance(self.solved, StackSteps) and layer is not None, "only a stack has layers"
        return self.solved.layers[layer]

    def _constant(self, reading: _Reading, ref: Ref, value: float) -> float:
        """A constant the student reads from a table written to LOOKED_UP decimals (a PE, a bias b)."""
        if ref in reading.moved:
            return reading.moved[ref]
        if not math.isclose(value, round(value, LOOKED_UP), rel_tol=0, abs_tol=1e-12):
            reading.read[ref] = self.rule.carried
        return value

    def _constant_value(self, ref: Ref) -> float:
        layer, step, h, row, column = ref
        steps = part_of(self.solved, layer)
        if step == "pe":
            encoding = steps.problem.positions
            assert encoding is not None and encoding.encoding is not None, "a PE needs sinusoidal positions"
            return float(encoding.encoding[row, column])
        bias = steps.heads[_head(h)].bias
        assert bias is not None, "a bias b needs a bias"
        return float(bias[row, column])

    # The formulas: each step's value from the cells before it

    def _positioned(self, reading: _Reading, ref: Ref) -> float:
        layer, _, _, row, column = ref
        steps = part_of(self.solved, layer)
        encoding = steps.problem.positions
        assert encoding is not None and encoding.encoding is not None, "x + PE needs sinusoidal positions"
        x = self._attention_input(reading, layer, row, column, encoding.x)
        return x + self._constant(reading, (layer, "pe", None, row, column), float(encoding.encoding[row, column]))

    def _attention_input(
        self, reading: _Reading, layer: int | None, row: int, column: int, given: np.ndarray | None
    ) -> float:
        """Row `row` of what a layer's attention reads (its normed input placed pre, else the stream reaching it),
        or of a problem's own x."""
        if layer is None:
            assert given is not None, "a problem's projections read its x"
            return float(given[row, column])
        norm = self._layer(layer).layer.norm
        if norm is not None and norm.place == "pre":
            return self._read(reading, (layer, "normed", None, row, column))
        return self._stream_in(reading, layer, row, column)

    def _stream_in(self, reading: _Reading, layer: int | None, row: int, column: int) -> float:
        """The residual stream reaching `layer`: x for the first, the stream the one before passed on."""
        assert isinstance(self.solved, StackSteps) and layer is not None, "only a stack has a stream"
        if layer == 0:
            return float(self.solved.stack.x[row, column])
        return self._read(reading, (layer - 1, "stream", None, row, column))

    def _projected(self, reading: _Reading, ref: Ref) -> float:
        """q, k or v = x·W, from the student's x (x + PE with sinusoidal positions, a layer's own input)."""
        layer, step, h, row, column = ref
        steps = part_of(self.solved, layer)
        source = owner(steps, _head(h)) if step != "queries" else _head(h)
        if source != h:
            return self._read(reading, (layer, step, source, row, column))
        operand = getattr(steps.heads[_head(h)].spec, step)
        if not isinstance(operand, Projection):
            return float(getattr(steps.heads[_head(h)], step)[row, column])  # given
        token = _token_row(steps, step, row)
        total = 0.0
        for a in range(operand.w.shape[0]):
            total += self._projection_input(reading, steps, layer, token, row, a, operand) * float(operand.w[a, column])
        return total

    def _projection_input(
        self,
        reading: _Reading,
        steps: Steps,
        layer: int | None,
        token: int | None,
        row: int,
        a: int,
        operand: Projection,
    ) -> float:
        encoding = steps.problem.positions
        if token is None:  # a query of another sequence (x_query): as given
            return float(operand.x[row, a])
        if encoding is not None and encoding.kind == "sinusoidal":
            return self._read(reading, (layer, "positioned", None, token, a))
        if layer is None:  # the operand's own x, a row per row it projects (the asking tokens' for queries)
            return float(operand.x[row, a])
        return self._attention_input(reading, layer, token, a, None)

    _queries = _keys = _values = _projected

    def _angles(self, reading: _Reading, ref: Ref) -> float:
        return self.truth(ref)  # the position times θ_i: both given

    def _turned(self, reading: _Reading, ref: Ref) -> float:
        """RoPE: each pair (a, b) of the student's q or k turned by their angle m·θ_i."""
        layer, step, h, row, column = ref
        steps = part_of(self.solved, layer)
        head = steps.heads[_head(h)]
        name = "queries" if step == "turned_queries" else "keys"
        if head.rotation is None:
            return self._read(reading, (layer, name, h, row, column))
        source = h if name == "queries" else owner(steps, _head(h))
        if source != h:
            return self._read(reading, (layer, step, source, row, column))
        width = head.rotation.queries.shape[1]
        vector = np.array([[self._read(reading, (layer, name, h, row, c)) for c in range(width)]])
        turns = np.array([[self._angle(reading, layer, _head(h), name, row, p) for p in range(width // 2)]])
        return float(positions.rotate(vector, turns, head.rotation.style)[0, column])

    def _angle(self, reading: _Reading, layer: int | None, h: int, name: str, row: int, pair: int) -> float:
        """The angle of a key's pair (an entry at level 1), or of a query's: the angle of a key at its position."""
        steps = part_of(self.solved, layer)
        rotation = steps.heads[h].rotation
        assert rotation is not None, "angles need RoPE"
        h = owner(steps, h)
        if name == "keys":
            return self._read(reading, (layer, "angles", h, row, pair))
        encoding = steps.problem.rope
        assert encoding is not None, "angles need RoPE"
        same = np.flatnonzero(encoding.key_at == encoding.query_at[row])
        if len(same):
            return self._read(reading, (layer, "angles", h, int(same[0]), pair))
        return float(rotation.query_angles[row, pair])

    _turned_queries = _turned_keys = _turned

    def _dot(self, reading: _Reading, ref: Ref) -> float:
        """The head's compatibility of the student's (turned) query and key, as attncli.core computes it."""
        layer, _, h, row, column = ref
        head = part_of(self.solved, layer).heads[_head(h)]
        if head.queries is None:
            return float(head.dot[row, column])  # the scores are given
        q = [self._read(reading, (layer, "turned_queries", h, row, c)) for c in range(head.q.shape[1])]
        k = [self._read(reading, (layer, "turned_keys", h, column, c)) for c in range(head.k.shape[1])]
        found, _ = core.compatibility(head.spec.score, np.array([q]), np.array([k]))
        return float(found[0, 0])

    def _scale(self, reading: _Reading, ref: Ref) -> float:
        return self.truth(ref)

    def _scores(self, reading: _Reading, ref: Ref) -> float:
        layer, _, h, row, column = ref
        head = part_of(self.solved, layer).heads[_head(h)]
        dot = self._read(reading, (layer, "dot", h, row, column))
        return dot * self._read(reading, (layer, "scale", h, 0, 0)) if scaled(head) else dot

    def _biased_scores(self, reading: _Reading, ref: Ref) -> float:
        layer, _, h, row, column = ref
        head = part_of(self.solved, layer).heads[_head(h)]
        score = self._read(reading, (layer, "scores", h, row, column))
        if head.bias is None:
            return score
        return score + self._constant(reading, (layer, "bias", h, row, column), float(head.bias[row, column]))

    def _exp(self, reading: _Reading, ref: Ref) -> float:
        layer, _, h, row, column = ref
        steps = part_of(self.solved, layer)
        head = steps.heads[_head(h)]
        if not steps.problem.mask[row, column]:
            return 0.0
        return math.exp(self._read(reading, (layer, "biased_scores", h, row, column)) - float(head.shift[row]))

    def _sum(self, reading: _Reading, ref: Ref) -> float:
        layer, _, h, row, _ = ref
        keys = _allowed(part_of(self.solved, layer), row)
        return sum(self._read(reading, (layer, "exp", h, row, j)) for j in keys)

    def _weights(self, reading: _Reading, ref: Ref) -> float:
        layer, _, h, row, column = ref
        if column not in _allowed(part_of(self.solved, layer), row):
            return 0.0
        return self._read(reading, (layer, "exp", h, row, column)) / self._read(reading, (layer, "sum", h, row, 0))

    def _product(self, reading: _Reading, ref: Ref) -> float:
        layer, _, h, row, column = ref
        width = part_of(self.solved, layer).heads[_head(h)].values.shape[1]
        key, c = divmod(column, width)
        return self._read(reading, (layer, "weights", h, row, key)) * self._read(reading, (layer, "values", h, key, c))

    def _output(self, reading: _Reading, ref: Ref) -> float:
        """Σ weight × value; at level 1, the sum of the student's own products."""
        layer, _, h, row, column = ref
        width = part_of(self.solved, layer).heads[_head(h)].values.shape[1]
        total = 0.0
        for j in _allowed(part_of(self.solved, layer), row):
            product = (layer, "product", h, row, j * width + column)
            if product in self.kept or product in reading.moved:
                total += self._read(reading, product)
            else:
                total += self._read(reading, (layer, "weights", h, row, j)) * self._read(
                    reading, (layer, "values", h, j, column)
                )
        return total

    def _concat(self, reading: _Reading, ref: Ref) -> float:
        layer, _, _, row, column = ref
        for h, head in enumerate(part_of(self.solved, layer).heads):
            width = head.output.shape[1]
            if column < width:
                return self._read(reading, (layer, "output", h, row, column))
            column -= width
        raise AssertionError("a concatenation's column is some head's")

    def _final(self, reading: _Reading, ref: Ref) -> float:
        layer, _, _, row, column = ref
        w_o = part_of(self.solved, layer).problem.w_o
        if w_o is None:  # several heads without W_O: the concatenation is the final output
            return self._read(reading, (layer, "concat", None, row, column))
        return sum(
            self._read(reading, (layer, "concat", None, row, a)) * float(w_o[a, column]) for a in range(w_o.shape[0])
        )

    def _norm_input(self, reading: _Reading, layer: int | None, row: int, column: int) -> float:
        norm = self._layer(layer).layer.norm
        assert norm is not None, "a mean and a root need a norm"
        if norm.place == "post":
            return self._read(reading, (layer, "residual", None, row, column))
        return self._stream_in(reading, layer, row, column)

    def _mean(self, reading: _Reading, ref: Ref) -> float:
        layer, _, _, row, _ = ref
        width = self._layer(layer).input.shape[1]
        return sum(self._norm_input(reading, layer, row, c) for c in range(width)) / width

    def _root(self, reading: _Reading, ref: Ref) -> float:
        """√(var + ε) from the student's mean (LayerNorm), √(mean(x²) + ε) (RMSNorm)."""
        layer, _, _, row, _ = ref
        steps = self._layer(layer)
        norm = steps.layer.norm
        assert norm is not None, "a root needs a norm"
        width = steps.input.shape[1]
        centre = self._read(reading, (layer, "mean", None, row, 0)) if norm.kind == "layer" else 0.0
        square = sum((self._norm_input(reading, layer, row, c) - centre) ** 2 for c in range(width)) / width
        return math.sqrt(square + norm.eps)

    def _normalised(self, reading: _Reading, layer: int | None, row: int, column: int) -> float:
        """(x − mean) / root, times the gain, plus the shift, from the student's mean and root."""
        norm = self._layer(layer).layer.norm
        assert norm is not None, "a normed row needs a norm"
        centre = self._read(reading, (layer, "mean", None, row, 0)) if norm.kind == "layer" else 0.0
        out = (self._norm_input(reading, layer, row, column) - centre) / self._read(
            reading, (layer, "root", None, row, 0)
        )
        if norm.gain is not None:
            out *= float(norm.gain[column])
        return out + float(norm.shift[column]) if norm.shift is not None else out

    def _normed(self, reading: _Reading, ref: Ref) -> float:
        layer, _, _, row, column = ref
        return self._normalised(reading, layer, row, column)

    def _residual(self, reading: _Reading, ref: Ref) -> float:
        """The stream reaching the layer plus the layer's attention output (its final output)."""
        layer, _, _, row, column = ref
        return self._stream_in(reading, layer, row, column) + self._read(reading, (layer, "final", None, row, column))

    def _stream(self, reading: _Reading, ref: Ref) -> float:
        layer, _, _, row, column = ref
        norm = self._layer(layer).layer.norm
        if norm is not None and norm.place == "post":
            return self._normalised(reading, layer, row, column)
        return self._read(reading, (layer, "residual", None, row, column))


FORMULAS = (
    "positioned", "queries", "keys", "values", "angles", "turned_queries", "turned_keys", "dot", "scale", "scores",
    "biased_scores", "exp", "sum", "weights", "product", "output", "concat", "final", "mean", "root", "normed",
    "residual", "stream",
)  # fmt: skip


def _tabled(steps: Steps, step: str, head: int | None) -> np.ndarray:
    """A step's true numbers from the steps table, a row per prompt row (a head's, else the problem's: dO)."""
    from attncli.steps import matrix

    found = matrix(steps, step, head)
    if found is None and head is not None:
        found = matrix(steps, step, None)
    assert found is not None, step
    return found.reshape(found.shape[0], -1)


def _token_row(steps: Steps, step: str, row: int) -> int | None:
    """The token (row of x) a projection's row reads: a key's or a value's own; a query's, when it is a token."""
    problem = steps.problem
    if step != "queries":
        return row
    if problem.query_rows is not None:
        return problem.query_rows[row]
    return None if problem.cross else row


def _allowed(steps: Steps, row: int) -> list[int]:
    return [j for j, allowed in enumerate(steps.problem.mask[row]) if allowed]


def _safely(work: Callable[[], float]) -> float:
    """A value worked from a student's numbers, inf or nan where the arithmetic leaves float's range (e^1000)."""
    try:
        with np.errstate(all="ignore"):
            return float(work())
    except OverflowError:
        return math.inf
    except (ZeroDivisionError, ValueError):
        return math.nan


def _norm_truth(layer: LayerSteps, row: int) -> tuple[np.ndarray, float]:
    norm = layer.layer.norm
    assert norm is not None, "a mean and a root need a norm"
    rows = layer.residual if norm.place == "post" else layer.input
    _centred, root = norm_parts(rows[row : row + 1], norm)
    return rows[row], float(root[0, 0])


def _scaled_truth(head: HeadSteps, row: int, column: int) -> float:
    source = head.scaled if head.bias is not None and head.scaled is not None else head.scores
    return float(source[row, column])


def _product_truth(head: HeadSteps, row: int, column: int) -> float:
    key, c = divmod(column, head.values.shape[1])
    return float(head.weights[row, key] * head.values[key, c])


def _rotation(head: HeadSteps) -> core.Rotation:
    assert head.rotation is not None, "turns need RoPE"
    return head.rotation


HEAD_TRUTH: dict[str, Callable[[HeadSteps, int, int], float]] = {
    "queries": lambda head, row, c: float(head.q[row, c]),
    "keys": lambda head, row, c: float(head.k[row, c]),
    "values": lambda head, row, c: float(head.values[row, c]),
    "angles": lambda head, row, c: float(_rotation(head).key_angles[row, c]),
    "turned_queries": lambda head, row, c: float(_rotation(head).queries[row, c]),
    "turned_keys": lambda head, row, c: float(_rotation(head).keys[row, c]),
    "dot": lambda head, row, c: float(head.dot[row, c]),
    "scale": lambda head, row, c: head.spec.score.scale,
    "scores": _scaled_truth,
    "biased_scores": lambda head, row, c: float(head.scores[row, c]),
    "exp": lambda head, row, c: float(head.exp[row, c]),
    "sum": lambda head, row, c: float(head.exp[row].sum()),
    "weights": lambda head, row, c: float(head.weights[row, c]),
    "product": _product_truth,
    "output": lambda head, row, c: float(head.output[row, c]),
}


def _positioned_truth(steps: Steps, row: int, column: int) -> float:
    encoding = steps.problem.positions
    assert encoding is not None and encoding.x is not None and encoding.encoding is not None, "x + PE needs PE"
    return float(encoding.x[row, column] + encoding.encoding[row, column])


def _concat_truth(steps: Steps, row: int, column: int) -> float:
    assert steps.concat is not None, "a concatenation needs heads to concatenate"
    return float(steps.concat[row, column])


SHARED_TRUTH: dict[str, Callable[[Steps, int, int], float]] = {
    "positioned": _positioned_truth,
    "concat": _concat_truth,
    "final": lambda steps, row, column: float(steps.output[row, column]),
}


def _normed_truth(layer: LayerSteps, row: int, column: int) -> float:
    assert layer.normed is not None, "a normed row needs a norm placed pre"
    return float(layer.normed[row, column])


LAYER_TRUTH: dict[str, Callable[[LayerSteps, int, int], float]] = {
    "mean": lambda layer, row, c: float(_norm_truth(layer, row)[0].mean()),
    "root": lambda layer, row, c: _norm_truth(layer, row)[1],
    "normed": _normed_truth,
    "residual": lambda layer, row, c: float(layer.residual[row, c]),
    "stream": lambda layer, row, c: float(layer.output[row, c]),
}
