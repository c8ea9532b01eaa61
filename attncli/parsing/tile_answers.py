"""`tiles:` in `answers:`: the online softmax's running values as the JSON writes them, a record per tile.

    tiles:
      bank:                                   # a query token; or a list, an entry per query in order
        - {running_max: 2, rescale: 0, running_sum: 1, accumulator: [2, 0]}
        - {running_max: 2, rescale: 1, running_sum: 1.3679, accumulator: [2, 0.7358]}

Each record may hold any of the four (attncli.steps.TILE_STEPS), `?` where not answered; a query
may list its first tiles only. They are read into one Answer per step written: running_max,
rescale and running_sum a row per query and a column per tile, the accumulator a row per query
and tile and a column per coordinate (attncli.steps.labels), so that grading, reports and the
tutor take them as any other step. A running max before any key is −∞: `-inf` may be written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from attncli.core import Steps
from attncli.errors import AttnError
from attncli.steps import BY_NAME, COORDINATES, TILE_STEPS, labels, tile_count
from attncli.yamldoc import FieldPath, kind_of

if TYPE_CHECKING:  # attncli.parsing.answers reads this module: the names only, for the types
    from attncli.parsing.answers import Entry

Grid = list[list["Entry | None"]]
Read = tuple[str, tuple[str, ...], tuple[str, ...], tuple[tuple["Entry | None", ...], ...]]  # step, rows, columns


class Reader(Protocol):
    """What reads the rest of `answers:` (attncli.parsing.answers): its errors, fields and cells."""

    steps: Steps | None

    def error(self, path: FieldPath, key: str, field: str | None = None, **params: object) -> AttnError: ...

    def check_fields(self, data: dict, path: FieldPath, known: tuple[str, ...], names_hint: str = ...) -> None: ...

    def row_index(self, path: FieldPath, name: str, rows: tuple[str, ...]) -> int: ...

    def entry(self, path: FieldPath, value: object, step: str) -> Entry | None: ...


def read(reader: Reader, path: FieldPath, value: object, head: int) -> list[Read]:
    """The tile steps written at `path` for `head`: for each of TILE_STEPS some record holds, its name, rows,
    columns and cells (attncli.parsing.answers makes them an Answer)."""
    steps = reader.steps
    assert steps is not None, "tiles are read against a calculation"
    if steps.heads[head].tiles is None:
        raise reader.error(path, "check.no_tiles")
    problem = steps.problem
    count, width = tile_count(problem), steps.heads[head].values.shape[1]
    queries = len(problem.query_tokens)
    grids: dict[str, Grid] = {
        name: [[None] * width for _ in range(queries * count)]
        if BY_NAME[name].columns == COORDINATES
        else [[None] * count for _ in range(queries)]
        for name in TILE_STEPS
    }
    written: set[str] = set()
    for query, query_path, records in _per_query(reader, path, value, problem.query_tokens):
        if not isinstance(records, list) or not records or not all(isinstance(r, dict) for r in records):
            raise reader.error(query_path, "check.bad_tiles", got=kind_of(records))
        if len(records) > count:
            raise reader.error(query_path, "check.too_many_tiles", count=len(records), expected=count)
        for tile, record in enumerate(records):
            tile_path = (*query_path, tile)
            reader.check_fields(record, tile_path, TILE_STEPS, "check.tile_fields")
            written.update(record)
            for name, cell in record.items():
                if BY_NAME[name].columns == COORDINATES:
                    grids[name][query * count + tile] = _vector(reader, (*tile_path, name), cell, width)
                else:
                    grids[name][query][tile] = reader.entry((*tile_path, name), cell, name)
    return [
        (name, *labels(problem, name, len(grids[name][0])), tuple(tuple(row) for row in grids[name]))
        for name in TILE_STEPS
        if name in written
    ]


def _per_query(
    reader: Reader, path: FieldPath, value: object, queries: tuple[str, ...]
) -> list[tuple[int, FieldPath, object]]:
    """Each query answered, its path and its list of records: a mapping token: list, a list of lists (one per
    query, in order), or, with one query, its list of records itself."""
    if isinstance(value, dict) and value:
        return [(reader.row_index((*path, name), name, queries), (*path, name), found) for name, found in value.items()]
    if isinstance(value, list) and value and len(queries) == 1 and all(isinstance(item, dict) for item in value):
        return [(0, path, value)]
    if not isinstance(value, list) or not value:
        raise reader.error(path, "check.bad_tiles", got=kind_of(value))
    if len(value) != len(queries):
        raise reader.error(path, "check.tile_queries", count=len(value), expected=len(queries))
    return [(i, (*path, i), found) for i, found in enumerate(value)]


def _vector(reader: Reader, path: FieldPath, value: object, width: int) -> list[Entry | None]:
    """An accumulator: `width` numbers (one may be written bare when the values are one number wide)."""
    cells = value if isinstance(value, list) else [value] if width == 1 and not isinstance(value, dict) else None
    if cells is None or len(cells) != width:
        raise reader.error(path, "check.accumulator_width", expected=width, got=kind_of(value))
    return [reader.entry((*path, c), cell, "accumulator") for c, cell in enumerate(cells)]
