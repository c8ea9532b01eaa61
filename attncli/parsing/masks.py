"""The mask: which keys each query may attend to, from `mask:`, `window:` and `padding:` together."""

from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np

from attncli.errors import listed, phrase
from attncli.parsing.fields import FieldReader, rows_from_text
from attncli.problem import MaskRule
from attncli.yamldoc import did_you_mean, kind_of

CAUSAL = ("causal", "causal_lower_right")  # top-left aligned (query i sees 0..i), and aligned to the last key
RULES = ("none", *CAUSAL)  # masks named in words; anything else is a 0/1 matrix


class Positions(NamedTuple):
    """Where each query and key stands, for causal and window masks."""

    tokens: tuple[str, ...]
    query_tokens: tuple[str, ...]
    cross: bool

    def query_indexes(self) -> list[int]:
        """Self-attention: each query's index among the tokens (first occurrence)."""
        first: dict[str, int] = {}
        for index, name in enumerate(self.tokens):
            first.setdefault(name, index)
        return [first[name] for name in self.query_tokens]

    def query_positions(self, reader: FieldReader, rule_field: str) -> np.ndarray:
        """Each query's position: its place among the query tokens (cross-attention) or among the tokens."""
        if self.cross or self.query_tokens == self.tokens:
            return np.arange(len(self.query_tokens))
        counts = Counter(self.tokens)
        for name in self.query_tokens:
            if counts[name] > 1:
                raise reader.error((rule_field,), "problem.ambiguous_position", name=name)
        return np.array(self.query_indexes())


def read(reader: FieldReader, data: dict, positions: Positions) -> tuple[np.ndarray, MaskRule]:
    """The (L, S) mask (True = may attend) and the rule as written; every query keeps at least one key.

    A mask made by one rule alone costs O(L + S), so that a long sequence's problem stays as small
    as the blocked kernel that computes it: no mask is a read-only view of one True, padding alone
    one of a row, and a causal rule or a window one of L + S − 1 cells (`_by_position`).
    """
    tokens, query_tokens = positions.tokens, positions.query_tokens
    shape = (len(query_tokens), len(tokens))
    written = "none" if data.get("mask") is None else data["mask"]
    kind = rule_kind(data)
    parts: list[tuple[np.ndarray, np.ndarray]] = []  # each rule's (L, S) cells and the rows it leaves a key
    if kind == "matrix":
        cells = matrix(reader, written, tokens, query_tokens)
        parts.append((cells, cells.any(axis=1)))
    window = _window(reader, data)
    if kind in CAUSAL or window is not None:
        parts.append(_by_position(reader, positions, kind, window))
    padding = _padding(reader, data, tokens)
    if padding:
        kept = ~np.isin(np.array(tokens, dtype=object), np.array(padding, dtype=object))  # (S,)
        parts.append((np.broadcast_to(kept, shape), np.full(shape[0], kept.any())))
    if not parts:
        return np.broadcast_to(np.True_, shape), MaskRule(kind, window, padding)
    allowed, has_key = parts[0] if len(parts) == 1 else _together([cells for cells, _ in parts])
    culprit = next((name for name in ("mask", "padding", "window") if name in data), "mask")
    if not has_key.all():
        row = int(np.argmin(has_key))
        raise reader.error((culprit,), "problem.all_masked", name=query_tokens[row], row=row + 1)
    return allowed, MaskRule(kind, window, padding)


def _together(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The cells every rule allows, as one (L, S) matrix, and the rows left a key."""
    allowed = np.logical_and.reduce(parts)
    return allowed, allowed.any(axis=1)


def rule_kind(data: dict) -> str:
    """The mask's kind as written: one of RULES, else "matrix"."""
    written = "none" if data.get("mask") is None else data["mask"]
    return written.strip() if isinstance(written, str) and written.strip() in RULES else "matrix"


def query_at(reader: FieldReader, positions: Positions, kind: str, rule_field: str) -> np.ndarray:
    """Each query's position (L,) for a mask of `kind`, or for a bias by distance (`rule_field` names the field)."""
    if kind == "causal_lower_right":
        return _lower_right(reader, positions)
    return positions.query_positions(reader, rule_field)


def _window(reader: FieldReader, data: dict) -> int | None:
    """`window: w`, how far a key may stand from its query: |i − j| ≤ w (j ≤ i with causal)."""
    if "window" not in data:
        return None
    window = data["window"]
    if isinstance(window, bool) or not isinstance(window, int) or window < 0:
        raise reader.error(("window",), "problem.bad_window", got=kind_of(window))
    return window


def _by_position(
    reader: FieldReader, positions: Positions, kind: str, window: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """The (L, S) cells a causal mask and/or a window allow, by where queries and keys stand; the rows left a key.

    A cell depends on the offset p_i − j alone. When the queries stand at consecutive positions,
    p_i = p_0 + i (always, but for a named subset of the tokens), cell (i, j) is the one at offset
    p_0 + i − j of a row of L + S − 1 cells, and the matrix is a read-only view of that row.
    """
    causal = kind in CAUSAL
    query = query_at(reader, positions, kind, "mask" if causal else "window")  # (L,)
    keys = len(positions.tokens)
    if window is not None:  # no two positions are further apart than L + S: a wider window is that one (and fits)
        window = min(window, len(query) + keys)
    if not np.array_equal(query, query[0] + np.arange(len(query))):
        allowed = _allowed(query[:, None], np.arange(keys)[None, :], causal, window)  # (L, S)
        return allowed, allowed.any(axis=1)
    cells = _allowed(query[0] - (keys - 1) + np.arange(len(query) + keys - 1), 0, causal, window)  # (L + S − 1,)
    start = cells[keys - 1 :]  # cell (i, 0); the cells of (i, j > 0) come before it
    step = cells.strides[0]
    allowed = np.lib.stride_tricks.as_strided(start, (len(query), keys), (step, -step), writeable=False)
    counts = np.concatenate([[0], np.cumsum(cells)])  # row i is cells[i : i + S]
    return allowed, counts[keys:] > counts[:-keys]


def _allowed(query: np.ndarray, key: np.ndarray | int, causal: bool, window: int | None) -> np.ndarray:
    """Whether a key at position `key` is visible from a query at `query` (broadcast): j ≤ i causal, |i − j| ≤ w."""
    allowed = key <= query if causal else np.ones(np.broadcast(query, key).shape, dtype=bool)
    if window is not None:
        allowed &= key >= query - window
        if not causal:
            allowed &= key <= query + window
    return allowed


def _lower_right(reader: FieldReader, positions: Positions) -> np.ndarray:
    """Query row i at key i + S − L, as torch's causal_lower_right: the last query is the newest token.

    In self-attention a named query stands at its own token, so the queries must then be the
    last L tokens, in order; otherwise the two readings would disagree and the mask is refused.
    """
    count, keys = len(positions.query_tokens), len(positions.tokens)
    query_at = np.arange(count) + keys - count  # (L,)
    if not positions.cross and positions.query_tokens != positions.tokens[keys - count :]:
        raise reader.error(("mask",), "problem.lower_right_not_last")
    return query_at


def _padding(reader: FieldReader, data: dict, tokens: tuple[str, ...]) -> tuple[str, ...]:
    """The tokens no query may attend to."""
    if "padding" not in data:
        return ()
    padding = reader.text_list(("padding",), data["padding"])
    known = set(tokens)
    for index, name in enumerate(padding):
        if name not in known:
            raise reader.error(("padding", index), "problem.unknown_token", name=name, names=listed(tokens))
    return padding


def matrix(reader: FieldReader, written: object, tokens: tuple[str, ...], query_tokens: tuple[str, ...]) -> np.ndarray:
    """A 0/1 mask given as rows (a list, a mapping query: row, or --mask "1,0; 1,1"), True = may attend."""
    if isinstance(written, str):  # not none or causal, which the caller has taken
        word = written.strip()
        if not reader.flags.get("mask") or (word.isidentifier() and word.lower() not in ("true", "false")):
            hint = did_you_mean(word, ("none", *CAUSAL))  # --mask causl is a slip, not a 1×1 matrix
            raise reader.error(("mask",), "problem.bad_mask", got=written, hint=hint)
        written = rows_from_text(written)
    rows = _rows(reader, written, query_tokens)
    shape_error = {"rows": len(query_tokens), "columns": len(tokens)}
    if not isinstance(rows, list) or len(rows) != len(query_tokens):
        raise reader.error(("mask",), "problem.mask_shape", **shape_error)
    out = np.zeros((len(query_tokens), len(tokens)), dtype=bool)
    for i, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != len(tokens):
            raise reader.error(("mask", i), "problem.mask_shape", **shape_error)
        for j, cell in enumerate(row):
            if not (cell in (0, 1, "0", "1") or isinstance(cell, bool)):
                raise reader.error(("mask", i, j), "problem.mask_cell", got=cell)
            out[i, j] = cell in (1, "1", True)
    return out


def _rows(reader: FieldReader, written: object, query_tokens: tuple[str, ...]) -> object:
    """The rows of a mask, in query order when written as a mapping query: row."""
    if not isinstance(written, dict):
        return written
    named = set(query_tokens)
    unknown = [name for name in written if name not in named]
    if unknown:
        raise reader.error(
            ("mask", unknown[0]),
            "problem.unknown_row_name",
            name=unknown[0],
            names=listed(query_tokens),
            hint=phrase("hint.cross_attention"),
        )
    return [written.get(name) for name in query_tokens]
