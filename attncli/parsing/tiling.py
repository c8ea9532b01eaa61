"""`tiles:` and `stable:`, how a problem asks its softmax to be written out (attncli.tiles), read and sized."""

from __future__ import annotations

from attncli import tiles
from attncli.errors import AttnError
from attncli.parsing.fields import FieldReader
from attncli.problem import Head, width
from attncli.yamldoc import kind_of


def read(reader: FieldReader, data: dict, heads: tuple[Head, ...], queries: int, keys: int) -> tuple[int | None, bool]:
    """`tiles: B` (keys per tile, a whole number from 1) and `stable: true|false`; a trace too large is refused here,
    before anything is computed."""
    stable = data.get("stable", False)
    if not isinstance(stable, bool):
        raise reader.error(("stable",), "problem.bad_stable", got=kind_of(stable))
    if "tiles" not in data:
        return None, stable
    size = data["tiles"]
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise reader.error(("tiles",), "problem.bad_tiles", got=kind_of(size))
    try:
        tiles.within_limit(size, queries, keys, [width(head.values) for head in heads])
    except AttnError as error:
        raise error.at(*reader.location(("tiles",)), reader.name(("tiles",))) from None
    return size, stable
