"""`--figure FILE.svg|.png|.pdf`: the attention weights as a real heatmap, for a paper or slides.

One panel per head (queries down, keys across, the weight in each cell), the heads' mean
weights when there are several, and with `--norms` the ‖α·f(x)‖ panel beside each. matplotlib
is an optional extra, imported here only, through its object API (no pyplot, no global state):
other commands start as fast as before. Metadata is fixed, so the same problem gives the same
bytes and tests can compare structure.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from attncli.core import Steps
from attncli.errors import fail
from attncli.i18n import t

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.collections import QuadMesh
    from matplotlib.figure import Figure

    from attncli.probes import Comparison, Norms

SUFFIXES = {".svg": "svg", ".png": "png", ".pdf": "pdf"}
METADATA = {
    "svg": {"Date": None, "Creator": "attncli"},
    "pdf": {"CreationDate": None, "ModDate": None, "Creator": "attncli", "Producer": "attncli"},
    "png": {"Software": "attncli"},
}
CELL_INCHES = 0.62  # a cell holds "0.00" in 8-point type
ANNOTATE_UP_TO = 24  # queries and keys; beyond, the cells are too small for their numbers
LABEL_UP_TO = 64  # beyond, every n-th token is labelled
DECIMALS = 2  # of the numbers in the cells; the colour bar and --format json carry the rest
CMAP = "Blues"  # the terminal heatmap's colours
DARK_BELOW = 0.45  # a cell this dark (relative luminance) gets white ink


@dataclass(frozen=True)
class Panel:
    """One grid of the figure: its title, rows and columns, values (nan where masked) and colour-bar label."""

    title: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    values: np.ndarray
    label: str


def figure_format(path: Path) -> str:
    """svg, png or pdf from the file's suffix; anything else is a usage error naming the choices."""
    fmt = SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise fail("figure.bad_suffix", path=str(path), suffixes=", ".join(SUFFIXES))
    return fmt


def compute_figure(steps: Steps, norms: Norms | None, path: Path) -> bytes:
    """The figure of one problem: a row of panels per head, then the heads' mean when there are several."""
    fmt = figure_format(path)
    return _draw(panels(steps, norms), _title(steps), fmt)


def compare_figure(record: Comparison, path: Path) -> bytes:
    """Problem A's panels above problem B's, on one colour scale."""
    fmt = figure_format(path)
    grid = [
        [Panel(f"{side}: {panel.title}", *_fields(panel)) for panel in row]
        for side, steps in (("A", record.a), ("B", record.b))
        for row in panels(steps, None)
    ]
    return _draw(grid, f"A: {_title(record.a)}\nB: {_title(record.b)}", fmt)


def _fields(panel: Panel) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray, str]:
    return panel.rows, panel.columns, panel.values, panel.label


def panels(steps: Steps, norms: Norms | None) -> list[list[Panel]]:
    """The grid of panels: per head [weights, ‖α·f(x)‖]; with several heads a last row of their mean
    weights and the summed norms (the mean is of the weights, not of what W_O makes of the outputs)."""
    problem = steps.problem
    masked = ~problem.mask
    shape = (problem.query_tokens, problem.tokens)
    weight, norm = t("figure.weight"), "‖α·f(x)‖"
    several = len(steps.heads) > 1
    grid = []
    for h, head in enumerate(steps.heads):
        name = head.spec.label if several else t("figure.weights")
        row = [Panel(name, *shape, np.where(masked, np.nan, head.weights), weight)]
        if norms is not None:
            row.append(Panel(f"{name}: {norm}", *shape, np.where(masked, np.nan, norms.heads[h].weighted), norm))
        grid.append(row)
    if several:
        mean = np.where(masked, np.nan, np.mean([head.weights for head in steps.heads], axis=0))
        row = [Panel(t("figure.mean"), *shape, mean, weight)]
        if norms is not None:
            summed = "‖Σ_h α^h·f_h(x)‖"
            row.append(Panel(t("figure.summed", norm=summed), *shape, np.where(masked, np.nan, norms.summed), summed))
        grid.append(row)
    return grid


def _title(steps: Steps) -> str:
    problem = steps.problem
    return problem.title or Path(problem.source).name or "attncli"


def _draw(grid: list[list[Panel]], title: str, fmt: str) -> bytes:
    """Lay the panels out, each cell sized for its number, and save them in `fmt` with fixed metadata."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise fail("figure.needs_matplotlib") from None
    matplotlib.rcParams["svg.hashsalt"] = "attncli"
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: searchable, and smaller
    matplotlib.rcParams["pdf.fonttype"] = 42
    n_rows, n_columns = len(grid), max(len(row) for row in grid)
    first = grid[0][0]
    cell = CELL_INCHES if max(len(first.rows), len(first.columns)) <= ANNOTATE_UP_TO else 0.12
    label = 0.09 * max(len(name) for name in (*first.rows, *first.columns))  # the longest token, in inches
    panel_w = len(first.columns) * cell + label + 1.6  # + the colour bar
    panel_h = len(first.rows) * cell + label + 0.9
    fig = Figure(figsize=(max(4.0, panel_w * n_columns), max(3.0, panel_h * n_rows + 0.6)), layout="constrained")
    fig.suptitle(title)
    axes = fig.subplots(n_rows, n_columns, squeeze=False)
    scales = [1e-12] * n_columns  # per column: its panels share one colour bar
    for row in grid:
        for c, panel in enumerate(row):
            if np.isfinite(panel.values).any():
                scales[c] = max(scales[c], float(np.nanmax(panel.values)))
    meshes: dict[int, list] = {}
    for r, row in enumerate(grid):
        for c in range(n_columns):
            if c < len(row):
                meshes.setdefault(c, []).append((axes[r][c], _panel(axes[r][c], row[c], scales[c])))
            else:
                axes[r][c].set_axis_off()
    for c, drawn in meshes.items():  # one colour bar per column: its panels share the scale
        bar = fig.colorbar(drawn[0][1], ax=[ax for ax, _ in drawn], shrink=0.8, aspect=30)
        bar.set_label(grid[0][c].label)
    _footer(fig, grid, annotated=max(len(first.rows), len(first.columns)) <= ANNOTATE_UP_TO)
    buffer = io.BytesIO()
    # bbox_inches="tight": the figure grows to hold a long title or footnote instead of cutting it
    fig.savefig(buffer, format=fmt, metadata=METADATA[fmt], dpi=150 if fmt == "png" else "figure", bbox_inches="tight")
    return buffer.getvalue()


def _footer(fig: Figure, grid: list[list[Panel]], annotated: bool) -> None:
    """Under the panels: the hatching's meaning when a cell is masked, and the cells' rounding."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = []
    if any(np.isnan(panel.values).any() for row in grid for panel in row):
        handles.append(Patch(facecolor="white", edgecolor="0.6", hatch="///", label=t("figure.masked_legend")))
    if annotated:
        handles.append(Line2D([], [], linestyle="none", label=t("figure.cells_decimals", decimals=DECIMALS)))
    if handles:
        fig.legend(handles=handles, loc="outside lower center", fontsize=8, frameon=False, handlelength=2)


def _panel(ax: Axes, panel: Panel, top: float) -> QuadMesh:
    """One heatmap: cells coloured on [0, top], numbered when they are large enough, masked cells hatched."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize
    from matplotlib.patches import Rectangle

    cmap = colormaps[CMAP]
    norm = Normalize(0.0, top)
    values = np.ma.masked_invalid(panel.values)
    mesh = ax.pcolormesh(values, cmap=cmap, norm=norm, edgecolors="white", linewidth=0.5)
    ax.set_xlim(0, len(panel.columns))
    ax.set_ylim(len(panel.rows), 0)  # the first query on top
    ax.set_aspect("equal")
    ax.set_title(panel.title, fontsize=10)
    ax.set_xlabel(t("figure.keys"))
    ax.set_ylabel(t("figure.queries"))
    _ticks(ax.xaxis, panel.columns, rotation=45)
    _ticks(ax.yaxis, panel.rows, rotation=0)
    annotate = max(len(panel.rows), len(panel.columns)) <= ANNOTATE_UP_TO
    for (i, j), value in np.ndenumerate(panel.values):
        if np.isnan(value):
            ax.add_patch(Rectangle((j, i), 1, 1, fill=False, hatch="///", edgecolor="0.6", linewidth=0))
            if annotate:
                ax.text(
                    j + 0.5,
                    i + 0.5,
                    t("figure.masked"),
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="0.2",
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1},
                )
        elif annotate:
            r, g, b, _ = cmap(norm(value))
            ink = "white" if 0.2126 * r + 0.7152 * g + 0.0722 * b < DARK_BELOW else "black"
            ax.text(j + 0.5, i + 0.5, f"{value:.{DECIMALS}f}", ha="center", va="center", fontsize=8, color=ink)
    return mesh


def _ticks(axis: Axis, names: tuple[str, ...], rotation: int) -> None:
    """Every token at its cell's centre, or every n-th when there are too many to read."""
    step = max(1, -(-len(names) // LABEL_UP_TO))
    chosen = range(0, len(names), step)
    axis.set_ticks([i + 0.5 for i in chosen], [names[i] for i in chosen], fontsize=8)
    if rotation:
        for label in axis.get_ticklabels():
            label.set(rotation=rotation, ha="right", rotation_mode="anchor")
