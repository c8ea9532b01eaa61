"""Issue 27's teacher workflow through the command line: `generate --count 30`, a class of 30 (a roster shaped as
Canvas exports it) filling the templates (right, partly, with a mistake carried through, untouched, one cell
wrong, matched by file name), one student handing in nothing and one file from nobody on the list; then Canvas's
import, Gradescope's results.json (validated against the schema written from its specification), a feedback file
per student and the class report, whose counts must add up.

Every expected score is counted here from the key's own numbers (a point per cell of the key, carried cells
earning theirs, the default of a key without `points:`), never read from attncli's output.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import math
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from attncli.cli import app
from attncli.steps import BY_NAME
from tests.paths import ROOT
from tests.test_check_cli import ENV
from tests.test_lms_formats import SCHEMA, canvas_import, validate

STUDENTS = 30
ASSIGNMENT = "Attention 1 (3301)"
KINDS = ("right", "weights_only", "unscaled", "untouched", "by_file_name", "one_cell_wrong")


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=ENV)


@dataclass(frozen=True)
class Student:
    number: int
    kind: str  # one of KINDS, or "absent" (hands in nothing)
    exercise: str
    points: int  # expected, counted from the key
    status: str  # expected

    @property
    def login(self) -> str:
        return f"login{self.number:02d}"

    @property
    def name(self) -> str:
        return f"Surname{self.number:02d}, Given"


def cells_of(answers: dict) -> dict[str, list[list[float]]]:
    """A key's `answers:` as rows of numbers, step by step (rows in the key's token order)."""
    return {step: [list(map(float, row)) for row in rows.values()] for step, rows in answers.items()}


def filled(template: str, rows_by_step: dict[str, list[list[float]]], student: tuple[str, str] | None) -> str:
    """`template` with the rows of the steps in `rows_by_step` written in (other steps left `?`), and the student's
    name and id after `student:` and `student_id:` (None: left blank)."""
    lines, step, row = [], None, 0
    for line in template.splitlines():
        heading = re.fullmatch(r"  (\w+):.*", line)
        if heading:
            step, row = heading.group(1), 0
        elif step is not None and re.fullmatch(r"    .+: \[.*\]", line):
            if step in rows_by_step:
                numbers = ", ".join(repr(value) for value in rows_by_step[step][row])
                line = re.sub(r"\[.*\]", f"[{numbers}]", line)
            row += 1
        lines.append(line)
    text = "\n".join(lines) + "\n"
    if student is not None:
        text = text.replace("\nstudent:\n", f"\nstudent: {student[0]}\n")
        text = text.replace("\nstudent_id:\n", f"\nstudent_id: {student[1]}\n")
    return text


def unscaled(key: dict) -> dict[str, list[list[float]]]:
    """Scores that forgot 1/√d_k (the dot products again), and the weights and output worked correctly from them,
    each carried with 4 decimals: right method, wrong inputs from the scores on."""
    dot = cells_of(key["answers"])["dot"]
    values = [list(map(float, row)) for row in key["values"].values()]
    weights = []
    for row in dot:
        exps = [math.exp(x) for x in row]
        weights.append([round(e / sum(exps), 4) for e in exps])
    output = [[round(sum(w * v[c] for w, v in zip(ws, values)), 4) for c in range(len(values[0]))] for ws in weights]
    return {"dot": dot, "scores": dot, "weights": weights, "output": output}


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Student], list[str]]:
    """The exercises, the roster, the students' files; the students as planned, and the files handed in, in order."""
    folder = tmp_path_factory.mktemp("course")
    ex, handed = folder / "ex", folder / "submissions"
    made = run("generate", "--count", str(STUDENTS), "--seed", "500", "-o", str(ex))
    assert made.exit_code == 0, made.output
    handed.mkdir()
    roster = [["Student", "ID", "SIS User ID", "SIS Login ID", "Section", ASSIGNMENT]]
    roster.append(["    Points Possible", "", "", "", "", "33.00"])
    students, files = [], []
    for number in range(1, STUDENTS + 1):
        exercise = f"exercise-{number:02d}"
        key = yaml.safe_load((ex / f"{exercise}-key.yaml").read_text(encoding="utf-8"))
        template = (ex / f"{exercise}-answers.yaml").read_text(encoding="utf-8")
        rows = cells_of(key["answers"])
        count = {step: sum(len(row) for row in each) for step, each in rows.items() if not BY_NAME[step].aside}
        kind = "absent" if number == STUDENTS else KINDS[(number - 1) % len(KINDS)]
        who = (f"Given Surname{number:02d}", f"login{number:02d}")
        name, text = f"student-{number:02d}.yaml", ""
        if kind == "right":
            text, points, status = filled(template, rows, who), sum(count.values()), "right"
        elif kind == "weights_only":
            text, points, status = filled(template, {"weights": rows["weights"]}, who), count["weights"], "incomplete"
        elif kind == "unscaled":  # scores wrong but where a dot product is 0; weights and output carried: full credit
            unscaled_wrong = sum(1 for row in rows["dot"] for x in row if x != 0)
            text, points, status = filled(template, unscaled(key), who), sum(count.values()) - unscaled_wrong, "wrong"
        elif kind == "untouched":
            text, points, status = filled(template, {}, who), 0, "incomplete"
        elif kind == "by_file_name":  # no id written: matched by the file's name
            name, text = f"login{number:02d}.yaml", filled(template, rows, None)
            points, status = sum(count.values()), "right"
        elif kind == "one_cell_wrong":
            wrong = {**rows, "output": [[rows["output"][0][0] + 1, *rows["output"][0][1:]], *rows["output"][1:]]}
            text, points, status = filled(template, wrong, who), sum(count.values()) - 1, "wrong"
        else:
            points, status = 0, "no_file"
        if text:
            (handed / name).write_text(text, encoding="utf-8")
            files.append(str(handed / name))
        students.append(Student(number, kind, exercise, points, status))
        section = f"Section 0{1 + number % 2}"
        roster.append([f"Surname{number:02d}, Given", str(7000 + number), f"S{number:04d}", who[1], section, ""])
    roster.append(["Student, Test", "7999", "", "b1946ac92492d2347c6235b4d2611184", "Section 01", ""])
    stranger = filled((ex / "exercise-01-answers.yaml").read_text(encoding="utf-8"), {}, ("Nobody", "intruder"))
    (handed / "stranger.yaml").write_text(stranger, encoding="utf-8")
    files.append(str(handed / "stranger.yaml"))
    with (folder / "canvas_export.csv").open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(roster)
    return folder, students, files


def test_the_class_goes_into_canvas_one_row_per_student_with_the_right_points(
    course: tuple[Path, list[Student], list[str]],
) -> None:
    """Run as a teacher runs it (a process of its own, on two cores, -o): Canvas's importer reads one row per roster
    student in the roster's order, each with the points counted from the key; the stranger is named on stderr."""
    folder, students, files = course
    target = folder / "canvas.csv"
    args = ["--keys", str(folder / "ex"), *files, "--roster", str(folder / "canvas_export.csv")]
    args += ["--format", "canvas", "--assignment", ASSIGNMENT, "--jobs", "2", "-o", str(target)]
    done = subprocess.run(
        [sys.executable, "-m", "attncli", "check", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 1, done.stderr  # some students are wrong or incomplete, none unreadable
    assert done.stdout == ""
    assert "stranger.yaml" in done.stderr and done.stderr.count("\n") == 1, done.stderr
    text = target.read_text(encoding="utf-8")
    assert text.splitlines()[0] == f"Student,ID,SIS User ID,SIS Login ID,Section,{ASSIGNMENT}"
    assignments, possible, rows = canvas_import(text)
    assert assignments == [ASSIGNMENT] and float(possible[ASSIGNMENT]) == 33
    assert [row["SIS Login ID"] for row in rows] == [student.login for student in students]
    assert [float(row[ASSIGNMENT]) for row in rows] == [student.points for student in students]
    assert {student.kind for student in students} == {*KINDS, "absent"}


def test_the_grades_csv_has_every_student_and_the_stranger(course: tuple[Path, list[Student], list[str]]) -> None:
    """Moodle's CSV: a row per roster student (the absent one no_file, 0 points) and the file from nobody on the
    list; statuses and points as planned, the same with one job as with two (rows in input order)."""
    folder, students, files = course
    args = ["check", "--keys", str(folder / "ex"), *files, "--roster", str(folder / "canvas_export.csv")]
    graded = run(*args, "--format", "grades", "--jobs", "2")
    assert graded.exit_code == 1, graded.stderr
    assert run(*args, "--format", "grades", "--jobs", "1").stdout == graded.stdout
    rows = list(csv.DictReader(io.StringIO(graded.stdout)))
    assert list(rows[0]) == [
        "student", "student_id", "file", "exercise", "status", "score", "max_score", "percent", "first_mistake",
        "codes",
    ]  # fmt: skip
    by_id = {row["student_id"]: row for row in rows}
    assert len(rows) == STUDENTS + 1 and "intruder" in by_id
    for student in students:
        row = by_id[student.login]
        assert (row["status"], float(row["score"]), row["max_score"]) == (student.status, student.points, "33")
        assert row["percent"] == f"{100 * student.points / 33:.2f}"
    assert by_id[students[2].login]["codes"] == "scores:missing_scale"


@pytest.mark.parametrize("kind", ["right", "unscaled", "untouched", "one_cell_wrong"])
def test_gradescope_results_validate_against_the_specification(
    course: tuple[Path, list[Student], list[str]], kind: str, tmp_path: Path
) -> None:
    """One submission's results.json: valid by the schema, its score the student's points, a test per step whose
    scores add up to it and whose maxima add up to the key's 33 cells."""
    folder, students, files = course
    student = next(each for each in students if each.kind == kind)
    file = next(path for path in files if Path(path).stem in (f"student-{student.number:02d}", student.login))
    results = tmp_path / "results.json"
    key = folder / "ex" / f"{student.exercise}-key.yaml"
    done = run("check", "--key", str(key), file, "--format", "gradescope", "-o", str(results))
    assert done.exit_code == (0 if student.status == "right" else 1), done.stderr
    document = json.loads(results.read_text(encoding="utf-8"))
    assert validate(document, SCHEMA) == []
    assert document["score"] == student.points
    assert [test["name"] for test in document["tests"]] == ["dot", "scores", "weights", "output"]
    assert sum(test["score"] for test in document["tests"]) == student.points
    assert sum(test["max_score"] for test in document["tests"]) == 33


def test_feedback_has_one_file_per_student(course: tuple[Path, list[Student], list[str]], tmp_path: Path) -> None:
    """--feedback: a file for every roster student (the absent one too) and the stranger, each with their points;
    nothing on stdout with -q."""
    folder, students, files = course
    out = tmp_path / "feedback"
    args = ["--keys", str(folder / "ex"), *files, "--roster", str(folder / "canvas_export.csv")]
    done = run("check", *args, "--feedback", str(out), "-q")
    assert done.exit_code == 1 and done.stdout == "", done.stderr
    written = sorted(path.name for path in out.iterdir())
    assert len(written) == STUDENTS + 1
    for student in students:
        page = next(path for path in out.iterdir() if f"Surname{student.number:02d}" in path.name)
        assert f"{student.points} of 33" in page.read_text(encoding="utf-8"), page.name
    html = run("check", *args, "--feedback", str(tmp_path / "html"), "--feedback-format", "html", "-q")
    assert html.exit_code == 1
    assert all(path.suffix == ".html" for path in (tmp_path / "html").iterdir())


def test_the_class_report_adds_up(course: tuple[Path, list[Student], list[str]]) -> None:
    """The Markdown class report: a row per student and the stranger; in the class at a glance every step's
    answered + missing + not answered is the graded files, and answered is right + carried + rounded + wrong."""
    folder, students, files = course
    args = ["--keys", str(folder / "ex"), *files, "--roster", str(folder / "canvas_export.csv")]
    report = run("check", *args, "--format", "markdown").stdout
    glance = report.split("## The class at a glance", 1)[1]
    graded = int(re.search(r"(\d+) graded files", glance).group(1))
    assert graded == len(files)
    rows = [
        line.strip("|").split("|") for line in glance.splitlines() if re.match(r"\| (dot|scores|weights|output) ", line)
    ]
    assert [row[0].strip() for row in rows] == ["dot", "scores", "weights", "output"]
    for row in rows:
        answered, right, carried, rounded, wrong, missing, absent = (int(cell) for cell in row[1:8])
        assert answered == right + carried + rounded + wrong and answered + missing + absent == graded
    by_kind = {kind: sum(1 for s in students if s.kind == kind) for kind in (*KINDS, "absent")}
    scores = rows[1]
    assert int(scores[5]) == by_kind["unscaled"] and "missing\\_scale ×" + str(by_kind["unscaled"]) in scores[8]
    total = next(line for line in report.splitlines() if line.startswith("Total:"))
    assert f"{len(files)} files" in total and f"{by_kind['absent']} without a file" in total


@pytest.mark.parametrize("readme", ["README.md", "README.es.md"])
def test_the_readmes_small_class_is_real_output(readme: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every `$ attncli check … samples/class/…` block of the teacher's section prints what it shows (Gradescope's
    `output` texts shortened to … there)."""
    monkeypatch.chdir(ROOT)
    text = (ROOT / readme).read_text(encoding="utf-8")
    shown = re.findall(r"```\n\$ (attncli check --key samples/class/[^\n]*)\n(.*?)\n```", text, re.S)
    assert len(shown) >= 3
    for command, expected in shown:
        words = [found for word in shlex.split(command)[1:] for found in (sorted(glob.glob(word)) or [word])]
        result = run(*words)
        assert result.exit_code == 1, result.stderr
        if "gradescope" in words:
            document = json.loads(result.stdout)
            for each in (document, *document["tests"]):
                each["output"] = "…"
            assert document == json.loads(expected), command
        else:
            assert result.stdout.rstrip("\n") == expected, command
