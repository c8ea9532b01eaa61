"""The attention calculation itself: pure numpy, no I/O, every intermediate kept.

Shapes: L queries, S keys/values, d_q/d_k query and key width, d_v value width,
H heads. Rows follow the queries, columns the keys, as in the article's note 2:
Z = softmax(Q·Kᵀ/√d_k)·V.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attncli import positions
from attncli.errors import AttnError, fail
from attncli.problem import Head, Operand, PositionEncoding, Problem, Projection, Score

if TYPE_CHECKING:
    from attncli.backward import Gradients
    from attncli.tiles import Tiles

COSINE_EPS = 1e-8  # as torch.nn.functional.cosine_similarity: each norm is clamped to at least this
# Displayed exponentials are shifted when |s| passes this share of the largest exponent the dtype holds
# (709 for float64, 88 for float32), so that e^s, and a sum of very many of them, stays finite.
EXP_DISPLAY_SHARE = 0.8
HEAD_MATRICES = 6  # (L, S) matrices `attend` builds for a head whatever its score: see `bytes_needed`
KERNEL_SCORES = ("scaled_dot", "dot")  # q·kᵀ times a scale: what attncli.kernel computes
BIAS_MATRICES = 2  # ... and with a bias: the head's own (ALiBi's −m_h·|i − j|) and the scores plus it


class Rotation(NamedTuple):
    """RoPE in one head: each pair's frequency θ_i, the angles m·θ_i, and the queries and keys once turned."""

    style: str  # half | interleaved: which coordinates each pair turns together
    frequencies: np.ndarray  # (d/2,) θ_i = base^(−2i/d)
    query_angles: np.ndarray  # (L, d/2) m·θ_i at each query's position m
    key_angles: np.ndarray  # (S, d/2) n·θ_i at each key's position n
    queries: np.ndarray  # (L, d) the queries turned: what the scores are computed from
    keys: np.ndarray  # (S, d) the keys turned


class HeadSteps(NamedTuple):
    """Every number one head produces, from its vectors to its output."""

    spec: Head  # what the problem says of this head
    queries: np.ndarray | None  # (L, d_q), None when scores were given; with RoPE before the turn (see rotation)
    keys: np.ndarray | None  # (S, d_k)
    values: np.ndarray  # (S, d_v)
    dot: np.ndarray  # (L, S) the compatibility before the scale: q·k, cosine, q·W·kᵀ, additive, or the given scores
    hidden: np.ndarray | None  # (L, S, d_a) additive only: tanh(q·W_query + k·W_key)
    scores: np.ndarray  # (L, S) dot × scale (+ bias); -inf where masked
    shift: np.ndarray  # (L,) subtracted before exp in `exp`: 0 unless e^s would overflow or lose digits
    exp: np.ndarray  # (L, S) e^(scores - shift); 0 where masked
    weights: np.ndarray  # (L, S) exp / its row sum: softmax over keys; exactly 0 where masked
    output: np.ndarray  # (L, d_v) weights · values
    scaled: np.ndarray | None = None  # (L, S) dot × scale, before the bias; None without one
    bias: np.ndarray | None = None  # (L, S) added to the scaled scores before the mask and softmax
    rotation: Rotation | None = None  # RoPE: the queries and keys the scores use, turned by their positions
    logsumexp: np.ndarray | None = None  # (L,) ln Σ e^s = shift + ln Σ exp, with `stable:` or `tiles:` (attncli.tiles)
    tiles: Tiles | None = None  # with `tiles:`, the online softmax tile by tile

    @property
    def q(self) -> np.ndarray:
        """(L, d_q) the queries of a head that computes its scores; only given scores leave `queries` None."""
        assert self.queries is not None, f"{self.spec.name}: scores given, no queries"
        return self.queries

    @property
    def k(self) -> np.ndarray:
        """(S, d_k) the keys of a head that computes its scores; only given scores leave `keys` None."""
        assert self.keys is not None, f"{self.spec.name}: scores given, no keys"
        return self.keys

    # The numbers a student writes on the way that the record holds inside others (attncli.steps reads them)

    @property
    def turned_queries(self) -> np.ndarray | None:
        """(L, d_q) the queries turned by RoPE, what q·k multiplies; None without RoPE."""
        return None if self.rotation is None else self.rotation.queries

    @property
    def turned_keys(self) -> np.ndarray | None:
        """(S, d_k) the keys turned by RoPE; None without RoPE."""
        return None if self.rotation is None else self.rotation.keys

    @property
    def scaled_scores(self) -> np.ndarray:
        """(L, S) the scores before any bias, -inf where masked: `scores` itself without a bias."""
        if self.scaled is None:
            return self.scores
        before: np.ndarray = np.where(np.isneginf(self.scores), -np.inf, self.scaled)  # (L, S)
        return before

    @property
    def biased_scores(self) -> np.ndarray | None:
        """(L, S) the scores plus the bias, -inf where masked (what softmax reads); None without a bias."""
        return None if self.bias is None else self.scores

    @property
    def sums(self) -> np.ndarray:
        """(L, 1) each query's Σ e^s, what its e^s are divided by."""
        total: np.ndarray = self.exp.sum(axis=1, keepdims=True)  # (L, 1)
        return total


class Steps(NamedTuple):
    """The whole calculation of a problem: the record every output format renders."""

    problem: Problem
    heads: tuple[HeadSteps, ...]
    concat: np.ndarray | None  # (L, Σ d_v) with several heads or W_O; else None
    output: np.ndarray  # (L, d_out) the final result
    backward: Gradients | None = None  # every gradient, when the problem asks for them (attncli.backward)

    @property
    def positioned(self) -> np.ndarray | None:
        """(S, d) x + PE, what the projections multiply with sinusoidal positions; None without them."""
        encoding = self.problem.positions
        if encoding is None or encoding.x is None or encoding.encoding is None:
            return None
        total: np.ndarray = encoding.x + encoding.encoding  # (S, d)
        return total


class HeadOverview(NamedTuple):
    """What the summary of a large problem shows of one head: a few queries' rows, and a map."""

    name: str
    scores: np.ndarray  # (R, S) the kept queries' scores; -inf where masked
    weights: np.ndarray  # (R, S) their weights
    blocks: np.ndarray  # (M, C) the mean weight over each block of queries × keys
    fine: np.ndarray | None = None  # (M', C') the same over the finer blocks of `Overview.fine_edges`, when asked


Edges = tuple[np.ndarray, np.ndarray]  # where the blocks of a map start, and the count: rows (queries), columns (keys)


class Overview(NamedTuple):
    """The summary's numbers: a few queries in full and each head's weights averaged over blocks, never (L, S)."""

    problem: Problem
    rows: tuple[int, ...]  # the queries kept in full, in the order of the rows of `scores`, `weights`, `output`
    heads: tuple[HeadOverview, ...]
    output: np.ndarray  # (R, d_out) the kept queries' final outputs
    d_v: int  # the first head's value width
    fine_edges: Edges | None = None  # the blocks of each head's `fine` map (a figure's), when one was asked for


def overview(
    steps: Steps, rows: Sequence[int], shape: tuple[int, int], fine: tuple[int, int] | None = None
) -> Overview:
    """The summary's numbers from every step: rows `rows` of each head, and maps of at most `shape` blocks
    (and of at most `fine` blocks, when given)."""
    edges, fine_edges = map_edges_of(steps.problem, shape), None if fine is None else map_edges_of(steps.problem, fine)
    bins = key_bins(edges, fine_edges)
    kept = list(rows)
    heads = tuple(
        HeadOverview(
            head.spec.name,
            head.scores[kept],
            head.weights[kept],
            *block_maps(np.add.reduceat(head.weights, bins, axis=1), bins, edges, fine_edges),
        )
        for head in steps.heads
    )
    d_v = steps.heads[0].values.shape[1]
    return Overview(steps.problem, tuple(rows), heads, steps.output[kept], d_v, fine_edges)


def map_edges(count: int, most: int) -> np.ndarray:
    """Where each of at most `most` nearly equal blocks of `count` rows (or columns) starts, and `count`."""
    return np.linspace(0, count, min(most, count) + 1).astype(int)


def map_edges_of(problem: Problem, shape: tuple[int, int]) -> Edges:
    """The row and column edges of a map of `problem`'s (L, S) weights in at most `shape` blocks."""
    rows, columns = (map_edges(count, most) for count, most in zip(problem.mask.shape, shape))
    return rows, columns


def key_bins(edges: Edges, fine_edges: Edges | None = None) -> np.ndarray:
    """Where each bin of keys starts, such that every block of keys of both maps is a run of whole bins."""
    columns = edges[1] if fine_edges is None else np.union1d(edges[1], fine_edges[1])
    return columns[:-1]


def block_maps(
    bin_sums: np.ndarray, bins: np.ndarray, edges: Edges, fine_edges: Edges | None = None
) -> tuple[np.ndarray, np.ndarray | None]:
    """The block means of the map of `edges` (R, C), and of `fine_edges` when given, from the weights summed over
    each bin of keys (`key_bins`), query by query (L, B): one pass over the weights serves both maps."""

    def means(row_edges: np.ndarray, column_edges: np.ndarray) -> np.ndarray:
        runs = np.searchsorted(bins, column_edges[:-1])  # the first bin of each block of keys
        return block_means(np.add.reduceat(bin_sums, runs, axis=1), row_edges, column_edges)  # (R, C)

    return means(*edges), None if fine_edges is None else means(*fine_edges)


def block_map(matrix: np.ndarray, edges: Edges) -> np.ndarray:
    """The mean of `matrix` (L, S) over each block of `edges` (R, C)."""
    return block_means(np.add.reduceat(matrix, edges[1][:-1], axis=1), *edges)


def block_means(column_sums: np.ndarray, row_edges: np.ndarray, column_edges: np.ndarray) -> np.ndarray:
    """Each block's mean weight (R, C), from the weights summed over each block of keys, query by query (L, C)."""
    blocks = np.add.reduceat(column_sums, row_edges[:-1], axis=0)  # (R, C)
    means: np.ndarray = blocks / (np.diff(row_edges)[:, None] * np.diff(column_edges)[None, :])  # (R, C)
    return means


@np.errstate(over="ignore", invalid="ignore")  # an overflow is reported as an error, not as a warning
def compute(problem: Problem) -> Steps:
    """Every step of `problem`; an AttnError if finite inputs produce a number beyond float64's range."""
    heads = tuple(_attend(problem, index) for index in range(len(problem.heads)))
    if problem.stable or problem.tiles is not None:
        from attncli import tiles

        heads = tuple(tiles.worked(head, problem.tiles) for head in heads)
    concat, output = combine([head.output for head in heads], problem.w_o)
    try:
        return Steps(problem, heads, concat, _finite(output, "w_o"))
    except AttnError as error:
        raise error.at(source=problem.source) from None


def bytes_needed(
    scores: Sequence[Score | None],
    queries: int,
    keys: int,
    dtype: np.dtype,
    bias: bool = False,
    *,
    results_only: bool = False,
) -> int:
    """The memory `compute` takes for heads scored by `scores` over `queries` × `keys` cells, and the mask.

    Each head keeps five (L, S) matrices (compatibility, the scaled scores, the masked ones,
    e^s and the weights) and builds one more on the way to e^s (the shifted scores); additive scores
    also keep tanh(q·W_query + k·W_key), d_a numbers a cell, and need as much again while
    computing it. A `bias` adds two a head (its own bias, kept, and the scores plus it) and the
    problem's one matrix (the given bias, or ALiBi's distances). A score not read yet (None) counts
    as the least a head needs. With `results_only` (the output alone: `pipeline.result`) a
    dot-product head takes the blocked kernel and keeps no (L, S) matrix; the mask still counts,
    at a byte a cell at most (a bias or RoPE sends the problem down the every-step path, which
    `pipeline.result` checks again).
    """
    matrices = sum(_head_matrices(score, bias, results_only) for score in scores) + (1 if bias else 0)
    return queries * keys * (matrices * np.dtype(dtype).itemsize + 1)  # + 1 byte of mask per cell


def _head_matrices(score: Score | None, bias: bool, results_only: bool) -> int:
    """The (L, S) matrices (or their equal in numbers) one head scored by `score` keeps: see `bytes_needed`."""
    if results_only and (score is None or score.kind in KERNEL_SCORES):
        return 0
    hidden = 2 * score.v.shape[0] if score is not None and score.v is not None and score.kind == "additive" else 0
    return HEAD_MATRICES + (BIAS_MATRICES if bias else 0) + hidden


def combine(outputs: Sequence[np.ndarray], w_o: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray]:
    """The heads' outputs as one result: (concatenation, final output); (None, its output) for one head without W_O."""
    if len(outputs) == 1 and w_o is None:
        return None, outputs[0]
    concat = np.concatenate(outputs, axis=1)  # (L, Σ d_v)
    return concat, concat @ w_o if w_o is not None else concat  # (L, d_out)


def _attend(problem: Problem, index: int) -> HeadSteps:
    """`attend` for head `index`, an overflow named by file and, with several heads, by head."""
    try:
        bias = None if problem.bias is None else problem.bias.of(index)
        stable = problem.stable or problem.tiles is not None
        return attend(problem.heads[index], problem.mask, bias, problem.rope, stable=stable)
    except AttnError as error:
        if len(problem.heads) > 1:
            error.where.field = f"heads[{index + 1}].{error.where.field}"
        raise error.at(source=problem.source) from None


@np.errstate(over="ignore", invalid="ignore")
def attend(
    head: Head,
    mask: np.ndarray,
    bias: np.ndarray | None = None,
    rope: PositionEncoding | None = None,
    stable: bool = False,
) -> HeadSteps:
    """One head: compatibility, scale, bias, mask, softmax, weighted sum of values — every step kept.

    With `rope` the queries and keys are turned by their positions (attncli.positions) after the
    projection and before the compatibility; the record keeps them both ways.

    Two paths compute softmax(q·kᵀ·scale + mask)·v. This one (the CLI's) builds each (L, S)
    intermediate in float64 or the problem's dtype, for display and grading, and takes every
    score kind. `attncli.kernel.attention` (the library's) takes dot-product scores only and
    keeps nothing: blocks of query rows, threads, O(L + S) memory. Given the same dot-product
    problem they agree within rounding, tiny and huge values included (tests/test_kernel.py), not
    to the bit: the kernel scales q before q·kᵀ and sums the weights inside its last matrix product.

    Softmax is computed once: the e^s shown (shifted only as `display_shift` says) are the
    very numbers divided by their sum to give the weights, so e^s / Σ = weight exactly as shown.
    `stable` shifts every row by its max, the stable softmax written out (`--stable`, `--tiles`).
    """
    values = _finite(project(head.values), "values")  # (S, d_v)
    rotation = None
    if head.scores is not None:
        queries = keys = hidden = None
        compat = head.scores  # (L, S)
    else:
        assert head.queries is not None and head.keys is not None, "the parser gives both when scores are not given"
        queries = _finite(project(head.queries), "queries")  # (L, d_q)
        keys = _finite(project(head.keys), "keys")  # (S, d_k)
        rotation = None if rope is None else rotate(rope, queries, keys)
        used = (queries, keys) if rotation is None else (rotation.queries, rotation.keys)
        compat, hidden = compatibility(head.score, *used)  # (L, S), (L, S, d_a) | None
        _finite(compat, "scores")
    scaled = _finite(compat * head.score.scale, "scores")  # (L, S)
    biased = scaled if bias is None else _finite(scaled + bias, "bias")  # (L, S)
    scores = np.where(mask, biased, -np.inf)  # (L, S)
    shift = scores.max(axis=1) if stable else display_shift(scores)  # (L,)
    exp = np.exp(scores - shift[:, None])  # (L, S)
    weights = exp / exp.sum(axis=1, keepdims=True)  # (L, S)
    output = _finite(weights @ values, "output")  # (L, d_v)
    before = None if bias is None else scaled
    return HeadSteps(
        head, queries, keys, values, compat, hidden, scores, shift, exp, weights, output, before, bias, rotation
    )


def rotate(rope: PositionEncoding, queries: np.ndarray, keys: np.ndarray) -> Rotation:
    """RoPE: queries (L, d) and keys (S, d) turned pair by pair by m·θ_i at their positions."""
    width = queries.shape[1]
    query_angles = positions.angles(rope.query_at, width, rope.base)  # (L, d/2)
    key_angles = positions.angles(rope.key_at, width, rope.base)  # (S, d/2)
    return Rotation(
        style=rope.style,
        frequencies=positions.frequencies(width, rope.base, queries.dtype),
        query_angles=query_angles,
        key_angles=key_angles,
        queries=positions.rotate(queries, query_angles, rope.style),
        keys=positions.rotate(keys, key_angles, rope.style),
    )


def display_shift(scores: np.ndarray) -> np.ndarray:
    """What each row subtracts before e^s (L,): 0, so that e^s is shown as it is, unless that loses digits.

    A row is shifted by its maximum when that maximum passes the display limit (e^s, or their
    sum, would overflow), or when some e^s would be subnormal although its weight is not
    (scores far below zero): the weights are e^s / Σ e^s and must be as exact as softmax's.
    """
    row_max = scores.max(axis=1)  # (L,)
    info = np.finfo(scores.dtype)
    limit = EXP_DISPLAY_SHARE * np.log(info.max)
    floor = np.log(info.tiny)  # e^s below e^floor is subnormal: fewer significant digits
    lost = ((scores < floor) & (scores - row_max[:, None] >= floor)).any(axis=1)  # (L,)
    return np.where((np.abs(row_max) > limit) | lost, row_max, 0).astype(scores.dtype)


def project(operand: Operand) -> np.ndarray:
    """Q = X·W_Q (row vectors, as in the article), or the matrix as given."""
    return operand.x @ operand.w if isinstance(operand, Projection) else operand


def compatibility(score: Score, queries: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """How well each query matches each key, before any scale."""
    if score.kind == "additive":
        hidden = np.tanh((queries @ score.w_query)[:, None, :] + (keys @ score.w_key)[None, :, :])  # (L, S, d_a)
        return hidden @ score.v, hidden  # (L, S)
    if score.kind == "general":
        return queries @ score.w @ keys.T, None  # (L, S)
    if score.kind == "cosine":
        return _cosine(queries, keys), None
    return queries @ keys.T, None  # (L, S)


def _cosine(queries: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """q·k / (max(‖q‖, ε)·max(‖k‖, ε)), rows with large entries first divided by a power of two.

    The cosine of [1e200, 1e200] is finite though q·k and ‖q‖² are not. Dividing by a power of two
    is exact, so wherever nothing overflows the result is the same number as without it. Rows are
    never scaled up: a norm small enough for its squares to underflow is below ε and clamped anyway.
    """
    q_exp, k_exp = np.maximum(_exponents(queries), 0), np.maximum(_exponents(keys), 0)  # (L,), (S,)
    q, k = np.ldexp(queries, -q_exp[:, None]), np.ldexp(keys, -k_exp[:, None])  # entries ≤ 1 in size
    eps = queries.dtype.type(COSINE_EPS)
    q_norms = np.maximum(_sum_norm(q), np.ldexp(eps, -q_exp))  # (L,) max(‖q‖, ε) / 2^q_exp
    k_norms = np.maximum(_sum_norm(k), np.ldexp(eps, -k_exp))  # (S,)
    cosines: np.ndarray = (q @ k.T) / (q_norms[:, None] * k_norms[None, :])  # (L, S)
    return cosines


def row_norms(rows: np.ndarray) -> np.ndarray:
    """The Euclidean norm of each row (the last axis), without squaring past float's range.

    np.linalg.norm squares first, so ‖[1e200, 1e200]‖ comes out inf; here each row is divided
    by a power of two near its largest entry before squaring (exact), and multiplied back after.
    The result is inf only where the true norm is beyond float's range.
    """
    exponents = _exponents(rows)
    with np.errstate(over="ignore"):  # a true norm beyond float's range is inf, for the caller to refuse
        norms: np.ndarray = np.ldexp(_sum_norm(np.ldexp(rows, -exponents[..., None])), exponents)
    return norms


def _exponents(rows: np.ndarray) -> np.ndarray:
    """Per row, the e with 2^(e-1) ≤ max |entry| < 2^e (0 for a row of zeros)."""
    exponents: np.ndarray = np.frexp(np.abs(rows).max(axis=-1, initial=0))[1]
    return exponents


def _sum_norm(rows: np.ndarray) -> np.ndarray:
    norms: np.ndarray = np.sqrt((rows * rows).sum(axis=-1))
    return norms


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax, shifted by the row maximum; -inf cells get exactly 0.

    A row with no finite cell comes out NaN: the problem parser never lets a query
    lose every key, but the grader's replay of a mistaken mask may.
    """
    shifted = scores - scores.max(axis=1, keepdims=True)  # (L, S)
    exp = np.exp(shifted)  # (L, S)
    weights: np.ndarray = exp / exp.sum(axis=1, keepdims=True)  # (L, S)
    return weights


def _finite(array: np.ndarray, field: str) -> np.ndarray:
    """`array` unchanged, or an error: finite inputs can still multiply past float64's range (1e200 · 1e200)."""
    if not np.isfinite(array).all():
        raise fail("core.overflow").at(field=field)
    return array
