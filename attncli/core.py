"""The attention calculation itself: pure numpy, no I/O, every intermediate kept.

Shapes: L queries, S keys/values, d_q/d_k query and key width, d_v value width,
H heads. Rows follow the queries, columns the keys, as in the article's note 2:
Z = softmax(Q·Kᵀ/√d_k)·V.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attncli.problem import Head, Operand, Problem, Projection, Score

COSINE_EPS = 1e-8  # as torch.nn.functional.cosine_similarity
EXP_DISPLAY_LIMIT = 700.0  # beyond this e^s overflows float64, so displayed exponentials are shifted


@dataclass(frozen=True)
class HeadSteps:
    """Every number one head produces, from its vectors to its output."""

    head: Head
    queries: np.ndarray | None  # (L, d_q), None when scores were given
    keys: np.ndarray | None  # (S, d_k)
    values: np.ndarray  # (S, d_v)
    raw: np.ndarray  # (L, S) before the scale: q·k, cosine, q·W·kᵀ, additive, or the given scores
    hidden: np.ndarray | None  # (L, S, d_a) additive only: tanh(q·W_query + k·W_key)
    scores: np.ndarray  # (L, S) raw × scale; -inf where masked
    shift: np.ndarray  # (L,) subtracted before exp in `exp`: 0 unless e^s would overflow
    exp: np.ndarray  # (L, S) e^(scores - shift); 0 where masked
    weights: np.ndarray  # (L, S) softmax over keys; exactly 0 where masked
    output: np.ndarray  # (L, d_v) weights · values


@dataclass(frozen=True)
class Steps:
    """The whole calculation of a problem: the record every output format renders."""

    problem: Problem
    heads: tuple[HeadSteps, ...]
    concat: np.ndarray | None  # (L, Σ d_v) with several heads or W_O; else None
    output: np.ndarray  # (L, d_out) the final result


def compute(problem: Problem) -> Steps:
    heads = tuple(attend(head, problem.mask) for head in problem.heads)
    if len(heads) == 1 and problem.w_o is None:
        return Steps(problem, heads, None, heads[0].output)
    concat = np.concatenate([h.output for h in heads], axis=1)  # (L, Σ d_v)
    output = concat @ problem.w_o if problem.w_o is not None else concat  # (L, d_out)
    return Steps(problem, heads, concat, output)


def attend(head: Head, mask: np.ndarray) -> HeadSteps:
    """One head: compatibility, scale, mask, softmax, weighted sum of values."""
    values = project(head.values)  # (S, d_v)
    if head.scores is not None:
        queries = keys = hidden = None
        raw = head.scores  # (L, S)
    else:
        queries, keys = project(head.queries), project(head.keys)  # (L, d_q), (S, d_k)
        raw, hidden = compatibility(head.score, queries, keys)  # (L, S), (L, S, d_a) | None
    scores = np.where(mask, raw * head.score.scale, -np.inf)  # (L, S)
    weights = softmax(scores)  # (L, S)
    row_max = scores.max(axis=1)  # (L,)
    shift = np.where(np.abs(row_max) > EXP_DISPLAY_LIMIT, row_max, 0.0)  # (L,)
    exp = np.exp(scores - shift[:, None])  # (L, S)
    output = weights @ values  # (L, d_v)
    return HeadSteps(head, queries, keys, values, raw, hidden, scores, shift, exp, weights, output)


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
    dot = queries @ keys.T  # (L, S)
    if score.kind == "cosine":
        norms = np.linalg.norm(queries, axis=1)[:, None] * np.linalg.norm(keys, axis=1)[None, :]  # (L, S)
        return dot / np.maximum(norms, COSINE_EPS), None
    return dot, None


def softmax(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax, shifted by the row maximum; -inf cells get exactly 0.

    Every row must have a finite cell (the problem parser guarantees it).
    """
    shifted = scores - scores.max(axis=1, keepdims=True)  # (L, S)
    exp = np.exp(shifted)  # (L, S)
    return exp / exp.sum(axis=1, keepdims=True)  # (L, S)
