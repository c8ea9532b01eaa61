"""One stage of a replay: each step as a careful student computes it, under no mistake or under one, carried.

A stage (attncli.grading.mistakes.STAGES) computes x + PE, a head's inputs, its dot products (RoPE's turned
queries and keys first), its scores (and the biased ones), its weights (e^s and their sums first) or its
output, or the concatenation or the final output, from what the steps before it hand on: their numbers
rounded to the carry, or the student's own where they wrote some. Every number comes with how far a careful
student may be from it (attncli.grading.interval). Pure numpy, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from attncli.core import COSINE_EPS, Steps
from attncli.grading import interval, positional
from attncli.grading.interval import Carried
from attncli.grading.mistakes import Mistake, mask_of, scale_of, tiled_groups
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
    inputs: Carried | None = None,
) -> Pass:
    """The calculation under `mistake` one stage further, each step fed the student's numbers (`given`) where written.

    Every number comes with how far a student who carries `carry` decimals may be from it: each rounding
    apart (`tracked`, as many as `largest`, the cells of the largest matrix, leaves room for), or all of them in
    one looser bound (interval.Noise). `inputs`: the rows every projection multiplies as a careful student has
    them, when they carry more than their own rounding (a layer's normalised stream, its mean and root rounded).
    """
    work = _Stage(steps, mistake, given, carry, before, interval.Noise(before.count, tracked, largest))
    if inputs is not None:
        work.fed = interval.known(inputs.t, inputs.radius)
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
        self.fed: Carried | None = None  # the rows every projection multiplies, when given as carried (advance)

    def keep(self, step: str, num: Carried) -> Carried:
        """The number a student carries on from `step`: rounded to `carry` decimals, or early to fewer."""
        mistake = self.mistake
        if mistake.decimals is not None and mistake.where in (None, step):
            return interval.round_to(num, mistake.decimals)
        return interval.carry(num, self.carry, self.noise)

    def carry_on(self, key: Key, kept: Carried | None = None) -> None:
        """What the student hands on from step `key`: its numbers carried (or `kept`, how a student who did not
        write them may have them), their own where they wrote some."""
        num = self.computed[key]
        student = self.given.get(key)
        if student is None or student.t.shape != num.t.shape:
            self.passed[key] = self.keep(key[0], num) if kept is None else kept
            return
        answered = ~np.isnan(student.t)
        written = interval.written(student.t, np.where(answered, student.e, 0.0), self.noise)
        if not answered.all():
            written = interval.where(answered, written, self.keep(key[0], num) if kept is None else kept)
        self.passed[key] = written

    def settle(
        self, key: Key, num: Carried, out: np.ndarray | None = None, last: bool = True, kept: Carried | None = None
    ) -> None:
        """Step `key` comes to `num`; the stage's last step is carried on when the next stage starts (the rounding
        in the same order), so a replay wanted only for this step's numbers stops here; the others at once, as
        `kept` where the student did not write them (see carry_on)."""
        self.computed[key] = num
        self.excluded[key] = np.zeros(num.t.shape, dtype=bool) if out is None else out
        self.pending.append(key)
        if not last:
            self.carry_on(self.pending.pop(), kept)

    def mask(self) -> np.ndarray:
        """The mask as the mistake applies it."""
        return mask_of(self.mistake.mask, self.problem.mask, self.problem)


def _positioned(work: _Stage) -> None:
    """x + PE, every head's projections multiply it (sinusoidal positions)."""
    encoding = work.problem.positions
    assert encoding is not None, "a problem with x + PE has positions"
    work.settle(("positioned", None), positional.positioned(encoding, work.mistake.sinusoidal, work.keep))


def _inputs(work: _Stage, h: int) -> None:
    """A head's values, queries and keys: X·W from X (or x + PE as the student has it) and W, or as given; under
    gqa_kv_tiled, the keys and values of kv head h mod G."""
    steps, mistake = work.steps, work.mistake
    head = steps.heads[h]
    tiled = tiled_groups(work.problem) if mistake.kv == "tiled" else None
    shared = steps.heads[tiled[h]] if tiled is not None else head  # the head whose keys and values are read
    positioned = work.passed.get(("positioned", None), work.fed)
    stream = None if positioned is None else positional.query_inputs(work.problem, mistake.sinusoidal, work.keep,
                                                                     positioned)  # fmt: skip
    last = head.queries is None
    work.settle(("values", h), _operand(shared.spec.values, shared.values, work.keep, positioned), last=last)
    if head.queries is not None:
        work.settle(("queries", h), _operand(head.spec.queries, head.q, work.keep, stream), last=False)
        work.settle(("keys", h), _operand(shared.spec.keys, shared.k, work.keep, positioned))


def _dot(work: _Stage, h: int) -> None:
    """q·k (or the score's compatibility), from RoPE's turned queries and keys where the problem turns them."""
    head = work.steps.heads[h]
    if head.queries is None:
        work.settle(("dot", h), interval.exact(head.dot), ~work.mask())
        return
    queries, keys, values = (work.passed[(step, h)] for step in ("queries", "keys", "values"))
    rope = work.problem.rope
    if rope is not None and head.rotation is not None:
        turned = positional.turned(head, work.mistake, rope, queries, keys, work.carry)
        work.settle(("turned_queries", h), turned[0], last=False)
        work.settle(("turned_keys", h), turned[1], last=False)
        queries, keys = work.passed[("turned_queries", h)], work.passed[("turned_keys", h)]
    compat = compatibility(head.spec.score, work.mistake.compat, queries, keys, values, work.keep)
    work.settle(("dot", h), compat, ~work.mask())


def _scores(work: _Stage, h: int) -> None:
    """The scaled scores, masked; with a bias, then the scores plus b (or without it: bias_forgotten, and
    bias_after_softmax, which adds it to the weights instead)."""
    mistake, mask = work.mistake, work.mask()
    scale = _scale_carried(scale_of(mistake, work.steps, h), mistake, work.carry, work.noise)
    minus_infinity = interval.exact(np.full(mask.shape, -np.inf))
    scores = interval.where(mask, interval.times(work.passed[("dot", h)], scale), minus_infinity)
    b = positional.bias(work.problem, h, mistake, work.keep)
    work.settle(("scores", h), scores, ~mask, last=b is None)
    if b is None:
        return
    biased = work.passed[("scores", h)]
    if mistake.bias and mistake.bias_at == "scores":  # added to the scaled scores before the mask, as in the core
        biased = interval.where(mask, interval.add(biased, b), minus_infinity)
    work.settle(("biased_scores", h), biased, ~mask)


def _weights(work: _Stage, h: int) -> None:
    """e^s of the scores softmax reads, their sum, and each e^s over it; or a slip of the softmax."""
    mistake = work.mistake
    read = ("biased_scores", h) if ("biased_scores", h) in work.passed else ("scores", h)
    scores = work.passed[read]
    out = np.isneginf(scores.t)
    if not mistake.exp:  # no_exp: the scores themselves, normalised
        e = interval.where(out, interval.exact(np.zeros(scores.t.shape)), scores)
        work.settle(("exp", h), e, out, last=False, kept=e)
    else:
        _exp_kept(work, h, scores, out)
    e = work.passed[("exp", h)]
    total = interval.row_sums(e)  # (L, 1) a sum of the numbers kept is on their grid: no rounding of its own
    work.settle(("sums", h), total, last=False, kept=total)
    if mistake.axis == "none":
        weights = e
    elif mistake.axis == "queries":
        weights = interval.transpose(interval.normalise(interval.transpose(e)))
    else:
        weights = interval.divide_rows(e, work.passed[("sums", h)])
    if mistake.bias_at == "weights":
        b = positional.bias(work.problem, h, mistake, work.keep)
        assert b is not None, "bias_after_softmax is tried where the problem has a bias"
        weights = interval.where(out, weights, interval.add(weights, b))
    work.settle(("weights", h), weights, out)


def _exp_kept(work: _Stage, h: int, scores: Carried, out: np.ndarray) -> None:
    """e^s as the tool shows it (e^(s − shift), the shift 0 unless e^s would overflow), and as a student who does not
    write it may have it: e^(s − m) for m the row's largest positive score, rounded, covers both the student who
    shifts and the one who does not (e^(s − m) ≤ 1 has the larger relative rounding), taken back to e^s's scale."""
    display = work.steps.heads[h].shift[:, None]  # (L, 1)
    shown = _exp(scores, display)
    mistake = work.mistake
    if mistake.axis == "none":  # unnormalized: the weights are e^s as they come out
        work.settle(("exp", h), shown, out, last=False, kept=shown)
        return
    if not mistake.shift or mistake.axis != "keys":  # rounded early, or normalised down the columns: e^s rounded
        work.settle(("exp", h), shown, out, last=False)
        return
    largest = np.where(np.isfinite(scores.t), scores.t, -np.inf).max(axis=1, keepdims=True, initial=-np.inf)
    m = np.maximum(np.where(np.isfinite(largest), largest, 0.0), display)  # (L, 1)
    with np.errstate(over="ignore"):
        back = np.exp(m - display)  # (L, 1) at most e^(0.8·709) past the display's shift
    kept = interval.scale_rows(work.keep("exp", _exp(scores, m)), back)
    work.settle(("exp", h), shown, out, last=False, kept=kept)


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
_SHARED_WORK: dict[str, Callable[[_Stage], None]] = {"positioned": _positioned, "concat": _concat, "final": _final}


def _operand(
    spec: object, matrix: np.ndarray, keep: Callable[[str, Carried], Carried], stream: Carried | None = None
) -> Carried:
    """Queries, keys or values as the student has them: X·W from X (or `stream`, x + PE as they have it) and W as
    they carry them, or as given."""
    if isinstance(spec, Projection):
        x = keep("inputs", interval.exact(spec.x)) if stream is None or stream.t.shape != spec.x.shape else stream
        return interval.matmul(x, keep("inputs", interval.exact(spec.w)))
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


def _exp(scores: Carried, m: np.ndarray) -> Carried:
    """e^(s − m) for each score, m (L, 1) a shift per row (0: e^s itself)."""
    return interval.apply(np.exp, np.exp, interval.Carried(scores.t - m, scores.g, scores.e))


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
