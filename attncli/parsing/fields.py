"""One reader of typed fields for every input section: numbers, text, rows, matrices, field names.

Each value is read with its field path, so that a bad one becomes a one-line error naming
the file (or flag), the line and the field as a person reads it. The problem parser and the
`answers:` parser read through the same reader.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import numpy as np

from attncli import arrays
from attncli.errors import CONTROL_RANGES, AttnError, Message, fail, listed, phrase
from attncli.yamldoc import Document, FieldPath, did_you_mean, field_name, finite_number, kind_of, unknown_field

MAX_NAME = 200  # characters in a token name: a word, a subword or a phrase (wider than a page), never a file's worth
_CONTROL = re.compile("[" + "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in CONTROL_RANGES) + "]")


class Written(NamedTuple):
    """A number and the text it was written as: `0.90` promises two decimals where `0.9` promises one."""

    value: float
    text: str


def rows_from_text(text: str) -> list[list[str]]:
    """The ROWS syntax of flags: rows split by `;`, numbers by `,` (`"2,0; 1,1"`)."""
    return [[cell.strip() for cell in row.split(",")] for row in text.split(";") if row.strip()]


def row_label(path: FieldPath, index: int, names: Sequence[str] | None = None) -> Message:
    """How an error names row `index` of the matrix at `path`: `keys, row 2 (net)`, or without a name."""
    if names:
        return phrase("field.row", field=field_name(path), row=index + 1, token=names[index])
    return phrase("field.row_unnamed", field=field_name(path), row=index + 1)


class FieldReader:
    """Reads typed values out of a document and the flags laid over it, raising errors that say where.

    `flags` (field -> value, given on the command line) name their flag in errors instead of a line;
    array files are found under `base` and every matrix comes out as `dtype`. With `confined`, an
    array file must resolve (links followed) inside `base`: a graded file comes from someone else,
    and its `{file: /home/teacher/key.npy}` must not read what its author could not. Paths are taken
    from `root`, the mapping being read (a layer under `layers:`, see `within`), so errors name the whole path.
    """

    def __init__(
        self,
        document: Document,
        flags: dict[str, object] | None = None,
        base: Path | None = None,
        dtype: np.dtype | None = None,
        confined: bool = False,
    ) -> None:
        self.document = document
        self.flags = flags or {}
        self.base = base or Path(".")
        self.dtype = dtype or np.dtype(np.float64)
        self.confined = confined
        self.files: dict[FieldPath, np.ndarray] = {}
        self.root: FieldPath = ()

    def within(self, path: FieldPath) -> FieldReader:
        """This reader for the mapping at `path`, which its fields' paths start from; no flag reaches inside."""
        inner = copy.copy(self)
        inner.root, inner.flags, inner.files = self.full(path), {}, {}
        return inner

    def full(self, path: FieldPath) -> FieldPath:
        """`path` from the document's top: the root, then `path`."""
        return (*self.root, *path)

    def location(self, path: FieldPath) -> tuple[str, int | None]:
        """The flag (`--keys`) or the file and line where the value at `path` was given."""
        if path and path[0] in self.flags:
            return f"--{str(path[0]).replace('_', '-')}", None
        return self.document.name, self.document.line(self.full(path))

    def error(self, path: FieldPath, key: str, field: str | Message | None = None, **params: object) -> AttnError:
        """The error `key` placed at `path`; `field` names it instead of the path (a row label, say)."""
        return fail(key, **params).at(*self.location(path), field if field is not None else self.name(path))

    def name(self, path: FieldPath) -> str:
        """The field at `path` as a person reads it, from the document's top: layers[2].heads[1].w_q."""
        return field_name(self.full(path))

    def check_fields(
        self, data: dict, path: FieldPath, known: Sequence[str], names_hint: str = "hint.known_fields"
    ) -> None:
        """An error for the first field of `data` not in `known`, with the closest name or the list (`names_hint`)."""
        name = unknown_field(data, known)
        if name is not None:
            hint = did_you_mean(name, known) or phrase(names_hint, names=", ".join(known))
            raise self.error((*path, name), "problem.unknown_field", name=name, hint=hint)

    def number(self, path: FieldPath, value: object, field: str | Message | None = None) -> float:
        """A finite number: a YAML number or an arithmetic expression such as `sqrt(2)/2`."""
        try:
            return finite_number(value)
        except AttnError as error:
            raise error.at(*self.location(path), field or self.name(path)) from None

    def text_of(self, path: FieldPath, value: object) -> str:
        """The text a scalar was written as in the file ("" for a missing value)."""
        text = self.document.texts.get(self.full(path))
        return text if text is not None else "" if value is None else str(value)

    def written(self, path: FieldPath, value: object, field: str | None = None) -> Written:
        """A number together with the text it was written as."""
        return Written(self.number(path, value, field), self.text_of(path, value))

    def plain_text(self, path: FieldPath, text: str, lines: bool = False) -> str:
        """`text` if it holds no control character (with `lines`, newlines and tabs are fine)."""
        found = _CONTROL.search(text.replace("\n", "").replace("\t", "") if lines else text)
        if found:
            key = "problem.not_utf8_character" if 0xD800 <= ord(found.group()) < 0xE000 else "problem.control_character"
            raise self.error(path, key, char=ascii(found.group())[1:-1])
        return text

    def optional_text(self, data: dict, name: str, path: FieldPath = ()) -> str | None:
        """The free text `name` of the mapping `data` at `path` (a title, say), None when absent."""
        if name not in data or data[name] is None:
            return None
        if isinstance(data[name], (dict, list)):
            raise self.error((*path, name), "problem.not_text", got=kind_of(data[name]))
        return self.plain_text((*path, name), str(data[name]), lines=True)

    def text_list(self, path: FieldPath, value: object) -> tuple[str, ...]:
        """Names given as a list or as comma-separated text: `[a, b]` or `"a, b"`."""
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list) or not value:
            raise self.error(path, "problem.not_token_list", got=kind_of(value))
        for index, item in enumerate(value):
            if isinstance(item, (dict, list)) or item is None or isinstance(item, bool):
                raise self.error((*path, index), "problem.not_token", got=kind_of(item))
            if len(str(item)) > MAX_NAME:
                raise self.error((*path, index), "problem.name_too_long", length=len(str(item)), limit=MAX_NAME)
        return tuple(self.plain_text((*path, index), str(item)) for index, item in enumerate(value))

    def row(self, path: FieldPath, value: object, label: str | Message, width: int | None = None) -> list:
        """The cells of one row (a non-empty list; `width` of them when given), not yet read as numbers."""
        if not isinstance(value, list) or not value:
            raise self.error(path, "problem.not_row", label, got=kind_of(value))
        if width is not None and len(value) != width:
            raise self.error(path, "problem.row_width", label, count=len(value), expected=width)
        return value

    def matrix(
        self, path: FieldPath, value: object, rows: Sequence[str] | None = None, rows_field: str = ""
    ) -> np.ndarray:
        """A matrix given as a list of rows, one row, a mapping token: row, or an array file.

        `rows` names the rows expected, in order, as listed by the field `rows_field`; a mapping names exactly those.
        """
        if self._is_array_file(path, value):
            array = self.array_file(path, value)
            self._check_row_count(path, array.shape[0], rows, rows_field)
            return array
        given = self._rows(path, value, rows, rows_field)
        self._check_row_count(path, len(given), rows, rows_field)
        width = None
        out = []
        for index, (row_path, row) in enumerate(given):
            label = row_label(self.full(path), index, rows)
            cells = self.row(row_path, row, label, width)
            width = len(cells)
            out.append([self.number((*row_path, j), cell, label) for j, cell in enumerate(cells)])
        return self.typed(path, out)

    def vector(self, path: FieldPath, value: object) -> np.ndarray:
        """One list of numbers, such as the v of additive scores."""
        if not isinstance(value, list) or not value or any(isinstance(item, (list, dict)) for item in value):
            raise self.error(path, "problem.not_vector", got=kind_of(value))
        return self.typed(path, [self.number((*path, j), cell) for j, cell in enumerate(value)])

    def _from_flag(self, path: FieldPath, value: object) -> bool:
        return isinstance(value, str) and bool(path) and path[0] in self.flags

    def _is_array_file(self, path: FieldPath, value: object) -> bool:
        """`{file: ...}` in YAML, or `@path` on the command line."""
        if isinstance(value, dict):
            return "file" in value
        return self._from_flag(path, value) and value.startswith("@")

    def _rows(
        self, path: FieldPath, value: object, rows: Sequence[str] | None, rows_field: str
    ) -> list[tuple[FieldPath, object]]:
        """Each row of a matrix written in YAML or as flag text, with its own path."""
        if self._from_flag(path, value):
            value = rows_from_text(value)
        if isinstance(value, dict):
            return self._named_rows(path, value, rows, rows_field)
        if isinstance(value, list) and value and not any(isinstance(item, (list, dict)) for item in value):
            return [(path, value)]  # a single row
        if isinstance(value, list) and value:
            return [((*path, index), row) for index, row in enumerate(value)]
        raise self.error(path, "problem.not_matrix", got=kind_of(value))

    def _named_rows(
        self, path: FieldPath, value: dict, rows: Sequence[str] | None, rows_field: str
    ) -> list[tuple[FieldPath, object]]:
        """The rows of a mapping token: row, in the order of `rows`, which it must name exactly."""
        if rows is None:
            raise self.error(path, "problem.mapping_without_names")
        named = set(rows)
        unknown = [name for name in value if name not in named]
        if unknown:
            hint = phrase("hint.cross_attention") if rows_field == "query_tokens" else ""
            raise self.error(
                (*path, unknown[0]), "problem.unknown_row_name", name=unknown[0], names=listed(rows), hint=hint
            )
        missing = [name for name in rows if name not in value]
        if missing:
            raise self.error(path, "problem.missing_row", name=missing[0])
        return [((*path, name), value[name]) for name in rows]

    def _check_row_count(self, path: FieldPath, count: int, rows: Sequence[str] | None, rows_field: str) -> None:
        if rows is not None and count != len(rows):
            raise self.error(path, "problem.row_count", count=count, expected=len(rows), what=rows_field)

    def array_file(self, path: FieldPath, spec: dict | str) -> np.ndarray:
        """An array from `{file: ..., key: ...}` in YAML or `@path[:key]` on the command line, read once per field."""
        if path not in self.files:
            self.files[path] = self._read_array(path, spec)
        return self.files[path]

    def _read_array(self, path: FieldPath, spec: dict | str) -> np.ndarray:
        try:
            if isinstance(spec, str):
                return self.typed(path, arrays.load_flag(spec))
            self.check_fields(spec, path, ("file", "key"))
            if not isinstance(spec["file"], str):
                raise self.error((*path, "file"), "problem.not_text", got=kind_of(spec["file"]))
            return self.typed(path, arrays.load(self._inside(spec["file"]), spec.get("key")))
        except AttnError as error:
            raise error.at(*self.location(path), self.name(path)) from None

    def _inside(self, written: str) -> Path:
        """The file `written` names under `base`; with `confined`, the real path it resolves to, inside `base`."""
        arrays.check_name(written)
        file = self.base / written
        if not self.confined:
            return file
        try:
            real, folder = file.resolve(), self.base.resolve()
        except (OSError, RuntimeError):  # a loop of links, a name too long: nowhere that can be checked
            real, folder = None, None
        if real is None or folder is None or not real.is_relative_to(folder):
            raise fail("problem.outside_folder", path=written)
        return real

    def typed(self, path: FieldPath, numbers: object) -> np.ndarray:
        """`numbers` as an array of the calculation's dtype; a number beyond its range is an error, not inf."""
        with np.errstate(over="ignore"):
            array = np.asarray(numbers, dtype=self.dtype)
        if not np.isfinite(array).all():
            limit = f"{float(np.finfo(self.dtype).max):.2g}"
            raise self.error(path, "problem.beyond_dtype", dtype=self.dtype.name, limit=limit)
        return array
