"""Looking past the weights: norm-based contributions, interventions, comparisons, the √d_k demonstration.

Pure numpy, no I/O. A weight map only suggests where a head looks; these records
let a learner check it on their own numbers. Each function reads a `Steps` record
(or its problem) and returns a new frozen record; the original is never modified,
and every recomputation goes through `core.compute` on a modified copy of the problem.

Shapes: L queries, S keys, H heads, d_out the width of the final output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from attncli import core
from attncli.core import Steps
from attncli.errors import fail, listed
from attncli.expr import quote, whole_number
from attncli.parsing.budget import within_budget
from attncli.yamldoc import did_you_mean

TIE = 1e-12  # relative gap below which two weights (or norms) count as equal when ranking
PERMUTE_TRIES = 100  # redraws allowed to avoid a permutation that leaves every key in place
SCALING_BLOCK = 1 << 20  # numbers drawn at a time by the Monte Carlo, to bound its memory
SCALING_BUDGET = 1 << 28  # steps (see `scaling_work`) the Monte Carlo may take: about ten seconds
SCALING_ROW_WORK = 8192  # what starting a generator and a row costs, in the same steps
MAX_DK = 4096  # with at most 4096 keys, one sample is at most 16 Mi numbers (128 MiB)
NORMS_BLOCK = 1 << 20  # numbers of Σ_h α·f_h(x) built at a time for the summed norms through W_O
RANK_BYTES = 9  # per cell of a Ranking: two int32 places and a bool


# Norm-based analysis (Kobayashi et al., 2020)


@dataclass(frozen=True)
class Ranking:
    """Each key's place (1 = largest) among the keys a query may use, by weight and by norm; 0 where masked."""

    by_weight: np.ndarray  # (L, S) int
    by_norm: np.ndarray  # (L, S) int
    disagree: np.ndarray  # (L, S) bool: the two orders put the key in different places


@dataclass(frozen=True)
class HeadNorms:
    name: str
    transformed: np.ndarray  # (S,) ‖f(x_j)‖
    weighted: np.ndarray  # (L, S) ‖α_ij·f(x_j)‖
    ranking: Ranking


@dataclass(frozen=True)
class Norms:
    """What reaches the output from each key, per head and summed over heads.

    f(x_j) is the value v_j (one head, no W_O), v_j·W_Oʰ (the head's rows of W_O),
    or, with several heads and no W_O, v_j placed in the head's columns of the
    concatenation; so Σ_j Σ_h α^h_ij·f_h(x_j) is always the final output of query i.
    """

    heads: tuple[HeadNorms, ...]
    through_w_o: bool
    mean_weights: np.ndarray  # (L, S) α averaged over heads, the weight the summed norms are ranked against
    summed: np.ndarray  # (L, S) ‖Σ_h α^h_ij·f_h(x_j)‖
    summed_ranking: Ranking


def norms(steps: Steps) -> Norms:
    """Weights against the norms of the weighted, transformed vectors they multiply.

    Never builds an (L, S, S) or a whole (L, S, d_out) array: α ≥ 0, so ‖α·f‖ = α·‖f‖ for one
    head; the summed norms through W_O take a block of queries at a time; ranks come from sorting.
    """
    problem = steps.problem
    mask, w_o = problem.mask, problem.w_o
    weights = _weights(steps)  # (H, L, S)
    transformed = _transformed(steps)  # H × (S, d_out), or H × (S, d_v) without W_O
    heads = []
    for head, alpha, f in zip(steps.heads, weights, transformed):
        length = _finite(core.row_norms(f), "norms", problem.source)  # (S,)
        weighted = alpha * length[None, :]  # (L, S): α ≥ 0, so ‖α·f‖ = α·‖f‖
        heads.append(HeadNorms(head.spec.label, length, weighted, _ranking(alpha, weighted, mask)))
    if len(heads) == 1:
        summed = heads[0].weighted  # one head: nothing to sum
    elif w_o is None:  # each head fills its own columns of the concatenation: the squares add up
        summed = core.row_norms(np.stack([head.weighted for head in heads], axis=-1))  # (L, S)
    else:
        summed = _summed_through_w_o(weights, np.stack(transformed))  # (L, S)
    summed = _finite(summed, "norms", problem.source)
    mean = weights.mean(axis=0)  # (L, S)
    return Norms(tuple(heads), w_o is not None, mean, summed, _ranking(mean, summed, mask))


def _transformed(steps: Steps) -> list[np.ndarray]:
    """f_h(x_j) for every head: v_j·W_Oʰ (S, d_out) through W_O; else v_j (S, d_v), whose norm is its placed copy's."""
    w_o = steps.problem.w_o
    if w_o is None:
        return [head.values for head in steps.heads]
    edges = np.cumsum([0, *(head.values.shape[1] for head in steps.heads)])
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow comes out inf and is refused by `norms`
        return [head.values @ w_o[edges[h] : edges[h + 1]] for h, head in enumerate(steps.heads)]


def _summed_through_w_o(weights: np.ndarray, transformed: np.ndarray) -> np.ndarray:
    """‖Σ_h α^h_ij·f_h(x_j)‖ (L, S) from weights (H, L, S) and f (H, S, d_out), NORMS_BLOCK numbers at a time."""
    _, queries, keys = weights.shape
    rows = max(1, NORMS_BLOCK // max(1, keys * transformed.shape[2]))
    summed = np.empty((queries, keys), dtype=transformed.dtype)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow comes out inf and is refused by `norms`
        for start in range(0, queries, rows):
            block = slice(start, start + rows)
            total = sum(alpha[block, :, None] * f[None, :, :] for alpha, f in zip(weights, transformed))  # (B, S, d)
            summed[block] = core.row_norms(total)
    return summed


def check_memory(steps: Steps, norms: bool, interventions: int) -> None:
    """Refuse, with the parser's message, an analysis that would take the run past the memory budget.

    The calculation's own (L, S) matrices stay alive; norms add their weighted norms and ranks,
    each intervention keeps its weights and mask, and an ablation recomputes the whole problem once more.
    """
    queries, keys = steps.problem.mask.shape
    heads, itemsize, cells = len(steps.heads), steps.output.itemsize, steps.problem.mask.size
    arrays = [a for h in steps.heads for a in (h.dot, h.hidden, h.scores, h.exp, h.weights) if a is not None]
    held = steps.problem.mask.nbytes + sum(a.nbytes for a in arrays)
    needed = held
    if norms:
        width = steps.output.shape[1] if steps.problem.w_o is not None else 0
        per_cell = heads * (3 * itemsize + RANK_BYTES) + 2 * itemsize + RANK_BYTES
        needed += cells * per_cell + heads * keys * width * itemsize + 3 * NORMS_BLOCK * itemsize
    if interventions:
        needed += held + interventions * cells * (heads * itemsize + 1)
    within_budget(needed, heads, queries, keys, steps.problem.source)


def _finite(array: np.ndarray, field: str, source: str | None) -> np.ndarray:
    """`array` unchanged, or the core's overflow error: ‖f‖ of finite vectors can still pass float's range."""
    if not np.isfinite(array).all():
        raise fail("core.overflow").at(source=source, field=field)
    return array


def _ranking(weights: np.ndarray, contributions: np.ndarray, mask: np.ndarray) -> Ranking:
    by_weight, by_norm = _ranks(weights, mask), _ranks(contributions, mask)
    return Ranking(by_weight, by_norm, by_weight != by_norm)


def _ranks(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """1 + how many allowed keys are clearly larger, so equal values share a place; 0 where masked.

    Counted on each row sorted: O(S log S) time and O(S) memory per query.
    """
    ranks = np.zeros(values.shape, dtype=np.int32)  # (L, S)
    tolerance = TIE * np.abs(values).max(axis=1)  # (L,)
    for row, allowed, tie, out in zip(values, mask, tolerance, ranks):
        kept = row[allowed]
        order = np.argsort(kept)
        ascending = kept[order]
        placed = np.empty(len(kept), dtype=np.int32)
        placed[order] = 1 + len(kept) - np.searchsorted(ascending, ascending + tie, side="right")
        out[allowed] = placed
    return ranks


# Interventions


@dataclass(frozen=True)
class Intervention:
    """One change to the calculation and its effect, measured against the original.

    kind: "ablate" (keys removed as if masked; target = the tokens), "ablate_head"
    (a head's output zeroed before W_O; target = its name) or "weights" (each query's
    weights replaced; target = "uniform" or "permute:SEED").
    """

    kind: str
    target: str
    mask: np.ndarray  # (L, S) the keys each query may still use
    weights: np.ndarray  # (H, L, S) the weights after the change
    output: np.ndarray  # (L, d_out) the final output after the change
    delta: np.ndarray  # (L,) ‖output − original output‖
    tv: np.ndarray  # (H, L) total-variation distance between the new and the original weight rows


def ablate(steps: Steps, target: str) -> Intervention:
    """Remove the key/value positions named by `target` (`a` or `a+b`) from every query, then recompute.

    A name that is itself a token wins over splitting at `+`, so a token called `C++` still works.
    """
    problem = steps.problem
    names = [target] if target in problem.tokens else target.split("+")
    for name in names:
        if name not in problem.tokens:
            raise fail("analysis.unknown_token", name=name, names=listed(problem.tokens))
    removed = np.isin(np.array(problem.tokens, dtype=object), np.array(names, dtype=object))  # (S,)
    mask = problem.mask & ~removed[None, :]
    for row, name in enumerate(problem.query_tokens):
        if not mask[row].any():
            raise fail("analysis.ablate_everything", name=name, target=target)
    changed = core.compute(problem._replace(mask=mask))
    return _measured(steps, "ablate", target, mask, _weights(changed), changed.output)


@np.errstate(over="ignore", invalid="ignore")  # an overflow comes out inf and is refused by `_measured`
def ablate_head(steps: Steps, number: int) -> Intervention:
    """Zero head `number` (1-based) before W_O: what the other heads carry on their own."""
    if not 1 <= number <= len(steps.heads):
        raise fail("analysis.unknown_head", number=number, count=len(steps.heads))
    outputs = [np.zeros_like(h.output) if i == number - 1 else h.output for i, h in enumerate(steps.heads)]
    name = steps.heads[number - 1].spec.name
    _, output = core.combine(outputs, steps.problem.w_o)
    return _measured(steps, "ablate_head", name, steps.problem.mask, _weights(steps), output)


def parse_weights(text: str) -> tuple[str, int]:
    """`uniform`, `permute` or `permute:SEED` as (kind, seed); the seed defaults to 0 (uniform ignores it)."""
    kind, colon, seed = text.strip().partition(":")
    if kind == "uniform" and not colon:
        return kind, 0
    number = whole_number(seed) if colon else 0
    if kind == "permute" and number is not None:
        return kind, number
    raise fail("analysis.bad_weights", got=quote(text), hint=did_you_mean(kind, ("uniform", "permute")))


@np.errstate(over="ignore", invalid="ignore")  # an overflow comes out inf and is refused by `_measured`
def replace_weights(steps: Steps, kind: str, seed: int = 0) -> Intervention:
    """Give every query another distribution over the same allowed keys, and mix the values with it.

    uniform: an equal share for every allowed key. permute: each query's weights shuffled among its
    allowed keys by a seeded permutation (shared by the heads), as in Jain & Wallace's experiments.
    """
    mask = steps.problem.mask
    if kind == "uniform":
        row = mask / mask.sum(axis=1, keepdims=True)  # (L, S)
        weights = np.stack([row.astype(head.weights.dtype) for head in steps.heads])
        target = kind
    else:
        rng = np.random.default_rng(seed)
        orders = [_permutation(rng, allowed) for allowed in mask]  # L × (S,)
        weights = np.stack([np.stack([w[o] for w, o in zip(head.weights, orders)]) for head in steps.heads])
        target = f"permute:{seed}"
    _, output = core.combine([w @ head.values for w, head in zip(weights, steps.heads)], steps.problem.w_o)
    return _measured(steps, "weights", target, mask, weights, output)


def _permutation(rng: np.random.Generator, allowed: np.ndarray) -> np.ndarray:
    """An index order (S,) that shuffles the allowed keys among themselves; not the identity when avoidable."""
    order = np.arange(len(allowed))
    positions = np.flatnonzero(allowed)
    for _ in range(PERMUTE_TRIES):
        shuffled = rng.permutation(positions)
        if len(positions) < 2 or (shuffled != positions).any():
            break
    order[positions] = shuffled
    return order


def _weights(steps: Steps) -> np.ndarray:
    """Every head's weights, stacked: (H, L, S)."""
    return np.stack([head.weights for head in steps.heads])


def _measured(
    steps: Steps, kind: str, target: str, mask: np.ndarray, weights: np.ndarray, output: np.ndarray
) -> Intervention:
    original, source = _weights(steps), steps.problem.source
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow comes out inf and is refused here
        _finite(output, "output", source)
        delta = _finite(core.row_norms(output - steps.output), "output", source)
    tv = 0.5 * np.abs(weights - original).sum(axis=2)
    return Intervention(kind, target, mask, weights, output, delta, tv)


# Comparing two problems


@dataclass(frozen=True)
class HeadPair:
    """One head of each problem, for one query: the weights over each problem's own keys."""

    name_a: str
    name_b: str
    weights_a: np.ndarray  # (S_a,)
    weights_b: np.ndarray  # (S_b,)
    difference: np.ndarray | None  # weights_b − weights_a position by position; None when S_a ≠ S_b


@dataclass(frozen=True)
class QueryComparison:
    query: str
    allowed_a: np.ndarray  # (S_a,) the keys the query may use in A
    allowed_b: np.ndarray  # (S_b,)
    heads: tuple[HeadPair, ...]  # the first min(H_a, H_b) heads, paired in order
    output_a: np.ndarray
    output_b: np.ndarray
    difference: np.ndarray | None  # output_b − output_a; None when the widths differ
    distance: float | None  # ‖difference‖


@dataclass(frozen=True)
class Comparison:
    a: Steps
    b: Steps
    queries: tuple[QueryComparison, ...]


def compare(a: Steps, b: Steps) -> Comparison:
    """The same query tokens in two problems: same query, other neighbours, another mixture."""
    shared = [name for name in dict.fromkeys(a.problem.query_tokens) if name in b.problem.query_tokens]
    if not shared:
        raise fail(
            "analysis.no_shared_query",
            a=listed(a.problem.query_tokens),
            b=listed(b.problem.query_tokens),
        )
    rows = []
    for name in shared:
        row_a, row_b = a.problem.query_tokens.index(name), b.problem.query_tokens.index(name)
        pairs = tuple(
            _pair(ha.spec.name, hb.spec.name, ha.weights[row_a], hb.weights[row_b]) for ha, hb in zip(a.heads, b.heads)
        )
        out_a, out_b = a.output[row_a], b.output[row_b]
        difference, distance = _difference(out_a, out_b)
        allowed = a.problem.mask[row_a], b.problem.mask[row_b]
        rows.append(QueryComparison(name, *allowed, pairs, out_a, out_b, difference, distance))
    return Comparison(a, b, tuple(rows))


def _difference(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray | None, float | None]:
    """b − a and its norm, or (None, None) when the widths differ; an overflow is the core's error."""
    if a.shape != b.shape:
        return None, None
    with np.errstate(over="ignore", invalid="ignore"):
        difference = _finite(b - a, "output", None)
        return difference, float(_finite(core.row_norms(difference), "output", None))


def _pair(name_a: str, name_b: str, weights_a: np.ndarray, weights_b: np.ndarray) -> HeadPair:
    difference = weights_b - weights_a if weights_a.shape == weights_b.shape else None
    return HeadPair(name_a, name_b, weights_a, weights_b, difference)


# Why divide by √d_k (the article's note 1)


@dataclass(frozen=True)
class ScalingRow:
    d_k: int
    var_dot: float  # variance of q·k, ≈ d_k
    var_scaled: float  # variance of q·k/√d_k, ≈ 1
    max_weight_dot: float  # mean largest softmax weight over the keys, unscaled scores
    max_weight_scaled: float  # the same with the scores divided by √d_k


@dataclass(frozen=True)
class Scaling:
    keys: int
    samples: int
    seed: int
    rows: tuple[ScalingRow, ...]


def parse_dims(text: str) -> list[int]:
    """`--dk`: the d_k values, whole numbers from 1 to MAX_DK separated by commas."""
    parts = text.split(",")
    dims = [d for d in map(whole_number, parts) if d is not None and 1 <= d <= MAX_DK]
    if len(dims) < len(parts):
        raise fail("analysis.bad_dk", got=quote(text), limit=MAX_DK)
    return dims


def scaling_work(dims: Sequence[int], keys: int, samples: int) -> int:
    """The Monte Carlo's cost in steps of about 40 ns: numbers drawn, softmax cells (two each), a generator per d_k."""
    return sum(samples * (keys * (d_k + 2) + d_k) + SCALING_ROW_WORK for d_k in dims)


def scaling(
    dims: Sequence[int],
    keys: int = 16,
    samples: int = 2000,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
) -> Scaling:
    """Monte Carlo under note 1's assumption: components of q and k independent, mean 0, variance 1.

    Each d_k draws from its own generator seeded with (seed, d_k), so a row does not
    depend on which other d_k are asked for. A run beyond SCALING_BUDGET steps is refused
    before it starts; `progress`, if given, is told the steps done after each block.
    """
    if not dims or not all(1 <= d <= MAX_DK for d in dims):
        raise fail("analysis.bad_dk", got=",".join(str(d) for d in dims), limit=MAX_DK)
    if keys < 1 or samples < 2:
        raise fail("analysis.bad_samples")
    work = scaling_work(dims, keys, samples)
    if work > SCALING_BUDGET:
        raise fail("analysis.scaling_budget", work=f"{work:,}", limit=f"{SCALING_BUDGET:,}")
    report = progress or (lambda done: None)
    return Scaling(keys, samples, seed, tuple(_scaling_row(d, keys, samples, seed, report) for d in dims))


def _scaling_row(d_k: int, keys: int, samples: int, seed: int, progress: Callable[[int], None]) -> ScalingRow:
    rng = np.random.default_rng([seed, d_k])
    block = max(1, SCALING_BLOCK // (keys * d_k))
    total = square = top_dot = top_scaled = 0.0
    for start in range(0, samples, block):
        n = min(block, samples - start)
        q = rng.standard_normal((n, 1, d_k))
        k = rng.standard_normal((n, keys, d_k))
        dot = (q * k).sum(axis=2)  # (n, keys)
        total += dot.sum()
        square += (dot * dot).sum()
        top_dot += core.softmax(dot).max(axis=1).sum()
        top_scaled += core.softmax(dot / np.sqrt(d_k)).max(axis=1).sum()
        progress(n * (keys * (d_k + 2) + d_k))
    progress(SCALING_ROW_WORK)
    count = samples * keys
    var_dot = (square - total * total / count) / (count - 1)
    return ScalingRow(d_k, float(var_dot), float(var_dot / d_k), float(top_dot / samples), float(top_scaled / samples))
