"""`--figure FILE.svg|.png|.pdf`: the attention weights as a real heatmap, for a paper or slides.

One panel per head (queries down, keys across, the weight in each cell), the heads' mean
weights when there are several, and with `--norms` the ‖α·f(x)‖ panel beside each. A problem
past the size where the terminal condenses (`formats.condensed`) is drawn as the terminal's summary
draws it: each panel a map of block means (`core.Overview`), so that the picture, its time and its
memory stay bounded whatever the number of tokens. A PNG is at most MAX_PIXELS a side; a figure
that would need more panels than that holds legibly is refused. matplotlib is an optional extra,
imported here only, through its object API (no pyplot, no global state): other commands start as
fast as before. Text is drawn as written (a `$` in a name is a dollar, not mathtext). Metadata is
fixed, so the same problem gives the same bytes and tests can compare structure.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from attncli import core
from attncli.core import Edges, Overview, Steps
from attncli.errors import fail
from attncli.i18n import t
from attncli.render.formats import condensed

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.collections import QuadMesh
    from matplotlib.figure import Figure

    from attncli.layers import StackSteps
    from attncli.probes import Comparison, Norms
    from attncli.problem import Problem, Stack

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
MAP_SHAPE = (96, 96)  # at most this many blocks of queries × keys in a condensed problem's map
MAP_INCHES = 4.8  # the side of a map, whatever the number of tokens
MAP_LABELS = 16  # tokens named along each side of a map
DPI = 150  # a PNG's resolution, lowered as far as MIN_DPI to keep within MAX_PIXELS
MAX_PIXELS = 2000  # a PNG's longest side
MIN_DPI = 60  # below this 8-point text is no longer legible: a figure that would need less is refused
WRAP_FROM = 4  # heads (with their mean) from which the panels are laid out in a grid rather than a column
PAD_INCHES = 0.1  # matplotlib's margin around a tight bounding box


@dataclass(frozen=True)
class Panel:
    """One grid of the figure: its title, rows and columns, values (nan where masked) and colour-bar label.

    A map (`edges` given) has one value per block of rows and columns, from edges[0] and edges[1].
    """

    title: str
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    values: np.ndarray
    label: str
    edges: Edges | None = None


def figure_format(path: Path) -> str:
    """svg, png or pdf from the file's suffix; anything else is a usage error naming the choices."""
    fmt = SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise fail("figure.bad_suffix", path=str(path), suffixes=", ".join(SUFFIXES))
    return fmt


def compute_figure(
    steps: Steps,
    norms: Norms | None,
    path: Path,
    title: str | None = None,
    rollout: tuple[int, np.ndarray] | None = None,
) -> bytes:
    """The figure of one problem: a row of panels per head, then the heads' mean when there are several;
    past the terminal's size, their maps of block means. `title` replaces the problem's own; `rollout`
    (through layer number, (S, S)) adds a panel of a stack's attention rollout."""
    fmt = figure_format(path)
    problem = steps.problem
    edges = None
    if condensed(problem):
        found = core.overview(steps, (), MAP_SHAPE, MAP_SHAPE)
        grid, edges = map_panels(found, norms), found.fine_edges
    else:
        grid = panels(steps, norms)
    if rollout is not None:
        number, flow = rollout
        values = flow if edges is None else core.block_map(flow, edges)
        names = (problem.query_tokens, problem.tokens)
        grid.append([Panel(t("figure.rollout", number=number), *names, values, t("figure.rollout_label"), edges)])
    grid = _wrapped(grid)
    return _draw(grid, title or _title(problem), fmt, _footer_notes(grid, problem))


def layer_figure(steps: StackSteps, layer: int, rollout: np.ndarray | None, path: Path) -> bytes:
    """Layer number `layer` of a stack, drawn as `compute_figure` draws a problem, and `rollout` through it."""
    record = steps.layers[layer - 1]
    name = t("render.layer_title", number=layer, count=len(steps.layers), name=record.layer.label).strip()
    flow = None if rollout is None else (layer, rollout)
    return compute_figure(record.attention, None, path, f"{_title(steps.stack)}\n{name}", flow)


def overview_figure(found: Overview, path: Path, norms: Norms | None = None, title: str | None = None) -> bytes:
    """A condensed problem's figure from the summary's record: each head's map of `found.fine_edges` blocks."""
    fmt = figure_format(path)
    grid = _wrapped(map_panels(found, norms))
    return _draw(grid, title or _title(found.problem), fmt, _footer_notes(grid, found.problem))


def compare_figure(record: Comparison, path: Path) -> bytes:
    """Problem A's panels above problem B's, on one colour scale (maps of block means past the terminal's size)."""
    fmt = figure_format(path)
    grid = []
    for side, steps in (("A", record.a), ("B", record.b)):
        if condensed(steps.problem):
            rows = map_panels(core.overview(steps, (), MAP_SHAPE, MAP_SHAPE), None)
        else:
            rows = panels(steps, None)
        grid += [[Panel(f"{side}: {panel.title}", *_fields(panel)) for panel in row] for row in rows]
    title = f"A: {_title(record.a.problem)}\nB: {_title(record.b.problem)}"
    return _draw(grid, title, fmt, _footer_notes(grid, record.a.problem, record.b.problem))


def _fields(panel: Panel) -> tuple[tuple[str, ...], tuple[str, ...], np.ndarray, str, Edges | None]:
    return panel.rows, panel.columns, panel.values, panel.label, panel.edges


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


def map_panels(found: Overview, norms: Norms | None) -> list[list[Panel]]:
    """`panels` for a condensed problem: each head's map of block means (masked cells count as weight 0),
    the heads' mean map, and with `norms` the maps of ‖α·f(x)‖ beside them."""
    problem, (edges, maps) = found.problem, _fine_maps(found)
    shape = (problem.query_tokens, problem.tokens)
    weight, norm = t("figure.block_weight"), t("figure.block_norm", norm="‖α·f(x)‖")
    several = len(found.heads) > 1
    grid = []
    for h, fine in enumerate(maps):
        name = problem.heads[h].label if several else t("figure.weights")
        row = [Panel(name, *shape, fine, weight, edges)]
        if norms is not None:
            weighted = core.block_map(norms.heads[h].weighted, edges)
            row.append(Panel(f"{name}: ‖α·f(x)‖", *shape, weighted, norm, edges))
        grid.append(row)
    if several:
        row = [Panel(t("figure.mean"), *shape, np.mean(maps, axis=0), weight, edges)]
        if norms is not None:
            summed = "‖Σ_h α^h·f_h(x)‖"
            label = t("figure.block_norm", norm=summed)
            mean = core.block_map(norms.summed, edges)
            row.append(Panel(t("figure.summed", norm=summed), *shape, mean, label, edges))
        grid.append(row)
    return grid


def _fine_maps(found: Overview) -> tuple[Edges, list[np.ndarray]]:
    """The blocks of the maps a figure draws, and each head's map: the overview's fine ones, which a figure's
    overview asks for (`core.overview(..., fine)`); a ValueError for one made without them."""
    maps = [head.fine for head in found.heads if head.fine is not None]
    if found.fine_edges is None or len(maps) < len(found.heads):
        raise ValueError("a figure draws an overview's fine maps: core.overview(steps, rows, shape, fine)")
    return found.fine_edges, maps


def _wrapped(grid: list[list[Panel]]) -> list[list[Panel]]:
    """The rows of `grid` (a head each) side by side in a grid as near square as can be, from WRAP_FROM rows:
    a column of many heads would be too tall for any picture."""
    if len(grid) < WRAP_FROM:
        return grid
    width, height = _panel_inches(grid[0][0])
    across = len(grid[0])
    per_row = min(range(1, len(grid) + 1), key=lambda k: max(k * across * width, -(-len(grid) // k) * height))
    return [[panel for row in grid[start : start + per_row] for panel in row] for start in range(0, len(grid), per_row)]


def _title(problem: Problem | Stack) -> str:
    return problem.title or Path(problem.source).name or "attncli"


def _footer_notes(grid: list[list[Panel]], *problems: Problem) -> list[str]:
    """Under the panels, besides the masked cells' legend: the cells' rounding, or what a map's block is."""
    first = grid[0][0]
    if first.edges is None:
        annotated = max(len(first.rows), len(first.columns)) <= ANNOTATE_UP_TO
        return [t("figure.cells_decimals", decimals=DECIMALS)] if annotated else []
    from attncli.render.formats import every_number

    notes = []
    for problem in problems:
        rows, columns = (math.ceil(count / most) for count, most in zip(problem.mask.shape, MAP_SHAPE))
        notes.append(t("figure.map_note", rows=rows, columns=columns, every=every_number(problem)))
    return list(dict.fromkeys(notes))


def _panel_inches(panel: Panel) -> tuple[float, float]:
    """A panel's width and height with its labels and colour bar, in inches."""
    label = 0.09 * max(len(name) for name in (*panel.rows, *panel.columns))  # the longest token, in inches
    if panel.edges is not None:
        return MAP_INCHES + label + 1.6, MAP_INCHES + label + 0.9
    cell = CELL_INCHES if max(len(panel.rows), len(panel.columns)) <= ANNOTATE_UP_TO else 0.12
    return len(panel.columns) * cell + label + 1.6, len(panel.rows) * cell + label + 0.9


def _draw(grid: list[list[Panel]], title: str, fmt: str, notes: list[str]) -> bytes:
    """Lay the panels out, each cell sized for its number, and save them in `fmt` with fixed metadata."""
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise fail("figure.needs_matplotlib") from None
    n_rows, n_columns = len(grid), max(len(row) for row in grid)
    panel_w, panel_h = _panel_inches(grid[0][0])
    size = (max(4.0, panel_w * n_columns), max(3.0, panel_h * n_rows + 0.6))
    if max(size) * MIN_DPI > MAX_PIXELS:
        panels = sum(len(row) for row in grid)
        raise fail("figure.too_many_panels", panels=panels, pixels=MAX_PIXELS)
    with matplotlib.rc_context(
        {
            "svg.hashsalt": "attncli",
            "svg.fonttype": "none",  # text stays text: searchable, and smaller
            "pdf.fonttype": 42,
            "text.parse_math": False,  # a token, title or file name with $ in it is drawn as written
        }
    ):
        fig = Figure(figsize=size, layout="constrained")
        fig.suptitle(title)
        axes = fig.subplots(n_rows, n_columns, squeeze=False)
        tops: dict[str, float] = {}  # panels of one quantity (their label) share one colour scale and bar
        for panel in (panel for row in grid for panel in row):
            finite = np.isfinite(panel.values)
            top = float(np.max(panel.values[finite])) if finite.any() else 0.0
            tops[panel.label] = max(tops.get(panel.label, 1e-12), top)
        meshes: dict[str, list] = {}
        for r, row in enumerate(grid):
            for c in range(n_columns):
                if c < len(row):
                    mesh = _panel(axes[r][c], row[c], tops[row[c].label])
                    meshes.setdefault(row[c].label, []).append((axes[r][c], mesh))
                else:
                    axes[r][c].set_axis_off()
        for label, drawn in meshes.items():
            bar = fig.colorbar(drawn[0][1], ax=[ax for ax, _ in drawn], shrink=0.8, aspect=30)
            bar.set_label(label)
        _footer(fig, grid, notes)
        buffer = io.BytesIO()
        # bbox_inches="tight": the figure grows to hold a long title or footnote instead of cutting it
        dpi = _png_dpi(fig) if fmt == "png" else "figure"
        fig.savefig(buffer, format=fmt, metadata=METADATA[fmt], dpi=dpi, bbox_inches="tight", pad_inches=PAD_INCHES)
    return buffer.getvalue()


def _png_dpi(fig: Figure) -> float:
    """DPI, or less so that the picture as saved (its tight box) is at most MAX_PIXELS a side."""
    fig.draw_without_rendering()
    box = fig.get_tightbbox()
    longest = max(box.width, box.height) + 2 * PAD_INCHES
    return min(DPI, math.floor(MAX_PIXELS / longest * 100) / 100)


def _footer(fig: Figure, grid: list[list[Panel]], notes: list[str]) -> None:
    """Under the panels: the hatching's meaning when a cell is masked, then `notes`."""
    from matplotlib.artist import Artist
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles: list[Artist] = []
    if any(np.isnan(panel.values).any() for row in grid for panel in row):
        handles.append(Patch(facecolor="white", edgecolor="0.6", hatch="///", label=t("figure.masked_legend")))
    handles += [Line2D([], [], linestyle="none", label=note) for note in notes]
    if handles:
        fig.legend(handles=handles, loc="outside lower center", fontsize=8, frameon=False, handlelength=2)


def _panel(ax: Axes, panel: Panel, top: float) -> QuadMesh:
    """One heatmap coloured on [0, top]: a map of blocks, or cells numbered when they are large enough."""
    from matplotlib import colormaps
    from matplotlib.colors import Normalize

    cmap = colormaps[CMAP]
    norm = Normalize(0.0, top)
    rows, columns = len(panel.rows), len(panel.columns)
    ax.set_title(panel.title, fontsize=10)
    ax.set_xlabel(t("figure.keys"))
    ax.set_ylabel(t("figure.queries"))
    if panel.edges is not None:
        row_edges, column_edges = panel.edges
        mesh = ax.pcolormesh(column_edges, row_edges, panel.values, cmap=cmap, norm=norm)
        ax.set_xlim(0, columns)
        ax.set_ylim(rows, 0)  # the first query on top
        _ticks(ax.xaxis, panel.columns, 45, MAP_LABELS)
        _ticks(ax.yaxis, panel.rows, 0, MAP_LABELS)
        return mesh
    values = np.ma.masked_invalid(panel.values)
    mesh = ax.pcolormesh(values, cmap=cmap, norm=norm, edgecolors="white", linewidth=0.5)
    ax.set_xlim(0, columns)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    _ticks(ax.xaxis, panel.columns, 45, LABEL_UP_TO)
    _ticks(ax.yaxis, panel.rows, 0, LABEL_UP_TO)
    masked = np.isnan(panel.values)
    _hatch(ax, masked)
    if max(rows, columns) > ANNOTATE_UP_TO:
        return mesh
    for (i, j), value in np.ndenumerate(panel.values):
        if masked[i, j]:
            box = {"facecolor": "white", "edgecolor": "none", "pad": 1}
            ax.text(j + 0.5, i + 0.5, t("figure.masked"), ha="center", va="center", fontsize=6, color="0.2", bbox=box)
        else:
            r, g, b, _ = cmap(norm(value))
            ink = "white" if 0.2126 * r + 0.7152 * g + 0.0722 * b < DARK_BELOW else "black"
            ax.text(j + 0.5, i + 0.5, f"{value:.{DECIMALS}f}", ha="center", va="center", fontsize=8, color=ink)
    return mesh


def _hatch(ax: Axes, masked: np.ndarray) -> None:
    """The masked cells hatched, as one path of squares: one artist however many cells (a patch each took
    20 s for 200 causal tokens)."""
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as Outline

    i, j = np.nonzero(masked)
    if not len(i):
        return
    corners = np.stack([np.stack([j + dx, i + dy], axis=1) for dx, dy in ((0, 0), (1, 0), (1, 1), (0, 1), (0, 0))], 1)
    square = [Outline.MOVETO, Outline.LINETO, Outline.LINETO, Outline.LINETO, Outline.CLOSEPOLY]
    outline = Outline(corners.reshape(-1, 2), np.tile(square, len(i)))  # (5·n, 2) the squares' corners
    ax.add_patch(PathPatch(outline, fill=False, hatch="///", edgecolor="0.6", linewidth=0))


def _ticks(axis: Axis, names: tuple[str, ...], rotation: int, most: int) -> None:
    """Every token at its cell's centre, or every n-th when there are more than `most` to read."""
    step = max(1, -(-len(names) // most))
    chosen = range(0, len(names), step)
    axis.set_ticks([i + 0.5 for i in chosen], [names[i] for i in chosen], fontsize=8)
    if rotation:
        for label in axis.get_ticklabels():
            label.set(rotation=rotation, ha="right", rotation_mode="anchor")
