"""The --svg, --html and --figure exports opened in a real browser: headless Chromium takes a screenshot of each.

A file that a browser cannot draw (a broken SVG, an HTML page whose text is invisible) shows as a blank or
near-blank screenshot. The check reads the pixels: enough variance, and rows of ink shaped like lines of
text (many changes of colour along a row, in bands separated by background). A blank page, drawn by the
same browser, fails that check: the test of the check itself. Skipped where Chromium is not installed
(Debian: `apt-get install chromium`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from PIL import Image

from tests.paths import SAMPLES

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (  # as root, on a machine with no display and no network: nothing started that would wait or call out
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
WINDOW = (1000, 1400)
CHANGES = 12  # colour changes along a row of pixels that make it a row of text, not a border or a fill
pytestmark = pytest.mark.skipif(BROWSER is None, reason="Chromium is not installed")


def screenshot(page: Path, tmp_path: Path, mode: str = "L") -> np.ndarray:
    """The page as Chromium draws it, in grey levels 0-255 (or RGB, `mode`)."""
    shot = tmp_path / f"{page.name}.png"
    done = subprocess.run(
        [
            BROWSER,
            *FLAGS,
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--window-size={WINDOW[0]},{WINDOW[1]}",
            f"--screenshot={shot}",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    return np.asarray(Image.open(shot).convert(mode), dtype=float)


def text_lines(grey: np.ndarray) -> int:
    """How many bands of rows look like text: many changes of level along each row, background between bands."""
    changes = (np.abs(np.diff(grey, axis=1)) > 40).sum(axis=1)
    texty = changes >= CHANGES
    return int(np.count_nonzero(texty[1:] & ~texty[:-1]) + texty[0])


def attncli(*args: str, cwd: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), "LC_ALL": "C"}
    env.pop("NO_COLOR", None)
    done = subprocess.run(["python", "-m", "attncli", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def expected_lines(path: Path) -> int:
    """Lines of text an export of the sample must show at least: a line for each query's key in each table."""
    problem = yaml.safe_load(path.read_text(encoding="utf-8"))
    return len(problem["query_tokens"]) * 3 * len(problem["tokens"])


EXPORTS = {
    "terminal.svg": ("--svg",),
    "terminal.html": ("--html",),
    "plain.svg": ("--svg", "--no-color"),
    "plain.html": ("--html", "--no-color"),
}


@pytest.mark.parametrize("name", EXPORTS)
def test_an_export_draws_its_text(tmp_path: Path, name: str) -> None:
    sample = SAMPLES / "storm_causal.yaml"
    page = tmp_path / name
    flag, *rest = EXPORTS[name]
    attncli("compute", str(sample), "--heatmap", flag, str(page), *rest, "-q", cwd=tmp_path)
    grey = screenshot(page, tmp_path)
    assert grey.std() > 20, grey.std()
    assert text_lines(grey) >= expected_lines(sample), text_lines(grey)


@pytest.mark.parametrize("flag", ["--svg", "--html"])
def test_no_color_takes_the_colour_out_of_the_exports(tmp_path: Path, flag: str) -> None:
    """The coloured export has saturated pixels (green ●, cyan bars, the blue heatmap); with --no-color none."""
    saturated = {}
    for name, extra in (("colour", ()), ("plain", ("--no-color",))):
        page = tmp_path / f"{name}{flag.replace('--', '.')}"
        attncli("compute", str(SAMPLES / "storm_causal.yaml"), "--heatmap", flag, str(page), *extra, "-q", cwd=tmp_path)
        rgb = screenshot(page, tmp_path, "RGB")[60:]  # below the SVG's window buttons (red, amber, green)
        saturated[name] = float(((rgb.max(axis=2) - rgb.min(axis=2)) > 60).mean())
    assert saturated["colour"] > 1e-3 and saturated["plain"] < 1e-5, saturated


def test_a_figure_draws_its_grid(tmp_path: Path) -> None:
    """--figure FILE.svg (matplotlib's heatmap): many levels of colour, and the labels and numbers as text."""
    pytest.importorskip("matplotlib")
    page = tmp_path / "figure.svg"
    attncli("compute", str(SAMPLES / "storm_causal.yaml"), "--figure", str(page), "-q", cwd=tmp_path)
    grey = screenshot(page, tmp_path)
    assert grey.std() > 20 and len(np.unique(grey.round(-1))) >= 10
    assert text_lines(grey) >= 5


def test_a_blank_page_fails_the_check(tmp_path: Path) -> None:
    """What the check sees in a page with nothing drawn: no variance and no line of text."""
    page = tmp_path / "blank.html"
    page.write_text('<!DOCTYPE html><html><body style="background:#fff"><pre style="color:#fff">hidden</pre>')
    grey = screenshot(page, tmp_path)
    assert grey.std() < 1 and text_lines(grey) == 0
