"""Grading a softmax homework (`check` on a file with `logits:`): each step of `attncli softmax`, by the usual rule.

A number is right within half a unit of its last written decimal of the true value, widened by
what a careful student's carried rounding brings in (attncli.grading.rule): the calculation is
replayed as attncli.grading.online replays the tiles, each number a bound (value, radius) that
follows s/T, m = max, s − m, e^(s − m), Σ, LSE = m + ln Σ, p = e/Σ, top-k/top-p's renormalised p,
−ln p_t = LSE − s_t and (p − onehot)/(N·T), every one carried at the carry's decimals.

Leaving out the shift is not a mistake: e^s and Σ e^s (m taken as 0) give the same LSE and p, so
`exp` and `sum` are right when they are either way's. The same replay fed the student's own numbers
makes a step right from their wrong inputs carried (↷). Three slips, replayed from the problem
and from the student's numbers, are named at a wrong step when their replay gives every answered
number of it: `max_not_subtracted_from_all` (s − m for the largest logit only: 0 there, the other
logits left as they are), `temperature_after_softmax` (the softmax of s, not of s/T, then p
divided by T) and `grad_sign_flipped` ((onehot − p)/(N·T)). The tokens top-k and top-p keep are
judged exactly (1 or 0). Pure numpy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from attncli.grading import Cell, Report, StepReport
from attncli.grading.interval import Carried
from attncli.grading.online import Bound, carried, either, exact, exponential, minus, plus, times
from attncli.grading.replay import student
from attncli.grading.report import CARRIED, MISSING, NOT_ANSWERED, RIGHT, TOO_FEW_DECIMALS, WRONG
from attncli.grading.rule import Rule
from attncli.parsing.answers import Answer, Entry, Settings
from attncli.softmax import SoftmaxSteps, compute
from attncli.steps import NONE, SOFTMAX, SOFTMAX_BY_NAME
from attncli.yamldoc import Document

if TYPE_CHECKING:
    from attncli.grading.submissions import Options


SLIPS = ("max_not_subtracted_from_all", "temperature_after_softmax", "grad_sign_flipped")
UNSHIFTED = ("exp", "sum")  # the steps a student who leaves out the shift writes otherwise, rightly


def grade(
    steps: SoftmaxSteps, answers: Sequence[Answer], settings: Settings, options: Options, file: str = "-"
) -> Report:
    """Every answered step's report, in the order of the calculation; a required step not answered is MISSING.
    `options` (the command line's) win over `settings` (the file's)."""
    rule = Rule.chosen(options.tolerance, options.carry, options.min_decimals, settings)
    require = options.require
    replays = _Replays(steps, {a.step: a for a in answers}, rule)
    reports: dict[str, StepReport] = {}
    for answer in answers:
        upstream = [reports[n] for n in _upstream(answer.step) if n in reports]
        wrong = any(report.status in (WRONG, CARRIED) for report in upstream)
        reports[answer.step] = _report(replays, rule, answer, wrong)
    for name in require if require is not None else settings.require:
        if name not in reports:
            rows, columns = _labels(steps, name)
            reports[name] = StepReport(name, None, None, rows, columns, (), MISSING, ())
    order = [step.name for step in SOFTMAX]
    return Report(file, tuple(sorted(reports.values(), key=lambda r: order.index(r.step))))


def _upstream(name: str) -> set[str]:
    """Every step `name` is computed from, directly or not."""
    found: set[str] = set()
    for need in SOFTMAX_BY_NAME[name].needs:
        found |= {need, *_upstream(need)}
    return found


def _labels(steps: SoftmaxSteps, name: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    rows = tuple(str(i + 1) for i in range(steps.logits.rows.shape[0]))
    return rows, (name,) if SOFTMAX_BY_NAME[name].columns == NONE else steps.logits.tokens


class _Replays:
    """The homework's calculation replayed, once per (slip, shift, own), as bounds per step."""

    def __init__(self, steps: SoftmaxSteps, answered: dict[str, Answer], rule: Rule) -> None:
        self.steps, self.rule = steps, rule
        self.passed = {name: student(answer, rule) for name, answer in answered.items()}
        self.done: dict[tuple[str, bool, bool], dict[str, Bound]] = {}

    def get(self, slip: str, shift: bool, own: bool) -> dict[str, Bound]:
        key = (slip, shift, own)
        if key not in self.done:
            passed = {name: Bound(c.t, c.e) for name, c in self.passed.items()} if own else {}
            self.done[key] = _Replay(self.steps, self.rule.carry, slip, shift, passed).run()
        return self.done[key]

    def shift_of(self, own: bool) -> bool:
        """Whether the student shifted by the max: False when their e^s (or Σ) is right only unshifted."""
        for name in UNSHIFTED:
            answer = self.passed.get(name)
            if answer is not None and np.any(~np.isnan(answer.t)):
                shifted, unshifted = (self.get("", shift, own)[name] for shift in (True, False))
                return not (self.fits(answer, unshifted) and not self.fits(answer, shifted))
        return True

    def fits(self, written: Carried, reference: Bound) -> bool:
        """Whether every number of `written` is `reference`'s, up to both radii and the carry's half unit."""
        t, e = written.t, written.e
        seen = ~np.isnan(t)
        room = (np.abs(reference.r) + e + 0.5 * 10.0**-self.rule.carry) * (1 + 1e-9) + 1e-12
        return bool(np.all(np.abs(t[seen] - reference.t[seen]) <= room[seen]))


class _Replay:
    """One replay: each step's bound (before the student rounds it), carried on as the student's own where `passed`
    holds their numbers (NaN where not answered)."""

    def __init__(self, steps: SoftmaxSteps, carry: int, slip: str, shift: bool, passed: dict[str, Bound]) -> None:
        self.steps, self.carry, self.slip, self.shift, self.passed = steps, carry, slip, shift, passed
        self.out: dict[str, Bound] = {}

    def keep(self, name: str, num: Bound, column: bool = False) -> Bound:
        """Record step `name` and give what the student carries on: their number where written, else `num` carried."""
        self.out[name] = Bound(num.t[:, None], num.r[:, None]) if column else num
        kept = carried(num, self.carry)
        found = self.passed.get(name)
        if found is None:
            return kept
        written = Bound(found.t[:, 0], found.r[:, 0]) if column else found
        return either(~np.isnan(written.t), written, kept)

    @np.errstate(over="ignore", invalid="ignore")
    def run(self) -> dict[str, Bound]:
        logits = self.steps.logits
        rows, temperature = logits.rows, logits.temperature
        after = self.slip == "temperature_after_softmax"
        s = carried(exact(rows if after else rows / temperature), self.carry)  # (N, V)
        top = np.argmax(s.t, axis=1)  # (N,)
        at_top = np.arange(s.t.shape[1])[None, :] == top[:, None]  # (N, V)
        m = Bound(s.t.max(axis=1), s.r.max(axis=1)) if self.shift else exact(np.zeros(s.t.shape[0]))
        m = self.keep("max", m, column=True)
        shifted = minus(s, Bound(m.t[:, None], m.r[:, None]))
        if self.slip == "max_not_subtracted_from_all":
            shifted = either(at_top, shifted, s)
        shifted = self.keep("shifted", shifted)
        e = self.keep("exp", exponential(shifted))
        total = self.keep("sum", Bound(e.t.sum(axis=1), e.r.sum(axis=1)), column=True)
        self.keep("logsumexp", plus(m, _log(total)), column=True)
        lse = self.passed_or("logsumexp", plus(m, _log(total)))
        p = _quotient(e, Bound(total.t[:, None], total.r[:, None]))
        if after:
            p = times(p, exact(1 / temperature))
        p = self.keep("probabilities", p)
        self.filtered(p)
        self.cross_entropy(p, lse, s)
        return self.out

    def passed_or(self, name: str, num: Bound) -> Bound:
        found = self.passed.get(name)
        kept = carried(num, self.carry)
        return kept if found is None else either(~np.isnan(found.t[:, 0]), Bound(found.t[:, 0], found.r[:, 0]), kept)

    def filtered(self, p: Bound) -> None:
        """Top-k/top-p: the kept tokens (exact), and p over them renormalised."""
        chosen = self.steps.filtered
        if chosen is None:
            return
        kept = self.keep("kept", exact(chosen.kept.astype(np.float64)))
        kept = exact(kept.t)
        q = times(p, kept)
        self.keep("filtered", _quotient(q, Bound(q.t.sum(axis=1)[:, None], q.r.sum(axis=1)[:, None])))

    def cross_entropy(self, p: Bound, lse: Bound, s: Bound) -> None:
        """−ln p_t = LSE − s_t and the mean's gradient (p − onehot)/(N·T), with the targets."""
        ce = self.steps.cross_entropy
        targets = self.steps.logits.targets
        if ce is None or targets is None:
            return
        count, temperature = p.t.shape[0], self.steps.logits.temperature
        picked = np.arange(count), np.array(targets)
        self.keep("cross_entropy", minus(lse, Bound(s.t[picked], s.r[picked])), column=True)
        onehot = np.zeros(p.t.shape)
        onehot[picked] = 1.0
        gradient = minus(p, exact(onehot)) if self.slip != "grad_sign_flipped" else minus(exact(onehot), p)
        self.keep("grad_logits", times(gradient, exact(1 / (count * temperature))))


def _log(a: Bound) -> Bound:
    """ln a: ln(a ± r) is farthest from ln a at the lower end, −ln(1 − r/a) away (unbounded once r ≥ a)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        radius = np.where(a.r < a.t, -np.log1p(-a.r / a.t), np.inf)
    return Bound(np.log(a.t), radius)


def _quotient(a: Bound, b: Bound) -> Bound:
    """a/b: |a'/b' − a/b| ≤ (|a|·r_b + |b|·r_a) / (|b|·(|b| − r_b)), for r_b < |b|."""
    with np.errstate(divide="ignore", invalid="ignore"):
        room = np.abs(b.t) * (np.abs(b.t) - b.r)
        radius = np.where(room > 0, (np.abs(a.t) * b.r + np.abs(b.t) * a.r) / room, np.inf)
    return Bound(a.t / b.t, radius)


def _report(replays: _Replays, rule: Rule, answer: Answer, upstream_wrong: bool) -> StepReport:
    """One step's cells and status; a wrong step's slips named."""
    shift = replays.shift_of(own=False) if answer.step in UNSHIFTED else True
    truth = replays.get("", shift, False)[answer.step]
    own = replays.get("", replays.shift_of(own=True), True)[answer.step]
    cells = [_cell(rule, i, j, entry, truth, own) for i, row in enumerate(answer.cells) for j, entry in enumerate(row)]
    statuses = {cell.status for cell in cells} - {NOT_ANSWERED}

    def step(status: str, diagnosis: tuple[str, ...] = ()) -> StepReport:
        return StepReport(answer.step, None, None, answer.rows, answer.columns, tuple(cells), status, diagnosis)

    if not statuses:
        return step(NOT_ANSWERED)
    if statuses == {RIGHT}:
        return step(RIGHT)
    if statuses <= {RIGHT, CARRIED} and upstream_wrong:
        return step(CARRIED)
    if statuses <= {RIGHT, CARRIED}:
        return step(RIGHT)
    found = ["too_few_decimals"] if TOO_FEW_DECIMALS in statuses else []
    return step(WRONG, (*found, *_slips(replays, rule, answer, cells)))


def _cell(rule: Rule, i: int, j: int, entry: Entry | None, truth: Bound, own: Bound) -> Cell:
    value, radius = float(truth.t[i, j]), float(truth.r[i, j])
    carried_in = 0.0 if rule.tolerance is not None or not math.isfinite(radius) else radius
    if entry is None:
        return Cell(i, j, None, value, False, NOT_ANSWERED, 0.0, carried_in)
    fewest = rule.min_decimals
    if fewest is not None and entry.decimals is not None and entry.decimals < fewest:
        status = TOO_FEW_DECIMALS
    elif rule.agrees(entry, value, radius):
        status = RIGHT
    else:
        status = CARRIED if rule.agrees(entry, float(own.t[i, j]), float(own.r[i, j])) else WRONG
    return Cell(i, j, entry, value, False, status, rule.own(entry), carried_in)


def _slips(replays: _Replays, rule: Rule, answer: Answer, cells: list[Cell]) -> tuple[str, ...]:
    """The slips whose replay (from the problem, or from the student's own numbers) gives every answered cell."""
    answered = [(cell, cell.entry) for cell in cells if cell.entry is not None]
    named = []
    for slip in SLIPS:
        for own in (False, True):
            reference = replays.get(slip, True, own)[answer.step]
            if all(rule.agrees(e, reference.t[c.row, c.column], reference.r[c.row, c.column]) for c, e in answered):
                named.append(slip)
                break
    return tuple(named)


def grade_document(document: Document, file: str, options: Options) -> Report:
    """A softmax homework file (attncli.parsing.softmax_answers) graded against its own logits."""
    from attncli.parsing import logits as read_logits
    from attncli.parsing import softmax_answers

    logits = read_logits.parse(document, None, Path(file).parent)
    steps = compute(logits)
    answers = softmax_answers.parse(document, logits)
    settings = softmax_answers.settings(document)
    return grade(steps, answers, settings, options, file)
