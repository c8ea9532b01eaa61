"""Issue 27's "Why", one test each, through the command line (each fails on the code before the issue), and the
new options' bad inputs (one line, exit 2, nothing on stdout, nothing written).

The bank problem's numbers (samples/bank.yaml: one query, three keys) come from tests/reference.py, plain Python.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from attncli.cli import app
from attncli.steps import BY_NAME
from tests.refusals import refused
from tests.test_check_cli import BANK, ENV, TRUE
from tests.test_course import cells_of, filled

HALVES = """\
tokens: [a, b]
query_tokens: [a]
queries: [[1, 0]]
keys: [[0, 1], [0, 1]]
values: [[1], [3]]
"""  # both scores 0: the weights are exactly 0.5 and 0.5, the output exactly 2


def run(*args: str, lang: str | None = None) -> Result:
    return CliRunner().invoke(app, [*args, *(["--lang", lang] if lang else [])], env=ENV)


def run_code(*args: str, lang: str | None = None) -> tuple[int, str, str]:
    result = run(*args, lang=lang)
    return result.exit_code, result.stdout, result.stderr


def write(folder: Path, name: str, text: str) -> str:
    (folder / name).write_text(text, encoding="utf-8")
    return str(folder / name)


def csv_rows(result: Result) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(result.stdout)))


@pytest.fixture
def exercise(tmp_path: Path) -> tuple[Path, dict, str]:
    """One generated exercise: its folder, its key's data, its blank template."""
    made = run("generate", "--count", "1", "--seed", "500", "-o", str(tmp_path / "ex"))
    assert made.exit_code == 0, made.output
    key = yaml.safe_load((tmp_path / "ex" / "exercise-01-key.yaml").read_text(encoding="utf-8"))
    return tmp_path / "ex", key, (tmp_path / "ex" / "exercise-01-answers.yaml").read_text(encoding="utf-8")


def test_a_quarter_of_the_work_is_incomplete_not_all_right(tmp_path: Path, exercise: tuple[Path, dict, str]) -> None:
    """Only weights filled: before, `weights: 9/9 — all right`, exit 0, 9/9 cells. Now the generated key requires
    every step: incomplete, exit 1, 9 of the key's 33 cells; the untouched template is incomplete, 0 of 33."""
    folder, key, template = exercise
    assert key["require"] == "all"
    rows = cells_of(key["answers"])
    weights_only = write(tmp_path, "w.yaml", filled(template, {"weights": rows["weights"]}, None))
    untouched = write(tmp_path, "u.yaml", template)
    result = run("check", "--keys", str(folder), weights_only, untouched, "--format", "csv")
    assert result.exit_code == 1, result.stderr
    first, second = csv_rows(result)
    assert (first["status"], first["cells_right"], first["cells"], first["missing"]) == ("incomplete", "9", "33", "3")
    assert (second["status"], second["cells_right"], second["cells"], second["missing"]) == (
        "incomplete",
        "0",
        "33",
        "4",
    )
    assert (second["score"], second["max_score"], second["percent"]) == ("0", "33", "0.00")


def test_require_all_on_the_command_line(tmp_path: Path) -> None:
    """--require all: every step the problem has a student compute (dot, scores, weights, output: 3 + 3 + 3 + 2)."""
    answers = f"answers:\n  weights: [{', '.join(f'{v:.4f}' for v in TRUE.weights[0])}]\n"
    homework = write(tmp_path, "h.yaml", BANK + answers)
    assert run("check", homework).exit_code == 0
    result = run("check", homework, "--require", "all", "--format", "csv")
    row = csv_rows(result)[0]
    assert (result.exit_code, row["status"], row["missing"], row["cells"]) == (1, "incomplete", "3", "11")


def test_every_file_gets_points_in_every_format_and_null_when_not_graded(tmp_path: Path) -> None:
    """Before, no score anywhere. A key's points: weights 3 and output 2 (shared by their cells), carried cells
    half: weights all wrong (0 of 3) and the output worked correctly from them (2 cells ↷, 2 · 1/2) is 1 of 5,
    20.00 %, in CSV, JSON and the report. A file that cannot be graded has no score: empty in CSV, null in JSON."""
    key = write(tmp_path, "key.yaml", BANK + "points: {steps: {weights: 3, output: 2}, carried: half}\n")
    wrong_weights = [0.5, 0.25, 0.25]  # not the softmax: a wrong step; the output worked from them is carried
    output = [sum(w * v[c] for w, v in zip(wrong_weights, [[2, 0], [0, 2], [1, 1]])) for c in range(2)]
    answers = f"answers:\n  weights: {wrong_weights}\n  output: {output}\n"
    homework = write(tmp_path, "h.yaml", answers)
    broken = write(tmp_path, "b.yaml", "answers: [1, 2\n")
    rows = csv_rows(run("check", "--key", key, homework, broken, "--format", "csv"))
    assert [(row["score"], row["max_score"], row["percent"]) for row in rows] == [("1", "5", "20.00"), ("", "", "")]
    lines = run("check", "--key", key, homework, broken, "--format", "json").stdout.splitlines()
    objects = [json.loads(line) for line in lines]
    assert [(o["score"], o["max_score"], o["percent"]) for o in objects] == [(1, 5, 20.0), (None, None, None)]
    assert "points: 1 of 5 (20.00 %)" in run("check", "--key", key, homework).stdout


def test_a_student_says_who_they_are(tmp_path: Path, exercise: tuple[Path, dict, str]) -> None:
    """`student: Alice Smith` was `unknown field 'student'` (exit 2); now it reaches every gradebook, the template
    carries both fields blank, and a student_id such as 00123 stays as written."""
    folder, key, template = exercise
    assert "\nstudent:\nstudent_id:\n" in template
    text = filled(template, cells_of(key["answers"]), ("Alice Smith", "00123"))
    homework = write(tmp_path, "alice.yaml", text)
    result = run("check", "--keys", str(folder), homework, "--format", "csv")
    assert result.exit_code == 0, result.stderr
    row = csv_rows(result)[0]
    assert list(row)[-2:] == ["student", "student_id"] and (row["student"], row["student_id"]) == (
        "Alice Smith",
        "00123",
    )
    grades = csv_rows(run("check", "--keys", str(folder), homework, "--format", "grades"))[0]
    assert (grades["student"], grades["student_id"], grades["status"]) == ("Alice Smith", "00123", "right")


def test_a_grade_does_not_depend_on_the_graders_language(tmp_path: Path) -> None:
    """A key made by `generate --lang es` says decimal_comma: true: a quoted "0,6652" is read whatever language
    grades it. A key without it refuses the comma in every language (before: right under --lang es only)."""
    made = run("generate", "--count", "1", "--seed", "500", "-o", str(tmp_path / "es"), lang="es")
    assert made.exit_code == 0, made.output
    key = yaml.safe_load((tmp_path / "es" / "exercise-01-key.yaml").read_text(encoding="utf-8"))
    assert key["decimal_comma"] is True
    template = (tmp_path / "es" / "exercise-01-answers.yaml").read_text(encoding="utf-8")
    rows = cells_of(key["answers"])
    text = filled(template, rows, None)
    for row in rows["weights"]:  # the weights as a Spanish student writes them
        plain = ", ".join(repr(value) for value in row)
        text = text.replace(f"[{plain}]", "[" + ", ".join(f'"{value!r}"'.replace(".", ",") for value in row) + "]")
    assert '"0,' in text
    homework = write(tmp_path, "es.yaml", text)
    for lang in ("en", "es"):
        assert run("check", "--keys", str(tmp_path / "es"), homework, lang=lang).exit_code == 0
    english_key = write(tmp_path, "key.yaml", BANK)
    comma = write(tmp_path, "comma.yaml", 'answers:\n  weights: ["0,6652", "0,2447", "0,0900"]\n')
    for lang in ("en", "es"):
        assert run("check", "--key", english_key, comma, lang=lang).exit_code == 2


def test_the_rules_agree_with_each_other(tmp_path: Path) -> None:
    """The template says what the key enforces; generate --min-decimals writes min_decimals:; a number equal to the
    true value is right whatever its decimals (0.5 for 0.5 was too_few_decimals under --min-decimals 4)."""
    made = run("generate", "--count", "1", "--seed", "500", "--min-decimals", "4", "-o", str(tmp_path / "ex"))
    assert made.exit_code == 0, made.output
    key = yaml.safe_load((tmp_path / "ex" / "exercise-01-key.yaml").read_text(encoding="utf-8"))
    assert key["min_decimals"] == 4
    assert "at least 4 decimals" in (tmp_path / "ex" / "exercise-01-answers.yaml").read_text(encoding="utf-8")
    plain = run("generate", "--count", "1", "--seed", "500", "-o", str(tmp_path / "plain"))
    assert plain.exit_code == 0
    blank = (tmp_path / "plain" / "exercise-01-answers.yaml").read_text(encoding="utf-8")
    assert "as many decimals as you carry" in blank and "at least" not in blank
    halves = write(tmp_path, "halves.yaml", HALVES + "answers:\n  weights: [0.5, 0.5]\n  output: [2]\n")
    result = run("check", halves, "--min-decimals", "4", "--format", "json")
    assert result.exit_code == 0, result.stdout
    short = write(tmp_path, "short.yaml", HALVES + "answers:\n  weights: [0.50, 0.5]\n  output: [2.0]\n")
    assert run("check", short, "--min-decimals", "4").exit_code == 0


def test_a_rounding_slip_is_told_from_a_mistake(tmp_path: Path) -> None:
    """Weights correctly rounded to 2 decimals where the key asks for 4: status rounded in CSV and JSON, counted
    apart from wrong; still exit 1. A real mistake stays wrong."""
    key = write(tmp_path, "key.yaml", BANK + "min_decimals: 4\n")
    rounded = write(tmp_path, "r.yaml", f"answers:\n  weights: [{', '.join(f'{v:.2f}' for v in TRUE.weights[0])}]\n")
    wrong = write(tmp_path, "w.yaml", "answers:\n  weights: [0.5000, 0.2500, 0.2500]\n")
    result = run("check", "--key", key, rounded, wrong, "--format", "csv")
    assert result.exit_code == 1
    first, second = csv_rows(result)
    assert (first["status"], first["rounded"], first["wrong"]) == ("rounded", "1", "0")
    assert (second["status"], second["rounded"], second["wrong"]) == ("wrong", "0", "1")
    steps = json.loads(run("check", "--key", key, rounded, "--format", "json").stdout)["steps"]
    assert [step["status"] for step in steps if step["step"] == "weights"] == ["rounded"]
    assert run("check", "--key", key, rounded).exit_code == 1


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--roster", "nothere.csv"], "nothere.csv: cannot read the file"),
        (["--roster", "{roster}", "--match", "Bogus"], "'Bogus' is not a column of the class list"),
        (["--assignment", "X"], "--assignment is used only with --format canvas"),
        (["--format", "canvas", "--roster", "{roster}"], "add --assignment"),
        (["--format", "canvas", "--assignment", "X"], "add --roster"),
        (["--format", "canvas", "--roster", "{roster}", "--assignment", " "], "expected the assignment's name"),
        (["--feedback", "{homework}"], "is a file: give a folder for the feedback files"),
        (["--feedback", "fb", "--feedback-format", "pdf"], "unknown format 'pdf'"),
        (["--feedback-format", "html"], "--feedback-format is used only with --feedback"),
        (["--match", "ID"], "--match is used only with --roster"),
        (["--format", "gradescope", "{homework}"], "Gradescope's results are for one submission"),
        (["--format", "gradescope", "--roster", "{roster}"], "leave out --roster"),
        (["--jobs", "0"], "0 is not in the range"),
        (["--require", "al"], "'al' is not a step that can be answered; did you mean 'all'?"),
        (["--format", "grades", "-o", "{homework}"], "this run reads it"),
        (["{broken}", "--format", "markdown", "-o", "{homework}"], "this run reads it"),  # before any file's error
    ],
)
def test_the_new_options_refuse_bad_input_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], message: str
) -> None:
    monkeypatch.chdir(tmp_path)
    key = write(tmp_path, "key.yaml", BANK)
    homework = write(tmp_path, "h.yaml", "student: Ana\nanswers:\n  weights: [0.6652, 0.2447, 0.0900]\n")
    roster = write(tmp_path, "roster.csv", "Student,ID,SIS User ID,SIS Login ID,Section\nAna,1,S1,ana,A\n")
    broken = write(tmp_path, "b.yaml", "answers: [1\n")
    args = [word.format(roster=roster, homework=homework, broken=broken) for word in extra]
    before = sorted(path.name for path in tmp_path.iterdir())
    refused(run_code, ["check", "--key", key, homework, *args], message)
    assert sorted(path.name for path in tmp_path.iterdir()) == before  # nothing written


@pytest.mark.parametrize("value", ["[Ana]", "{name: Ana}", "true", '"' + "x" * 201 + '"', '"a\\u0007b"'])
def test_a_bad_student_field_is_one_line(tmp_path: Path, value: str) -> None:
    key = write(tmp_path, "key.yaml", BANK)
    homework = write(tmp_path, "h.yaml", f"student: {value}\nanswers:\n  weights: [0.6652, 0.2447, 0.0900]\n")
    stderr = refused(run_code, ["check", "--key", key, homework], "student")
    assert "h.yaml:1" in stderr


def test_every_core_writes_the_same_rows_in_the_order_given(tmp_path: Path, exercise: tuple[Path, dict, str]) -> None:
    """--jobs 2 against --jobs 1, rows written as they are graded (CSV, JSON lines, a line per file): the same
    bytes, one row per file in the order given, a right file and an untouched one taking turns."""
    folder, key, template = exercise
    right = filled(template, cells_of(key["answers"]), None)
    files = [write(tmp_path, f"s{n:02d}.yaml", right if n % 3 else template) for n in range(24)]
    files.reverse()  # not the order of their names
    for format in ("csv", "json", "text"):
        one = run("check", "--keys", str(folder), *files, "--format", format, "--jobs", "1")
        two = run("check", "--keys", str(folder), *files, "--format", format, "--jobs", "2")
        assert (two.exit_code, two.stdout) == (one.exit_code, one.stdout) == (1, one.stdout)
    rows = csv_rows(run("check", "--keys", str(folder), *files, "--format", "csv", "--jobs", "2"))
    assert [row["file"] for row in rows] == files
    assert [row["status"] for row in rows] == ["right" if int(Path(f).stem[1:]) % 3 else "incomplete" for f in files]


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("decimal_comma: 1", "decimal_comma: expected true or false, got the number 1"),
        ("decimal_comma: [true]", "decimal_comma: expected true or false"),
        ("points: 3", "points must be a mapping"),
        ("points: {carried: some}", "points.carried: expected full, half or none"),
        ("require: al", "did you mean 'all'?"),
    ],
)
def test_a_bad_key_setting_is_one_line(tmp_path: Path, setting: str, message: str) -> None:
    """A key's new settings, wrong: one line naming the key's line and the field, exit 2."""
    key = write(tmp_path, "key.yaml", BANK + setting + "\n")
    homework = write(tmp_path, "h.yaml", "answers:\n  weights: [0.6652, 0.2447, 0.0900]\n")
    stderr = refused(run_code, ["check", "--key", key, homework], message)
    assert "key.yaml:6" in stderr


def test_a_hand_made_class_list_with_ragged_rows_is_read_by_its_commas(tmp_path: Path) -> None:
    """A class list typed by hand, its rows of different lengths (trailing cells left off): before, no delimiter
    split the first rows evenly, so a semicolon won and the header was one column ("no column to match")."""
    key = write(tmp_path, "key.yaml", BANK)
    homework = write(tmp_path, "h.yaml", "student_id: bjones\nanswers:\n  weights: [0.6652, 0.2447, 0.0900]\n")
    roster = "Student,ID,SIS User ID,SIS Login ID,Section\nAna,1\nBen,2,S2,bjones,A\n,,,,\n"
    result = run("check", "--key", key, homework, "--roster", write(tmp_path, "r.csv", roster), "--format", "grades")
    assert result.exit_code == 0, result.stderr
    rows = csv_rows(result)
    assert [(row["student_id"], row["status"]) for row in rows] == [("", "no_file"), ("bjones", "right")]


def test_require_all_covers_the_gradients_of_a_backward_exercise(tmp_path: Path) -> None:
    """generate --backward: the key's `require: all` asks for the gradients too (their cells are counted): a file
    with every forward step right and no gradient is incomplete, each gradient missing, not right."""
    made = run("generate", "--backward", "--count", "1", "--seed", "5", "-o", str(tmp_path / "ex"))
    assert made.exit_code == 0, made.output
    key = yaml.safe_load((tmp_path / "ex" / "exercise-01-key.yaml").read_text(encoding="utf-8"))
    forward = {name: key["answers"][name] for name in ("dot", "scores", "weights", "output")}
    gradients = len(key["answers"]["backward"])
    template = (tmp_path / "ex" / "exercise-01-answers.yaml").read_text(encoding="utf-8")
    homework = write(tmp_path, "h.yaml", filled(template, cells_of(forward), None))
    result = run("check", "--keys", str(tmp_path / "ex"), homework, "--format", "csv")
    row = csv_rows(result)[0]
    assert (result.exit_code, row["status"], row["right"], row["missing"]) == (1, "incomplete", "4", str(gradients))
    assert int(row["cells_right"]) == 33 < int(row["cells"])


def test_require_all_covers_a_stacks_gradients_too(tmp_path: Path) -> None:
    """generate --backward --layers 2: an untouched template has every step missing, its gradients included (they
    were not_answered: a file with every forward step right and no gradient would have been right)."""
    made = run("generate", "--backward", "--layers", "2", "--count", "1", "--seed", "5", "-o", str(tmp_path / "ex"))
    assert made.exit_code == 0, made.output
    blank = str(tmp_path / "ex" / "exercise-01-answers.yaml")
    result = run("check", "--keys", str(tmp_path / "ex"), blank, "--format", "json")
    steps = json.loads(result.stdout)["steps"]
    assert result.exit_code == 1 and any(step["step"].startswith("backward.") for step in steps)
    optional = [step for step in steps if BY_NAME[step["step"]].aside]  # a norm's mean and root, e^s: not required
    assert {step["status"] for step in steps if step not in optional} == {"missing"}
    assert optional and {step["status"] for step in optional} == {"not_answered"}


def test_a_file_that_answers_one_layers_step_is_counted_over_that_layer_alone(tmp_path: Path) -> None:
    """Before, the steps a file answers were counted by name in every layer: a stack's file answering layer 1's
    stream (9 cells, all right) got 9 of 18 (50.00 %), layer 2's unanswered stream counted too. Likewise a key
    answering one head of two counts that head's cells only."""
    stack = (Path(__file__).parent.parent / "samples" / "layers.yaml").read_text(encoding="utf-8")
    answers = "answers:\n  layers:\n    - stream: [[2, 1, 0], [1, 2, 0], [1.4205, 0.5795, 1]]\n"
    homework = write(tmp_path, "stack.yaml", stack + answers)
    result = run("check", homework, "--format", "json")
    assert (result.exit_code, json.loads(result.stdout)["score"], json.loads(result.stdout)["max_score"]) == (0, 9, 9)
    heads = (Path(__file__).parent.parent / "samples" / "two_heads.yaml").read_text(encoding="utf-8")
    made = run("compute", write(tmp_path, "heads.yaml", heads), "--format", "json")
    weights = [[round(w, 4) for w in row] for row in json.loads(made.stdout)["heads"][0]["weights"]]
    key = write(tmp_path, "key.yaml", heads + f"answers:\n  heads:\n    - weights: {weights}\n")
    result = run("check", key, "--format", "json")
    assert json.loads(result.stdout)["max_score"] == len(weights) * len(weights[0]), result.stdout[:300]
