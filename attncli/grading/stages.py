"""One stage of a replay: each step as a careful student computes it, under no mistake or under one, carried.

A stage (attncli.grading.mistakes.STAGES) computes a head's inputs, its dot products, its scores, its
weights or its output, or the concatenation or the final output, from what the stages before it hand on:
their numbers rounded to the carry, or the student's own where they wrote some. Every number comes with
how far a careful student may be from it (attncli.grading.interval). Pure numpy, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from attncli import positions
from attncli.core import COSINE_EPS, HeadSteps, Steps
from attncli.grading import interval
from attncli.grading.interval import Carried
from attncli.grading.mistakes import Mistake, mask_of, scale_of
from attncli.problem import Projection, Score
from attncli.steps import Key

REPLAYED_SCORES = ("scaled_dot", "dot", "cosine", "general", "additive")  # the kinds `compatibility` replays
Stage = tuple[str, int | None]  # (one of STAGES, head); head None for concat and final


@dataclass(frozen=True)
class Pass:
    """A replay as far as one stage: what each step came to and what it hands on to the steps after it.

    Stages are replayed one at a time from the pass before, so replays that agree up to a stage share it.
    """

    computed: Mapping[Key, Carried]
    excluded: Mapping[Key, np.ndarray]  # the cells this pass leaves out (masked); all False for unmaskable steps
    passed: Mapping[Key, Carried]  # what each step hands on: rounded to the carry, the student's where written
    count: int  # the roundings made so far (the columns of g)
    pending: Key | None = None  # the last step computed, carried on only when a later stage is replayed


@np.errstate(all="ignore")  # a slip may divide by zero or overflow; those cells just reproduce nothing
def advance(
    steps: Steps,
    mistake: Mistake,
    given: Mapping[Key, Carried],
    carry: int,
    before: Pass,
    stage: Stage,
    tracked: bool = True,
    largest: int = 1,
) -> Pass:
    """The calculation under `mistake` one stage further, each step fed the student's numbers (`given`) where written.

    Every number comes with how far a student who carries `carry` decimals may be from it: each rounding
    apart (`tracked`, as many as `largest`, the cells of the largest matrix, leaves room for), or all of them in
    one looser bound (interval.Noise).
    """
    work = _Stage(steps, mistake, given, carry, before, interval.Noise(before.count, tracked, largest))
    for key in work.pending:
        work.carry_on(key)
    work.pending.clear()
    kind, h = stage
    if h is None:
        _SHARED_WORK[kind](work)
    else:
        _HEAD_WORK[kind](work, h)
    return Pass(work.computed, work.excluded, work.passed, work.noise.count, work.pending[0])


class _Stage:
    """One stage of a replay in the making: what each step comes to, and what the student hands on from it."""

    def __init__(
        self,
        steps: Steps,
        mistake: Mistake,
        given: Mapping[Key, Carried],
        carry: int,
        before: Pass,
        noise: interval.Noise,
    ) -> None:
        self.steps, self.problem, self.mistake, self.given, self.carry = steps, steps.problem, mistake, given, carry
        self.noise = noise  # the roundings made so far, before.count of them
        self.computed, self.excluded, self.passed = dict(before.computed), dict(before.excluded), dict(before.passed)
        self.pending: list[Key] = [before.pending] if before.pending is not None else []

    def keep(self, step: str, num: Carried) -> Carried:
        """The number a student carries on from `step`: rounded to `carry` decimals, or early to fewer."""
        mistake = self.mistake
        if mistake.decimals is not None and mistake.where in (None, step):
            return interval.round_to(num, mistake.decimals)
        return interval.carry(num, self.carry, self.noise)

    def carry_on(self, key: Key) -> None:
        """What the student hands on from step `key`: its numbers carried, their own where they wrote some."""
        num = self.computed[key]
        student = self.given.get(key)
        if student is None or student.t.shape != num.t.shape:
            self.passed[key] = self.keep(key[0], num)
            return
        answered = ~np.isnan(student.t)
        written = interval.written(student.t, np.where(answered, student.e, 0.0), self.noise)
        self.passed[key] = written if answered.all() else interval.where(answered, written, self.keep(key[0], num))

    def settle(self, key: Key, num: Carried, out: np.ndarray | None = None, last: bool = True) -> None:
        """Step `key` comes to `num`; the stage's last step is carried on when the next stage starts (the rounding
        in the same order), so a replay wanted only for this step's numbers stops here."""
        self.computed[key] = num
        self.excluded[key] = np.zeros(num.t.shape, dtype=bool) if out is None else out
        self.pending.append(key)
        if not last:
            self.carry_on(self.pending.pop())

    def mask(self) -> np.ndarray:
        """The mask as the mistake applies it."""
        return mask_of(self.mistake.mask, self.problem.mask, self.problem)


def _inputs(work: _Stage, h: int) -> None:
    head = work.steps.heads[h]
    work.settle(("values", h), _operand(head.spec.values, head.values, work.keep), last=head.queries is None)
    if head.queries is not None:
        work.settle(("queries", h), _operand(head.spec.queries, head.q, work.keep), last=False)
        work.settle(("keys", h), _operand(head.spec.keys, head.k, work.keep))


def _dot(work: _Stage, h: int) -> None:
    head = work.steps.heads[h]
    if head.queries is None:
        compat = interval.exact(head.dot)
    else:
        queries, keys, values = (work.passed[(step, h)] for step in ("queries", "keys", "values"))
        queries, keys = _turned(head, work.mistake.rope, queries, keys, work.keep)
        compat = compatibility(head.spec.score, work.mistake.compat, queries, keys, values, work.keep)
    work.settle(("dot", h), compat, ~work.mask())


def _scores(work: _Stage, h: int) -> None:
    mistake, problem, mask = work.mistake, work.problem, work.mask()
    scale = _scale_carried(scale_of(mistake, work.steps, h), mistake, work.carry, work.noise)
    scores = interval.times(work.passed[("dot", h)], scale)
    if problem.bias is not None and mistake.bias:  # added to the scaled scores before the mask, as in the core
        scores = interval.add(scores, interval.exact(problem.bias.of(h)))
    scores = interval.where(mask, scores, interval.exact(np.full(mask.shape, -np.inf)))
    work.settle(("scores", h), scores, ~mask)


def _weights(work: _Stage, h: int) -> None:
    scores = work.passed[("scores", h)]
    work.settle(("weights", h), _normalise(scores, work.mistake, work.keep), np.isneginf(scores.t))


def _output(work: _Stage, h: int) -> None:
    mistake, passed = work.mistake, work.passed
    mixed = passed[("values", h)]
    keys = passed.get(("keys", h))
    if mistake.mix == "keys" and keys is not None and keys.t.shape == mixed.t.shape:
        mixed = keys
    if mistake.swap is not None:
        order = list(range(mixed.t.shape[0]))
        a, b = mistake.swap
        order[a], order[b] = b, a
        mixed = interval.rows(mixed, order)
    used = passed[("weights", mistake.weights_of[h] if mistake.weights_of is not None else h)]
    work.settle(("output", h), interval.matmul(used, mixed))


def _concat(work: _Stage) -> None:
    order = work.mistake.order or tuple(range(len(work.steps.heads)))
    work.settle(("concat", None), interval.join([work.passed[("output", h)] for h in order]))


def _final(work: _Stage) -> None:
    steps, problem = work.steps, work.problem
    if steps.concat is None:
        work.settle(("final", None), work.passed[("output", 0)])
        return
    concat = work.passed[("concat", None)]
    if problem.w_o is None or (not work.mistake.w_o and concat.t.shape == steps.output.shape):
        work.settle(("final", None), concat)
    else:
        work.settle(("final", None), interval.matmul(concat, work.keep("final", interval.exact(problem.w_o))))


_HEAD_WORK: dict[str, Callable[[_Stage, int], None]] = {
    "inputs": _inputs,
    "dot": _dot,
    "scores": _scores,
    "weights": _weights,
    "output": _output,
}
_SHARED_WORK: dict[str, Callable[[_Stage], None]] = {"concat": _concat, "final": _final}


def _operand(spec: object, matrix: np.ndarray, keep: Callable[[str, Carried], Carried]) -> Carried:
    """Queries, keys or values as the student has them: X·W from X and W as they carry them, or as given."""
    if isinstance(spec, Projection):
        return interval.matmul(keep("inputs", interval.exact(spec.x)), keep("inputs", interval.exact(spec.w)))
    return interval.exact(matrix)


def compatibility(
    score: Score, slip: str, queries: Carried, keys: Carried, values: Carried, keep: Callable[[str, Carried], Carried]
) -> Carried:
    """How well each query matches each key, before any scale, as a student computes it (or slips).

    A score kind without a replay here is refused (a ValueError, an internal error): graded as another kind,
    every verdict on it could be wrong. tests/test_score_kinds.py asks every kind of SCORE_KINDS for one.
    """
    kind = score.kind
    if kind not in REPLAYED_SCORES:
        raise ValueError(f"no grading replay for score kind {kind!r} (attncli.grading.stages.compatibility)")
    undefined = interval.exact(np.full((queries.t.shape[0], keys.t.shape[0]), np.nan))
    if slip == "values":
        if values.t.shape[1] != queries.t.shape[1] or kind not in ("scaled_dot", "dot"):
            return undefined
        keys = values
    if slip == "not_transposed":
        if kind not in ("scaled_dot", "dot") or keys.t.shape[0] != keys.t.shape[1]:
            return undefined
        return interval.matmul(queries, keys)  # row i of Q times column j of K
    if kind == "additive":
        assert score.w_query is not None and score.w_key is not None, "an additive score has W_query and W_key"
        assert score.v is not None, "an additive score has v"
        a = keep("queries", interval.matmul(queries, keep("inputs", interval.exact(score.w_query))))
        b = keep("keys", interval.matmul(keys, keep("inputs", interval.exact(score.w_key))))
        hidden = interval.add(interval.expand(a, 1), interval.expand(b, 0))  # (L, S, d_a)
        if slip != "no_tanh":
            hidden = keep("dot", interval.tanh(hidden))
        return interval.matmul(hidden, keep("inputs", interval.exact(score.v)))
    keys_t = interval.transpose(keys)
    if kind == "general":
        assert score.w is not None, "a general score's W"
        return interval.matmul(
            keep("queries", interval.matmul(queries, keep("inputs", interval.exact(score.w)))), keys_t
        )
    dot = interval.matmul(queries, keys_t)
    if kind != "cosine" or slip == "no_norm":
        return dot
    q_norms = keep("dot", _norms(queries))  # (L, 1)
    k_norms = keep("dot", _norms(keys))  # (S, 1)
    return interval.quotient(dot, interval.matmul(q_norms, interval.transpose(k_norms)))


def _norms(vectors: Carried) -> Carried:
    """Each row's length as a column, at least COSINE_EPS as in the core."""
    return interval.sqrt(interval.row_sums(interval.square(vectors)), COSINE_EPS)


def _normalise(scores: Carried, mistake: Mistake, keep: Callable[[str, Carried], Carried]) -> Carried:
    """Scores to weights: softmax over each query's keys, or one of the slips students make there.

    A student who rounds early rounds e^s itself (`shift` False); the others are covered by the shifted e^(s − m).
    """
    shift = mistake.shift
    if not mistake.exp:
        e = interval.where(np.isneginf(scores.t), interval.exact(np.zeros(scores.t.shape)), scores)
    elif mistake.axis == "none":
        return _exp(scores, shift=False)
    else:
        e = keep("exp", _exp(scores, shift and mistake.axis == "keys"))
    if mistake.axis == "none":
        return e
    if mistake.axis == "queries":
        return interval.transpose(interval.normalise(interval.transpose(e)))
    return interval.normalise(e)


def _exp(scores: Carried, shift: bool) -> Carried:
    """e^s for each score; with `shift`, e^(s − m) for a row's m, which a student may take to keep e^s small.

    m is the row's largest score when it is positive (e^(s − m) ≤ 1 then has the larger relative
    rounding, so it covers a student who does not shift), else 0. Weights do not change with m.
    """
    m = np.zeros((scores.t.shape[0], 1))
    if shift:
        finite = np.where(np.isfinite(scores.t), scores.t, -np.inf)
        m = np.maximum(finite.max(axis=1, keepdims=True), 0.0)
        m = np.where(np.isfinite(m), m, 0.0)
    return interval.apply(np.exp, np.exp, interval.Carried(scores.t - m, scores.g, scores.e))


def _turned(head: HeadSteps, slip: str, queries: Carried, keys: Carried, keep: Callable) -> tuple[Carried, Carried]:
    """RoPE's turn of the queries and keys as the student carries them (each rounded once turned), or its slip."""
    rotation = head.rotation
    if rotation is None:
        return queries, keys
    sign = -1.0 if slip == "reversed" else 1.0
    style = rotation.style
    if slip == "pairing":
        style = next(other for other in positions.STYLES if other != style)
    q = keep("queries", _turn(queries, sign * rotation.query_angles, style))
    return q, keep("keys", _turn(keys, sign * rotation.key_angles, style))


def _turn(num: Carried, angles: np.ndarray, style: str) -> Carried:
    """A carried matrix turned pair by pair: linear in it with exact cos and sin, so its parts turn alike and
    the bound on the rest mixes by |cos| and |sin|."""
    first, second = positions.pairs(num.t.shape[1], style)
    cos, sin = np.abs(np.cos(angles)), np.abs(np.sin(angles))
    rest = np.empty_like(num.e)
    rest[:, first] = cos * num.e[:, first] + sin * num.e[:, second]
    rest[:, second] = cos * num.e[:, second] + sin * num.e[:, first]
    return Carried(positions.rotate(num.t, angles, style), positions.rotate(num.g, angles, style), rest)


def _scale_carried(scale: float, mistake: Mistake, carry: int, noise: interval.Noise) -> Carried:
    """The scale as a student uses it: multiplying by 1/√d rounded, or dividing by √d rounded (one rounding)."""
    decimals = mistake.decimals if mistake.decimals is not None and mistake.where is None else carry
    if scale == 0:
        return interval.exact(0.0)
    inverse = round(1 / scale, decimals)
    nearest = [round(scale, decimals), 1 / inverse if inverse else scale]
    moved = max(abs(v - scale) for v in nearest)
    if moved == 0:
        return interval.exact(scale)
    if not noise.tracks(1):
        return interval.known(np.array(scale), np.array(moved))
    noise.count += 1
    g = np.zeros(noise.count)
    g[-1] = moved
    return interval.Carried(np.array(scale), g, np.array(0.0))
