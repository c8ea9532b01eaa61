"""Human output for problems too large to print cell by cell: shapes, top keys, a downsampled map.

A few thousand tokens would make millions of table cells; a reader wants the
shape of the result and where each query looks. Every digit still comes out
whole; the full matrices are one `--format json|csv|npy` away.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from attncli.core import HeadOverview, Overview, map_edges
from attncli.i18n import t
from attncli.render.formats import condensed, every_number
from attncli.render.layout import BLANK, Line, line, table
from attncli.render.probes import COMPACT_DECIMALS, MASKED_CELL
from attncli.render.walk import AUTO_FOLLOW, Condensed, weight_grid
from attncli.written import fixed, shown_of, vector

if TYPE_CHECKING:
    from attncli.problem import Problem

TOP_KEYS = 5
MAP_ROWS, MAP_COLUMNS = 16, 48
MAP_SHAPE = (MAP_ROWS, MAP_COLUMNS)
SHADES = " ░▒▓█"


def is_large(problem: Problem) -> bool:
    """Whether the summary replaces the tables: where the write-ups are condensed too (`formats.condensed`)."""
    return condensed(problem)


def lines(
    problem: Problem, *, precision: int = 4, follow: tuple[str, ...] | None = None
) -> Callable[[int], list[Line]] | None:
    """The human output of a problem too large to show step by step, as a function of the width; else None.

    Its numbers come from `pipeline.overview`, which takes the blocked kernel where it can: the
    (L, S) matrices of every step are never built.
    """
    if not is_large(problem):
        return None
    found = overview(problem, follow)
    return lambda width: render(found, follow, precision, width)


def overview(problem: Problem, follow: tuple[str, ...] | None, fine: tuple[int, int] | None = None) -> Overview:
    """The numbers the summary shows, and with `fine` a map of at most that many blocks (a figure's), in one pass."""
    from attncli import pipeline

    return pipeline.overview(problem, kept_rows(problem, follow), MAP_SHAPE, fine)


def followed_rows(problem: Problem, follow: tuple[str, ...] | None) -> tuple[int, ...]:
    """The rows of the queries shown in full: those followed, by default the first few."""
    followed = follow if follow is not None else problem.query_tokens[:AUTO_FOLLOW]
    return tuple(problem.query_tokens.index(name) for name in followed)


def kept_rows(problem: Problem, follow: tuple[str, ...] | None) -> tuple[int, ...]:
    """The rows the summary reads in full: the followed queries', then the corners' (the first and last EDGE)."""
    corners = shown_of(len(problem.query_tokens), short=True)[0]
    return tuple(dict.fromkeys((*followed_rows(problem, follow), *corners)))


def render(found: Overview, follow: tuple[str, ...] | None, precision: int, width: int) -> list[Line]:
    """Shapes, then for each head the top keys of the followed queries (default: the first few), a map and the
    corners of the weights, then the followed queries' outputs."""
    problem = found.problem
    place = {row: index for index, row in enumerate(found.rows)}  # query row -> its row in `found`
    rows = followed_rows(problem, follow)

    def weights_of(head: HeadOverview) -> Callable[[int], np.ndarray]:
        """Query row i's weights (S,), read from its row in `head`."""
        return lambda i: head.weights[place[i]]

    out: list[Line] = []
    if problem.title:
        out.append(line((problem.title, "bold underline")))
    out.append(
        line(
            t(
                "summary.shapes",
                queries=len(problem.query_tokens),
                keys=len(problem.tokens),
                heads=len(found.heads),
                d_v=found.d_v,
                dtype=str(found.heads[0].weights.dtype),
                d_out=found.output.shape[1],
            )
        )
    )
    out.append(line((t("summary.why", every=every_number(problem)), "dim")))
    out.append(BLANK)
    for head, spec in zip(found.heads, problem.heads):
        if len(found.heads) > 1:
            out.append(line((t("render.head_title", name=spec.label), "bold reverse")))
        for row in rows:
            out += _top_keys(head, problem, place[row], row, precision, width)
        out += _map(head.blocks, len(problem.query_tokens))
        out += _corners(weights_of(head), problem, precision, width)
    for row in rows:
        name = problem.query_tokens[row]
        out.append(line((t("render.output_line", name=name), "bold"), vector(found.output[place[row]], precision)))
    return out


def _top_keys(head: HeadOverview, problem: Problem, index: int, row: int, precision: int, width: int) -> list[Line]:
    """Query `row`'s largest weights, read from row `index` of `head`."""
    weights = head.weights[index]  # (S,)
    allowed = np.flatnonzero(problem.mask[row])  # a masked key (s = −∞) is no candidate, even at weight 0
    order = allowed[np.argsort(-weights[allowed], kind="stable")][:TOP_KEYS]
    rows = [
        [
            str(j + 1),
            problem.tokens[j],
            fixed(float(head.scores[index, j]), precision),
            fixed(float(weights[j]), precision),
        ]
        for j in order
    ]
    rest = float(1 - weights[order].sum())
    title = t("summary.top_keys", name=problem.query_tokens[row], count=len(order), rest=fixed(rest, precision))
    headers = [t("summary.position"), t("render.key"), "s", t("render.weight")]
    return table(title, headers, rows, width, right=(0, 2, 3))


def _corners(weights_of: Callable[[int], np.ndarray], problem: Problem, precision: int, width: int) -> list[Line]:
    """The first and last rows and columns of the weights, as the write-ups show them (walk.weight_grid)."""
    tokens, grid_rows = weight_grid(weights_of, problem, short=True)
    headers = [t("render.query"), *tokens]
    every = every_number(problem)
    note = [line((Condensed(len(problem.query_tokens), len(problem.tokens), every).words(), "dim"))]
    for decimals in (precision, min(precision, COMPACT_DECIMALS)):
        rows = [[name, *(MASKED_CELL if w is None else w.text(decimals) for w in row)] for name, row in grid_rows]
        grid = table(t("render.weight_matrix_title"), headers, rows, width, right=range(1, len(headers)))
        if len(grid) <= len(rows) + 4:  # a grid, not a stacked list: the title, the headers, a rule, a blank
            break
    if decimals < precision:
        note.append(line((t("analysis.heatmap_rounded", decimals=decimals), "dim")))
    return [*grid, *note, BLANK]


def _map(means: np.ndarray, queries: int) -> list[Line]:
    """The mean weight of each block of queries and keys (R, C), drawn in shades; rows numbered by their first query."""
    starts = map_edges(queries, MAP_ROWS)[:-1]
    levels = np.ceil(means / means.max() * (len(SHADES) - 1)).astype(int)
    shaded = [
        line((f"{start + 1:>7} ", "dim"), ("".join(SHADES[level] for level in row), "cyan"))
        for start, row in zip(starts, levels)
    ]
    legend = t("summary.map_legend", rows=means.shape[0], columns=means.shape[1])
    return [line((t("summary.map_title"), "bold")), *shaded, BLANK, line((legend, "dim")), BLANK]
