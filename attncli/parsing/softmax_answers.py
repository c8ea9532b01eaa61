"""A softmax homework, read once: a file with `logits:` (as `attncli softmax` reads it) and `answers:` by its names.

    logits: [2, 1, 0.1]
    tokens: [cat, dog, car]
    targets: [cat]
    answers:
      max: 2
      shifted: [0, -1, -1.9]
      exp: [1, 0.3679, 0.1496]
      sum: 1.5175
      probabilities: [0.6590, 0.2424, 0.0986]
      cross_entropy: 0.4170

The steps are attncli.steps.SOFTMAX, named as `attncli softmax --format json` names them. A step of
one number per row (max, sum, logsumexp, cross_entropy) is a number, or a list of one per row; a
step of one number per token is a row, or a list of rows. `kept` is written true/false (or 1/0).
Each is read into an Answer of N rows (`1`, `2`, ...) and, per row, one column or one per token, so
that attncli.grading.softmax grades them and check's reports show them as any other step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

from attncli.errors import AttnError, fail
from attncli.parsing import answers as forward
from attncli.parsing.answers import Answer, Entry, Settings
from attncli.softmax import Logits
from attncli.steps import NONE, SOFTMAX, SOFTMAX_BY_NAME, coordinates
from attncli.yamldoc import Document, FieldPath, kind_of


class _Cells(Protocol):
    """What reads answered cells (attncli.parsing.answers.reader): its errors and a row's entries."""

    def error(self, path: FieldPath, key: str, field: str | None = None, **params: object) -> AttnError: ...

    def cells(self, path: FieldPath, row: object, step: str) -> list[Entry | None]: ...


STEPS = tuple(step.name for step in SOFTMAX)


# The steps only some homework has: the field of Logits that brings them, and how a file asks for it.
def _filtered(logits: Logits) -> bool:
    return logits.top_k is not None or logits.top_p is not None


def _targeted(logits: Logits) -> bool:
    return logits.targets is not None


NEEDS: dict[str, tuple[Callable[[Logits], bool], str]] = {
    "kept": (_filtered, "top_k: or top_p:"),
    "filtered": (_filtered, "top_k: or top_p:"),
    "cross_entropy": (_targeted, "targets:"),
    "grad_logits": (_targeted, "targets:"),
}
KEPT_WORDS = {True: 1, False: 0}  # `kept: [true, false]` as the JSON writes it


def is_homework(document: Document) -> bool:
    """Whether `document` is a softmax homework: it holds `logits:` (a problem of attention never does)."""
    return isinstance(document.data, dict) and "logits" in document.data


def settings(document: Document) -> Settings:
    """The file's tolerance, carry and min_decimals; `require:` names this homework's steps."""
    assert isinstance(document.data, dict)
    data = {name: value for name, value in document.data.items() if name != "require"}
    found = forward.read_settings(replace(document, data=data))
    return replace(found, require=_required(document, document.data.get("require")))


def parse(document: Document, logits: Logits) -> list[Answer]:
    """Every step answered, in the order of SOFTMAX; an AttnError saying where for anything else."""
    reader = forward.reader(document)
    assert isinstance(document.data, dict)
    if "answers" not in document.data:
        raise fail("check.no_answers").at(document.name, field="answers")
    section = document.data["answers"]
    if not isinstance(section, dict) or not section:
        raise reader.error(("answers",), "check.answers_not_mapping", got=kind_of(section))
    reader.check_fields(section, ("answers",), STEPS, "check.softmax_steps")
    rows = coordinates(logits.rows.shape[0])
    found = []
    for name in STEPS:
        if name not in section:
            continue
        step = SOFTMAX_BY_NAME[name]
        needs = NEEDS.get(name)
        if needs is not None and not needs[0](logits):
            raise reader.error(("answers", name), "check.softmax_not_here", step=name, fields=needs[1])
        columns = (name,) if step.columns == NONE else logits.tokens
        path = ("answers", name)
        grid = _grid(reader, path, section[name], name, len(rows), len(columns))
        found.append(Answer(name, None, rows, columns, tuple(tuple(row) for row in grid)))
    return found


def _grid(
    reader: _Cells, path: FieldPath, value: object, name: str, count: int, width: int
) -> list[list[Entry | None]]:
    """`count` rows of `width` cells: one row written bare when there is one, one number bare when a row is one."""
    listed = value if isinstance(value, list) else [value]
    bare = not isinstance(value, list) or (count == 1 and width > 1 and not isinstance(listed[0], list))
    rows: list[tuple[FieldPath, object]] = (
        [(path, value)] if bare else [((*path, i), row) for i, row in enumerate(listed)]
    )
    if len(rows) != count:
        raise reader.error(path, "check.softmax_rows", count=len(rows), expected=count)
    grid = []
    for at, row in rows:
        cells = [row] if width == 1 and not isinstance(row, list) else row
        if not isinstance(cells, list) or len(cells) != width or any(isinstance(c, dict) for c in cells):
            raise reader.error(at, "check.softmax_width", expected=width, got=kind_of(row))
        if name == "kept":
            cells = [KEPT_WORDS.get(cell, cell) if isinstance(cell, bool) else cell for cell in cells]
        grid.append(reader.cells(at, cells if isinstance(row, list) else row, name))
    return grid


def _required(document: Document, value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    names = value if isinstance(value, list) else str(value).split(",")
    found = tuple(str(name).strip() for name in names if str(name).strip())
    for name in found:
        if name not in STEPS:
            raise fail("check.unknown_step", name=name, hint=f" ({', '.join(STEPS)})").at(
                document.name, document.line(("require",)), "require"
            )
    return found
