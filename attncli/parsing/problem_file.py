"""A single problem from its merged fields: tokens, inputs, heads, W_O and the mask, in dependency order."""

from __future__ import annotations

import numpy as np

from attncli import core
from attncli.parsing import backward, biases, masks, tiling
from attncli.parsing import positions as encodings
from attncli.parsing.budget import within_budget
from attncli.parsing.fields import FieldReader
from attncli.parsing.heads import HEAD_FIELDS, Heads, Inputs
from attncli.problem import Backward, Head, Problem, Projection, Score, width

TOP_FIELDS = (
    "title", "notes", "tokens", "query_tokens", "x", "x_query", "layers", "heads", "kv_heads", "w_o", "mask", "bias",
    "positions", "position_ids", "query_position_ids", "padding", "window", "scale", "exercise", "answers",
    "tolerance", "carry", "min_decimals", "require", "decimal_comma", "points", "student", "student_id", "tiles",
    "stable", "backward", *backward.FIELDS,
    *HEAD_FIELDS[1:],
)  # fmt: skip


class Builder:
    """Works out tokens, heads and the mask from the merged fields, in dependency order."""

    def __init__(
        self, reader: FieldReader, data: dict, results_only: bool = False, held: int = 0, layers: int = 1
    ) -> None:
        self.reader = reader
        self.data = data
        self.heads = Heads(reader, data)
        self.results_only = results_only
        self.held, self.layers = held, layers  # a stack's layers before this one: bytes they hold, and their count
        self.needed = 0  # bytes this problem's calculation holds, once checked

    def problem(self) -> Problem:
        tokens = self.tokens()
        query_tokens, cross = self.query_tokens(tokens)
        self.check_memory([None] * len(self.heads), len(query_tokens), len(tokens))  # before any head
        positions = masks.Positions(tokens, query_tokens, cross)
        inputs = self.inputs(positions)
        encoding = encodings.read(self.reader, self.data, positions)
        if encoding is not None and encoding.kind == encodings.SINUSOIDAL:
            encoding, inputs = encodings.encoded_inputs(self.reader, encoding, inputs)
        heads = tuple(self.heads.head(i, tokens, query_tokens, inputs) for i in range(len(self.heads)))
        if encoding is not None:
            encodings.check_heads(self.reader, encoding, heads)
        w_o = self.output_projection(heads)
        self.check_memory(
            [head.score for head in heads], len(query_tokens), len(tokens), _vectors(heads, w_o, len(query_tokens))
        )
        mask, rule = masks.read(self.reader, self.data, positions)
        bias = biases.read(self.reader, self.data, positions, heads)
        size, stable = tiling.read(self.reader, self.data, heads, len(query_tokens), len(tokens))
        asked = self.backward(heads, w_o, query_tokens, len(tokens))
        return Problem(
            tokens=tokens,
            query_tokens=query_tokens,
            cross=cross,
            heads=heads,
            mask=mask,
            mask_rule=rule,
            bias=bias,
            positions=encoding,
            w_o=w_o,
            kv_names=tuple(self.heads.kv_name(group) for group in range(len(self.heads.kv))),
            kv_unnamed=self.heads.kv_unnamed(),
            title=self.reader.optional_text(self.data, "title"),
            notes=self.reader.optional_text(self.data, "notes"),
            source=self.reader.document.name,
            tiles=size,
            stable=stable,
            backward=asked,
            shared=backward.shared_fields(self.heads, heads),
            query_rows=inputs.query_rows,
        )

    def backward(
        self, heads: tuple[Head, ...], w_o: np.ndarray | None, query_tokens: tuple[str, ...], keys: int
    ) -> Backward | None:
        """The gradients `backward:` asks for: dO a row per query, as wide as the final output (attncli.backward)."""
        columns = w_o.shape[1] if w_o is not None else sum(width(head.values) for head in heads)
        labelled = [(head.label, head.score) for head in heads]
        asked = backward.read(self.reader, self.data, ("query_tokens", query_tokens), columns, labelled)
        if asked is not None and not self.results_only:
            scores = [head.score for head in heads]
            backward.check_memory(self.reader, scores, len(query_tokens), keys, "bias" in self.data)
        return asked

    def tokens(self) -> tuple[str, ...]:
        """`tokens:`, else the names of the first mapping of keys, values or x, else t1..tS."""
        if "tokens" in self.data:
            return self.reader.text_list(("tokens",), self.data["tokens"])
        places = [(head, False) for head in range(len(self.heads))] + [(g, True) for g in range(len(self.heads.kv))]
        for name in ("keys", "values", "x"):
            for head, kv in places:
                found = self.heads.lookup(head, name, kv)
                if found is None or (name == "x" and head):
                    continue
                path, value = found
                if isinstance(value, dict) and "file" not in value:
                    return self.reader.text_list(path, list(value))
                count = len(self.reader.matrix(path, value))  # an array file is read here once, then kept
                return tuple(f"t{i + 1}" for i in range(count))
        raise self.reader.error((), "problem.no_tokens")

    def query_tokens(self, tokens: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
        """The query names and whether they come from another sequence (cross-attention)."""
        if "query_tokens" in self.data:
            names = self.reader.text_list(("query_tokens",), self.data["query_tokens"])
        else:
            named = self.named_queries(tokens)
            names = self.unnamed_queries(tokens) if named is None else named
        return names, not set(names) <= set(tokens)

    def named_queries(self, tokens: tuple[str, ...]) -> tuple[str, ...] | None:
        """The names of the first head's queries written as a mapping token: row; each must be a token."""
        for head in range(len(self.heads)):
            path, mapping = self.heads.lookup(head, "queries") or ((), None)
            if isinstance(mapping, dict) and "file" not in mapping:
                known = set(tokens)
                stray = [name for name in mapping if name not in known]
                if stray:
                    raise self.reader.error((*path, stray[0]), "problem.unknown_query_name", name=stray[0])
                return tuple(self.reader.plain_text((*path, name), name) for name in mapping)
        return None

    def unnamed_queries(self, tokens: tuple[str, ...]) -> tuple[str, ...]:
        """Without any names, as with arrays from files, L ≠ S queries are named q1..qL (cross-attention)."""
        found = self.heads.lookup(0, "queries")
        if found is None and "x_query" in self.data:
            found = ("x_query",), self.data["x_query"]
        if "tokens" in self.data or found is None:
            return tokens
        count = len(self.reader.matrix(*found))
        return tokens if count == len(tokens) else tuple(f"q{i + 1}" for i in range(count))

    def inputs(self, positions: masks.Positions) -> Inputs:
        """The inputs X (keys/values side) and X for the queries, when projections are used."""
        x = x_query = None
        if "x" in self.data:
            x = self.reader.matrix(("x",), self.data["x"], positions.tokens, "tokens")
        if "x_query" in self.data:
            x_query = self.reader.matrix(("x_query",), self.data["x_query"], positions.query_tokens, "query_tokens")
        elif x is not None and not positions.cross:
            rows = positions.query_indexes()
            return Inputs(x, x[rows], query_rows=tuple(rows))
        return Inputs(x, x_query)

    def output_projection(self, heads: tuple[Head, ...]) -> np.ndarray | None:
        if "w_o" not in self.data:
            return None
        w_o = self.reader.matrix(("w_o",), self.data["w_o"])
        d_concat = sum(width(head.values) for head in heads)
        if w_o.shape[0] != d_concat:
            raise self.reader.error(("w_o",), "problem.w_o_rows", count=w_o.shape[0], expected=d_concat)
        return w_o

    def check_memory(self, scores: list[Score | None], queries: int, keys: int, vectors: int = 0) -> None:
        """Refuse a problem whose calculation would not fit in memory, before any (L, S) matrix exists.

        `vectors` numbers besides (see `_vectors`): a W_Q 500,000 wide over 2,000 rows is 7.5 GiB of
        queries whatever the number of (query, key) cells.
        """
        bias = self.data.get("bias") is not None
        cells = core.bytes_needed(scores, queries, keys, self.reader.dtype, bias, results_only=self.results_only)
        self.needed = cells + vectors * self.reader.dtype.itemsize
        within_budget(self.held + self.needed, len(self.heads), queries, keys, self.reader.document.name, self.layers)


def _vectors(heads: tuple[Head, ...], w_o: np.ndarray | None, queries: int) -> int:
    """How many numbers the calculation makes besides its (L, S) matrices, from the shapes alone: every
    projection X·W, the general score's q·W, each head's output, the concatenation and W_O's output."""
    count = 0
    for head in heads:
        for operand in (head.queries, head.keys, head.values):
            if isinstance(operand, Projection):
                count += operand.x.shape[0] * operand.w.shape[1]
        if head.score.w is not None:
            count += queries * head.score.w.shape[1]
        count += queries * width(head.values)
    if len(heads) > 1 or w_o is not None:
        d_concat = sum(width(head.values) for head in heads)
        count += queries * (d_concat + (w_o.shape[1] if w_o is not None else 0))
    return count
