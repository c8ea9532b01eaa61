"""Grading homework: which answered cells are right, which step first goes wrong, and which classic mistake explains it.

Every answered cell is compared with the true value and with what the student's
own earlier numbers give (error carried forward), so a correct softmax of wrong
scores counts as "right method, wrong inputs" and the report points at the step
where the slip happened. A wrong step is then replayed under each classic mistake;
every mistake whose replay reproduces all of the step's answered cells is named.
Pure functions of the calculation and the answers: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from attncli.core import Steps, compatibility, softmax
from attncli.parsing.answers import HEAD_STEPS, Answer, Answers, Entry
from attncli.problem import Projection

CODES = (
    "missing_scale",
    "wrong_scale",
    "scale_not_applicable",
    "no_exp",
    "unnormalized",
    "not_normalized",
    "wrong_axis",
    "mask_ignored",
    "mask_inverted",
    "causal_shifted",
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
ROUNDING = 1.5  # n decimals are right within 1.5·10⁻ⁿ: the rounding itself plus rounding carried from earlier steps
DEPENDS = {
    "queries": (),
    "keys": (),
    "values": (),
    "dot": ("queries", "keys"),
    "scores": ("queries", "keys", "dot"),
    "weights": ("queries", "keys", "dot", "scores"),
    "output": ("queries", "keys", "values", "dot", "scores", "weights"),
}
Key = tuple[str, int | None]  # (step, head); head None for concat and final


@dataclass(frozen=True)
class Cell:
    row: int
    column: int
    entry: Entry | None  # None: not answered
    expected: float  # the true value; -inf for a masked score
    masked: bool  # the mask excludes this cell
    status: str  # RIGHT, CARRIED (follows from the student's own wrong inputs), WRONG, NOT_ANSWERED, TOO_FEW_DECIMALS
    own: float = 0.0  # half a unit of the last decimal written (0 for exact entries)
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
    """A classic slip, replayed through the whole calculation to see whether it gives the student's numbers."""

    code: str | None = None  # None: no slip, the calculation as it should be
    scale: str = "true"  # true | none | d_k | sqrt_d_v | sqrt_d_model | sqrt_keys | sqrt_queries | times_sqrt_d_k
    mask: str = "true"  # true | none | inverted | transposed
    softmax: str = "exp"  # exp | no_exp | unnormalized | wrong_axis
    mix: str = "values"  # values | keys
    decimals: int | None = None  # every intermediate value rounded to this many decimals


MISTAKES = (
    Mistake("missing_scale", scale="none"),
    *(
        Mistake("wrong_scale", scale=scale)
        for scale in ("d_k", "sqrt_d_v", "sqrt_d_model", "sqrt_keys", "sqrt_queries", "times_sqrt_d_k")
    ),
    Mistake("no_exp", softmax="no_exp"),
    Mistake("unnormalized", softmax="unnormalized"),
    Mistake("wrong_axis", softmax="wrong_axis"),
    Mistake("mask_ignored", mask="none"),
    Mistake("mask_inverted", mask="inverted"),
    Mistake("mask_inverted", mask="transposed"),
    Mistake("keys_as_values", mix="keys"),
    *(Mistake("rounded_early", decimals=decimals) for decimals in (1, 2, 3)),
)


@dataclass(frozen=True)
class _Replay:
    """One pass through the calculation: what each step comes to from what the steps before it passed on."""

    computed: dict[Key, np.ndarray]
    excluded: dict[Key, np.ndarray]  # the cells this pass leaves out (masked); all False for unmaskable steps


def grade(
    steps: Steps,
    answers: Answers,
    *,
    tolerance: float | None = None,
    carry: int | None = None,
    min_decimals: int | None = None,
    require: Sequence[str] | None = None,
    file: str = "-",
) -> Report:
    """The report on `answers` to the problem whose calculation is `steps`.

    Keyword values (from the command line) win over the file's own `tolerance:`, `carry:`, `min_decimals:`
    and `require:`.
    """
    tol = tolerance if tolerance is not None else answers.tolerance
    given = {(answer.step, answer.head): _student(answer) for answer in answers.steps}
    truth = _replay(steps, Mistake(), {})
    carried = _replay(steps, Mistake(), given)
    slips = [(m.code, r) for m in MISTAKES for r in (_replay(steps, m, {}), _replay(steps, m, given))]
    reports: dict[Key, StepReport] = {}
    for answer in answers.steps:
        key = (answer.step, answer.head)
        name = _head_name(steps, answer.head)
        upstream = [reports[dep].status for dep in _depends(key, len(steps.heads)) if dep in reports]
        reports[key] = _grade_step(answer, name, truth, carried, slips, upstream, tol)
    required = require if require is not None else answers.require
    for key in _required(steps, required):
        if key not in reports:
            reports[key] = StepReport(key[0], key[1], _head_name(steps, key[1]), (), (), (), MISSING, ())
    return Report(file, tuple(reports[key] for key in _order(steps) if key in reports))


def _head_name(steps: Steps, head: int | None) -> str | None:
    return steps.heads[head].spec.name if head is not None and len(steps.heads) > 1 else None


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


def _grade_step(
    answer: Answer,
    head_name: str | None,
    truth: _Replay,
    carried: _Replay,
    slips: list[tuple[str | None, _Replay]],
    upstream: list[str],
    tol: float | None,
) -> StepReport:
    key = (answer.step, answer.head)
    expected, excluded = truth.computed[key], truth.excluded[key]
    own, own_excluded = carried.computed[key], carried.excluded[key]
    if answer.written is not None:
        return _step(answer, head_name, [], WRONG, ())
    cells = []
    for i, j, entry in _cells(answer, excluded):
        if entry is None:
            status = NOT_ANSWERED
        elif _agrees(entry, expected[i, j], excluded[i, j], tol):
            status = RIGHT
        elif _agrees(entry, own[i, j], own_excluded[i, j], tol):
            status = CARRIED
        else:
            status = WRONG
        allowance = 0.0 if entry is None or entry.decimals is None else 10.0**-entry.decimals
        cells.append(Cell(i, j, entry, float(expected[i, j]), bool(excluded[i, j]), status, allowance / 2, allowance))
    statuses = {cell.status for cell in cells} - {NOT_ANSWERED}
    if not statuses:
        return _step(answer, head_name, cells, NOT_ANSWERED, ())
    if statuses == {RIGHT} and not answer.transposed:
        return _step(answer, head_name, cells, RIGHT, ())
    if WRONG not in statuses and not answer.transposed:
        if any(status != RIGHT for status in upstream):
            return _step(answer, head_name, cells, CARRIED, ())
        return _step(answer, head_name, cells, WRONG, ("rounded_early",))  # right but for rounded inputs
    answered = [cell for cell in cells if cell.entry is not None]
    candidates: list[tuple[str | None, np.ndarray, np.ndarray]] = [
        (code, replay.computed[key], replay.excluded[key]) for code, replay in slips
    ]
    if expected.shape[0] == expected.shape[1]:
        candidates += [("transposed", expected.T, excluded.T), ("transposed", own.T, own_excluded.T)]
    found = ["transposed"] if answer.transposed else []
    found += [code for code, values, out in candidates if code and _reproduces(answered, values, out, tol)]
    if answer.transposed:
        cells = [replace(cell, status=WRONG) if cell.entry is not None else cell for cell in cells]
    return _step(answer, head_name, cells, WRONG, tuple(code for code in CODES if code in found))


def _step(answer: Answer, head_name: str | None, cells: list[Cell], status: str, diagnosis: tuple) -> StepReport:
    return StepReport(answer.step, answer.head, head_name, answer.rows, answer.columns, tuple(cells), status, diagnosis)


def _cells(answer: Answer, excluded: np.ndarray) -> Iterator[tuple[int, int, Entry | None]]:
    """Every answered cell, and every cell left unanswered that the mask does not exclude."""
    for i, row in enumerate(answer.cells):
        for j, entry in enumerate(row):
            if entry is not None or not excluded[i, j]:
                yield i, j, entry


def _depends(key: Key, heads: int) -> list[Key]:
    """The answered steps whose numbers flow into `key`, for telling carried errors from rounding."""
    step, head = key
    if head is not None:
        return [(dep, head) for dep in DEPENDS[step]]
    every_head = [(dep, h) for h in range(heads) for dep in HEAD_STEPS]
    return every_head if step == "concat" else [*every_head, ("concat", None)]


def _reproduces(cells: list[Cell], values: np.ndarray, excluded: np.ndarray, tol: float | None) -> bool:
    """Whether a replay gives every answered number and explains at least one that is not right.

    Cells the replay leaves undefined (NaN, such as a row with every key masked) must be right ones.
    """
    explained = False
    for cell in cells:
        value = values[cell.row, cell.column]
        if np.isnan(value):
            if cell.status != RIGHT:
                return False
        elif not _agrees(cell.entry, value, excluded[cell.row, cell.column], tol):
            return False
        else:
            explained = explained or cell.status != RIGHT
    return explained


def _agrees(entry: Entry, value: float, excluded: bool, tol: float | None) -> bool:
    """Whether what the student wrote is `value` (a "masked" mark: whether the cell is left out)."""
    if entry.value is None:
        return bool(excluded)
    if not math.isfinite(value):
        return False
    if tol is not None:
        return abs(entry.value - value) <= tol
    if entry.decimals is None:
        return math.isclose(entry.value, value, rel_tol=EXACT, abs_tol=EXACT_ZERO)
    return abs(entry.value - value) <= ROUNDING * 10.0**-entry.decimals * (1 + EXACT)


def _student(answer: Answer) -> np.ndarray:
    """The student's numbers as a matrix: NaN where not answered; a masked mark is -inf, or 0 for a weight."""
    masked = 0.0 if answer.step == "weights" else -math.inf
    return np.array(
        [[math.nan if e is None else masked if e.value is None else e.value for e in row] for row in answer.cells],
        dtype=np.float64,
    )


@np.errstate(all="ignore")  # a slip may divide by zero or overflow; those cells just reproduce nothing
def _replay(steps: Steps, mistake: Mistake, given: Mapping[Key, np.ndarray]) -> _Replay:
    """The calculation again under `mistake`, each step fed the student's numbers (`given`) where there are some."""
    problem = steps.problem
    computed: dict[Key, np.ndarray] = {}
    excluded: dict[Key, np.ndarray] = {}
    decimals = mistake.decimals
    r: Callable[[np.ndarray], np.ndarray] = (lambda a: np.round(a, decimals)) if decimals is not None else np.asarray

    def settle(key: Key, value: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        computed[key] = value
        excluded[key] = np.zeros(value.shape, dtype=bool) if out is None else out
        student = given.get(key)
        return r(value if student is None else np.where(np.isnan(student), value, student))

    mask = _mask(mistake.mask, problem.mask)
    outputs = []
    for h, head in enumerate(steps.heads):
        values = settle(("values", h), head.values)
        keys = None
        if head.queries is None:
            dot = head.compatibility
        else:
            queries, keys = settle(("queries", h), head.queries), settle(("keys", h), head.keys)
            dot = compatibility(head.spec.score, queries, keys)[0]
        dot = settle(("dot", h), dot, ~mask)
        scale = _scale(mistake.scale, steps, h)
        scale = round(scale, decimals) if decimals is not None else scale
        scores = settle(("scores", h), np.where(mask, dot * scale, -np.inf), ~mask)
        if decimals is not None and mistake.softmax == "exp":  # by hand: round each e^s, then divide by their sum
            exp = r(np.exp(scores))
            normalised = exp / exp.sum(axis=1, keepdims=True)
        else:
            normalised = _normalise(scores, mistake.softmax)
        weights = settle(("weights", h), normalised, np.isneginf(scores))
        mixed = keys if mistake.mix == "keys" and keys is not None and keys.shape == values.shape else values
        outputs.append(settle(("output", h), weights @ mixed))
    if steps.concat is None:
        settle(("final", None), outputs[0])
    else:
        concat = settle(("concat", None), np.concatenate(outputs, axis=1))
        settle(("final", None), concat @ problem.w_o if problem.w_o is not None else concat)
    return _Replay(computed, excluded)


def _mask(kind: str, mask: np.ndarray) -> np.ndarray:
    if kind == "none":
        return np.ones_like(mask)
    if kind == "inverted":
        return ~mask
    if kind == "transposed" and mask.shape[0] == mask.shape[1]:
        return mask.T  # causal the wrong way: each query sees itself and the later positions
    return mask


def _scale(kind: str, steps: Steps, h: int) -> float:
    """The factor a head's scores are multiplied by under the slip `kind` (the true one where it cannot apply)."""
    head = steps.heads[h]
    score = head.spec.score
    if kind == "true" or score.kind == "given":
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


def _normalise(scores: np.ndarray, kind: str) -> np.ndarray:
    """Scores to weights: softmax over each query's keys, or one of the slips students make there."""
    if kind == "wrong_axis":
        return softmax(scores.T).T
    if kind == "no_exp":
        kept = np.where(np.isneginf(scores), 0.0, scores)
        return kept / kept.sum(axis=1, keepdims=True)
    if kind == "unnormalized":
        return np.exp(scores)
    return softmax(scores)
