"""Points and partial credit: what a key's `points:` asks for, the cells it counts, and the score a report earns.

A key may say, with any of these fields:

    points:
      steps: {weights: 3, output: 2}   # each listed step's points, shared equally by its cells; others worth 0
      per_cell: 1                      # every cell of the key this many points (the default when steps is absent)
      carried: full | half | none      # credit for a cell marked ↷ (right from the student's own inputs); full
      rounded: full | half | none      # credit for a cell whose only fault is rounding; none

How a score is counted. The cells are the key's: every cell of every step the key asks for that the mask lets
through (the cells of its blank answer template, `key_cells`), answered or not. A step's points are shared
equally by its cells (a step name covers every head and layer: `weights: 3` over two heads of 3 × 3 weights is
3/18 a cell); with `per_cell: P` every cell is worth P. A cell earns its share times its credit:

    right                                                      1
    carried (↷: right from the student's own wrong inputs)     carried: full 1 | half 1/2 | none 0
    whose only fault is rounding                               rounded: full 1 | half 1/2 | none 0
    anything else: wrong, not answered, in a step missing or written in a shape that fits neither way   0

score = Σ share × credit and max_score = Σ share over the key's cells, in exact fractions (three thirds make one);
percent = 100 · score / max_score rounded half up to 2 decimals, None when max_score is 0.

A cell whose only fault is rounding is told from the grader's report in one of two ways:
(a) its status is too_few_decimals (the key's min_decimals asks for more decimals than it shows) and the number
    it shows is the true value within the allowance the grader recorded on the cell, |written − expected| ≤
    own + carried_in (the rounding rule's half unit of the last decimal written, widened by the rounding its
    inputs carry in; with the rule's relative slack EXACT and absolute EXACT_ZERO);
(b) its step is wrong and the step's diagnosis names rounded_early and no code but rounding ones (rounded_early,
    too_few_decimals): the grader replayed the step with the carried numbers rounded to 1 to 3 decimals and that
    replay gives every answered number of the step, so each answered cell of it that is not right (wrong; carried,
    right only from inputs the student rounded; too_few_decimals) is a rounding slip.
A rounding cell earns the `rounded` credit even where it is also carried.

Worked example (the article's bank problem: one query, 3 keys, d_v = 2; tests/test_gradebook.py replays it):
with `points: {steps: {dot: 3, scores: 1, weights: 1, output: 2}, carried: half, rounded: half}`

    dot      2.4142 ✗  1.4142 ✓  0 ✓           a cell 3/3 = 1:  0 + 1 + 1            = 2
    scores   1.7071 ↷  1 ✓       0 ✓           a cell 1/3:      1/6 + 1/3 + 1/3      = 5/6
    weights  0.5978    0.2935    0.1087        a cell 1/3, e^s rounded to one decimal (rounded_early):
                                                                1/6 + 1/6 + 1/6      = 1/2
    output   1.3043 ↷  0.6957 ↷                a cell 2/2 = 1:  1/2 + 1/2            = 1

score = 2 + 5/6 + 1/2 + 1 = 13/3 (4.333…) of 7, percent = 100 · 13/21 = 61.904… → 61.90.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from attncli.core import Steps
from attncli.grading import CARRIED, RIGHT, TOO_FEW_DECIMALS, WRONG, Cell, Report, StepReport
from attncli.grading.rule import allowed
from attncli.layers import StackSteps
from attncli.parsing.fields import FieldReader
from attncli.steps import ANSWERED, BY_NAME, STREAM_STEPS
from attncli.yamldoc import Document, FieldPath, did_you_mean, kind_of

CREDITS = {"full": Fraction(1), "half": Fraction(1, 2), "none": Fraction(0)}
FIELDS = ("steps", "per_cell", "carried", "rounded")
STEP_NAMES = (*ANSWERED, *STREAM_STEPS)  # what `steps:` may list: a step of the calculation or of a stacked layer
ROUNDING_CODES = frozenset({"rounded_early", "too_few_decimals"})
MAX_POINTS = 10**6  # points of one step or one cell: far above any course's scale, far below a float's
StepKey = tuple[int | None, str, int | None]  # (layer, step, head), as a StepReport names its step


@dataclass(frozen=True)
class PointsSpec:
    """A key's `points:`, validated; the default (no `points:`) is one point a cell, carried full, rounded none."""

    steps: tuple[tuple[str, Fraction], ...] | None = None  # (step name, its points) as listed; None: per_cell
    per_cell: Fraction = Fraction(1)
    carried: str = "full"  # one of CREDITS
    rounded: str = "none"  # one of CREDITS


@dataclass(frozen=True)
class KeyCells:
    """The cells a key counts: its blank answer template as the grader reports it, each step with its name (step,
    head, head_name, layer), rows, columns and every cell the mask lets through, in the order of the calculation."""

    steps: tuple[StepReport, ...]


@dataclass(frozen=True)
class StepScore:
    """One step of the key: its points earned and possible, and how many of its cells earned what."""

    key: StepReport  # the key's step (names it; its cells are the ones that count)
    answered: StepReport | None  # the student's report of the step; None when it is not in the report at all
    score: Fraction
    max_score: Fraction
    right: int  # cells right
    carried: int  # cells marked ↷ whose fault is not rounding
    rounded: int  # cells whose only fault is rounding

    @property
    def cells(self) -> int:
        return len(self.key.cells)


@dataclass(frozen=True)
class Score:
    """What a report earns: exact points, their maximum, the percent (2 decimals), each step's, and the rules."""

    score: Fraction
    max_score: Fraction
    percent: Decimal | None  # None when max_score is 0
    steps: tuple[StepScore, ...]
    spec: PointsSpec = PointsSpec()  # the rules it was counted by


def read_points(document: Document, key: KeyCells | None = None) -> PointsSpec:
    """The validated `points:` of a key `document` (the default spec when it has none); with `key`, every step it
    lists must be one the key counts cells of. Errors name the file, line and field (points.steps.weights)."""
    data = document.data if isinstance(document.data, dict) else {}
    if "points" not in data:
        return PointsSpec()
    reader = FieldReader(document)
    value = data["points"]
    if not isinstance(value, dict):
        raise reader.error(("points",), "gradebook.points_not_mapping", got=kind_of(value))
    reader.check_fields(value, ("points",), FIELDS)
    if "steps" in value and "per_cell" in value:
        raise reader.error(("points", "per_cell"), "gradebook.steps_and_per_cell")
    steps = _steps(reader, value["steps"], key) if "steps" in value else None
    per_cell = _points(reader, ("points", "per_cell"), value["per_cell"]) if "per_cell" in value else Fraction(1)
    carried, rounded = (_credit(reader, name, value.get(name, default)) for name, default in _CREDIT_DEFAULTS)
    return PointsSpec(steps, per_cell, carried, rounded)


_CREDIT_DEFAULTS = (("carried", "full"), ("rounded", "none"))


def _steps(reader: FieldReader, value: object, key: KeyCells | None) -> tuple[tuple[str, Fraction], ...]:
    path: FieldPath = ("points", "steps")
    if not isinstance(value, dict):
        raise reader.error(path, "gradebook.points_steps_not_mapping", got=kind_of(value))
    if not value:
        raise reader.error(path, "gradebook.no_point_steps")
    counted = [] if key is None else list(dict.fromkeys(step.step for step in key.steps))
    for name in value:
        if name not in STEP_NAMES:
            hint = did_you_mean(str(name), STEP_NAMES) or ""
            raise reader.error((*path, name), "check.unknown_step", name=name, hint=hint)
        if key is not None and name not in counted:
            raise reader.error((*path, name), "gradebook.step_not_in_key", step=name, steps=", ".join(counted))
    return tuple((name, _points(reader, (*path, name), points)) for name, points in value.items())


def _points(reader: FieldReader, path: FieldPath, value: object) -> Fraction:
    """A number of points, exactly as written: 0.1 is 1/10 (a float's shortest repr), from 0 to MAX_POINTS."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= MAX_POINTS:
        raise reader.error(path, "gradebook.bad_points", got=kind_of(value), limit=MAX_POINTS)
    return Fraction(value) if isinstance(value, int) else Fraction(repr(value))


def _credit(reader: FieldReader, name: str, value: object) -> str:
    if not isinstance(value, str) or value not in CREDITS:
        raise reader.error(("points", name), "gradebook.bad_credit", got=kind_of(value))
    return value


def key_cells(steps: Steps | StackSteps, names: Collection[str | StepKey] | None = None) -> KeyCells:
    """The cells a key for `steps` counts: those of its blank answer template (every step a student computes,
    every cell the mask lets through), graded as a student's file is so that the steps are named alike;
    `names`: only these steps — by name, every layer's and head's (the key's `require:`), or by (layer, step, head),
    those its `answers:` holds — None for every one."""
    from attncli import pipeline, yamldoc  # the grader, for a key only
    from attncli.grading import templates

    blank = pipeline.grade(steps, yamldoc.load(templates.template(steps), "<template>"))
    return KeyCells(
        tuple(step for step in blank.steps if names is None or step.step in names or step_key(step) in names)
    )


def step_key(step: StepReport) -> StepKey:
    return step.layer, step.step, step.head


def score(report: Report, spec: PointsSpec, key: KeyCells) -> Score:
    """The points `report` earns under `spec`, counted over the key's cells (see the module's docstring)."""
    answered = {step_key(step): step for step in report.steps}
    shares = _shares(spec, key)
    steps = []
    for step in key.steps:
        given = answered.get(step_key(step))
        share = shares[step.step]
        if share == 0 and (given is None or BY_NAME[step.step].aside):  # no points, not answered or optional: unlisted
            continue
        cells = {} if given is None else {(cell.row, cell.column): cell for cell in given.cells}
        kinds: Counter[str] = Counter()
        earned = Fraction(0)
        for place in step.cells:
            kind = _kind(cells.get((place.row, place.column)), given)
            kinds[kind] += 1
            earned += share * _CREDIT[kind](spec)
        steps.append(
            StepScore(step, given, earned, share * len(step.cells), kinds[RIGHT], kinds[CARRIED], kinds[ROUNDED])
        )
    total, most = sum((s.score for s in steps), Fraction(0)), sum((s.max_score for s in steps), Fraction(0))
    return Score(total, most, percent(total, most), tuple(steps), spec)


ROUNDED = "rounded"  # a cell's kind when its only fault is rounding
_CREDIT = {
    RIGHT: lambda spec: Fraction(1),
    CARRIED: lambda spec: CREDITS[spec.carried],
    ROUNDED: lambda spec: CREDITS[spec.rounded],
    WRONG: lambda spec: Fraction(0),
}


def _shares(spec: PointsSpec, key: KeyCells) -> Mapping[str, Fraction]:
    """Each step name's points a cell: per_cell, or the step's points over all the key's cells of that name."""
    counts: Counter[str] = Counter()
    for step in key.steps:
        counts[step.step] += len(step.cells)
    if spec.steps is None:  # the numbers written on the way count only when the points name them
        return {name: Fraction(0) if BY_NAME[name].aside else spec.per_cell for name in counts}
    listed = dict(spec.steps)
    return {name: listed[name] / count if name in listed else Fraction(0) for name, count in counts.items()}


def _kind(cell: Cell | None, step: StepReport | None) -> str:
    """RIGHT, CARRIED, ROUNDED or WRONG (which earns nothing: wrong, not answered, not in the report)."""
    if cell is None or step is None or cell.entry is None:
        return WRONG
    if cell.status == RIGHT:
        return RIGHT
    if only_rounding(cell, step):
        return ROUNDED
    return CARRIED if cell.status == CARRIED else WRONG


def step_status(step: StepReport) -> str:
    """A step's status as gradebooks count it: ROUNDED for a wrong step whose only fault is rounding (each answered
    cell of it that is not right is wrong only by rounding, `only_rounding`), else the grader's own."""
    if step.status != WRONG:
        return step.status
    faults = [cell for cell in step.cells if cell.entry is not None and cell.status != RIGHT]
    return ROUNDED if faults and all(only_rounding(cell, step) for cell in faults) else WRONG


def only_rounding(cell: Cell, step: StepReport) -> bool:
    """Whether the only fault of an answered cell that is not right is rounding: (a) or (b) of the module's
    docstring."""
    if cell.entry is None or cell.status == RIGHT:
        return False
    codes = set(step.diagnosis)
    if step.status == WRONG and "rounded_early" in codes and codes <= ROUNDING_CODES:
        return True
    return cell.status == TOO_FEW_DECIMALS and within_allowance(cell)


def within_allowance(cell: Cell) -> bool:
    """Whether the number a cell shows is its true value within the allowance the grader recorded on it
    (own + carried_in), judged as the rounding rule judges: a masked mark or a masked true value never is."""
    value, expected = cell.entry.value if cell.entry is not None else None, cell.expected
    if value is None or not math.isfinite(expected):
        return False
    return abs(value - expected) <= allowed(cell.own, cell.carried_in, expected)


def percent(points: Fraction, most: Fraction) -> Decimal | None:
    """100 · points / most rounded half up to 2 decimals (exact: 2/3 is 66.67, 1/8 is 12.50); None for most 0."""
    if most == 0:
        return None
    hundredths = 10_000 * points / most  # exact; points are never negative
    whole, rest = divmod(hundredths.numerator, hundredths.denominator)
    return Decimal(whole + (2 * rest >= hundredths.denominator)).scaleb(-2)
