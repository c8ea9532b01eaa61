"""The backward pass replayed as a careful student works it: every gradient with how far theirs may be from it.

Each step starts from what the student hands on: the forward pass's numbers as they carry them
(attncli.grading.replay: the truth rounded at the carry precision, or their own where they wrote
some), and the gradients before it, rounded the same way or their own. Every number comes with a
rigorous bound on how far a careful student's can be (attncli.grading.interval), each rounding
added as it happens (untracked: one bound per number). The row term D may be worked either way the
write-up shows, Σ_j P·dP or dO·O: both are allowed. A `Slip` replays one classic mistake of the
backward pass at the step it is made; every later step follows correctly from it, as a student
carries on from their own numbers. Pure numpy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from attncli.core import HeadSteps, Steps
from attncli.grading import interval
from attncli.grading.interval import Carried
from attncli.grading.positional import exact_turn as _turn
from attncli.grading.rule import half_unit
from attncli.problem import Projection
from attncli.steps import Key, present

B = "backward."  # the prefix of every backward step's name
KV = "backward.kv_heads."
KV_FIELDS = ("grad_keys", "grad_values", "grad_w_k", "grad_w_v")  # a shared key/value head's sums


@dataclass(frozen=True)
class Slip:
    """One classic slip of the backward pass (the default: none), replayed where it is made."""

    codes: tuple[str, ...] = ()
    diagonal: bool = False  # jacobian_diagonal_only: dS = P ∘ dP, the −D of the softmax's Jacobian left out
    unscaled: bool = False  # backward_scale_forgotten: d(q·k), dQ and dK from dS, without the scale
    untransposed: bool = False  # grad_values_not_transposed: dV = P·dO (the shapes allow it when L = S)
    columns: bool = False  # row_term_wrong_axis: D summed over the queries (a number per key) instead of the keys
    alone: tuple[int, int] | None = None  # gqa_not_summed: (kv head, the one query head whose share is taken)


RIGHT_WAY = Slip()


def slips(steps: Steps) -> list[Slip]:
    """Every slip this problem can show: each changes some gradient it has."""
    problem = steps.problem
    square = len(problem.query_tokens) == len(problem.tokens)
    found = [Slip(("jacobian_diagonal_only",), diagonal=True), Slip(("row_term_wrong_axis",), columns=True)]
    if any(head.queries is not None and not math.isclose(head.spec.score.scale, 1.0) for head in steps.heads):
        found.append(Slip(("backward_scale_forgotten",), unscaled=True))
    if square:
        found.append(Slip(("grad_values_not_transposed",), untransposed=True))
    assert steps.backward is not None
    for group, kv in enumerate(steps.backward.kv_heads):
        found += [Slip(("gqa_not_summed",), alone=(group, reader)) for reader in kv.heads if len(kv.heads) > 1]
    return found


def flat(num: Carried) -> Carried:
    """`num` with its roundings in one bound: the backward replay keeps none apart."""
    return interval.known(num.t, num.radius)


def given(matrix: np.ndarray, carry: int) -> Carried:
    """A number of the problem as a student uses it: exact when it has no more decimals than the carry (2, 0.5),
    else carried at it (√2 as 1.4142)."""
    t = np.asarray(matrix, dtype=np.float64)
    return interval.known(t, np.where(_on_grid(t, carry), 0.0, half_unit(carry)))


def keep(num: Carried, carry: int) -> Carried:
    """The number a student carries on: rounded to `carry` decimals (not moved when exact and on the grid)."""
    exact = (num.radius == 0) & _on_grid(num.t, carry)
    return interval.known(num.t, num.radius + np.where(np.isfinite(num.t) & ~exact, half_unit(carry), 0.0))


def _on_grid(t: np.ndarray, decimals: int) -> np.ndarray:
    finite = np.where(np.isfinite(t), t, 0.0)
    return np.abs(np.round(finite, decimals) - finite) <= 1e-15 + 1e-12 * np.abs(finite)


def product(a: Carried, b: Carried) -> Carried:
    """a ∘ b cell by cell (broadcast): |Δ(ab)| ≤ |b|·ra + |a|·rb + ra·rb."""
    ra, rb = a.radius, b.radius
    return interval.known(a.t * b.t, np.abs(b.t) * ra + np.abs(a.t) * rb + ra * rb)


def minus(a: Carried, b: Carried) -> Carried:
    return interval.known(a.t - b.t, a.radius + b.radius)


def total(parts: list[Carried]) -> Carried:
    """The sum of several carried matrices, as written: a + b + ..."""
    out = parts[0]
    for part in parts[1:]:
        out = interval.known(out.t + part.t, out.radius + part.radius)
    return out


def hull(a: Carried, b: Carried) -> Carried:
    """A number that is within reach of `a` or of `b`: the interval holding both."""
    low = np.minimum(a.t - a.radius, b.t - b.radius)
    high = np.maximum(a.t + a.radius, b.t + b.radius)
    return interval.known((low + high) / 2, (high - low) / 2)


def masked(num: Carried, mask: np.ndarray) -> Carried:
    """0 exactly where the mask leaves a key out (no gradient reaches it), `num` elsewhere."""
    return interval.known(np.where(mask, num.t, 0.0), np.where(mask, num.radius, 0.0))


def scale_of(scale: float, carry: int) -> Carried:
    """The scale as a student uses it: 1/√d_k rounded, or √d_k rounded and divided by (one rounding)."""
    if scale == 0:
        return interval.exact(0.0)
    inverse = round(1 / scale, carry)
    moved = max(abs(round(scale, carry) - scale), abs((1 / inverse if inverse else scale) - scale))
    return interval.known(np.array(scale), np.array(moved))


@dataclass(frozen=True)
class Replayed:
    """A replay of the backward pass: what each step comes to, and the cells the mask leaves out of it."""

    computed: Mapping[Key, Carried]
    excluded: Mapping[Key, np.ndarray]


class _Replay:
    """One replay in the making: forward numbers as the student has them, the gradients computed and handed on."""

    def __init__(
        self, steps: Steps, forward: Mapping[Key, Carried], student: Mapping[Key, Carried], carry: int, slip: Slip
    ) -> None:
        self.steps, self.problem, self.carry, self.slip = steps, steps.problem, carry, slip
        self.forward = forward  # ("weights", h), ("values", h), ("output", h), ("queries", h), ..., ("final", None)
        self.student = student  # the student's gradients by step, NaN where not answered
        self.computed: dict[Key, Carried] = {}
        self.excluded: dict[Key, np.ndarray] = {}
        self.passed: dict[Key, Carried] = {}

    def settle(self, key: Key, num: Carried, out: np.ndarray | None = None) -> Carried:
        """Step `key` comes to `num`; what the student hands on from it: their own numbers where they wrote them,
        else `num` carried."""
        self.computed[key] = num
        self.excluded[key] = np.zeros(num.t.shape, dtype=bool) if out is None else out
        mine = self.student.get(key)
        kept = keep(num, self.carry)
        if mine is None or mine.t.shape != num.t.shape:
            self.passed[key] = kept
        else:
            answered = ~np.isnan(mine.t)
            written = interval.known(np.where(answered, mine.t, 0.0), np.where(answered, mine.e, 0.0))
            self.passed[key] = interval.where(answered, written, kept)
        return self.passed[key]

    def run(self) -> Replayed:
        steps, problem = self.steps, self.problem
        grad = self.upstream()  # (L, d_out)
        parts = self.through_w_o(grad)
        for h, head in enumerate(steps.heads):
            self.head(h, head, self.settle((B + "grad_output", h), parts[h]))
        self.kv_heads()
        for name, readers in problem.shared:
            self.settle((B + f"grad_{name}", None), total([self.passed[(B + f"grad_{name}", h)] for h in readers]))
        if present(steps, B + "grad_bias", None):
            scores = total([self.passed[(B + "grad_scores", h)] for h in range(len(parts))])
            self.settle((B + "grad_bias", None), scores, ~problem.mask)  # masked cells: masked or 0, as dS's
        self.inputs()
        return Replayed(self.computed, self.excluded)

    def upstream(self) -> Carried:
        """dO: given, all ones (loss: sum), or O − T (a target), O the final output as the student has it."""
        asked = self.problem.backward
        assert asked is not None, "a problem asking for gradients"
        if asked.loss == "target":
            assert asked.target is not None, "a target loss has its target"
            difference = minus(self.forward[("final", None)], interval.exact(asked.target))
            return self.settle((B + "grad_output", None), difference)
        assert self.steps.backward is not None
        if asked.carried is not None:  # a stacked layer's: as far off as the layers after it leave it
            return self.settle(
                (B + "grad_output", None), interval.known(self.steps.backward.grad_output, asked.carried)
            )
        return self.settle((B + "grad_output", None), given(self.steps.backward.grad_output, self.carry))

    def through_w_o(self, grad: Carried) -> list[Carried]:
        """W_O backwards (d(concat) = dO·W_Oᵀ, dW_O = concatᵀ·dO), then each head's columns of d(concat)."""
        steps, problem = self.steps, self.problem
        if problem.w_o is not None:
            concat = self.forward.get(("concat", None), self.forward.get(("output", 0)))
            assert concat is not None
            self.settle((B + "grad_w_o", None), interval.matmul(interval.transpose(concat), grad))
            grad = self.settle((B + "grad_concat", None), interval.matmul(grad, given(problem.w_o.T, self.carry)))
        elif steps.concat is not None:
            grad = self.settle((B + "grad_concat", None), grad)
        edges = np.cumsum([0, *(head.values.shape[1] for head in steps.heads)])
        return [_columns(grad, edges[h], edges[h + 1]) for h in range(len(steps.heads))]

    def head(self, h: int, head: HeadSteps, grad: Carried) -> None:
        """One head backwards from its dO: dV, dP, D, dS, d(q·k), dQ̃ and dK̃ with RoPE, dQ, dK, the dW."""
        mask, slip = self.problem.mask, self.slip
        weights, values = self.forward[("weights", h)], self.forward[("values", h)]
        used = weights if slip.untransposed else interval.transpose(weights)
        grad_values = self.settle((B + "grad_values", h), interval.matmul(used, grad))  # (S, d_v)
        grad_weights = self.settle((B + "grad_weights", h), interval.matmul(grad, interval.transpose(values)))
        row = self.row_term(h, weights, grad_weights, grad)  # (L, 1); None: D has a number per key
        if slip.diagonal:
            inner = grad_weights  # the diagonal of the Jacobian alone: P ∘ dP
        else:
            inner = _undefined(grad_weights.t.shape) if row is None else minus(grad_weights, row)
        grad_scores = self.settle((B + "grad_scores", h), masked(product(weights, inner), mask), ~mask)
        if head.bias is not None:
            self.settle((B + "grad_bias", h), grad_scores, ~mask)
        self.weight(h, head.spec.values, "grad_w_v", grad_values)
        if head.queries is None:  # given scores: the backward pass stops at dS
            return
        scaled = product(grad_scores, scale_of(head.spec.score.scale, self.carry))
        grad_dot = self.settle((B + "grad_dot", h), masked(grad_scores if slip.unscaled else scaled, mask), ~mask)
        self.queries_and_keys(h, head, grad_scores if slip.unscaled else grad_dot)

    def row_term(self, h: int, weights: Carried, grad_weights: Carried, grad: Carried) -> Carried | None:
        """D = Σ_j P·dP per query, or dO·O: either way. Under the slip, Σ_i P·dP per key: a column of S numbers,
        handed on as the queries' D only when there are as many keys as queries (else None)."""
        if self.slip.columns:
            by_key = interval.row_sums(interval.transpose(product(weights, grad_weights)))  # (S, 1)
            if by_key.t.shape[0] != weights.t.shape[0]:
                self.computed[(B + "row_term", h)] = by_key  # what a student writes instead, in another shape
                self.excluded[(B + "row_term", h)] = np.zeros(by_key.t.shape, dtype=bool)
                return None
            return self.settle((B + "row_term", h), by_key)
        both = hull(
            interval.row_sums(product(weights, grad_weights)),
            interval.row_sums(product(grad, self.forward[("output", h)])),
        )
        return self.settle((B + "row_term", h), both)

    def queries_and_keys(self, h: int, head: HeadSteps, grad_dot: Carried) -> None:
        """dQ = d(q·k)·K and dK = d(q·k)ᵀ·Q, through RoPE's turn back when the head turns them, then their dW."""
        queries, keys = self.forward[("queries", h)], self.forward[("keys", h)]
        rotation = head.rotation
        if rotation is None:
            grad_queries = interval.matmul(grad_dot, keys)
            grad_keys = interval.matmul(interval.transpose(grad_dot), queries)
        else:
            turned_q = keep(_turn(queries, rotation.query_angles, rotation.style), self.carry)
            turned_k = keep(_turn(keys, rotation.key_angles, rotation.style), self.carry)
            dq = self.settle((B + "grad_turned_queries", h), interval.matmul(grad_dot, turned_k))
            dk = self.settle((B + "grad_turned_keys", h), interval.matmul(interval.transpose(grad_dot), turned_q))
            grad_queries = _turn(dq, -rotation.query_angles, rotation.style)
            grad_keys = _turn(dk, -rotation.key_angles, rotation.style)
        grad_queries = self.settle((B + "grad_queries", h), flat(grad_queries))
        grad_keys = self.settle((B + "grad_keys", h), flat(grad_keys))
        self.weight(h, head.spec.queries, "grad_w_q", grad_queries)
        self.weight(h, head.spec.keys, "grad_w_k", grad_keys)

    def weight(self, h: int, operand: object, name: str, grad: Carried) -> None:
        """dW = Xᵀ·d(X·W) for a projected operand."""
        if isinstance(operand, Projection):
            self.settle((B + name, h), interval.matmul(given(operand.x.T, self.carry), grad))

    def kv_heads(self) -> None:
        """Each shared key/value head's gradients: the sums of its query heads' shares (one share under the slip)."""
        assert self.steps.backward is not None
        alone = self.slip.alone
        for group, kv in enumerate(self.steps.backward.kv_heads):
            readers = (alone[1],) if alone is not None and alone[0] == group else kv.heads
            for name in KV_FIELDS:
                if present(self.steps, KV + name, group):
                    self.settle((KV + name, group), total([self.passed[(B + name, h)] for h in readers]))

    def inputs(self) -> None:
        """dX = Σ d(X·W)·Wᵀ over the heads and their projections; the queries' part to x_query or to x's rows."""
        problem, carry = self.problem, self.carry
        parts, query_parts = [], []
        for h, spec in enumerate(problem.heads):
            for operand, name in ((spec.keys, "grad_keys"), (spec.values, "grad_values")):
                if isinstance(operand, Projection):
                    parts.append(interval.matmul(self.passed[(B + name, h)], given(operand.w.T, carry)))
            if isinstance(spec.queries, Projection):
                query_parts.append(
                    interval.matmul(self.passed[(B + "grad_queries", h)], given(spec.queries.w.T, carry))
                )
        if query_parts and problem.query_rows is not None:  # the queries are rows of x: their part goes there
            placed = np.zeros((len(problem.tokens), len(problem.query_tokens)))
            placed[list(problem.query_rows), range(len(problem.query_rows))] = 1.0
            parts.append(interval.matmul(interval.exact(placed), total(query_parts)))
            query_parts = []
        if parts:
            self.settle((B + "grad_x", None), total(parts))
        if query_parts:
            self.settle((B + "grad_x_query", None), total(query_parts))


def _columns(num: Carried, start: int, stop: int) -> Carried:
    return interval.known(num.t[:, start:stop], num.radius[:, start:stop])


def _undefined(shape: tuple[int, int]) -> Carried:
    """Numbers a slip cannot give in this shape: judged against the truth where they are asked for."""
    return interval.known(np.full(shape, np.nan), np.zeros(shape))


def replay(
    steps: Steps, forward: Mapping[Key, Carried], student: Mapping[Key, Carried], carry: int, slip: Slip = RIGHT_WAY
) -> Replayed:
    """The backward pass of `steps` under `slip`, from the forward numbers and the gradients `student` wrote
    (empty: from the problem alone), each step with how far a careful student carrying `carry` decimals may be."""
    with np.errstate(all="ignore"):  # a slip's numbers may overflow; those cells just reproduce nothing
        return _Replay(steps, forward, student, carry, slip).run()


def forward_numbers(steps: Steps, handed: Mapping[Key, Carried], final: Carried, carry: int) -> dict[Key, Carried]:
    """What the backward pass reads of the forward one, as the student has it: each head's queries, keys, values,
    weights and output, the concatenation (`handed`: attncli.grading.replay's numbers handed on), and the final
    output (`final`), carried."""
    wanted = ("queries", "keys", "values", "weights", "output")
    found: dict[Key, Carried] = {
        (name, h): flat(handed[(name, h)]) for h in range(len(steps.heads)) for name in wanted if (name, h) in handed
    }
    if ("concat", None) in handed:
        found[("concat", None)] = flat(handed[("concat", None)])
    found[("final", None)] = keep(flat(final), carry)
    return found
