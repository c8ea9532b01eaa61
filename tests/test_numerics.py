"""Numbers at the edges: huge scores, values near the float64 limits, exact ties, reproducibility.

The rule tested here: a result is either finite and right, or the run is refused with exit 2
and one line. numpy never gets to print a warning, and no NaN or infinity reaches the output.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attncli.cli import app

MAX = 1.7976931348623157e308


def run(document: str, *args: str) -> tuple[int, str, str]:
    """attncli compute on `document` (standard input), with every warning turned into a failure."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = CliRunner().invoke(app, ["compute", "-", *args], input=document)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout, result.stderr


def solve(document: str, *args: str) -> dict:
    code, out, err = run(document, "--format", "json", *args)
    assert code == 0, err
    assert err == ""
    return json.loads(out)


def given_scores(scores: list[float], values: list[float]) -> str:
    tokens = ", ".join(f"k{i}" for i in range(len(scores)))
    rows = ", ".join(f"[{v!r}]" for v in values)
    return f"tokens: [{tokens}]\nquery_tokens: [q]\nscores: [{scores!r}]\nvalues: [{rows}]\n"


def finite(document: dict) -> bool:
    """Every number in the JSON document is finite (JSON cannot even hold NaN; json.loads would accept it)."""
    numbers = [document]
    while numbers:
        item = numbers.pop()
        if isinstance(item, dict):
            numbers += item.values()
        elif isinstance(item, list):
            numbers += item
        elif isinstance(item, float) and not math.isfinite(item):
            return False
    return True


SIGMA = 1 / (1 + math.exp(-1))  # softmax of two scores 1 apart


@pytest.mark.parametrize(
    ("scores", "weights"),
    [
        ([1e4, 1e4 - 1, -1e4], [SIGMA, 1 - SIGMA, 0.0]),
        ([-1e4, -1e4 - 1, -3e4], [SIGMA, 1 - SIGMA, 0.0]),
        ([700.0, 699.0, -1e4], [SIGMA, 1 - SIGMA, 0.0]),
        ([1e8, 1e8 - 1, 0.0], [SIGMA, 1 - SIGMA, 0.0]),
        ([1e300, -1e300, 0.0], [1.0, 0.0, 0.0]),
        ([MAX, -MAX, MAX / 2], [1.0, 0.0, 0.0]),
    ],
)
def test_huge_given_scores_give_finite_exact_weights(scores: list[float], weights: list[float]) -> None:
    doc = solve(given_scores(scores, [1.0, 2.0, 3.0]))
    assert doc["heads"][0]["weights"][0] == pytest.approx(weights, rel=1e-14, abs=1e-300)
    assert doc["output"][0][0] == pytest.approx(weights[0] + 2 * weights[1] + 3 * weights[2], rel=1e-14)
    assert finite(doc)


def test_scores_of_1e4_from_queries_and_keys() -> None:
    """q·k/√d_k = ±1e4: far beyond e^709, and still a clean softmax."""
    doc = solve(
        "tokens: [a, b]\nquery_tokens: [q]\nqueries: [[100, 100]]\n"
        "keys: [[50*√2, 50*√2], [-50*√2, -50*√2]]\nvalues: [[1], [2]]\n"
    )
    head = doc["heads"][0]
    assert head["scores"][0] == pytest.approx([1e4, -1e4], rel=1e-12)
    assert head["weights"][0] == [1.0, 0.0]
    assert doc["output"] == [[1.0]]


@pytest.mark.parametrize("format", ["text", "rich"])
def test_huge_scores_print_without_inf_or_nan(format: str) -> None:
    """The displayed e^s is shifted when it would overflow; no 'inf' or 'nan' reaches the reader."""
    code, out, err = run(given_scores([800.0, 799.0, -1e4], [1.0, 2.0, 3.0]), "--format", format)
    assert code == 0, err
    assert err == ""
    for word in ("inf", "nan", "NaN"):
        assert word not in out.replace("−∞", "")


def test_values_at_the_float64_limit_mix_without_overflow() -> None:
    doc = solve(given_scores([0.0, 0.0], [MAX, MAX]))
    assert doc["output"] == [[MAX]]
    doc = solve(given_scores([0.0, 0.0], [MAX, -MAX]))
    assert doc["output"] == [[0.0]]


def test_subnormal_inputs_stay_exact() -> None:
    doc = solve(
        "tokens: [a, b]\nquery_tokens: [q]\nqueries: [[5e-324]]\nkeys: [[5e-324], [1]]\nvalues: [[5e-324], [0]]\n"
    )
    assert doc["heads"][0]["weights"][0] == [0.5, 0.5]
    assert doc["output"] == [[0.0]]  # half the smallest subnormal rounds to zero, as in IEEE 754
    assert finite(doc)


def pair(q: str, k: str, extra: str = "") -> str:
    return f"tokens: [a, b]\nqueries: [[{q}], [1]]\nkeys: [[{k}], [1]]\nvalues: [[1], [2]]\n{extra}"


@pytest.mark.parametrize(
    ("document", "field"),
    [
        (pair("1e155", "1e155"), "scores"),
        (pair("1e154", "1e154", "score: {type: dot, scale: 1e10}\n"), "scores"),
        (pair("1e300", "1e300", "score: {type: general, w: [[1e10]]}\n"), "scores"),
        ("tokens: [a, b]\nx: [[1e300], [1]]\nw_q: [[1e10]]\nw_k: [[1]]\nw_v: [[1]]\n", "queries"),
        ("tokens: [a, b]\nquery_tokens: [q]\nscores: [[0, 0]]\nvalues: [[1e308], [1e308]]\nw_o: [[10]]\n", "w_o"),
    ],
    ids=["dot", "scale", "general", "projection", "w_o"],
)
def test_an_overflow_in_the_calculation_is_refused_with_one_line(document: str, field: str) -> None:
    for format in ("json", "text"):
        code, out, err = run(document, "--format", format)
        assert code == 2
        assert out == ""
        assert err.count("\n") == 1
        assert f"<stdin>: {field}: a result passes the range of floating-point numbers" in err


def test_saturating_additive_scores_are_finite_and_right() -> None:
    """q·W_query overflows to inf inside tanh, which is exactly 1 there: a right answer, not an error."""
    doc = solve(
        "tokens: [a, b]\nquery_tokens: [q]\nqueries: [[1e300]]\nkeys: [[1], [-1]]\nvalues: [[1], [2]]\n"
        "score: {type: additive, w_query: [[1e10]], w_key: [[1]], v: [2]}\n"
    )
    assert doc["heads"][0]["dot"][0] == [2.0, 2.0]
    assert doc["heads"][0]["weights"][0] == [0.5, 0.5]
    assert doc["output"] == [[1.5]]


@pytest.mark.parametrize("count", [2, 3, 4, 7, 10])
def test_exact_ties_get_exactly_equal_weights(count: int) -> None:
    values = [float(i) for i in range(count)]
    doc = solve(given_scores([3.25] * count, values))
    weights = doc["heads"][0]["weights"][0]
    assert len(set(weights)) == 1
    assert math.fsum(weights) == pytest.approx(1.0, abs=2**-52)
    assert doc["output"][0][0] == pytest.approx(sum(values) / count, rel=1e-15)


def test_ties_among_the_keys_a_mask_leaves() -> None:
    doc = solve(
        "tokens: [a, b, c, d]\nquery_tokens: [q]\nscores: [[1, 1, 9, 1]]\nmask: [[1, 1, 0, 1]]\n"
        "values: [[3], [6], [100], [9]]\n"
    )
    weights = doc["heads"][0]["weights"][0]
    assert weights[2] == 0.0
    assert weights[0] == weights[1] == weights[3]
    assert doc["output"][0][0] == pytest.approx(6.0, rel=1e-15)


RANDOMISH = (
    "tokens: [a, b, c, d]\n"
    "queries: [[0.3, -1.2, 2.5], [1.1, 0.4, -0.7], [-2.2, 0.9, 0.05], [0.6, 0.6, -1.9]]\n"
    "keys: [[1.5, 0.2, -0.3], [-0.8, 1.9, 0.4], [0.25, -0.6, 1.2], [2.1, 0.7, 0.9]]\n"
    "values: [[1, 0], [0.5, -1.5], [-2, 3], [0.75, 0.25]]\n"
)


def test_float64_results_are_reproducible() -> None:
    first, second = (run(RANDOMISH, "--format", "json")[1] for _ in range(2))
    assert first == second


def test_permuting_keys_and_values_together_leaves_the_output() -> None:
    doc = solve(RANDOMISH)
    swapped = solve(
        RANDOMISH.replace("[1.5, 0.2, -0.3], [-0.8, 1.9, 0.4]", "[-0.8, 1.9, 0.4], [1.5, 0.2, -0.3]")
        .replace("[1, 0], [0.5, -1.5]", "[0.5, -1.5], [1, 0]")
        .replace("tokens: [a, b, c, d]", "tokens: [b, a, c, d]\nquery_tokens: [a, b, c, d]")
    )
    for row, other in zip(doc["output"], swapped["output"], strict=True):
        assert row == pytest.approx(other, rel=1e-14, abs=1e-15)


def test_float32_agrees_with_float64_to_float32_precision() -> None:
    double, single = solve(RANDOMISH), solve(RANDOMISH, "--dtype", "float32")
    for key in ("scores", "weights", "output"):
        for row, other in zip(double["heads"][0][key], single["heads"][0][key], strict=True):
            assert other == pytest.approx(row, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (pair("1e39", "1"), "<stdin>:2: queries: a number is beyond the range of float32 (about ±3.4e+38)"),
        (pair("1e20", "1e20"), "<stdin>: scores: a result passes the range of floating-point numbers"),
    ],
    ids=["input", "calculation"],
)
def test_float32_limits_are_refused_too(document: str, message: str) -> None:
    code, out, err = run(document, "--dtype", "float32", "--format", "json")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert message in err


def dot_problem(queries: str, keys: str, values: str, extra: str = "") -> str:
    return f"queries: {queries}\nkeys: {keys}\nvalues: {values}\nscore: dot\n{extra}"


EXTREME_PROBLEMS = {  # issue 22: -f npy (the blocked kernel) gave 0.0 and inf where -f json does not
    "tiny values": dot_problem("[[-22.1]]", "[[22.1], [22.0], [22.05]]", "[[1e-300], [2e-300], [3e-300]]"),
    "huge values": dot_problem(
        "[[15.5, 15.5]]", "[[15.5, 15.5], [15.4, 15.6], [15.6, 15.3]]", "[[1e101], [2e101], [3e101]]"
    ),
    "both": dot_problem("[[15, 0], [-15, 0]]", "[[16, 0], [15.9, 1]]", "[[1e-290, 1e290], [3e-290, 5e289]]"),
    "ordinary": RANDOMISH,
    "causal": RANDOMISH + "mask: causal\n",
}


@pytest.mark.parametrize("name", list(EXTREME_PROBLEMS))
def test_npy_is_json_to_1e_12_relative(name: str, tmp_path: Path) -> None:
    """The README's promise: -f npy (the blocked kernel where it can) equals -f json (every step) to 1e-12 of each
    number, tiny or huge (positive values here, so that no output is a cancellation)."""
    document = EXTREME_PROBLEMS[name]
    doc = solve(document)
    code, _, err = run(document, "--format", "npy", "-o", str(tmp_path / "out.npy"))
    assert code == 0, err
    found, expected = np.load(tmp_path / "out.npy"), np.array(doc["output"])
    assert found.shape == expected.shape and np.isfinite(found).all()
    magnitude = np.array(doc["heads"][0]["weights"]) @ np.abs(np.array(doc["heads"][0]["values"]))
    assert (np.abs(found - expected) <= 1e-12 * magnitude).all(), (found, expected)
