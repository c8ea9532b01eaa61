"""The article's worked example, by hand: scores 2, 1, 0; weights e^s / (e² + e + 1)."""

import json
import math

from typer.testing import CliRunner

from attncli.cli import app
from tests.conftest import SAMPLES

E = math.e
WEIGHTS = [E**2 / (E**2 + E + 1), E / (E**2 + E + 1), 1 / (E**2 + E + 1)]
OUTPUT = [2 * WEIGHTS[0] + WEIGHTS[2], 2 * WEIGHTS[1] + WEIGHTS[2]]


def test_bank_json_matches_hand_calculation() -> None:
    result = CliRunner().invoke(app, ["compute", str(SAMPLES / "bank.yaml"), "--format", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    head = doc["heads"][0]
    for got, want in zip(head["scores"][0], [2, 1, 0], strict=True):
        assert math.isclose(got, want, rel_tol=0, abs_tol=1e-12)
    for got, want in zip(head["weights"][0], WEIGHTS, strict=True):
        assert math.isclose(got, want, rel_tol=1e-12)
    for got, want in zip(doc["output"][0], OUTPUT, strict=True):
        assert math.isclose(got, want, rel_tol=1e-12)


def test_bank_text_shows_the_article_numbers() -> None:
    result = CliRunner().invoke(app, ["compute", str(SAMPLES / "bank.yaml"), "--format", "text"])
    assert result.exit_code == 0, result.output
    for number in ("2.8284", "0.7071", "0.6652", "0.2447", "0.0900", "1.4205", "0.5795", "11.1073"):
        assert number in result.stdout
