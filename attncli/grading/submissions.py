"""Homework files graded one by one: each against its teacher's key (or against itself), one result per file.

Whatever goes wrong with a file (unreadable, a problem that differs from the key,
no key for its exercise) becomes that file's result, so a gradebook lists every
student. A key is read and solved once, however many files it grades, with the cells it
counts and its points (attncli.gradebook.points); every graded file gets its score.

A file's status: right; rounded (its only faults are rounding, attncli.gradebook.points.step_status);
wrong; incomplete (a required step not answered, or nothing answered at all); problem_changed;
not_graded. Only `right` ends a run with exit code 0.

Graded files come from other people: the array files their problems name must resolve, links
followed, inside their own folder. A key is the teacher's (`--key`, `--keys`), like the problem
given to `compute`, and its array files may be anywhere.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attncli import core, grading, pipeline, problem, yamldoc
from attncli.errors import AttnError, fail, listed
from attncli.gradebook import points
from attncli.gradebook.points import KeyCells, PointsSpec, Score
from attncli.grading import layers as layer_grading
from attncli.grading import softmax as softmax_grading
from attncli.layers import StackSteps
from attncli.parsing import answers, softmax_answers, student
from attncli.parsing.student import Student

RIGHT, WRONG, PROBLEM_CHANGED, NOT_GRADED = "right", "wrong", "problem_changed", "not_graded"
ROUNDED, INCOMPLETE = "rounded", "incomplete"
STATUSES = (RIGHT, ROUNDED, WRONG, INCOMPLETE, PROBLEM_CHANGED, NOT_GRADED)
# what a student's file may hold besides a problem: who they are, how it is graded, the answers
ANSWER_FIELDS = ("exercise", "title", "notes", "answers", *answers.SETTINGS, "points", *student.FIELDS)
# A problem copied into a homework must have the key's numbers, up to float noise: relative, absolute
SAME_RTOL, SAME_ATOL = 1e-9, 1e-12
KEY_SUFFIXES = (".yaml", ".yml", ".json")
FREEZE_EVERY = 25  # files graded between two gc.freeze() calls


@dataclass(frozen=True)
class Options:
    """Grading settings from the command line; each one given wins over the key's (or the file's)."""

    tolerance: float | None = None
    carry: int | None = None
    min_decimals: int | None = None
    require: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Key:
    """A teacher's problem, solved once, with the grading settings it asks for, the cells it counts and its points."""

    file: str
    steps: core.Steps | StackSteps
    settings: answers.Settings
    exercise: str | None
    cells: KeyCells
    points: PointsSpec = field(default_factory=PointsSpec)


@dataclass(frozen=True)
class Result:
    """One file's verdict: its status, its report and score when it was graded, why when it was not, and who."""

    file: str
    status: str  # one of STATUSES
    exercise: str | None = None  # the file's exercise: id, when it gives one it can be read by
    report: grading.Report | None = None
    error: str | None = None  # not_graded: the one-line error
    changed: tuple[str, ...] = field(default=())  # problem_changed: the fields that differ from the key
    score: Score | None = None  # with the report: the points it earns over the key's cells
    student: Student = field(default_factory=Student)  # the file's student: and student_id:


def exercise_id(document: yamldoc.Document) -> str | None:
    """The file's `exercise:` id, as text; None when it has none."""
    data = document.data if isinstance(document.data, dict) else {}
    if "exercise" not in data:
        return None
    value = data["exercise"]
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise fail("check.bad_exercise", got=yamldoc.kind_of(value)).at(
            document.name, document.line(("exercise",)), "exercise"
        )
    return str(value).strip()


def load_key(file: str, options: Options = Options()) -> Key:
    """The key in `file`: a problem, with or without answers:, its cells (`counted`) and its `points:`."""
    document = yamldoc.read(file)
    steps = pipeline.solve(pipeline.load(document))
    settings = answers.read_settings(document)
    data = document.data if isinstance(document.data, dict) else {}
    names = counted(options, settings, _answered(steps, document) if "answers" in data else None)
    cells = points.key_cells(steps, names)
    return Key(file, steps, settings, exercise_id(document), cells, points.read_points(document, cells))


def counted(
    options: Options, settings: answers.Settings, answered: Collection[points.StepKey] | None
) -> Collection[str | points.StepKey] | None:
    """The steps whose cells a key counts (None: every step a student is asked for): those required (--require,
    else the key's `require:`; `all` is every one), else those its `answers:` holds (`answered`), else every one."""
    required = options.require if options.require is not None else settings.require
    if required:
        return None if set(answers.REQUIRE_ALL) <= set(required) else required
    return answered


def _answered(steps: core.Steps | StackSteps, document: yamldoc.Document) -> frozenset[points.StepKey]:
    """The steps a key's (or a file's own) `answers:` holds, each in its layer and head, read as a homework's
    would be: a stack's key answering layer 1's stream counts that stream, not every layer's."""
    return frozenset(points.step_key(step) for step in pipeline.grade(steps, document).steps)


def load_keys(folder: Path, options: Options = Options()) -> dict[str, Key]:
    """The keys in `folder` by exercise id: every problem there with an `exercise:` (answer templates are skipped).

    generate writes each problem twice, as the sheet and as the key; the one with answers: is the key.
    """
    found: dict[str, list[tuple[bool, str]]] = {}
    try:
        names = sorted(path for path in folder.iterdir() if path.suffix in KEY_SUFFIXES and path.is_file())
    except OSError as error:
        raise fail("input.unreadable", reason=error.strerror or str(error)).at(source=str(folder)) from None
    for path in names:
        document = yamldoc.read(str(path))
        ident = exercise_id(document)
        if ident is not None and _problem_fields(document):
            data = document.data if isinstance(document.data, dict) else {}
            found.setdefault(ident, []).append(("answers" in data, str(path)))
    keys = {}
    for ident, files in found.items():
        with_answers = [name for has, name in files if has] or [name for _, name in files]
        if len(with_answers) > 1:
            raise fail("check.several_keys", exercise=ident, files=listed(with_answers)).at(source=str(folder))
        keys[ident] = load_key(with_answers[0], options)
    if not keys:
        raise fail("check.no_keys").at(source=str(folder))
    return keys


def grade_file(
    file: str,
    keys: Key | Mapping[str, Key] | None,
    options: Options,
    describe: Callable[[AttnError], str],
) -> Result:
    """`file` graded against `keys` (one key, keys by exercise id, or None to grade it against its own problem)."""
    exercise, who = None, Student()
    try:
        document = yamldoc.read(file)
        exercise = exercise_id(document)
        who = student.read_student(document)
        if keys is None and softmax_answers.is_homework(document):  # `logits:` and answers: (issue 29)
            report = softmax_grading.grade_document(document, file, options)
            return Result(file, RIGHT if report.ok else WRONG, exercise, report, student=who)
        if keys is None:
            if not _problem_fields(document):
                raise fail("check.needs_key").at(source=document.name)
            steps = pipeline.solve(pipeline.load(document, confined=True))
            return _graded(file, exercise, who, steps, document, None, options)
        key = _key_for(document, exercise, keys)
        changed = _setting_changes(key, document)
        if _problem_fields(document):
            changed = (
                *changed_fields(key, pipeline.load(document, confined=True)),
                *changed,
            )
        if changed:
            return Result(file, PROBLEM_CHANGED, exercise, changed=changed, student=who)
        return _graded(file, exercise, who, key.steps, document, key, options)
    except AttnError as error:
        return Result(file, NOT_GRADED, exercise, error=describe(error), student=who)


def _graded(
    file: str,
    exercise: str | None,
    who: Student,
    steps: core.Steps | StackSteps,
    document: yamldoc.Document,
    key: Key | None,
    options: Options,
) -> Result:
    """`document`'s answers graded against `steps`, with the `key`'s settings (None: the file's own), and scored
    over the key's cells (without a key, over the file's own: its required steps, else those it answers)."""
    settings = key.settings if key is not None else None
    if isinstance(steps, StackSteps):
        layered, own = answers.parse_stack(document, steps, settings)
        grade = functools.partial(layer_grading.grade, steps, layered, own)
    else:
        grade = functools.partial(grading.grade, steps, answers.parse(document, steps, settings))
    report = grade(
        tolerance=options.tolerance,
        carry=options.carry,
        min_decimals=options.min_decimals,
        require=options.require,
        file=file,
    )
    if key is None:
        mine = answers.read_settings(document)
        cells = points.key_cells(steps, counted(options, mine, {points.step_key(step) for step in report.steps}))
        spec = points.read_points(document, cells)
    else:
        cells, spec = key.cells, key.points
    return Result(file, status_of(report), exercise, report, score=points.score(report, spec, cells), student=who)


def status_of(report: grading.Report) -> str:
    """A graded file's status: incomplete when a required step is missing or nothing is answered; else wrong when
    a step is wrong for more than rounding; else rounded when a step is wrong only by rounding; else right."""
    statuses = {points.step_status(step) for step in report.steps}
    if grading.MISSING in statuses or statuses <= {grading.NOT_ANSWERED}:
        return INCOMPLETE
    if grading.WRONG in statuses:
        return WRONG
    return ROUNDED if points.ROUNDED in statuses else RIGHT


def _key_for(document: yamldoc.Document, ident: str | None, keys: Key | Mapping[str, Key]) -> Key:
    """The key for this homework: the only one, or the one its `exercise:` (`ident`) names."""
    if isinstance(keys, Key):
        if ident is not None and keys.exercise is not None and ident != keys.exercise:
            raise fail("check.other_exercise", exercise=ident, key=keys.exercise).at(
                document.name, document.line(("exercise",)), "exercise"
            )
        return keys
    if ident is None:
        raise fail("check.no_exercise", names=listed(sorted(keys))).at(document.name, field="exercise")
    if ident not in keys:
        raise fail("check.unknown_exercise", exercise=ident, names=listed(sorted(keys))).at(
            document.name, document.line(("exercise",)), "exercise"
        )
    return keys[ident]


def _problem_fields(document: yamldoc.Document) -> list[str]:
    """The fields of a file that are not answers: a problem (or a misspelt field, which parsing it reports)."""
    data = document.data if isinstance(document.data, dict) else {}
    return [name for name in data if name not in ANSWER_FIELDS and not str(name).startswith("x-")]


def changed_fields(key: Key, given: problem.Problem | problem.Stack) -> tuple[str, ...]:
    """The fields in which a problem copied into a homework differs from the key's, numerically."""
    ours = key.steps.stack if isinstance(key.steps, StackSteps) else key.steps.problem
    if isinstance(ours, problem.Problem) and isinstance(given, problem.Problem):
        return tuple(_problem_changes(ours, given))
    if not (isinstance(ours, problem.Stack) and isinstance(given, problem.Stack)):
        return ("layers",)
    if ours.tokens != given.tokens:
        return ("tokens",)
    changed = [] if _same(ours.x, given.x) else ["x"]
    if len(ours.layers) != len(given.layers):
        return (*changed, "layers")
    for index, (a, b) in enumerate(zip(ours.layers, given.layers)):
        prefix = f"layers[{index + 1}]."
        changed += [prefix + name for name in _problem_changes(a.attention, b.attention)]
        if not _same_norm(a.norm, b.norm):
            changed.append(prefix + "norm")
    return tuple(changed)


def _problem_changes(ours: problem.Problem, given: problem.Problem) -> list[str]:
    changed = [name for name in ("tokens", "query_tokens") if getattr(ours, name) != getattr(given, name)]
    if changed:
        return changed
    if not _same(ours.mask, given.mask):
        changed.append("mask")
    if len(ours.heads) != len(given.heads):
        return [*changed, "heads"]
    for index, (a, b) in enumerate(zip(ours.heads, given.heads)):
        prefix = f"heads[{index + 1}]." if len(ours.heads) > 1 else ""
        changed += [prefix + name for name in _head_changes(a, b)]
    if not _same(ours.w_o, given.w_o):
        changed.append("w_o")
    return changed


def _same_norm(a: problem.Norm | None, b: problem.Norm | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    same = (a.kind, a.place) == (b.kind, b.place) and np.isclose(a.eps, b.eps, rtol=SAME_RTOL, atol=SAME_ATOL)
    return bool(same) and _same(a.gain, b.gain) and _same(a.shift, b.shift)


def _setting_changes(key: Key, document: yamldoc.Document) -> tuple[str, ...]:
    """The grading settings a homework sets otherwise than its key (a student may not loosen the tolerance, nor
    give themselves points)."""
    data = document.data if isinstance(document.data, dict) else {}
    mine = answers.read_settings(document)
    changed = [name for name in answers.SETTINGS if name in data and getattr(mine, name) != getattr(key.settings, name)]
    if "points" in data and points.read_points(document) != key.points:
        changed.append("points")
    return tuple(changed)


def _head_changes(a: problem.Head, b: problem.Head) -> list[str]:
    changed = []
    if a.score.kind != b.score.kind:
        return ["score"]
    if not np.isclose(a.score.scale, b.score.scale, rtol=SAME_RTOL, atol=SAME_ATOL):
        changed.append("scale")
    if not all(_same(getattr(a.score, name), getattr(b.score, name)) for name in ("w", "w_query", "w_key", "v")):
        changed.append("score")
    for name, weight, x, ours, theirs in (
        ("queries", "w_q", "x_query", a.queries, b.queries),
        ("keys", "w_k", "x", a.keys, b.keys),
        ("values", "w_v", "x", a.values, b.values),
    ):
        if isinstance(ours, problem.Projection) and isinstance(theirs, problem.Projection):
            changed += [field for field, p, q in ((x, ours.x, theirs.x), (weight, ours.w, theirs.w)) if not _same(p, q)]
        elif (ours is None) != (theirs is None) or (
            ours is not None and theirs is not None and not _same(core.project(ours), core.project(theirs))
        ):
            changed.append(name)
    if not _same(a.scores, b.scores):
        changed.append("scores")
    return list(dict.fromkeys(changed))


def _same(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if a.shape != b.shape:
        return False
    return bool(np.array_equal(a, b)) if a.dtype == bool else bool(np.allclose(a, b, rtol=SAME_RTOL, atol=SAME_ATOL))


def grade_files(
    files: Sequence[str], keys: Key | Mapping[str, Key] | None, options: Options, describe: Callable[[AttnError], str]
) -> list[Result]:
    """Every file's result, in the order given.

    The reports pile up as a class is graded and live to the end: every FREEZE_EVERY files, what exists is kept
    out of the garbage collector's scans (gc.freeze), so that each collection does not walk them all again
    (a tenth of the time of 1,000 files); it is handed back to the collector at the end.
    """
    results: list[Result] = []
    try:
        for file in files:
            if len(results) % FREEZE_EVERY == 0:
                gc.freeze()
            results.append(grade_file(file, keys, options, describe))
    finally:
        gc.unfreeze()
    return results
