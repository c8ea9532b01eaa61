"""The tutor on FlashAttention's online softmax (issue 29): each tile's m', α, ℓ' and o' of a query, asked after its
output when the problem has `tiles:` (or `practice --tiles B`), and graded by `check` (attncli.grading.online).

A query's tiles before its first unmasked key hold nothing to compute (m = −∞, ℓ = 0, o = 0): they are not
asked. The accumulator's cells are a row per query and tile (attncli.steps.labels), its prompt's row that one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from attncli.core import HeadSteps
from attncli.parsing.answers import Answer, Entry
from attncli.steps import TILE_STEPS, TILED
from attncli.written import entry
from attncli.yamldoc import comment, flow

DECIMALS = 4  # as the tutor writes every number


def cells(head: HeadSteps, query: int) -> list[tuple[str, int, tuple[int, ...]]]:
    """The tile steps to ask of `query`, in order, as (step, row, columns)."""
    tiles = head.tiles
    if tiles is None:
        return []
    count, width = tiles.running_max.shape[1], tiles.accumulator.shape[2]
    found: list[tuple[str, int, tuple[int, ...]]] = []
    for tile in range(count):
        if np.isneginf(tiles.running_max[query, tile]):  # no key seen yet
            continue
        found += [(name, query, (tile,)) for name in TILE_STEPS[:3]]
        found.append(("accumulator", query * count + tile, tuple(range(width))))
    return found


def place(head: HeadSteps, step: str, row: int, columns: tuple[int, ...]) -> tuple[int, int]:
    """The query and the tile (from 0) a tile prompt asks about."""
    assert head.tiles is not None, "a head with tiles"
    if step == "accumulator":
        return divmod(row, head.tiles.running_max.shape[1])
    return row, columns[0]


def working(head: HeadSteps, step: str, row: int, columns: tuple[int, ...]) -> str:
    """The numbers a tile step combines, written out: max(m, tile max), e^(m − m'), α·ℓ + Σ e^(s − m'), α·o + ..."""
    tiles = head.tiles
    assert tiles is not None, "a head with tiles"
    query, tile = place(head, step, row, columns)
    before = tiles.running_max[query, tile - 1] if tile else -np.inf
    now, alpha = tiles.running_max[query, tile], tiles.rescale[query, tile]
    span = tiles.spans()[tile]
    keys = [j for j in range(span.start, span.stop) if np.isfinite(head.scores[query, j])]
    terms = [num(tiles.exp[query, j]) for j in keys]
    if step == "running_max":
        return f"max({num(before)}, {num(tiles.maxima[query, tile])})"
    if step == "rescale":
        return "0" if not np.isfinite(before) else f"e^({num(before)} − {num(now)})"
    if step == "running_sum":
        total = tiles.running_sum[query, tile - 1] if tile else 0.0
        return " + ".join([f"{num(alpha)} × {num(total)}", *terms])
    o = tiles.accumulator[query, tile - 1] if tile else np.zeros(tiles.accumulator.shape[2])
    products = [f"{num(tiles.exp[query, j])} × {vector(head.values[j])}" for j in keys]
    return " + ".join([f"{num(alpha)} × {vector(o)}", *products])


def record(found: Sequence[Answer], queries: int, cell: Callable[[Entry | None], str], indent: int) -> list[str]:
    """One head's tile answers as `answers:` writes them (attncli.parsing.tile_answers reads them back): `tiles:`,
    a list of records per query, in order; none without tile answers."""
    by_step = {answer.step: answer for answer in found if answer.step in TILE_STEPS}
    if not by_step:
        return []
    pad = " " * indent
    any_answer = next(iter(by_step.values()))
    count = len(any_answer.rows) // queries if any_answer.step == "accumulator" else len(any_answer.columns)
    lines = [f"{pad}{TILED}:"]
    for i in range(queries):
        records = []
        for tile in range(count):
            fields = [
                f"{name}: {flow(cell(e) for e in answer.cells[i * count + tile])}"
                if name == "accumulator"
                else f"{name}: {cell(answer.cells[i][tile])}"
                for name, answer in by_step.items()
            ]
            records.append("{" + ", ".join(fields) + "}")
        query = any_answer.rows[i * count if any_answer.step == "accumulator" else i].split(" · ")[0]
        lines.append(f"{pad}  - {flow(records)}  {comment(query)}")
    return lines


def num(value: float) -> str:
    return "−∞" if np.isneginf(value) else entry(float(value), DECIMALS)


def vector(values: np.ndarray) -> str:
    return "[" + ", ".join(num(v) for v in values) + "]"
