"""Attention in plain Python (math module only), written apart from attncli.core to check it.

Matrices are lists of rows of floats. Nothing here shares code with the numpy core: the
loops follow the article's formulas one number at a time, so a slip in either shows up
as a disagreement. Rows follow the queries, columns the keys (the article's note 2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

Vector = list[float]
Matrix = list[list[float]]

COSINE_EPS = 1e-8  # torch.nn.functional.cosine_similarity clamps each norm to at least eps


@dataclass(frozen=True)
class HeadResult:
    raw: Matrix  # (L, S) before the scale
    scores: Matrix  # (L, S) after the scale; -inf where masked
    weights: Matrix  # (L, S)
    output: Matrix  # (L, d_v)


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    assert len(a) == len(b), (len(a), len(b))
    return math.fsum(x * y for x, y in zip(a, b))


def matmul(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> Matrix:
    """Row vectors times a matrix, as in the article's Q = X·W_Q."""
    columns = list(zip(*b))
    return [[dot(row, column) for column in columns] for row in a]


def norm(a: Sequence[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in a))


def compatibility(kind: str, q: Vector, k: Vector, **score: object) -> float:
    """One query against one key, before the scale."""
    if kind in ("scaled_dot", "dot"):
        return dot(q, k)
    if kind == "cosine":
        return dot(q, k) / (max(norm(q), COSINE_EPS) * max(norm(k), COSINE_EPS))
    if kind == "general":
        w = score["w"]  # (d_q, d_k): q·W·kᵀ
        return dot(matmul([q], w)[0], k)
    if kind == "additive":
        w_query, w_key, v = score["w_query"], score["w_key"], score["v"]
        left, right = matmul([q], w_query)[0], matmul([k], w_key)[0]
        return dot(v, [math.tanh(a + b) for a, b in zip(left, right)])
    raise ValueError(kind)


def default_scale(kind: str, d_k: int) -> float:
    return 1 / math.sqrt(d_k) if kind == "scaled_dot" else 1.0


def softmax(row: Sequence[float], allowed: Sequence[bool]) -> Vector:
    """Softmax over the allowed cells; excluded cells get exactly 0."""
    top = max(s for s, ok in zip(row, allowed) if ok)
    exps = [math.exp(s - top) if ok else 0.0 for s, ok in zip(row, allowed)]
    total = math.fsum(exps)
    return [e / total for e in exps]


def weighted_sum(weights: Sequence[float], values: Matrix) -> Vector:
    return [math.fsum(w * v[c] for w, v in zip(weights, values)) for c in range(len(values[0]))]


def head(
    queries: Matrix | None,
    keys: Matrix | None,
    values: Matrix,
    *,
    kind: str = "scaled_dot",
    scale: float | None = None,
    mask: Sequence[Sequence[bool]] | None = None,
    scores: Matrix | None = None,
    **score: object,
) -> HeadResult:
    """One head. With `scores` given, queries and keys are not used and the scale defaults to 1."""
    if scores is not None:
        raw = [list(row) for row in scores]
        factor = 1.0 if scale is None else scale
    else:
        raw = [[compatibility(kind, q, k, **score) for k in keys] for q in queries]
        factor = default_scale(kind, len(keys[0])) if scale is None else scale
    mask = mask or [[True] * len(values) for _ in raw]
    scaled = [[s * factor if ok else -math.inf for s, ok in zip(row, allowed)] for row, allowed in zip(raw, mask)]
    weights = [softmax(row, allowed) for row, allowed in zip(scaled, mask)]
    return HeadResult(raw, scaled, weights, [weighted_sum(w, values) for w in weights])


def multi_head(outputs: Sequence[Matrix], w_o: Matrix | None) -> tuple[Matrix, Matrix]:
    """The concatenation of the heads' outputs (row by row), and its product with W_O if given."""
    concat = [[x for out in outputs for x in out[i]] for i in range(len(outputs[0]))]
    return concat, (matmul(concat, w_o) if w_o is not None else concat)


def causal(queries: int, keys: int) -> list[list[bool]]:
    """Query i sees keys 0..i (top-left aligned, like PyTorch's is_causal)."""
    return [[j <= i for j in range(keys)] for i in range(queries)]


def press_get_slopes(n: int) -> list[float]:
    """Press et al.'s `get_slopes` (github.com/ofirpress/attention_with_linear_biases, fairseq's
    multihead_attention.py), transcribed line for line."""

    def get_slopes_power_of_2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return (
        get_slopes_power_of_2(closest_power_of_2)
        + press_get_slopes(2 * closest_power_of_2)[0::2][: n - closest_power_of_2]
    )
