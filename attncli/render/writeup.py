"""What every human format says in words (the mask, the score, the followed queries), told the same way."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from attncli.core import HeadSteps
from attncli.i18n import t
from attncli.problem import Problem, Projection

AUTO_FOLLOW = 3  # every query in detail up to this many; beyond, the weight matrix and the outputs
WRITE_OUT = 4  # q·k written term by term up to this many coordinates


@dataclass(frozen=True)
class Projected:
    """One of Q, K, V made from the inputs: name, its weight matrix's name, the operand, the result, row tokens."""

    name: str
    weight: str
    operand: Projection
    result: np.ndarray
    tokens: tuple[str, ...]


def followed(problem: Problem, follow: tuple[str, ...] | None) -> list[int]:
    """The rows of the queries written out in detail."""
    if follow:
        return [problem.query_tokens.index(name) for name in follow]
    return list(range(len(problem.query_tokens))) if len(problem.query_tokens) <= AUTO_FOLLOW else []


def projections(head: HeadSteps, problem: Problem) -> Iterator[Projected]:
    parts = (
        ("Q", "W_Q", head.head.queries, head.queries, problem.query_tokens),
        ("K", "W_K", head.head.keys, head.keys, problem.tokens),
        ("V", "W_V", head.head.values, head.values, problem.tokens),
    )
    for name, weight, operand, result, tokens in parts:
        if isinstance(operand, Projection):
            yield Projected(name, weight, operand, result, tokens)


def default_scale(head: HeadSteps) -> bool:
    """The scaled dot product with its usual 1/√d_k, which a write-up shows as a division by √d_k."""
    score = head.head.score
    return score.kind == "scaled_dot" and math.isclose(score.scale, 1 / math.sqrt(head.keys.shape[1]), rel_tol=1e-12)


def score_facts(head: HeadSteps) -> str:
    """The score function and the widths, in words (the scale is written separately, as a formula)."""
    kind = head.head.score.kind
    widths = (
        f"d_v = {head.values.shape[1]}"
        if kind == "given"
        else f"d_k = {head.keys.shape[1]}, d_v = {head.values.shape[1]}"
    )
    return f"{t(f'writeup.score_{kind}')} ({widths})"


def mask_facts(problem: Problem) -> str:
    """The mask in words: its kind, window and padding (for every human format)."""
    rule = problem.mask_rule
    parts = [t(f"render.mask_{rule.kind}")]
    if rule.window is not None:
        parts.append(t("render.mask_window", window=rule.window))
    if rule.padding:
        parts.append(t("render.mask_padding", tokens=", ".join(rule.padding)))
    return "; ".join(parts)


def masked(problem: Problem) -> bool:
    """Whether the mask leaves any key out, so the write-up lists which keys each query may use."""
    return not bool(problem.mask.all())


def allowed(problem: Problem, row: int) -> str:
    return ", ".join(key for key, ok in zip(problem.tokens, problem.mask[row]) if ok)
