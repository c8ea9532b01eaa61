"""Grading the online softmax's running values (`tiles:` answers): each tile's m', α, ℓ' and o', by the usual rule.

A number is right within half a unit of its last written decimal of the true value, widened by
what a careful student's carried rounding brings in (attncli.grading.rule). The running values go
from tile to tile as attncli.tiles computes them: m' = max(m, the tile's max score), α = e^(m − m'),
ℓ' = α·ℓ + Σ e^(s − m'), o' = α·o + Σ e^(s − m')·v, with α, each e^(s − m'), ℓ' and o' carried at
the carry's decimals, and the scores and values as the forward's replays carry them
(attncli.grading.replay). Each bound follows the recurrence (|student's − true| ≤ r, from the
bounds of its inputs) without tracking which roundings cancel: looser than the forward's, never
tighter than the truth.

The same recurrence is replayed fed the student's own numbers (their scores and values, and
each tile's m', α, ℓ' and o' where they wrote them), so that a tile right from their own earlier
numbers is carried (↷); and under two slips, from the problem alone and from their numbers:
`not_rescaled`, α left out of ℓ' and o' (ℓ' = ℓ + Σ e^(s − m')), and `max_not_updated`, the first
tile's max kept as m for every tile (α = 1 after it, e^(s − m) above 1 for a larger key). A slip
is named at a step only when its replay gives every answered number of the step and one that the
mistake-free replays do not (attncli.grading.diagnose's test). Pure numpy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from attncli.core import Steps
from attncli.grading.diagnose import Diagnosis, Triple
from attncli.grading.mistakes import NO_MISTAKE, Mistake
from attncli.grading.replay import Reference, Replays, StepReplays, student
from attncli.grading.rule import Rule, half_unit
from attncli.parsing.answers import Answer
from attncli.steps import TILE_STEPS, Key

CODES = ("not_rescaled", "max_not_updated")  # the online softmax's slips, beside attncli.grading.CODES
SLIPS = {code: Mistake((code,)) for code in CODES}  # each as a Mistake, as the verdict's views are asked for one


class Bound(NamedTuple):
    """Numbers as a careful student may have them: within `r` of `t`, cell by cell."""

    t: np.ndarray
    r: np.ndarray


def exact(t: np.ndarray | float) -> Bound:
    value = np.asarray(t, dtype=np.float64)
    return Bound(value, np.zeros(value.shape))


def plus(a: Bound, b: Bound) -> Bound:
    return Bound(a.t + b.t, a.r + b.r)


def minus(a: Bound, b: Bound) -> Bound:
    return Bound(a.t - b.t, a.r + b.r)


def times(a: Bound, b: Bound) -> Bound:
    """a·b: |a'b' − ab| ≤ |a|·r_b + |b|·r_a + r_a·r_b."""
    return Bound(a.t * b.t, np.abs(a.t) * b.r + np.abs(b.t) * a.r + a.r * b.r)


def exponential(a: Bound) -> Bound:
    """e^a: e^(a ± r) is farthest from e^a at the upper end, e^a·(e^r − 1) away; e^(−∞) = 0 exactly."""
    value = np.exp(a.t)
    return Bound(value, np.where(value == 0, 0.0, value * np.expm1(a.r)))


def largest(a: Bound, b: Bound) -> Bound:
    """max(a, b): a max moves no farther than the farther of its arguments."""
    return Bound(np.maximum(a.t, b.t), np.maximum(a.r, b.r))


def either(condition: np.ndarray, a: Bound, b: Bound) -> Bound:
    return Bound(np.where(condition, a.t, b.t), np.where(condition, a.r, b.r))


def carried(a: Bound, decimals: int) -> Bound:
    """What a student keeps: rounded to `decimals`, half a unit more, but for exact numbers already on that grid
    (the rule of attncli.grading.interval.carry) and the infinite ones."""
    finite = np.isfinite(a.t)
    with np.errstate(invalid="ignore"):
        on_grid = np.abs(np.round(np.where(finite, a.t, 0.0), decimals) - a.t) <= 1e-15 + 1e-12 * np.abs(a.t)
    moved = finite & ~((a.r == 0) & on_grid)
    return Bound(a.t, a.r + np.where(moved, half_unit(decimals), 0.0))


class Online:
    """The tile answers of one file, each head's recurrence replayed once per slip and source (truth or own)."""

    def __init__(self, steps: Steps, replays: Replays, answers: Sequence[Answer], rule: Rule) -> None:
        self.steps = steps
        self.replays = replays
        self.rule = rule
        self.written = {(a.step, a.head): a for a in answers if a.step in TILE_STEPS and a.written is None}
        self.replayed: dict[tuple[int, str, bool], dict[str, Reference]] = {}

    def judges(self, answer: Answer) -> tuple[StepReplays, Diagnosis]:
        """What the verdict judges a tile step's cells by (attncli.grading.verdict): its references and diagnosis."""
        view = _View(self, self.replays, (answer.step, answer.head))
        return view, _Diagnosis(self.steps, view, self.rule, answer)

    def reference(self, key: Key, mistake: Mistake, own: bool) -> Reference:
        """Step `key` of the recurrence under `mistake` (NO_MISTAKE or one of SLIPS), from the problem alone or (`own`)
        fed the student's numbers."""
        step, head = key
        assert head is not None, "a tile step belongs to a head"
        slip = mistake.codes[0] if mistake.codes else ""
        found = self.replayed.get((head, slip, own))
        if found is None:
            found = self.replayed[(head, slip, own)] = self.replay(head, slip, own)
        return found[step]

    def inputs(self, head: int, own: bool) -> tuple[Bound, Bound]:
        """The scores (L, S) and values (S, d_v) as the student carries them: the forward's replay of them carried,
        and, `own`, what they wrote of them instead."""
        found = []
        for step in ("scores", "values"):
            t, r, _ = self.replays.reference(NO_MISTAKE, own, (step, head))
            num = carried(Bound(t, np.where(np.isfinite(t), r, 0.0)), self.rule.carry)
            given = self.replays.given.get((step, head)) if own else None
            if given is not None and given.t.shape == t.shape:
                answered = ~np.isnan(given.t)
                num = either(answered, Bound(given.t, given.e), num)
            found.append(num)
        return found[0], found[1]

    def replay(self, head: int, slip: str, own: bool) -> dict[str, Reference]:
        """Every tile step of `head` under `slip` ("" for none), tile after tile, as (values, radii, excluded)."""
        tiles = self.steps.heads[head].tiles
        assert tiles is not None, "a head with tiles"
        scores, values = self.inputs(head, own)
        written = [name for name in TILE_STEPS if own and (name, head) in self.written]
        passed = {name: student(self.written[(name, head)], self.rule) for name in written}
        return _Recurrence(scores, values, tiles.size, self.rule.carry, slip, passed).run()


class _Recurrence:
    """One replay of a head's tiles: each tile's m', α, ℓ', o' (their bounds before the student rounds them), the
    numbers carried on being the student's own where `passed` holds them."""

    def __init__(self, scores: Bound, values: Bound, size: int, carry: int, slip: str, passed: dict) -> None:
        self.scores, self.values, self.size, self.carry, self.slip = scores, values, size, carry, slip
        self.passed = passed  # step -> interval.Carried of what the student wrote: NaN where not answered
        queries, keys = scores.t.shape
        self.count = -(-keys // size)
        width = values.t.shape[1]
        self.out = {
            name: (np.empty(shape), np.empty(shape))
            for name, shape in (
                ("running_max", (queries, self.count)),
                ("rescale", (queries, self.count)),
                ("running_sum", (queries, self.count)),
                ("accumulator", (queries, self.count, width)),
            )
        }

    def kept(self, name: str, tile: int, num: Bound) -> Bound:
        """What the student carries on from tile `tile`'s `name`: what they wrote there, else `num`."""
        found = self.passed.get(name)
        if found is None:
            return num
        at = np.arange(num.t.shape[0]) * self.count + tile if name == "accumulator" else (slice(None), tile)
        written = Bound(found.t[at], found.e[at])
        return either(~np.isnan(written.t), written, num)

    def record(self, name: str, tile: int, num: Bound) -> None:
        self.out[name][0][:, tile] = num.t
        self.out[name][1][:, tile] = num.r

    @np.errstate(invalid="ignore", over="ignore")  # −∞ − (−∞) where a tile is masked whole: those cells are set apart
    def run(self) -> dict[str, Reference]:
        queries, width = self.scores.t.shape[0], self.values.t.shape[1]
        m, total, o = exact(np.full(queries, -np.inf)), exact(np.zeros(queries)), exact(np.zeros((queries, width)))
        for tile, first in enumerate(range(0, self.scores.t.shape[1], self.size)):
            keys = slice(first, first + self.size)
            s, v = (
                Bound(self.scores.t[:, keys], self.scores.r[:, keys]),
                Bound(self.values.t[keys], self.values.r[keys]),
            )
            seen = np.isfinite(s.t)  # (L, B)
            tile_max = Bound(np.where(seen, s.t, -np.inf).max(axis=1), np.where(seen, s.r, 0.0).max(axis=1))
            new = largest(m, tile_max)  # (L,)
            if self.slip == "max_not_updated":  # the first max seen kept
                new = either(np.isfinite(m.t), m, new)
            self.record("running_max", tile, new)
            new = self.kept("running_max", tile, new)
            alpha = either(np.isfinite(m.t), exponential(minus(m, new)), exact(np.zeros(queries)))
            self.record("rescale", tile, alpha)
            alpha = self.kept("rescale", tile, carried(alpha, self.carry))
            shifted = minus(s, Bound(new.t[:, None], new.r[:, None]))
            e = carried(either(seen, exponential(shifted), exact(np.zeros(seen.shape))), self.carry)  # (L, B)
            scale = exact(np.ones(queries)) if self.slip == "not_rescaled" else alpha
            total = plus(times(scale, total), Bound(e.t.sum(axis=1), e.r.sum(axis=1)))
            self.record("running_sum", tile, total)
            total = self.kept("running_sum", tile, carried(total, self.carry))
            mixed = Bound(e.t @ v.t, e.r @ np.abs(v.t) + np.abs(e.t) @ v.r + e.r @ v.r)  # (L, d_v)
            o = plus(times(Bound(scale.t[:, None], scale.r[:, None]), o), mixed)
            self.record("accumulator", tile, o)
            o = self.kept("accumulator", tile, carried(o, self.carry))
            m = new
        return {name: self.reference(name) for name in TILE_STEPS}

    def reference(self, name: str) -> Reference:
        """Step `name` as the steps table lays it out (the accumulator a row per query and tile); a running max of
        −∞ (no key seen yet) is out, as a masked score is."""
        t, r = self.out[name]
        if name == "accumulator":
            t, r = t.reshape(-1, t.shape[2]), r.reshape(-1, r.shape[2])
        r = np.where(np.isfinite(r), r, math.inf)
        return t, r, np.isneginf(t) if name == "running_max" else np.zeros(t.shape, dtype=bool)


class _View(StepReplays):
    """A tile step's references, as the verdict asks a step's replays for them."""

    def __init__(self, online: Online, replays: Replays, key: Key) -> None:
        self.online = online
        super().__init__(replays, key)

    def reference(self, mistake: Mistake, own: bool, key: Key | None = None, tracked: bool = True) -> Reference:
        return self.online.reference(key or self.key, mistake, own)


class _Diagnosis(Diagnosis):
    """The slips of the online softmax that reproduce a tile step (and too few decimals)."""

    def diagnose(self, triples: list[Triple], transposed: bool) -> tuple[str, ...]:
        found = self.facts(triples)
        for own, clean in self.departures(triples):
            found += [
                code
                for code, mistake in SLIPS.items()
                if code not in found and self.explains(triples, self.reference(mistake, own), clean)
            ]
        return tuple(code for code in ("too_few_decimals", *CODES) if code in found)
