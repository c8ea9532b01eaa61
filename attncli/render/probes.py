"""Views of the probes' records (attncli.probes): heatmaps, norms, interventions, comparisons, the √d_k table.

Every number goes through `written.fixed` and every table through `layout.table`,
so nothing is cut at any width. Colour only repeats what the text already says:
a heatmap cell carries its number and a shade character, for plain text too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attncli.core import HeadSteps, Steps
from attncli.errors import printable
from attncli.i18n import t
from attncli.problem import Problem
from attncli.render.layout import BLANK, Cell, Line, Span, bar, line, plain, table, width_of
from attncli.written import fixed, vector

if TYPE_CHECKING:
    from attncli.probes import Comparison, Intervention, Norms, Ranking, Scaling

# The heatmap's eight steps: bars of rising height, so that plain text carries the level, on backgrounds of
# evenly falling lightness (matplotlib's "Blues"), with black ink on the four light ones and white on the dark.
# A bar stands beside its number's background, in one blue that reads on a light page and a dark terminal alike:
# drawn in the number's ink over the background it read as a black or grey box over the cell (in an --html page).
BARS = "▁▂▃▄▅▆▇█"
BACKGROUNDS = ("#dfecf7", "#c7dcef", "#9fcae1", "#6caed6", "#4292c6", "#2171b5", "#08519c", "#08306b")
BAR_INK = BACKGROUNDS[5]
COMPACT_DECIMALS = 2  # the rounding of the compact grid, when the full precision does not fit
MASKED_CELL = "·"
DISAGREE = "≠"
CHART_WIDTH = 30


CAUTION_STYLE = "italic yellow"


def _caution(key: str) -> Line:
    return line((t(key), CAUTION_STYLE))


def cautioned_once(lines: Sequence[Line]) -> list[Line]:
    """`lines` with each caution said once: every head's map (and every layer's) would repeat the same words."""
    said: set[Line] = set()
    out = []
    for current in lines:
        if len(current) == 1 and current[0][1] == CAUTION_STYLE:
            if current in said:
                continue
            said.add(current)
        out.append(current)
    return out


# Heatmaps


class _Grid(NamedTuple):
    """One way to lay the heatmap out: decimals per cell (None: bars only), numbered columns, the gap."""

    decimals: int | None
    numbered: bool
    gap: int


def heatmap(head: HeadSteps, problem: Problem, precision: int, width: int) -> list[Line]:
    """One head's weights as a grid of numbers with bars, in the first layout that fits `width`.

    Keys are the rows when there are fewer queries than keys (a tall grid fits where a wide one does not).
    Bars and colours step in eighths of the head's largest weight, so that a row's weights are told apart
    even when all are small; the legend gives the scale. Then, in order: numbered columns, 2 decimals,
    bars alone; a stacked list only when even that does not fit.
    """
    by_key = len(problem.query_tokens) < len(problem.tokens)
    weights = np.where(problem.mask, head.weights, np.nan)
    if by_key:
        weights = weights.T
    rows, columns = (problem.tokens, problem.query_tokens) if by_key else (problem.query_tokens, problem.tokens)
    title = t("render.weight_matrix_title_keys" if by_key else "render.weight_matrix_title")
    return weight_map(weights, rows, columns, title, precision, width, "analysis.caution_map", by_key)


def weight_map(
    weights: np.ndarray,
    rows: Sequence[str],
    columns: Sequence[str],
    title: str,
    precision: int,
    width: int,
    caution: str,
    by_key: bool = False,
    largest_of: str = "analysis.largest_head",
) -> list[Line]:
    """Weights (rows × columns, nan where masked) as the heatmap's grid, its legend and the `caution` key's line;
    `largest_of` names, in the legend, what the bars are eighths of (a head's weights, their mean, a rollout)."""
    allowed = weights[~np.isnan(weights)]
    largest = float(allowed.max()) if allowed.size else 0.0
    layouts = [_Grid(precision, False, 2), _Grid(precision, True, 2), _Grid(precision, True, 1)]
    if precision > COMPACT_DECIMALS:
        layouts.append(_Grid(COMPACT_DECIMALS, True, 1))
    layouts.append(_Grid(None, True, 1))
    for layout in layouts:
        grid = _grid(layout, weights, rows, columns, largest, width)
        if grid is not None:
            notes = []
            if layout.numbered:
                names = ", ".join(f"{j + 1} {name}" for j, name in enumerate(columns))
                notes.append(t("analysis.heatmap_columns", names=names))
            if layout.decimals is None:
                notes.append(t("analysis.heatmap_bars_only"))
            elif layout.decimals < precision:
                notes.append(t("analysis.heatmap_rounded", decimals=layout.decimals))
            return [
                line((title, "bold")),
                *grid,
                *_legend(largest, precision, notes, largest_of),
                _caution(caution),
                BLANK,
            ]
    stacked = [[name, *(_heat_cell(w, largest, precision) for w in row)] for name, row in zip(rows, weights)]
    corner = t("render.key") if by_key else t("render.query")
    grid = table(title, [corner, *columns], stacked, width)[:-1]
    return [*grid, *_legend(largest, precision, [], largest_of), _caution(caution), BLANK]


def _grid(
    layout: _Grid, weights: np.ndarray, rows: Sequence[str], columns: Sequence[str], largest: float, width: int
) -> list[Line] | None:
    """The grid in `layout`, or None when it is wider than `width`."""
    cells = [[_heat_cell(w, largest, layout.decimals) for w in row] for row in weights]
    headers = [str(j + 1) for j in range(len(columns))] if layout.numbered else list(columns)
    label = max(width_of(name) for name in rows)
    sizes = [max(width_of(headers[j]), *(width_of(plain(row[j])) for row in cells)) for j in range(len(columns))]
    if label + sum(size + layout.gap for size in sizes) > width:
        return None
    gap = " " * layout.gap
    top = [(" " * label, "")]
    for header, size in zip(headers, sizes):
        top.append((gap + header.rjust(size), "bold"))
    out = [_trim(top)]
    for name, row in zip(rows, cells):
        spans: list[Span] = [(name.ljust(label), "")]
        for cell, size in zip(row, sizes):
            spans += [
                (gap + " " * (size - width_of(plain(cell))), ""),
                *(cell if isinstance(cell[0], tuple) else [cell]),
            ]
        out.append(_trim(spans))
    return out


def _trim(spans: list[Span]) -> Line:
    return line(*spans[:-1], (spans[-1][0].rstrip(), spans[-1][1]))


def _heat_cell(weight: float, largest: float, decimals: int | None) -> Cell:
    """A weight as its number (when `decimals` is given) and its bar, on its background; masked (nan) as a dot."""
    if math.isnan(weight):
        return MASKED_CELL, "dim"
    level = _level(weight, largest)
    bar_text = BARS[level - 1] if level else " "
    text = bar_text if decimals is None else fixed(weight, decimals) + bar_text
    if not level:
        return text, ""
    bar_span = (bar_text, BAR_INK)
    if decimals is None:
        return bar_span
    ink = "black" if level <= len(BARS) // 2 else "white"
    return (fixed(weight, decimals), f"{ink} on {BACKGROUNDS[level - 1]}"), bar_span


def _level(weight: float, largest: float) -> int:
    """0 for a weight of 0, else 1 to 8: the eighth of the largest weight it falls in."""
    if weight <= 0 or largest <= 0:
        return 0
    return min(len(BARS), max(1, math.ceil(weight / largest * len(BARS))))


def _legend(largest: float, precision: int, notes: list[str], largest_of: str) -> list[Line]:
    """Each colour beside its bar, their scale (eighths of `largest`, which `largest_of` names), then what the
    layout changed."""
    swatch = [
        span
        for bar_text, colour in zip(BARS, BACKGROUNDS)
        for span in ((" ", f"on {colour}"), (bar_text, BAR_INK), (" ", ""))
    ]
    step = fixed(largest / len(BARS), precision)
    scale = t(
        "analysis.heatmap_scale",
        of_largest=t(largest_of),
        largest=fixed(largest, precision),
        step=step,
        masked=MASKED_CELL,
    )
    return [line(*swatch), *(line((note, "dim")) for note in [scale, *notes])]


# Norms


def norms(record: Norms, steps: Steps, precision: int, width: int) -> list[Line]:
    """Per head and query: α, ‖f(x)‖, ‖α·f(x)‖ and the two rankings; with several heads, the summed norms."""
    problem = steps.problem
    p = precision
    several = len(record.heads) > 1
    f_key = "analysis.norms_f_w_o" if record.through_w_o else "analysis.norms_f_v"
    out = [line((t("analysis.norms_heading"), "bold reverse")), line(t(f_key))]
    headers = [t("render.key"), "α", "‖f(x)‖", "‖α·f(x)‖", t("analysis.rank_weight"), t("analysis.rank_norm"), ""]
    for head, norm in zip(steps.heads, record.heads):
        for i, query in enumerate(problem.query_tokens):
            rows = []
            for j, key in enumerate(problem.tokens):
                alpha = _masked_or(problem.mask[i, j], head.weights[i, j], p)
                weighted = _masked_or(problem.mask[i, j], norm.weighted[i, j], p)
                rows.append([key, alpha, fixed(float(norm.transformed[j]), p), weighted, *_ranks(norm.ranking, i, j)])
            title = (
                t("analysis.norms_title_head", name=query, head=norm.name)
                if several
                else t("analysis.norms_title", name=query)
            )
            out += table(title, headers, rows, width, right=(1, 2, 3, 4, 5))
    if several:
        summed_headers = [t("render.key"), t("analysis.mean_weight"), "‖Σ_h α^h·f_h(x)‖", *headers[4:]]
        for i, query in enumerate(problem.query_tokens):
            rows = [
                [
                    key,
                    _masked_or(problem.mask[i, j], record.mean_weights[i, j], p),
                    _masked_or(problem.mask[i, j], record.summed[i, j], p),
                    *_ranks(record.summed_ranking, i, j),
                ]
                for j, key in enumerate(problem.tokens)
            ]
            out += table(t("analysis.summed_title", name=query), summed_headers, rows, width, right=(1, 2, 3, 4))
    if any(norm.ranking.disagree.any() for norm in record.heads) or (several and record.summed_ranking.disagree.any()):
        out.append(line(t("analysis.disagree_note", mark=DISAGREE)))
    return [*out, _caution("analysis.caution_norms"), BLANK]


def _masked_or(allowed: bool, value: float, precision: int) -> Cell:
    return fixed(float(value), precision) if allowed else (MASKED_CELL, "dim")


def _ranks(ranking: Ranking, i: int, j: int) -> list[Cell]:
    if not ranking.by_weight[i, j]:
        return ["", "", ""]
    flag = (DISAGREE, "bold red") if ranking.disagree[i, j] else ""
    return [str(ranking.by_weight[i, j]), str(ranking.by_norm[i, j]), flag]


# Interventions


def interventions(records: Sequence[Intervention], steps: Steps, precision: int, width: int) -> list[Line]:
    """Each intervention's weights beside the original ones, and how far the output moved."""
    problem = steps.problem
    p = precision
    several = len(steps.heads) > 1
    out: list[Line] = []
    for record in records:
        out.append(line((_describe(record, steps), "bold reverse")))
        for i, query in enumerate(problem.query_tokens):
            headers = [t("render.key")]
            for head in steps.heads:
                prefix = f"{head.spec.label}: " if several else ""
                headers += [prefix + t("analysis.before"), prefix + t("analysis.after")]
            rows = []
            for j, key in enumerate(problem.tokens):
                cells: list[Cell] = [key]
                for h, head in enumerate(steps.heads):
                    cells.append(_masked_or(problem.mask[i, j], head.weights[i, j], p))
                    cells.append(_masked_or(record.mask[i, j], record.weights[h, i, j], p))
                rows.append(cells)
            title = t("analysis.intervention_query", name=query)
            out += table(title, headers, rows, width, right=range(1, len(headers)))
            before, after = vector(steps.output[i], p), vector(record.output[i], p)
            out.append(line((t("analysis.output_change"), "bold"), f"{before} → ", (after, "bold green")))
            tv = ", ".join(
                (f"{head.spec.label}: " if several else "") + fixed(float(record.tv[h, i]), p)
                for h, head in enumerate(steps.heads)
            )
            out.append(line(t("analysis.change_line", delta=fixed(float(record.delta[i]), p), tv=tv)))
            out.append(BLANK)
    return [*out, _caution("analysis.caution_interventions"), BLANK]


def _describe(record: Intervention, steps: Steps) -> str:
    """The intervention in words; a zeroed head by its label, where JSON's `target` has its name."""
    if record.kind == "weights":
        kind, _, seed = record.target.partition(":")
        return t(f"analysis.kind_{kind}", seed=seed)
    if record.kind == "ablate_head":
        label = next(head.spec.label for head in steps.heads if head.spec.name == record.target)
        return t("analysis.kind_ablate_head", target=label)
    return t(f"analysis.kind_{record.kind}", target=record.target)


# Compare


def compare(record: Comparison, precision: int, width: int) -> list[Line]:
    """For every shared query: each problem's weights by position, then both outputs and their difference."""
    p = precision
    a, b = record.a.problem, record.b.problem
    out = [line(("A: ", "bold"), _name(a)), line(("B: ", "bold"), _name(b)), BLANK]
    several = len(record.a.heads) > 1 or len(record.b.heads) > 1
    for query in record.queries:
        out.append(line((t("render.query_heading", name=query.query), "bold reverse")))
        for pair, head_a, head_b in zip(query.heads, record.a.heads, record.b.heads):
            rows = []
            for j in range(max(len(a.tokens), len(b.tokens))):
                cells: list[Cell] = [str(j + 1)]
                cells += _side(a.tokens, query.allowed_a, pair.weights_a, j, p)
                cells += _side(b.tokens, query.allowed_b, pair.weights_b, j, p)
                difference = pair.difference
                cells.append("" if difference is None else fixed(float(difference[j]), p))
                rows.append(cells)
            headers = [t("summary.position"), "A", "α (A)", "B", "α (B)", "α (B) − α (A)"]
            title = (
                t("analysis.compare_weights", a=head_a.spec.label, b=head_b.spec.label)
                if several
                else t("analysis.compare_weights_one")
            )
            out += table(title, headers, rows, width, right=(2, 4, 5))
        rows = [["A", vector(query.output_a, p)], ["B", vector(query.output_b, p)]]
        if query.difference is not None:
            rows.append(["B − A", vector(query.difference, p)])
        out += table(t("render.outputs_title"), ["", t("render.output")], rows, width)
        if query.distance is not None:
            out.append(line(t("analysis.compare_distance", distance=fixed(query.distance, p))))
        out.append(BLANK)
    return out


def _name(problem: Problem) -> str:
    return f"{problem.title} ({printable(problem.source)})" if problem.title else printable(problem.source)


def _side(tokens: tuple[str, ...], allowed: np.ndarray, weights: np.ndarray, j: int, precision: int) -> list[Cell]:
    if j >= len(tokens):
        return ["", ""]
    return [tokens[j], _masked_or(allowed[j], weights[j], precision)]


# Scaling


def scaling(record: Scaling, precision: int, width: int) -> list[Line]:
    """The Monte Carlo table, then bars of the mean largest weight with and without the scale."""
    p = precision
    headers = ["d_k", "var(q·k)", "var(q·k/√d_k)", t("analysis.max_weight_dot"), t("analysis.max_weight_scaled")]
    rows = [
        [
            str(row.d_k),
            fixed(row.var_dot, p),
            fixed(row.var_scaled, p),
            fixed(row.max_weight_dot, p),
            fixed(row.max_weight_scaled, p),
        ]
        for row in record.rows
    ]
    title = t("analysis.scaling_title", keys=record.keys, samples=record.samples, seed=record.seed)
    label = max(len(str(row.d_k)) for row in record.rows)
    chart = [
        line((f"d_k = {row.d_k:>{label}}  {name:<9}", "dim"), (bar(value, CHART_WIDTH), style), f" {fixed(value, p)}")
        for row in record.rows
        for name, value, style in (("q·k", row.max_weight_dot, "red"), ("q·k/√d_k", row.max_weight_scaled, "green"))
    ]
    return [
        *table(title, headers, rows, width, right=range(5)),
        line((t("analysis.chart_title", keys=record.keys), "bold")),
        *chart,
        BLANK,
        line((t("analysis.scaling_note", keys=record.keys, uniform=fixed(1 / record.keys, p)), "dim")),
    ]
