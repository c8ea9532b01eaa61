"""Replayed students of a softmax homework (issue 29): `check` judged on `logits:` + `answers:` files it did not write.

Each exercise is drawn here (numpy, no attncli import): rows of logits with one decimal (some
moved by +100), a temperature or not, top-k and top-p or not, targets or not. A careful student
works every step at 4 decimals, carrying their own rounded numbers: s/T, m = max, s − m,
e^(s − m), Σ, LSE = m + ln Σ, p = e/Σ, the kept tokens (top-k keeps every token tied with the
K-th; top-p the smallest most-likely-first prefix reaching P, on what top-k left, renormalised),
the filtered p, −ln p_t = LSE − s_t and (p − onehot)/(N·T). A student who leaves out the shift
writes e^s and Σ e^s instead (rows within ±5 only), which is not a mistake. The same careful
student makes each named slip and carries it. `python -m tests.replays.softmax` prints the figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.replays import checked
from tests.replays.student import text_of

SLIPS = ("max_not_subtracted_from_all", "temperature_after_softmax", "grad_sign_flipped")
ORDER = ("max", "shifted", "exp", "sum", "logsumexp", "probabilities", "kept", "filtered", "cross_entropy")
ORDER += ("grad_logits",)
TOKENS = ("cat", "dog", "car", "sun", "sea")
DIGITS = 4
CLEAR = 2e-3


@dataclass(frozen=True)
class Exercise:
    id: str
    logits: np.ndarray  # (N, V)
    temperature: float
    top_k: int | None
    top_p: float | None
    targets: tuple[int, ...] | None


@dataclass
class Case:
    exercise: Exercise
    kind: str  # "careful", "unshifted", or a slip of SLIPS
    path: Path
    result: dict = field(default_factory=dict)


def draw(seed: int) -> Exercise:
    rng = np.random.default_rng(1000 + seed)
    rows, width = int(rng.integers(1, 4)), int(rng.integers(3, 6))
    logits = rng.integers(-30, 31, size=(rows, width)) / 10
    if seed % 5 == 4:
        logits = logits + 100  # CS336's x + 100: e^s overflows nothing once shifted
    temperature = float(rng.choice([1.0, 1.0, 2.0, 0.5, 0.8]))
    top_k = int(rng.integers(1, width + 1)) if seed % 3 == 0 else None
    top_p = float(rng.choice([0.5, 0.8, 0.9])) if seed % 4 == 1 else None
    targets = tuple(int(t) for t in rng.integers(0, width, size=rows)) if seed % 2 == 0 else None
    return Exercise(f"softmax-{seed}", logits, temperature, top_k, top_p, targets)


def _round(x: np.ndarray | float, digits: int | None) -> np.ndarray:
    return np.asarray(x, dtype=float) if digits is None else np.round(x, digits)


def truth(exercise: Exercise) -> np.ndarray:
    """(N, V) the exact softmax of s/T."""
    s = exercise.logits / exercise.temperature
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def kept_tokens(p: np.ndarray, top_k: int | None, top_p: float | None) -> np.ndarray:
    """(N, V) bool: top-k (ties with the K-th kept), then top-p over what it left, renormalised."""
    kept = np.ones(p.shape, dtype=bool)
    if top_k is not None:
        kth = -np.sort(-p, axis=1)[:, min(top_k, p.shape[1]) - 1]
        kept = p >= kth[:, None]
    if top_p is not None:
        q = np.where(kept, p, 0.0)
        q = q / q.sum(axis=1, keepdims=True)
        for i, row in enumerate(q):
            order = sorted(range(len(row)), key=lambda j: (-row[j], j))
            total, keep = 0.0, set()
            for j in order:
                if total >= top_p or not kept[i, j]:
                    break
                keep.add(j)
                total += row[j]
            kept[i] = [j in keep for j in range(len(row))]
    return kept


def work(exercise: Exercise, kind: str = "careful", digits: int | None = DIGITS) -> dict[str, np.ndarray]:
    """Every step as the student writes it: a row per row of logits (one column for max, sum, LSE, CE)."""
    after = kind == "temperature_after_softmax"
    s = _round(exercise.logits if after else exercise.logits / exercise.temperature, digits)
    m = s.max(axis=1)
    if kind == "unshifted":
        m = np.zeros(len(s))
    shifted = s - m[:, None]
    if kind == "max_not_subtracted_from_all":
        top = np.arange(s.shape[1])[None, :] == np.argmax(s, axis=1)[:, None]
        shifted = np.where(top, shifted, s)
    shifted = _round(shifted, digits)
    e = _round(np.exp(shifted), digits)
    total = _round(e.sum(axis=1), digits)
    lse = _round(m + np.log(total), digits)
    p = e / total[:, None]
    p = _round(p / exercise.temperature if after else p, digits)
    out = {"max": m, "shifted": shifted, "exp": e, "sum": total, "logsumexp": lse, "probabilities": p}
    if exercise.top_k is not None or exercise.top_p is not None:
        kept = kept_tokens(truth(exercise), exercise.top_k, exercise.top_p)
        q = np.where(kept, p, 0.0)
        with np.errstate(invalid="ignore"):
            filtered = _round(q / q.sum(axis=1, keepdims=True), digits)
        out |= {"kept": kept.astype(float), "filtered": filtered}
    if exercise.targets is not None:
        picked = np.arange(len(s)), np.array(exercise.targets)
        onehot = np.zeros(p.shape)
        onehot[picked] = 1
        gradient = onehot - p if kind == "grad_sign_flipped" else p - onehot
        scale = len(s) * exercise.temperature
        out |= {"cross_entropy": _round(lse - s[picked], digits), "grad_logits": _round(gradient / scale, digits)}
    if kind == "unshifted":
        del out["max"], out["shifted"]
    return out


def file_text(exercise: Exercise, written: dict[str, np.ndarray]) -> str:
    width = exercise.logits.shape[1]
    lines = [f"title: {exercise.id}", f"tokens: [{', '.join(TOKENS[:width])}]", "logits:"]
    lines += [f"  - [{', '.join(repr(float(x)) for x in row)}]" for row in exercise.logits]
    targets = None if exercise.targets is None else f"[{', '.join(TOKENS[t] for t in exercise.targets)}]"
    settings = {"temperature": exercise.temperature if exercise.temperature != 1 else None, "targets": targets}
    settings |= {"top_k": exercise.top_k, "top_p": exercise.top_p}
    lines += [f"{name}: {value}" for name, value in settings.items() if value is not None]
    lines.append("answers:")
    for name in ORDER:
        if name not in written:
            continue
        values = written[name]
        if values.ndim == 1:
            lines.append(f"  {name}: [{', '.join(text_of(x) for x in values)}]")
            continue
        lines.append(f"  {name}:")
        for row in values:
            cells = [("true" if x else "false") if name == "kept" else text_of(x) for x in row]
            lines.append(f"    - [{', '.join(cells)}]")
    return "\n".join(lines) + "\n"


def _boundary(exercise: Exercise) -> bool:
    """Whether top-p's cut is within rounding of P (a careful student could cut elsewhere): not an exercise."""
    if exercise.top_p is None:
        return False
    p = truth(exercise)
    kept = kept_tokens(p, exercise.top_k, None)
    q = np.where(kept, p, 0.0)
    q = q / q.sum(axis=1, keepdims=True)
    cumulative = np.cumsum(-np.sort(-q, axis=1), axis=1)
    return bool(np.any(np.abs(cumulative - exercise.top_p) < 2e-3))


def cases(directory: Path, seeds: range) -> list[Case]:
    found = []
    for seed in seeds:
        exercise = draw(seed)
        if _boundary(exercise):
            continue
        careful = work(exercise)
        students = {"careful": careful}
        if np.abs(exercise.logits).max() <= 5:
            students["unshifted"] = work(exercise, "unshifted")
        for slip in SLIPS:
            slipped = work(exercise, slip)
            if any(np.any(np.abs(slipped[n] - careful[n]) > CLEAR) for n in careful if n in slipped):
                students[slip] = slipped
        for kind, written in students.items():
            if any(np.isnan(values).any() for values in written.values()):
                continue  # a slip that leaves nothing kept to renormalise: no number to write
            path = directory / f"{exercise.id}-{kind}.yaml"
            path.write_text(file_text(exercise, written), encoding="utf-8")
            found.append(Case(exercise, kind, path))
    return found


if __name__ == "__main__":
    checked.main("softmax", cases, checked.verdict)
