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
from attncli.errors import printable
from attncli.steps import DOCUMENTED_HEAD_STEPS, DOCUMENTED_SHARED_STEPS, KEYS, QUERIES, Step, each, labels

if TYPE_CHECKING:
    from attncli.layers import LayerSteps, StackSteps
    from attncli.probes import Comparison

HEADER = ("step", "head", "query", "key", "index", "value")
STACK_HEADER = ("layer", *HEADER)  # a stack's rows: the layer (from 0, as JSON's) first
Row = tuple[str, str, str, str, str, str]


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet evaluate a cell (OWASP)


def text_cell(text: str) -> str:
    """Text from a file or a student for a CSV/TSV cell: its control characters escaped (as on a terminal), and
    shown by a spreadsheet instead of evaluated: `=1+1` becomes `'=1+1`."""
    text = printable(text)
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
    for step, head, found in _written(steps):
        title = (step.field,) if head is None else (step.field, "head", str(head))
        names, _ = labels(steps.problem, step.name, found.shape[1])
        if step.columns == KEYS:
            yield title, "query\\key", names, [text_cell(key) for key in steps.problem.tokens], found
        else:
            yield title, _by(step), names, [str(i) for i in range(found.shape[1])], found


def rows(steps: Steps) -> Iterator[Row]:
    problem = steps.problem
    for step, head, found in _written(steps):
        number = "" if head is None else str(head)
        names, _ = labels(problem, step.name, found.shape[1])
        if step.columns == KEYS:
            yield from _pairs(step.field, number, names, problem.tokens, found)
        else:
            yield from _vectors(step.field, number, names, found, by=_by(step))


def _written(steps: Steps) -> Iterator[tuple[Step, int | None, np.ndarray]]:
    """Every step a table holds, in order: each head's that answers: may hold (those it has), then concat and the
    final output; a step is named by the record's field, as in JSON (the final output is `output`)."""
    for number in range(len(steps.heads)):
        yield from ((step, number, found) for step, found in each(steps, DOCUMENTED_HEAD_STEPS, number))
    yield from ((step, None, found) for step, found in each(steps, DOCUMENTED_SHARED_STEPS))


def _by(step: Step) -> str:
    """What names a vector step's rows: a query, or a key (keys and values are the keys' vectors)."""
    return "query" if step.rows == QUERIES else "key"


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
