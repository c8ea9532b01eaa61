"""Points and partial credit (attncli.gradebook.points): a key's points:, the cells it counts, and scores worked out
by hand for reports that the grader makes from real answers files.

Every score here is computed by hand in the test, as fractions, from the cell verdicts the comment beside it
states; the verdicts themselves are asserted from the grader's report first, so a test fails both when the
grader stops seeing a cell that way and when the arithmetic of points changes.
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from attncli import grading, pipeline, yamldoc
from attncli.errors import AttnError
from attncli.gradebook import points
from attncli.i18n import LANGUAGE, describe
from attncli.steps import BY_NAME
from tests.paths import SAMPLES

BANK = """\
tokens: [fisherman, net, bank]
query_tokens: [bank]
queries:
  bank: [sqrt(2), 0]
keys:
  fisherman: [2, 0]
  net: [1, 1]
  bank: [0, 1]
values:
  fisherman: [2, 0]
  net: [0, 2]
  bank: [1, 1]
"""
# The module docstring's worked example: √2 × 2 slipped as 2.4142 (dot), the scores carried from it, e^s of those
# scores rounded to one decimal (5.5, 2.7, 1.0: rounded_early), the output carried from those weights.
WORKED = """\
answers:
  dot: [2.4142, 1.4142, 0]
  scores: [1.7071, 1, 0]
  weights: [0.5978, 0.2935, 0.1087]
  output: [1.3043, 0.6957]
"""
WORKED_POINTS = "points: {steps: {dot: 3, scores: 1, weights: 1, output: 2}, carried: half, rounded: half}\n"
F = Fraction


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def graded(tmp_path: Path, answers: str, key_text: str = BANK) -> tuple[grading.Report, points.KeyCells]:
    """The report on `answers` against the key `key_text`, as `check --key` grades it, and the key's cells."""
    key = write(tmp_path, "key.yaml", key_text)
    report = pipeline.grade(key, write(tmp_path, "answers.yaml", answers))
    return report, points.key_cells(pipeline.solve(pipeline.load(key)))


def spec(text: str, key: points.KeyCells | None = None) -> points.PointsSpec:
    return points.read_points(yamldoc.load(text, "key.yaml"), key)


def verdicts(report: grading.Report) -> dict[str, list[str]]:
    return {step.step: [cell.status for cell in step.cells] for step in report.steps}


# The worked example of the docstring (and of the README)


def test_the_worked_example_scores_thirteen_thirds_of_seven(tmp_path: Path) -> None:
    report, key = graded(tmp_path, WORKED)
    assert verdicts(report) == {
        "dot": ["wrong", "right", "right"],
        "scores": ["carried", "right", "right"],
        "weights": ["wrong", "wrong", "wrong"],
        "output": ["carried", "carried"],
    }
    assert [step.diagnosis for step in report.steps] == [(), (), ("rounded_early",), ()]
    found = points.score(report, spec(WORKED_POINTS, key), key)
    by_step = {step.key.step: step.score for step in found.steps}
    assert by_step == {
        "dot": 0 + 1 + 1,  # 3 points over 3 cells
        "scores": F(1, 3) / 2 + F(1, 3) + F(1, 3),  # carried half
        "weights": 3 * (F(1, 3) / 2),  # every cell only rounded: half
        "output": F(1, 2) + F(1, 2),  # 2 points over 2 cells, both carried: half
    }
    assert (found.score, found.max_score, found.percent) == (F(13, 3), F(7), Decimal("61.90"))
    assert [(s.right, s.carried, s.rounded, s.cells) for s in found.steps] == [
        (2, 0, 0, 3), (2, 1, 0, 3), (0, 0, 3, 3), (0, 2, 0, 2),
    ]  # fmt: skip


def test_the_docstring_states_the_worked_example() -> None:
    text = points.__doc__ or ""
    assert "13/3 (4.333…) of 7" in text and "61.90" in text
    for line in ("2.4142 ✗  1.4142 ✓  0 ✓", "1.7071 ↷  1 ✓       0 ✓", "0.5978    0.2935    0.1087"):
        assert line in text


def test_three_thirds_make_exactly_one(tmp_path: Path) -> None:
    """scores worth 1 point over 3 cells, all right: exactly 1 (floats would give 0.9999999999999999 for 0.1·10)."""
    report, key = graded(tmp_path, "answers:\n  scores: [2, 1, 0]\n")
    found = points.score(report, spec("points: {steps: {scores: 1}}", key), key)
    assert found.score == found.max_score == 1 and found.percent == Decimal("100.00")
    assert sum([F(1, 10)] * 10) == 1 and sum([0.1] * 10) != 1  # why fractions


@pytest.mark.parametrize(("credit", "scores"), [("full", F(1)), ("half", F(5, 6)), ("none", F(2, 3))])
def test_carried_credit(tmp_path: Path, credit: str, scores: Fraction) -> None:
    report, key = graded(tmp_path, WORKED)
    found = points.score(report, spec(f"points: {{steps: {{scores: 1}}, carried: {credit}}}", key), key)
    assert found.score == scores  # 1/3 + 1/3 + credit · 1/3
    assert found.max_score == 1


@pytest.mark.parametrize(("credit", "weights"), [("full", F(1)), ("half", F(1, 2)), ("none", F(0))])
def test_rounded_credit(tmp_path: Path, credit: str, weights: Fraction) -> None:
    report, key = graded(tmp_path, WORKED)
    found = points.score(report, spec(f"points: {{steps: {{weights: 1}}, rounded: {credit}}}", key), key)
    assert found.score == weights  # 3 · credit · 1/3


def test_one_point_a_cell_by_default(tmp_path: Path) -> None:
    """No points:: a point per key cell (3 + 3 + 3 + 2), carried full, rounded none."""
    report, key = graded(tmp_path, WORKED)
    found = points.score(report, points.PointsSpec(), key)
    assert found.max_score == 11
    assert found.score == 2 + 3 + 0 + 2  # dot 2 right; scores 2 right + 1 carried; weights rounded: 0; output carried
    assert found.percent == Decimal("63.64")  # 700/11 = 63.636…


def test_cells_are_counted_over_the_key_not_over_what_was_answered(tmp_path: Path) -> None:
    """The issue's quarter of full marks: only weights filled, all right, is 3 of 11 points, not 3/3."""
    report, key = graded(tmp_path, "answers:\n  weights: [0.6652, 0.2447, 0.0900]\n")
    assert report.ok  # the grader alone calls it all right
    found = points.score(report, points.PointsSpec(), key)
    assert (found.score, found.max_score, found.percent) == (3, 11, Decimal("27.27"))
    assert [step.answered is None for step in found.steps] == [True, True, False, True]


def test_an_untouched_template_is_zero_of_the_key(tmp_path: Path) -> None:
    report, key = graded(tmp_path, "answers:\n  weights: ['?', '?', '?']\n")
    found = points.score(report, points.PointsSpec(), key)
    assert (found.score, found.max_score, found.percent) == (0, 11, Decimal("0.00"))


def test_a_required_step_not_answered_earns_nothing(tmp_path: Path) -> None:
    report, key = graded(tmp_path, "answers:\n  weights: [0.6652, 0.2447, 0.0900]\n", BANK + "require: [output]\n")
    assert [(step.step, step.status) for step in report.steps] == [("weights", "right"), ("output", "missing")]
    found = points.score(report, spec("points: {steps: {weights: 1, output: 1}}", key), key)
    assert (found.score, found.max_score) == (1, 2)
    assert found.steps[-1].answered is not None and found.steps[-1].answered.status == "missing"


def test_too_few_decimals_right_to_its_own_decimals_is_only_rounding(tmp_path: Path) -> None:
    """With min_decimals: 4, 0.67 (0.665241 ± 0.005) is too_few_decimals but right as written: rounding; 0.30
    (0.244728: 0.055 away) is too_few_decimals and wrong; 0.0900 is right."""
    key_text = BANK + "min_decimals: 4\n"
    report, key = graded(tmp_path, "answers:\n  weights: [0.67, 0.30, 0.0900]\n", key_text)
    weights = report.steps[0]
    assert [cell.status for cell in weights.cells] == ["too_few_decimals", "too_few_decimals", "right"]
    assert "rounded_early" not in weights.diagnosis
    assert [points.only_rounding(cell, weights) for cell in weights.cells] == [True, False, False]
    found = points.score(report, spec("points: {steps: {weights: 3}, rounded: half}", key), key)
    assert found.score == F(1, 2) + 0 + 1  # a cell 3/3 = 1: half, nothing, all
    weighed = next(step for step in found.steps if step.key.step == "weights")
    assert (weighed.rounded, weighed.right) == (1, 1)


def test_rounded_early_on_right_but_coarse_inputs_is_only_rounding(tmp_path: Path) -> None:
    """Weights rounded to two decimals (right as written), then the output from them: the output's cells follow
    from the student's own numbers (↷) but those were rounded: rounded_early, a rounding slip, not a carried one."""
    report, key = graded(tmp_path, "answers:\n  weights: [0.67, 0.24, 0.09]\n  output: [1.4300, 0.5700]\n")
    output = report.steps[-1]
    assert (output.status, output.diagnosis) == ("wrong", ("rounded_early",))
    assert [cell.status for cell in output.cells] == ["carried", "carried"]
    found = points.score(report, spec("points: {steps: {output: 2}, carried: full, rounded: none}", key), key)
    assert found.score == 0 and found.steps[-1].rounded == 2 and found.steps[-1].carried == 0


def test_a_real_mistake_is_not_rounding(tmp_path: Path) -> None:
    report, key = graded(tmp_path, "answers:\n  scores: [2.8284, 1.4142, 0]\n")  # missing_scale
    scores = report.steps[0]
    assert scores.diagnosis == ("missing_scale",)
    assert not any(points.only_rounding(cell, scores) for cell in scores.cells)
    found = points.score(report, spec("points: {steps: {scores: 3}, rounded: full, carried: full}", key), key)
    assert found.score == 1  # only the 0 is right


def test_the_allowance_read_from_a_cell_agrees_with_every_verdict_of_the_grader() -> None:
    """within_allowance reads the rule from what a cell records (own + carried_in): on every answered cell of
    the hand-made homework in tests/check_cases, it holds exactly for the cells
    the grader marked right against the true value (a step written transposed is all wrong whatever its numbers)."""
    cases = sorted((Path(__file__).parent / "check_cases").glob("*.yaml"))
    judged = 0
    for case in cases:
        try:
            report = pipeline.grade(case)
        except AttnError:
            continue  # a case of input the grader refuses
        for step in report.steps:
            for cell in step.cells if "transposed" not in step.diagnosis else ():
                if cell.entry is None or cell.entry.value is None or cell.status == grading.TOO_FEW_DECIMALS:
                    continue  # not answered, a masked mark, or judged by its decimals before its value
                assert points.within_allowance(cell) == (cell.status == grading.RIGHT), (case.name, step.step, cell)
                judged += 1
    assert judged > 60


# The key's cells


def test_the_key_counts_the_cells_the_mask_lets_through() -> None:
    """Causal storm (2 queries of 7 tokens): weights hold the cells the mask lets through, no others."""
    steps = pipeline.solve(pipeline.load(str(SAMPLES / "storm_causal.yaml")))
    key = points.key_cells(steps)
    weights = next(step for step in key.steps if step.step == "weights")
    mask = steps.problem.mask
    assert mask.shape == (2, 7) and not mask.all()
    assert sorted((cell.row, cell.column) for cell in weights.cells) == [
        tuple(map(int, at)) for at in zip(*mask.nonzero())
    ]
    assert all(not cell.masked and cell.entry is None for cell in weights.cells)
    assert points.score(grading.Report("-", ()), points.PointsSpec(), key).max_score == sum(
        len(step.cells)
        for step in key.steps
        if not BY_NAME[step.step].aside  # e^s and Σ e^s: only when named
    )


def test_a_step_name_is_shared_by_every_head() -> None:
    """two_heads: weights: 6 over both heads' cells; each head's weights step holds half of it."""
    steps = pipeline.solve(pipeline.load(str(SAMPLES / "two_heads.yaml")))
    key = points.key_cells(steps)
    heads = [step for step in key.steps if step.step == "weights"]
    assert [step.head for step in heads] == [0, 1] and len(heads[0].cells) == len(heads[1].cells)
    found = points.score(grading.Report("-", ()), spec("points: {steps: {weights: 6}}", key), key)
    assert [step.max_score for step in found.steps if step.key.step == "weights"] == [3, 3]
    assert found.max_score == 6 and found.score == 0


def test_a_stacks_key_counts_its_streams() -> None:
    steps = pipeline.solve(pipeline.load(str(SAMPLES / "layers.yaml")))
    key = points.key_cells(steps)
    assert {step.layer for step in key.steps} == {0, 1}
    assert [step.step for step in key.steps if step.layer == 1][:3] == ["mean", "root", "normed"]
    only = points.key_cells(steps, names=("stream",))
    assert [(step.layer, step.step) for step in only.steps] == [(0, "stream"), (1, "stream")]


def test_a_stacks_streams_score_layer_by_layer(tmp_path: Path) -> None:
    """Two layers; the student writes the first layer's stream right and the second's with one number off by 1:
    stream: 2 over its 18 cells (9 a layer) is 1/9 a cell, 17/9 earned."""
    text = (SAMPLES / "layers.yaml").read_text(encoding="utf-8")
    steps = pipeline.solve(pipeline.load(str(SAMPLES / "layers.yaml")))
    first, second = (layer.output.round(4) for layer in steps.layers)
    second[0, 0] += 1
    rows = [", ".join(f"{v:.4f}" for v in row) for row in (*first, *second)]
    answers = "answers:\n  layers:\n" + "".join(
        f"    - stream: [{', '.join(f'[{row}]' for row in rows[3 * n : 3 * n + 3])}]\n" for n in range(2)
    )
    report = pipeline.grade(write(tmp_path, "layers.yaml", text + answers))
    assert [(step.layer, step.step, step.status) for step in report.steps] == [
        (0, "stream", "right"),
        (1, "stream", "wrong"),
    ]
    key = points.key_cells(steps)
    found = points.score(report, spec("points: {steps: {stream: 2}}", key), key)
    assert (found.score, found.max_score) == (F(17, 9), 2)
    assert [(s.key.layer, s.score) for s in found.steps if s.max_score] == [(0, 1), (1, F(8, 9))]


# Percent


@pytest.mark.parametrize(
    ("score", "most", "expected"),
    [
        (F(2), F(3), "66.67"),
        (F(1), F(3), "33.33"),
        (F(1), F(8), "12.50"),
        (F(1), F(20000), "0.01"),  # 0.005 exactly: half up
        (F(1), F(20001), "0.00"),  # 0.00499975…
        (F(13, 3), F(7), "61.90"),
        (F(0), F(7), "0.00"),
        (F(7), F(7), "100.00"),
    ],
)
def test_percent_has_two_decimals_rounded_half_up(score: Fraction, most: Fraction, expected: str) -> None:
    assert str(points.percent(score, most)) == expected


def test_no_percent_of_nothing() -> None:
    assert points.percent(F(0), F(0)) is None


# Reading points:


def test_points_as_written() -> None:
    assert spec("title: no points\n") == points.PointsSpec(None, F(1), "full", "none")
    assert spec("points: {steps: {weights: 0.1, output: 2}, carried: none, rounded: full}") == points.PointsSpec(
        (("weights", F(1, 10)), ("output", F(2))), F(1), "none", "full"
    )
    assert spec("points: {per_cell: 0.5}").per_cell == F(1, 2)
    assert spec("points: {}") == points.PointsSpec()


@pytest.mark.parametrize(
    ("text", "english"),
    [
        (
            "points: 3",
            "key.yaml:1: points: points must be a mapping (steps:, per_cell:, carried:, rounded:), got the number 3",
        ),
        ("points: {step: {weights: 1}}", "key.yaml:1: points.step: unknown field 'step'; did you mean 'steps'?"),
        ("points: {steps: [weights]}", "key.yaml:1: points.steps: expected each step with its points"),
        ("points: {steps: {}}", "key.yaml:1: points.steps: steps: names no step"),
        ("points: {steps: {weight: 1}}", "points.steps.weight: 'weight' is not a step that can be answered; did you"),
        (
            "points: {steps: {weights: -1}}",
            "points.steps.weights: expected points: a number from 0 to 1000000, got the number -1",
        ),
        ("points: {steps: {weights: true}}", "points.steps.weights: expected points: a number from 0 to 1000000"),
        ("points: {steps: {weights: '3'}}", "points.steps.weights: expected points: a number from 0 to 1000000"),
        ("points: {steps: {weights: 1e9}}", "points.steps.weights: expected points: a number from 0 to 1000000"),
        ("points: {steps: {weights: .nan}}", "points.steps.weights: expected points: a number from 0 to 1000000"),
        ("points: {per_cell: .inf}", "points.per_cell: expected points: a number from 0 to 1000000"),
        ("points: {steps: {weights: 1}, per_cell: 1}", "points.per_cell: give steps: (the points of each step) or"),
        ("points: {carried: some}", "key.yaml:1: points.carried: expected full, half or none, got the text 'some'"),
        ("points: {rounded: null}", "key.yaml:1: points.rounded: expected full, half or none, got nothing"),
        ("points:\n  steps:\n    concat: 1\n", "key.yaml:3: points.steps.concat: the key counts no cells of concat"),
    ],
)
def test_bad_points_are_one_line_naming_the_field(text: str, english: str) -> None:
    key = points.key_cells(pipeline.solve(pipeline.load(text=BANK, name="key.yaml")))
    for language in ("en", "es"):
        token = LANGUAGE.set(language)
        try:
            with pytest.raises(AttnError) as caught:
                spec(text, key)
            line = describe(caught.value)
        finally:
            LANGUAGE.reset(token)
        assert "\n" not in line and len(line) <= 200, line
        assert language == "es" or english in line, line
        assert line.startswith("key.yaml:"), line
