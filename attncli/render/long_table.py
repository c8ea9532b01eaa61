"""CSV and TSV in long format: one row per number, `step,head,query,key,index,value`, full precision;
and in wide format (`--csv-layout wide`), one matrix-shaped block per step for spreadsheets.

Long format suits pipes and data frames: filter with grep or awk, pivot later.
`head` is the head's index from 0, empty for the concatenation and for the final
output (always present, even when it equals the only head's output); `key` or
`index` is empty where it does not apply; masked scores are -inf. A token name that a
spreadsheet would take for a formula (=, +, -, @ first) is written with a leading ' (`text_cell`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from attncli.core import Steps

if TYPE_CHECKING:
    from attncli.layers import LayerSteps, StackSteps
    from attncli.probes import Comparison

HEADER = ("step", "head", "query", "key", "index", "value")
STACK_HEADER = ("layer", *HEADER)  # a stack's rows: the layer (from 0, as JSON's) first
Row = tuple[str, str, str, str, str, str]


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet evaluate a cell (OWASP)


def text_cell(text: str) -> str:
    """`text` for a CSV/TSV cell that a spreadsheet shows instead of evaluating: `=1+1` becomes `'=1+1`."""
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text


def render(steps: Steps, delimiter: str = ",") -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(rows(steps))
    return buffer.getvalue()


def render_stack(
    steps: StackSteps, delimiter: str = ",", layer: int | None = None, rollout: np.ndarray | None = None
) -> str:
    """A stack in long format: every layer's rows after its `layer` column, its attention's as `rows` gives them
    and its streams by token (in the query column): `input`, `normed` (a norm placed pre), then after the
    attention `residual` (input + attention) and `stream` (what the layer passes on; the last one's is the output).
    With `layer` (from 1) only that layer's rows; with `rollout`, its rows (`rollout`, query, key) under the last
    layer it multiplies.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerow(STACK_HEADER)
    tokens = steps.stack.tokens
    for number, record in _chosen(steps, layer):
        before, after = _streams(record)
        layer_rows = [
            *(row for step, matrix in before for row in _vectors(step, "", tokens, matrix, by="query")),
            *rows(record.attention),
            *(row for step, matrix in after for row in _vectors(step, "", tokens, matrix, by="query")),
        ]
        writer.writerows((str(number), *row) for row in layer_rows)
    if rollout is not None:
        last = str((layer or len(steps.layers)) - 1)
        writer.writerows((last, *row) for row in _pairs("rollout", "", tokens, tokens, rollout))
    return buffer.getvalue()


def _chosen(steps: StackSteps, layer: int | None) -> list[tuple[int, LayerSteps]]:
    """The layers a document shows, by their number from 0: all of them, or number `layer` (from 1) alone."""
    numbered = list(enumerate(steps.layers))
    return numbered if layer is None else numbered[layer - 1 : layer]


def _streams(layer: LayerSteps) -> tuple[list[tuple[str, np.ndarray]], list[tuple[str, np.ndarray]]]:
    """The layer's streams (S, d) before its attention and after it, by the names `answers:` gives them."""
    before = [("input", layer.input)] + ([("normed", layer.normed)] if layer.normed is not None else [])
    return before, [("residual", layer.residual), ("stream", layer.output)]


def wide(steps: Steps, delimiter: str = ",") -> str:
    """One block per step and head, as a spreadsheet shows a matrix, blocks apart by an empty line.

    A block starts with its title row (`weights,head,0`; `concat`; `output` for the final output),
    then a header row: `query\\key` and the key tokens for (query, key) steps, `query` or `key` and the
    coordinates 0, 1, ... for vectors; then one row per query (or key) token. Same numbers as `render`.
    """
    return _blocks_text(blocks(steps), delimiter)


def wide_stack(
    steps: StackSteps, delimiter: str = ",", layer: int | None = None, rollout: np.ndarray | None = None
) -> str:
    """`wide` for a stack: each block's title starts `layer,N` (from 0); the streams are blocks by token too.
    As `render_stack`: `layer` alone, and `rollout` as a block under the last layer it multiplies."""
    tokens = steps.stack.tokens
    every: list[Block] = [
        (("layer", str(number), *title), corner, names, columns, matrix)
        for number, record in _chosen(steps, layer)
        for title, corner, names, columns, matrix in _layer_blocks(record, tokens)
    ]
    if rollout is not None:
        last = str((layer or len(steps.layers)) - 1)
        every.append((("layer", last, "rollout"), "query\\key", tokens, [text_cell(key) for key in tokens], rollout))
    return _blocks_text(every, delimiter)


def _layer_blocks(layer: LayerSteps, tokens: Sequence[str]) -> Iterator[Block]:
    before, after = _streams(layer)

    def stream(step: str, matrix: np.ndarray) -> Block:
        return (step,), "query", tokens, [str(i) for i in range(matrix.shape[1])], matrix

    yield from (stream(*each) for each in before)
    yield from blocks(layer.attention)
    yield from (stream(*each) for each in after)


def _blocks_text(every: Iterable[Block], delimiter: str) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    for number, (title, corner, names, columns, matrix) in enumerate(every):
        if number:
            writer.writerow(())
        writer.writerow(title)
        writer.writerow((corner, *columns))
        writer.writerows((text_cell(name), *map(str, row)) for name, row in zip(names, matrix))
    return buffer.getvalue()


Block = tuple[tuple[str, ...], str, Sequence[str], Sequence[str], np.ndarray]


def blocks(steps: Steps) -> Iterator[Block]:
    """(title, corner, row names, column names, matrix) of each step, in the order of `rows`."""
    problem = steps.problem
    queries, keys = problem.query_tokens, problem.tokens
    cells = [text_cell(key) for key in keys]

    def vectors(title: tuple[str, ...], by: str, matrix: np.ndarray) -> Block:
        return title, by, queries if by == "query" else keys, [str(i) for i in range(matrix.shape[1])], matrix

    for number, head in enumerate(steps.heads):
        h = ("head", str(number))
        if head.queries is not None:
            yield vectors(("queries", *h), "query", head.queries)
            yield vectors(("keys", *h), "key", head.keys)
        yield vectors(("values", *h), "key", head.values)
        pairs = [("scores", head.scores), ("weights", head.weights)]
        if head.spec.scores is None:
            pairs.insert(0, ("dot", head.dot))
        for step, matrix in pairs:
            yield (step, *h), "query\\key", queries, cells, matrix
        yield vectors(("output", *h), "query", head.output)
    if steps.concat is not None:
        yield vectors(("concat",), "query", steps.concat)
    yield vectors(("output",), "query", steps.output)


def rows(steps: Steps) -> Iterator[Row]:
    problem = steps.problem
    for number, head in enumerate(steps.heads):
        h = str(number)
        if head.queries is not None:
            yield from _vectors("queries", h, problem.query_tokens, head.queries, by="query")
            yield from _vectors("keys", h, problem.tokens, head.keys, by="key")
        yield from _vectors("values", h, problem.tokens, head.values, by="key")
        if head.spec.scores is None:
            yield from _pairs("dot", h, problem.query_tokens, problem.tokens, head.dot)
        yield from _pairs("scores", h, problem.query_tokens, problem.tokens, head.scores)
        yield from _pairs("weights", h, problem.query_tokens, problem.tokens, head.weights)
        yield from _vectors("output", h, problem.query_tokens, head.output, by="query")
    if steps.concat is not None:
        yield from _vectors("concat", "", problem.query_tokens, steps.concat, by="query")
    yield from _vectors("output", "", problem.query_tokens, steps.output, by="query")


def _vectors(step: str, head: str, names: Sequence[str], matrix: np.ndarray, by: str) -> Iterator[Row]:
    """One row per entry of each vector, named by its query or key token."""
    for name, vector in zip(map(text_cell, names), matrix):
        for index, value in enumerate(vector):
            query, key = (name, "") if by == "query" else ("", name)
            yield step, head, query, key, str(index), str(value)


def _pairs(step: str, head: str, queries: Sequence[str], keys: Sequence[str], matrix: np.ndarray) -> Iterator[Row]:
    """One row per (query, key) cell."""
    keys = [text_cell(key) for key in keys]
    for query, row in zip(map(text_cell, queries), matrix):
        for key, value in zip(keys, row):
            yield step, head, query, key, "", str(value)


COMPARE_HEADER = ("query", "step", "head", "position", "key_a", "key_b", "a", "b", "difference")


def compare_table(record: Comparison, delimiter: str = ",") -> str:
    """`compare` in long format: for each shared query, each head pair's weights key position by key position
    (key_a, key_b: the key each problem has there, empty past its last), then the outputs coordinate by
    coordinate, then the distance ‖output_b − output_a‖ as `difference`; a difference is empty where the
    two sides do not line up (other numbers of keys or widths)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=delimiter, lineterminator="\n")
    writer.writerow(COMPARE_HEADER)
    keys_a, keys_b = record.a.problem.tokens, record.b.problem.tokens
    for query in record.queries:
        name = text_cell(query.query)
        for number, pair in enumerate(query.heads):
            for j in range(max(len(pair.weights_a), len(pair.weights_b))):
                key_a, key_b = (text_cell(keys[j]) if j < len(keys) else "" for keys in (keys_a, keys_b))
                a, b, difference = (_cell(vector, j) for vector in (pair.weights_a, pair.weights_b, pair.difference))
                writer.writerow((name, "weights", number, j, key_a, key_b, a, b, difference))
        for i in range(max(len(query.output_a), len(query.output_b))):
            a, b, difference = (_cell(vector, i) for vector in (query.output_a, query.output_b, query.difference))
            writer.writerow((name, "output", "", i, "", "", a, b, difference))
        distance = "" if query.distance is None else str(query.distance)
        writer.writerow((name, "distance", "", "", "", "", "", "", distance))
    return buffer.getvalue()


def _cell(vector: np.ndarray | None, index: int) -> str:
    return str(vector[index]) if vector is not None and index < len(vector) else ""
