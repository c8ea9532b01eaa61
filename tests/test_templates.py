"""attncli template, and the answers students naturally write: every form fits the same cells, a wrong shape is graded.

Expected numbers come from tests/reference.py (plain Python), never from attncli's core.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner, Result

from attncli import core, grading, pipeline, yamldoc
from attncli.cli import app
from attncli.parsing import answers
from tests import reference
from tests.paths import SAMPLES

ENV = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "COLUMNS": "100", "NO_COLOR": None, "FORCE_COLOR": None}
BANK = (SAMPLES / "bank.yaml").read_text(encoding="utf-8")
TWO_HEADS = (SAMPLES / "two_heads.yaml").read_text(encoding="utf-8")
SQRT2 = math.sqrt(2)
BANK_HEAD = reference.head([[SQRT2, 0]], [[2, 0], [1, 1], [0, 1]], [[2, 0], [0, 2], [1, 1]])


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=ENV, input=input)


def parsed(text: str, name: str = "homework.yaml") -> tuple[core.Steps, answers.Answers]:
    document = yamldoc.load(text, name)
    steps = pipeline.solve(pipeline.load(document))
    return steps, answers.parse(document, steps)


def values(answer: answers.Answer) -> list[list[float | None]]:
    return [[None if cell is None else cell.value for cell in row] for row in answer.cells]


def fill(template: str, rows: dict[str, list[list[float]]]) -> str:
    """The template with each step's `?` replaced, row after row, by the numbers in `rows` (4 decimals)."""
    data = yaml.safe_load(template)["answers"]
    for step, matrix in rows.items():
        data[step] = {name: [f"{v:.4f}" for v in row] for name, row in zip(data[step], matrix)}
    return yaml.safe_dump({"answers": data})


# The template


def test_template_has_every_step_in_its_shape_with_a_question_mark_in_every_cell() -> None:
    result = run("template", str(SAMPLES / "bank.yaml"))
    assert result.exit_code == 0, result.output
    section = yaml.safe_load(result.stdout)["answers"]
    assert list(section) == ["dot", "scores", "exp", "sums", "weights", "output"]
    for step in ("dot", "scores", "exp", "weights"):
        assert section[step] == {"bank": ["?", "?", "?"]}  # one query, three keys
    assert section["sums"] == {"bank": ["?"]}  # one Σ e^s per query
    assert section["output"] == {"bank": ["?", "?"]}  # d_v = 2
    assert "# Rows are queries" in result.stdout and "a column per key: fisherman, net, bank" in result.stdout


def test_template_of_two_heads_lists_each_head_and_leaves_out_what_is_given() -> None:
    section = yaml.safe_load(run("template", str(SAMPLES / "two_heads.yaml")).stdout)["answers"]
    first, second = section["heads"]
    assert list(first) == ["dot", "scores", "exp", "sums", "weights", "output"]
    assert list(second) == ["exp", "sums", "weights", "output"]  # head 2's scores are given
    assert section["concat"] == {"bank": ["?"] * 4} and section["final"] == {"bank": ["?"] * 2}


def test_template_with_projections_asks_for_queries_keys_and_values() -> None:
    section = yaml.safe_load(run("template", str(SAMPLES / "projections.yaml")).stdout)["answers"]
    assert list(section)[:3] == ["queries", "keys", "values"]
    assert section["keys"] == {name: ["?", "?"] for name in ("fisherman", "net", "bank")}  # d_k = 2
    assert section["values"]["bank"] == ["?"] * 3  # d_v = 3


def test_template_in_spanish_and_to_a_file(tmp_path: Path) -> None:
    target = tmp_path / "answers.yaml"
    result = run("template", str(SAMPLES / "bank.yaml"), "--lang", "es", "-o", str(target))
    assert result.exit_code == 0 and result.stdout == ""
    assert "Las filas son las consultas" in target.read_text(encoding="utf-8")


def test_a_blank_template_is_not_answered_never_wrong() -> None:
    template = run("template", str(SAMPLES / "bank.yaml")).stdout
    steps, given = parsed(BANK + template)
    report = grading.grade(steps, given)
    assert [step.status for step in report.steps] == ["not_answered"] * 6
    assert all(step.total == 0 for step in report.steps)


def test_a_filled_template_is_graded_cell_by_cell(tmp_path: Path) -> None:
    template = run("template", str(SAMPLES / "bank.yaml")).stdout
    right = fill(template, {"weights": BANK_HEAD.weights, "output": BANK_HEAD.output})
    homework = tmp_path / "homework.yaml"
    homework.write_text(BANK + right, encoding="utf-8")
    result = run("check", str(homework), "--format", "json")
    assert result.exit_code == 0, result.output
    wrong = fill(template, {"weights": [[0.8, 0.1, 0.1]]})
    homework.write_text(BANK + wrong, encoding="utf-8")
    assert run("check", str(homework)).exit_code == 1


# What students naturally write


@pytest.mark.parametrize(
    "weights",
    [
        "[0.6652, 0.2447, 0.0900]",  # one query's row, flat
        "[[0.6652, 0.2447, 0.0900]]",
        "[[0.6652], [0.2447], [0.0900]]",  # ... or as a column
        "{bank: [0.6652, 0.2447, 0.0900]}",
        "{fisherman: 0.6652, net: 0.2447, bank: 0.0900}",  # one query: key token -> number
        "{bank: {fisherman: 0.6652, net: 0.2447, bank: 0.0900}}",
    ],
)
def test_one_querys_row_in_every_natural_form(weights: str) -> None:
    _, given = parsed(BANK + f"answers:\n  weights: {weights}\n")
    (answer,) = given.steps
    assert values(answer) == [[0.6652, 0.2447, 0.09]] and not answer.transposed and answer.written is None
    assert [cell.decimals for cell in answer.cells[0]] == [4, 4, 4]  # 0.0900 keeps its four decimals


def test_key_token_mapping_may_leave_keys_out() -> None:
    _, given = parsed(BANK + "answers:\n  weights: {bank: 0.09, fisherman: 0.6652}\n")
    assert values(given.steps[0]) == [[0.6652, None, 0.09]]  # bank is a key here: its value is a number


@pytest.mark.parametrize("blank", ['"?"', "'?'", '" ? "', '""'])
def test_question_marks_and_empty_cells_are_not_answered(blank: str) -> None:
    _, given = parsed(BANK + f"answers:\n  weights: [0.6652, {blank}, 0.0900]\n")
    assert values(given.steps[0]) == [[0.6652, None, 0.09]]


def test_decimal_comma_is_a_hint_in_english_and_read_in_spanish(tmp_path: Path) -> None:
    homework = tmp_path / "homework.yaml"
    homework.write_text(BANK + 'answers:\n  weights: ["0,6652", "0,2447", "0,0900"]\n', encoding="utf-8")
    english = run("check", str(homework))
    assert english.exit_code == 2
    line = BANK.count("\n") + 2
    assert english.stderr == (
        f"attncli: {homework}:{line}: answers.weights, row 1 (bank): '0,6652': decimal comma? write 0.6652\n"
    )
    spanish = run("check", str(homework), "--lang", "es", "--format", "json")
    assert spanish.exit_code == 0, spanish.output


@pytest.mark.parametrize(
    ("weights", "language", "said"),
    [
        ("[0,6652, 0,2447, 0,0900]", "en", "read as 6 whole numbers: decimal comma? write [0.6652, 0.2447, 0.0900]"),
        ("{bank: [0,6652, 0,2447, 0,0900]}", "en", "decimal comma? write [0.6652, 0.2447, 0.0900]"),
        ("[[0,6652, 0,2447, 0,0900]]", "es", "se lee como 6 números enteros: ¿coma decimal? escribe [0.6652, 0.2447"),
    ],
)
def test_unquoted_decimal_commas_get_the_hint_in_both_languages(
    tmp_path: Path, weights: str, language: str, said: str
) -> None:
    """`[0,6652, 0,2447]` is four whole numbers to YAML: too large to be weights, and two decimals read in pairs."""
    homework = tmp_path / "homework.yaml"
    homework.write_text(BANK + f"answers:\n  weights: {weights}\n", encoding="utf-8")
    result = run("check", str(homework), "--lang", language)
    assert result.exit_code == 2
    assert f"{homework}:{BANK.count(chr(10)) + 2}: answers.weights" in result.stderr and said in result.stderr
    assert result.stderr.count("\n") == 1


@pytest.mark.parametrize("weights", ["[1,5, 0,2]", "[0, 1, 0, 1, 0, 1]"])
def test_whole_numbers_that_could_be_meant_are_a_wrong_shape_not_a_decimal_comma(weights: str) -> None:
    """Too few or too small to be anything but whole numbers as written: kept as written, for the grader."""
    _, given = parsed(BANK + f"answers:\n  weights: {weights}\n")
    (answer,) = given.steps
    assert answer.written is not None
    assert [cell.value for cell in answer.written[0]] == [float(x) for x in weights.strip("[]").split(",")]


@pytest.mark.parametrize("weights", ["[0.6652 0.2447 0.0900]", "'0.6652 0.2447 0.0900'", "[[0.6652 0.2447 0.0900]]"])
def test_numbers_separated_by_spaces(tmp_path: Path, weights: str) -> None:
    homework = tmp_path / "homework.yaml"
    homework.write_text(BANK + f"answers:\n  weights: {weights}\n", encoding="utf-8")
    result = run("check", str(homework))
    assert result.exit_code == 2
    assert result.stderr.endswith("'0.6652 0.2447 0.0900': numbers separated by spaces: use commas\n")
    assert result.stderr.count("\n") == 1


# A wrong shape is a wrong step, and every other step is still graded


def test_final_as_wide_as_the_concatenation_is_wrong_and_the_rest_is_graded(tmp_path: Path) -> None:
    """Forgot W_O: the final output copies the concatenation's four numbers."""
    first = BANK_HEAD.output[0]
    second = reference.head(None, None, [[2, 0], [0, 2], [1, 1]], scores=[[1, 2, 0]]).output[0]
    concat = [*first, *second]
    text = TWO_HEADS + (
        "answers:\n"
        f"  concat: [{', '.join(f'{v:.4f}' for v in concat)}]\n"
        f"  final: [{', '.join(f'{v:.4f}' for v in concat)}]\n"
    )
    steps, given = parsed(text)
    final = given.steps[1]
    assert final.written is not None and len(final.written[0]) == 4
    assert all(cell is None for row in final.cells for cell in row)
    report = grading.grade(steps, given)
    assert [(step.step, step.status) for step in report.steps] == [("concat", "right"), ("final", "wrong")]
    homework = tmp_path / "homework.yaml"
    homework.write_text(text, encoding="utf-8")
    assert run("check", str(homework)).exit_code == 1


def test_a_non_square_matrix_written_transposed_fits_transposed() -> None:
    text = (SAMPLES / "projections.yaml").read_text(encoding="utf-8")
    x, w_k = [[1, 0, 1], [0, 1, 1], [1, 1, 0]], [[1, 1], [0, 1], [1, 0]]
    keys = reference.matmul(x, w_k)  # 3 tokens × d_k 2, written as 2 × 3
    columns = [[row[c] for row in keys] for c in range(2)]
    _, given = parsed(text + f"answers:\n  keys: {columns}\n")
    (answer,) = given.steps
    assert answer.transposed and values(answer) == keys


def test_rows_of_the_wrong_width_are_kept_as_written() -> None:
    _, given = parsed(BANK + "answers:\n  scores: [2, 1, 0]\n  weights: {bank: [0.6652, 0.2447]}\n")
    scores, weights = given.steps
    assert weights.written is not None and [c.text for c in weights.written[0]] == ["0.6652", "0.2447"]
    assert values(scores) == [[2, 1, 0]]


def test_grading_settings_of_the_file() -> None:
    text = BANK + "carry: 3\nmin_decimals: 2\nrequire: [dot, weights]\nanswers:\n  weights: [1, 0, 0]\n"
    _, given = parsed(text)
    assert (given.carry, given.min_decimals, given.require) == (3, 2, ("dot", "weights"))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ("require: dot, wieghts\n", "require: 'wieghts' is not a step that can be answered; did you mean 'weights'?"),
        ("carry: 2.5\n", "carry: expected a whole number of decimals from 0 to 17"),
        ("min_decimals: -1\n", "min_decimals: expected a whole number of decimals from 0 to 17"),
    ],
)
def test_bad_grading_settings_exit_2(tmp_path: Path, settings: str, message: str) -> None:
    homework = tmp_path / "homework.yaml"
    homework.write_text(BANK + settings + "answers:\n  weights: [1, 0, 0]\n", encoding="utf-8")
    result = run("check", str(homework))
    assert result.exit_code == 2 and message in result.stderr, result.stderr
