"""What every human format (terminal, Markdown, LaTeX) says alike: the mask, the score, the followed queries."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from attncli.core import HeadSteps
from attncli.i18n import t
from attncli.problem import Problem, Projection
from attncli.render.numbers import entry, fixed

AUTO_FOLLOW = 3  # every query in detail up to this many; beyond, the weight matrix and the outputs
WRITE_OUT = 4  # q·k written term by term up to this many coordinates
RAW = {  # each score function's compatibility before the scale, as a formula in text
    "scaled_dot": "q·k",
    "dot": "q·k",
    "cosine": "cos(q, k)",
    "general": "q·W·k",
    "additive": "v·tanh(q·W_query + k·W_key)",
}


@dataclass(frozen=True)
class Projected:
    """One of Q, K, V made from the inputs: name, its weight matrix's name, the operand, the result, row tokens."""

    name: str
    weight: str
    operand: Projection
    result: np.ndarray
    tokens: tuple[str, ...]


def followed(problem: Problem, follow: tuple[str, ...] | None) -> list[int]:
    """The rows of the queries written out in detail: those named, else all of them when there are only a few."""
    if follow:
        return [problem.query_tokens.index(name) for name in follow]
    return list(range(len(problem.query_tokens))) if len(problem.query_tokens) <= AUTO_FOLLOW else []


def projections(head: HeadSteps, problem: Problem) -> Iterator[Projected]:
    """Those of the head's Q, K and V that are projected from inputs, in that order."""
    parts = (
        ("Q", "W_Q", head.spec.queries, head.queries, problem.query_tokens),
        ("K", "W_K", head.spec.keys, head.keys, problem.tokens),
        ("V", "W_V", head.spec.values, head.values, problem.tokens),
    )
    for name, weight, operand, result, tokens in parts:
        if isinstance(operand, Projection):
            yield Projected(name, weight, operand, result, tokens)


def default_scale(head: HeadSteps) -> bool:
    """The scaled dot product with its usual 1/√d_k, which every format writes as such rather than as a number."""
    score = head.spec.score
    return score.kind == "scaled_dot" and math.isclose(score.scale, 1 / math.sqrt(head.keys.shape[1]), rel_tol=1e-12)


def written_out(head: HeadSteps) -> bool:
    """Whether each q·k is written term by term: a dot product of at most WRITE_OUT coordinates."""
    return head.spec.score.kind in ("scaled_dot", "dot") and head.keys.shape[1] <= WRITE_OUT


def dot_terms(q: np.ndarray, k: np.ndarray, precision: int, times: str = "×") -> str:
    """q·k term by term, as the inputs are written: 1.4142×2 + 0×0."""
    return " + ".join(f"{entry(a, precision)}{times}{entry(b, precision)}" for a, b in zip(q, k))


def cosine_terms(q: np.ndarray, k: np.ndarray, precision: int, times: str = "×") -> tuple[str, str]:
    """cos(q, k) as a numerator q·k and a denominator ‖q‖×‖k‖, written out."""
    norms = f"{fixed(float(np.linalg.norm(q)), precision)}{times}{fixed(float(np.linalg.norm(k)), precision)}"
    return fixed(float(q @ k), precision), norms


def exp_label(shift: float, precision: int) -> str:
    """How e^s is written: e^s, or e^(s − m) when a row's scores are shifted by m so that e^s stays finite."""
    return "e^s" if shift == 0 else f"e^(s − {fixed(shift, precision)})"


def score_facts(head: HeadSteps, formula: str = "") -> str:
    """The score function in words, then its `formula` when one is given, then the widths."""
    kind = head.spec.score.kind
    widths = (
        f"d_v = {head.values.shape[1]}"
        if kind == "given"
        else f"d_k = {head.keys.shape[1]}, d_v = {head.values.shape[1]}"
    )
    name = t(f"writeup.score_{kind}")
    return f"{name}, {formula} ({widths})" if formula else f"{name} ({widths})"


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
    """The keys query `row` may use, for a sentence."""
    return ", ".join(key for key, ok in zip(problem.tokens, problem.mask[row]) if ok)
