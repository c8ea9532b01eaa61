"""Replays of the calculation: each step as a careful student has it, under no mistake or under one, carried.

Every number comes with how far a student who carries `carry` decimals may be from it
(attncli.grading.interval): the radius is propagated rigorously through dot products, the scale,
e^s, the normalisation, the weighted sum, the concatenation and W_O, growing by half a unit of the
carry decimal at every number the student carries. A replay is fed either the problem alone or
the student's own numbers wherever they wrote some (error carried forward), so that a correct
softmax of wrong scores counts as "right method, wrong inputs". Replays go stage by stage and are
shared by every mistake that agrees up to a stage: most steps need only two. Pure numpy, no I/O.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from attncli import positions
from attncli.core import COSINE_EPS, HeadSteps, Steps
from attncli.grading import interval
from attncli.grading.interval import Carried
from attncli.grading.mistakes import (
    NO_MISTAKE,
    PAIRABLE,
    STAGES,
    Mistake,
    acts,
    changed,
    mask_of,
    pair,
    scale_of,
    singles,
)
from attncli.grading.rule import Rule
from attncli.parsing.answers import Answer
from attncli.problem import Projection, Score
from attncli.steps import Key

HEAD_STAGES = STAGES[:4]
STAGE_INDEX = {kind: i for i, kind in enumerate(STAGES)}
REPLAYED_SCORES = ("scaled_dot", "dot", "cosine", "general", "additive")  # the kinds `compatibility` replays
SCREENS = ("dot", "scores", "weights")  # a step that, answered in full, hands on the student's numbers alone
Stage = tuple[str, int | None]  # (one of STAGES, head); head None for concat and final
Reference = tuple[np.ndarray, np.ndarray, np.ndarray]  # values, radii, excluded
Listed = tuple[list, list, list]  # a Reference as nested lists


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


def complete(answer: Answer, shape: tuple[int, ...]) -> bool:
    """Whether every cell of a step of this `shape` is answered."""
    cells = answer.cells
    return (len(cells), len(cells[0]) if cells else 0) == shape and all(e is not None for row in cells for e in row)


def student(answer: Answer, rule: Rule) -> Carried:
    """The student's numbers as a matrix: NaN where not answered; a masked mark is -inf, or 0 for a weight; each
    known up to how far it may be from the number the student kept (`Rule.kept`)."""
    masked = 0.0 if answer.step == "weights" else -math.inf
    t = [[math.nan if e is None else masked if e.value is None else e.value for e in row] for row in answer.cells]
    r = [[rule.kept(e) if e is not None else 0.0 for e in row] for row in answer.cells]
    return interval.known(np.array(t, dtype=np.float64), np.array(r, dtype=np.float64))


class Solved:
    """The replays of a problem alone (no student's numbers in them), worked out once however many files it grades.

    Keyed by the calculation itself: a key's `Steps` graded again finds its replays here.
    """

    KEPT = 8  # problems remembered: a key per exercise of a class (each holds every replay it needed)
    cache: ClassVar[dict[tuple[int, int], Solved]] = {}

    def __init__(self, steps: Steps, carry: int) -> None:
        self.steps = steps
        self.carry = carry
        self.stages: list[Stage] = [*((kind, h) for h in range(len(steps.heads)) for kind in HEAD_STAGES)]
        self.stages += [("output", h) for h in range(len(steps.heads))]
        self.stages += [("concat", None)] * (steps.concat is not None) + [("final", None)]
        self.first = {kind: min(i for i, (k, _) in enumerate(self.stages) if k == kind) for kind, _ in self.stages}
        self.stage_of: dict[Key, int] = {}
        self.passes: dict[tuple[Mistake, int], Pass] = {}
        self.prefixes: dict[tuple[Mistake, int], Mistake] = {}
        self.cuts: dict[tuple[Mistake, int, int], Mistake] = {}
        self.singles = singles(steps)
        self.pairable = [m for m in self.singles if changed(m) <= set(PAIRABLE)]  # one alone may change nothing
        self.pairs = [p for a, b in itertools.combinations(self.pairable, 2) if (p := pair(a, b)) is not None]
        self.applicable: list[Mistake] | None = None

    @classmethod
    def of(cls, steps: Steps, carry: int) -> Solved:
        """The one for `steps` (it is held, so its id cannot be another's while cached)."""
        found = cls.cache.get((id(steps), carry))
        if found is None or found.steps is not steps:
            found = cls.cache[(id(steps), carry)] = cls(steps, carry)
            while len(cls.cache) > cls.KEPT:
                del cls.cache[next(iter(cls.cache))]
        return found

    def stage(self, key: Key) -> int:
        """The stage that computes step `key`."""
        found = self.stage_of.get(key)
        if found is None:
            step, head = key
            kind = "inputs" if step in ("queries", "keys", "values") else step
            found = self.stage_of[key] = self.stages.index((kind, head))
        return found

    def prefix(self, mistake: Mistake, index: int) -> Mistake:
        """`mistake` as far as the stages up to `index` can tell: the fields acting later set right, no codes."""
        found = self.prefixes.get((mistake, index))
        if found is None:
            kept = {
                name: getattr(mistake, name)
                for name in changed(mistake)
                if any(self.first.get(kind, index + 1) <= index for kind in acts(mistake, name))
            }
            found = self.prefixes[(mistake, index)] = Mistake(**kept) if kept else NO_MISTAKE
        return found

    def run(self, mistake: Mistake, index: int, given: Mapping[Key, Carried], memo: dict) -> Pass:
        """The replay under `mistake` as far as stage `index`, each stage replayed once for all that share it."""
        mistake = self.prefix(mistake, index)
        found = memo.get((mistake, index))
        if found is None:
            before = self.run(mistake, index - 1, given, memo) if index else Pass({}, {}, {}, 0)
            found = _advance(self.steps, mistake, given, self.carry, before, self.stages[index])
            memo[(mistake, index)] = found
        return found

    def before(self, mistake: Mistake, at: int, cut: int) -> Mistake:
        """`mistake` without the slips that act at stage `at` (one of STAGES) only through stages up to `cut`."""
        found = self.cuts.get((mistake, at, cut))
        if found is None:
            dropped = {
                name: getattr(NO_MISTAKE, name)
                for name in changed(mistake)
                if all(STAGES.index(kind) <= cut for kind in acts(mistake, name) if STAGES.index(kind) <= at)
            }
            found = self.cuts[(mistake, at, cut)] = replace(mistake, **dropped) if dropped else mistake
        return found

    def whole_to(self, mistake: Mistake, index: int) -> Pass:
        """The replay from the problem alone, as far as stage `index`."""
        return self.run(mistake, index, {}, self.passes)

    def whole(self, mistake: Mistake) -> Pass:
        return self.whole_to(mistake, len(self.stages) - 1)

    def single_mistakes(self) -> list[Mistake]:
        """The single mistakes that change anything in this problem (the others cannot be told from no mistake)."""
        if self.applicable is None:
            self.applicable = [m for m in self.singles if self.differs(m)]
        return self.applicable

    def differs(self, mistake: Mistake) -> bool:
        """Whether `mistake` gives another number anywhere, or leaves out other cells: replayed as far as it must be."""
        for index in range(len(self.stages)):
            if self.prefix(mistake, index) == NO_MISTAKE:
                continue  # the same replay as the truth so far
            replay, truth = self.whole_to(mistake, index), self.whole_to(NO_MISTAKE, index)
            if _differs(replay, truth, [key for key in truth.computed if self.stage(key) == index]):
                return True
        return False


class Replays:
    """Every replay one file's grading needs, computed only when asked for: most steps need only two."""

    def __init__(self, steps: Steps, answered: Sequence[Answer], rule: Rule) -> None:
        self.solved = Solved.of(steps, rule.carry)
        self.answered = answered
        self.rule = rule
        self.passes: dict[tuple[Mistake, int], Pass] = {}  # fed the student's numbers
        self.references: dict[tuple[Mistake, bool, Key], Reference] = {}
        self.cuts: dict[Key, int | None] = {}
        truth = self.solved.whole(NO_MISTAKE).computed
        self.full = {(a.step, a.head) for a in answered if complete(a, truth[(a.step, a.head)].t.shape)}

    @functools.cached_property
    def given(self) -> dict[Key, Carried]:
        """The student's numbers by step, made when a replay first needs them (a right file needs none)."""
        return {(a.step, a.head): student(a, self.rule) for a in self.answered}

    def reference(self, mistake: Mistake, own: bool, key: Key) -> Reference:
        """Step `key` under `mistake`, from the problem alone or (`own`) fed the student's numbers.

        Mistakes that cannot change `key` share one reference (the same object: its judgements can be kept).
        """
        solved = self.solved
        index = solved.stage(key)
        mistake = solved.prefix(self.screened(mistake, key) if own else mistake, index)
        found = self.references.get((mistake, own, key))
        if found is None:
            replayed = solved.run(mistake, index, self.given, self.passes) if own else solved.whole_to(mistake, index)
            num = replayed.computed[key]
            found = self.references[(mistake, own, key)] = (num.t, num.radius, replayed.excluded[key])
        return found

    def screened(self, mistake: Mistake, key: Key) -> Mistake:
        """`mistake` without the slips made before a step of the head that the student answered in full.

        That step hands on the student's numbers whatever came before it, so those slips cannot change `key`.
        """
        step, head = key
        cut = self.cut(key)
        if cut is None or (head is not None and mistake.weights_of is not None):
            return mistake
        return self.solved.before(mistake, STAGE_INDEX[step], cut)

    def cut(self, key: Key) -> int | None:
        """The last stage before step `key` that, answered in full, hands on only the student's numbers to it."""
        if key not in self.cuts:
            self.cuts[key] = self.last_written(key)
        return self.cuts[key]

    def last_written(self, key: Key) -> int | None:
        step, head = key
        if step not in STAGES:
            return None
        if head is None:
            outputs = all(("output", h) in self.full for h in range(len(self.solved.steps.heads)))
            written = [STAGES.index("output")] * outputs + [STAGES.index("concat")] * (("concat", None) in self.full)
        else:
            written = [STAGES.index(s) for s in SCREENS if (s, head) in self.full]
        written = [w for w in written if w < STAGES.index(step)]
        return max(written) if written else None


class StepReplays:
    """The replays one answered step is judged against: the truth, and any mistake's, each listed once."""

    def __init__(self, replays: Replays, key: Key) -> None:
        self.replays = replays
        self.key = key
        self.lists: dict[int, tuple[Reference, Listed]] = {}  # id of a reference -> (it, as lists)
        self.truth = self.reference(NO_MISTAKE, False)

    def reference(self, mistake: Mistake, own: bool, key: Key | None = None) -> Reference:
        """Step `key` (this step by default) under `mistake`, from the problem alone or (`own`) their numbers."""
        return self.replays.reference(mistake, own, key or self.key)

    def listed(self, ref: Reference) -> Listed:
        """`ref` as nested lists of Python numbers, made once: judged cell by cell, they compute as the arrays
        do, several times faster."""
        found = self.lists.get(id(ref))
        if found is None or found[0] is not ref:
            found = self.lists[id(ref)] = (ref, (ref[0].tolist(), ref[1].tolist(), ref[2].tolist()))
        return found[1]


def _differs(replay: Pass, truth: Pass, keys: Iterable[Key]) -> bool:
    """Whether a replay gives another number at any of `keys`, or leaves out other cells."""
    for key in keys:
        num, other = truth.computed[key], replay.computed[key]
        if other.t.shape != num.t.shape or not np.array_equal(replay.excluded[key], truth.excluded[key]):
            return True
        if not np.allclose(other.t, num.t, rtol=1e-12, atol=1e-12, equal_nan=True):
            return True
    return False


@np.errstate(all="ignore")  # a slip may divide by zero or overflow; those cells just reproduce nothing
def _advance(
    steps: Steps, mistake: Mistake, given: Mapping[Key, Carried], carry: int, before: Pass, stage: Stage
) -> Pass:
    """The calculation under `mistake` one stage further, each step fed the student's numbers (`given`) where written.

    Every number comes with how far a student who carries `carry` decimals may be from it.
    """
    work = _Stage(steps, mistake, given, carry, before)
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

    def __init__(self, steps: Steps, mistake: Mistake, given: Mapping[Key, Carried], carry: int, before: Pass) -> None:
        self.steps, self.problem, self.mistake, self.given, self.carry = steps, steps.problem, mistake, given, carry
        self.noise = interval.Noise()
        self.noise.count = before.count
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
        raise ValueError(f"no grading replay for score kind {kind!r} (attncli.grading.replay.compatibility)")
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
    noise.count += 1
    g = np.zeros(noise.count)
    g[-1] = moved
    return interval.Carried(np.array(scale), g, np.array(0.0))
