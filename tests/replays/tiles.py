"""Replayed students of FlashAttention's online softmax (issue 29): `check` judged on `answers: tiles:`.

Each exercise is drawn here (numpy, no attncli import): tokens, a tile size B, no mask or a causal
one, and either given scores or integer queries and keys whose scaled scores the student works out
first (and writes, at 4 decimals). A careful student then works each query's tiles as the lecture
notes do, rounding every α, every e^(s − m'), ℓ' and o' to 4 decimals and carrying those numbers:

    m' = max(m, the tile's max)   α = e^(m − m') (0 on the first tile)
    ℓ' = α·ℓ + Σ e^(s − m')       o' = α·o + Σ e^(s − m')·v

The same student makes each named slip and carries it: `not_rescaled` (ℓ' = ℓ + Σ e^(s − m'),
o' = o + Σ e^(s − m')·v: α written but not used) and `max_not_updated` (m kept at the first max
seen). A slip that moves no number by more than CLEAR is not a case (the file is right). An
arithmetic slip (one ℓ' off by 0.1, carried on) must leave the later tiles of that query carried
(↷) or right, never wrong. `python -m tests.replays.tiles` prints the figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.replays import checked
from tests.replays.student import text_of

NAMES = ("the", "old", "fisherman", "mended", "his", "net", "by", "bank")
TILE_STEPS = ("running_max", "rescale", "running_sum", "accumulator")
SLIPS = ("not_rescaled", "max_not_updated")
CLEAR = 2e-3  # a slip that moves some written number by more than this shows (4 decimals carry ~1e-4)
DIGITS = 4


@dataclass(frozen=True)
class Exercise:
    id: str
    tokens: tuple[str, ...]
    query_tokens: tuple[str, ...]
    causal: bool
    size: int
    values: np.ndarray  # (S, d_v) integers
    given: np.ndarray | None  # (L, S) the scores the problem gives; None: computed from q and k
    q: np.ndarray | None  # (S, 2) integers, with k: every token a query
    k: np.ndarray | None

    def exact_scores(self) -> np.ndarray:
        """(L, S) the true scores, −∞ where the mask leaves a key out."""
        scores = self.given if self.given is not None else self.q @ self.k.T / math.sqrt(self.q.shape[1])
        if self.causal:
            rows = [self.tokens.index(name) for name in self.query_tokens]
            keys = np.arange(len(self.tokens))
            scores = np.where(keys[None, :] > np.array(rows)[:, None], -np.inf, scores)
        return scores


@dataclass
class Case:
    exercise: Exercise
    kind: str  # "careful", a slip of SLIPS, or "arithmetic"
    path: Path
    written: dict[str, np.ndarray]  # the student's tile numbers
    result: dict = field(default_factory=dict)


def draw(seed: int) -> Exercise:
    """An exercise a student can work by hand: 3 to 6 tokens, integer values, scores of one decimal or q·k/√2."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(3, 7))
    tokens = tuple(NAMES[:count])
    size = int(rng.integers(1, count + 1))
    causal = bool(rng.integers(0, 2))
    values = rng.integers(-2, 3, size=(count, int(rng.integers(1, 3)))).astype(float)
    if seed % 2:  # given scores, the last one or two tokens asking
        queries = tokens[count - int(rng.integers(1, 3)) :]
        given = rng.integers(-30, 31, size=(len(queries), count)) / 10
        return Exercise(f"given-{seed}", tokens, queries, causal, size, values, given, None, None)
    q, k = (rng.integers(-2, 3, size=(count, 2)).astype(float) for _ in range(2))
    return Exercise(f"scaled-{seed}", tokens, tokens, causal, size, values, None, q, k)


def work(scores: np.ndarray, values: np.ndarray, size: int, slip: str = "", digits: int | None = DIGITS) -> dict:
    """Every tile's m', α, ℓ', o' as the student works them (rounded to `digits`, carried), under `slip`."""

    def kept(x: np.ndarray) -> np.ndarray:
        return x if digits is None else np.round(x, digits)

    queries, keys = scores.shape
    m, total, o = np.full(queries, -np.inf), np.zeros(queries), np.zeros((queries, values.shape[1]))
    out: dict[str, list] = {name: [] for name in TILE_STEPS}
    with np.errstate(invalid="ignore"):
        for first in range(0, keys, size):
            s, v = scores[:, first : first + size], values[first : first + size]
            seen = np.isfinite(s)
            new = np.maximum(m, np.where(seen, s, -np.inf).max(axis=1))
            if slip == "max_not_updated":
                new = np.where(np.isfinite(m), m, new)
            alpha = kept(np.where(np.isfinite(m), np.exp(m - new), 0.0))
            e = kept(np.where(seen, np.exp(s - new[:, None]), 0.0))
            scale = np.ones(queries) if slip == "not_rescaled" else alpha
            total = kept(scale * total + e.sum(axis=1))
            o = kept(scale[:, None] * o + e @ v)
            for name, value in zip(TILE_STEPS, (new, alpha, total, o)):
                out[name].append(value)
            m = new
    return {name: np.stack(found, axis=1) for name, found in out.items()}  # (L, T) or (L, T, d_v)


def problem_yaml(exercise: Exercise) -> str:
    def rows(names: tuple[str, ...], matrix: np.ndarray) -> list[str]:
        return [f"  {name}: [{', '.join(repr(float(x)) for x in row)}]" for name, row in zip(names, matrix)]

    lines = [f"title: {exercise.id}", f"tokens: [{', '.join(exercise.tokens)}]", f"tiles: {exercise.size}"]
    if exercise.causal:
        lines.append("mask: causal")
    if exercise.given is not None:
        lines += [f"query_tokens: [{', '.join(exercise.query_tokens)}]", "scores:"]
        lines += rows(exercise.query_tokens, exercise.given)
    else:
        lines += ["queries:", *rows(exercise.tokens, exercise.q), "keys:", *rows(exercise.tokens, exercise.k)]
    return "\n".join([*lines, "values:", *rows(exercise.tokens, exercise.values)]) + "\n"


def answers_yaml(exercise: Exercise, scores: np.ndarray | None, written: dict[str, np.ndarray]) -> str:
    """`answers:` with the student's scores (when they computed them) and every query's tiles."""
    lines = ["answers:"]
    if scores is not None:
        lines.append("  scores:")
        lines += [f"    {name}: [{', '.join(text_of(x) for x in row)}]" for name, row in zip(exercise.tokens, scores)]
    lines.append("  tiles:")
    for i, name in enumerate(exercise.query_tokens):
        lines.append(f"    {name}:")
        for tile in range(written["running_max"].shape[1]):
            m = written["running_max"][i, tile]
            cells = [f"running_max: {'masked' if np.isneginf(m) else text_of(m)}"]
            cells += [f"{step}: {text_of(written[step][i, tile])}" for step in ("rescale", "running_sum")]
            cells.append(f"accumulator: [{', '.join(text_of(x) for x in written['accumulator'][i, tile])}]")
            lines.append(f"      - {{{', '.join(cells)}}}")
    return "\n".join(lines) + "\n"


def cases(directory: Path, seeds: range) -> list[Case]:
    """Every case of the exercises of `seeds`: a careful student, each slip that shows, one arithmetic slip."""
    found = []
    for seed in seeds:
        exercise = draw(seed)
        exact = exercise.exact_scores()
        scores = np.where(np.isfinite(exact), np.round(exact, DIGITS), exact)  # what the student works from
        computed = None if exercise.given is not None else np.where(np.isfinite(exact), scores, np.nan)
        careful = work(scores, exercise.values, exercise.size)
        students = {"careful": careful}
        for slip in SLIPS:
            slipped = work(scores, exercise.values, exercise.size, slip)
            if _moved(slipped, careful):
                students[slip] = slipped
        if careful["running_sum"].shape[1] > 1:
            students["arithmetic"] = _arithmetic(scores, exercise, careful)
        for kind, written in students.items():
            path = directory / f"{exercise.id}-{kind}.yaml"
            path.write_text(problem_yaml(exercise) + answers_yaml(exercise, computed, written), encoding="utf-8")
            found.append(Case(exercise, kind, path, written))
    return found


def _moved(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    with np.errstate(invalid="ignore"):
        return any(bool(np.any(np.abs(a[name] - b[name]) > CLEAR)) for name in TILE_STEPS)


def _arithmetic(scores: np.ndarray, exercise: Exercise, careful: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The careful student with the first query's first finite ℓ' 0.1 too large, the later tiles worked from it."""
    written = {name: value.copy() for name, value in careful.items()}
    row, tile = 0, int(np.argmax(np.isfinite(careful["running_max"][0])))
    total = written["running_sum"][row, tile] + 0.1
    written["running_sum"][row, tile] = total
    for later in range(tile + 1, written["running_sum"].shape[1]):
        s = scores[row, later * exercise.size : (later + 1) * exercise.size]
        m = written["running_max"][row, later]
        with np.errstate(invalid="ignore"):
            e = np.round(np.where(np.isfinite(s), np.exp(s - m), 0.0), DIGITS)
        total = np.round(written["rescale"][row, later] * total + e.sum(), DIGITS)
        written["running_sum"][row, later] = total
    return written


GOOD, FALSE_ALARM, WRONG_CARRY = checked.GOOD, checked.FALSE_ALARM, "not carried"


def verdict(case: Case) -> tuple[str, str]:
    """How `check` did on `case`: checked.verdict's, and for the arithmetic slip, its later tiles carried (↷)."""
    if case.kind != "arithmetic":
        return checked.verdict(case)
    steps = case.result.get("steps", [])
    if case.result.get("error") or not steps:
        return FALSE_ALARM, str(case.result.get("error", "no steps"))
    sums = next(s for s in steps if s["step"] == "running_sum")
    first = [c for c in sums["cells"] if c["row"] == 0 and c["status"] != "right"]
    later_wrong = [c for c in first[1:] if c["status"] == "wrong"]
    others = [s["step"] for s in steps if s["status"] != "right" and s["step"] != "running_sum"]
    if not first:
        return checked.MISSED, "every step right"
    if later_wrong or others:
        return WRONG_CARRY, f"wrong after the slip: {[c['column_name'] for c in later_wrong]} {others}"
    return GOOD, ""


if __name__ == "__main__":
    checked.main("tiles", cases, verdict)
