"""Diagnosis: which classic mistake explains a wrong step, judged by the same rule as the step's cells.

A wrong step is replayed under each classic mistake (attncli.grading.mistakes); a mistake is
named only when its replay reproduces every answered cell of the step and explains a cell that
the mistake-free replay does not. Single mistakes are tried first, then pairs, then early
rounding. Pure functions of the calculation and the answers: no I/O.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import numpy as np

from attncli.core import Steps
from attncli.grading.mistakes import CARRIED_STEPS, EARLY_DECIMALS, NO_MISTAKE, Mistake, ordered, shown
from attncli.grading.replay import Listed, Reference, StepReplays
from attncli.grading.rule import Rule, allowed
from attncli.parsing.answers import Answer, Entry
from attncli.steps import BY_NAME, KEYS, Key

Triple = tuple[int, int, Entry]  # an answered cell: row, column, what was written
ROUGH_MARGIN = 1e-6  # relative: an untracked radius may come out below the tracked one by rounding in its last bits


class Diagnosis:
    """The classic mistakes that reproduce one answered step's numbers; replays judged once each."""

    def __init__(self, steps: Steps, view: StepReplays, rule: Rule, answer: Answer) -> None:
        self.steps = steps
        self.view = view
        self.replays = view.replays
        self.rule = rule
        self.answer = answer
        self.key = view.key
        self.truth = view.truth
        self.judged: dict[int, bool] = {}  # id of a replay's reference (held by `replays`) -> whether it explains
        self.missed: dict[int, bool] = {}  # id of an untracked reference -> whether it surely misses a number

    def reference(self, mistake: Mistake, own: bool, key: Key | None = None, tracked: bool = True) -> Reference:
        return self.view.reference(mistake, own, key, tracked)

    def listed(self, ref: Reference) -> Listed:
        return self.view.listed(ref)

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
        """Whether the replay of `mistake` explains the step; mistakes that share a replay here are judged once.

        The untracked replay comes first: most replays miss some number by more than even its looser radius,
        and are dropped without tracking a rounding.
        """
        rough = self.reference(mistake, own, tracked=False)
        missed = self.missed.get(id(rough))
        if missed is None:
            missed = self.missed[id(rough)] = self.misses(triples, rough)
        if missed:
            return False
        ref = self.reference(mistake, own)
        found = self.judged.get(id(ref))
        if found is None:
            found = self.judged[id(ref)] = self.explains(triples, ref, clean)
        return found

    def misses(self, triples: list[Triple], rough: Reference) -> bool:
        """Whether an untracked reference misses some answered number by more than its radius (with a margin for
        the last bits), so that the tracked one, whose radius is no larger and whose numbers are the same, does
        too. A cell it leaves undefined is judged against the truth, as `fits` does; one with an unbounded radius
        (judged by the half unit alone) proves nothing."""
        t, r, out = rough
        agrees = self.rule.agrees
        for i, j, entry in triples:
            value, radius = t.item(i, j), r.item(i, j)
            if math.isnan(value):
                truth_t, truth_r, truth_out = self.listed(self.truth)
                if not agrees(entry, truth_t[i][j], truth_r[i][j], truth_out[i][j]):
                    return True
            elif entry.value is None or not math.isfinite(value):  # judged without the radius
                if not agrees(entry, value, 0.0, out.item(i, j)):
                    return True
            elif math.isfinite(radius) and not agrees(entry, value, radius * (1 + ROUGH_MARGIN), out.item(i, j)):
                return True
        return False

    def explains(self, triples: list[Triple], ref: Reference, clean: Reference) -> bool:
        """Whether `ref` fits every answered number and gives one that the mistake-free `clean` does not."""
        return self.fits(triples, ref) and self.departs(triples, clean)

    def diagnose(self, triples: list[Triple], transposed: bool) -> tuple[str, ...]:
        """Every classic mistake that reproduces the step: single ones first, then pairs, then early rounding.

        When several single mistakes reproduce the numbers, all are named: each explains them as well.
        Weights that do not add up to 1 are named not_normalized only when no mistake reproduces them.
        """
        found = self.facts(triples)
        # a wrong rounding: no slip of method, whatever replay comes that close
        singles = [] if not transposed and self.rounding_slip(triples) else self.single_codes(triples, transposed)
        found += singles
        if not singles and not self.rounding_slip(triples):
            found += self.pairs(triples, transposed)
        if not set(found) - {"too_few_decimals", "not_normalized"}:
            found += self.early(triples)
        if set(found) - {"too_few_decimals", "not_normalized"} and "not_normalized" in found:
            found.remove("not_normalized")  # a mistake that reproduces the numbers says more
        return ordered(found)

    def facts(self, triples: list[Triple]) -> list[str]:
        """What the numbers show by themselves: too few decimals, weights that do not add up to 1."""
        found = []
        truth = self.listed(self.truth)[0]
        if any(self.rule.too_few(entry, truth[i][j]) for i, j, entry in triples):
            found.append("too_few_decimals")
        if self.answer.step == "weights" and self.unnormalized_row(triples):
            found.append("not_normalized")
        return found

    def rounding_slip(self, triples: list[Triple]) -> bool:
        """Whether every answered number is within one and a half units of its last decimal (three of the rule's half
        units: the right rounding moved by one unit, or a number cut) of the truth, widened as the rule widens it: a
        wrong rounding, not a method's slip (a replay that lands that close names a cause only by coincidence)."""
        t, r, out = self.listed(self.truth)
        for i, j, entry in triples:
            if out[i][j] and entry.value is None:
                continue  # a masked cell marked masked
            if entry.value is None or entry.decimals is None or out[i][j] or not math.isfinite(t[i][j]):
                return False
            if abs(entry.value - t[i][j]) > allowed(3 * self.rule.own(entry), r[i][j], t[i][j]):
                return False
        return True

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
            own = sum(self.rule.own(entry) + r[i, j] for _, j, entry in row if entry.value is not None)
            if abs(written - 1) > allowed(own, 0.0, 0.0):  # the cells' allowances added up, no room relative to 1
                return True
        return False

    def single_codes(self, triples: list[Triple], transposed: bool) -> list[str]:
        """The codes of every single mistake that reproduces the step (one that only repeats a code is not tried)."""
        found: list[str] = []
        for own, clean in self.departures(triples):
            for mistake in self.replays.solved.single_mistakes():
                if set(mistake.codes) <= set(found) or not shown(mistake, self.key[0]):
                    continue
                if self.reproduces(triples, mistake, own, clean):
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
                if set(pair.codes) <= set(found) or not shown(pair, self.key[0]):
                    continue
                if self.reproduces(triples, pair, own, clean):
                    found += pair.codes
            if self.square() and not transposed:
                for mistake in solved.pairable:
                    codes = ["transposed", *mistake.codes]
                    if set(codes) <= set(found) or not shown(mistake, self.key[0]):
                        continue
                    if self.misses(triples, _transpose(self.reference(mistake, own, tracked=False))):
                        continue
                    if self.explains(triples, _transpose(self.reference(mistake, own)), clean):
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
        """wrong_row: each answered row (or column) is some row (column) of `clean`, at least one another token's;
        columns only where they are tokens (keys): a concatenation's or an output's columns are coordinates."""
        size = clean[0].shape
        for axis in (0, 1) if BY_NAME[self.key[0]].columns == KEYS else (0,):
            lines: dict[int, list[Triple]] = {}
            for triple in triples:
                lines.setdefault(triple[0] if axis == 0 else triple[1], []).append(triple)
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


def _transpose(ref: Reference) -> Reference:
    return ref[0].T, ref[1].T, ref[2].T
