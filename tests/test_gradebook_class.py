"""A course's whole class, as the issue's teacher would grade it with the gradebook's library: `generate --count 30`,
a class list exported by Canvas, thirty students (right, partial, untouched, wrong, carried; one hands nothing
in; a stranger's file), then points, the Canvas import, Gradescope's results, feedback files and the class at a
glance. Each student's points are worked out here from what they wrote, counting the `?` of their template."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from attncli import pipeline
from attncli.cli import app
from attncli.gradebook import glance, points, records, roster
from attncli.grading.submissions import Options, grade_files, load_keys
from attncli.i18n import describe
from attncli.render import feedback, gradebook
from attncli.steps import BY_NAME
from tests.test_lms_formats import SCHEMA, canvas_import, validate

STUDENTS = 30
KINDS = ("right", "partial", "untouched", "wrong", "carried")  # student n is KINDS[n % 5]; n = 30 hands nothing in
CARRIED_HALF = "points: {carried: half}"  # a point a cell, a carried cell half


STEP_FIELDS = (("dot", "dot"), ("scores", "scores"), ("weights", "weights"), ("output", "output"))


def rows(matrix: np.ndarray) -> str:
    return "[" + ", ".join("[" + ", ".join(f"{v:.4f}" for v in row) + "]" for row in matrix) + "]"


def asked(template: str) -> int:
    """The `?` of a blank template outside the numbers written on the way (e^s, Σ e^s, ...: optional, in points
    only where the points name them)."""
    answers = yaml.safe_load(template)["answers"]
    blocks = [answers, *answers.get("heads", [])]
    return sum(str(rows).count("?") for block in blocks for name, rows in block.items() if not aside(name))


def aside(name: str) -> bool:
    return name in BY_NAME and BY_NAME[name].aside


def homework(exercise: str, kind: str, head: object, template: str) -> str:
    """What a student of `kind` hands in for `exercise`: its blank `template`, or numbers from its true ones at 4
    decimals (`head`: its HeadSteps)."""
    true = {name: np.asarray(getattr(head, field)) for name, field in STEP_FIELDS}
    if kind == "untouched":
        return template
    if kind == "partial":
        return f"exercise: {exercise}\nanswers:\n  weights: {rows(true['weights'])}\n"
    if kind == "wrong":  # the first query's weight all on its first key
        wrong = true["weights"].copy()
        wrong[0] = [1, 0, 0]
        true["weights"] = wrong
    if kind == "carried":
        true = carried(head)
    steps = "".join(f"  {name}: {rows(true[name])}\n" for name, _ in STEP_FIELDS)
    return f"exercise: {exercise}\nanswers:\n{steps}"


def carried(head: object) -> dict[str, np.ndarray]:
    """q·k of the first query and key written one too many, every later number worked from it at 4 decimals."""
    dot = np.round(head.dot, 4)
    dot[0, 0] += 1
    scores = np.round(dot / math.sqrt(head.keys.shape[1]), 4)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights = np.round(e / e.sum(axis=1, keepdims=True), 4)
    return {"dot": dot, "scores": scores, "weights": weights, "output": np.round(weights @ head.values, 4)}


def moved(head: object) -> int:
    """How many numbers of the first query's row the slip moves from the true ones in scores, weights and output:
    by more than 0.001 (none moves between 0.0001 and 0.001, where the rounding rule could go either way). The
    other rows differ only by the rounding to 4 decimals, which the rule allows: they are right."""
    student = carried(head)
    count = 0
    for name, field in STEP_FIELDS[1:]:
        gap = np.abs(student[name][0] - getattr(head, field)[0])
        assert not np.any((gap > 1e-4) & (gap <= 1e-3)), (name, gap)
        count += int(np.sum(gap > 1e-3))
    return count


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """The worksheet, the class list, the files handed in, and what each student must score."""
    folder = tmp_path_factory.mktemp("course")
    ex, handed = folder / "ex", folder / "handed"
    made = CliRunner().invoke(app, ["generate", "--count", str(STUDENTS), "-o", str(ex), "--seed", "500"])
    assert made.exit_code == 0, made.output
    handed.mkdir()
    class_list = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Attention 1 (1202)"]]
    class_list.append(["    Points Possible", "", "", "", "", "33.00"])
    expected, ids = {}, {}
    for n in range(1, STUDENTS + 1):
        exercise, login = f"exercise-{n:02d}", f"student-{n:02d}"
        class_list.append([f"Surname{n}, Name{n}", str(5000 + n), f"S{n:04d}", login, f"Section {n % 2 + 1}", ""])
        template = (ex / f"{exercise}-answers.yaml").read_text(encoding="utf-8")
        cells = asked(template)  # every cell the student must fill: the oracle's count of the key's cells
        head = pipeline.solve(pipeline.load(str(ex / f"{exercise}-key.yaml"))).heads[0]
        kind = KINDS[n % 5] if n != STUDENTS else "missing"
        if kind == "wrong":
            assert np.all((head.weights[0] > 0.001) & (head.weights[0] < 0.999))  # so that 1, 0, 0 are 3 wrong cells
        expected[login] = {
            "right": cells,
            "partial": head.weights.size,
            "untouched": 0,
            "wrong": cells - 3,  # the first weights row
            "carried": cells - 1 - moved(head) / 2 if kind == "carried" else None,  # q·k[0,0] wrong, the rest ↷
            "missing": 0,
        }[kind]
        if kind != "missing":
            name = f"upload-{n:02d}.yaml" if n == 7 else f"{login}.yaml"  # number 7 says who they are instead
            (handed / name).write_text(homework(exercise, kind, head, template), encoding="utf-8")
            ids[str(handed / name)] = "Student-07" if n == 7 else None
    stranger = homework("exercise-01", "right", head_of(ex, 1), "")
    (handed / "stranger.yaml").write_text(stranger, encoding="utf-8")
    class_list.append(["Student, Test", "5999", "", "9f1c0e", "Section 1", ""])
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(class_list)
    (folder / "canvas.csv").write_text(buffer.getvalue(), encoding="utf-8")
    return {"ex": ex, "handed": handed, "class_list": folder / "canvas.csv", "expected": expected, "ids": ids}


def head_of(ex: Path, n: int) -> object:
    return pipeline.solve(pipeline.load(str(ex / f"exercise-{n:02d}-key.yaml"))).heads[0]


@pytest.fixture(scope="module")
def graded(course: dict) -> tuple[roster.Placement, list[records.StudentRecord]]:
    """Every file graded against its exercise's key as `check --keys` grades it, scored, and placed."""
    from attncli import yamldoc

    keys = load_keys(course["ex"])
    files = sorted(str(path) for path in course["handed"].glob("*.yaml"))
    results = grade_files(files, keys, Options(), describe)
    made = []
    for result in results:
        assert result.report is not None and result.exercise is not None, result
        cells = points.key_cells(keys[result.exercise].steps)
        spec = points.read_points(yamldoc.load(CARRIED_HALF, "key.yaml"), cells)
        score = points.score(result.report, spec, cells)
        made.append(records.record(result, score, student_id=course["ids"].get(result.file)))
    return roster.place(roster.read_roster(str(course["class_list"])), made), made


def test_every_student_scores_what_they_wrote(course: dict, graded: tuple) -> None:
    placement, _ = graded
    assert len(placement.rows) == STUDENTS  # the Points Possible row and the test student are not students
    found = {
        placed.row.value: placed.records[0].score.score if placed.records else "no file" for placed in placement.rows
    }
    expected = {login: "no file" if login == "student-30" else points_ for login, points_ in course["expected"].items()}
    assert found == expected
    assert [Path(record.file or "").name for record in placement.unmatched] == ["stranger.yaml"]
    assert placement.doubled == ()


def test_the_canvas_import_has_one_row_per_student_with_the_right_points(course: dict, graded: tuple) -> None:
    placement, _ = graded
    text = gradebook.canvas(placement, "Attention 1 (1202)")
    assignments, possible, students = canvas_import(text)
    assert (assignments, possible) == (["Attention 1 (1202)"], {"Attention 1 (1202)": "33"})
    assert [student["SIS Login ID"] for student in students] == [f"student-{n:02d}" for n in range(1, STUDENTS + 1)]
    for student in students:
        assert float(student["Attention 1 (1202)"]) == course["expected"][student["SIS Login ID"]], student
    assert "stranger" not in text and "Student, Test" not in text


def test_gradescope_results_validate_and_score_as_expected(course: dict, graded: tuple) -> None:
    placement, _ = graded
    for placed in placement.rows:
        for record in placed.records:
            document = json.loads(gradebook.gradescope(record))
            assert validate(document, SCHEMA) == [], record.file
            assert document["score"] == course["expected"][placed.row.value]
            assert sum(test["max_score"] for test in document["tests"]) == 33


def test_one_feedback_file_per_student_and_stranger(tmp_path: Path, graded: tuple) -> None:
    placement, _ = graded
    everybody = roster.class_records(placement, records.common_maximum(graded[1]))
    assert len(everybody) == STUDENTS + 1  # the stranger's file is not lost
    folder = tmp_path / "feedback"
    folder.mkdir()
    for record, name in zip(everybody, feedback.file_names(everybody)):
        (folder / name).write_text(feedback.feedback(record), encoding="utf-8")
    written = sorted(path.name for path in folder.iterdir())
    assert len(written) == STUDENTS + 1
    assert "Surname30, Name30.md" in written and "stranger.md" in written
    assert "No file was handed in." in (folder / "Surname30, Name30.md").read_text(encoding="utf-8")
    assert "Points: 29 of 33 (87.88 %)" in (folder / "Surname4, Name4.md").read_text(encoding="utf-8")


def test_the_class_at_a_glance_adds_up(graded: tuple) -> None:
    _, made = graded
    found = glance.glance(record.report for record in made if record.report is not None)
    assert found.students == STUDENTS  # 29 students and the stranger
    kinds = [KINDS[n % 5] for n in range(1, STUDENTS)] + ["right"]  # ... the stranger wrote the right numbers
    counted = {step.step.step: (step.answered, step.right, step.carried, step.wrong) for step in found.steps}
    filled_all = sum(kind in ("right", "wrong", "carried") for kind in kinds)
    assert counted["dot"] == (filled_all, kinds.count("right") + kinds.count("wrong"), 0, kinds.count("carried"))
    assert counted["weights"][0] == filled_all + kinds.count("partial")  # an untouched template answers nothing
    assert counted["weights"][3] == kinds.count("wrong")
    for step in found.steps:
        assert step.answered + step.missing + step.not_answered == found.students
    assert found.steps[-1].carried == kinds.count("carried")
