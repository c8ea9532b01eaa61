"""Grading homework: which answered cells are right, which step first goes wrong, and which classic mistake explains it.

The rounding rule: a written number is right when it lies within half a unit of its
last written decimal of the value it should have, widened only by what the rounding of
its inputs can carry in when every number before it is carried at the carry precision
(4 decimals unless the key says otherwise). The widening is computed, not guessed: each
step of the calculation is replayed on a value and a radius (how far a careful
student's number can be from it), and the radius is propagated rigorously through dot
products, the scale, e^s, the normalisation, the weighted sum, the concatenation and
W_O, growing by half a unit of the carry decimal at every number the student carries.

Every answered cell is compared with the true value and with what the student's own
earlier numbers give (error carried forward), so a correct softmax of wrong scores
counts as "right method, wrong inputs". A wrong step is then replayed under each
classic mistake, judged by the same rule; a mistake is named only when its replay
reproduces every answered cell of the step and explains a cell that the mistake-free
replay does not. Pure functions of the calculation and the answers: no I/O.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import ClassVar

import numpy as np

from attncli import positions
from attncli.core import COSINE_EPS, HeadSteps, Steps
from attncli.grading import interval
from attncli.grading.interval import Carried
from attncli.parsing.answers import HEAD_STEPS, Answer, Answers, Entry
from attncli.problem import Problem, Projection, Score

CODES = (
    "missing_scale",
    "wrong_scale",
    "scale_not_applicable",
    "bias_forgotten",
    "no_exp",
    "unnormalized",
    "not_normalized",
    "wrong_axis",
    "mask_ignored",
    "mask_inverted",
    "causal_shifted",
    "causal_upper_left",
    "rope_reversed",
    "rope_pairing",
    "not_transposed",
    "values_as_keys",
    "keys_as_values",
    "cosine_no_norm",
    "additive_no_tanh",
    "wrong_row",
    "other_head",
    "concat_order",
    "forgot_w_o",
    "transposed",
    "rounded_early",
    "too_few_decimals",
)
RIGHT, CARRIED, WRONG = "right", "carried", "wrong"
NOT_ANSWERED, MISSING, TOO_FEW_DECIMALS = "not_answered", "missing", "too_few_decimals"
CARRY = 4  # decimals a careful student keeps from step to step, unless the key or --carry says otherwise
EXACT = 1e-9  # relative tolerance for whole numbers and expressions, which are exact as written
EXACT_ZERO = 1e-12  # ... and the absolute one, for true values that are zero up to floating-point noise
DEPENDS = {
    "queries": (),
    "keys": (),
    "values": (),
    "dot": ("queries", "keys"),
    "scores": ("queries", "keys", "dot"),
    "weights": ("queries", "keys", "dot", "scores"),
    "output": ("queries", "keys", "values", "dot", "scores", "weights"),
}
CARRIED_STEPS = ("queries", "keys", "values", "dot", "scores", "exp", "weights", "output")  # where rounding happens
EARLY_DECIMALS = (1, 2, 3)
PAIRABLE = ("scale", "applied", "bias", "mask", "compat", "exp", "axis", "mix")  # slips of method two can make at once
# A replay goes stage by stage: each head's inputs, dot, scores and weights, then every head's output, concat, final.
STAGES = ("inputs", "dot", "scores", "weights", "output", "concat", "final")
HEAD_STAGES = STAGES[:4]
STAGE_INDEX = {kind: i for i, kind in enumerate(STAGES)}
SCREENS = ("dot", "scores", "weights")  # a step that, answered in full, hands on the student's numbers alone
ACTS = {  # the stages at which each field of a Mistake changes the calculation
    "compat": ("dot",),
    "rope": ("dot",),
    "mask": ("dot", "scores"),
    "scale": ("scores",),
    "applied": ("scores",),
    "bias": ("scores",),
    "exp": ("weights",),
    "axis": ("weights",),
    "mix": ("output",),
    "swap": ("output",),
    "weights_of": ("output",),
    "order": ("concat",),
    "w_o": ("final",),
    "shift": ("weights",),
}
EARLY_ACTS = {  # rounded_early at one step: where its rounding happens (its e^s unshifted is the field `shift`)
    "queries": ("inputs", "dot"),
    "keys": ("inputs", "dot"),
    "values": ("inputs",),
    "dot": ("dot",),
    "scores": ("scores",),
    "exp": ("weights",),
    "weights": ("weights",),
    "output": ("output",),
}
Key = tuple[str, int | None]  # (step, head); head None for concat and final
Stage = tuple[str, int | None]  # (one of STAGES, head); head None for concat and final


@dataclass(frozen=True)
class Cell:
    row: int
    column: int
    entry: Entry | None  # None: not answered
    expected: float  # the true value; -inf for a masked score
    masked: bool  # the mask excludes this cell
    status: str  # RIGHT, CARRIED (follows from the student's own wrong inputs), WRONG, NOT_ANSWERED, TOO_FEW_DECIMALS
    own: float = 0.0  # half a unit of the last decimal written (0 for exact entries; the tolerance when one is set)
    carried_in: float = 0.0  # the widening from the rounding the inputs carry in


@dataclass(frozen=True)
class StepReport:
    step: str
    head: int | None  # None for concat and final
    head_name: str | None  # None for concat and final, and when the problem has one head
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    cells: tuple[Cell, ...]  # every cell the mask lets through, and the masked ones answered
    status: str  # RIGHT; CARRIED: right method, wrong inputs; WRONG: the mistake is here; NOT_ANSWERED; MISSING
    diagnosis: tuple[str, ...]  # CODES that reproduce the step's numbers
    layer: int | None = None  # with stacked layers (attncli.grading.layers): the layer, counting from 0

    def count(self, status: str) -> int:
        """How many cells have `status`."""
        return sum(cell.status == status for cell in self.cells)

    @property
    def correct(self) -> int:
        return self.count(RIGHT)

    @property
    def total(self) -> int:
        """The answered cells."""
        return sum(cell.entry is not None for cell in self.cells)


@dataclass(frozen=True)
class Report:
    file: str
    steps: tuple[StepReport, ...]

    @property
    def ok(self) -> bool:
        """No step is wrong or missing, and something was answered: carried steps only inherit a mistake."""
        return not self.wrong_steps and any(step.status != NOT_ANSWERED for step in self.steps)

    @property
    def first_mistake(self) -> StepReport | None:
        """The first step where a mistake was made, or that is missing."""
        return next(iter(self.wrong_steps), None)

    @property
    def wrong_steps(self) -> tuple[StepReport, ...]:
        """Every wrong or missing step, in the order of the calculation."""
        return tuple(step for step in self.steps if step.status in (WRONG, MISSING))


@dataclass(frozen=True)
class Mistake:
    """A classic slip (or two), replayed through the whole calculation to see whether it gives the student's numbers.

    Each field is one place where the calculation can go wrong; the default is the right way.
    """

    codes: tuple[str, ...] = ()  # () for the calculation as it should be
    scale: str = "true"  # true | none | d_k | sqrt_d_v | sqrt_d_model | sqrt_keys | sqrt_queries | times_sqrt_d_k
    applied: float | None = None  # scale_not_applicable: the 1/√d applied to a score that takes none
    bias: bool = True  # False: bias_forgotten, the scaled scores taken without the problem's bias
    mask: str = "true"  # true | none | inverted | transposed | strict | wide | upper_left
    rope: str = "true"  # true | reversed (turned by −m·θ) | pairing (the other of half and interleaved)
    compat: str = "true"  # true | not_transposed | values | no_norm | no_tanh
    exp: bool = True  # False: no_exp, the scores normalised as they are
    axis: str = "keys"  # keys | queries (wrong_axis) | none (unnormalized)
    mix: str = "values"  # values | keys
    swap: tuple[int, int] | None = None  # wrong_row: these two tokens' values swapped in the weighted sum
    weights_of: tuple[int, ...] | None = None  # other_head: head h mixes its values with weights_of[h]'s weights
    order: tuple[int, ...] | None = None  # concat_order: the heads' outputs concatenated in this order
    w_o: bool = True  # False: forgot_w_o, the concatenation given as the final output
    decimals: int | None = None  # rounded_early: carried with this many decimals ...
    where: str | None = None  # ... at this step of CARRIED_STEPS only (None: at every one)
    shift: bool = True  # False: e^s taken as it is, as a student who rounds early does (not e^(s − m))

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(tuple(getattr(self, name) for name in _MISTAKE_FIELDS)))

    def __hash__(self) -> int:
        """The fields' hash, made once: a replay is looked up by its Mistake hundreds of times a file."""
        return self._hash  # type: ignore[attr-defined]


_MISTAKE_FIELDS = tuple(f.name for f in fields(Mistake))
NO_MISTAKE = Mistake()  # the calculation as it should be


@dataclass(frozen=True)
class _Pass:
    """A replay as far as one stage: what each step came to and what it hands on to the steps after it.

    Stages are replayed one at a time from the pass before, so replays that agree up to a stage share it.
    """

    computed: Mapping[Key, Carried]
    excluded: Mapping[Key, np.ndarray]  # the cells this pass leaves out (masked); all False for unmaskable steps
    passed: Mapping[Key, Carried]  # what each step hands on: rounded to the carry, the student's where written
    count: int  # the roundings made so far (the columns of g)
    pending: Key | None = None  # the last step computed, carried on only when a later stage is replayed


Triple = tuple[int, int, Entry]  # an answered cell: row, column, what was written
Reference = tuple[np.ndarray, np.ndarray, np.ndarray]  # values, radii, excluded
Listed = tuple[list, list, list]  # a Reference as nested lists


@dataclass(frozen=True)
class _Rule:
    """How a written number is judged: the file's or the command line's tolerance, carry and min_decimals."""

    tolerance: float | None
    carry: int
    min_decimals: int | None

    def own(self, entry: Entry) -> float:
        """Half a unit of the last decimal written; 0 for exact entries; the tolerance when one is set."""
        if self.tolerance is not None:
            return self.tolerance
        return 0.0 if entry.decimals is None else 0.5 * 10.0**-entry.decimals

    def agrees(self, entry: Entry, value: float, radius: float, excluded: bool) -> bool:
        """Whether what the student wrote is `value` up to `radius` carried in (a "masked" mark: whether it is out)."""
        if entry.value is None:
            return bool(excluded)
        if not math.isfinite(value):
            return False
        if not math.isfinite(radius):
            radius = 0.0  # carrying can move it anywhere (e^s carried as 0.0000): judged by its own half unit
        if self.tolerance is not None:
            return abs(entry.value - value) <= self.tolerance
        allowed = (self.own(entry) + radius) * (1 + EXACT) + EXACT * abs(value) + EXACT_ZERO
        return abs(entry.value - value) <= allowed


def grade(
    steps: Steps,
    answers: Answers,
    *,
    tolerance: float | None = None,
    carry: int | None = None,
    min_decimals: int | None = None,
    require: Sequence[str] | None = None,
    file: str = "-",
    diagnose: Collection[Key] | None = None,
) -> Report:
    """The report on `answers` to the problem whose calculation is `steps`.

    Keyword values (from the command line) win over the file's own `tolerance:`, `carry:`, `min_decimals:`
    and `require:`. `diagnose` names the (step, head) whose mistakes are looked for (default: every
    step's); the tutor asks about one step, and the search is most of the cost of grading.
    """
    rule = _Rule(
        tolerance if tolerance is not None else answers.tolerance,
        next(c for c in (carry, answers.carry, CARRY) if c is not None),
        min_decimals if min_decimals is not None else answers.min_decimals,
    )
    replays = _Replays(steps, [a for a in answers.steps if a.written is None], rule.carry)
    reports: dict[Key, StepReport] = {}
    coarse_steps: dict[Key, bool] = {}
    for answer in answers.steps:
        key = (answer.step, answer.head)
        upstream = [dep for dep in _depends(key, len(steps.heads)) if dep in reports]
        wrong = any(reports[dep].status in (WRONG, CARRIED) for dep in upstream)
        coarse = any(coarse_steps[dep] for dep in upstream)
        explain = diagnose is None or key in diagnose
        reports[key] = _Grader(steps, replays, rule, answer).report(wrong, coarse, explain)
        coarse_steps[key] = _coarse(reports[key], rule.carry)
    required = require if require is not None else answers.require
    for key in _required(steps, required):
        if key not in reports:
            reports[key] = StepReport(key[0], key[1], _head_name(steps, key[1]), (), (), (), MISSING, ())
    return Report(file, tuple(reports[key] for key in _order(steps) if key in reports))


def _coarse(report: StepReport, carry: int) -> bool:
    """Whether a step holds a number written with fewer decimals than the carry precision."""
    return any(c.entry is not None and c.entry.decimals is not None and c.entry.decimals < carry for c in report.cells)


def _head_name(steps: Steps, head: int | None) -> str | None:
    return steps.heads[head].spec.label if head is not None and len(steps.heads) > 1 else None


def _order(steps: Steps) -> list[Key]:
    """Every step of the calculation in order: each head's, then concat and final."""
    return [*((step, h) for h in range(len(steps.heads)) for step in HEAD_STEPS), ("concat", None), ("final", None)]


def _required(steps: Steps, names: Sequence[str]) -> list[Key]:
    """The steps `names` asks for that this problem has (every head's; no dot for given scores, no lone concat)."""
    keys = []
    for step, head in _order(steps):
        if step not in names:
            continue
        if head is not None and step in ("queries", "keys", "dot") and steps.heads[head].queries is None:
            continue
        if step == "concat" and steps.concat is None:
            continue
        keys.append((step, head))
    return keys


def _depends(key: Key, heads: int) -> list[Key]:
    """The answered steps whose numbers flow into `key`, for telling carried errors from rounding."""
    step, head = key
    if head is not None:
        return [(dep, head) for dep in DEPENDS[step]]
    every_head = [(dep, h) for h in range(heads) for dep in HEAD_STEPS]
    return every_head if step == "concat" else [*every_head, ("concat", None)]


def _complete(answer: Answer, shape: tuple[int, ...]) -> bool:
    """Whether every cell of a step of this `shape` is answered."""
    cells = answer.cells
    return (len(cells), len(cells[0]) if cells else 0) == shape and all(e is not None for row in cells for e in row)


def _student(answer: Answer, carry: int) -> Carried:
    """The student's numbers as a matrix: NaN where not answered; a masked mark is -inf, or 0 for a weight.

    A number written with at least `carry` decimals may stand for a more precise one the student
    kept: it is known up to half a unit of its last decimal. Coarser numbers were used as written.
    """
    masked = 0.0 if answer.step == "weights" else -math.inf
    t = [[math.nan if e is None else masked if e.value is None else e.value for e in row] for row in answer.cells]
    r = [
        [
            0.5 * 10.0**-e.decimals if e is not None and e.decimals is not None and e.decimals >= carry else 0.0
            for e in row
        ]
        for row in answer.cells
    ]
    return interval.known(np.array(t, dtype=np.float64), np.array(r, dtype=np.float64))


class _Solved:
    """The replays of a problem alone (no student's numbers in them), worked out once however many files it grades.

    Keyed by the calculation itself: a key's `Steps` graded again finds its replays here.
    """

    KEPT = 8  # problems remembered: a key per exercise of a class (each holds every replay it needed)
    cache: ClassVar[dict[tuple[int, int], _Solved]] = {}

    def __init__(self, steps: Steps, carry: int) -> None:
        self.steps = steps
        self.carry = carry
        self.stages = [*((kind, h) for h in range(len(steps.heads)) for kind in HEAD_STAGES)]
        self.stages += [("output", h) for h in range(len(steps.heads))]
        self.stages += [("concat", None)] * (steps.concat is not None) + [("final", None)]
        self.first = {kind: min(i for i, (k, _) in enumerate(self.stages) if k == kind) for kind, _ in self.stages}
        self.stage_of: dict[Key, int] = {}
        self.passes: dict[tuple[Mistake, int], _Pass] = {}
        self.prefixes: dict[tuple[Mistake, int], Mistake] = {}
        self.cuts: dict[tuple[Mistake, int, int], Mistake] = {}
        self.singles = _singles(steps)
        self.pairable = [m for m in self.singles if _changed(m) <= set(PAIRABLE)]  # one alone may change nothing
        self.pairs = [p for a, b in itertools.combinations(self.pairable, 2) if (p := _pair(a, b)) is not None]
        self.applicable: list[Mistake] | None = None

    @classmethod
    def of(cls, steps: Steps, carry: int) -> _Solved:
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
                for name in _changed(mistake)
                if any(self.first.get(kind, index + 1) <= index for kind in _acts(mistake, name))
            }
            found = self.prefixes[(mistake, index)] = Mistake(**kept) if kept else NO_MISTAKE
        return found

    def run(self, mistake: Mistake, index: int, given: Mapping[Key, Carried], memo: dict) -> _Pass:
        """The replay under `mistake` as far as stage `index`, each stage replayed once for all that share it."""
        mistake = self.prefix(mistake, index)
        found = memo.get((mistake, index))
        if found is None:
            before = self.run(mistake, index - 1, given, memo) if index else _Pass({}, {}, {}, 0)
            found = _advance(self.steps, mistake, given, self.carry, before, self.stages[index])
            memo[(mistake, index)] = found
        return found

    def before(self, mistake: Mistake, at: int, cut: int) -> Mistake:
        """`mistake` without the slips that act at stage `at` (one of STAGES) only through stages up to `cut`."""
        found = self.cuts.get((mistake, at, cut))
        if found is None:
            dropped = {
                name: getattr(NO_MISTAKE, name)
                for name in _changed(mistake)
                if all(STAGES.index(kind) <= cut for kind in _acts(mistake, name) if STAGES.index(kind) <= at)
            }
            found = self.cuts[(mistake, at, cut)] = replace(mistake, **dropped) if dropped else mistake
        return found

    def whole_to(self, mistake: Mistake, index: int) -> _Pass:
        """The replay from the problem alone, as far as stage `index`."""
        return self.run(mistake, index, {}, self.passes)

    def whole(self, mistake: Mistake) -> _Pass:
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


class _Replays:
    """Every replay one file's grading needs, computed only when asked for: most steps need only two."""

    def __init__(self, steps: Steps, answered: Sequence[Answer], carry: int) -> None:
        self.solved = _Solved.of(steps, carry)
        self.answered = answered
        self.carry = carry
        self.passes: dict[tuple[Mistake, int], _Pass] = {}  # fed the student's numbers
        self.references: dict[tuple[Mistake, bool, Key], Reference] = {}
        self.cuts: dict[Key, int | None] = {}
        truth = self.solved.whole(NO_MISTAKE).computed
        self.full = {(a.step, a.head) for a in answered if _complete(a, truth[(a.step, a.head)].t.shape)}

    @functools.cached_property
    def given(self) -> dict[Key, Carried]:
        """The student's numbers by step, made when a replay first needs them (a right file needs none)."""
        return {(a.step, a.head): _student(a, self.carry) for a in self.answered}

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


class _Grader:
    """One answered step: its cells, its status and, when it is wrong, what explains it."""

    def __init__(self, steps: Steps, replays: _Replays, rule: _Rule, answer: Answer) -> None:
        self.steps = steps
        self.replays = replays
        self.rule = rule
        self.answer = answer
        self.key = (answer.step, answer.head)
        self.truth = self.reference(NO_MISTAKE, False)
        self.judged: dict[int, bool] = {}  # id of a replay's reference (held by `replays`) -> whether it explains
        self.lists: dict[int, tuple[Reference, Listed]] = {}  # id of a reference -> (it, as lists)

    def reference(self, mistake: Mistake, own: bool, key: Key | None = None) -> Reference:
        return self.replays.reference(mistake, own, key or self.key)

    def report(self, upstream_wrong: bool, upstream_coarse: bool, explain: bool = True) -> StepReport:
        """The step's report; `upstream_wrong`: an earlier step it uses is wrong or carried; `upstream_coarse`:
        one has numbers with fewer decimals than the carry precision; without `explain`, a wrong step's
        diagnosis is not looked for."""
        answer = self.answer
        name = _head_name(self.steps, answer.head)
        if answer.written is not None:
            return StepReport(answer.step, answer.head, name, answer.rows, answer.columns, (), WRONG, self.shaped())
        cells = self.cells()
        triples = [(c.row, c.column, c.entry) for c in cells if c.entry is not None]
        statuses = {cell.status for cell in cells} - {NOT_ANSWERED}

        def step(status: str, diagnosis: tuple[str, ...] = ()) -> StepReport:
            return StepReport(
                answer.step, answer.head, name, answer.rows, answer.columns, tuple(cells), status, diagnosis
            )

        if not statuses:
            return step(NOT_ANSWERED)
        if answer.transposed:
            cells = [replace(c, status=WRONG) if c.entry is not None else c for c in cells]
            return step(WRONG, _sorted(["transposed", *(self.diagnose(triples, True) if explain else ())]))
        if statuses == {RIGHT}:
            return step(RIGHT)
        if statuses <= {RIGHT, CARRIED}:
            if upstream_wrong:
                return step(CARRIED)
            if upstream_coarse:
                return step(WRONG, ("rounded_early",))  # right only from inputs rounded to fewer decimals
            cells = [replace(c, status=RIGHT) if c.status == CARRIED else c for c in cells]
            return step(RIGHT)  # right from the student's own right inputs, as precise as the carry
        return step(WRONG, self.diagnose(triples, transposed=False) if explain else ())

    def cells(self) -> list[Cell]:
        """Every answered cell and every unanswered one the mask lets through, judged against the truth and, only
        where it is not right, against the student's own inputs."""
        t, r, excluded = self.listed(self.truth)
        own: Listed | None = None
        rule = self.rule
        fewest, fixed = rule.min_decimals, rule.tolerance is not None
        cells = []
        for i, row in enumerate(self.answer.cells):
            values, radii, out = t[i], r[i], excluded[i]
            for j, entry in enumerate(row):
                if entry is None:
                    if out[j]:
                        continue
                    status, half = NOT_ANSWERED, 0.0
                else:
                    if fewest is not None and entry.decimals is not None and entry.decimals < fewest:
                        status = TOO_FEW_DECIMALS
                    elif rule.agrees(entry, values[j], radii[j], out[j]):
                        status = RIGHT
                    else:
                        own = own or self.listed(self.reference(NO_MISTAKE, True))
                        status = CARRIED if rule.agrees(entry, own[0][i][j], own[1][i][j], own[2][i][j]) else WRONG
                    half = rule.own(entry)
                radius = radii[j]
                carried_in = 0.0 if fixed or not math.isfinite(radius) else radius
                cells.append(Cell(i, j, entry, values[j], out[j], status, half, carried_in))
        return cells

    def listed(self, ref: Reference) -> Listed:
        """`ref` as nested lists of Python numbers, made once: judged cell by cell, they compute as the arrays
        do, several times faster."""
        found = self.lists.get(id(ref))
        if found is None or found[0] is not ref:
            found = self.lists[id(ref)] = (ref, (ref[0].tolist(), ref[1].tolist(), ref[2].tolist()))
        return found[1]

    def departs(self, triples: list[Triple], ref: Reference) -> bool:
        """Whether some answered number is not `ref`'s."""
        t, r, out = self.listed(ref)
        return any(not self.rule.agrees(entry, t[i][j], r[i][j], out[i][j]) for i, j, entry in triples)

    def fits(self, triples: list[Triple], ref: Reference) -> bool:
        """Whether `ref` gives every answered number (cells it leaves undefined must be right ones)."""
        t, r, out = ref  # indexed, not listed: most replays are judged once, and fail at their first cell
        truth_t, truth_r, truth_out = self.listed(self.truth)
        for i, j, entry in triples:
            value = float(t[i, j])
            if math.isnan(value):
                if not self.rule.agrees(entry, truth_t[i][j], truth_r[i][j], truth_out[i][j]):
                    return False
            elif not self.rule.agrees(entry, value, float(r[i, j]), bool(out[i, j])):
                return False
        return True

    def departures(self, triples: list[Triple]) -> list[tuple[bool, Reference]]:
        """(own, clean) for each mistake-free replay that some answered number departs from: only those leave
        anything for a mistake to explain."""
        found = []
        for own in (False, True):
            clean = self.reference(NO_MISTAKE, own)
            if self.departs(triples, clean):
                found.append((own, clean))
        return found

    def reproduces(self, triples: list[Triple], mistake: Mistake, own: bool, clean: Reference) -> bool:
        """Whether the replay of `mistake` explains the step; mistakes that share a replay here are judged once."""
        ref = self.reference(mistake, own)
        found = self.judged.get(id(ref))
        if found is None:
            found = self.judged[id(ref)] = self.explains(triples, ref, clean)
        return found

    def explains(self, triples: list[Triple], ref: Reference, clean: Reference) -> bool:
        """Whether `ref` fits every answered number and gives one that the mistake-free `clean` does not."""
        return self.fits(triples, ref) and self.departs(triples, clean)

    def diagnose(self, triples: list[Triple], transposed: bool) -> tuple[str, ...]:
        """Every classic mistake that reproduces the step: single ones first, then pairs, then early rounding.

        When several single mistakes reproduce the numbers, all are named: each explains them as well.
        Weights that do not add up to 1 are named not_normalized only when no mistake reproduces them.
        """
        found = self.facts(triples)
        singles = self.single_codes(triples, transposed)
        found += singles
        if not singles:
            found += self.pairs(triples, transposed)
        if not set(found) - {"too_few_decimals", "not_normalized"}:
            found += self.early(triples)
        if set(found) - {"too_few_decimals", "not_normalized"} and "not_normalized" in found:
            found.remove("not_normalized")  # a mistake that reproduces the numbers says more
        return _sorted(found)

    def facts(self, triples: list[Triple]) -> list[str]:
        """What the numbers show by themselves: too few decimals, weights that do not add up to 1."""
        found = []
        if self.rule.min_decimals is not None and any(
            entry.decimals is not None and entry.decimals < self.rule.min_decimals for _, _, entry in triples
        ):
            found.append("too_few_decimals")
        if self.answer.step == "weights" and self.unnormalized_row(triples):
            found.append("not_normalized")
        return found

    def unnormalized_row(self, triples: list[Triple]) -> bool:
        """Whether a row with every cell answered sums further from 1 than its cells' allowances add up to."""
        _, r, excluded = self.truth
        rows: dict[int, list[Triple]] = {}
        for triple in triples:
            rows.setdefault(triple[0], []).append(triple)
        for i, row in rows.items():
            if len(row) < int((~excluded[i]).sum()):
                continue
            written = sum(entry.value for _, _, entry in row if entry.value is not None)
            allowed = sum(self.rule.own(entry) + r[i, j] for _, j, entry in row if entry.value is not None)
            if abs(written - 1) > allowed * (1 + EXACT) + EXACT_ZERO:
                return True
        return False

    def single_codes(self, triples: list[Triple], transposed: bool) -> list[str]:
        """The codes of every single mistake that reproduces the step (one that only repeats a code is not tried)."""
        found: list[str] = []
        for own, clean in self.departures(triples):
            for mistake in self.replays.solved.single_mistakes():
                if not set(mistake.codes) <= set(found) and self.reproduces(triples, mistake, own, clean):
                    found += mistake.codes
            if transposed:
                continue
            if "transposed" not in found and self.square() and self.explains(triples, _transpose(clean), clean):
                found.append("transposed")
            if "wrong_row" not in found and self.permuted(triples, clean):
                found.append("wrong_row")
            if "other_head" not in found and any(self.explains(triples, ref, clean) for ref in self.other_heads(own)):
                found.append("other_head")
        return found

    def pairs(self, triples: list[Triple], transposed: bool) -> list[str]:
        """Two slips in one step: every pair of single mistakes in different places, and one slip transposed."""
        solved = self.replays.solved
        found: list[str] = []
        for own, clean in self.departures(triples):
            for pair in solved.pairs:
                if not set(pair.codes) <= set(found) and self.reproduces(triples, pair, own, clean):
                    found += pair.codes
            if self.square() and not transposed:
                for mistake in solved.pairable:
                    codes = ["transposed", *mistake.codes]
                    ref = None if set(codes) <= set(found) else _transpose(self.reference(mistake, own))
                    if ref is not None and self.explains(triples, ref, clean):
                        found += codes
        return found

    def early(self, triples: list[Triple]) -> list[str]:
        """rounded_early: every carried number, or the numbers of one step, rounded to fewer decimals."""
        for (own, clean), decimals, where in itertools.product(
            self.departures(triples), EARLY_DECIMALS, (None, *CARRIED_STEPS)
        ):
            mistake = Mistake(("rounded_early",), decimals=decimals, where=where, shift=False)
            if decimals < self.rule.carry and self.reproduces(triples, mistake, own, clean):
                return ["rounded_early"]
        return []

    def square(self) -> bool:
        t = self.truth[0]
        return t.shape[0] == t.shape[1]

    def permuted(self, triples: list[Triple], clean: Reference) -> bool:
        """wrong_row: each answered row (or column) is some row (column) of `clean`, at least one another token's."""
        size = clean[0].shape
        for axis in (0, 1):
            lines: dict[int, list[Triple]] = {}
            for triple in triples:
                lines.setdefault(triple[axis], []).append(triple)
            borrowed = False
            for index, cells in lines.items():
                if self.line_fits(cells, clean, axis, index):
                    continue
                sources = [k for k in range(size[axis]) if k != index and self.line_fits(cells, clean, axis, k)]
                if not sources:
                    break
                borrowed = True
            else:
                if borrowed:
                    return True
        return False

    def line_fits(self, cells: list[Triple], ref: Reference, axis: int, source: int) -> bool:
        """Whether the answered cells of one row (axis 0) or column (axis 1) are row or column `source` of `ref`."""
        t, r, out = self.listed(ref)
        for i, j, entry in cells:
            a, b = (source, j) if axis == 0 else (i, source)
            if math.isnan(t[a][b]) or not self.rule.agrees(entry, t[a][b], r[a][b], out[a][b]):
                return False
        return True

    def other_heads(self, own: bool) -> Iterator[Reference]:
        """The same step of every other head, where it has this step's shape."""
        step, head = self.key
        if head is None:
            return
        truth = self.replays.solved.whole(NO_MISTAKE).computed
        for other in range(len(self.steps.heads)):
            key = (step, other)
            if other != head and key in truth and truth[key].t.shape == self.truth[0].shape:
                yield self.reference(NO_MISTAKE, own, key)

    def shaped(self) -> tuple[str, ...]:
        """Diagnoses for a step written in a shape that fits neither orientation."""
        written = self.answer.written or ()
        width = max((len(row) for row in written), default=0)
        grid = [(i, j, e) for i, row in enumerate(written) for j, e in enumerate(row) if e is not None]
        if self.answer.step != "final" or self.steps.concat is None or not grid:
            return ()
        for own in (False, True):
            concat = self.reference(NO_MISTAKE, own, ("concat", None))
            for transposed, ref in ((False, concat), (True, _transpose(concat))):
                shaped = (len(written), width) == ref[0].shape and all(len(row) == width for row in written)
                if shaped and self.fits_written(grid, ref):
                    return ("forgot_w_o", "transposed") if transposed else ("forgot_w_o",)
        return ()

    def fits_written(self, grid: list[Triple], ref: Reference) -> bool:
        t, r, out = ref
        return all(
            not np.isnan(t[i, j]) and self.rule.agrees(entry, t[i, j], r[i, j], out[i, j]) for i, j, entry in grid
        )


def _sorted(codes: Sequence[str]) -> tuple[str, ...]:
    return tuple(code for code in CODES if code in codes)


def _transpose(ref: Reference) -> Reference:
    return ref[0].T, ref[1].T, ref[2].T


def _differs(replay: _Pass, truth: _Pass, keys: Iterable[Key]) -> bool:
    """Whether a replay gives another number at any of `keys`, or leaves out other cells."""
    for key in keys:
        num, other = truth.computed[key], replay.computed[key]
        if other.t.shape != num.t.shape or not np.array_equal(replay.excluded[key], truth.excluded[key]):
            return True
        if not np.allclose(other.t, num.t, rtol=1e-12, atol=1e-12, equal_nan=True):
            return True
    return False


def _acts(mistake: Mistake, name: str) -> tuple[str, ...]:
    """The stages at which field `name` of `mistake` changes the calculation."""
    if name in ACTS:
        return ACTS[name]
    return STAGES if mistake.where is None else EARLY_ACTS[mistake.where]  # decimals and where


def _pair(a: Mistake, b: Mistake) -> Mistake | None:
    """Both slips at once, when they are slips of method made in different places."""
    left, right = _changed(a), _changed(b)
    if a.codes == b.codes or not left | right <= set(PAIRABLE) or left & right or {"scale", "applied"} <= left | right:
        return None
    return replace(a, codes=(*a.codes, *b.codes), **{name: getattr(b, name) for name in right})


@functools.lru_cache(maxsize=4096)
def _changed(mistake: Mistake) -> frozenset[str]:
    """The fields in which `mistake` departs from the right calculation (asked for every replay: kept)."""
    default = NO_MISTAKE
    names = (f.name for f in fields(Mistake) if f.name != "codes")
    return frozenset(name for name in names if getattr(mistake, name) != getattr(default, name))


def _singles(steps: Steps) -> list[Mistake]:
    """Every single classic mistake this problem can show."""
    heads = len(steps.heads)
    tokens = len(steps.problem.tokens)
    found = [
        Mistake(("missing_scale",), scale="none"),
        *(
            Mistake(("wrong_scale",), scale=scale)
            for scale in ("d_k", "sqrt_d_v", "sqrt_d_model", "sqrt_keys", "sqrt_queries", "times_sqrt_d_k")
        ),
        *(Mistake(("scale_not_applicable",), applied=factor) for factor in _inapplicable_scales(steps)),
        *([Mistake(("bias_forgotten",), bias=False)] if steps.problem.bias is not None else []),
        Mistake(("no_exp",), exp=False),
        Mistake(("unnormalized",), axis="none"),
        Mistake(("wrong_axis",), axis="queries"),
        Mistake(("mask_ignored",), mask="none"),
        Mistake(("mask_inverted",), mask="inverted"),
        Mistake(("mask_inverted",), mask="transposed"),
        Mistake(("causal_shifted",), mask="strict"),
        Mistake(("causal_shifted",), mask="wide"),
        *_decoding_and_rope(steps),
        Mistake(("not_transposed",), compat="not_transposed"),
        Mistake(("values_as_keys",), compat="values"),
        Mistake(("keys_as_values",), mix="keys"),
        Mistake(("cosine_no_norm",), compat="no_norm"),
        Mistake(("additive_no_tanh",), compat="no_tanh"),
        *(Mistake(("wrong_row",), swap=(a, b)) for a, b in itertools.combinations(range(tokens), 2)),
        *(
            Mistake(("other_head",), weights_of=tuple(other if h == head else h for h in range(heads)))
            for head in range(heads)
            for other in range(heads)
            if other != head
        ),
        *(
            Mistake(("concat_order",), order=order)
            for order in itertools.permutations(range(heads))
            if order != tuple(range(heads))
        ),
        Mistake(("forgot_w_o",), w_o=False),
    ]
    return found


def _decoding_and_rope(steps: Steps) -> list[Mistake]:
    """The slips of today's models: the top-left causal mask when decoding against a KV cache, RoPE turned
    the wrong way round, or with the other pairing (which differs only from d_k = 4 on)."""
    problem = steps.problem
    found = []
    rule = problem.mask_rule
    if rule.kind == "causal_lower_right" and rule.window is None and len(problem.query_tokens) < len(problem.tokens):
        found.append(Mistake(("causal_upper_left",), mask="upper_left"))
    if problem.rope is not None:
        found.append(Mistake(("rope_reversed",), rope="reversed"))
        if any(head.rotation is not None and head.rotation.queries.shape[1] >= 4 for head in steps.heads):
            found.append(Mistake(("rope_pairing",), rope="pairing"))
    return found


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


def _inapplicable_scales(steps: Steps) -> list[float]:
    """The 1/√d a student might apply to a score that takes no scale (score: dot, or scores given)."""
    widths = {head.keys.shape[1] for head in steps.heads if head.keys is not None}
    factors = []
    for head in steps.heads:
        if head.spec.score.kind == "dot" or head.queries is None:
            candidates = widths | {head.values.shape[1]} if head.queries is None else {head.keys.shape[1]}
            factors += [1 / math.sqrt(d) for d in sorted(candidates) if d > 1]
    return sorted(set(factors))


@np.errstate(all="ignore")  # a slip may divide by zero or overflow; those cells just reproduce nothing
def _advance(
    steps: Steps, mistake: Mistake, given: Mapping[Key, Carried], carry: int, before: _Pass, stage: Stage
) -> _Pass:
    """The calculation under `mistake` one stage further, each step fed the student's numbers (`given`) where written.

    Every number comes with how far a student who carries `carry` decimals may be from it.
    """
    problem = steps.problem
    noise = interval.Noise()
    noise.count = before.count
    computed, excluded, passed = dict(before.computed), dict(before.excluded), dict(before.passed)
    pending: list[Key] = [before.pending] if before.pending is not None else []

    def keep(step: str, num: Carried) -> Carried:
        """The number a student carries on from `step`: rounded to `carry` decimals, or early to fewer."""
        if mistake.decimals is not None and mistake.where in (None, step):
            return interval.round_to(num, mistake.decimals)
        return interval.carry(num, carry, noise)

    def carry_on(key: Key) -> None:
        """What the student hands on from step `key`: its numbers carried, their own where they wrote some."""
        num = computed[key]
        student = given.get(key)
        if student is None or student.t.shape != num.t.shape:
            passed[key] = keep(key[0], num)
            return
        answered = ~np.isnan(student.t)
        written = interval.written(student.t, np.where(answered, student.e, 0.0), noise)
        passed[key] = written if answered.all() else interval.where(answered, written, keep(key[0], num))

    def settle(key: Key, num: Carried, out: np.ndarray | None = None, last: bool = True) -> None:
        """Step `key` comes to `num`; the stage's last step is carried on when the next stage starts (the rounding
        in the same order), so a replay wanted only for this step's numbers stops here."""
        computed[key] = num
        excluded[key] = np.zeros(num.t.shape, dtype=bool) if out is None else out
        pending.append(key)
        if not last:
            carry_on(pending.pop())

    for key in pending:
        carry_on(key)
    pending.clear()
    kind, h = stage
    mask = _mask(mistake.mask, problem.mask, problem)
    if h is not None:
        head = steps.heads[h]
    if kind == "inputs":
        settle(("values", h), _operand(head.spec.values, head.values, keep), last=head.queries is None)
        if head.queries is not None:
            settle(("queries", h), _operand(head.spec.queries, head.queries, keep), last=False)
            settle(("keys", h), _operand(head.spec.keys, head.keys, keep))
    elif kind == "dot":
        if head.queries is None:
            compat = interval.exact(head.dot)
        else:
            queries, keys, values = (passed[(step, h)] for step in ("queries", "keys", "values"))
            queries, keys = _turned(head, mistake.rope, queries, keys, keep)
            compat = _compatibility(head.spec.score, mistake.compat, queries, keys, values, keep)
        settle(("dot", h), compat, ~mask)
    elif kind == "scores":
        scores = interval.times(passed[("dot", h)], _scale_carried(_scale(mistake, steps, h), mistake, carry, noise))
        if problem.bias is not None and mistake.bias:  # added to the scaled scores before the mask, as in the core
            scores = interval.add(scores, interval.exact(problem.bias.of(h)))
        scores = interval.where(mask, scores, interval.exact(np.full(mask.shape, -np.inf)))
        settle(("scores", h), scores, ~mask)
    elif kind == "weights":
        scores = passed[("scores", h)]
        settle(("weights", h), _normalise(scores, mistake, keep), np.isneginf(scores.t))
    elif kind == "output":
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
        settle(("output", h), interval.matmul(used, mixed))
    elif kind == "concat":
        order = mistake.order or tuple(range(len(steps.heads)))
        settle(("concat", None), interval.join([passed[("output", h)] for h in order]))
    elif steps.concat is None:
        settle(("final", None), passed[("output", 0)])
    else:
        concat = passed[("concat", None)]
        if problem.w_o is None or (not mistake.w_o and concat.t.shape == steps.output.shape):
            settle(("final", None), concat)
        else:
            settle(("final", None), interval.matmul(concat, keep("final", interval.exact(problem.w_o))))
    return _Pass(computed, excluded, passed, noise.count, pending[0])


def _operand(spec: object, matrix: np.ndarray, keep: Callable[[str, Carried], Carried]) -> Carried:
    """Queries, keys or values as the student has them: X·W from X and W as they carry them, or as given."""
    if isinstance(spec, Projection):
        return interval.matmul(keep("inputs", interval.exact(spec.x)), keep("inputs", interval.exact(spec.w)))
    return interval.exact(matrix)


def _compatibility(
    score: Score, slip: str, queries: Carried, keys: Carried, values: Carried, keep: Callable[[str, Carried], Carried]
) -> Carried:
    """How well each query matches each key, before any scale, as a student computes it (or slips)."""
    kind = score.kind
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
        a = keep("queries", interval.matmul(queries, keep("inputs", interval.exact(score.w_query))))
        b = keep("keys", interval.matmul(keys, keep("inputs", interval.exact(score.w_key))))
        hidden = interval.add(interval.expand(a, 1), interval.expand(b, 0))  # (L, S, d_a)
        if slip != "no_tanh":
            hidden = keep("dot", interval.tanh(hidden))
        return interval.matmul(hidden, keep("inputs", interval.exact(score.v)))
    keys_t = interval.transpose(keys)
    if kind == "general":
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


def _mask(kind: str, mask: np.ndarray, problem: Problem) -> np.ndarray:
    """The mask as a slip applies it; causal_shifted moves a causal mask's diagonal by one; causal_upper_left
    aligns a decoding mask to the first key instead of the last (query i sees keys 0..i, padding kept)."""
    if kind == "true":
        return mask
    if kind == "upper_left":
        padded = np.isin(np.array(problem.tokens, dtype=object), np.array(problem.mask_rule.padding, dtype=object))
        return np.tri(*mask.shape, dtype=bool) & ~padded[None, :]
    if kind == "none":
        return np.ones_like(mask)
    if kind == "inverted":
        return ~mask
    square = mask.shape[0] == mask.shape[1]
    causal = square and np.array_equal(mask, np.tri(mask.shape[0], dtype=bool))
    if kind == "transposed" and square:
        return mask.T  # causal the wrong way: each query sees itself and the later positions
    if kind == "strict" and causal:
        return np.tri(mask.shape[0], k=-1, dtype=bool)  # each query without itself
    if kind == "wide" and causal:
        return np.tri(mask.shape[0], k=1, dtype=bool)  # each query with the next position too
    return mask


def _scale(mistake: Mistake, steps: Steps, h: int) -> float:
    """The factor a head's scores are multiplied by under the slip (the true one where it cannot apply)."""
    head = steps.heads[h]
    score = head.spec.score
    kind = mistake.scale
    if mistake.applied is not None and (score.kind == "dot" or head.queries is None):
        return mistake.applied
    if kind == "true" or head.queries is None:
        return score.scale
    if kind == "none":
        return 1.0
    if score.kind != "scaled_dot":
        return score.scale
    d_k, d_v = head.keys.shape[1], head.values.shape[1]
    queries = head.spec.queries
    d_model = queries.x.shape[1] if isinstance(queries, Projection) else d_k
    wrong = {
        "d_k": 1 / d_k,
        "sqrt_d_v": 1 / math.sqrt(d_v),
        "sqrt_d_model": 1 / math.sqrt(d_model),
        "sqrt_keys": 1 / math.sqrt(len(steps.problem.tokens)),
        "sqrt_queries": 1 / math.sqrt(len(steps.problem.query_tokens)),
        "times_sqrt_d_k": math.sqrt(d_k),
    }[kind]
    return score.scale if math.isclose(wrong, 1.0) else wrong  # a factor of 1 is missing_scale, not wrong_scale


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
