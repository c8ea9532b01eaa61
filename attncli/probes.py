"""Looking past the weights: norm-based contributions, interventions, comparisons, the √d_k demonstration.

Pure numpy, no I/O. A weight map only suggests where a head looks; these records
let a learner check it on their own numbers. Each function reads a `Steps` record
(or its problem) and returns a new frozen record; the original is never modified,
and every recomputation goes through `core.compute` on a modified copy of the problem.

Shapes: L queries, S keys, H heads, d_out the width of the final output.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attncli import core
from attncli.core import Steps
from attncli.errors import fail, listed

TIE = 1e-12  # relative gap below which two weights (or norms) count as equal when ranking
PERMUTE_TRIES = 100  # redraws allowed to avoid a permutation that leaves every key in place
SCALING_BLOCK = 1 << 20  # numbers drawn at a time by the Monte Carlo, to bound its memory
MAX_DK = 4096  # with at most 4096 keys, one sample is at most 16 Mi numbers (128 MiB)


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
    """Weights against the norms of the weighted, transformed vectors they multiply."""
    mask = steps.problem.mask
    transformed = _transformed(steps)  # H × (S, d_out)
    heads = []
    for head, f in zip(steps.heads, transformed):
        length = np.linalg.norm(f, axis=1)  # (S,)
        weighted = head.weights * length[None, :]  # (L, S): α ≥ 0, so ‖α·f‖ = α·‖f‖
        heads.append(HeadNorms(head.spec.name, length, weighted, _ranking(head.weights, weighted, mask)))
    weights = _weights(steps)  # (H, L, S)
    stacked = np.stack(transformed)  # (H, S, d_out)
    summed = np.stack(
        [np.linalg.norm(np.einsum("hs,hsd->sd", weights[:, i, :], stacked), axis=1) for i in range(mask.shape[0])]
    )  # (L, S)
    mean = weights.mean(axis=0)  # (L, S)
    return Norms(tuple(heads), steps.problem.w_o is not None, mean, summed, _ranking(mean, summed, mask))


def _transformed(steps: Steps) -> list[np.ndarray]:
    """f_h(x_j) for every head, each (S, d_out), in the space of the final output."""
    problem = steps.problem
    if len(steps.heads) == 1 and problem.w_o is None:
        return [steps.heads[0].values]
    edges = np.cumsum([0, *(head.values.shape[1] for head in steps.heads)])
    out = []
    for h, head in enumerate(steps.heads):
        if problem.w_o is not None:
            out.append(head.values @ problem.w_o[edges[h] : edges[h + 1]])
        else:
            placed = np.zeros((head.values.shape[0], edges[-1]), dtype=head.values.dtype)
            placed[:, edges[h] : edges[h + 1]] = head.values
            out.append(placed)
    return out


def _ranking(weights: np.ndarray, contributions: np.ndarray, mask: np.ndarray) -> Ranking:
    by_weight, by_norm = _ranks(weights, mask), _ranks(contributions, mask)
    return Ranking(by_weight, by_norm, by_weight != by_norm)


def _ranks(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """1 + how many allowed keys are clearly larger, so equal values share a place; 0 where masked."""
    tolerance = TIE * np.abs(values).max(axis=1, keepdims=True)[:, :, None]  # (L, 1, 1)
    larger = (values[:, None, :] > values[:, :, None] + tolerance) & mask[:, None, :]  # (L, S, S)
    return np.where(mask, 1 + larger.sum(axis=2), 0)


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
    changed = core.compute(dataclasses.replace(problem, mask=mask))
    return _measured(steps, "ablate", target, mask, _weights(changed), changed.output)


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
    kind, _, seed = text.strip().partition(":")
    if kind == "uniform" and not seed:
        return kind, 0
    if kind == "permute" and (not seed or seed.strip().isdigit()):
        return kind, int(seed) if seed else 0
    raise fail("analysis.bad_weights", got=text)


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
    original = _weights(steps)
    delta = np.linalg.norm(output - steps.output, axis=1)
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
        difference = out_b - out_a if out_a.shape == out_b.shape else None
        distance = None if difference is None else float(np.linalg.norm(difference))
        allowed = a.problem.mask[row_a], b.problem.mask[row_b]
        rows.append(QueryComparison(name, *allowed, pairs, out_a, out_b, difference, distance))
    return Comparison(a, b, tuple(rows))


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


def scaling(dims: Sequence[int], keys: int = 16, samples: int = 2000, seed: int = 0) -> Scaling:
    """Monte Carlo under note 1's assumption: components of q and k independent, mean 0, variance 1.

    Each d_k draws from its own generator seeded with (seed, d_k), so a row does not
    depend on which other d_k are asked for.
    """
    if not dims or not all(1 <= d <= MAX_DK for d in dims):
        raise fail("analysis.bad_dk", got=",".join(str(d) for d in dims), limit=MAX_DK)
    if keys < 1 or samples < 2:
        raise fail("analysis.bad_samples")
    return Scaling(keys, samples, seed, tuple(_scaling_row(d, keys, samples, seed) for d in dims))


def _scaling_row(d_k: int, keys: int, samples: int, seed: int) -> ScalingRow:
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
    count = samples * keys
    var_dot = (square - total * total / count) / (count - 1)
    return ScalingRow(d_k, float(var_dot), float(var_dot / d_k), float(top_dot / samples), float(top_scaled / samples))
