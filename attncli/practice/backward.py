"""The backward pass in the tutor: after the forward steps, each gradient row by row, graded as `check` grades it.

A problem with `backward:` adds to the session's prompts every gradient a student works out
(attncli.grading.backward.asked: dV, dP, D, dS, d(q·k), dQ, dK, the dW, the kv heads' sums, ...),
one prompt per row (a row of dS or d(q·k) asks only the keys the mask lets through). They are judged
by `grading.grade` on the answers as first given, like the forward steps `check` grades, so a slip is
named and a gradient worked from the student's own wrong numbers is carried. The working shown for
a hint or an answer writes each cell's products from the numbers the student carries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

from attncli.core import Steps
from attncli.grading import backward as grading_backward
from attncli.grading import mistakes
from attncli.parsing.answers import Answer
from attncli.parsing.backward_answers import is_backward, key_of
from attncli.steps import BACKWARD_HEAD, BACKWARD_KV, BY_NAME, Key, matrix
from attncli.written import entry, sum_of_products

__all__ = ["is_backward"]
CODES = grading_backward.CODES  # the backward pass's slips, which the tutor's summary counts too
Spec = tuple[str, "int | None", int, tuple[int, ...]]  # a prompt: step, head, row, columns
Kept = Callable[[str, "int | None", int, int], float]  # the number the student carries for (step, head, row, column)
# The formula of each gradient, for the first hint (math, the same in every language)
FORMULAS = {
    "grad_concat": "d(concat) = dO·W_Oᵀ",
    "grad_w_o": "dW_O = concatᵀ·dO",
    "grad_values": "dV = Pᵀ·dO",
    "grad_weights": "dP = dO·Vᵀ",
    "row_term": "D_i = Σ_j P_ij·dP_ij",
    "grad_scores": "dS = P ∘ (dP − D)",
    "grad_dot": "d(q·k) = dS × scale",
    "grad_turned_queries": "dq̃ = d(q·k)·K̃",
    "grad_turned_keys": "dk̃ = d(q·k)ᵀ·Q̃",
    "grad_queries": "dQ = d(q·k)·K",
    "grad_keys": "dK = d(q·k)ᵀ·Q",
    "grad_w_q": "dW_Q = Xᵀ·dQ",
    "grad_w_k": "dW_K = Xᵀ·dK",
    "grad_w_v": "dW_V = Xᵀ·dV",
    "grad_bias": "dB = Σ_h dS_h",
    "grad_x": "dX = Σ dQ·W_Qᵀ + dK·W_Kᵀ + dV·W_Vᵀ",
    "grad_x_query": "dX_query = Σ dQ·W_Qᵀ",
}


def prompts(steps: Steps) -> list[Spec]:
    """Every gradient a student works out, row by row, in the order of the calculation."""
    problem = steps.problem
    found: list[Spec] = []
    for name, head in grading_backward.asked(steps):
        numbers = matrix(steps, name, head)
        assert numbers is not None, name
        for i in range(numbers.shape[0]):
            if BY_NAME[name].maskable:
                columns = tuple(j for j in range(numbers.shape[1]) if problem.mask[i, j])
            else:
                columns = tuple(range(numbers.shape[1]))
            found += [(name, head, i, columns)] if columns else []
    return found


def record_lines(steps: Steps, answers: Sequence[Answer], step: Callable[[Answer, int], list[str]]) -> list[str]:
    """`backward:` with the gradients as first given, laid out as attncli.parsing.backward_answers reads them: the
    top level's own, one head's at the top (a problem of one head), else each head's in `heads:` (`{}` for a head
    with none), each kv head's in `kv_heads:`; `step` writes one gradient (attncli.practice.record)."""
    if not answers:
        return []
    alone = len(steps.heads) == 1

    def listed(a: Answer) -> str:
        return "" if a.head is None or (alone and BY_NAME[a.step].place == BACKWARD_HEAD) else BY_NAME[a.step].place

    lines = ["  backward:", *(line for a in answers if not listed(a) for line in step(_named(a), 4))]
    for group, place in (("heads", BACKWARD_HEAD), ("kv_heads", BACKWARD_KV)):
        mine = [a for a in answers if listed(a) == place]
        if not mine:
            continue
        lines.append(f"    {group}:")
        for index in range(max(a.head for a in mine if a.head is not None) + 1):
            found = [line for a in mine if a.head == index for line in step(_named(a), 8)]
            lines += [f"      - {found[0].lstrip()}", *found[1:]] if found else ["      - {}"]
    return lines


def _named(answer: Answer) -> Answer:
    """The gradient under its JSON key, as `backward:` names it (backward.grad_values → grad_values)."""
    return replace(answer, step=key_of(answer.step))


def names(steps: Steps) -> list[str]:
    """The gradients' step names in the order the session asks them, for its summary."""
    return list(dict.fromkeys(name for name, _ in grading_backward.asked(steps)))


def rank(code: str) -> int:
    """Where a mistake's code stands in the summary among equals: the forward's codes first, then the backward's."""
    known = (*mistakes.CODES, *CODES)
    return known.index(code) if code in known else len(known)


def formula(step: str) -> str:
    return FORMULAS.get(key_of(step), "")


def working(steps: Steps, key: Key, row: int, column: int, kept: Kept) -> str:
    """The products that give one cell of gradient `key`, from the numbers the student carries; the formula
    where a gradient is not a short sum of products (RoPE's turn back, dX, the kv heads' sums)."""
    name, h = key_of(key[0]), key[1]
    if h is None or BY_NAME[key[0]].place != BACKWARD_HEAD or not _parts(steps, name, h):
        return formula(key[0])
    pairs = _pairs(steps, name, h, row, column, kept)
    if name == "grad_scores":
        weight, grad, row_term = pairs[0]
        return f"{weight} × ({grad} − {row_term})"
    if name == "grad_dot":
        return f"{pairs[0][0]} × {pairs[0][1]}"
    return sum_of_products((a, b) for a, b, *_ in pairs) or "0"


def _parts(steps: Steps, name: str, h: int) -> bool:
    head = steps.heads[h]
    if name in ("grad_queries", "grad_keys"):
        return head.rotation is None
    return name in ("grad_values", "grad_weights", "row_term", "grad_scores", "grad_dot")


def _pairs(steps: Steps, name: str, h: int, i: int, c: int, kept: Kept) -> list[tuple[str, ...]]:
    """The numbers each term of cell (i, c) multiplies, written as the student carries them."""
    B = "backward."
    head = steps.heads[h]
    n = len(steps.problem.tokens)

    def num(step: str, row: int, column: int) -> str:
        return entry(kept(step, h, row, column), 4)

    sees = steps.problem.mask  # (L, S)
    if name == "grad_values":  # key i, coordinate c: Σ over the queries that see it
        return [(num("weights", q, i), num(B + "grad_output", q, c)) for q in range(sees.shape[0]) if sees[q, i]]
    if name == "grad_weights":
        return [(num(B + "grad_output", i, k), num("values", c, k)) for k in range(head.values.shape[1])]
    if name == "row_term":
        return [(num("weights", i, j), num(B + "grad_weights", i, j)) for j in range(n) if sees[i, j]]
    if name == "grad_scores":
        return [(num("weights", i, c), num(B + "grad_weights", i, c), num(B + "row_term", i, 0))]
    if name == "grad_dot":
        return [(num(B + "grad_scores", i, c), entry(head.spec.score.scale, 4))]
    source = B + "grad_scores" if math.isclose(head.spec.score.scale, 1.0) else B + "grad_dot"  # d(q·k) = dS at 1
    if name == "grad_queries":
        return [(num(source, i, j), num("keys", j, c)) for j in range(n) if sees[i, j]]
    return [(num(source, q, i), num("queries", q, c)) for q in range(sees.shape[0]) if sees[q, i]]  # grad_keys
