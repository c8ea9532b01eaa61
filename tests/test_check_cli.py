"""attncli check against a teacher's key: one verdict per file, gradebooks that lose nobody, the teacher's workflow.

Right answers come from the key that generate writes (checked against plain Python in
test_generate); wrong ones are made by hand below, each saying what it changes.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from attncli import grading
from attncli.cli import app
from tests import reference
from tests.paths import ROOT, SAMPLES

ENV = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "COLUMNS": "100", "NO_COLOR": None, "FORCE_COLOR": None}
BANK = """\
tokens: [fisherman, net, bank]
query_tokens: [bank]
queries: [[sqrt(2), 0]]
keys: [[2, 0], [1, 1], [0, 1]]
values: [[2, 0], [0, 2], [1, 1]]
"""
TRUE = reference.head([[2**0.5, 0]], [[2, 0], [1, 1], [0, 1]], [[2, 0], [0, 2], [1, 1]])
RIGHT_ANSWERS = (
    "answers:\n"
    f"  weights: [{', '.join(f'{v:.4f}' for v in TRUE.weights[0])}]\n"
    f"  output: [{', '.join(f'{v:.4f}' for v in TRUE.output[0])}]\n"
)


def run(*args: str) -> Result:
    return CliRunner().invoke(app, ["check", *args], env=ENV)


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def filled(template: str, key: str) -> str:
    """A student's copy of `template` with every `?` replaced, in order, by the key's numbers as the key writes them."""
    cells = [
        cell.strip() for row in re.findall(r"\[([^\]]*)\]", key.split("\nanswers:\n")[1]) for cell in row.split(",")
    ]
    pieces = template.split('"?"')
    assert len(pieces) == len(cells) + 1
    return "".join(piece + cell for piece, cell in zip(pieces, cells)) + pieces[-1]


@pytest.fixture
def key(tmp_path: Path) -> str:
    return write(tmp_path, "key.yaml", BANK)


# Grading against a key


def test_an_answers_only_file_is_graded_by_the_key(tmp_path: Path, key: str) -> None:
    right = write(tmp_path, "right.yaml", RIGHT_ANSWERS)
    wrong = write(tmp_path, "wrong.yaml", "answers:\n  weights: [0.5000, 0.3000, 0.2000]\n")
    assert run("--key", key, right).exit_code == 0
    result = run("--key", key, wrong, "--format", "json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["status"] == "wrong"


def test_without_a_key_an_answers_only_file_is_not_graded(tmp_path: Path) -> None:
    result = run(write(tmp_path, "right.yaml", RIGHT_ANSWERS))
    assert result.exit_code == 2
    assert "holds answers but no problem: grade it against the teacher's key with --key" in result.stderr


def test_students_cannot_grade_themselves_with_their_own_problem(tmp_path: Path, key: str) -> None:
    """`score: dot` added to a copy of the problem would make unscaled scores right: the key's problem counts."""
    unscaled = reference.head([[2**0.5, 0]], [[2, 0], [1, 1], [0, 1]], [[2, 0], [0, 2], [1, 1]], scale=1.0)
    cheat = BANK + "score: dot\nanswers:\n" + f"  scores: [{', '.join(f'{v:.4f}' for v in unscaled.scores[0])}]\n"
    homework = write(tmp_path, "cheat.yaml", cheat)
    assert run(homework).exit_code == 0  # self-check: the file's own problem, as before
    result = run("--key", key, homework)
    assert result.exit_code == 1
    assert (
        result.stdout
        == f"{homework}: problem changed: score differ from the key's problem (grade the key's numbers, not your own)\n"
    )


@pytest.mark.parametrize(
    ("change", "fields"),
    [
        (("keys: [[2, 0], [1, 1], [0, 1]]", "keys: [[2, 0], [1, 1], [0, 2]]"), ["keys"]),
        (("query_tokens: [bank]", "query_tokens: [net]"), ["query_tokens"]),
        (("values: [[2, 0], [0, 2], [1, 1]]", "values: [[2, 0], [0, 2], [1, 1]]\nscale: 1"), ["scale"]),
    ],
)
def test_a_changed_problem_names_its_fields(tmp_path: Path, key: str, change: tuple[str, str], fields: list) -> None:
    assert change[0] in BANK
    homework = write(tmp_path, "homework.yaml", BANK.replace(*change) + RIGHT_ANSWERS)
    result = run("--key", key, homework, "--format", "json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert (document["status"], document["changed"], document["steps"]) == ("problem_changed", fields, [])


def test_the_same_problem_written_differently_is_not_changed(tmp_path: Path, key: str) -> None:
    """Numerically equal: √2 as a decimal, rows as a mapping, a comment and a title of one's own."""
    copy = (
        BANK.replace("sqrt(2)", "1.4142135623730951").replace(
            "keys: [[2, 0], [1, 1], [0, 1]]", ("keys:\n  fisherman: [2, 0]\n  net: [1, 1]\n  bank: [0, 1]")
        )
        + "title: mine\n"
        + RIGHT_ANSWERS
    )
    assert "1.4142135623730951" in copy
    assert run("--key", key, write(tmp_path, "copy.yaml", copy)).exit_code == 0


def test_the_keys_grading_settings_count_not_the_students(tmp_path: Path) -> None:
    key = write(tmp_path, "key.yaml", BANK + "tolerance: 0.001\n")
    loose = write(tmp_path, "loose.yaml", "tolerance: 0.5\nanswers:\n  weights: [0.5000, 0.3000, 0.2000]\n")
    result = run("--key", key, loose, "--format", "json")
    assert (result.exit_code, json.loads(result.stdout)["changed"]) == (1, ["tolerance"])


def test_keys_folder_matches_by_exercise_id(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.mkdir()
    write(keys, "a.yaml", BANK + "exercise: bank\n")
    write(keys, "b.yaml", (SAMPLES / "projections.yaml").read_text(encoding="utf-8") + "exercise: projections\n")
    right = write(tmp_path, "right.yaml", "exercise: bank\n" + RIGHT_ANSWERS)
    other = write(tmp_path, "other.yaml", "exercise: projections\n" + RIGHT_ANSWERS)  # bank's numbers for another
    unknown = write(tmp_path, "unknown.yaml", "exercise: storm\n" + RIGHT_ANSWERS)
    nameless = write(tmp_path, "nameless.yaml", RIGHT_ANSWERS)
    result = run("--keys", str(keys), right, other, unknown, nameless, "--format", "json")
    documents = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["status"] for d in documents] == ["right", "wrong", "not_graded", "not_graded"]
    assert "no key for exercise 'storm' (keys: bank, projections)" in documents[2]["error"]
    assert "no exercise: id to find its key by" in documents[3]["error"]
    assert result.exit_code == 2 and result.stderr.count("\n") == 2


def test_key_and_keys_together_are_refused(tmp_path: Path, key: str) -> None:
    result = run("--key", key, "--keys", str(tmp_path), key)
    assert result.exit_code == 2 and "give --key (one key for every file) or --keys" in result.stderr


def test_a_broken_key_stops_everything(tmp_path: Path) -> None:
    key = write(tmp_path, "key.yaml", BANK.replace("keys:", "kyes:"))
    result = run("--key", key, write(tmp_path, "a.yaml", RIGHT_ANSWERS))
    assert result.exit_code == 2 and result.stdout == "" and "unknown field 'kyes'" in result.stderr


# The gradebook


def test_csv_has_one_row_per_file_broken_ones_included(tmp_path: Path, key: str) -> None:
    files = [
        write(tmp_path, "right.yaml", RIGHT_ANSWERS),
        write(tmp_path, "wrong.yaml", "answers:\n  weights: [0.5000, 0.3000, 0.2000]\n  output: [1.2000, 0.8000]\n"),
        write(tmp_path, "blank.yaml", "answers:\n  weights: ['?', '?', '?']\n"),
        write(tmp_path, "broken.yaml", "answers:\n  weights: [0.6652, 0.2447, '0,0900']\n"),
        write(tmp_path, "changed.yaml", BANK.replace("[0, 1]]", "[0, 2]]") + RIGHT_ANSWERS),
        write(tmp_path, "empty.yaml", ""),
    ]
    result = run("--key", key, *files, "--format", "csv")
    assert result.exit_code == 2
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [row["file"] for row in rows] == files
    statuses = ["right", "wrong", "incomplete", "not_graded", "problem_changed", "not_graded"]  # blank: nothing done
    assert [row["status"] for row in rows] == statuses
    right, wrong, blank, broken, changed, _ = rows
    # the key asks for every step (it holds no answers: and no require:): 3 + 3 + 3 + 2 cells
    assert (right["right"], right["wrong"], right["cells_right"], right["cells"]) == ("2", "0", "5", "11")
    assert (wrong["wrong"], wrong["carried"], wrong["first_mistake"]) == ("1", "1", "weights")  # output: 0.5·v1 + ...
    assert blank["not_answered"] == "1" and (blank["cells_right"], blank["cells"]) == ("0", "11")
    assert "decimal comma? write 0.0900" in broken["error"] and changed["error"] == "keys"


def test_required_steps_that_are_missing(tmp_path: Path, key: str) -> None:
    only_weights = write(tmp_path, "weights.yaml", RIGHT_ANSWERS.split("  output")[0])
    assert run("--key", key, only_weights).exit_code == 0
    result = run("--key", key, only_weights, "--require", "dot,scores,weights,output", "--format", "json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert [(s["step"], s["status"]) for s in document["steps"]] == [
        ("dot", "missing"), ("scores", "missing"), ("weights", "right"), ("output", "missing")
    ]  # fmt: skip
    assert document["first_mistake"] == "dot"
    strict = write(tmp_path, "strict.yaml", BANK + "require: [weights, output]\n")
    assert run("--key", strict, only_weights).exit_code == 1
    text = run("--key", strict, only_weights, "--format", "text").stdout
    assert text.rstrip().endswith("weights: 3/3, output: missing (required) — output: missing (required)")


def test_bad_require_is_a_usage_error(key: str) -> None:
    result = run("--key", key, key, "--require", "dot,wieghts")
    assert result.exit_code == 2
    assert (
        result.stderr == "attncli: --require: 'wieghts' is not a step that can be answered; did you mean 'weights'?\n"
    )


def test_command_line_settings_reach_the_grader(tmp_path: Path, key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[dict] = []
    real = grading.grade

    def spy(*args: object, **kwargs: object) -> grading.Report:
        seen.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(grading, "grade", spy)
    homework = write(tmp_path, "a.yaml", RIGHT_ANSWERS)
    run("--key", key, homework, "--min-decimals", "2", "--require", "weights", "--tolerance", "0.01")
    graded = [kw for kw in seen if kw.get("file") == homework]  # not the key's blank template, counting its cells
    assert [{name: kw[name] for name in ("tolerance", "min_decimals", "require")} for kw in graded] == [
        {"tolerance": 0.01, "min_decimals": 2, "require": ("weights",)}
    ]


def test_the_summary_names_every_wrong_step(tmp_path: Path, key: str) -> None:
    """Weights normalised without e^s (2/3, 1/3, 0), then an output mixing the keys with the right weights."""
    mixed = reference.weighted_sum(TRUE.weights[0], [[2, 0], [1, 1], [0, 1]])
    text = (
        "answers:\n  scores: [2, 1, 0]\n  weights: [0.6667, 0.3333, 0]\n"
        f"  output: [{', '.join(f'{v:.4f}' for v in mixed)}]\n"
    )
    first = write(tmp_path, "a.yaml", text)
    line = run("--key", key, first, first, "--format", "text").stdout.splitlines()[0]
    verdict = line.split(" — ")[1]
    assert verdict.startswith("weights: ") and "; output: " in verdict


def test_output_file_and_quiet(tmp_path: Path, key: str) -> None:
    homework = write(tmp_path, "a.yaml", "answers:\n  weights: [0.5000, 0.3000, 0.2000]\n")
    target = tmp_path / "grades.csv"
    result = run("--key", key, homework, "--format", "csv", "-o", str(target))
    assert (result.exit_code, result.stdout) == (1, "")
    assert target.read_text(encoding="utf-8").splitlines()[1].startswith(f"{homework},,wrong,")
    quiet = run("--key", key, homework, "-q")
    assert (quiet.exit_code, quiet.stdout, quiet.stderr) == (1, "", "")
    assert run("--key", key, write(tmp_path, "b.yaml", RIGHT_ANSWERS), "-q").exit_code == 0


def test_markdown_class_report(tmp_path: Path, key: str) -> None:
    files = [
        write(tmp_path, "ana.yaml", RIGHT_ANSWERS),
        write(tmp_path, "ben.yaml", "answers:\n  scores: [2.8284, 1.4142, 0]\n"),
        write(tmp_path, "cai.yaml", "answers: 3\n"),
    ]
    result = run("--key", key, *files, "--format", "markdown")
    lines = result.stdout.splitlines()
    assert lines[0] == "# Class report"
    assert lines[2] == "| file | status | scores | weights | output | cells right | points | note |"
    # the key asks for every step: dot, scores, weights (3 cells each) and output (2), a point a cell
    assert lines[4] == f"| `{files[0]}` | right |  | ✓ 3/3 | ✓ 2/2 | 5/11 | 5 of 11 (45.45 %) |  |"
    assert lines[5] == f"| `{files[1]}` | wrong | ✗ 1/3 `missing_scale` |  |  | 1/11 | 1 of 11 (9.09 %) |  |"
    assert (
        lines[6].startswith(f"| `{files[2]}` | not graded |  |  |  |  |  | ")
        and "answers must be a mapping" in lines[6]
    )
    assert lines[8].startswith("Total: 3 files, 1 all right, 0 wrong only by rounding, 1 with mistakes")
    assert lines[10] == "## The class at a glance"  # what the class got wrong, ending the report


def test_spanish_gradebook_keeps_the_codes(tmp_path: Path, key: str) -> None:
    files = [
        write(tmp_path, "ana.yaml", RIGHT_ANSWERS),
        write(tmp_path, "ben.yaml", "answers:\n  scores: [2.8284, 1.4142, 0]\n"),
    ]
    markdown = run("--key", key, *files, "--format", "markdown", "--lang", "es").stdout.splitlines()
    assert markdown[0] == "# Informe de la clase"
    assert markdown[2] == "| archivo | estado | puntuaciones | pesos | salida | celdas bien | puntos | nota |"
    assert "| bien |" in markdown[4] and "| mal | ✗ 1/3 `missing_scale` |" in markdown[5]
    rows = list(csv.DictReader(io.StringIO(run("--key", key, *files, "--format", "csv", "--lang", "es").stdout)))
    assert [row["status"] for row in rows] == ["right", "wrong"] and rows[1]["codes"] == "scores:missing_scale"
    text = run("--key", key, files[1], "--format", "text", "--lang", "es").stdout
    assert "puntuaciones: 1/3 — puntuaciones: falta escalar por 1/√d_k" in text


# The teacher's workflow, as in the README


def test_teachers_workflow_end_to_end(tmp_path: Path) -> None:
    """generate --count 30; students fill the templates (some wrong, some tampered, one broken); one CSV of 30 rows."""
    ex, submissions = tmp_path / "ex", tmp_path / "submissions"
    made = CliRunner().invoke(app, ["generate", "--count", "30", "-o", str(ex), "--seed", "500"], env=ENV)
    assert made.exit_code == 0, made.output
    submissions.mkdir()
    expected = {}
    for n in range(1, 31):
        name = f"exercise-{n:02d}"
        template = (ex / f"{name}-answers.yaml").read_text(encoding="utf-8")
        key = (ex / f"{name}-key.yaml").read_text(encoding="utf-8")
        answers = filled(template, key)
        if n % 10 == 3:  # a weight written with a decimal comma: cannot be read
            answers, status = re.sub(r"(weights:.*\n\s+\S+: \[)(\d)\.", r'\1"\2,', answers, count=1), "not_graded"
            answers = re.sub(r'("\d,\d+)', r'\1"', answers, count=1)
        elif n % 10 == 5:  # the problem copied in with a key changed to make the numbers easier
            sheet = (ex / f"{name}.yaml").read_text(encoding="utf-8")
            keys = sheet.split("\nkeys:\n")[1].splitlines()[0]
            tampered = sheet.replace(keys, re.sub(r"\[.*\]", "[0, 0]", keys), 1)
            assert tampered != sheet
            answers, status = tampered + answers.split("\nexercise: ")[1].split("\n", 1)[1], "problem_changed"
        elif n % 10 == 7:  # the first query's weights all on its first key
            row = re.search(r"  weights:.*\n\s+\S+: \[([^\]]*)\]", answers)
            assert row is not None
            width = len(row.group(1).split(","))
            answers = answers.replace(row.group(1), ", ".join(["1", *["0"] * (width - 1)]), 1)
            status = "wrong"
        else:
            status = "right"
        (submissions / f"student-{n:02d}.yaml").write_text(answers, encoding="utf-8")
        expected[str(submissions / f"student-{n:02d}.yaml")] = status
    grades = tmp_path / "grades.csv"
    files = sorted(str(path) for path in submissions.glob("*.yaml"))
    result = run("--keys", str(ex), *files, "--format", "csv", "-o", str(grades))
    assert result.exit_code == 2  # three files could not be read
    rows = list(csv.DictReader(io.StringIO(grades.read_text(encoding="utf-8"))))
    assert len(rows) == 30
    assert {row["file"]: row["status"] for row in rows} == expected
    assert {row["exercise"] for row in rows if row["status"] == "right"} <= {f"exercise-{n:02d}" for n in range(1, 31)}
    assert all(row["error"] == "keys" for row in rows if row["status"] == "problem_changed")
    assert all(row["first_mistake"] == "weights" for row in rows if row["status"] == "wrong")


def test_grading_benchmark_runs_in_quick_mode() -> None:
    """The benchmark's own check: one gradebook row per file, each right or wrong as planned (never timed here)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import grading as benchmark
    finally:
        sys.path.pop(0)
    rows = {name: value for name, value, _ in benchmark.main(["--quick"])}
    assert rows["gradebook rows / files"] == 1
    assert rows["files graded right or wrong as their students did / files"] == 1
    assert rows["  the same gradebook, rows in order (1 = yes)"] == 1  # --jobs 1 and every core (issue 27)


def test_the_rounding_rule_shows_its_arithmetic_where_it_decided(tmp_path: Path) -> None:
    """|written − true| against half a unit of the last decimal plus the rounding carried in, as the JSON says."""
    homework = write(tmp_path, "a.yaml", BANK + "answers:\n  weights: [0.6653, 0.2449, 0.0900]\n")
    cells = json.loads(run(homework, "--format", "json").stdout)["steps"][0]["cells"]
    text = run(homework, "--format", "text").stdout
    shown = 0
    for cell in cells:
        difference = abs(float(cell["given"]) - cell["expected"])
        allowed = cell["own"] + cell["carried_in"]
        decides = (cell["status"] == "right" and difference > cell["own"]) or (
            cell["status"] == "wrong" and difference <= 10 * allowed
        )
        line = f"bank, {cell['column_name']}: |{cell['given']} − "
        assert (line in text) == decides, (cell, text)
        shown += decides
    assert shown >= 1  # 0.2449 is 0.00017 from 0.244728: a rounding slip, not a method's
    assert "Rounding rule: |written − true| ≤ half a unit of the last decimal written" in text
    assert "|0.2449 − 0.244728| = 0.000172 " in text


def test_a_step_of_the_wrong_shape_in_every_report(tmp_path: Path) -> None:
    """Forgot W_O: the final output as wide as the concatenation (4 numbers where W_O gives 2)."""
    two_heads = (SAMPLES / "two_heads.yaml").read_text(encoding="utf-8")
    homework = write(tmp_path, "a.yaml", two_heads + "answers:\n  final: [1.4205, 0.5795, 0.2447, 1.3348]\n")
    text = run(homework, "--format", "text").stdout
    assert "final: wrong shape" in text and "this step has 1 row and 2 columns" in text
    markdown = run(homework, "--format", "markdown").stdout
    assert f"| `{homework}` | wrong | ✗ wrong shape" in markdown
