"""The mask: which keys each query may attend to, from `mask:`, `window:` and `padding:` together."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from attncli.errors import listed, phrase
from attncli.parsing.fields import FieldReader, rows_from_text
from attncli.problem import MaskRule
from attncli.yamldoc import kind_of

CAUSAL = ("causal", "causal_lower_right")  # top-left aligned (query i sees 0..i), and aligned to the last key
RULES = ("none", *CAUSAL)  # masks named in words; anything else is a 0/1 matrix


@dataclass(frozen=True)
class Positions:
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
    """The (L, S) mask (True = may attend) and the rule as written; every query keeps at least one key."""
    tokens, query_tokens = positions.tokens, positions.query_tokens
    allowed = np.ones((len(query_tokens), len(tokens)), dtype=bool)  # (L, S)
    written = "none" if data.get("mask") is None else data["mask"]
    kind = rule_kind(data)
    if kind == "matrix":
        allowed &= matrix(reader, written, tokens, query_tokens)
    window = _window(reader, data)
    if kind in CAUSAL or window is not None:
        allowed &= _by_position(reader, positions, kind, window)
    padding = _padding(reader, data, tokens)
    allowed &= ~np.isin(np.array(tokens, dtype=object), np.array(padding, dtype=object))[None, :]
    culprit = next((name for name in ("mask", "padding", "window") if name in data), "mask")
    for row, name in enumerate(query_tokens):
        if not allowed[row].any():
            raise reader.error((culprit,), "problem.all_masked", name=name, row=row + 1)
    return allowed, MaskRule(kind, window, padding)


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


def _by_position(reader: FieldReader, positions: Positions, kind: str, window: int | None) -> np.ndarray:
    """The (L, S) cells a causal mask and/or a window allow, from where each query and key stands."""
    causal = kind in CAUSAL
    query = query_at(reader, positions, kind, "mask" if causal else "window")  # (L,)
    offset = query[:, None] - np.arange(len(positions.tokens))[None, :]  # (L, S) i - j
    allowed = offset >= 0 if causal else np.ones(offset.shape, dtype=bool)
    if window is not None:
        allowed &= offset <= window if causal else np.abs(offset) <= window
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
        if not reader.flags.get("mask"):
            raise reader.error(("mask",), "problem.bad_mask", got=written)
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
