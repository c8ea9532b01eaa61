"""The `answers:` section of a homework file: what the student wrote, cell by cell, and how precisely.

A number's precision lives in its text: 0.90 promises two decimals where 0.9
promises one, so the text of each scalar comes from `Document.texts`. This is
the only module that looks at the shape of answers. A step whose shape fits the
true one neither as written nor transposed is kept as written, for the grader to
mark wrong and diagnose; only answers that cannot be read at all are errors.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace
from typing import TypeGuard

import numpy as np

from attncli.core import Steps
from attncli.errors import AttnError, fail, listed, phrase
from attncli.expr import WHOLE_DIGITS, whole_number
from attncli.i18n import Message, current_language
from attncli.layers import LayerSteps, StackSteps
from attncli.parsing import backward_answers
from attncli.parsing.fields import FieldReader, row_label
from attncli.steps import (
    ANSWERED,
    BY_NAME,
    HEAD_STEPS,
    MASKABLE,
    SHARED_STEPS,
    STREAM_STEPS,
    TILED,
    answered,
    labels,
    present,
)
from attncli.yamldoc import Document, FieldPath, did_you_mean, kind_of

MASK_WORDS = ("masked", "-inf", "-∞", "-infinity")
NOT_ANSWERED = "?"  # what a template holds in every cell; left there (or empty), the cell is not answered
SETTINGS = ("tolerance", "carry", "min_decimals", "require", "decimal_comma")  # how the file asks to be graded
EVERY_STEP = "all"  # `require: all`, `--require all`: every step the problem has a student compute
# what `all` requires: each step the problem has a student compute (attncli.steps.asked), its gradients included,
# but the numbers written on the way (e^s, Σ e^s, ...: a step's `aside`), optional unless named
REQUIRE_ALL = (
    *(name for name in (*ANSWERED, *STREAM_STEPS) if not BY_NAME[name].aside),
    *(name for name in BY_NAME if backward_answers.is_backward(name)),
)
MAX_DECIMALS = 17
# Why a problem has no such step, for the steps a problem may lack (the others: its scores are given)
ABSENT = {
    "concat": "check.no_concat",
    "final": "check.no_concat",
    "positioned": "check.no_positions",
    "turned_queries": "check.no_rope",
    "turned_keys": "check.no_rope",
    "biased_scores": "check.no_bias",
}
_DECIMAL = re.compile(
    r"[+-]?\d*\.(?P<fraction>\d*)(?:[eE](?P<exponent>[+-]?\d+))?|[+-]?\d+[eE](?P<power>[+-]?\d+)", re.ASCII
)
_DECIMAL_COMMA = re.compile(r"[+-]?\d+,\d+")
_WHOLE = re.compile(r"[+-]?\d+", re.ASCII)
_SPACED = re.compile(r"[+-]?[\d.]+(?:\s+[+-]?[\d.]+)+")


@dataclass(frozen=True)
class Entry:
    """One number as the student wrote it."""

    text: str
    value: float | None  # None: marked as masked (-inf, masked or null)
    decimals: int | None  # decimals written; None for whole numbers and expressions, which are taken as exact


Written = tuple[tuple[Entry | None, ...], ...]


@dataclass(frozen=True)
class Answer:
    """One answered matrix, held in the orientation of the true one; a None cell was not answered."""

    step: str
    head: int | None  # None for concat and final
    rows: tuple[str, ...]
    columns: tuple[str, ...]  # key tokens, or coordinates "1", "2", ...
    cells: tuple[tuple[Entry | None, ...], ...]
    transposed: bool = False  # written with rows and columns swapped (a shape that only fits transposed)
    written: Written | None = None  # the rows as written when the shape fits neither way; `cells` is then all None
    called: str = ""  # the field it was answered under when that is not `step` (attncli.grading.verdict.as_before)


@dataclass(frozen=True)
class Settings:
    """How a file asks to be graded; with a key, the key's settings are the ones that count."""

    tolerance: float | None = None
    carry: int | None = None
    min_decimals: int | None = None
    require: tuple[str, ...] = ()
    decimal_comma: bool = False  # a quoted "0,6652" is 0.6652 (a key made by `generate --lang es` says so)


@dataclass(frozen=True)
class Answers:
    steps: tuple[Answer, ...]  # in the order of the calculation: each head's steps, then concat and final
    tolerance: float | None  # from `tolerance:`
    carry: int | None = None  # from `carry:`: the decimals inputs are carried at
    min_decimals: int | None = None  # from `min_decimals:`
    require: tuple[str, ...] = ()  # from `require:`: steps that must be answered
    backward: tuple[Answer, ...] = ()  # from `backward:`: the gradients, in the order of the calculation


@dataclass(frozen=True)
class LayerAnswers:
    """One stacked layer's answers: its attention's steps (None when only its streams are answered), its streams."""

    attention: Answers | None
    streams: tuple[Answer, ...]  # in the order of attncli.steps.STREAM_STEPS
    gradients: tuple[Answer, ...] = ()  # from `backward: layers:`: the layer's own (grad_residual, grad_normed, ...)
    attention_gradients: tuple[Answer, ...] = ()  # ... and its attention's, from its `attention:`


@dataclass(frozen=True)
class _Shape:
    rows: tuple[str, ...]
    columns: tuple[str, ...]
    named_columns: bool  # columns are key tokens, so a row may be a mapping token: number
    allowed: np.ndarray | None  # (rows, columns) for maskable steps: the cells the mask lets through
    truth: np.ndarray  # the step's true numbers, to tell numbers that cannot be the answer


def parse(document: Document, steps: Steps, settings: Settings | None = None) -> Answers:
    """The validated `answers:` of a problem whose calculation is `steps`, graded with `settings` (a key's; else the
    file's own). A quoted decimal comma is read when the settings say `decimal_comma: true`, and in a file checked
    against its own problem also under --lang es; against a key, the key alone decides (`commas_read`)."""
    reader = _Reader(document, steps)
    return reader.answers(settings if settings is not None else reader.settings(), settings is None)


def parse_stack(
    document: Document, steps: StackSteps, settings: Settings | None = None
) -> tuple[tuple[LayerAnswers, ...], Settings]:
    """The validated `answers: {layers: [...]}` of a stack, one entry per layer answered, and the settings that count.

    Each layer's mapping holds that layer's steps as a one-layer problem's answers do, and its streams.
    """
    reader = _Reader(document, None)
    own = settings is None
    settings = settings if settings is not None else reader.settings()
    section = reader.section()
    backward_answers.refuse_in_layers(reader, section)
    reader.check_fields(section, ("answers",), ("layers", "backward"), "check.known_steps")
    listed = section.get("layers", [] if "backward" in section else None)
    if not isinstance(listed, list) or not all(isinstance(item, dict) for item in listed):
        raise reader.error(("answers", "layers"), "check.bad_layers", got=kind_of(listed))
    if len(listed) > len(steps.layers):
        raise reader.error(
            ("answers", "layers"), "check.too_many_layers", count=len(listed), expected=len(steps.layers)
        )
    found = [
        _Reader(document, layer.attention, commas_read(settings, own)).layer(
            (*("answers", "layers"), index), fields, layer, settings
        )
        for index, (fields, layer) in enumerate(zip(listed, steps.layers))
    ]
    if "backward" in section:  # a stack's gradients, layer by layer: each layer's answers gain them
        commas = commas_read(settings, own)
        gradients = backward_answers.read_stack(
            reader, steps, section["backward"], lambda s: _Reader(document, s, commas)
        )
        found += [LayerAnswers(None, ())] * (len(gradients) - len(found))
        gradients += [((), ())] * (len(found) - len(gradients))
        paired = zip(found, gradients)
        found = [replace(layer, gradients=own, attention_gradients=attention) if own or attention else layer
                 for layer, (own, attention) in paired]  # fmt: skip
    if all(layer.attention is None and not layer.streams and not layer.gradients and not layer.attention_gradients
           for layer in found):  # fmt: skip
        raise reader.error(("answers",), "check.nothing_answered")
    return tuple(found), settings


def stream_steps(layer: LayerSteps) -> dict[str, np.ndarray]:
    """The streams of `layer` a student computes, by name, in the order they are worked: with a norm placed pre
    its mean (LayerNorm), root and normed before the attention, then the stream; placed post the residual sum, then
    its mean and root, then the stream."""
    found = {name: numbers for name in STREAM_STEPS if (numbers := answered(layer, name)) is not None}
    if "residual" in found:  # placed post: the norm's mean and root are of the residual sum
        found = {name: found[name] for name in ("residual", *(n for n in found if n != "residual"))}
    return found


def before_attention(layer: LayerSteps, name: str) -> bool:
    """Whether stream step `name` of `layer` is worked before its attention (a norm placed pre)."""
    return name in ("mean", "root", "normed") and layer.normed is not None


def reader(document: Document) -> _Reader:
    """A reader of answered cells with no calculation behind them: a softmax homework's
    (attncli.parsing.softmax_answers)."""
    return _Reader(document, None)


def read_settings(document: Document) -> Settings:
    """The validated `tolerance:`, `carry:`, `min_decimals:`, `require:` and `decimal_comma:` of a file (a key or a
    homework)."""
    return _Reader(document, None).settings()


def commas_read(settings: Settings, own: bool) -> bool:
    """Whether a quoted decimal comma ("0,6652") is read as a number: when the settings say so, or, for a file
    graded by its own settings (`own`: no key), in Spanish. A key's grade never depends on the grader's language."""
    return settings.decimal_comma or (own and current_language() == "es")


def is_tolerance(number: float) -> bool:
    """Whether `number` may be a tolerance, from a file or from --tolerance: finite and 0 or more.

    nan would mark every answer wrong and inf every answer right.
    """
    return math.isfinite(number) and number >= 0


def decimals(text: str) -> int | None:
    """How many decimals a plain number shows (`0.0900` → 4, `1.5e-3` → 4); None for whole numbers and expressions."""
    match = _DECIMAL.fullmatch(text.strip().replace("−", "-"))
    if match is None:
        return None
    power = match["power"]
    count = -_exponent(power) if power is not None else len(match["fraction"]) - _exponent(match["exponent"])
    return count if count > 0 else None


def _exponent(text: str | None) -> int:
    """A written exponent; one of more than WHOLE_DIGITS digits (1e-999…9) stands for ±10^WHOLE_DIGITS."""
    if text is None:
        return 0
    size = whole_number(text.lstrip("+-"))
    return (-1 if text.startswith("-") else 1) * (size if size is not None else 10**WHOLE_DIGITS)


def is_mask_marker(value: object) -> bool:
    """`-inf`, `masked`, `-∞` or null: the student says the mask excludes this cell."""
    if value is None:
        return True
    if isinstance(value, float):
        return value == -math.inf
    return isinstance(value, str) and value.strip().lower().replace("−", "-").replace(" ", "") in MASK_WORDS


def step_list(text: str) -> tuple[str, ...]:
    """`--require dot,scores`: the step names, each one that can be answered (an AttnError otherwise); `all`:
    REQUIRE_ALL, every step (grading requires those the problem has a student compute)."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    if EVERY_STEP in names:
        return REQUIRE_ALL
    for name in names:
        if name not in ANSWERED and not backward_answers.is_backward(name):
            hint = did_you_mean(name, (*ANSWERED, EVERY_STEP)) or phrase("check.known_steps", names=", ".join(ANSWERED))
            raise fail("check.unknown_step", name=name, hint=hint)
    return names


def _is_not_answered(value: object) -> bool:
    return isinstance(value, str) and value.strip() in (NOT_ANSWERED, "")


def _is_scalar(value: object) -> bool:
    return not isinstance(value, (list, dict))


class _Reader(FieldReader):
    """Reads the answers against the shapes of the calculation, raising errors that say where."""

    def __init__(self, document: Document, steps: Steps | None, decimal_comma: bool = False) -> None:
        super().__init__(document)
        self.steps = steps
        self.decimal_comma = decimal_comma  # a quoted "0,6652" is read as 0.6652
        self.data = document.data if isinstance(document.data, dict) else {}
        self.streams: dict[str, np.ndarray] = {}  # a stacked layer's streams, by step

    def settings(self) -> Settings:
        data = self.data
        tolerance = self.tolerance(data["tolerance"]) if "tolerance" in data else None
        carry = self.count("carry") if "carry" in data else None
        min_decimals = self.count("min_decimals") if "min_decimals" in data else None
        require = self.require(data["require"]) if "require" in data else ()
        decimal_comma = self.flag("decimal_comma") if "decimal_comma" in data else False
        return Settings(tolerance, carry, min_decimals, require, decimal_comma)

    def flag(self, name: str) -> bool:
        value = self.data[name]
        if not isinstance(value, bool):
            raise self.error((name,), "check.bad_flag", got=kind_of(value))
        return value

    def tolerance(self, value: object) -> float:
        number = self.number(("tolerance",), value) if not isinstance(value, bool) else None
        if number is None or not is_tolerance(number):
            raise self.error(("tolerance",), "check.bad_tolerance", got=kind_of(value))
        return number

    def count(self, name: str) -> int:
        value = self.data[name]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DECIMALS:
            raise self.error((name,), "check.bad_decimals", got=kind_of(value), limit=MAX_DECIMALS)
        return value

    def require(self, value: object) -> tuple[str, ...]:
        if isinstance(value, list) and all(isinstance(item, str) for item in value):
            value = ",".join(value)
        if not isinstance(value, str):
            raise self.error(("require",), "check.bad_require", got=kind_of(value))
        try:
            return step_list(value)
        except AttnError as error:
            raise error.at(self.document.name, self.document.line(("require",)), "require") from None

    def answers(self, settings: Settings, own: bool) -> Answers:
        """The answers, read with `settings` (`own`: the file's, no key: see `commas_read`)."""
        self.decimal_comma = commas_read(settings, own)
        section = self.section()
        answers = self.steps_of(("answers",), section, settings)
        if answers is None:
            raise self.error(("answers",), "check.nothing_answered")
        return answers

    def section(self) -> dict:
        """The `answers:` mapping."""
        if "answers" not in self.data:
            raise fail("check.no_answers").at(self.document.name, field="answers")
        section = self.data["answers"]
        if not isinstance(section, dict) or not section:
            raise self.error(("answers",), "check.answers_not_mapping", got=kind_of(section))
        return section

    def steps_of(
        self, path: FieldPath, section: dict, settings: Settings, more: tuple[str, ...] = ()
    ) -> Answers | None:
        """The steps answered in the mapping `section` at `path` (`more`: other names it may hold); None for none."""
        assert self.steps is not None
        known = (*HEAD_STEPS, TILED, *SHARED_STEPS, "heads", "backward", *more)
        self.check_fields(section, path, known, "check.known_steps")
        heads = len(self.steps.heads)
        top = [name for name in (*HEAD_STEPS, TILED) if name in section]
        if "heads" in section:
            if top:
                raise self.error((*path, top[0]), "check.heads_and_top")
            per_head = self.head_list(path, section["heads"], heads)
        elif top and heads > 1:
            raise self.error((*path, top[0]), "check.top_with_heads", count=heads)
        else:
            per_head = [(path, section)]
        found = [
            self.answer((*head_path, step), fields[step], step, head)
            for head, (head_path, fields) in enumerate(per_head)
            for step in HEAD_STEPS
            if step in fields
        ]
        found += self.tiles(per_head)
        found += [self.answer((*path, step), section[step], step, None) for step in SHARED_STEPS if step in section]
        gradients = (
            backward_answers.read(self, (*path, "backward"), section["backward"]) if "backward" in section else ()
        )
        if not found and not gradients:
            return None
        s = settings
        return Answers(tuple(found), s.tolerance, s.carry, s.min_decimals, s.require, gradients)

    def head_list(self, path: FieldPath, value: object, heads: int) -> list[tuple[FieldPath, dict]]:
        if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
            raise self.error((*path, "heads"), "problem.bad_heads", got=kind_of(value))
        if len(value) > heads:
            raise self.error((*path, "heads"), "check.too_many_heads", count=len(value), expected=heads)
        for index, fields in enumerate(value):
            self.check_fields(fields, (*path, "heads", index), (*HEAD_STEPS, TILED), "check.known_steps")
        return [((*path, "heads", index), fields) for index, fields in enumerate(value)]

    def tiles(self, per_head: list[tuple[FieldPath, dict]]) -> list[Answer]:
        """Each head's `tiles:` (attncli.parsing.tile_answers), after every head's other steps."""
        from attncli.parsing import tile_answers

        return [
            Answer(name, head, rows, columns, cells)
            for head, (head_path, fields) in enumerate(per_head)
            if TILED in fields
            for name, rows, columns, cells in tile_answers.read(self, (*head_path, TILED), fields[TILED], head)
        ]

    def layer(self, path: FieldPath, fields: dict, layer: LayerSteps, settings: Settings) -> LayerAnswers:
        """Layer `path`'s answers: its attention's steps and its streams."""
        self.streams = stream_steps(layer)
        for name in STREAM_STEPS:
            if name in fields and name not in self.streams:
                raise self.error((*path, name), "check.no_stream_step", step=name, steps=", ".join(self.streams))
        rest = {name: value for name, value in fields.items() if name not in STREAM_STEPS}
        attention = self.steps_of(path, rest, settings, STREAM_STEPS) if rest else None
        streams = tuple(self.answer((*path, name), fields[name], name, None) for name in STREAM_STEPS if name in fields)
        return LayerAnswers(attention, streams)

    def shape(self, path: FieldPath, step: str, head: int | None) -> _Shape:
        assert self.steps is not None
        problem = self.steps.problem
        if step in self.streams:  # a stacked layer's stream, or its own gradient (attncli.parsing.backward_answers)
            truth: np.ndarray | None = self.streams[step]
        elif not present(self.steps, step, head):
            raise self.error(path, ABSENT.get(step, "check.scores_given"), step=step)
        else:
            truth = answered(self.steps, step, head)
        assert truth is not None, step  # a step the problem has
        rows, columns = labels(problem, step, truth.shape[1], truth.shape[0])
        maskable = step in MASKABLE
        return _Shape(rows, columns, maskable, problem.mask if maskable else None, truth)

    def answer(self, path: FieldPath, value: object, step: str, head: int | None) -> Answer:
        """One step in whatever form fits: rows, a mapping token: row, one query's row or column, or as written."""
        shape = self.shape(path, step, head)
        n, m = len(shape.rows), len(shape.columns)
        if isinstance(value, dict):
            if n == 1 and shape.named_columns and all(map(_is_scalar, value.values())):  # one query: {key: number}
                return self.fitted(step, head, shape, [self.named_row(path, value, step, shape)])
            return self.mapping(path, value, step, head, shape)
        if not isinstance(value, list):
            if value is None or not _is_scalar(value):
                raise self.error(path, "problem.not_matrix", got=kind_of(value))
            entry = self.entry(path, value, step)
            return (
                self.fitted(step, head, shape, [[entry]])
                if n == m == 1
                else self.as_written(step, head, shape, [[entry]])
            )
        if not value:
            raise self.error(path, "problem.not_matrix", got=kind_of(value))
        if all(map(_is_scalar, value)):  # one flat list: one query's row, or the column of a one-column step
            cells = self.fit_row(path, path, value, step, shape, 0) if n == 1 else None
            if cells is not None:
                return self.fitted(step, head, shape, [cells])
            if m == 1 and len(value) == n:
                return self.fitted(step, head, shape, [[entry] for entry in self.cells(path, value, step)])
            return self.as_written(step, head, shape, [self.cells(path, value, step)])
        paths = [(*path, i) for i in range(len(value))]
        for i, (row_path, row) in enumerate(zip(paths, value)):
            if not (isinstance(row, dict) and shape.named_columns):
                self.check_row(row_path, row, self.label(path, shape, i))
        if n == 1 and len(value) == m and all(isinstance(row, list) and len(row) == 1 for row in value):
            column = [self.entry((*row_path, 0), row[0], step) for row_path, row in zip(paths, value)]
            return self.fitted(step, head, shape, [column])  # one query's row written as a column
        if len(value) == n:
            grid = [
                self.fit_row(path, row_path, row, step, shape, i) for i, (row_path, row) in enumerate(zip(paths, value))
            ]
            fitting = [cells for cells in grid if cells is not None]
            if len(fitting) == len(grid):
                return self.fitted(step, head, shape, fitting)
        elif len(value) == m and all(isinstance(row, list) and len(row) == n for row in value):
            columns = [self.cells(row_path, row, step) for row_path, row in zip(paths, value)]
            turned = tuple(tuple(column[i] for column in columns) for i in range(n))
            return Answer(step, head, shape.rows, shape.columns, turned, transposed=True)
        return self.as_written(step, head, shape, [self.cells(p, row, step) for p, row in zip(paths, value)])

    def mapping(self, path: FieldPath, value: dict, step: str, head: int | None, shape: _Shape) -> Answer:
        """A mapping token: row; a row that fits no width leaves the whole step as written."""
        grid: list[list[Entry | None]] = [[None] * len(shape.columns) for _ in shape.rows]
        fits = True
        for name, row in value.items():
            index = self.row_index((*path, name), name, shape.rows)
            cells = self.fit_row(path, (*path, name), row, step, shape, index)
            fits = fits and cells is not None
            grid[index] = cells or grid[index]
        if fits:
            return self.fitted(step, head, shape, grid)
        return self.as_written(step, head, shape, [self.cells((*path, name), row, step) for name, row in value.items()])

    def fitted(self, step: str, head: int | None, shape: _Shape, grid: list[list[Entry | None]]) -> Answer:
        return Answer(step, head, shape.rows, shape.columns, tuple(tuple(row) for row in grid))

    def as_written(self, step: str, head: int | None, shape: _Shape, written: list[list[Entry | None]]) -> Answer:
        empty = tuple((None,) * len(shape.columns) for _ in shape.rows)
        return Answer(step, head, shape.rows, shape.columns, empty, written=tuple(tuple(row) for row in written))

    def row_index(self, path: FieldPath, name: str, rows: tuple[str, ...]) -> int:
        if name not in rows:
            raise self.error(path, "check.unknown_row", name=name, names=listed(rows))
        if rows.count(name) > 1:
            raise self.error(path, "check.ambiguous_name", name=name)
        return rows.index(name)

    def label(self, matrix: FieldPath, shape: _Shape, index: int) -> Message:
        """`answers.weights, row 2 (river)`: where a row is, for messages."""
        return _label(matrix, index, shape.rows if index < len(shape.rows) else None, current_language())

    def check_row(self, path: FieldPath, row: object, label: Message) -> None:
        """A row must be a non-empty list of numbers; `0.1 0.2 0.3` typed without commas gets its own message."""
        if isinstance(row, str) and _SPACED.fullmatch(row.strip()):
            raise self.error(path, "check.spaces", label, text=row.strip())
        if not all(map(_is_scalar, self.row(path, row, label))):
            raise self.error(path, "problem.not_row", label, got=kind_of(row))

    def check_commas(self, path: FieldPath, row: object, label: Message, shape: _Shape, widths: set[int]) -> None:
        """`[0,6652, 0,2447]` unquoted is four whole numbers to YAML; when no width fits them, whole numbers that
        large cannot be the step's, and read in pairs they fit, it is a decimal comma (in any language)."""
        if not isinstance(row, list) or len(row) in widths or len(row) // 2 not in widths or len(row) % 2:
            return
        texts = [self.text_of((*path, j), cell) for j, cell in enumerate(row)]
        wholes, fractions = texts[::2], texts[1::2]
        if not (
            all(isinstance(cell, int) and not isinstance(cell, bool) for cell in row)
            and all(_WHOLE.fullmatch(text) for text in wholes)
            and all(text.isascii() and text.isdigit() for text in fractions)
            and max(abs(int(text)) for text in texts) > 10 * _largest(shape.truth) + 1
        ):
            return
        point = ", ".join(f"{whole}.{fraction}" for whole, fraction in zip(wholes, fractions))
        raise self.error(path, "check.decimal_comma_list", label, count=len(row), point=f"[{point}]")

    def named_row(self, path: FieldPath, row: dict, step: str, shape: _Shape) -> list[Entry | None]:
        cells: list[Entry | None] = [None] * len(shape.columns)
        for name, cell in row.items():
            cells[self.row_index((*path, name), name, shape.columns)] = self.entry((*path, name), cell, step)
        return cells

    def fit_row(
        self, matrix: FieldPath, path: FieldPath, row: object, step: str, shape: _Shape, index: int
    ) -> list[Entry | None] | None:
        """One row: all its cells, a mapping token: number, or the unmasked cells; None if no width fits."""
        if isinstance(row, dict) and shape.named_columns:
            return self.named_row(path, row, step, shape)
        label = self.label(matrix, shape, index)
        self.check_row(path, row, label)
        m = len(shape.columns)
        allowed = [] if shape.allowed is None else [j for j in range(m) if shape.allowed[index, j]]
        self.check_commas(path, row, label, shape, {m, len(allowed)})
        entries = self.cells(path, row, step, label)
        if len(entries) == m:
            return entries
        if allowed and len(entries) == len(allowed):
            cells: list[Entry | None] = [None] * m
            for j, entry in zip(allowed, entries):
                cells[j] = entry
            return cells
        return None

    def cells(self, path: FieldPath, row: object, step: str, label: Message | None = None) -> list[Entry | None]:
        """A row as written, whatever its width (a mapping's cells in the order given)."""
        if isinstance(row, dict):
            return [self.entry((*path, name), cell, step, label) for name, cell in row.items()]
        if not isinstance(row, list):
            return [self.entry(path, row, step, label)]
        texts, where = self.document.texts, self.full(path)
        cells: list[Entry | None] = []
        for j, cell in enumerate(row):
            text = texts.get((*where, j)) if _plain(cell) else None
            cells.append(_number(text, float(cell)) if text is not None else self.entry((*path, j), cell, step, label))
        return cells

    def entry(self, path: FieldPath, value: object, step: str, label: Message | None = None) -> Entry | None:
        """One cell: a number, a masked mark, or None when left as `?`."""
        if isinstance(value, (list, dict)):
            raise self.error(path, "problem.not_number", got=kind_of(value))
        text = self.text_of(path, value)
        if _plain(value):  # most cells
            return _number(text, float(value))
        if _is_not_answered(value):
            return None
        if is_mask_marker(value):
            if step not in MASKABLE:
                raise self.error(path, "check.masked_here", label, text=text or "null", step=step)
            return Entry(text or "masked", None, None)
        if isinstance(value, str) and _DECIMAL_COMMA.fullmatch(value.strip()):
            point = value.strip().replace(",", ".")
            if not self.decimal_comma:
                raise self.error(path, "check.decimal_comma", label, text=value.strip(), point=point)
            return Entry(text, float(point), decimals(point))
        if isinstance(value, str) and _SPACED.fullmatch(value.strip()):
            raise self.error(path, "check.spaces", label, text=value.strip())
        return Entry(text, self.number(path, value, label), decimals(text))


def _plain(value: object) -> TypeGuard[float | int]:
    """A finite YAML number, exactly a float: what most cells are."""
    return (type(value) is float and math.isfinite(value)) or (type(value) is int and abs(value) < 2**53)


@functools.lru_cache(maxsize=8192)
def _number(text: str, value: float) -> Entry:
    """A plain number's entry, kept: a class writes the same few thousand numbers (an Entry is immutable)."""
    return Entry(text, value, decimals(text))


@functools.lru_cache(maxsize=4096)
def _label(matrix: FieldPath, index: int, names: tuple[str, ...] | None, language: str) -> Message:
    """`row_label`, kept: every homework of a class has the same rows; `language` keys the cache (labels are text)."""
    return row_label(matrix, index, names)


def _largest(matrix: np.ndarray) -> float:
    finite = np.abs(matrix[np.isfinite(matrix)])
    return float(finite.max()) if finite.size else 0.0
