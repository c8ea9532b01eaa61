"""`attncli compare` (the fisherman and the cashier) and `attncli scaling` (the article's note 1)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from attncli import probes
from attncli.cli import app
from tests.paths import SAMPLES

E = math.e
SCREEN = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "LANGUAGE": None, "NO_COLOR": None, "COLUMNS": "80"}
BANK, CASHIER = str(SAMPLES / "bank.yaml"), str(SAMPLES / "bank_cashier.yaml")
# Both give bank the query [√2, 0]; fisherman/net/bank score 2, 1, 0, cashier/money/bank 1, 3, 0.
FISHERMAN = np.array([E**2, E, 1]) / (E**2 + E + 1)
CASHIER_WEIGHTS = np.array([E, E**3, 1]) / (E + E**3 + 1)
FISHERMAN_OUT = FISHERMAN @ [[2, 0], [0, 2], [1, 1]]
CASHIER_OUT = CASHIER_WEIGHTS @ [[0, 1], [0, 3], [1, 1]]


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args), env=SCREEN)


# compare


def test_compare_puts_both_mixtures_side_by_side() -> None:
    result = run("compare", BANK, CASHIER, "--format", "text")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "Query 'bank'" in result.stdout
    for j, (a, b) in enumerate(zip(("fisherman", "net", "bank"), ("cashier", "money", "bank"))):
        (row,) = [line for line in lines if line.split()[:2] == [str(j + 1), a]]
        assert row.split()[2:] == [
            f"{FISHERMAN[j]:.4f}",
            b,
            f"{CASHIER_WEIGHTS[j]:.4f}",
            f"{CASHIER_WEIGHTS[j] - FISHERMAN[j]:.4f}",
        ]
    for vector in (FISHERMAN_OUT, CASHIER_OUT, CASHIER_OUT - FISHERMAN_OUT):
        assert "[" + ", ".join(f"{x:.4f}" for x in vector) + "]" in result.stdout
    assert f"‖B − A‖ = {np.linalg.norm(CASHIER_OUT - FISHERMAN_OUT):.4f}" in result.stdout


def test_compare_json() -> None:
    result = run("compare", BANK, CASHIER, "--format", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["a"]["tokens"] == ["fisherman", "net", "bank"]
    assert doc["b"]["tokens"] == ["cashier", "money", "bank"]
    (query,) = doc["queries"]
    assert query["query"] == "bank"
    (pair,) = query["heads"]
    np.testing.assert_allclose(pair["weights_a"], FISHERMAN, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair["weights_b"], CASHIER_WEIGHTS, rtol=0, atol=1e-12)
    np.testing.assert_allclose(pair["difference"], CASHIER_WEIGHTS - FISHERMAN, rtol=0, atol=1e-12)
    np.testing.assert_allclose(query["output_a"], FISHERMAN_OUT, rtol=0, atol=1e-12)
    np.testing.assert_allclose(query["output_b"], CASHIER_OUT, rtol=0, atol=1e-12)
    np.testing.assert_allclose(query["difference"], CASHIER_OUT - FISHERMAN_OUT, rtol=0, atol=1e-12)
    assert query["distance"] == pytest.approx(np.linalg.norm(CASHIER_OUT - FISHERMAN_OUT), abs=1e-12)


def test_compare_without_a_shared_query_is_bad_input() -> None:
    result = run("compare", BANK, str(SAMPLES / "translation_cross.yaml"))
    assert result.exit_code == 2
    assert result.stderr == "attncli: the two problems share no query token (A: bank; B: La, orilla, se, inundó)\n"


# scaling


def test_scaling_variances_within_sampling_error() -> None:
    """Var(q·k) = d_k for independent N(0, 1) components; its estimate from n dot products errs by about √(2/n)."""
    record = probes.scaling([1, 16, 256], keys=16, samples=2000, seed=0)
    for row in record.rows:
        assert row.var_dot == pytest.approx(row.d_k, rel=0.1)
        assert row.var_scaled == pytest.approx(1, rel=0.1)
    dot = [row.max_weight_dot for row in record.rows]
    scaled = [row.max_weight_scaled for row in record.rows]
    assert dot == sorted(dot) and dot[-1] > 0.85  # unscaled, softmax saturates as d_k grows
    assert max(scaled) - min(scaled) < 0.1 and 1 / 16 < min(scaled) < 0.5  # scaled, it does not


def test_scaling_is_reproducible_and_each_row_has_its_own_stream() -> None:
    alone = probes.scaling([64], samples=200, seed=3)
    together = probes.scaling([4, 64], samples=200, seed=3)
    assert alone.rows[0] == together.rows[1]
    assert probes.scaling([64], samples=200, seed=4).rows[0] != alone.rows[0]


def test_scaling_json_shape_and_seed() -> None:
    args = ("scaling", "--dk", "1,64", "--keys", "8", "--samples", "300", "--seed", "5", "--format", "json")
    first, second = run(*args), run(*args)
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout
    rows = json.loads(first.stdout)["rows"]
    assert [row["d_k"] for row in rows] == [1, 64]
    for row in rows:
        assert set(row) == {"d_k", "var_dot", "var_scaled", "max_weight_dot", "max_weight_scaled"}
        assert row["var_scaled"] == pytest.approx(row["var_dot"] / row["d_k"])


def test_scaling_text_has_the_table_the_chart_and_note_1() -> None:
    result = run("scaling", "--dk", "4,256", "--samples", "300", "--format", "text")
    assert result.exit_code == 0, result.output
    record = probes.scaling([4, 256], samples=300)
    for row in record.rows:
        for value in (row.var_dot, row.var_scaled, row.max_weight_dot, row.max_weight_scaled):
            assert f"{value:.4f}" in result.stdout
    assert "█" in result.stdout and "√d_k" in result.stdout


@pytest.mark.parametrize("dk", ["0", "4,x", "", "5000"])
def test_scaling_rejects_bad_dk(dk: str) -> None:
    result = run("scaling", "--dk", dk)
    assert result.exit_code == 2
    assert result.stderr.startswith("attncli: --dk: expected whole numbers")
