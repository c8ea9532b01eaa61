"""The terminal heatmap: a grid that fits 40, 80 and 200 columns, bars scaled to tell a row's weights apart.

Expected weights are replayed here from the YAML with numpy (softmax of q·k/√d_k), not read from attncli.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from rich.cells import cell_len

from tests.paths import SAMPLES
from tests.test_cli_compute import run
from tests.test_terminal import ANSI, in_terminal

BARS = "▁▂▃▄▅▆▇█"
STORM = SAMPLES / "storm_bidirectional.yaml"
CAUSAL = SAMPLES / "storm_causal.yaml"


def replay(path: Path) -> tuple[list[str], list[str], np.ndarray]:
    """Tokens, query tokens and the weights (nan where masked) of a scaled-dot problem, by numpy."""
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    tokens = doc["tokens"]
    names = doc.get("query_tokens", tokens)
    q = np.array([[eval(str(x), {"sqrt": math.sqrt}) for x in doc["queries"][name]] for name in names], float)
    k = np.array(list(doc["keys"].values()) if isinstance(doc["keys"], dict) else doc["keys"], float)
    s = q @ k.T / math.sqrt(k.shape[1])
    if doc.get("mask") == "causal":
        positions = [tokens.index(name) for name in names]
        s = np.where(np.arange(len(tokens))[None, :] <= np.array(positions)[:, None], s, -np.inf)
    w = np.exp(s - s.max(axis=1, keepdims=True))
    w /= w.sum(axis=1, keepdims=True)
    return tokens, names, np.where(np.isinf(s), np.nan, w)


def bar_of(weight: float, largest: float) -> str:
    return BARS[min(7, max(0, math.ceil(weight / largest * 8) - 1))]


@pytest.fixture(scope="module")
def exercise(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An 8-token exercise, as `attncli generate --tokens 8 --seed 1` writes it."""
    made = subprocess.run(
        [sys.executable, "-m", "attncli", "generate", "--tokens", "8", "--seed", "1"],
        capture_output=True,
        text=True,
        check=True,
    )
    path = tmp_path_factory.mktemp("exercise") / "eight.yaml"
    path.write_text(made.stdout, encoding="utf-8")
    return path


def heat_section(text: str) -> list[str]:
    """The grid's lines: from the title to the bar swatch."""
    lines = text.splitlines()
    start = next(i for i, row in enumerate(lines) if row.startswith("Attention weights (rows"))
    end = next(i for i in range(start, len(lines)) if lines[i].strip().startswith("▁  ▂"))
    return lines[start:end]


def grid_rows(section: list[str], labels: list[str]) -> dict[str, list[str]]:
    """Each row label's cells, split on spaces."""
    return {row.split()[0]: row.split()[1:] for row in section if row[:1].strip() and row.split()[0] in labels}


@pytest.mark.parametrize("columns", [40, 80, 200])
def test_storm_fits_as_a_grid_with_keys_as_rows(columns: int) -> None:
    """Two queries, seven keys: the keys are the rows, every weight at 4 decimals with its bar."""
    tokens, names, weights = replay(STORM)
    result = run(str(STORM), "--heatmap", "--format", "text", columns=columns)
    assert result.exit_code == 0, result.output
    section = heat_section(result.stdout)
    assert "Attention weights (rows: keys, columns: queries" in " ".join(section[:2])
    assert max(cell_len(row) for row in result.stdout.splitlines()) <= columns
    largest = np.nanmax(weights)
    rows = grid_rows(section, tokens)
    assert list(rows) == tokens  # one line per key, not a stacked list
    for j, token in enumerate(tokens):
        expected = [f"{weights[i, j]:.4f}{bar_of(weights[i, j], largest)}" for i in range(len(names))]
        assert rows[token] == expected


def test_bars_tell_small_weights_apart() -> None:
    """0.0487, 0.0987, 0.2003 and 0.4061 (query storm) get four bars; quarters of [0, 1] gave ░ ░ ░ ▒."""
    tokens, _, weights = replay(STORM)
    rows = grid_rows(heat_section(run(str(STORM), "--heatmap", "--format", "text").stdout), tokens)
    storm_column = {token: cells[1][-1] for token, cells in rows.items()}
    assert storm_column["after"] == "▁" and storm_column["flooded"] == "▄" and storm_column["storm"] == "█"
    assert len(set(storm_column.values())) == len(set(np.round(weights[1], 4))) == 4


@pytest.mark.parametrize(("columns", "decimals"), [(200, 4), (80, 4), (60, 2), (40, None)])
def test_an_eight_token_exercise_is_a_grid_at_every_width(exercise: Path, columns: int, decimals: int | None) -> None:
    """8 × 8: full numbers at 80 (the columns numbered when the names do not fit), 2 decimals at 60, bars alone
    at 40; each says so."""
    tokens, _, weights = replay(exercise)
    result = run(str(exercise), "--format", "text", columns=columns)
    assert result.exit_code == 0, result.output
    text = result.stdout
    assert max(cell_len(row) for row in text.splitlines()) <= columns
    rows = grid_rows(heat_section(text), tokens)
    assert list(rows) == tokens
    largest = np.nanmax(weights)
    for i, token in enumerate(tokens):
        bars = [bar_of(w, largest) for w in weights[i]]
        expected = bars if decimals is None else [f"{w:.{decimals}f}{b}" for w, b in zip(weights[i], bars)]
        assert rows[token] == expected
    flat = " ".join(text.split())
    assert ("Cells rounded to 2 decimals" in flat) == (decimals == 2)
    assert ("Bars only" in flat) == (decimals is None)
    assert f"{largest:.4f}: one step is {largest / 8:.4f}" in flat  # the scale, stated
    named = heat_section(text)[1].split() == tokens  # the keys' names head the columns, or their numbers do
    assert named or columns < 200
    assert (f"Columns: 1 {tokens[0]}, 2 {tokens[1]}, 3 {tokens[2]}" in flat) == (not named)


def test_masked_cells_are_dots(tmp_path: Path) -> None:
    tokens, names, weights = replay(CAUSAL)
    rows = grid_rows(heat_section(run(str(CAUSAL), "--format", "text").stdout), tokens)
    for j, token in enumerate(tokens):
        cells = [c if c == "·" else c[:-1] for c in rows[token]]
        assert cells == ["·" if np.isnan(weights[i, j]) else f"{weights[i, j]:.4f}" for i in range(len(names))]


def test_too_narrow_even_for_bars_falls_back_to_a_list(exercise: Path) -> None:
    text = run(str(exercise), "--format", "text", columns=16).stdout
    tokens, _, weights = replay(exercise)
    first = f"{tokens[0]}: {weights[0][0]:.4f}{bar_of(weights[0][0], np.nanmax(weights))}"
    assert f"  1 {first}" in text or f"  {first}" in text


def test_colour_is_contrasting_backgrounds_and_no_color_keeps_the_bars() -> None:
    """On a terminal each level has its own background, dark ones with white ink; NO_COLOR keeps the characters."""
    code, coloured = in_terminal(["compute", str(STORM), "--heatmap"], 80, COLORTERM="truecolor")
    assert code == 0, coloured
    inks = {background: ink for ink, background in re.findall(r"\x1b\[(3[07]);48;2;([0-9;]+)m", coloured)}
    assert inks["223;236;247"] == "30" and inks["8;48;107"] == "37"  # black on the lightest, white on the darkest
    assert len(set(re.findall(r"48;2;([0-9;]+)m", coloured))) == 8  # the swatch's eight levels, each its own
    grid = coloured[coloured.index("Attention weights") : coloured.index("\x1b[2mBars")]
    bars = re.findall(r"\x1b\[([0-9;]*)m([▁▂▃▄▅▆▇█])", grid)
    assert len(bars) == 2 * 7 + 8 and {style for style, _ in bars} == {"38;2;33;113;181"}  # one blue, no background
    code, plain = in_terminal(["compute", str(STORM), "--heatmap"], 80, NO_COLOR="1")
    assert code == 0 and not ANSI.search(plain)
    assert "0.4061█" in plain and "0.0487▁" in plain


def test_in_html_every_bar_is_a_blue_bar_beside_its_number_not_a_box_over_it(tmp_path: Path) -> None:
    """--html drew each bar in its number's ink (black, or grey #c0c0c0) over the cell's colour: boxes that hid
    the shading. Now a bar is a glyph in the scale's blue on the page, and the colour is the number's."""
    page = tmp_path / "storm.html"
    assert run(str(STORM), "--heatmap", "--html", str(page), "-q").exit_code == 0
    html = page.read_text(encoding="utf-8")
    grid = html[html.index("Attention weights") : html.index("Bars and colours")]
    bars = re.findall(r'<span style="([^"]*)">([▁▂▃▄▅▆▇█])</span>', grid)
    assert len(bars) == 2 * 7 + 8  # two queries' weights over seven keys, and the legend's eight levels
    assert {style for style, _ in bars} == {"color: #2171b5; text-decoration-color: #2171b5"}
    numbers = re.findall(r'<span style="([^"]*)">(0\.\d{4})</span>', grid)
    assert len(numbers) == 2 * 7 and all("background-color: #" in style for style, _ in numbers)


def test_the_large_summary_lists_no_masked_key(tmp_path: Path) -> None:
    """20 tokens under --mask causal: query t3 may use t1..t3 only, so its top keys are those three."""
    rng = np.random.default_rng(5)
    for name in ("q", "k", "v"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((20, 2)))
    args = [f"--{n}=@{tmp_path / (n[0] + '.npy')}" for n in ("queries", "keys", "values")]
    text = run(*args, "--mask", "causal", "--follow", "t3", "--format", "text").stdout
    table = text.split("Query 't3'")[1].split("\n\n")[0]
    listed = [row.split()[1] for row in table.splitlines() if row.split() and row.split()[0].isdigit()]
    assert sorted(listed) == ["t1", "t2", "t3"]
    assert "−∞" not in table


@pytest.mark.parametrize(
    "args", [[str(SAMPLES / "two_heads.yaml"), "--heatmap"], [str(SAMPLES / "layers.yaml")], [str(CAUSAL)]]
)
def test_the_caution_is_said_once_however_many_maps(args: list[str]) -> None:
    from attncli.i18n import en

    text = " ".join(run(*args, "--format", "text", columns=200).stdout.split())
    maps = text.count(en.MESSAGES["render.weight_matrix_title"]) + text.count(
        en.MESSAGES["render.weight_matrix_title_keys"]
    )
    assert maps >= 1
    assert text.count(en.MESSAGES["analysis.caution_map"]) == 1
