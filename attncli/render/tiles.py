"""A followed query's softmax worked out two more ways: with its max subtracted (`stable:`, `--stable`),
and online, tile by tile, as FlashAttention gathers it (`tiles:`, `--tiles`).

`items` gives the walk's records for one query (attncli.render.walk places them after the query's
own steps); `table` lays either out as a `Worked` table, which the terminal, Markdown and LaTeX
write in their own syntax, formulas in both spellings (`walk.Expr`). `json_fields` and
`npz_arrays` hold every query's numbers whole, at full precision.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from attncli.core import HeadSteps
from attncli.i18n import t
from attncli.problem import Problem
from attncli.written import EXP, Expr, Num, Vec, vec


class StableRow(NamedTuple):
    """One key of the stable softmax: its score s, s − m and e^(s − m); −∞, −∞ and 0 where masked."""

    key: str
    score: Num
    shifted: Num
    exp: Num


class StableSoftmax(NamedTuple):
    """A query's softmax with m = max s subtracted from every score, and ln Σ e^s = m + ln Σ e^(s − m)."""

    query: str
    power: str  # what is exponentiated: s, or s + b with a bias
    max: Num
    rows: tuple[StableRow, ...]
    total: Num  # Σ e^(s − m)
    logsumexp: Num


class TileRow(NamedTuple):
    """One tile of a query's online softmax: its keys, their scores and e^(s − m'), and the running values after it."""

    keys: tuple[str, ...]
    scores: Vec  # −∞ where masked
    maximum: Num | None  # None when every key of the tile is masked
    running_max: Num | None  # m', None while it is still −∞
    rescale: Num  # α = e^(m − m')
    exp: Vec  # e^(s − m'), 0 where masked
    running_sum: Num  # ℓ'
    accumulator: Vec  # o'


class TileTrace(NamedTuple):
    """A query's online softmax over tiles of `size` keys, then o/ℓ beside the output and L = m + ln ℓ."""

    query: str
    size: int
    rows: tuple[TileRow, ...]
    running_max: Num  # m after the last tile
    running_sum: Num  # ℓ
    accumulator: Vec  # o
    quotient: Vec  # o/ℓ
    output: Vec  # the output of the query's own steps, shown beside o/ℓ
    logsumexp: Num  # L


def items(head: HeadSteps, row: int, problem: Problem) -> list[StableSoftmax | TileTrace]:
    """What `head` shows of query `row` beyond its own steps: the stable softmax, and the tiles when asked for."""
    power = "s" if head.bias is None else "s + b"
    rows = tuple(
        StableRow(key, Num(float(head.scores[row, j])), Num(float(head.scores[row, j] - head.shift[row])), exp)
        for j, (key, exp) in enumerate(zip(problem.tokens, _exps(head.exp[row])))
    )
    total = Num(float(head.exp[row].sum()), EXP)
    shown: list[StableSoftmax | TileTrace] = [
        StableSoftmax(
            problem.query_tokens[row], power, Num(float(head.shift[row])), rows, total, _num(head.logsumexp[row])
        )
    ]
    if head.tiles is not None:
        shown.append(_trace(head, row, problem))
    return shown


def _trace(head: HeadSteps, row: int, problem: Problem) -> TileTrace:
    tiles = head.tiles
    rows = tuple(
        TileRow(
            keys=problem.tokens[keys],
            scores=vec(head.scores[row, keys]),
            maximum=_finite(tiles.maxima[row, t]),
            running_max=_finite(tiles.running_max[row, t]),
            rescale=_num(tiles.rescale[row, t]),
            exp=vec(tiles.exp[row, keys], EXP),
            running_sum=_num(tiles.running_sum[row, t], EXP),
            accumulator=vec(tiles.accumulator[row, t]),
        )
        for t, keys in enumerate(tiles.spans())
    )
    return TileTrace(
        query=problem.query_tokens[row],
        size=tiles.size,
        rows=rows,
        running_max=_num(tiles.running_max[row, -1]),
        running_sum=_num(tiles.running_sum[row, -1], EXP),
        accumulator=vec(tiles.accumulator[row, -1]),
        quotient=vec(tiles.output[row]),
        output=vec(head.output[row]),
        logsumexp=_num(tiles.logsumexp[row]),
    )


def _num(value: np.floating, style: str = "fixed") -> Num:
    return Num(float(value), style)


def _finite(value: np.floating) -> Num | None:
    """A running value, or None where it is still −∞ (no key seen)."""
    return None if np.isneginf(value) else _num(value)


def _exps(row: np.ndarray) -> list[Num]:
    return [Num(float(value), EXP) for value in row]


class Worked(NamedTuple):
    """A table of worked numbers: its title (words, then a formula), headers (words, or formulas), rows and footer
    as text, the columns aligned right, then lines of words and a formula with the numbers in it."""

    words: str
    formula: Expr
    headers: tuple[str | Expr, ...]
    rows: tuple[tuple[str, ...], ...]
    footer: tuple[str, ...] | None
    right: tuple[int, ...]
    closing: tuple[tuple[str, Expr], ...]


NONE = "—"  # a tile's max when every key of it is masked; m while it is still −∞


def table(item: StableSoftmax | TileTrace, p: int) -> Worked:
    """`item` laid out at `p` decimals."""
    return _stable(item, p) if isinstance(item, StableSoftmax) else _tiles(item, p)


def _stable(item: StableSoftmax, p: int) -> Worked:
    power = item.power
    latex_power = "s_j" if power == "s" else "s_j + b_j"
    grouped, latex_grouped = (power, latex_power) if power == "s" else (f"({power})", f"({latex_power})")
    m = item.max.text(p)
    rows = tuple((row.key, row.score.text(p), row.shifted.text(p), row.exp.text(p)) for row in item.rows)
    headers = (
        t("render.key"),
        Expr(power, latex_power),
        Expr(f"{power} − m", f"{latex_power} - m"),
        Expr(f"e^({power} − m)", f"e^{{{latex_power} - m}}"),
    )
    total, lse = item.total.text(p), item.logsumexp.text(p)
    exp = "e^s" if power == "s" else f"e^({power})"
    said = Expr(
        f"ln Σ {exp} = m + ln Σ e^({power} − m) = {m} + ln {total} = {lse}",
        rf"\ln \sum_j e^{{{latex_power}}} = m + \ln \sum_j e^{{{latex_power} - m}} = {m} + \ln {total} = {lse}",
    )
    return Worked(
        words=t("render.stable_title", name=item.query),
        formula=Expr(f"m = max {grouped} = {m}", rf"m = \max_j {latex_grouped} = {m}"),
        headers=headers,
        rows=rows,
        footer=(t("render.sum"), "", "", total),
        right=(1, 2, 3),
        closing=((t("render.stable_logsumexp"), said),),
    )


def _tiles(item: TileTrace, p: int) -> Worked:
    headers = (
        t("render.tile_keys"),
        Expr("s", "s_j"),
        Expr("max s", r"\max s_j"),
        Expr("m'", "m'"),
        Expr("α", r"\alpha"),
        Expr("e^(s − m')", "e^{s_j - m'}"),
        Expr("ℓ'", r"\ell'"),
        Expr("o'", r"\mathbf{o}'"),
    )
    rows = tuple(
        (
            ", ".join(row.keys),
            _cells(row.scores, p),
            NONE if row.maximum is None else row.maximum.text(p),
            NONE if row.running_max is None else row.running_max.text(p),
            row.rescale.text(p),
            _cells(row.exp, p),
            row.running_sum.text(p),
            row.accumulator.text(p),
        )
        for row in item.rows
    )
    m, total, o = item.running_max.text(p), item.running_sum.text(p), item.accumulator.text(p)
    quotient, lse = item.quotient.text(p), item.logsumexp.text(p)
    closing = (
        (
            t("render.tiles_quotient", output=item.output.text(p)),
            Expr(f"o/ℓ = {o} / {total} = {quotient}", rf"\mathbf{{o}}/\ell = {o} / {total} = {quotient}"),
        ),
        (
            t("render.tiles_logsumexp"),
            Expr(f"L = m + ln ℓ = {m} + ln {total} = {lse}", rf"L = m + \ln \ell = {m} + \ln {total} = {lse}"),
        ),
    )
    steps = Expr(
        "m = −∞, ℓ = 0, o = 0; m' = max(m, max s), α = e^(m − m'), ℓ' = α·ℓ + Σ e^(s − m'), o' = α·o + Σ e^(s − m')·v",
        r"\begin{aligned}&m = -\infty,\ \ell = 0,\ \mathbf{o} = \mathbf{0};\quad m' = \max(m, \max_j s_j),\ "
        r"\alpha = e^{m - m'},\\&\ell' = \alpha\,\ell + \sum_j e^{s_j - m'},\ "
        r"\mathbf{o}' = \alpha\,\mathbf{o} + \sum_j e^{s_j - m'}\,\mathbf{v}_j\end{aligned}",
    )
    words = t("render.tiles_title", name=item.query, size=item.size)
    if item.size == 1:  # a tile's max is its one score: the column would repeat s
        headers, rows = headers[:2] + headers[3:], tuple(row[:2] + row[3:] for row in rows)
    return Worked(words, steps, headers, rows, None, tuple(range(1, len(headers) - 1)), closing)


def _cells(row: Vec, p: int) -> str:
    """A tile's numbers: one number alone for a tile of one key, else the row in brackets."""
    return row.cells[0].text(p) if len(row.values) == 1 else row.text(p)


# Every query whole, at full precision


def json_fields(head: HeadSteps, tokens: tuple[str, ...]) -> dict:
    """`logsumexp` (one number a query) with `stable:` or `tiles:`, and `tiles` (per query, its tile records)."""
    if head.logsumexp is None:
        return {}
    fields: dict = {"logsumexp": head.logsumexp.tolist()}
    if head.tiles is not None:
        fields["tiles"] = [_tile_records(head, row, tokens) for row in range(head.scores.shape[0])]
    return fields


def _tile_records(head: HeadSteps, row: int, tokens: tuple[str, ...]) -> list[dict]:
    """Query `row`'s tiles as the JSON document's records; null for a masked score, a tile's max when all its
    keys are masked, and m while it is still −∞."""
    tiles = head.tiles
    return [
        {
            "keys": list(tokens[keys]),
            "scores": [_or_null(score) for score in head.scores[row, keys].tolist()],
            "max": _or_null(float(tiles.maxima[row, t])),
            "running_max": _or_null(float(tiles.running_max[row, t])),
            "rescale": float(tiles.rescale[row, t]),
            "running_sum": float(tiles.running_sum[row, t]),
            "accumulator": tiles.accumulator[row, t].tolist(),
        }
        for t, keys in enumerate(tiles.spans())
    ]


def _or_null(value: float) -> float | None:
    return None if math.isinf(value) else value


def npz_arrays(head: HeadSteps, number: int) -> dict[str, np.ndarray]:
    """The same by npz names: `heads/0/logsumexp`, and `heads/0/tiles/...` (each tile's first key in `start`;
    −∞ where JSON writes null)."""
    if head.logsumexp is None:
        return {}
    arrays = {f"heads/{number}/logsumexp": head.logsumexp}
    tiles = head.tiles
    if tiles is not None:
        named = {
            "start": np.array([keys.start for keys in tiles.spans()]),
            "max": tiles.maxima,
            "running_max": tiles.running_max,
            "rescale": tiles.rescale,
            "exp": tiles.exp,
            "running_sum": tiles.running_sum,
            "accumulator": tiles.accumulator,
        }
        arrays |= {f"heads/{number}/tiles/{name}": array for name, array in named.items()}
    return arrays
