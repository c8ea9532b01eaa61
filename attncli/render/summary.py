"""Human output for problems too large to print cell by cell: shapes, top keys, a downsampled map.

A few thousand tokens would make millions of table cells; a reader wants the
shape of the result and where each query looks. Every digit still comes out
whole; the full matrices are one `--format json|csv|npy` away.
"""

from __future__ import annotations

import numpy as np

from attncli.core import HeadSteps, Steps
from attncli.i18n import t
from attncli.render import MAX_DOCUMENT_CELLS
from attncli.render.analysis import COMPACT_DECIMALS, MASKED_CELL
from attncli.render.layout import BLANK, Line, line, table
from attncli.render.numbers import fixed, vector
from attncli.render.walk import AUTO_FOLLOW, Condensed, condensed, corners

TOP_KEYS = 5
MAP_ROWS, MAP_COLUMNS = 16, 48
SHADES = " ░▒▓█"


def is_large(steps: Steps) -> bool:
    """Whether the summary replaces the tables: where the write-ups are condensed too (`walk.condensed`)."""
    return condensed(steps.problem)


def render(steps: Steps, follow: tuple[str, ...] | None, precision: int, width: int) -> list[Line]:
    """Shapes, then for each head the top keys of the followed queries (default: the first few) and a map."""
    problem = steps.problem
    followed = follow if follow is not None else problem.query_tokens[:AUTO_FOLLOW]
    rows = [problem.query_tokens.index(name) for name in followed]
    out: list[Line] = []
    if problem.title:
        out.append(line((problem.title, "bold underline")))
    first = steps.heads[0]
    out.append(
        line(
            t(
                "summary.shapes",
                queries=len(problem.query_tokens),
                keys=len(problem.tokens),
                heads=len(steps.heads),
                d_v=first.values.shape[1],
                dtype=str(first.weights.dtype),
                d_out=steps.output.shape[1],
            )
        )
    )
    out.append(line((t("summary.why", limit=MAX_DOCUMENT_CELLS), "dim")))
    out.append(BLANK)
    for head in steps.heads:
        if len(steps.heads) > 1:
            out.append(line((t("render.head_title", name=head.spec.name), "bold reverse")))
        for row in rows:
            out += _top_keys(head, steps, row, precision, width)
        out += _map(head)
        out += _corners(head, steps, precision, width)
    for row in rows:
        name = problem.query_tokens[row]
        out.append(line((t("render.output_line", name=name), "bold"), vector(steps.output[row], precision)))
    return out


def _top_keys(head: HeadSteps, steps: Steps, row: int, precision: int, width: int) -> list[Line]:
    problem = steps.problem
    weights = head.weights[row]  # (S,)
    allowed = np.flatnonzero(problem.mask[row])  # a masked key (s = −∞) is no candidate, even at weight 0
    order = allowed[np.argsort(-weights[allowed], kind="stable")][:TOP_KEYS]
    rows = [
        [
            str(j + 1),
            problem.tokens[j],
            fixed(float(head.scores[row, j]), precision),
            fixed(float(weights[j]), precision),
        ]
        for j in order
    ]
    rest = float(1 - weights[order].sum())
    title = t("summary.top_keys", name=problem.query_tokens[row], count=len(order), rest=fixed(rest, precision))
    headers = [t("summary.position"), t("render.key"), "s", t("render.weight")]
    return table(title, headers, rows, width, right=(0, 2, 3))


def _corners(head: HeadSteps, steps: Steps, precision: int, width: int) -> list[Line]:
    """The first and last rows and columns of the weights, as the write-ups show them (walk.corners)."""
    item = corners(head, steps.problem)
    headers = [t("render.query"), *item.tokens]
    note = [line((Condensed(len(steps.problem.query_tokens), len(steps.problem.tokens)).words(), "dim"))]
    for decimals in (precision, min(precision, COMPACT_DECIMALS)):
        rows = [[name, *(MASKED_CELL if w is None else w.text(decimals) for w in row)] for name, row in item.weights]
        grid = table(t("render.weight_matrix_title"), headers, rows, width, right=range(1, len(headers)))
        if len(grid) <= len(rows) + 4:  # a grid, not a stacked list: the title, the headers, a rule, a blank
            break
    if decimals < precision:
        note.append(line((t("analysis.heatmap_rounded", decimals=decimals), "dim")))
    return [*grid, *note, BLANK]


def _map(head: HeadSteps) -> list[Line]:
    """The weight matrix averaged over blocks of queries and keys, drawn in shades."""
    weights = head.weights  # (L, S)
    row_edges = np.linspace(0, weights.shape[0], min(MAP_ROWS, weights.shape[0]) + 1).astype(int)
    column_edges = np.linspace(0, weights.shape[1], min(MAP_COLUMNS, weights.shape[1]) + 1).astype(int)
    blocks = np.add.reduceat(np.add.reduceat(weights, row_edges[:-1], axis=0), column_edges[:-1], axis=1)
    sizes = np.diff(row_edges)[:, None] * np.diff(column_edges)[None, :]
    means = blocks / sizes  # (rows, columns)
    levels = np.ceil(means / means.max() * (len(SHADES) - 1)).astype(int)
    shaded = [
        line((f"{start + 1:>7} ", "dim"), ("".join(SHADES[level] for level in row), "cyan"))
        for start, row in zip(row_edges[:-1], levels)
    ]
    legend = t("summary.map_legend", rows=len(row_edges) - 1, columns=len(column_edges) - 1)
    return [line((t("summary.map_title"), "bold")), *shaded, BLANK, line((legend, "dim")), BLANK]
