"""attncli check: marking, tolerance from the decimals written, carried errors, diagnoses, reports and exit codes.

Every file in tests/check_cases/ is homework with a real mistake made by hand (its
first lines say which); the tests name the step where it must be caught and why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from attncli import grading, pipeline
from attncli.cli import app
from attncli.parsing import answers
from tests.paths import SAMPLES

CASES = Path(__file__).parent / "check_cases"
ENV = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "COLUMNS": "100", "NO_COLOR": None, "FORCE_COLOR": None}
BANK = """\
tokens: [fisherman, net, bank]
query_tokens: [bank]
queries: {bank: [sqrt(2), 0]}
keys: [[2, 0], [1, 1], [0, 1]]
values: [[2, 0], [0, 2], [1, 1]]
"""
RIVER = (CASES / "mask_ignored.yaml").read_text(encoding="utf-8").split("answers:")[0]

# file -> the step where the mistake is, its diagnosis, and the steps that only carry it
DIAGNOSED = {
    "missing_scale.yaml": ("scores", ("missing_scale",), ("weights", "output")),
    "missing_scale_in_softmax.yaml": ("weights", ("missing_scale",), ()),
    "wrong_scale.yaml": ("scores", ("wrong_scale",), ("weights", "output")),
    "no_exp.yaml": ("weights", ("no_exp",), ("output",)),
    "unnormalized.yaml": ("weights", ("unnormalized",), ()),
    "wrong_axis.yaml": ("weights", ("wrong_axis",), ()),
    "mask_ignored.yaml": ("scores", ("mask_ignored",), ("weights",)),
    "mask_inverted.yaml": ("scores", ("mask_inverted",), ("weights",)),
    "keys_as_values.yaml": ("output", ("keys_as_values",), ()),
    "transposed.yaml": ("dot", ("transposed",), ()),
    "transposed_shape.yaml": ("keys", ("transposed",), ()),
    "rounded_early.yaml": ("weights", ("rounded_early",), ()),
    "rounded_early_carried.yaml": ("output", ("rounded_early",), ()),
    "carried.yaml": ("dot", (), ("scores", "weights", "output")),
}


def run(*args: str) -> Result:
    return CliRunner().invoke(app, ["check", *args], env=ENV)


def grade_text(text: str, tolerance: float | None = None) -> grading.Report:
    from attncli import yamldoc

    return pipeline.grade(yamldoc.load(text, "homework.yaml"), tolerance=tolerance)


def grade_file(path: Path) -> grading.Report:
    return grade_text(path.read_text(encoding="utf-8"))


def statuses(report: grading.Report) -> dict[str, str]:
    return {step.step: step.status for step in report.steps}


# Diagnoses, each from a real mistake


def test_the_cases_name_only_known_codes() -> None:
    covered = {code for _, codes, _ in DIAGNOSED.values() for code in codes}
    assert covered <= set(grading.CODES)


@pytest.mark.parametrize("name", sorted(DIAGNOSED))
def test_case_is_caught_where_the_mistake_is(name: str) -> None:
    step, codes, carried = DIAGNOSED[name]
    report = grade_file(CASES / name)
    first = report.first_mistake
    assert not report.ok
    assert first is not None and first.step == step
    assert first.diagnosis == codes
    assert [s.step for s in report.steps if s.status == grading.CARRIED] == list(carried)
    assert [s.step for s in report.steps if s.status == grading.WRONG] == [step]


def test_right_homework_has_no_diagnosis() -> None:
    report = grade_file(CASES / "bank_right.yaml")
    assert report.ok and report.first_mistake is None
    assert all(step.correct == step.total for step in report.steps)


def test_summary_names_the_counts_and_the_mistake() -> None:
    from attncli.render import grading as check_report

    report = grade_file(CASES / "missing_scale_in_softmax.yaml")
    assert check_report.summary(report) == "scores: 3/3, weights: 0/3 — weights: forgot to scale by 1/√d_k"


# Error carried forward


def test_carried_cells_compare_with_the_students_own_numbers() -> None:
    report = grade_file(CASES / "carried.yaml")
    dot, scores, weights, output = report.steps
    assert [cell.status for cell in dot.cells] == ["wrong", "right", "right"]
    assert [cell.status for cell in scores.cells] == ["carried", "right", "right"]
    assert {cell.status for cell in weights.cells} == {"carried"}
    assert output.correct == 0 and output.total == 2


def test_a_wrong_step_after_a_carried_one_is_still_wrong() -> None:
    text = BANK + "answers:\n  scores: [2.8284, 1.4142, 0]\n  weights: [0.5000, 0.3000, 0.2000]\n"
    report = grade_text(text)
    assert statuses(report) == {"scores": "wrong", "weights": "wrong"}
    assert report.steps[1].diagnosis == ()


# Tolerance from the decimals written


@pytest.mark.parametrize(
    ("weights", "right"),
    [
        ("[0.7, 0.2, 0.1]", [True, True, True]),  # 1 decimal: within 0.05 (plus about 1e-4 carried in)
        ("[0.5, 0.4, 0.2]", [False, False, False]),
        ("[0.6, 0.2, 0.1]", [False, True, True]),  # 0.6 is 0.065 away
        ("[0.67, 0.24, 0.09]", [True, True, True]),  # 2 decimals: within 0.005
        ("[0.66, 0.25, 0.09]", [False, False, True]),  # 0.66 is 0.0052 away, 0.25 is 0.0053
        ("[0.6652, 0.2447, 0.0900]", [True, True, True]),  # 4 decimals: within 0.00005 plus what is carried in
        ("[0.6650, 0.2449, 0.0902]", [False, False, False]),  # 0.0002 away: more than 0.00005 + 0.00012
        ("[0.6653, 0.2447, 0.0901]", [True, True, True]),  # 0.00007 away: within 0.00005 + what is carried in
        ("[0.6652, 0.2447, 0.09]", [True, True, True]),
        ("[0.6652, 0.2447, 0.10]", [True, True, False]),  # two decimals written: 0.10 is 0.01 away
        ("['e^2/(e^2+e+1)', 'e/(e^2+e+1)', '1/(e^2+e+1)']", [True, True, True]),  # expressions: exact
        ("['2/3', 'e/(e^2+e+1)', 0]", [False, True, False]),
    ],
)
def test_tolerance_follows_the_decimals_written(weights: str, right: list[bool]) -> None:
    report = grade_text(BANK + f"answers:\n  weights: {weights}\n")
    assert [cell.status == grading.RIGHT for cell in report.steps[0].cells] == right


def test_whole_numbers_are_exact() -> None:
    assert grade_text(BANK + "answers:\n  scores: [2, 1, 0]\n").ok
    assert not grade_text(BANK + "answers:\n  scores: [2, 1, 1]\n").ok
    assert grade_text(BANK + "answers:\n  scores: [2.0, 1.0, 0.0]\n").ok


def test_tolerance_in_the_file_and_on_the_command_line() -> None:
    loose = BANK + "tolerance: 0.01\nanswers:\n  weights: [0.6600, 0.2500, 0.0900]\n"
    assert grade_text(loose).ok
    assert not grade_text(loose, tolerance=0.001).ok
    assert grade_text(BANK + "answers:\n  weights: [0.6, 0.3, 0.1]\n", tolerance=0.1).ok


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.0900", 4), ("0.09", 2), ("−0.5", 1), ("1.5e-3", 4), ("2", None), ("2.0", 1), ("1e3", None), ("sqrt(2)", None)],
)
def test_decimals(text: str, expected: int | None) -> None:
    assert answers.decimals(text) == expected


# Masked cells


@pytest.mark.parametrize("mark", ["-inf", "-.inf", "masked", "'-∞'", "null", "~"])
def test_masked_cells_may_be_marked_in_any_way(mark: str) -> None:
    scores = f"[[1, {mark}, {mark}], [0, 1, {mark}], [1, 2, 2]]"
    weights = f"[[1, {mark}, 0], [0.2689, 0.7311, {mark}], [0.1554, 0.4223, 0.4223]]"
    assert grade_text(RIVER + f"answers:\n  scores: {scores}\n  weights: {weights}\n").ok


def test_masked_cells_may_be_left_out() -> None:
    text = RIVER + "answers:\n  scores:\n    the: [1]\n    river: [0, 1]\n    flooded: {flooded: 2}\n"
    report = grade_text(text)
    assert report.ok and report.steps[0].total == 4


def test_marking_an_allowed_key_masked_is_wrong() -> None:
    report = grade_text(RIVER + "answers:\n  scores:\n    river: [masked, 1, masked]\n")
    assert [cell.status for cell in report.steps[0].cells if cell.entry] == ["wrong", "right", "right"]


# Several heads


def test_answers_per_head_and_after_the_heads() -> None:
    """Head 2's weights copied from head 1; the concatenation and W_O then done right from them."""
    text = (SAMPLES / "two_heads.yaml").read_text(encoding="utf-8") + (
        "answers:\n"
        "  heads:\n"
        "    - weights: [0.6652, 0.2447, 0.0900]\n"
        "    - weights: [0.6652, 0.2447, 0.0900]\n"
        "  concat: [1.4205, 0.5795, 1.4205, 0.5795]\n"
        "  final: [2.1308, 0.8692]\n"
    )
    report = grade_text(text)
    assert [(s.step, s.head, s.head_name, s.status) for s in report.steps] == [
        ("weights", 0, "head 1", "right"),
        ("weights", 1, "head 2", "wrong"),
        ("concat", None, None, "carried"),
        ("final", None, None, "carried"),
    ]


def test_top_level_answers_need_a_single_head(tmp_path: Path) -> None:
    homework = tmp_path / "two.yaml"
    homework.write_text((SAMPLES / "two_heads.yaml").read_text(encoding="utf-8") + "answers:\n  weights: [1, 0, 0]\n")
    result = run(str(homework))
    assert result.exit_code == 2 and "put each head's answers in the list answers.heads" in result.stderr


# The command line: exit codes and reports


@pytest.mark.parametrize(("name", "code"), [("bank_right.yaml", 0), ("no_exp.yaml", 1), ("decimal_comma.yaml", 2)])
def test_exit_codes(name: str, code: int) -> None:
    result = run(str(CASES / name))
    assert result.exit_code == code, result.output


def test_bad_input_is_one_line_on_stderr() -> None:
    result = run(str(CASES / "decimal_comma.yaml"))
    assert result.stdout == ""
    assert result.stderr == (
        f"attncli: {CASES / 'decimal_comma.yaml'}:15: answers.weights, row 1 (bank): "
        "'0,0900': decimal comma? write 0.0900\n"
    )


@pytest.mark.parametrize(
    ("answers_text", "message"),
    [
        ("answers:\n  weigths: [1, 0, 0]\n", "unknown field 'weigths'; did you mean 'weights'?"),
        ("title: no answers\n", "no answers to check"),
        ("answers:\n  concat: [1, 2]\n", "there is no concatenation"),
        ("answers:\n  weights: {river: [1, 0, 0]}\n", "'river' is not one of the names here (bank)"),
        ("answers:\n  output: [1, masked]\n", "but output has none"),
        ("tolerance: -1\nanswers:\n  scores: [2, 1, 0]\n", "tolerance: expected a finite number, 0 or more"),
    ],
)
def test_broken_answers_exit_2(tmp_path: Path, answers_text: str, message: str) -> None:
    homework = tmp_path / "homework.yaml"
    homework.write_text(BANK + answers_text, encoding="utf-8")
    result = run(str(homework))
    assert result.exit_code == 2
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_an_answer_too_large_for_a_float_is_quoted_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As in the problem's fields: the message repeats the start of the number, not its 309 digits."""
    monkeypatch.chdir(tmp_path)
    Path("homework.yaml").write_text(BANK + f"answers:\n  scores: [{'9' * 309}, 1, 0]\n", encoding="utf-8")
    result = run("homework.yaml")
    assert result.exit_code == 2
    assert "'9999999999999999999999999999999999999...' is too large" in result.stderr
    assert "9" * 50 not in result.stderr


def test_several_files_one_line_each_and_a_total() -> None:
    files = [str(CASES / name) for name in ("bank_right.yaml", "no_exp.yaml", "decimal_comma.yaml")]
    result = run(*files, "--format", "text")
    assert result.exit_code == 2  # a broken file outranks a wrong answer
    lines = result.stdout.splitlines()
    assert lines[0].startswith(f"{files[0]}: ") and lines[0].endswith("— all right")
    assert lines[1].endswith("— weights: normalised without e^s")
    assert lines[2] == f"{files[2]}: not graded (bad input: see the error above)"
    assert lines[3] == (
        "Total: 3 files, 1 all right, 0 wrong only by rounding, 1 with mistakes, 0 incomplete, 0 with a changed"
        " problem, 1 not graded; 14/19 cells right"
    )
    assert run(*files[:2]).exit_code == 1


def test_human_report_marks_cells_and_the_first_mistake() -> None:
    result = run(str(CASES / "no_exp.yaml"), "--format", "text")
    out = result.stdout
    assert "weights: 0/3 right   ◀ first mistake" in out
    assert "0.6667 ✗ (0.6652)" in out and "2 ✓" in out and "1.3333 ↷ (1.4205)" in out
    assert "Softmax first raises e to each score" in out
    assert out.rstrip().endswith("scores: 3/3, weights: 0/3, output: 0/2 (carried) — weights: normalised without e^s")


def test_human_report_in_spanish() -> None:
    result = run(str(CASES / "no_exp.yaml"), "--format", "text", "--lang", "es")
    assert "primer error" in result.stdout and "Softmax eleva primero e" in result.stdout


def test_json_report_one_object_per_file() -> None:
    files = [str(CASES / name) for name in ("no_exp.yaml", "bank_right.yaml", "decimal_comma.yaml")]
    result = run(*files, "--format", "json")
    documents = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["file"] for d in documents] == files
    assert [d["ok"] for d in documents] == [False, True, False]
    assert [d["status"] for d in documents] == ["wrong", "right", "not_graded"]
    weights = documents[0]["steps"][1]
    assert {key: weights[key] for key in ("step", "head", "correct", "total", "diagnosis")} == {
        "step": "weights",
        "head": 0,
        "correct": 0,
        "total": 3,
        "diagnosis": ["no_exp"],
    }
    assert weights["cells"][0] == {
        "row": 0,
        "column": 0,
        "row_name": "bank",
        "column_name": "fisherman",
        "given": "0.6667",
        "expected": pytest.approx(0.6652409557748219, abs=1e-15),
        "masked": False,
        "status": "wrong",
        "own": 0.00005,
        "carried_in": weights["cells"][0]["carried_in"],
    }
    assert documents[2]["steps"] == [] and "decimal comma? write 0.0900" in documents[2]["error"]


def test_json_masked_score_is_null(tmp_path: Path) -> None:
    homework = tmp_path / "river.yaml"
    homework.write_text(RIVER + "answers:\n  scores: {the: [1, -inf, masked]}\n", encoding="utf-8")
    cells = json.loads(run(str(homework), "--format", "json").stdout)["steps"][0]["cells"]
    assert [(cell["given"], cell["expected"], cell["masked"], cell["status"]) for cell in cells if cell["given"]] == [
        ("1", pytest.approx(1.0), False, "right"),
        ("-inf", None, True, "right"),
        ("masked", None, True, "right"),
    ]


def test_stdin() -> None:
    text = BANK + "answers:\n  scores: [2, 1, 0]\n"
    result = CliRunner().invoke(app, ["check", "-", "--format", "json"], input=text, env=ENV)
    assert result.exit_code == 0 and json.loads(result.stdout)["file"] == "-"


def test_documents_keep_the_text_of_every_number() -> None:
    from attncli import yamldoc

    document = yamldoc.load((CASES / "mask_inverted.yaml").read_text(encoding="utf-8"), "x")
    assert document.texts[("answers", "weights", "flooded", 2)] == "1"
    assert document.texts[("answers", "scores", "river", 0)] == "-inf"
    assert set(document.texts) <= set(document.lines)
