"""What a tutor session asks, problem by problem: the prompts, in the order a student works by hand.

The steps come from a list built per problem. A problem's calculation is a run of *stages*, each a
function that yields the prompts of one kind of step (the projections, RoPE's turns, the scores,
the softmax, the output, ...): adding a kind of step is adding a stage to HEAD_STAGES,
QUERY_STAGES, SHARED_STAGES or LAYER_STAGES (the backward pass and the online softmax's tiles,
when the tutor asks them, are stages appended to AFTER). Every stage reads the solved record
(attncli.core.Steps, attncli.layers.StackSteps) and asks only what the problem has: a W_O step
only with `w_o`, RoPE's angles and turned vectors only with RoPE, a norm's mean and root only
in a layer that normalises.

Prompts are made as they are asked for (a generator): a problem with more than MAX_PROMPTS of
them is refused before any is kept (`count`), so a session holds a bounded number of them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from attncli.core import HeadSteps, Steps
from attncli.layers import LayerSteps, StackSteps

LEVELS = (
    1,
    2,
    3,
)  # 1: every product of a weight and a value, each angle, each coordinate too; 2: cell by cell; 3: rows
LEVEL = 2
MAX_PROMPTS = 10_000  # a session past this many steps is refused: a problem no one works by hand (compute shows it)
Solved = Steps | StackSteps


@dataclass(frozen=True)
class Prompt:
    """One thing to compute: a step, for one head and one row, over some cells (of one layer of a stack)."""

    step: str  # one of STEPS
    head: int | None  # None for the steps of the problem (x + PE, concat, final) or of a layer (its norm, its stream)
    row: int  # the query; the token for keys, values, angles, turned keys and a layer's streams; 0 for the scale
    columns: tuple[int, ...]  # keys (dot, scores, exp, weights) or coordinates or pairs; () for one number
    key: int | None = None  # product: the key whose weight × value is asked
    layer: int | None = None  # a stack's layer, counting from 0; None for a problem of one layer

    @property
    def size(self) -> int:
        """How many numbers the answer has."""
        return max(len(self.columns), 1)


# Every step the tutor asks, in the order of the calculation (the steps table's, attncli.steps, with the tutor's
# finer ones between): a layer's norm first, then x + PE, each head's projections, angles and turns, the scores,
# the softmax, the output, then the heads together and the layer's residual stream.
STEPS = (
    "mean", "root", "normed", "positioned", "queries", "keys", "values", "angles", "turned_queries", "turned_keys",
    "dot", "scale", "scores", "biased_scores", "exp", "sum", "weights", "product", "output", "concat", "final",
    "residual", "stream", "running_max", "rescale", "running_sum", "accumulator",
)  # fmt: skip


@dataclass(frozen=True)
class Part:
    """One attention problem of a session, a stack's layer or the whole problem, and how finely it is asked."""

    steps: Steps
    level: int
    layer: int | None = None

    @property
    def whole(self) -> bool:
        return self.level >= 3

    def keys(self, row: int) -> tuple[int, ...]:
        """The keys query `row` may use (the mask's)."""
        allowed = self.steps.problem.mask[row]
        return tuple(j for j in range(len(allowed)) if allowed[j])

    def prompt(self, step: str, head: int | None, row: int, columns: tuple[int, ...], key: int | None = None) -> Prompt:
        return Prompt(step, head, row, columns, key, self.layer)

    def each(self, step: str, head: int | None, row: int, columns: tuple[int, ...]) -> Iterator[Prompt]:
        """One prompt for the whole row (level 3), else one per cell."""
        if self.whole:
            yield self.prompt(step, head, row, columns)
        else:
            yield from (self.prompt(step, head, row, (c,)) for c in columns)


Stage = Callable[[Part, int], Iterator[Prompt]]  # a head's stage: (part, head) -> its prompts
QueryStage = Callable[[Part, int, int], Iterator[Prompt]]  # a query's stage: (part, head, query) -> its prompts
SharedStage = Callable[[Part], Iterator[Prompt]]  # the problem's own: (part) -> its prompts
LayerStage = Callable[[LayerSteps, int, int], Iterator[Prompt]]  # a layer's: (layer, index, level) -> its prompts


def prompts(solved: Solved, level: int = LEVEL) -> Iterator[Prompt]:
    """Every prompt of a session at `level`, made as it is asked for: layer by layer, each head query by query."""
    if isinstance(solved, StackSteps):
        for index, layer in enumerate(solved.layers):
            yield from itertools.chain.from_iterable(stage(layer, index, level) for stage in LAYER_BEFORE)
            yield from attention(Part(layer.attention, level, index))
            yield from itertools.chain.from_iterable(stage(layer, index, level) for stage in LAYER_AFTER)
    else:
        yield from attention(Part(solved, level))
    for extension in AFTER:
        yield from extension(solved, level)


def count(solved: Solved, level: int, most: int = MAX_PROMPTS) -> int:
    """How many prompts a session has, counted up to `most` + 1 (a larger problem is refused, whatever its size)."""
    return sum(1 for _ in itertools.islice(prompts(solved, level), most + 1))


def attention(part: Part) -> Iterator[Prompt]:
    """One attention problem: its own steps first (x + PE), each head's, then the heads together (concat, W_O)."""
    for shared in SHARED_BEFORE:
        yield from shared(part)
    for h in range(len(part.steps.heads)):
        for stage in HEAD_STAGES:
            yield from stage(part, h)
        for i in range(len(part.steps.problem.query_tokens)):
            for query_stage in QUERY_STAGES:
                yield from query_stage(part, h, i)
    for shared in SHARED_STAGES:
        yield from shared(part)


# The problem's own steps, before the heads


def positioned(part: Part) -> Iterator[Prompt]:
    """Sinusoidal positions: x + PE(m), row by row, before the projections read it."""
    encoding = part.steps.problem.positions
    if encoding is None or encoding.kind != "sinusoidal" or encoding.encoding is None:
        return
    width = tuple(range(encoding.encoding.shape[1]))
    for r in range(encoding.encoding.shape[0]):
        yield part.prompt("positioned", None, r, width)


# A head's steps over every token


def owner(steps: Steps, h: int) -> int:
    """The first head reading the same keys and values as head `h` (grouped-query attention): whose k and v the
    student computes; `h` itself without kv heads."""
    group = steps.heads[h].spec.kv_head
    if group is None:
        return h
    return next(o for o, head in enumerate(steps.heads) if head.spec.kv_head == group)


def projections(part: Part, h: int) -> Iterator[Prompt]:
    """Q = X·W_Q, K, V row by row (each coordinate at level 1), when the problem gives x and W; a kv head's keys and
    values once, by the first query head that reads them."""
    from attncli.steps import computed, matrix

    for name in ("queries", "keys", "values"):
        if name != "queries" and owner(part.steps, h) != h:
            continue
        vectors = matrix(part.steps, name, h) if computed(part.steps, name, h) else None
        if vectors is None:
            continue
        width = tuple(range(vectors.shape[1]))
        for r in range(vectors.shape[0]):
            if part.level == 1:
                yield from (part.prompt(name, h, r, (c,)) for c in width)
            else:
                yield part.prompt(name, h, r, width)


def rope(part: Part, h: int) -> Iterator[Prompt]:
    """RoPE: each token's angles m·θ_i (level 1), the queries turned, the keys turned (once per kv head)."""
    rotation = part.steps.heads[h].rotation
    if rotation is None:
        return
    pairs = tuple(range(rotation.key_angles.shape[1]))
    if part.level == 1 and owner(part.steps, h) == h:
        yield from (part.prompt("angles", h, r, pairs) for r in range(rotation.key_angles.shape[0]))
    width = tuple(range(rotation.queries.shape[1]))
    yield from (part.prompt("turned_queries", h, i, width) for i in range(rotation.queries.shape[0]))
    if owner(part.steps, h) == h:
        yield from (part.prompt("turned_keys", h, r, width) for r in range(rotation.keys.shape[0]))


# A head's steps, query by query


def scaled(head: HeadSteps) -> bool:
    """Whether the head multiplies its compatibility by a factor the student must find (1/√d_k, or `scale:`)."""
    return head.queries is not None and not math.isclose(head.spec.score.scale, 1.0)


def scores_asked(head: HeadSteps) -> bool:
    """Whether the scores are a step of their own: the compatibility scaled (given scores and unscaled ones are the
    scores already, and a bias is added in the step after)."""
    return scaled(head)


def scores(part: Part, h: int, i: int) -> Iterator[Prompt]:
    """q·k (or the head's compatibility), the scale once, the scores s, and s + b when the problem adds a bias."""
    head = part.steps.heads[h]
    keys = part.keys(i)
    if head.queries is not None:
        yield from part.each("dot", h, i, keys)
        if i == 0 and scaled(head):
            yield part.prompt("scale", h, 0, ())
    if scores_asked(head):
        yield from part.each("scores", h, i, keys)
    if head.bias is not None:
        yield from part.each("biased_scores", h, i, keys)


def softmax(part: Part, h: int, i: int) -> Iterator[Prompt]:
    """e^s of each key, their sum, each weight."""
    keys = part.keys(i)
    yield from part.each("exp", h, i, keys)
    yield part.prompt("sum", h, i, ())
    yield from part.each("weights", h, i, keys)


def output(part: Part, h: int, i: int) -> Iterator[Prompt]:
    """Each weight × value (level 1), then the output, coordinate by coordinate (a whole row at level 3)."""
    head = part.steps.heads[h]
    width = tuple(range(head.values.shape[1]))
    if part.level == 1:
        yield from (part.prompt("product", h, i, width, j) for j in part.keys(i))
    yield from part.each("output", h, i, width)


# The heads together


def heads_together(part: Part) -> Iterator[Prompt]:
    """Several heads: their outputs concatenated; with W_O, the concatenation (or one head's output) times W_O.
    Without W_O the concatenation is the final output: no step of its own."""
    steps = part.steps
    if steps.concat is None:
        return
    for i in range(len(steps.problem.query_tokens)):
        if len(steps.heads) > 1:
            yield part.prompt("concat", None, i, tuple(range(steps.concat.shape[1])))
        if steps.problem.w_o is not None:
            yield from part.each("final", None, i, tuple(range(steps.output.shape[1])))


# A stack's layer: its norm before the attention, its residual stream after


def _norm_of(layer: LayerSteps, index: int, level: int, place: str) -> Iterator[Prompt]:
    """Each token's mean (LayerNorm) and root √(var + ε), and its row normalised: the layer's input placed pre,
    its residual sum placed post (whose normed row is the stream passed on)."""
    norm = layer.layer.norm
    if norm is None or norm.place != place:
        return
    width = tuple(range(layer.input.shape[1]))
    normed = "normed" if place == "pre" else "stream"
    for r in range(layer.input.shape[0]):
        if place == "post":
            yield Prompt("residual", None, r, width, None, index)
        if norm.kind == "layer":
            yield Prompt("mean", None, r, (), None, index)
        yield Prompt("root", None, r, (), None, index)
        yield Prompt(normed, None, r, width, None, index)


def norm_before(layer: LayerSteps, index: int, level: int) -> Iterator[Prompt]:
    return _norm_of(layer, index, level, "pre")


def stream_after(layer: LayerSteps, index: int, level: int) -> Iterator[Prompt]:
    """The stream the layer passes on: x + the attention (then normalised, placed post)."""
    norm = layer.layer.norm
    if norm is not None and norm.place == "post":
        yield from _norm_of(layer, index, level, "post")
        return
    width = tuple(range(layer.input.shape[1]))
    yield from (Prompt("stream", None, r, width, None, index) for r in range(layer.input.shape[0]))


def online(part: Part, h: int, i: int) -> Iterator[Prompt]:
    """The online softmax (`tiles:`, issue 29): each tile's m', α, ℓ' and o' of query i, after its output."""
    from attncli.practice import tiles

    cells = tiles.cells(part.steps.heads[h], i)
    yield from (part.prompt(step, h, row, columns) for step, row, columns in cells)


def gradients(solved: Solved, level: int) -> Iterator[Prompt]:
    """The backward pass (`backward:`, issue 28): each gradient row by row, after the forward steps."""
    if isinstance(solved, StackSteps):  # a stack's gradients are not graded yet
        return
    from attncli.practice import backward

    yield from (Prompt(step, head, row, columns) for step, head, row, columns in backward.prompts(solved))


SHARED_BEFORE: list[SharedStage] = [positioned]
HEAD_STAGES: list[Stage] = [projections, rope]
QUERY_STAGES: list[QueryStage] = [scores, softmax, output, online]
SHARED_STAGES: list[SharedStage] = [heads_together]
LAYER_BEFORE: list[LayerStage] = [norm_before]
LAYER_AFTER: list[LayerStage] = [stream_after]
AFTER: list[Callable[[Solved, int], Iterator[Prompt]]] = [gradients]  # after the forward steps: the backward pass
