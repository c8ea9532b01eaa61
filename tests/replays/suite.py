"""The replayed-mistake suite: exercises, students' files, one `check` run, and the verdict on each case.

`build(directory)` makes the exercises (`attncli generate --count`, plus additive, given-scores, decoding and biased
problems of our own), writes one file per case — a careful student, the same student making each
applicable mistake of the catalogue, and wrong roundings — runs `python -m attncli check --format json`
once over all of them, and judges each file from its JSON object alone.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tests.replays import layers
from tests.replays.mistakes import CATALOGUE, Mistake, NotApplicable
from tests.replays.own import AFFINE, Exercise, ExerciseSet, affine_stacks, own_problems
from tests.replays.student import HEAD_ORDER, SHARED, Key, Problem, Work, Written, answers_yaml, read, text_of

ROOT = Path(__file__).resolve().parents[2]
MIN_DECIMALS_CASES = 9  # files graded with --min-decimals 3 by default
PER_MISTAKE = 6  # cases of each mistake by default (the suite's time is mostly `check` diagnosing them)
ROUNDINGS = tuple(
    (step, how, digits) for digits in (1, 2, 3) for step, how in (("weights", "truncated"), ("output", "off_by_one"))
)
CLEAR = 3e-3  # a step off the truth by more than this (scaled by W_O for final) is clearly not a rounding


SETS = (
    ExerciseSet("plain", (), 8, 1),
    ExerciseSet("causal4", ("--tokens", "4", "--mask", "causal"), 6, 101),
    ExerciseSet("five", ("--tokens", "5", "--dk", "3"), 4, 201),
    ExerciseSet("heads", ("--heads", "2"), 6, 301),
    ExerciseSet("projections", ("--projections",), 4, 401),
    ExerciseSet("heads-proj-causal", ("--heads", "2", "--projections", "--mask", "causal", "--tokens", "4"), 4, 501),
    ExerciseSet("cosine", ("--score", "cosine"), 5, 601),
    ExerciseSet("dot-causal", ("--score", "dot", "--mask", "causal"), 5, 701),
    ExerciseSet("square", ("--tokens", "3", "--dk", "3"), 4, 801),
    ExerciseSet("rope-half", ("--rope", "half", "--dk", "4"), 3, 901),
    ExerciseSet(
        "rope-interleaved", ("--rope", "interleaved", "--dk", "4", "--tokens", "4", "--mask", "causal"), 3, 951
    ),
    ExerciseSet("gqa", ("--gqa", "--heads", "4"), 4, 1201),
)
# Stacked layers (their students are tests/replays/layers.py): each slip at every layer, named at that layer
STACKS = (
    ExerciseSet("layers-pre", ("--layers", "2", "--norm", "layer"), 2, 1001),
    ExerciseSet("layers-post", ("--layers", "2", "--norm", "rms:post", "--tokens", "2"), 2, 1101),
)
STACK_CODES = ("residual_forgotten", "norm_misplaced", "layernorm_unbiased", "norm_swapped", "norm_affine_forgotten")


@dataclass(repr=False)
class Case:
    id: str  # exercise id / what the student did
    exercise: Exercise
    kind: str  # careful, mistake, rounding, decimals, stack (a slip of a stacked layer)
    work: Work | None  # None for a stack's students, whose work is `stack`
    code: str = ""  # the catalogue's codes joined by "+" (mistake cases)
    mistake: Mistake | None = None
    step: Key | None = None  # where the mistake or wrong rounding is
    path: Path | None = None
    form: str = "self"  # self: problem and answers in one file; key: answers alone (--keys); carry3: --carry 3
    result: dict | None = None  # the file's JSON object from `check`
    stack: tuple[layers.Work, str] | None = None  # a stack's student: their work and their answers file

    def __repr__(self) -> str:  # short: pytest shows it in failures
        return f"Case({self.id!r})"


@dataclass(repr=False)
class Suite:
    cases: list[Case] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)  # (code, reason) -> count
    exercises: list[Exercise] = field(default_factory=list)
    returncodes: dict[str, int] = field(default_factory=dict)  # exit code of each `check` run

    def __repr__(self) -> str:  # short: pytest shows it in failures
        return f"Suite({len(self.cases)} cases)"


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"}


# --- exercises ------------------------------------------------------------------------------------


def _generate(directory: Path, sets: Sequence[ExerciseSet] = SETS) -> list[tuple[ExerciseSet, Path]]:
    """Every set written at once (the calls run side by side): each set and its folder."""
    running = []
    for s in sets:
        out = directory / "sets" / s.name
        command = ["generate", *s.options, "--count", str(s.count), "--seed", str(s.seed), "-o", str(out)]
        process = subprocess.Popen(
            [sys.executable, "-m", "attncli", *command],
            env=env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        running.append((s, out, process))
    for s, _, process in running:
        _, stderr = process.communicate()
        if process.returncode != 0:
            raise RuntimeError(f"attncli generate {' '.join(s.options)} failed: {stderr.strip()}")
    return [(s, out) for s, out, _ in running]


def _exercises(written: Sequence[tuple[ExerciseSet, Path]]) -> list[Exercise]:
    """The exercises of every set, read back from the written sheets."""
    exercises = []
    for s, out in written:
        for number in range(1, s.count + 1):
            sheet = out / f"exercise-{number:02d}.yaml"
            text = sheet.read_text(encoding="utf-8")
            exercises.append(
                Exercise(f"{s.name}/{number:02d}", text, read(text), out / f"exercise-{number:02d}-key.yaml")
            )
    return exercises


def _stack_cases(written: Sequence[tuple[ExerciseSet, Path]]) -> list[Case]:
    """A careful student of each stacked exercise and each of the stack's slips at each layer (self-check files)."""
    cases = []
    for s, out in written:
        for number in range(1, s.count + 1):
            key = out / f"exercise-{number:02d}-key.yaml"
            sheet = (out / f"exercise-{number:02d}.yaml").read_text(encoding="utf-8")
            exercise = Exercise(f"{s.name}/{number:02d}", sheet, None, key)
            for name, work, text in layers.students(str(key)):
                kind = "stack" if work.slip is not None else "careful"
                cases.append(Case(f"{exercise.id}/{name}", exercise, kind, None, work.slip or "", stack=(work, text)))
    return cases


# --- what each case should show ---------------------------------------------------------------------


def _order(work: Work) -> list[Key]:
    return list(work.steps)


def clear_limit(problem: Problem, key: Key) -> float:
    """How far a step may be from the truth and still be, for this suite, a matter of rounding."""
    if key[1] == "final" and problem.w_o is not None:
        return CLEAR * max(1.0, float(np.abs(problem.w_o).sum(axis=0).max()))
    return CLEAR


def differs(a: Written, b: np.ndarray, limit: float) -> float:
    """How clearly a written step differs from `b`: inf for another shape or mask, else the largest gap."""
    written_shape = (len(a.text), len(a.text[0])) if a.text else a.values.shape
    if written_shape != b.shape or not np.array_equal(np.isnan(a.values), np.isnan(b)):
        return math.inf
    gaps = np.abs(np.nan_to_num(a.values) - np.nan_to_num(b))
    return float(gaps.max()) / limit if gaps.size else 0.0


def _interleaved(exercises: Sequence[Exercise]) -> list[Exercise]:
    """The exercises taken one from each set in turn, so a capped list still spans every set."""
    by_set: dict[str, list[Exercise]] = {}
    for e in exercises:
        by_set.setdefault(e.id.split("/")[0], []).append(e)
    return [e for i in range(max(map(len, by_set.values()))) for group in by_set.values() for e in group[i : i + 1]]


def _mistake_cases(exercises: Sequence[Exercise], suite: Suite, per_mistake: int) -> list[Case]:
    """Up to `per_mistake` cases of every mistake, on the exercises where it shows."""
    cases = []
    for mistake in CATALOGUE:
        code = "+".join(mistake.codes)
        taken = 0
        for exercise in _interleaved(exercises):
            if taken == per_mistake:
                break
            if not mistake.applies(exercise.problem):
                continue
            key: Key = (mistake.head, mistake.step)
            try:
                first = {(mistake.head, mistake.first[0]): mistake.first[2]} if mistake.first else {}
                work = Work(exercise.problem, slips=first | {key: mistake.slip})
            except NotApplicable as reason:
                suite.skipped[(code, str(reason))] += 1
                continue
            gap = differs(work.steps[key], work.careful_alternative[key], clear_limit(exercise.problem, key))
            if gap == 0:
                suite.skipped[(code, "coincides with the right numbers on this exercise")] += 1
            elif gap <= 1:
                suite.skipped[(code, f"within {CLEAR} of the right numbers: too close to tell from rounding")] += 1
            else:
                cases.append(Case(f"{exercise.id}/{mistake.name}", exercise, "mistake", work, code, mistake, key))
                taken += 1
    return cases


EVERY = "careful, every field"  # the row of careful students who write e^s, Σ e^s, s + b and RoPE's turned vectors


def _careful_cases(exercise: Exercise) -> list[Case]:
    """The careful student; one who writes every number (e^s, their sums, b added as shown to 4 decimals, RoPE's
    turned vectors); on masked exercises also one who writes `masked` in dot and 0 in weights."""
    cases = [Case(f"{exercise.id}/careful", exercise, "careful", Work(exercise.problem))]
    cases.append(Case(f"{exercise.id}/careful-every", exercise, "careful", Work(exercise.problem, every=True), EVERY))
    if exercise.problem.causal or exercise.problem.lower_right:
        work = Work(exercise.problem)
        hidden = ~exercise.problem.allowed
        for key, written in work.steps.items():
            if key[1] in ("dot", "weights"):
                word = "masked" if key[1] == "dot" else "0"
                text = [
                    [word if h else text_of(x) for x, h in zip(row, mask)] for row, mask in zip(written.values, hidden)
                ]
                work.steps[key] = Written(written.values, text)
        cases.append(Case(f"{exercise.id}/careful-masked", exercise, "careful", work))
    return cases


def _rounding_bound(work: Work, truth: Work, key: Key) -> np.ndarray:
    """First-order widening of each cell of `key` from inputs carried at 4 decimals (weights or output)."""
    h = key[0]
    w = np.nan_to_num(truth.steps[(h, "weights")].values)
    if key[1] == "weights":
        allowed = ~np.isnan(truth.steps[(h, "weights")].values)
        total = np.exp(np.nan_to_num(truth.steps[(h, "scores")].values)) * allowed
        s = total.sum(axis=1, keepdims=True)
        from_scores = 2 * w * (1 - w)
        from_exp = (1 - w + (allowed.sum(axis=1, keepdims=True) - 1) * w) / s
        return 0.5e-4 * (from_scores + from_exp)
    values = truth.steps[(h, "values")].values if (h, "values") in truth.steps else work.problem.heads[h or 0].values
    return 0.5e-4 * (np.abs(values).sum(axis=0)[None, :] + w.sum(axis=1, keepdims=True))


def _rounding_cases(exercise: Exercise, index: int, suite: Suite) -> list[Case]:
    """Weights truncated to 1–3 decimals, or one output number off by one unit at 1–3 decimals (in turn)."""
    step, how, digits = ROUNDINGS[index % len(ROUNDINGS)]
    problem = exercise.problem
    if problem.x is not None or (problem.rope is not None and problem.lower_right):  # not in `_rounding_bound`
        reason = "PE's, or cos and sin's, rounding is carried further than this suite bounds"
        suite.skipped[(f"rounding:{how}", reason)] += 1
        return []
    truth, work = Work(exercise.problem, digits=None), Work(exercise.problem)
    key: Key = (0, step)
    t = truth.steps[key].values
    bound = _rounding_bound(work, truth, key)
    unit = 10.0**-digits
    if how == "truncated":
        wrong = np.trunc(np.nan_to_num(t) / unit) * unit
    else:
        right = np.round(np.nan_to_num(t), digits)
        away = np.where(right >= t, 1.0, -1.0)
        margin = np.where(np.isnan(t), -np.inf, np.abs(right + away * unit - t) - bound)
        cell = np.unravel_index(np.argmax(margin), t.shape)
        wrong = right.copy()
        wrong[cell] += away[cell] * unit
    clear = np.abs(wrong - np.nan_to_num(t)) > 0.5 * unit + 1.5 * bound + 1e-9
    if not np.any(clear & ~np.isnan(t)):
        suite.skipped[(f"rounding:{how}", "no number wrongly rounded beyond the carried rounding")] += 1
        return []
    text = [["masked" if math.isnan(x) else text_of(y, digits) for x, y in zip(a, b)] for a, b in zip(t, wrong)]
    work.steps[key] = Written(work.steps[key].values, text)
    return [Case(f"{exercise.id}/{how}:{step}:{digits}", exercise, "rounding", work, f"rounding:{how}", step=key)]


def build(
    directory: Path,
    per_mistake: int = PER_MISTAKE,
    roundings: int | None = None,
    min_decimals: int = MIN_DECIMALS_CASES,
) -> Suite:
    """Every case written to `directory` and graded: careful students, mistakes, wrong roundings.

    `per_mistake` cases of each mistake, wrong roundings on `roundings` exercises (None: all), and
    `min_decimals` files of too few decimals: a wrong file costs `check` far more than a right one.

    The careful students also hand in their answers alone (with their `exercise:` id), graded with
    `--keys`; students carrying 3 decimals are graded with `--carry 3`; weights written right with 2
    decimals with `--min-decimals 3`. The `check` runs go side by side.
    """
    written = _generate(directory, (*SETS, *STACKS))
    suite = Suite(exercises=_exercises(written[: len(SETS)]) + own_problems(directory))
    careful = [c for e in suite.exercises for c in _careful_cases(e)]
    wrong = _mistake_cases(suite.exercises, suite, per_mistake)
    stacked = _stack_cases([*written[len(SETS) :], (AFFINE, affine_stacks(directory))])
    wrong += [c for c in stacked if c.kind == "stack"]
    rounded = _interleaved(suite.exercises)[:roundings]
    wrong += [c for i, e in enumerate(rounded) for c in _rounding_cases(e, i, suite)]
    stacked_careful = [c for c in stacked if c.kind == "careful"]
    keyed = [Case(c.id + "-key", c.exercise, c.kind, c.work, form="key") for c in careful]
    coarse = [
        Case(f"{e.id}/careful-3", e, "careful", Work(e.problem, digits=3), form="carry3") for e in suite.exercises
    ]
    coarse += [
        Case(
            f"{e.id}/careful-3-every",
            e,
            "careful",
            Work(e.problem, digits=3, every=True),
            EVERY + " --carry 3",
            form="carry3",
        )
        for e in suite.exercises
    ]
    short = [_two_decimals(e) for e in _interleaved(suite.exercises)[:min_decimals]]
    batches: dict[str, tuple[Sequence[Case], list[str]]] = {"careful": (careful + stacked_careful, [])}
    batches |= {f"mistakes:{i}": (wrong[i::2], []) for i in range(2)}  # two runs: two cores
    batches["key"] = (keyed, ["--keys", str(_one_folder_of_keys(directory, suite.exercises))])
    batches["carry3"] = (coarse, ["--carry", "3"])
    batches["min_decimals"] = (short, ["--min-decimals", "3"])
    suite.cases = careful + stacked_careful + wrong + keyed + coarse + short
    files = directory / "files"
    files.mkdir()
    for i, case in enumerate(suite.cases):
        case.path = files / f"{i:04d}.yaml"
        case.path.write_text(student_file(case), encoding="utf-8")
    _grade(suite, batches)
    return suite


def _two_decimals(exercise: Exercise) -> Case:
    """A careful student who writes the weights, correctly rounded, with 2 decimals only."""
    work = Work(exercise.problem)
    key: Key = (0, "weights")
    written = work.steps[key]
    written.text = [[text_of(round(x, 2), 2) if not math.isnan(x) else "masked" for x in row] for row in written.values]
    return Case(f"{exercise.id}/two_decimals", exercise, "decimals", work, "too_few_decimals", step=key)


def exercise_id(exercise: Exercise) -> str:
    """The exercise's id in the key form: unique over the suite (generate numbers each set from 01)."""
    return exercise.id.replace("/", "-")


def _one_folder_of_keys(directory: Path, exercises: Sequence[Exercise]) -> Path:
    """Every key in one folder for `check --keys`, each under its suite-wide `exercise:` id."""
    folder = directory / "keys"
    folder.mkdir()
    for e in exercises:
        text = e.key.read_text(encoding="utf-8")
        lines = [f"exercise: {exercise_id(e)}" if line.startswith("exercise:") else line for line in text.splitlines()]
        (folder / f"{exercise_id(e)}.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def student_file(case: Case) -> str:
    """Problem and answers (self-check), or the answers alone (and the exercise id) for `check --key`."""
    if case.stack is not None:
        return case.exercise.text.rstrip("\n") + "\n" + case.stack[1]
    assert case.work is not None
    answers = answers_yaml(case.work)
    if case.form != "key":
        return case.exercise.text.rstrip("\n") + "\n" + answers
    return f"exercise: {exercise_id(case.exercise)}\n" + answers


def _grade(suite: Suite, batches: dict[str, tuple[Sequence[Case], list[str]]]) -> None:
    """Run `check --format json` once per batch, side by side, and give each case its file's object."""
    running = {}
    for name, (cases, options) in batches.items():
        command = [sys.executable, "-m", "attncli", "check", "--format", "json", *options]
        command += [str(c.path) for c in cases]
        running[name] = subprocess.Popen(command, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for name, process in running.items():
        stdout, stderr = process.communicate()
        suite.returncodes[name] = process.returncode
        results = {}
        for line in stdout.splitlines():
            if line.startswith("{"):
                obj = json.loads(line)
                results[obj.get("file")] = obj
        for case in batches[name][0]:
            case.result = results.get(str(case.path), {"error": stderr.strip()[:300] or "no result", "steps": []})


# --- verdicts ---------------------------------------------------------------------------------------

GOOD = "good"
FALSE_ALARM = "false_alarm"  # a right step failed (a careful file, or a step the mistake does not touch)
MISSED = "missed"  # the file passed, or the step with the mistake was not failed
FAILED = ("wrong", "rounded")  # a step's statuses that fail it (rounded: wrong only by rounding, issue 27)
UNNAMED = "unnamed"  # wrong at the right step, the code not named (nothing named)
MISNAMED = "misnamed"  # wrong at the right step, other codes named
MISLEADING = "misleading"  # a code named beside the right one that no slip of the catalogue reproduces there
FACTS = ("too_few_decimals", "not_normalized", "rounded_early")  # what the numbers show, not a method's slip
NOT_CARRIED = "not_carried"  # a later step computed right from the slipped numbers was failed
NOT_GRADED = "not_graded"


def _steps(result: dict) -> dict[Key, dict]:
    return {(s.get("head"), s["step"]): s for s in result.get("steps", [])}


def file_ok(result: dict) -> bool:
    if "status" in result:
        return result["status"] == "right"
    return bool(result.get("ok")) and result.get("error") is None


def _depends(key: Key, on: Key) -> bool:
    """Whether step `key` is computed from step `on` (so a slip at `on` is carried into it)."""
    if on == (None, "positioned"):  # x + PE: every projection multiplies it
        return key != on
    if key[0] is None:
        return on[0] is not None or SHARED.index(key[1]) > SHARED.index(on[1])
    return key[0] == on[0] and HEAD_ORDER.index(key[1]) > HEAD_ORDER.index(on[1])


def verdict(case: Case) -> tuple[str, str]:
    """(outcome, detail) of one case, from its JSON alone."""
    result = case.result or {}
    if result.get("error") is not None or result.get("status") in ("not_graded", "problem_changed"):
        return NOT_GRADED, str(result.get("error", result.get("status")))[:200]
    steps = _steps(result)
    if case.kind == "decimals":
        return _too_few_decimals(case, result, steps)
    if case.kind == "stack":
        return _stack_verdict(case, result)
    if case.kind == "careful":
        if file_ok(result):
            return GOOD, ""
        bad = [
            f"{k[1]}@{k[0]}:{s['status']}{s.get('diagnosis') or ''}" for k, s in steps.items() if s["status"] != "right"
        ]
        return FALSE_ALARM, ", ".join(bad)
    assert case.step is not None
    here = steps.get(case.step)
    if file_ok(result) or here is None or here["status"] not in FAILED:
        return MISSED, f"{case.step[1]}@{case.step[0]} is {here and here['status']}"
    diagnosis = list(here.get("diagnosis") or [])
    if case.mistake is not None and not set(case.mistake.codes) <= set(diagnosis):
        return (MISNAMED if diagnosis else UNNAMED), f"named {diagnosis}"
    misleading = _misleading(case, diagnosis)
    if misleading:
        return MISLEADING, f"named {misleading} at {case.step[1]}@{case.step[0]}"
    return _later_steps(case, steps)


def _later_steps(case: Case, steps: dict[Key, dict]) -> tuple[str, str]:
    """Every other step of a slipped file: right where the slip does not reach it, carried (or right, when the
    slip left it within rounding) where it does, and the step that shows the same act first named there."""
    assert case.step is not None and case.work is not None
    truth = Work(case.exercise.problem, digits=None)
    first = case.mistake.first if case.mistake is not None else None
    for key, written in case.work.steps.items():
        if key == case.step:
            continue
        if first is not None and key == (case.step[0], first[0]):  # the act seen first, under its own code
            if steps.get(key, {}).get("status") != "wrong" or first[1] not in (steps[key].get("diagnosis") or []):
                return UNNAMED, f"{key[1]}@{key[0]} is {steps.get(key, {}).get('status')}, not {first[1]}"
            continue
        status = steps.get(key, {}).get("status")
        limit = clear_limit(case.exercise.problem, key)
        if not _depends(key, case.step):
            if status != "right":
                return FALSE_ALARM, f"{key[1]}@{key[0]} is {status}{steps.get(key, {}).get('diagnosis') or ''}"
        elif status not in (
            ("carried",) if differs(written, truth.steps[key].values, limit) > 1 else ("right", "carried")
        ):
            return NOT_CARRIED, f"{key[1]}@{key[0]} is {status}"
    return GOOD, ""


def _misleading(case: Case, diagnosis: list[str]) -> list[str]:
    """The codes named at the case's step beyond its own that no slip of the catalogue with that code, made at that
    step of this exercise, writes (within this suite's rounding): a cause that is not what happened. A wrong
    rounding is no slip of method: any method code named for it is misleading."""
    assert case.step is not None and case.work is not None
    own = set(case.mistake.codes) if case.mistake is not None else set()
    extra = [code for code in diagnosis if code not in own and code not in FACTS]
    if case.kind == "rounding":
        return extra
    problem = case.exercise.problem
    written = case.work.steps[case.step]
    limit = clear_limit(problem, case.step)
    return [code for code in extra if not any(_writes(m, problem, case.step, written, limit) for m in CATALOGUE
                                              if code in m.codes)]  # fmt: skip


def _writes(mistake: Mistake, problem: Problem, key: Key, written: Written, limit: float) -> bool:
    """Whether `mistake`, made at step `key` of `problem` by a careful student, writes `written` there."""
    if mistake.step != key[1] or not mistake.applies(problem):
        return False
    try:
        other = Work(problem, slips={key: mistake.slip}).steps[key]
    except NotApplicable:
        return False
    return differs(written, other.values, limit) <= 1


def _stack_verdict(case: Case, result: dict) -> tuple[str, str]:
    """A stack's slip at layer `at`: the file wrong, every wrong step at that layer naming the slip, every earlier
    layer right (the later ones are worked from the slipped stream: carried or right, never wrong)."""
    assert case.stack is not None
    work = case.stack[0]
    wrong = [s for s in result.get("steps", []) if s["status"] in FAILED]
    if file_ok(result) or not wrong:
        return MISSED, "no step wrong"
    elsewhere = [s for s in wrong if s.get("layer") != work.at]
    if elsewhere:
        return FALSE_ALARM, ", ".join(f"{s['step']}@layer {s.get('layer')}" for s in elsewhere)
    unnamed = [s for s in wrong if work.slip not in (s.get("diagnosis") or [])]
    if unnamed:
        named = [code for s in unnamed for code in s.get("diagnosis") or []]
        return (MISNAMED if named else UNNAMED), f"named {named} at {[s['step'] for s in unnamed]}"
    earlier = [s for s in result.get("steps", []) if (s.get("layer") or 0) < (work.at or 0) and s["status"] != "right"]
    if earlier:
        return FALSE_ALARM, ", ".join(f"{s['step']}@layer {s.get('layer')}: {s['status']}" for s in earlier)
    return GOOD, ""


def _too_few_decimals(case: Case, result: dict, steps: dict[Key, dict]) -> tuple[str, str]:
    """Every 2-decimal number of the step that is not the true value itself (a causal row's 1.00) is
    `too_few_decimals`, every other step right, the file not right."""
    assert case.step is not None
    if file_ok(result):
        return MISSED, ""
    cells = steps.get(case.step, {}).get("cells", [])
    short = [c for c in cells if c.get("given") not in (None, "masked") and not _exact(c)]
    named = [c["status"] == "too_few_decimals" for c in short]
    if not named or not all(named):
        return UNNAMED, f"{sum(named)} of {len(named)} two-decimal cells too_few_decimals"
    others = [f"{k[1]}@{k[0]}:{s['status']}" for k, s in steps.items() if k != case.step and s["status"] != "right"]
    return (FALSE_ALARM, ", ".join(others)) if others else (GOOD, "")


def _exact(cell: dict) -> bool:
    """Whether a cell's written number is its true value (never wrong, whatever its decimals: issue 27)."""
    return math.isclose(float(cell["given"]), cell["expected"], rel_tol=1e-12, abs_tol=1e-300)


LABELS = {"self": "careful", "key": "careful --key", "carry3": "careful --carry 3"}


def label(case: Case) -> str:
    """The row of the figures a case counts in: its code (or `rounding:*`), or which careful students."""
    return case.code or LABELS[case.form]


def figures(suite: Suite) -> dict[str, Counter]:
    """Per row (see `label`): how many cases ended how, and how many were skipped."""
    table: dict[str, Counter] = {}
    for case in suite.cases:
        table.setdefault(label(case), Counter())[verdict(case)[0]] += 1
    for (code, _), n in suite.skipped.items():
        table.setdefault(code, Counter())["skipped"] += n
    return table
