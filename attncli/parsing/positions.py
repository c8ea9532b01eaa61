"""`positions:` how the order of the tokens enters the calculation: RoPE or sinusoidal encodings.

`positions: rope` (or `{type: rope, base: 10000, style: half | interleaved}`) turns every head's
queries and keys after the projections; `positions: sinusoidal` adds Vaswani et al.'s encodings
to x before them. Each key stands at its place among the tokens, or at `position_ids:`; a query
at its token's position in self-attention, and in cross-attention at its place among the query
tokens (the last keys' places under `causal_lower_right`), or at `query_position_ids:`.
"""

from __future__ import annotations

import numpy as np

from attncli import positions as encodings
from attncli.parsing import masks
from attncli.parsing.fields import FieldReader
from attncli.parsing.heads import Inputs
from attncli.parsing.scores import SAME_WIDTH
from attncli.problem import GIVEN, Head, PositionEncoding, Projection, width
from attncli.yamldoc import did_you_mean, kind_of

ROPE, SINUSOIDAL = "rope", "sinusoidal"
KINDS = (ROPE, SINUSOIDAL)
FIELDS = {ROPE: ("type", "base", "style"), SINUSOIDAL: ("type", "base")}
IDS = ("position_ids", "query_position_ids")


def read(reader: FieldReader, data: dict, places: masks.Positions) -> PositionEncoding | None:
    """The encoding `data` asks for, with each query's and key's position; None without `positions:`."""
    if data.get("positions") is None:
        stray = next((name for name in IDS if name in data), None)
        if stray is not None:
            raise reader.error((stray,), "problem.position_ids_alone")
        return None
    fields = _fields(reader, data["positions"])
    kind = fields["type"]
    reader.check_fields(fields, ("positions",), FIELDS[kind])
    base = reader.number(("positions", "base"), fields["base"]) if "base" in fields else encodings.BASE
    if not base > 0:
        raise reader.error(("positions", "base"), "problem.positions_base", got=kind_of(fields["base"]))
    style = fields.get("style", encodings.HALF)
    if style not in encodings.STYLES:
        raise reader.error(("positions", "style"), "problem.rope_style", got=kind_of(style))
    key_at = _ids(reader, data, "position_ids", len(places.tokens), "tokens")
    if key_at is None:
        key_at = np.arange(len(places.tokens), dtype=reader.dtype)
    query_at = _query_at(reader, data, places, key_at)
    _check_distances(reader, data, query_at, key_at)
    return PositionEncoding(kind, base, query_at, key_at, style)


def _check_distances(reader: FieldReader, data: dict, query_at: np.ndarray, key_at: np.ndarray) -> None:
    """Refuse positions whose distance n − m, which RoPE turns by, passes the range of the numbers (±1e308 apart)."""
    with np.errstate(over="ignore", invalid="ignore"):
        distances = key_at[None, :] - query_at[:, None]  # (L, S)
    if not np.isfinite(distances).all():
        row, column = np.argwhere(~np.isfinite(distances))[0]
        name = "position_ids" if "position_ids" in data else "query_position_ids"
        raise reader.error(
            (name,), "problem.position_distance", to=repr(float(key_at[column])), query=repr(float(query_at[row]))
        )


def _fields(reader: FieldReader, written: object) -> dict:
    """`positions: rope` and `positions: {type: rope}` alike, as a mapping whose type is known."""
    fields = {"type": written} if isinstance(written, str) else written
    kind = fields.get("type") if isinstance(fields, dict) else None
    if not isinstance(kind, str) or kind.strip() not in KINDS:
        path = ("positions", "type") if isinstance(written, dict) and "type" in written else ("positions",)
        shown = kind if isinstance(kind, str) else written
        hint = did_you_mean(kind, KINDS) if isinstance(kind, str) else ""
        raise reader.error(path, "problem.bad_positions", got=kind_of(shown), hint=hint or "")
    return {**fields, "type": kind.strip()}


def _ids(reader: FieldReader, data: dict, name: str, count: int, what: str) -> np.ndarray | None:
    """The positions listed under `name`, one for each of `count` tokens; None when not given."""
    if name not in data:
        return None
    ids = reader.vector((name,), data[name])
    if len(ids) != count:
        raise reader.error((name,), "problem.position_ids_count", count=len(ids), expected=count, what=what)
    return ids


def _query_at(reader: FieldReader, data: dict, places: masks.Positions, key_at: np.ndarray) -> np.ndarray:
    """Each query's position: its token's in self-attention; in cross-attention `query_position_ids:` or its place."""
    given = _ids(reader, data, "query_position_ids", len(places.query_tokens), "query_tokens")
    if not places.cross:
        if given is not None:
            raise reader.error(("query_position_ids",), "problem.query_positions_self")
        return key_at[masks.query_at(reader, places, masks.rule_kind(data), "positions")]
    if given is not None:
        return given
    return masks.query_at(reader, places, masks.rule_kind(data), "positions").astype(reader.dtype)


def encoded_inputs(reader: FieldReader, encoding: PositionEncoding, inputs: Inputs) -> tuple[PositionEncoding, Inputs]:
    """Sinusoidal: x + PE(key positions) and x_query + PE(query positions), both parts kept for display."""
    if inputs.x is None:
        raise reader.error(("positions",), "problem.sinusoidal_without_x")
    d = inputs.x.shape[1]
    if d % 2:
        raise reader.error(("x",), "problem.sinusoidal_odd", width=d)
    encoding_x = encodings.sinusoidal(encoding.key_at, d, encoding.base).astype(reader.dtype)  # (S, d)
    encoding_q = encodings.sinusoidal(encoding.query_at, d, encoding.base).astype(reader.dtype)  # (L, d)
    x_query = inputs.x_query
    if x_query is not None and x_query.shape[1] != d:
        raise reader.error(("x_query",), "problem.sinusoidal_widths", width=x_query.shape[1], expected=d)
    kept = PositionEncoding(
        encoding.kind,
        encoding.base,
        encoding.query_at,
        encoding.key_at,
        x=inputs.x,
        encoding=encoding_x,
        x_query=x_query,
        query_encoding=encoding_q,
    )
    return kept, inputs._replace(x=inputs.x + encoding_x, x_query=None if x_query is None else x_query + encoding_q)


def check_heads(reader: FieldReader, encoding: PositionEncoding, heads: tuple[Head, ...]) -> None:
    """RoPE needs queries and keys of even width that meet in a dot product; sinusoidal, every operand from x."""
    for head in heads:
        if encoding.kind == SINUSOIDAL:
            given = next((name for name, part in _operands(head) if not isinstance(part, Projection)), None)
            if given is not None:
                raise reader.error(("positions",), "problem.sinusoidal_given", head=head.label, name=given)
            continue
        if head.score.kind == GIVEN:
            raise reader.error(("positions",), "problem.rope_given_scores")
        if head.score.kind not in SAME_WIDTH:
            raise reader.error(("positions",), "problem.rope_score", kind=head.score.kind)
        if width(head.keys) % 2:
            raise reader.error(("positions",), "problem.rope_odd", head=head.label, width=width(head.keys))


def _operands(head: Head) -> list[tuple[str, object]]:
    parts: list[tuple[str, object]] = [("values", head.values)]
    if head.scores is None:
        parts = [("queries", head.queries), ("keys", head.keys), *parts]
    return parts
