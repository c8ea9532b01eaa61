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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import ClassVar

import numpy as np

from attncli.core import Steps
from attncli.grading import interval
from attncli.grading.interval import Carried
from attncli.grading.mistakes import NO_MISTAKE, PAIRABLE, STAGES, Mistake, acts, changed, pair, singles
from attncli.grading.rule import Rule
from attncli.grading.stages import Pass, Stage, advance
from attncli.parsing.answers import Answer
from attncli.problem import Projection
from attncli.steps import Key

HEAD_STAGES = STAGES[1:5]  # inputs, dot, scores, weights: each head's, before any head's output
STAGE_INDEX = {kind: i for i, kind in enumerate(STAGES)}
SCREENS = ("dot", "scores", "weights")  # stages whose last step, answered in full, hands on the student's numbers alone
# The steps computed in another's stage (attncli.grading.stages): its name in STAGES; and the steps read in their own
STAGE_OF = {
    **dict.fromkeys(("queries", "keys", "values"), "inputs"),
    **dict.fromkeys(("turned_queries", "turned_keys"), "dot"),
    "biased_scores": "scores",
    **dict.fromkeys(("exp", "sums"), "weights"),
}
READ_IN_STAGE = ("queries", "keys", "values", "turned_queries", "turned_keys", "scores", "exp", "sums")
Reference = tuple[np.ndarray, np.ndarray, np.ndarray]  # values, radii, excluded
Listed = tuple[list, list, list]  # a Reference as nested lists


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
    cache: ClassVar[dict[tuple[int, int, bool], Solved]] = {}

    def __init__(self, steps: Steps, carry: int, inputs: Carried | None = None) -> None:
        self.steps = steps
        self.carry = carry
        self.inputs = inputs  # the rows every projection multiplies, as a careful student has them (a layer's)
        self.stages: list[Stage] = [("positioned", None)] * (steps.positioned is not None)
        self.stages += [(kind, h) for h in range(len(steps.heads)) for kind in HEAD_STAGES]
        self.stages += [("output", h) for h in range(len(steps.heads))]
        self.stages += [("concat", None)] * (steps.concat is not None) + [("final", None)]
        self.first = {kind: min(i for i, (k, _) in enumerate(self.stages) if k == kind) for kind, _ in self.stages}
        self.stage_of: dict[Key, int] = {}
        self.largest = _largest(steps)
        self.passes: dict[tuple[Mistake, int], Pass] = {}
        self.rough: dict[tuple[Mistake, int], Pass] = {}  # the same replays, every rounding in e (untracked)
        self.shared: dict[tuple[Mistake, int, int], Pass] = {}  # untracked ones fed students' numbers, by print
        self.prints: dict[tuple[int, tuple], int] = {}  # what a student wrote before a stage -> its print
        self.printing = itertools.count()  # never a print twice, however often `shared` is emptied
        self.prefixes: dict[tuple[Mistake, int], Mistake] = {}
        self.cuts: dict[tuple[Mistake, int, int], Mistake] = {}
        self.singles = singles(steps)
        self.pairable = [m for m in self.singles if changed(m) <= set(PAIRABLE)]  # one alone may change nothing
        self.pairs = [p for a, b in itertools.combinations(self.pairable, 2) if (p := pair(a, b)) is not None]
        self.applicable: list[Mistake] | None = None

    @classmethod
    def of(cls, steps: Steps, carry: int, kept: bool = True, inputs: Carried | None = None) -> Solved:
        """The one for `steps` (it is held, so its id cannot be another's while cached); a new one is cached when
        `kept`. `inputs` are made from the truth alone (attncli.grading.layers), so a key's are always the same."""
        key = (id(steps), carry, inputs is not None)
        found = cls.cache.get(key)
        if found is not None and found.steps is steps:
            return found
        found = cls(steps, carry, inputs)
        if kept:
            cls.cache[key] = found
            while len(cls.cache) > cls.KEPT:
                del cls.cache[next(iter(cls.cache))]
        return found

    def stage(self, key: Key) -> int:
        """The stage that computes step `key`."""
        found = self.stage_of.get(key)
        if found is None:
            step, head = key
            found = self.stage_of[key] = self.stages.index((STAGE_OF.get(step, step), head))
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

    def run(
        self,
        mistake: Mistake,
        index: int,
        given: Mapping[Key, Carried],
        memo: dict,
        tracked: bool = True,
        prints: Sequence[int] | None = None,
    ) -> Pass:
        """The replay under `mistake` as far as stage `index`, each stage replayed once for all that share it
        (`memo` holds the replays of one kind: tracked or not); with `prints` (`Replays.prints`), once for all
        the files whose students wrote the same numbers before it."""
        mistake = self.prefix(mistake, index)
        key = (mistake, index) if prints is None else (mistake, index, prints[index])
        found = memo.get(key)
        if found is None:
            before = self.run(mistake, index - 1, given, memo, tracked, prints) if index else Pass({}, {}, {}, 0)
            stage = self.stages[index]
            found = advance(self.steps, mistake, given, self.carry, before, stage, tracked, self.largest, self.inputs)
            memo[key] = found
        return found

    def printed(self, before: int, written: tuple) -> int:
        """The print of what a student wrote up to a stage: that of the stages before it, and `written` there."""
        found = self.prints.get((before, written))
        if found is None:
            found = self.prints[(before, written)] = next(self.printing)
        return found

    def read_at(self, key: Key) -> int:
        """The first stage whose replay reads the student's numbers of step `key`: a step followed by another in its
        own stage (queries, RoPE's turned vectors, the scores before a bias, e^s and their sums) is read there, by
        the step after it; any other step when the next stage starts."""
        return self.stage(key) + (key[0] not in READ_IN_STAGE)

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

    def whole_to(self, mistake: Mistake, index: int, tracked: bool = True) -> Pass:
        """The replay from the problem alone, as far as stage `index`."""
        return self.run(mistake, index, {}, self.passes if tracked else self.rough, tracked)

    def whole(self, mistake: Mistake) -> Pass:
        return self.whole_to(mistake, len(self.stages) - 1)

    def single_mistakes(self) -> list[Mistake]:
        """The single mistakes that change anything in this problem (the others cannot be told from no mistake)."""
        if self.applicable is None:
            self.applicable = [m for m in self.singles if self.differs(m)]
        return self.applicable

    def differs(self, mistake: Mistake) -> bool:
        """Whether `mistake` gives another number anywhere, or leaves out other cells: replayed as far as it must be
        (untracked: the numbers are the same, only their radii are looser)."""
        for index in range(len(self.stages)):
            if self.prefix(mistake, index) == NO_MISTAKE:
                continue  # the same replay as the truth so far
            replay, truth = self.whole_to(mistake, index, False), self.whole_to(NO_MISTAKE, index, False)
            if _differs(replay, truth, [key for key in truth.computed if self.stage(key) == index]):
                return True
        return False


class Replays:
    """Every replay one file's grading needs, computed only when asked for: most steps need only two."""

    SHARED = 20_000  # untracked replays fed students' numbers a problem keeps for the files after

    def __init__(
        self, steps: Steps, answered: Sequence[Answer], rule: Rule, kept: bool = True, inputs: Carried | None = None
    ) -> None:
        self.solved = Solved.of(steps, rule.carry, kept, inputs)
        if len(self.solved.shared) > self.SHARED:
            self.solved.shared.clear()
            self.solved.prints.clear()
        self.answered = answered
        self.rule = rule
        self.passes: dict[tuple[Mistake, int], Pass] = {}  # fed the student's numbers (untracked: solved.shared)
        self.references: dict[tuple[Mistake, bool, Key, bool], Reference] = {}
        self.cuts: dict[Key, int | None] = {}
        truth = self.solved.whole(NO_MISTAKE).computed
        self.full = {(a.step, a.head) for a in answered if complete(a, truth[(a.step, a.head)].t.shape)}

    @functools.cached_property
    def given(self) -> dict[Key, Carried]:
        """The student's numbers by step, made when a replay first needs them (a right file needs none)."""
        return {(a.step, a.head): student(a, self.rule) for a in self.answered}

    @functools.cached_property
    def prints(self) -> list[int]:
        """For each stage, the print of the student's numbers a replay as far as it reads: files whose students
        wrote the same numbers there share the replay (most of a class writes the same careful numbers)."""
        solved = self.solved
        found, current = [], -1
        for index in range(len(solved.stages)):
            written = tuple(
                (key, num.t.shape, num.t.tobytes(), num.e.tobytes())
                for key, num in self.given.items()
                if solved.read_at(key) == index
            )
            current = solved.printed(current, written)
            found.append(current)
        return found

    def reference(self, mistake: Mistake, own: bool, key: Key, tracked: bool = True) -> Reference:
        """Step `key` under `mistake`, from the problem alone or (`own`) fed the student's numbers; `tracked` False:
        the same numbers with looser radii (interval.Noise), made at a fraction of the cost.

        Mistakes that cannot change `key` share one reference (the same object: its judgements can be kept).
        """
        solved = self.solved
        index = solved.stage(key)
        mistake = solved.prefix(self.screened(mistake, key) if own else mistake, index)
        found = self.references.get((mistake, own, key, tracked))
        if found is None:
            if own and tracked:
                replayed = solved.run(mistake, index, self.given, self.passes)
            elif own:
                replayed = solved.run(mistake, index, self.given, solved.shared, False, self.prints)
            else:
                replayed = solved.whole_to(mistake, index, tracked)
            num = replayed.computed[key]
            found = self.references[(mistake, own, key, tracked)] = (num.t, num.radius, replayed.excluded[key])
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
            biased = self.solved.steps.problem.bias is not None  # the scores' stage then ends with the biased ones
            last = {"scores": "biased_scores"} if biased else {}
            written = [STAGES.index(s) for s in SCREENS if (last.get(s, s), head) in self.full]
        written = [w for w in written if w < STAGES.index(step)]
        return max(written) if written else None


class StepReplays:
    """The replays one answered step is judged against: the truth, and any mistake's, each listed once."""

    def __init__(self, replays: Replays, key: Key) -> None:
        self.replays = replays
        self.key = key
        self.lists: dict[int, tuple[Reference, Listed]] = {}  # id of a reference -> (it, as lists)
        self.truth = self.reference(NO_MISTAKE, False)

    def reference(self, mistake: Mistake, own: bool, key: Key | None = None, tracked: bool = True) -> Reference:
        """Step `key` (this step by default) under `mistake`, from the problem alone or (`own`) their numbers; not
        `tracked`, with looser radii (see Replays.reference)."""
        return self.replays.reference(mistake, own, key or self.key, tracked)

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


def _largest(steps: Steps) -> int:
    """The cells of the largest matrix a replay of `steps` carries (the budget of its roundings is shared by them)."""
    arrays = [steps.output, *([steps.concat] if steps.concat is not None else [])]
    for head in steps.heads:
        arrays += [
            a for a in (head.queries, head.keys, head.values, head.hidden, head.scores, head.output) if a is not None
        ]
        arrays += [
            side
            for spec in (head.spec.queries, head.spec.keys, head.spec.values)
            if isinstance(spec, Projection)
            for side in (spec.x, spec.w)
        ]
    return max(a.size for a in arrays)
