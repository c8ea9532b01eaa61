"""CSV and TSV in long format: one row per number, `step,head,query,key,index,value`, full precision;
and in wide format (`--csv-layout wide`), one matrix-shaped block per step for spreadsheets.

Long format suits pipes and data frames: filter with grep or awk, pivot later.
`head` is the head's index from 0, empty for the concatenation and for the final
output (always present, even when it equals the only head's output); `key` or
`index` is empty where it does not apply; masked scores are -inf. A token name that a
spreadsheet would take for a formula (=, +, -, @ first) is written with a leading ' (`text_cell`).
With `backward:` the gradients follow, in the same shape: each named as `check` labels it
(`backward.grad_values`, `backward.kv_heads.grad_keys`, a stacked layer's `backward.grad_input` and
`backward.grad_norm.gain`, ...),
a weight's gradient with the coordinate of its row, from 0, in `query`; `backward.loss` one row.
"""

from __future__ import annotations

import csv
import io
import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from attncli.core import Steps
from attncli.errors import printable
from attncli.steps import (
    BACKWARD_HEAD,
    BACKWARD_KV,
    BACKWARD_LAYER,
    BACKWARD_STEPS,
    BY_NAME,
    COORDINATES,
    DOCUMENTED_HEAD_STEPS,
    DOCUMENTED_SHARED_STEPS,
    KEYS,
    QUERIES,
    TOKENS,
    Step,
    each,
    labels,
)
from attncli.steps import matrix as numbers_of

if TYPE_CHECKING:
    from attncli.layers import LayerSteps, StackSteps
    from attncli.probes import Comparison

HEADER = ("step", "head", "query", "key", "index", "value")
STACK_HEADER = ("layer", *HEADER)  # a stack's rows: the layer (from 0, as JSON's) first
Row = tuple[str, str, str, str, str, str]
B = "backward."  # the gradients' rows: backward.<JSON key>, as check labels them (no message key)


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
    writer.writerows(gradient_rows(steps))
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
    writer.writerows(_layer_rows(steps, layer))
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
    return _blocks_text(itertools.chain(blocks(steps), gradient_blocks(steps)), delimiter)


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
    for number, own, attention in _layer_gradients(steps, layer):
        first = own[:1] if own and own[0][0][0] == "backward.grad_residual" else []
        layer_blocks = [*first, *gradient_blocks(attention), *own[len(first) :]]
        every += [(("layer", str(number), *title), corner, names, columns, found)
                  for title, corner, names, columns, found in layer_blocks]  # fmt: skip
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


# The gradients (attncli.backward), after the forward's rows: each step named as check labels it (backward.<JSON
# key>, backward.kv_heads.<key> for a shared key/value head's sums; `head` the head's or kv head's index), a
# weight's gradient (a row per coordinate of what the weight multiplies) with that coordinate, from 0, in `query`.


def gradient_rows(steps: Steps) -> Iterator[Row]:
    """The long rows of every gradient `steps` holds (none without `backward:`): the loss, then as JSON has them."""
    if steps.backward is not None and steps.backward.loss is not None:
        yield B + "loss", "", "", "", "", str(steps.backward.loss)
    for step, head, found in _gradients(steps):
        number = "" if head is None else str(head)
        names = _gradient_names(steps, step, found)
        if step.columns == KEYS:
            yield from _pairs(step.name, number, names, steps.problem.tokens, found)
        else:
            yield from _vectors(step.name, number, names, found, by="key" if step.rows == TOKENS else "query")


def gradient_blocks(steps: Steps) -> Iterator[Block]:
    """A block per gradient, as `blocks` writes the forward's steps."""
    for step, head, found in _gradients(steps):
        title = (step.name,) if head is None else (step.name, "head", str(head))
        names = _gradient_names(steps, step, found)
        corner = {KEYS: "query\\key"}.get(
            step.columns, {TOKENS: "key", COORDINATES: "coordinate"}.get(step.rows, "query")
        )
        columns = [text_cell(key) for key in steps.problem.tokens] if step.columns == KEYS else None
        yield title, corner, names, columns or [str(i) for i in range(found.shape[1])], found


def _gradients(steps: Steps) -> Iterator[tuple[Step, int | None, np.ndarray]]:
    """Every gradient of the record, in the order of the calculation: the top level's, each head's, each kv head's."""
    record = steps.backward
    if record is None:
        return
    for name in BACKWARD_STEPS:
        place = BY_NAME[name].place
        count = {BACKWARD_HEAD: len(record.heads), BACKWARD_KV: len(record.kv_heads)}.get(place, 0)
        for head in ([] if place == BACKWARD_KV else [None]) + list(range(count)):
            found = numbers_of(steps, name, head) if place != BACKWARD_LAYER else None
            if found is not None:
                yield BY_NAME[name], head, found


def _layer_gradients(steps: StackSteps, layer: int | None) -> Iterator[tuple[int, list[Block], Steps]]:
    """Each chosen layer's own gradients (S, d) as blocks, the first before its attention's (grad_residual) and
    the others after, and its attention as the one-layer problem asking for its gradients (none without them)."""
    from attncli.backward import layer_attention  # a stack's gradients: read only when it has them

    if steps.backward is None:
        return
    tokens = steps.stack.tokens
    for number, record in _chosen(steps, layer):
        grads = steps.backward.layers[number]
        own = [
            (name, getattr(grads, BY_NAME[name].field))
            for name in BACKWARD_STEPS
            if BY_NAME[name].place == BACKWARD_LAYER
        ]
        own += [(B + "grad_norm.gain", _row(grads.grad_gain)), (B + "grad_norm.bias", _row(grads.grad_shift))]
        found: list[Block] = [
            ((name,), "query", tokens if m.shape[0] > 1 else [""], [str(i) for i in range(m.shape[1])], m)
            for name, m in own
            if m is not None
        ]
        yield number, found, layer_attention(record, grads)


def _row(vector: np.ndarray | None) -> np.ndarray | None:
    """A norm's gain or bias gradient (d,) as one row (1, d), as JSON's grad_norm holds it."""
    return None if vector is None else vector[None, :]


def _layer_rows(steps: StackSteps, layer: int | None) -> Iterator[tuple[str, ...]]:
    """A stack's gradients in long rows after the `layer` column: each layer's, then the loss."""
    for number, own, attention in _layer_gradients(steps, layer):
        own_rows = [list(_vectors(title[0], "", names, found, by="query")) for title, _, names, _, found in own]
        first = own_rows[:1] if own and own[0][0][0] == "backward.grad_residual" else []
        for row in (
            *(r for part in first for r in part),
            *gradient_rows(attention),
            *(r for part in own_rows[len(first) :] for r in part),
        ):
            yield (str(number), *row)
    if steps.backward is not None and steps.backward.loss is not None:
        yield "", B + "loss", "", "", "", "", str(steps.backward.loss)


def _gradient_names(steps: Steps, step: Step, found: np.ndarray) -> Sequence[str]:
    if step.rows == COORDINATES:
        return [str(i) for i in range(found.shape[0])]
    return labels(steps.problem, step.name, found.shape[1], found.shape[0])[0]


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
