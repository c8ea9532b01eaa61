"""`--figure FILE.svg|.png|.pdf`: a matplotlib heatmap whose cells, labels and panels are checked in the SVG.

Expected numbers are worked out here by hand (the article's e², e, 1 over their sum), not read from attncli.
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attncli.cli import app
from tests.paths import ROOT, SAMPLES
from tests.test_cli_compute import SCREEN

E = math.e
Z = E**2 + E + 1
BANK = [E**2 / Z, E / Z, 1 / Z]


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), env={**SCREEN, "COLUMNS": "80"})


def svg_texts(path: Path) -> list[str]:
    """Every text element of the SVG, in document order (svg.fonttype none keeps text as text)."""
    root = ET.parse(path).getroot()
    return ["".join(node.itertext()).strip() for node in root.iter() if node.tag.endswith("text")]


drawn = pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="needs attncli[figures]")


@drawn
def test_bank_svg_has_each_weight_token_and_the_title(tmp_path: Path) -> None:
    out = tmp_path / "bank.svg"
    result = invoke("compute", str(SAMPLES / "bank.yaml"), "--figure", str(out), "--quiet")
    assert result.exit_code == 0, result.output
    texts = svg_texts(out)
    for weight in BANK:
        assert f"{weight:.2f}" in texts
    for token in ("fisherman", "net", "bank", "keys", "queries", "attention weight"):
        assert token in texts
    assert "The fisherman repaired his net beside the bank" in texts
    assert "masked" not in texts


@drawn
def test_masked_cells_are_labelled_and_hatched(tmp_path: Path) -> None:
    """storm_causal: bank (position 2) may not use the 5 later keys, storm (position 6) not the final '.'."""
    out = tmp_path / "storm.svg"
    assert invoke("compute", str(SAMPLES / "storm_causal.yaml"), "--figure", str(out), "-q").exit_code == 0
    texts = svg_texts(out)
    assert texts.count("masked") == 5 + 1
    assert "masked (s = −∞, weight 0)" in texts
    assert "<pattern" in out.read_text(encoding="utf-8")  # the hatching


@drawn
def test_several_heads_get_a_panel_each_the_mean_and_with_norms_the_norm_panels(tmp_path: Path) -> None:
    out = tmp_path / "two.svg"
    result = invoke("compute", str(SAMPLES / "two_heads.yaml"), "--norms", "--figure", str(out), "-q")
    assert result.exit_code == 0, result.output
    texts = svg_texts(out)
    assert {"head 1", "head 2", "mean of the heads' weights", "head 1: ‖α·f(x)‖", "head 2: ‖α·f(x)‖"} <= set(texts)
    # head 1 is bank.yaml: ‖α·v‖ = α × [2, 2, √2]
    for weighted in (2 * BANK[0], 2 * BANK[1], math.sqrt(2) * BANK[2]):
        assert f"{weighted:.2f}" in texts


@drawn
def test_compare_puts_a_above_b(tmp_path: Path) -> None:
    out = tmp_path / "compare.svg"
    a, b = str(SAMPLES / "storm_causal.yaml"), str(SAMPLES / "storm_bidirectional.yaml")
    assert invoke("compare", a, b, "--figure", str(out)).exit_code == 0
    texts = svg_texts(out)
    assert "A: weights" in texts and "B: weights" in texts and texts.count("masked") == 6


@drawn
@pytest.mark.parametrize(
    "args",
    [
        ["compare", str(SAMPLES / "bank.yaml"), str(SAMPLES / "bank_cashier.yaml")],
        ["compute", str(SAMPLES / "storm_causal.yaml")],
        ["compute", str(SAMPLES / "two_heads.yaml"), "--norms"],
    ],
)
def test_nothing_is_cut_at_the_edges_of_the_picture(tmp_path: Path, args: list[str]) -> None:
    """A long title or footnote makes the figure wider, never runs off it: the PNG's outer pixels are all white."""
    from matplotlib.image import imread

    out = tmp_path / "figure.png"
    assert invoke(*args, "--figure", str(out)).exit_code == 0
    pixels = imread(out)[..., :3]
    edges = [pixels[:3], pixels[-3:], pixels[:, :3], pixels[:, -3:]]
    assert all(edge.min() > 0.95 for edge in edges)


@drawn
@pytest.mark.parametrize("suffix", [".svg", ".png", ".pdf"])
def test_the_same_problem_gives_the_same_bytes(tmp_path: Path, suffix: str) -> None:
    first, second = tmp_path / f"a{suffix}", tmp_path / f"b{suffix}"
    for path in (first, second):
        assert invoke("compute", str(SAMPLES / "two_heads.yaml"), "--figure", str(path), "-q").exit_code == 0
    data = first.read_bytes()
    assert data == second.read_bytes()
    magic = {".svg": b"<?xml", ".png": b"\x89PNG", ".pdf": b"%PDF"}[suffix]
    assert data.startswith(magic)
    assert b"CreationDate" not in data and b"<dc:date>" not in data


@drawn
def test_another_suffix_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("compute", str(SAMPLES / "bank.yaml"), "--figure", str(tmp_path / "bank.jpg"), "-q")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "--figure" in line and ".svg, .png, .pdf" in line
    assert list(tmp_path.iterdir()) == []


def test_without_matplotlib_one_line_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    result = invoke("compute", str(SAMPLES / "bank.yaml"), "--figure", str(tmp_path / "bank.png"), "-q")
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "pip install 'attncli[figures]'" in line
    assert list(tmp_path.iterdir()) == []


def test_other_commands_do_not_import_matplotlib() -> None:
    code = (
        "import sys; from typer.testing import CliRunner; from attncli.cli import app; "
        f"CliRunner().invoke(app, ['compute', {str(SAMPLES / 'two_heads.yaml')!r}, '--norms', '--heatmap']); "
        "print('matplotlib' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "False"
