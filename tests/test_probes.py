"""Norms, interventions, heatmaps and pictures of `attncli compute`, against numbers worked out by hand.

bank.yaml: scores 2, 1, 0, so α = (e², e, 1)/z with z = e² + e + 1; values [2, 0], [0, 2], [1, 1].
"""

from __future__ import annotations

import copy
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from attncli import core, pipeline, probes
from attncli.cli import app
from attncli.errors import AttnError
from attncli.i18n import describe, en
from tests.paths import SAMPLES

E = math.e
Z = E**2 + E + 1
ALPHA = np.array([E**2, E, 1]) / Z  # bank.yaml's weights
SCREEN = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "LANGUAGE": None, "NO_COLOR": None, "COLUMNS": "80"}
BANK = str(SAMPLES / "bank.yaml")
# sep gets the larger weight (scores 1, 0) but a value ten times shorter than word's, as [SEP] in Kobayashi et al.
SHORT_AND_LONG = "tokens: [sep, word]\nquery_tokens: [word]\nscores: [[1, 0]]\nvalues: [[0.1, 0], [2, 0]]\n"


def solve(name: str) -> core.Steps:
    path = SAMPLES / name
    return pipeline.solve(pipeline.load(path))


def solve_text(text: str) -> core.Steps:
    return pipeline.solve(pipeline.load(text=text, name="test.yaml"))


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, ["compute", *args], input=stdin, env=SCREEN)


def flat(text: str) -> str:
    """Text with its line wrapping undone, to find a sentence that the layout may have wrapped."""
    return " ".join(text.split())


def softmax(scores: list[float]) -> np.ndarray:
    exp = np.exp(scores)
    return exp / exp.sum()


# Norms


def test_bank_norms_by_hand() -> None:
    norms = probes.norms(solve("bank.yaml"))
    (head,) = norms.heads
    np.testing.assert_allclose(head.transformed, [2, 2, math.sqrt(2)], rtol=0, atol=1e-12)
    np.testing.assert_allclose(head.weighted, [[2 * E**2 / Z, 2 * E / Z, math.sqrt(2) / Z]], rtol=0, atol=1e-12)
    assert np.round(head.weighted, 4).tolist() == [[1.3305, 0.4895, 0.1273]]
    assert head.ranking.by_weight.tolist() == head.ranking.by_norm.tolist() == [[1, 2, 3]]
    assert not head.ranking.disagree.any()
    np.testing.assert_allclose(norms.summed, head.weighted, rtol=0, atol=1e-12)  # one head: nothing to sum


def test_norms_through_w_o_with_two_heads_against_numpy() -> None:
    steps = solve("two_heads.yaml")
    values = np.array([[2, 0], [0, 2], [1, 1]], dtype=float)
    w_o = np.array([[1, 0], [0, 1], [0.5, 0], [0, 0.5]])
    alphas = [softmax([2, 1, 0]), softmax([1, 2, 0])]  # head 1: the worked example; head 2: given scores
    f = [values @ w_o[0:2], values @ w_o[2:4]]  # v_j · W_Oʰ
    norms = probes.norms(steps)
    assert norms.through_w_o
    for head, alpha, fh in zip(norms.heads, alphas, f):
        np.testing.assert_allclose(head.transformed, np.linalg.norm(fh, axis=1), rtol=0, atol=1e-12)
        np.testing.assert_allclose(head.weighted[0], alpha * np.linalg.norm(fh, axis=1), rtol=0, atol=1e-12)
    contributions = alphas[0][:, None] * f[0] + alphas[1][:, None] * f[1]  # (S, d_out)
    np.testing.assert_allclose(norms.summed[0], np.linalg.norm(contributions, axis=1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(contributions.sum(axis=0), steps.output[0], rtol=0, atol=1e-12)
    # The mean weights of fisherman and net tie; their summed norms do not, so net's places differ.
    assert norms.summed_ranking.by_weight.tolist() == [[1, 1, 3]]
    assert norms.summed_ranking.disagree.tolist() == [[False, True, False]]


def test_several_heads_without_w_o_sum_in_separate_columns() -> None:
    steps = solve("two_heads.yaml")
    steps = core.compute(steps.problem._replace(w_o=None))
    norms = probes.norms(steps)
    assert not norms.through_w_o
    expected = np.sqrt(sum(head.weighted**2 for head in norms.heads))  # the heads fill disjoint columns of concat
    np.testing.assert_allclose(norms.summed, expected, rtol=0, atol=1e-12)


def test_a_large_weight_on_a_short_vector_ranks_lower_by_norm() -> None:
    steps = solve_text(SHORT_AND_LONG)
    (head,) = probes.norms(steps).heads
    assert head.ranking.by_weight.tolist() == [[1, 2]]
    assert head.ranking.by_norm.tolist() == [[2, 1]]
    assert head.ranking.disagree.all()
    result = run("-", "--norms", "--format", "text", stdin=SHORT_AND_LONG)
    assert result.exit_code == 0, result.output
    assert "≠" in result.stdout
    assert flat(en.MESSAGES["analysis.caution_norms"]) in flat(result.stdout)


# Interventions


def test_ablating_net_by_hand() -> None:
    steps = solve("bank.yaml")
    record = probes.ablate(steps, "net")
    weights = [E**2 / (E**2 + 1), 0, 1 / (E**2 + 1)]  # scores 2 and 0 left
    np.testing.assert_allclose(record.weights, [[weights]], rtol=0, atol=1e-12)
    np.testing.assert_allclose(record.output, [[2 * weights[0] + weights[2], weights[2]]], rtol=0, atol=1e-12)
    assert np.round(record.weights[0, 0], 4).tolist() == [0.8808, 0, 0.1192]
    assert np.round(record.output[0], 4).tolist() == [1.8808, 0.1192]
    np.testing.assert_allclose(record.delta, np.linalg.norm(record.output - steps.output, axis=1))
    # Renormalising after removing a key moves exactly that key's weight: the distance is α_net.
    np.testing.assert_allclose(record.tv, [[ALPHA[1]]], rtol=0, atol=1e-12)
    assert record.mask.tolist() == [[True, False, True]]


def test_other_interventions_by_hand() -> None:
    steps = solve("bank.yaml")
    uniform = probes.replace_weights(steps, "uniform")
    np.testing.assert_allclose(uniform.output, [[1, 1]], rtol=0, atol=1e-12)  # equal weights: the article's [1, 1]
    permuted = probes.replace_weights(steps, *probes.parse_weights("permute:3"))
    assert permuted.target == "permute:3"
    np.testing.assert_allclose(np.sort(permuted.weights[0, 0]), np.sort(ALPHA), rtol=0, atol=1e-12)
    assert permuted.weights[0, 0].tolist() != steps.heads[0].weights[0].tolist()  # never left as it was
    again = probes.replace_weights(steps, "permute", 3)
    assert again.weights.tolist() == permuted.weights.tolist()  # seeded: reproducible
    zeroed = probes.ablate_head(steps, 1)
    np.testing.assert_allclose(zeroed.output, [[0, 0]])
    assert zeroed.tv.tolist() == [[0.0]]
    two = solve("two_heads.yaml")
    only_first = probes.ablate_head(two, 2)  # W_O's first rows are the identity: head 1's output comes through
    np.testing.assert_allclose(only_first.output, two.heads[0].output, rtol=0, atol=1e-12)
    together = probes.ablate(two, "fisherman+net")
    np.testing.assert_allclose(together.weights[:, 0, 2], [1, 1])


def test_interventions_never_change_the_original() -> None:
    for name in ("bank.yaml", "two_heads.yaml", "storm_causal.yaml"):
        steps = solve(name)
        before = copy.deepcopy(steps)
        probes.norms(steps)
        probes.ablate(steps, steps.problem.tokens[0])
        probes.ablate_head(steps, len(steps.heads))
        probes.replace_weights(steps, "uniform")
        probes.replace_weights(steps, "permute", 1)
        assert steps.problem.mask.tolist() == before.problem.mask.tolist()
        assert steps.output.tolist() == before.output.tolist()
        for head, old in zip(steps.heads, before.heads):
            assert head.weights.tolist() == old.weights.tolist()
            assert head.output.tolist() == old.output.tolist()
            assert head.values.tolist() == old.values.tolist()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--ablate", "river"), "--ablate: 'river' is not a token (tokens: fisherman, net, bank); join several with +"),
        (("--ablate", "fisherman+net+bank"), "--ablate: removing fisherman+net+bank leaves query 'bank' no key to"),
        (("--ablate-head", "2"), "--ablate-head: there is no head 2 (heads are numbered 1 to 1)"),
        (
            ("--weights", "shuffle"),
            "--weights: expected uniform, permute or permute:SEED (a whole number), got 'shuffle'",
        ),
        (("--norms", "--format", "csv"), "--format: csv does not show norms or interventions; human output and json"),
    ],
)
def test_bad_analysis_options_are_one_line_of_bad_input(args: tuple[str, ...], message: str) -> None:
    result = run(BANK, *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"attncli: {message}")


def test_api_errors_are_attn_errors_that_name_no_flag() -> None:
    """The library does not know the command line: the CLI places its errors at the flags."""
    steps = solve("bank.yaml")
    for call in (
        lambda: probes.ablate(steps, "river"),
        lambda: probes.ablate_head(steps, 2),
        lambda: probes.parse_weights("shuffle"),
        lambda: probes.scaling([0]),
    ):
        with pytest.raises(AttnError) as caught:
            call()
        assert caught.value.where.source is None
        assert "--" not in describe(caught.value)


# JSON


def test_json_carries_norms_and_interventions_only_when_asked() -> None:
    plain = json.loads(run(BANK, "--format", "json").stdout)
    assert "norms" not in plain and "interventions" not in plain
    result = run(BANK, "--norms", "--ablate", "net", "--weights", "uniform", "--format", "json")
    doc = json.loads(result.stdout)
    assert doc["output"] == plain["output"]
    (head,) = doc["norms"]["heads"]
    np.testing.assert_allclose(head["transformed"], [2, 2, math.sqrt(2)], rtol=0, atol=1e-12)
    np.testing.assert_allclose(head["weighted"], [[2 * E**2 / Z, 2 * E / Z, math.sqrt(2) / Z]], rtol=0, atol=1e-12)
    assert doc["norms"]["summed"] == head["weighted"]
    ablated, uniform = doc["interventions"]
    assert (ablated["kind"], ablated["target"]) == ("ablate", "net")
    assert np.round(ablated["weights"], 4).tolist() == [[0.8808, 0, 0.1192]]
    assert np.round(ablated["output"], 4).tolist() == [[1.8808, 0.1192]]
    assert len(ablated["delta"]) == 1
    assert (uniform["kind"], uniform["target"]) == ("weights", "uniform")


def test_json_of_several_heads_gives_weights_per_head() -> None:
    doc = json.loads(run(str(SAMPLES / "two_heads.yaml"), "--ablate", "net", "--format", "json").stdout)
    (record,) = doc["interventions"]
    assert np.shape(record["weights"]) == (2, 1, 3) and np.shape(record["tv"]) == (2, 1)


# Heatmaps and pictures


def test_heatmap_shows_every_weight_and_marks_masked_cells() -> None:
    """storm_causal: bank (position 2) sees The and bank; storm sees every token but the final '.'."""
    result = run(str(SAMPLES / "storm_causal.yaml"), "--format", "text")
    assert result.exit_code == 0, result.output
    heat = result.stdout.split("Attention weights (rows: keys")[1].split("Outputs")[0]
    r = 1 / math.sqrt(2)
    expected = {
        "bank": [*softmax([0, r]), None, None, None, None, None],
        "storm": [*softmax([r, r, 2 * r, 0, r, 3 * r]), None],
    }
    tokens = ["The", "bank", "flooded", "after", "the", "storm", "."]
    columns = {
        token: next(row.split()[1:] for row in heat.splitlines() if row.startswith(token + " ")) for token in tokens
    }
    for q, (query, weights) in enumerate(expected.items()):
        numbers = [columns[token][q].rstrip("▁▂▃▄▅▆▇█") for token in tokens]
        assert numbers == ["·" if w is None else f"{w:.4f}" for w in weights], query
    assert flat(en.MESSAGES["analysis.caution_map"]) in flat(result.stdout)


def test_heatmap_flag_forces_the_map_for_one_query() -> None:
    assert "Attention weights (rows" not in run(BANK, "--format", "text").stdout
    forced = run(BANK, "--heatmap", "--format", "text").stdout
    assert "Attention weights (rows" in forced and "0.6652█" in forced


def test_interventions_show_beside_the_original_with_the_caution() -> None:
    result = run(BANK, "--ablate", "net", "--format", "text")
    assert result.exit_code == 0, result.output
    assert "[1.4205, 0.5795] → [1.8808, 0.1192]" in result.stdout
    assert flat(en.MESSAGES["analysis.caution_interventions"]) in flat(result.stdout)


def test_svg_and_html_save_the_human_output(tmp_path: Path) -> None:
    svg, html = tmp_path / "bank.svg", tmp_path / "bank.html"
    result = run(BANK, "--norms", "--heatmap", "--svg", str(svg), "--html", str(html), "--quiet")
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    root = ET.parse(svg).getroot()  # well-formed XML
    assert root.tag.endswith("svg")
    text = "".join(root.itertext()).replace("\xa0", " ")
    page = html.read_text(encoding="utf-8")
    for number in ("0.6652", "0.2447", "0.0900", "1.3305", "0.4895", "0.1273", "1.4205"):
        assert number in text and number in page
    assert sorted(path.name for path in tmp_path.iterdir()) == ["bank.html", "bank.svg"]  # no temporary files left
