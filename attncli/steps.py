"""The steps of the calculation, once: what each is called, where its numbers are kept, what its rows and columns are.

Every part of attncli that goes step by step loops over CALCULATION: the `answers:` a student
writes (attncli.parsing.answers), templates and keys, grading and its reports, the tutor, and the
JSON, CSV and npz writers. A step has one name everywhere; the record keeps its numbers in the
field of that name (HeadSteps.dot, .scores, ...), and the documents (JSON, CSV, npz) name them by
the field. The one step whose field is not its name is `final`: the record's, and the documents',
`output`, which `answers:` calls `final` to tell it from a head's `output`. The online softmax's
running values (issue 29) are kept in a head's `tiles` (attncli.tiles.Tiles), each query's tiles a
row, and `answers:` writes them as the JSON does, a record per tile under `tiles:` (their `group`).

The softmax homework (`check` on a file with `logits:`, attncli.grading.softmax) is a calculation of
its own, one row of logits at a time: its steps are SOFTMAX, named as `attncli softmax --format json`
names them; its `exp` and `sum`, without a head, are not the attention's.

Adding a step is one row of CALCULATION, in its place in the order: e^s, the sums of e^s, RoPE's
turned queries and keys, x + PE, the biased scores, a norm's mean and root (issue 25) are rows
answered=True whose field the record holds (or gains). The backward pass's steps (issue 28) are rows
of the places that read the record's `backward` (attncli.backward): its top level (BACKWARD), a head's
(BACKWARD_HEAD), a shared key/value head's (BACKWARD_KV), a stacked layer's (BACKWARD_LAYER). Each is
named `backward.` and its JSON key; a head's step of head None is the top level's key of the same name
(dO itself, the bias's gradient summed over the heads, a field several heads read, its summed gradient).
Pure data and lookups: importing it imports no numpy.

What a document (JSON, CSV, npz) holds of a step is its field (`documented`); what an answer of it holds
is the same numbers but for `scores` with a bias: there the record's and the documents' `scores` are
s + b (what the softmax reads), while `answers:` asks s before the bias and s + b as `biased_scores`
(`answered`; attncli.parsing.answers reads a file that answers `scores` alone as before, as s + b).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    import numpy as np

    from attncli.core import HeadSteps, Steps
    from attncli.layers import LayerSteps
    from attncli.problem import Problem

HEAD, SHARED, LAYER = (
    "head",
    "shared",
    "layer",
)  # where a step's numbers are: a head's, the problem's, a stacked layer's
# ... and the backward pass's (attncli.backward): Gradients, HeadGradients, KvGradients, LayerGradients
BACKWARD, BACKWARD_HEAD, BACKWARD_KV, BACKWARD_LAYER = "backward", "backward_head", "backward_kv", "backward_layer"
BACKWARD_PLACES = (BACKWARD, BACKWARD_HEAD, BACKWARD_KV, BACKWARD_LAYER)
QUERIES, TOKENS = "queries", "tokens"  # what a step's rows are: the query tokens, or every token (keys and values)
KEYS, COORDINATES = "keys", "coordinates"  # what its columns are: the key tokens, or the coordinates 1, 2, ...
# (a weight's gradient has coordinates for rows too: those of x, or of the concatenation for dW_O)
NONE = ""  # a step without rows or columns: the tutor's scale is one number, each sum one per query
TILES, QUERY_TILES = "tiles", "query_tiles"  # columns: a query's tiles 1, 2, ...; rows: each query's tiles in turn
TILED = "tiles"  # the group of the online softmax's running values in answers: (a record per tile under `tiles:`)
LOGITS = "logits"  # where the softmax homework's numbers are: attncli.softmax.SoftmaxSteps
ROWS, VOCABULARY = "rows", "vocabulary"  # the softmax homework's rows (of logits) and columns (the tokens)

Key = tuple[str, int | None]  # (step, head); head None for the steps of the problem or of a layer


class Step(NamedTuple):
    """One step of the calculation."""

    name: str  # as answers:, check's reports and the tutor call it
    field: str  # the record's attribute holding its numbers; "" for the tutor's own numbers, which no record keeps
    rows: str  # QUERIES or TOKENS (or NONE); COORDINATES for a weight's gradient
    columns: str  # KEYS or COORDINATES (or NONE)
    maskable: bool  # a cell may be out: a (query, key) pair the mask leaves out, a running max before any key (−∞)
    needs: tuple[str, ...]  # the steps it is computed from, directly; a head's step, for a shared one: every head's
    place: str = HEAD  # HEAD: HeadSteps; SHARED: Steps; LAYER: LayerSteps; BACKWARD_PLACES: the backward record's
    answered: bool = True  # a field of `answers:`: graded by check, written in templates and keys, JSON and CSV
    saved: bool = True  # npz holds it (with the steps answered, a head's bias)
    tutored: bool = True  # the tutor asks it
    given_in: str = ""  # the head's field in the problem (attncli.problem.Head) that may give it instead
    applies: Callable[[Any], bool] | None = None  # whether a record has it; None: when its field holds a matrix
    truth: str = ""  # the record's attribute an answer of it holds, when not `field` (scores before a bias)
    aside: bool = False  # a number written on the way (e^s, Σ e^s, ...): graded, in points only when they name it
    group: str = ""  # the mapping of answers: it is written in, a record per tile (TILED); "" for its own matrix


def _scored(head: HeadSteps) -> bool:
    """Whether the head computes q·k (its scores are not given)."""
    return head.queries is not None


def _turned(head: HeadSteps) -> bool:
    """Whether the head turns its queries and keys with RoPE (a student writes them turned, then q·k)."""
    return head.rotation is not None


def _normalised(layer: LayerSteps) -> bool:
    """Whether the layer has a norm: a student finds each row's root (and, for LayerNorm, its mean) first."""
    return layer.layer.norm is not None


def _centred(layer: LayerSteps) -> bool:
    """Whether the layer's norm is LayerNorm, which subtracts each row's mean (RMSNorm divides by the root alone)."""
    return layer.layer.norm is not None and layer.layer.norm.kind == "layer"


def _tiled(head: HeadSteps) -> bool:
    """Whether the head's softmax is written out tile by tile (`tiles:`, `--tiles B`)."""
    return head.tiles is not None


def _post_norm(layer: LayerSteps) -> bool:
    """Whether the layer normalises its residual sum (a student writes the sum, then the norm of it)."""
    return layer.layer.norm is not None and layer.layer.norm.place == "post"


# fmt: off
CALCULATION = (
    Step("positioned", "positioned", TOKENS, COORDINATES, False, (), SHARED, saved=False, tutored=False, aside=True),
    Step("mean", "mean", QUERIES, NONE, False, (), LAYER, saved=False, tutored=False, applies=_centred,
         aside=True),
    Step("root", "root", QUERIES, NONE, False, ("mean",), LAYER, saved=False, tutored=False, applies=_normalised,
         aside=True),
    Step("normed", "normed", QUERIES, COORDINATES, False, ("mean", "root"), LAYER, saved=False, tutored=False),
    Step("queries", "queries", QUERIES, COORDINATES, False, ("positioned",), given_in="queries"),
    Step("keys", "keys", TOKENS, COORDINATES, False, ("positioned",), given_in="keys"),
    Step("values", "values", TOKENS, COORDINATES, False, ("positioned",), given_in="values"),
    Step("turned_queries", "turned_queries", QUERIES, COORDINATES, False, ("queries",), saved=False, tutored=False,
         applies=_turned, aside=True),
    Step("turned_keys", "turned_keys", TOKENS, COORDINATES, False, ("keys",), saved=False, tutored=False,
         applies=_turned, aside=True),
    Step("dot", "dot", QUERIES, KEYS, True, ("queries", "keys", "turned_queries", "turned_keys"), applies=_scored),
    Step("scale", "", NONE, NONE, False, (), answered=False, saved=False, applies=_scored),
    Step("scores", "scores", QUERIES, KEYS, True, ("dot", "scale"), given_in="scores", truth="scaled_scores"),
    Step("bias", "bias", QUERIES, KEYS, False, (), answered=False, tutored=False),
    Step("biased_scores", "biased_scores", QUERIES, KEYS, True, ("scores", "bias"), saved=False, tutored=False,
         aside=True),
    Step("exp", "exp", QUERIES, KEYS, True, ("biased_scores",), saved=False, aside=True),
    Step("sum", "", QUERIES, NONE, False, ("exp",), answered=False, saved=False),  # the tutor's, a query at a time
    Step("sums", "sums", QUERIES, NONE, False, ("exp",), saved=False, tutored=False, aside=True),
    Step("weights", "weights", QUERIES, KEYS, True, ("exp", "sum", "sums")),
    Step("product", "", QUERIES, COORDINATES, False, ("weights", "values"), answered=False, saved=False),
    Step("output", "output", QUERIES, COORDINATES, False, ("weights", "values")),
    Step("running_max", "tiles.running_max", QUERIES, TILES, True, ("scores",), saved=False, applies=_tiled,
         group=TILED),
    Step("rescale", "tiles.rescale", QUERIES, TILES, False, ("running_max",), saved=False, applies=_tiled,
         group=TILED),
    Step("running_sum", "tiles.running_sum", QUERIES, TILES, False, ("scores", "running_max", "rescale"),
         saved=False, applies=_tiled, group=TILED),
    Step("accumulator", "tiles.accumulated", QUERY_TILES, COORDINATES, False,
         ("scores", "values", "running_max", "rescale"), saved=False, applies=_tiled, group=TILED),
    Step("concat", "concat", QUERIES, COORDINATES, False, ("output",), SHARED),
    Step("final", "output", QUERIES, COORDINATES, False, ("concat", "output"), SHARED),
    Step("residual", "residual", QUERIES, COORDINATES, False, ("final",), LAYER, saved=False, tutored=False,
         applies=_post_norm),
    Step("stream", "output", QUERIES, COORDINATES, False, ("residual", "mean", "root"), LAYER, saved=False,
         tutored=False),
    # The backward pass, from dO back to the inputs (npz and JSON write the record whole: attncli.render.backward_doc)
    Step("backward.grad_output", "grad_output", QUERIES, COORDINATES, False, ("final",), BACKWARD_HEAD, saved=False),
    Step("backward.grad_concat", "grad_concat", QUERIES, COORDINATES, False, ("backward.grad_output",), BACKWARD,
         saved=False),
    Step("backward.grad_w_o", "grad_w_o", COORDINATES, COORDINATES, False, ("concat", "backward.grad_output"),
         BACKWARD, saved=False),
    Step("backward.grad_values", "grad_values", TOKENS, COORDINATES, False, ("weights", "backward.grad_output"),
         BACKWARD_HEAD, saved=False),
    Step("backward.grad_weights", "grad_weights", QUERIES, KEYS, False, ("values", "backward.grad_output"),
         BACKWARD_HEAD, saved=False),
    Step("backward.row_term", "row_term", QUERIES, NONE, False, ("weights", "backward.grad_weights"), BACKWARD_HEAD,
         saved=False),
    Step("backward.grad_scores", "grad_scores", QUERIES, KEYS, True, ("weights", "backward.grad_weights",
         "backward.row_term"), BACKWARD_HEAD, saved=False),
    Step("backward.grad_dot", "grad_dot", QUERIES, KEYS, True, ("backward.grad_scores",), BACKWARD_HEAD, saved=False),
    Step("backward.grad_turned_queries", "grad_turned_queries", QUERIES, COORDINATES, False, ("keys",
         "backward.grad_dot"), BACKWARD_HEAD, saved=False),
    Step("backward.grad_turned_keys", "grad_turned_keys", TOKENS, COORDINATES, False, ("queries",
         "backward.grad_dot"), BACKWARD_HEAD, saved=False),
    Step("backward.grad_queries", "grad_queries", QUERIES, COORDINATES, False, ("keys", "backward.grad_dot",
         "backward.grad_turned_queries"), BACKWARD_HEAD, saved=False),
    Step("backward.grad_keys", "grad_keys", TOKENS, COORDINATES, False, ("queries", "backward.grad_dot",
         "backward.grad_turned_keys"), BACKWARD_HEAD, saved=False),
    Step("backward.grad_w_q", "grad_w_q", COORDINATES, COORDINATES, False, ("backward.grad_queries",), BACKWARD_HEAD,
         saved=False),
    Step("backward.grad_w_k", "grad_w_k", COORDINATES, COORDINATES, False, ("backward.grad_keys",), BACKWARD_HEAD,
         saved=False),
    Step("backward.grad_w_v", "grad_w_v", COORDINATES, COORDINATES, False, ("backward.grad_values",), BACKWARD_HEAD,
         saved=False),
    Step("backward.grad_bias", "grad_bias", QUERIES, KEYS, True, ("backward.grad_scores",), BACKWARD_HEAD,
         saved=False),
    Step("backward.kv_heads.grad_keys", "grad_keys", TOKENS, COORDINATES, False, ("backward.grad_keys",),
         BACKWARD_KV, saved=False),
    Step("backward.kv_heads.grad_values", "grad_values", TOKENS, COORDINATES, False, ("backward.grad_values",),
         BACKWARD_KV, saved=False),
    Step("backward.kv_heads.grad_w_k", "grad_w_k", COORDINATES, COORDINATES, False, ("backward.grad_w_k",),
         BACKWARD_KV, saved=False),
    Step("backward.kv_heads.grad_w_v", "grad_w_v", COORDINATES, COORDINATES, False, ("backward.grad_w_v",),
         BACKWARD_KV, saved=False),
    Step("backward.grad_x", "grad_x", TOKENS, COORDINATES, False, ("backward.grad_queries", "backward.grad_keys",
         "backward.grad_values"), BACKWARD, saved=False),
    Step("backward.grad_x_query", "grad_x_query", QUERIES, COORDINATES, False, ("backward.grad_queries",), BACKWARD,
         saved=False),
    Step("backward.grad_residual", "grad_residual", TOKENS, COORDINATES, False, ("backward.grad_output",),
         BACKWARD_LAYER, saved=False),
    Step("backward.grad_normed", "grad_normed", TOKENS, COORDINATES, False, ("backward.grad_x",), BACKWARD_LAYER,
         saved=False),
    Step("backward.grad_input", "grad_input", TOKENS, COORDINATES, False, ("backward.grad_residual",
         "backward.grad_normed"), BACKWARD_LAYER, saved=False),
)
# fmt: on
# A stack attends to itself: the rows of a layer's streams (normed, residual, stream) are its tokens, its queries.
BY_NAME = {step.name: step for step in CALCULATION}
INDEX = {step.name: index for index, step in enumerate(CALCULATION)}
# fmt: off
SOFTMAX = (  # the softmax homework: a row of logits s (divided by T first), m = max, s − m, e^(s − m), ...
    Step("max", "stable.max", ROWS, NONE, False, (), LOGITS),
    Step("shifted", "stable.shifted", ROWS, VOCABULARY, False, ("max",), LOGITS),
    Step("exp", "stable.exp", ROWS, VOCABULARY, False, ("shifted",), LOGITS),
    Step("sum", "stable.sum", ROWS, NONE, False, ("exp",), LOGITS),
    Step("logsumexp", "stable.logsumexp", ROWS, NONE, False, ("max", "sum"), LOGITS),
    Step("probabilities", "stable.probabilities", ROWS, VOCABULARY, False, ("exp", "sum"), LOGITS),
    Step("kept", "filtered.kept", ROWS, VOCABULARY, False, ("probabilities",), LOGITS),
    Step("filtered", "filtered.probabilities", ROWS, VOCABULARY, False, ("probabilities", "kept"), LOGITS),
    Step("cross_entropy", "cross_entropy.per_row", ROWS, NONE, False, ("logsumexp", "probabilities"), LOGITS),
    Step("grad_logits", "cross_entropy.gradient", ROWS, VOCABULARY, False, ("probabilities",), LOGITS),
)
# fmt: on
SOFTMAX_BY_NAME = {step.name: step for step in SOFTMAX}
SOFTMAX_INDEX = {step.name: index for index, step in enumerate(SOFTMAX)}


def names(place: str, **wanted: bool | str) -> tuple[str, ...]:
    """The names of the steps at `place` in the order of the calculation, those with the flags `wanted` only
    (`answered=True`, `saved=True`, ...)."""
    return tuple(
        step.name
        for step in CALCULATION
        if step.place == place and all(getattr(step, flag) == value for flag, value in wanted.items())
    )


HEAD_STEPS = names(HEAD, answered=True, group="")  # a head's steps in answers: queries, keys, values, dot, scores, ...
TILE_STEPS = names(HEAD, answered=True, group=TILED)  # a head's tiles: running_max, rescale, running_sum, accumulator
SHARED_STEPS = names(SHARED, answered=True)  # positioned (x + PE, before any head), concat, final
ANSWERED = (*HEAD_STEPS, *TILE_STEPS, *SHARED_STEPS)  # every step answers: may hold for a problem of one layer
STREAM_STEPS = names(LAYER, answered=True)  # a stacked layer's streams: mean, root, normed, residual, stream
DOCUMENTED_HEAD_STEPS = names(HEAD, answered=True, saved=True, group="")  # a head's steps in JSON and CSV
DOCUMENTED_SHARED_STEPS = names(SHARED, answered=True, saved=True)  # concat, final: in JSON, CSV and npz
SAVED_HEAD_STEPS = names(HEAD, saved=True)  # a head's steps in npz: those documented, and its bias
BACKWARD_STEPS = tuple(step.name for step in CALCULATION if step.place in BACKWARD_PLACES)  # answers: backward:
MASKABLE = tuple(step.name for step in CALCULATION if step.maskable and step.answered)  # where `masked` may be written
TUTORED = tuple(step.name for step in CALCULATION if step.tutored)  # what the tutor asks, in order


def order(steps: Steps) -> list[Key]:
    """Every step answers: may hold for `steps`, in the order of the calculation: x + PE, each head's (its tiles
    last), then concat, final."""
    heads = range(len(steps.heads))
    each_head = (*HEAD_STEPS, *TILE_STEPS)
    keys = [*((name, h) for h in heads for name in each_head), *((name, None) for name in SHARED_STEPS)]
    return sorted(keys, key=lambda key: position(*key))


@functools.lru_cache(maxsize=1024)
def depends(key: Key, heads: int) -> tuple[Key, ...]:
    """The answered steps whose numbers flow into step `key` of a problem of `heads` heads, however indirectly
    (asked for every step of every file graded: kept)."""
    found: list[Key] = []
    waiting = [(need, key[1]) for need in BY_NAME[key[0]].needs]
    while waiting:
        name, head = waiting.pop()
        step = BY_NAME[name]
        every = [None] if step.place != HEAD else [head] if head is not None else list(range(heads))
        for h in every:
            if (name, h) not in found:
                found.append((name, h))
                waiting += [(need, h) for need in step.needs]
    return tuple((name, head) for name, head in sorted(found, key=lambda k: position(k[0], k[1])) if name in ANSWERED)


def position(name: str, head: int | None, layer: int | None = None) -> tuple[int, int, int, int, int]:
    """Where step `name` (of `head`, of `layer`) comes in the calculation, as a key to sort reports by: the forward
    steps, then the backward pass's; each layer by layer: the steps before the heads (a normed stream, dO,
    d(concat)), each head's, each shared key/value head's, then the rest (concat, final, the streams, dX); a
    softmax homework's steps (no head) after them all, in their order."""
    if head is None and name in SOFTMAX_INDEX:
        return 0, layer or 0, 4, 0, len(CALCULATION) + SOFTMAX_INDEX[name]
    index, place = INDEX[name], BY_NAME[name].place
    backward = int(place in BACKWARD_PLACES)
    if head is not None:
        return backward, layer or 0, 2 if place == BACKWARD_KV else 1, head, index
    before = index < INDEX["backward.grad_values" if backward else "queries"]
    return backward, layer or 0, 0 if before else 3, 0, index


def reported(name: str, head: int | None) -> Step:
    """The step a check report names `name` (of `head`): the softmax homework's, which has no head, or the
    calculation's (its `exp` and `sum` always belong to a head)."""
    if head is None and name in SOFTMAX_BY_NAME:
        return SOFTMAX_BY_NAME[name]
    return BY_NAME[name]


def _record(steps: Any, step: Step, head: int | None) -> Any:
    """The record holding `step`'s numbers: a head's (HeadSteps of `steps`, a Steps), the problem's (a Steps), or
    the layer's (`steps` is then a LayerSteps); for the backward pass's steps, its record's (`_gradients`)."""
    if step.place == HEAD:
        assert head is not None, step.name
        return steps.heads[head]
    if step.place in BACKWARD_PLACES:
        return _gradients(steps.backward, step.place, head)
    return steps


def _gradients(record: Any, place: str, head: int | None) -> Any:
    """Where a backward step's numbers are in `record` (attncli.backward.Gradients, a LayerGradients for a layer's
    own steps; None when no gradient is asked for): a head's, a shared key/value head's (`head` is then its index),
    or, for a head's step of head None, the top level's key of the same name, a mapping."""
    if record is None or place in (BACKWARD, BACKWARD_LAYER):
        return record
    if place == BACKWARD_KV:
        return record.kv_heads[head] if head is not None and head < len(record.kv_heads) else None
    if head is not None:
        return record.heads[head] if head < len(record.heads) else None
    return {"grad_output": record.grad_output, "grad_bias": record.grad_bias, **dict(record.shared)}


def _value(record: Any, step: Step) -> Any:
    """The field of `step` in `record`: a forward record has it, a dotted path (`tiles.running_max`) followed down,
    None where a part of it is None; a backward one may not (None then)."""
    if step.place not in BACKWARD_PLACES:
        for part in step.field.split("."):
            if record is None:
                return None
            record = getattr(record, part)
        return record
    return record.get(step.field) if isinstance(record, dict) else getattr(record, step.field, None)


def each(steps: Steps, wanted: tuple[str, ...], head: int | None = None) -> Iterator[tuple[Step, np.ndarray]]:
    """The steps `wanted` of `head` (None: the problem's own) that `steps` has, in order, each with its numbers as
    the documents hold them (its field)."""
    for name in wanted:
        found = matrix(steps, name, head)
        if found is not None:
            yield BY_NAME[name], found


def present(steps: Steps | LayerSteps, name: str, head: int | None = None) -> bool:
    """Whether this problem (or layer) has step `name` for `head`: no q·k when the scores are given, no concat with
    one head and no W_O, no residual step unless the norm is placed post, ..."""
    step = BY_NAME[name]
    record = _record(steps, step, head)
    if step.applies is not None:
        return step.applies(record)
    return _value(record, step) is not None


def computed(steps: Steps, name: str, head: int | None = None) -> bool:
    """Whether a student computes step `name`: the problem has it and does not give it (queries, keys and values
    are computed from x and W, not copied; given scores are not computed)."""
    if not present(steps, name, head):
        return False
    given_in = BY_NAME[name].given_in
    if not given_in or head is None:
        return True
    from attncli.problem import Projection  # numpy's: not at import, as `--help` lists formats without numpy

    given = getattr(steps.heads[head].spec, given_in)
    return given is None or isinstance(given, Projection)


def asked(steps: Steps, name: str, head: int | None = None) -> bool:
    """Whether a template asks a student for step `name` (of `head`): one they compute, and concat and final only
    where heads are concatenated (several heads, or W_O). What `require: all` requires."""
    before = name in INDEX and INDEX[name] < INDEX["queries"]  # x + PE, asked of one head too
    return (head is not None or steps.concat is not None or before) and computed(steps, name, head)


def matrix(steps: Steps | LayerSteps, name: str, head: int | None = None) -> np.ndarray | None:
    """Step `name`'s numbers (of `head`) as the record and the documents keep them, None where the problem does not
    have it."""
    step = BY_NAME[name]
    if not step.field or not present(steps, name, head):
        return None
    found: np.ndarray = _value(_record(steps, step, head), step)
    return found[:, None] if found.ndim == 1 else found  # a number per row (the row term D) is a column


def answered(steps: Steps | LayerSteps, name: str, head: int | None = None) -> np.ndarray | None:
    """Step `name`'s numbers (of `head`) as an answer of it holds them (templates, keys, the shape answers: read),
    None where the problem does not have it: the record's, but the scores before a bias (see the module's note)."""
    step = BY_NAME[name]
    if not step.truth or not present(steps, name, head):
        return matrix(steps, name, head)
    found: np.ndarray = getattr(_record(steps, step, head), step.truth)
    return found


def labels(
    problem: Problem, name: str, width: int, height: int | None = None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of step `name`'s rows and columns, as answers: and check's reports give them: query tokens, every
    token, or each query's tiles (`bank · 1`, `bank · 2`, ...); key tokens, or the coordinates (or tiles) "1", "2", ...
    of a step `width` numbers wide (and, for a weight's gradient, `height` numbers high)."""
    step = BY_NAME[name]
    if step.rows == COORDINATES:
        assert height is not None, name
        rows = coordinates(height)
    elif step.rows == QUERY_TILES:
        tiles = coordinates(tile_count(problem))
        rows = tuple(f"{query} · {tile}" for query in problem.query_tokens for tile in tiles)
    else:
        rows = problem.query_tokens if step.rows == QUERIES else problem.tokens
    columns = problem.tokens if step.columns == KEYS else coordinates(width)
    return rows, columns


def tile_count(problem: Problem) -> int:
    """How many tiles of `tiles:` keys cover a query's keys: ⌈S/B⌉ (a problem with tiles)."""
    assert problem.tiles is not None, "a problem whose softmax is written out tile by tile"
    return -(-len(problem.tokens) // problem.tiles)


def coordinates(width: int) -> tuple[str, ...]:
    """The names of a vector's coordinates, from 1."""
    return tuple(str(j + 1) for j in range(width))
