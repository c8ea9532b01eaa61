"""Turn a YAML document and command-line flags into one validated `Problem`.

This is the only place that looks at shapes, names and types. Everything after
it (the numpy core, the renderers) can trust that matrices line up, that the mask
leaves every query at least one key, and that every number is finite.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attncli import arrays
from attncli.errors import AttnError, fail, listed
from attncli.i18n import t
from attncli.yamldoc import Document, did_you_mean, field_name, finite_number, kind_of, unknown_field
from attncli.yamldoc import Path as DocPath

HEAD_FIELDS = ("name", "queries", "keys", "values", "w_q", "w_k", "w_v", "scores", "score")
TOP_FIELDS = (
    "title", "notes", "tokens", "query_tokens", "x", "x_query", "heads", "w_o", "mask", "padding", "window",
    "scale", "answers", "tolerance", *HEAD_FIELDS[1:],
)  # fmt: skip
SCORE_KINDS = ("scaled_dot", "dot", "cosine", "general", "additive")
# The core keeps every step of every head as an (L, S) matrix (the raw score, the scaled one,
# the masked one, e^s, the weights) and softmax builds one more while it works. A problem
# whose matrices would pass the budget is refused before any of them exists.
CORE_MATRICES = 6
MEMORY_BUDGET = 4 * 2**30
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # characters a terminal obeys instead of showing


@dataclass(frozen=True)
class Projection:
    """A matrix given as inputs times a learned projection, as in Q = X·W_Q."""

    x: np.ndarray  # (n, d)
    w: np.ndarray  # (d, d_out)


Operand = np.ndarray | Projection


@dataclass(frozen=True)
class Score:
    """How a query and a key become one number, and the factor applied to it."""

    kind: str  # one of SCORE_KINDS, or "given" when the scores are in the input
    scale: float
    w: np.ndarray | None = None  # general: (d_q, d_k)
    w_query: np.ndarray | None = None  # additive: (d_q, d_a)
    w_key: np.ndarray | None = None  # additive: (d_k, d_a)
    v: np.ndarray | None = None  # additive: (d_a,)


@dataclass(frozen=True)
class Head:
    name: str
    score: Score
    queries: Operand | None  # (L, d_q); None when scores are given
    keys: Operand | None  # (S, d_k); None when scores are given
    values: Operand  # (S, d_v)
    scores: np.ndarray | None = None  # (L, S), given directly


@dataclass(frozen=True)
class MaskRule:
    """The mask as the user said it, kept for display; `Problem.mask` is what is applied."""

    kind: str = "none"  # none | causal | matrix
    window: int | None = None
    padding: tuple[str, ...] = ()


@dataclass(frozen=True)
class Problem:
    tokens: tuple[str, ...]  # S key/value positions
    query_tokens: tuple[str, ...]  # L query positions
    cross: bool  # queries come from another sequence
    heads: tuple[Head, ...]
    mask: np.ndarray  # (L, S) bool, True = may attend
    mask_rule: MaskRule = field(default_factory=MaskRule)
    w_o: np.ndarray | None = None  # (Σ d_v, d_out)
    title: str | None = None
    notes: str | None = None
    source: str = "-"


def parse(
    document: Document,
    flags: Mapping[str, object] | None = None,
    base: Path | None = None,
    dtype: type[np.floating] = np.float64,
) -> Problem:
    """Validate `document` with `flags` (field -> value, given on the command line) laid over it.

    Every matrix comes out as `dtype`; the core computes in the dtype it is given.
    """
    data = document.data if document.data is not None else {}
    reader = _Reader(document, dict(flags or {}), base or Path("."), np.dtype(dtype))
    if not isinstance(data, dict):
        raise reader.error((), "problem.not_mapping")
    data = {**data, **reader.flags}
    reader.check_fields(data, (), TOP_FIELDS)
    return _Builder(reader, data).problem()


def base_folder(file: str | None) -> Path:
    """Where the array files a problem names are found: beside its file; for stdin or flags, the working directory."""
    return Path(file).parent if file not in (None, "-") else Path(".")


def rows_from_text(text: str) -> list[list[str]]:
    """The ROWS syntax of flags: rows split by `;`, numbers by `,` (`"2,0; 1,1"`)."""
    return [[cell.strip() for cell in row.split(",")] for row in text.split(";") if row.strip()]


class _Reader:
    """Reads typed values out of the document, raising errors that say where."""

    def __init__(self, document: Document, flags: dict[str, object], base: Path, dtype: np.dtype) -> None:
        self.document = document
        self.flags = flags
        self.base = base
        self.dtype = dtype
        self.files: dict[DocPath, np.ndarray] = {}

    def error(self, path: DocPath, key: str, field: str | None = None, **params: object) -> AttnError:
        return fail(key, **params).at(*self._location(path), field if field is not None else field_name(path))

    def check_fields(self, data: dict, path: DocPath, known: Sequence[str]) -> None:
        name = unknown_field(data, known)
        if name is not None:
            hint = did_you_mean(name, known) or t("hint.known_fields", names=", ".join(known))
            raise self.error((*path, name), "problem.unknown_field", name=name, hint=hint)

    def number(self, path: DocPath, value: object, field: str | None = None) -> float:
        try:
            return finite_number(value)
        except AttnError as error:
            raise error.at(*self._location(path), field or field_name(path)) from None

    def plain_text(self, path: DocPath, text: str, lines: bool = False) -> str:
        """`text` if it holds no control character (with `lines`, newlines and tabs are fine)."""
        found = _CONTROL.search(text.replace("\n", "").replace("\t", "") if lines else text)
        if found:
            raise self.error(path, "problem.control_character", char=ascii(found.group())[1:-1])
        return text

    def _location(self, path: DocPath) -> tuple[str, int | None]:
        if path and path[0] in self.flags:
            return f"--{str(path[0]).replace('_', '-')}", None
        return self.document.name, self.document.line(path)

    def text_list(self, path: DocPath, value: object) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list) or not value:
            raise self.error(path, "problem.not_token_list", got=kind_of(value))
        for index, item in enumerate(value):
            if isinstance(item, (dict, list)) or item is None or isinstance(item, bool):
                raise self.error((*path, index), "problem.not_token", got=kind_of(item))
        return tuple(self.plain_text((*path, index), str(item)) for index, item in enumerate(value))

    def matrix(
        self, path: DocPath, value: object, rows: Sequence[str] | None = None, rows_field: str = ""
    ) -> np.ndarray:
        """A matrix given as a list of rows, one row, a mapping token: row, or an array file.

        `rows` names the rows expected, in order, as listed by the field `rows_field`; a mapping names exactly those.
        """
        from_flag = isinstance(value, str) and bool(path) and path[0] in self.flags
        if (from_flag and value.startswith("@")) or (isinstance(value, dict) and "file" in value):
            array = self.array_file(path, value)
            if rows is not None and array.shape[0] != len(rows):
                raise self.error(path, "problem.row_count", count=array.shape[0], expected=len(rows), what=rows_field)
            return array
        if from_flag:
            value = rows_from_text(value)
        if isinstance(value, dict):
            if rows is None:
                raise self.error(path, "problem.mapping_without_names")
            named = set(rows)
            unknown = [name for name in value if name not in named]
            if unknown:
                hint = t("hint.cross_attention") if rows_field == "query_tokens" else ""
                raise self.error(
                    (*path, unknown[0]), "problem.unknown_row_name", name=unknown[0], names=listed(rows), hint=hint
                )
            missing = [name for name in rows if name not in value]
            if missing:
                raise self.error(path, "problem.missing_row", name=missing[0])
            value = [value[name] for name in rows]
            row_paths = [(*path, name) for name in rows]
        elif isinstance(value, list) and value and not any(isinstance(item, (list, dict)) for item in value):
            value = [value]
            row_paths = [path]
        elif isinstance(value, list) and value:
            row_paths = [(*path, index) for index in range(len(value))]
        else:
            raise self.error(path, "problem.not_matrix", got=kind_of(value))
        if rows is not None and len(value) != len(rows):
            raise self.error(path, "problem.row_count", count=len(value), expected=len(rows), what=rows_field)
        width = None
        out = []
        for index, (row, row_path) in enumerate(zip(value, row_paths)):
            label = (
                t("field.row", field=field_name(path), row=index + 1, token=rows[index])
                if rows
                else t("field.row_unnamed", field=field_name(path), row=index + 1)
            )
            if not isinstance(row, list) or not row:
                raise self.error(row_path, "problem.not_row", label, got=kind_of(row))
            if width is not None and len(row) != width:
                raise self.error(row_path, "problem.row_width", label, count=len(row), expected=width)
            width = len(row)
            out.append([self.number((*row_path, j), cell, label) for j, cell in enumerate(row)])
        return self.typed(path, out)

    def vector(self, path: DocPath, value: object) -> np.ndarray:
        if not isinstance(value, list) or not value or any(isinstance(item, (list, dict)) for item in value):
            raise self.error(path, "problem.not_vector", got=kind_of(value))
        return self.typed(path, [self.number((*path, j), cell) for j, cell in enumerate(value)])

    def array_file(self, path: DocPath, spec: dict | str) -> np.ndarray:
        """An array from `{file: ..., key: ...}` in YAML or `@path[:key]` on the command line, read once per field."""
        if path not in self.files:
            self.files[path] = self._read_array(path, spec)
        return self.files[path]

    def _read_array(self, path: DocPath, spec: dict | str) -> np.ndarray:
        try:
            if isinstance(spec, str):
                return self.typed(path, arrays.load_flag(spec))
            self.check_fields(spec, path, ("file", "key"))
            if not isinstance(spec["file"], str):
                raise self.error((*path, "file"), "problem.not_text", got=kind_of(spec["file"]))
            return self.typed(path, arrays.load(self.base / spec["file"], spec.get("key")))
        except AttnError as error:
            raise error.at(*self._location(path), field_name(path)) from None

    def typed(self, path: DocPath, numbers: object) -> np.ndarray:
        """`numbers` as an array of the calculation's dtype; a number beyond its range is an error, not inf."""
        with np.errstate(over="ignore"):
            array = np.asarray(numbers, dtype=self.dtype)
        if not np.isfinite(array).all():
            limit = f"{float(np.finfo(self.dtype).max):.2g}"
            raise self.error(path, "problem.beyond_dtype", dtype=self.dtype.name, limit=limit)
        return array


class _Builder:
    """Works out tokens, heads and the mask from the merged fields, in dependency order."""

    def __init__(self, reader: _Reader, data: dict) -> None:
        self.reader = reader
        self.data = data
        raw_heads = data.get("heads")
        if raw_heads is None:
            self.head_fields: list[tuple[DocPath, dict]] = [((), {})]
        elif isinstance(raw_heads, list) and raw_heads and all(isinstance(h, dict) for h in raw_heads):
            self.head_fields = [(("heads", i), h) for i, h in enumerate(raw_heads)]
            for path, head in self.head_fields:
                reader.check_fields(head, path, HEAD_FIELDS)
        else:
            raise reader.error(("heads",), "problem.bad_heads", got=kind_of(raw_heads))

    def lookup(self, head: int, name: str) -> tuple[DocPath, object] | None:
        """A head's own field, else the top-level one; None when neither gives it."""
        path, fields = self.head_fields[head]
        if name in fields:
            return (*path, name), fields[name]
        if name in self.data:
            return (name,), self.data[name]
        return None

    def problem(self) -> Problem:
        tokens = self.tokens()
        query_tokens, cross = self.query_tokens(tokens)
        self.check_memory(CORE_MATRICES * len(self.head_fields), len(query_tokens), len(tokens))  # before any head
        positions = _Positions(tokens, query_tokens, cross)
        x, x_query = self.inputs(tokens, query_tokens, positions)
        heads = tuple(self.head(i, tokens, query_tokens, x, x_query) for i in range(len(self.head_fields)))
        w_o = self.output_projection(heads)
        self.check_memory(sum(_matrices(head) for head in heads), len(query_tokens), len(tokens))
        mask, rule = self.mask(tokens, query_tokens, positions)
        data = self.data
        return Problem(
            tokens=tokens,
            query_tokens=query_tokens,
            cross=cross,
            heads=heads,
            mask=mask,
            mask_rule=rule,
            w_o=w_o,
            title=_optional_text(self.reader, data, "title"),
            notes=_optional_text(self.reader, data, "notes"),
            source=self.reader.document.name,
        )

    def tokens(self) -> tuple[str, ...]:
        if "tokens" in self.data:
            return self.reader.text_list(("tokens",), self.data["tokens"])
        for name in ("keys", "values", "x"):
            for head in range(len(self.head_fields)):
                found = self.lookup(head, name)
                if found is None or (name == "x" and head):
                    continue
                path, value = found
                if isinstance(value, dict) and "file" not in value:
                    return self.reader.text_list(path, list(value))
                count = len(self.reader.matrix(path, value))  # an array file is read here once, then kept
                return tuple(f"t{i + 1}" for i in range(count))
        raise self.reader.error((), "problem.no_tokens")

    def query_tokens(self, tokens: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
        if "query_tokens" in self.data:
            names = self.reader.text_list(("query_tokens",), self.data["query_tokens"])
        else:
            names = tokens
            for head in range(len(self.head_fields)):
                found = self.lookup(head, "queries")
                if found and isinstance(found[1], dict) and "file" not in found[1]:
                    path, mapping = found
                    known = set(tokens)
                    stray = [name for name in mapping if name not in known]
                    if stray:
                        raise self.reader.error((*path, stray[0]), "problem.unknown_query_name", name=stray[0])
                    names = tuple(self.reader.plain_text((*path, name), name) for name in mapping)
                    break
            else:
                names = self.unnamed_queries(tokens)
        return names, not set(names) <= set(tokens)

    def unnamed_queries(self, tokens: tuple[str, ...]) -> tuple[str, ...]:
        """Without any names, as with arrays from files, L ≠ S queries are named q1..qL (cross-attention)."""
        found = self.lookup(0, "queries")
        if found is None and "x_query" in self.data:
            found = ("x_query",), self.data["x_query"]
        if "tokens" in self.data or found is None:
            return tokens
        count = len(self.reader.matrix(*found))
        return tokens if count == len(tokens) else tuple(f"q{i + 1}" for i in range(count))

    def operand(
        self, head: int, given: str, weight: str, rows: tuple[str, ...], x: np.ndarray | None, x_name: str
    ) -> tuple[DocPath, Operand] | None:
        """Q, K or V of one head: given as rows, or projected from inputs (x·W)."""
        direct, projected = self.lookup(head, given), self.lookup(head, weight)
        own = self.head_fields[head][1]
        if direct and projected and (given in own) == (weight in own):
            raise self.reader.error(direct[0], "problem.given_and_projected", given=given, weight=weight)
        if direct and (given in own or weight not in own):
            path, value = direct
            return path, self.reader.matrix(path, value, rows, "query_tokens" if given == "queries" else "tokens")
        if projected:
            path, value = projected
            if x is None:
                raise self.reader.error(path, "problem.projection_without_x", weight=weight, x=x_name)
            w = self.reader.matrix(path, value)
            if w.shape[0] != x.shape[1]:
                raise self.reader.error(
                    path, "problem.projection_rows", count=w.shape[0], expected=x.shape[1], x=x_name
                )
            return path, Projection(x=x, w=w)
        return None

    def inputs(
        self, tokens: tuple[str, ...], query_tokens: tuple[str, ...], positions: _Positions
    ) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The inputs X (keys/values side) and X for the queries, when projections are used."""
        x = x_query = None
        if "x" in self.data:
            x = self.reader.matrix(("x",), self.data["x"], tokens, "tokens")
        if "x_query" in self.data:
            x_query = self.reader.matrix(("x_query",), self.data["x_query"], query_tokens, "query_tokens")
        elif x is not None and not positions.cross:
            x_query = x[list(positions.query_indexes())]
        return x, x_query

    def head(
        self,
        index: int,
        tokens: tuple[str, ...],
        query_tokens: tuple[str, ...],
        x: np.ndarray | None,
        x_query: np.ndarray | None,
    ) -> Head:
        path, fields = self.head_fields[index]
        name = _optional_text(self.reader, fields, "name", path) or (
            f"head {index + 1}" if len(self.head_fields) > 1 else "head"
        )
        values = self.operand(index, "values", "w_v", tokens, x, "x")
        if values is None:
            raise self.reader.error(path, "problem.missing", name="values", alternative="w_v")
        given_scores = self.lookup(index, "scores")
        own = set(fields)
        uses_vectors = own & {"queries", "keys", "w_q", "w_k"}
        if given_scores and not (uses_vectors and "scores" not in own):
            scores_path, raw = given_scores
            scores = self.reader.matrix(scores_path, raw, query_tokens, "query_tokens")
            if scores.shape[1] != len(tokens):
                raise self.reader.error(
                    scores_path, "problem.scores_width", count=scores.shape[1], expected=len(tokens)
                )
            return Head(name, Score("given", 1.0), None, None, values[1], scores=scores)
        queries = self.operand(index, "queries", "w_q", query_tokens, x_query, "x_query")
        keys = self.operand(index, "keys", "w_k", tokens, x, "x")
        if queries is None or keys is None:
            missing = ("queries", "w_q") if queries is None else ("keys", "w_k")
            raise self.reader.error(path, "problem.missing", name=missing[0], alternative=f"{missing[1]}, scores")
        score = self.score(index, queries, keys)
        return Head(name, score, queries[1], keys[1], values[1])

    def score(self, index: int, queries: tuple[DocPath, Operand], keys: tuple[DocPath, Operand]) -> Score:
        d_q, d_k = _width(queries[1]), _width(keys[1])
        found = self.lookup(index, "score")
        path, spec = found if found else (("score",), "scaled_dot")
        if isinstance(spec, str):
            spec = {"type": spec}
        if not isinstance(spec, dict):
            raise self.reader.error(path, "problem.bad_score", got=kind_of(spec), kinds=", ".join(SCORE_KINDS))
        kind = spec.get("type", "scaled_dot")
        if not isinstance(kind, str):
            raise self.reader.error(
                (*path, "type"), "problem.bad_score", got=kind_of(kind), kinds=", ".join(SCORE_KINDS)
            )
        if kind not in SCORE_KINDS:
            hint = did_you_mean(kind, SCORE_KINDS)
            raise self.reader.error(
                (*path, "type"), "problem.unknown_score", name=kind, kinds=", ".join(SCORE_KINDS), hint=hint
            )
        extra = {"general": ("w",), "additive": ("w_query", "w_key", "v")}.get(kind, ())
        self.reader.check_fields(spec, path, ("type", "scale", *extra))
        default_scale = 1 / math.sqrt(d_k) if kind == "scaled_dot" else 1.0
        if "scale" in self.data:  # the top-level field (or --scale) overrides every head's scale
            scale = self.reader.number(("scale",), self.data["scale"])
        elif "scale" in spec:
            scale = self.reader.number((*path, "scale"), spec["scale"])
        else:
            scale = default_scale
        if kind in ("scaled_dot", "dot", "cosine") and d_q != d_k:
            raise self.reader.error(keys[0], "problem.dk_mismatch", d_q=d_q, d_k=d_k, kind=kind)
        if kind == "general":
            w = self.reader.matrix((*path, "w"), self._required(spec, path, "w"))
            if w.shape != (d_q, d_k):
                raise self.reader.error((*path, "w"), "problem.shape", shape=_shape(w), expected=f"{d_q}×{d_k}")
            return Score(kind, scale, w=w)
        if kind == "additive":
            w_query = self.reader.matrix((*path, "w_query"), self._required(spec, path, "w_query"))
            w_key = self.reader.matrix((*path, "w_key"), self._required(spec, path, "w_key"))
            v = self.reader.vector((*path, "v"), self._required(spec, path, "v"))
            d_a = v.shape[0]
            for name, w, rows in (("w_query", w_query, d_q), ("w_key", w_key, d_k)):
                if w.shape != (rows, d_a):
                    raise self.reader.error((*path, name), "problem.shape", shape=_shape(w), expected=f"{rows}×{d_a}")
            return Score(kind, scale, w_query=w_query, w_key=w_key, v=v)
        return Score(kind, scale)

    def _required(self, spec: dict, path: DocPath, name: str) -> object:
        if name not in spec:
            raise self.reader.error(path, "problem.score_field_missing", name=name, kind=spec.get("type"))
        return spec[name]

    def output_projection(self, heads: tuple[Head, ...]) -> np.ndarray | None:
        if "w_o" not in self.data:
            return None
        w_o = self.reader.matrix(("w_o",), self.data["w_o"])
        d_concat = sum(_width(head.values) for head in heads)
        if w_o.shape[0] != d_concat:
            raise self.reader.error(("w_o",), "problem.w_o_rows", count=w_o.shape[0], expected=d_concat)
        return w_o

    def check_memory(self, matrices: int, queries: int, keys: int) -> None:
        """Refuse a problem whose `matrices` (L, S) matrices would not fit in memory, before any of them exists."""
        needed = queries * keys * (matrices * self.reader.dtype.itemsize + 1)  # + 1 byte of mask per cell
        if needed > MEMORY_BUDGET:
            raise fail(
                "problem.too_large",
                size=_size(needed),
                limit=_size(MEMORY_BUDGET),
                heads=len(self.head_fields),
                queries=queries,
                keys=keys,
            ).at(source=self.reader.document.name)

    def mask(
        self, tokens: tuple[str, ...], query_tokens: tuple[str, ...], positions: _Positions
    ) -> tuple[np.ndarray, MaskRule]:
        reader, data = self.reader, self.data
        allowed = np.ones((len(query_tokens), len(tokens)), dtype=bool)  # (L, S)
        raw = "none" if data.get("mask") is None else data["mask"]
        if isinstance(raw, str) and raw.strip() in ("none", "causal"):
            kind = raw.strip()
        else:
            kind = "matrix"
            allowed &= self.mask_matrix(raw, tokens, query_tokens)
        window = None
        if "window" in data:
            window = data["window"]
            if isinstance(window, bool) or not isinstance(window, int) or window < 0:
                raise reader.error(("window",), "problem.bad_window", got=kind_of(window))
        if kind == "causal" or window is not None:
            rule_field = "mask" if kind == "causal" else "window"
            query_at, key_at = positions.query_positions(reader, rule_field), np.arange(len(tokens))
            offset = query_at[:, None] - key_at[None, :]  # (L, S) i - j
            if kind == "causal":
                allowed &= offset >= 0
            if window is not None:
                allowed &= offset <= window if kind == "causal" else np.abs(offset) <= window
        padding: tuple[str, ...] = ()
        if "padding" in data:
            padding = reader.text_list(("padding",), data["padding"])
            known = set(tokens)
            for index, name in enumerate(padding):
                if name not in known:
                    raise reader.error(("padding", index), "problem.unknown_token", name=name, names=listed(tokens))
            allowed &= ~np.isin(np.array(tokens, dtype=object), np.array(padding, dtype=object))[None, :]
        culprit = next((name for name in ("mask", "padding", "window") if name in data), "mask")
        for row, name in enumerate(query_tokens):
            if not allowed[row].any():
                raise reader.error((culprit,), "problem.all_masked", name=name, row=row + 1)
        return allowed, MaskRule(kind, window, padding)

    def mask_matrix(self, raw: object, tokens: tuple[str, ...], query_tokens: tuple[str, ...]) -> np.ndarray:
        """A 0/1 mask given as rows (a list, a mapping query: row, or --mask "1,0; 1,1"), True = may attend."""
        reader = self.reader
        if isinstance(raw, str):  # not none or causal, which the caller has taken
            if not reader.flags.get("mask"):
                raise reader.error(("mask",), "problem.bad_mask", got=raw)
            raw = rows_from_text(raw)
        cells = raw
        if isinstance(raw, dict):
            named = set(query_tokens)
            unknown = [name for name in raw if name not in named]
            if unknown:
                raise reader.error(
                    ("mask", unknown[0]),
                    "problem.unknown_row_name",
                    name=unknown[0],
                    names=listed(query_tokens),
                    hint=t("hint.cross_attention"),
                )
            cells = [raw.get(name) for name in query_tokens]
        if not isinstance(cells, list) or len(cells) != len(query_tokens):
            raise reader.error(("mask",), "problem.mask_shape", rows=len(query_tokens), columns=len(tokens))
        out = np.zeros((len(query_tokens), len(tokens)), dtype=bool)
        for i, row in enumerate(cells):
            if not isinstance(row, list) or len(row) != len(tokens):
                raise reader.error(("mask", i), "problem.mask_shape", rows=len(query_tokens), columns=len(tokens))
            for j, cell in enumerate(row):
                if cell in (0, 1, "0", "1") or isinstance(cell, bool):
                    out[i, j] = cell in (1, "1", True)
                else:
                    raise reader.error(("mask", i, j), "problem.mask_cell", got=cell)
        return out


@dataclass(frozen=True)
class _Positions:
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

    def query_positions(self, reader: _Reader, rule_field: str) -> np.ndarray:
        """Each query's position: its place among the query tokens (cross-attention) or among the tokens."""
        if self.cross or self.query_tokens == self.tokens:
            return np.arange(len(self.query_tokens))
        counts = Counter(self.tokens)
        for name in self.query_tokens:
            if counts[name] > 1:
                raise reader.error((rule_field,), "problem.ambiguous_position", name=name)
        return np.array(self.query_indexes())


def _matrices(head: Head) -> int:
    """How many (L, S) matrices of numbers the core builds for `head`.

    Additive scores also keep tanh(q·W_query + k·W_key) for every cell, d_a numbers
    each, and need as much again while computing it.
    """
    return CORE_MATRICES + (2 * head.score.v.shape[0] if head.score.kind == "additive" else 0)


def _width(operand: Operand) -> int:
    return operand.w.shape[1] if isinstance(operand, Projection) else operand.shape[1]


def _shape(array: np.ndarray) -> str:
    return "×".join(str(n) for n in array.shape)


def _optional_text(reader: _Reader, data: dict, name: str, path: DocPath = ()) -> str | None:
    if name not in data or data[name] is None:
        return None
    if isinstance(data[name], (dict, list)):
        raise reader.error((*path, name), "problem.not_text", got=kind_of(data[name]))
    return reader.plain_text((*path, name), str(data[name]), lines=True)


def _size(count: float) -> str:
    """A number of bytes as people read them: 6.0 GiB."""
    units = ("KiB", "MiB", "GiB", "TiB")
    power = min(len(units), max(1, int(math.log(max(count, 1), 1024))))
    return f"{count / 1024**power:.1f} {units[power - 1]}"
