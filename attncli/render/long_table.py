"""CSV and TSV in long format: one row per number, `step,head,query,key,index,value`, full precision.

Long format suits pipes and data frames: filter with grep or awk, pivot later.
`head` is the head's index from 0, empty for the concatenation and for the final
output (always present, even when it equals the only head's output); `key` or
`index` is empty where it does not apply; masked scores are -inf. A token name that a
spreadsheet would take for a formula (=, +, -, @ first) is written with a leading ' (`text_cell`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator, Sequence

import numpy as np

from attncli.core import Steps

HEADER = ("step", "head", "query", "key", "index", "value")
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


def rows(steps: Steps) -> Iterator[Row]:
    problem = steps.problem
    for number, head in enumerate(steps.heads):
        h = str(number)
        if head.queries is not None:
            yield from _vectors("queries", h, problem.query_tokens, head.queries, by="query")
            yield from _vectors("keys", h, problem.tokens, head.keys, by="key")
        yield from _vectors("values", h, problem.tokens, head.values, by="key")
        if head.spec.scores is None:
            yield from _pairs("dot", h, problem.query_tokens, problem.tokens, head.compatibility)
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
