"""The `answers:` section of a homework file: what the student wrote, cell by cell, and how precisely.

A number's precision lives in its text: 0.90 promises two decimals where 0.9
promises one, so the text of each scalar comes from `Document.texts`. This is
the only module that looks at the shape of answers; the grader can trust them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attncli.core import Steps
from attncli.errors import AttnError, fail, listed
from attncli.i18n import t
from attncli.yamldoc import Document, FieldPath, did_you_mean, field_name, finite_number, kind_of, unknown_field

HEAD_STEPS = ("queries", "keys", "values", "dot", "scores", "weights", "output")
SHARED_STEPS = ("concat", "final")
MASKABLE = ("dot", "scores", "weights")
MASK_WORDS = ("masked", "-inf", "-∞", "-infinity")
_DECIMAL = re.compile(r"[+-]?\d*\.(?P<fraction>\d*)(?:[eE](?P<exponent>[+-]?\d+))?|[+-]?\d+[eE](?P<power>[+-]?\d+)")


@dataclass(frozen=True)
class Entry:
    """One number as the student wrote it."""

    text: str
    value: float | None  # None: marked as masked (-inf, masked or null)
    decimals: int | None  # decimals written; None for whole numbers and expressions, which are taken as exact


@dataclass(frozen=True)
class Answer:
    """One answered matrix, held in the orientation of the true one; a None cell was not answered."""

    step: str
    head: int | None  # None for concat and final
    rows: tuple[str, ...]
    columns: tuple[str, ...]  # key tokens, or coordinates "1", "2", ...
    cells: tuple[tuple[Entry | None, ...], ...]
    transposed: bool = False  # written with rows and columns swapped (a shape that only fits transposed)
    written: tuple[tuple[Entry | None, ...], ...] | None = None  # the rows as written when no orientation fits


@dataclass(frozen=True)
class Answers:
    steps: tuple[Answer, ...]  # in the order of the calculation: each head's steps, then concat and final
    tolerance: float | None  # from `tolerance:` in the file
    carry: int | None = None  # `carry:`: the decimals a careful student keeps from step to step
    min_decimals: int | None = None  # `min_decimals:`: fewer decimals than this are too few
    require: tuple[str, ...] = ()  # `require:`: the steps that must be answered


@dataclass(frozen=True)
class _Shape:
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    named_columns: bool  # columns are key tokens, so a row may be a mapping token: number
    allowed: np.ndarray | None  # (rows, columns) for maskable steps: the cells the mask lets through


def parse(document: Document, steps: Steps) -> Answers:
    """The validated `answers:` and `tolerance:` of a problem whose calculation is `steps`."""
    return _Reader(document, steps).answers()


def decimals(text: str) -> int | None:
    """How many decimals a plain number shows (`0.0900` → 4, `1.5e-3` → 4); None for whole numbers and expressions."""
    match = _DECIMAL.fullmatch(text.strip().replace("−", "-"))
    if match is None:
        return None
    power = match["power"]
    count = -int(power) if power is not None else len(match["fraction"]) - int(match["exponent"] or 0)
    return count if count > 0 else None


def is_mask_marker(value: object) -> bool:
    """`-inf`, `masked`, `-∞` or null: the student says the mask excludes this cell."""
    if value is None:
        return True
    if isinstance(value, float):
        return value == -math.inf
    return isinstance(value, str) and value.strip().lower().replace("−", "-").replace(" ", "") in MASK_WORDS


class _Reader:
    """Reads the answers against the shapes of the calculation, raising errors that say where."""

    def __init__(self, document: Document, steps: Steps) -> None:
        self.document = document
        self.steps = steps

    def error(self, path: FieldPath, key: str, field: str | None = None, **params: object) -> AttnError:
        return fail(key, **params).at(self.document.name, self.document.line(path), field or field_name(path))

    def answers(self) -> Answers:
        data = self.document.data if isinstance(self.document.data, dict) else {}
        tolerance = self.tolerance(data)
        if "answers" not in data:
            raise fail("check.no_answers").at(self.document.name, field="answers")
        section = data["answers"]
        if not isinstance(section, dict) or not section:
            raise self.error(("answers",), "check.answers_not_mapping", got=kind_of(section))
        self.check_fields(section, ("answers",), (*HEAD_STEPS, *SHARED_STEPS, "heads"))
        heads = len(self.steps.heads)
        top = [name for name in HEAD_STEPS if name in section]
        if "heads" in section:
            if top:
                raise self.error(("answers", top[0]), "check.heads_and_top")
            per_head = self.head_list(section["heads"], heads)
        elif top and heads > 1:
            raise self.error(("answers", top[0]), "check.top_with_heads", count=heads)
        else:
            per_head = [(("answers",), section)]
        found = [
            self.answer((*path, step), fields[step], step, head)
            for head, (path, fields) in enumerate(per_head)
            for step in HEAD_STEPS
            if step in fields
        ]
        found += [self.answer(("answers", step), section[step], step, None) for step in SHARED_STEPS if step in section]
        if not found:
            raise self.error(("answers",), "check.nothing_answered")
        return Answers(tuple(found), tolerance)

    def tolerance(self, data: dict) -> float | None:
        if "tolerance" not in data:
            return None
        value = data["tolerance"]
        number = self.number(("tolerance",), value) if not isinstance(value, bool) else None
        if number is None or number < 0:
            raise self.error(("tolerance",), "check.bad_tolerance", got=kind_of(value))
        return number

    def check_fields(self, data: dict, path: FieldPath, known: Sequence[str]) -> None:
        name = unknown_field(data, known)
        if name is not None:
            hint = did_you_mean(name, known) or t("check.known_steps", names=", ".join(known))
            raise self.error((*path, name), "problem.unknown_field", name=name, hint=hint)

    def head_list(self, value: object, heads: int) -> list[tuple[FieldPath, dict]]:
        if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
            raise self.error(("answers", "heads"), "problem.bad_heads", got=kind_of(value))
        if len(value) > heads:
            raise self.error(("answers", "heads"), "check.too_many_heads", count=len(value), expected=heads)
        for index, fields in enumerate(value):
            self.check_fields(fields, ("answers", "heads", index), HEAD_STEPS)
        return [(("answers", "heads", index), fields) for index, fields in enumerate(value)]

    def shape(self, path: FieldPath, step: str, head: int | None) -> _Shape:
        problem, steps = self.steps.problem, self.steps
        queries, tokens = problem.query_tokens, problem.tokens
        if head is None:
            matrix = steps.concat if step == "concat" else steps.output
            if matrix is None:
                raise self.error(path, "check.no_concat")
            return _Shape(queries, _coordinates(matrix.shape[1]), False, None)
        head_steps = steps.heads[head]
        if step in ("queries", "keys", "dot") and head_steps.queries is None:
            raise self.error(path, "check.scores_given", step=step)
        if step in MASKABLE:
            return _Shape(queries, tokens, True, problem.mask)
        matrix = {
            "queries": head_steps.queries,
            "keys": head_steps.keys,
            "values": head_steps.values,
            "output": head_steps.output,
        }[step]
        rows = queries if step in ("queries", "output") else tokens
        return _Shape(rows, _coordinates(matrix.shape[1]), False, None)

    def answer(self, path: FieldPath, value: object, step: str, head: int | None) -> Answer:
        shape = self.shape(path, step, head)
        n, m = len(shape.rows), len(shape.columns)
        grid: list[list[Entry | None]] = [[None] * m for _ in range(n)]
        transposed = False
        if isinstance(value, dict):
            for name, row in value.items():
                index = self.row_index((*path, name), name, shape.rows)
                grid[index] = self.row(path, (*path, name), row, step, shape, index)
        elif isinstance(value, list) and value and not any(isinstance(item, (list, dict)) for item in value):
            if n != 1:
                raise self.error(path, "check.single_row", rows=n)
            grid[0] = self.row(path, path, value, step, shape, 0)
        elif not isinstance(value, list) or not value:
            raise self.error(path, "problem.not_matrix", got=kind_of(value))
        elif len(value) == n:
            grid = [self.row(path, (*path, i), row, step, shape, i) for i, row in enumerate(value)]
        elif len(value) == m and all(isinstance(row, list) and len(row) == n for row in value):
            transposed = True
            for j, column in enumerate(value):
                for i, cell in enumerate(column):
                    grid[i][j] = self.entry((*path, j, i), cell, step)
        else:
            what = "query_tokens" if shape.rows == self.steps.problem.query_tokens else "tokens"
            raise self.error(path, "problem.row_count", count=len(value), expected=n, what=what)
        cells = tuple(tuple(row) for row in grid)
        return Answer(step, head, shape.rows, shape.columns, cells, transposed)

    def row_index(self, path: FieldPath, name: str, rows: tuple[str, ...]) -> int:
        if name not in rows:
            raise self.error(path, "check.unknown_row", name=name, names=listed(rows))
        if rows.count(name) > 1:
            raise self.error(path, "check.ambiguous_name", name=name)
        return rows.index(name)

    def row(
        self, matrix: FieldPath, path: FieldPath, row: object, step: str, shape: _Shape, index: int
    ) -> list[Entry | None]:
        """One row: all its cells, a mapping token: number, or the cells the mask lets through."""
        m = len(shape.columns)
        cells: list[Entry | None] = [None] * m
        label = t("field.row", field=field_name(matrix), row=index + 1, token=shape.rows[index])
        if isinstance(row, dict) and shape.named_columns:
            for name, cell in row.items():
                cells[self.row_index((*path, name), name, shape.columns)] = self.entry((*path, name), cell, step)
            return cells
        if not isinstance(row, list) or not row or any(isinstance(cell, (list, dict)) for cell in row):
            raise self.error(path, "problem.not_row", label, got=kind_of(row))
        if len(row) == m:
            return [self.entry((*path, j), cell, step, label) for j, cell in enumerate(row)]
        allowed = [] if shape.allowed is None else [j for j in range(m) if shape.allowed[index, j]]
        if allowed and len(row) == len(allowed):
            for cell_index, (j, cell) in enumerate(zip(allowed, row)):
                cells[j] = self.entry((*path, cell_index), cell, step, label)
            return cells
        if allowed and len(allowed) < m:
            raise self.error(path, "check.row_width_masked", label, count=len(row), expected=m, allowed=len(allowed))
        raise self.error(path, "check.row_width", label, count=len(row), expected=m)

    def entry(self, path: FieldPath, value: object, step: str, label: str | None = None) -> Entry:
        text = self.document.texts.get(path, "" if value is None else str(value))
        if is_mask_marker(value):
            if step not in MASKABLE:
                raise self.error(path, "check.masked_here", label, text=text or "null", step=step)
            return Entry(text or "masked", None, None)
        return Entry(text, self.number(path, value, label), decimals(text))

    def number(self, path: FieldPath, value: object, label: str | None = None) -> float:
        try:
            return finite_number(value)
        except AttnError as error:
            raise error.at(self.document.name, self.document.line(path), label or field_name(path)) from None


def _coordinates(count: int) -> tuple[str, ...]:
    return tuple(str(j + 1) for j in range(count))
