"""The input of `attncli softmax`, read once into a validated `Logits`: from a YAML document, flags, or both.

Fields: `logits` (a row of numbers, or rows), `tokens` (one name per logit; default t1..tV),
`targets` (one per row: a token's name, or its position from 1), `temperature` (above 0),
`top_k` (a whole number from 1), `top_p` (above 0, at most 1), `title`, `notes`. Flags, given on
the command line, are laid over the document's fields, as for problems.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from attncli.errors import listed, phrase
from attncli.i18n import Message
from attncli.parsing.answers import SETTINGS
from attncli.parsing.fields import FieldReader
from attncli.softmax import Logits
from attncli.yamldoc import Document, FieldPath, kind_of

FIELDS = ("title", "notes", "logits", "tokens", "targets", "temperature", "top_k", "top_p")
GRADED = ("exercise", "answers", *SETTINGS)  # a softmax homework's (attncli.parsing.softmax_answers): not read here
MAX_LOGITS = 2_000_000  # logits over all rows: every step of each is written out, a few numbers a logit
# How the command line spells the fields it gives (attncli.cli.softmax): the logits are its argument.
SPELLED = {"logits": "LOGITS", "targets": "--target"}


class _Reader(FieldReader):
    """A FieldReader that names the command line's own spelling of a field: LOGITS, --target."""

    def location(self, path: FieldPath) -> tuple[str, int | None]:
        if path and path[0] in self.flags and path[0] in SPELLED:
            return SPELLED[str(path[0])], None
        return super().location(path)


def parse(document: Document, flags: Mapping[str, object] | None = None, base: Path | None = None) -> Logits:
    """The validated `Logits` of `document` with `flags` (field -> value) laid over it; an AttnError saying where."""
    reader = _Reader(document, dict(flags or {}), base)
    data = document.data if document.data is not None else {}
    if not isinstance(data, dict):
        raise reader.error((), "softmax.not_mapping")
    data = {**data, **reader.flags}
    reader.check_fields(data, (), (*FIELDS, *GRADED))
    if "logits" not in data:
        raise reader.error((), "softmax.no_logits")
    rows = reader.matrix(("logits",), data["logits"])  # (N, V)
    if rows.size > MAX_LOGITS:
        raise reader.error(("logits",), "softmax.too_many", count=rows.size, limit=MAX_LOGITS)
    tokens = _tokens(reader, data, rows.shape[1])
    temperature = _temperature(reader, data, rows)
    targets = _targets(reader, data, tokens, rows.shape[0])
    _within_range(reader, rows / temperature)
    return Logits(
        tokens=tokens,
        rows=rows,
        temperature=temperature,
        top_k=_top_k(reader, data),
        top_p=_top_p(reader, data),
        targets=targets,
        title=reader.optional_text(data, "title"),
        notes=reader.optional_text(data, "notes"),
        source=document.name,
    )


def _tokens(reader: FieldReader, data: dict, count: int) -> tuple[str, ...]:
    """`tokens:`, one distinct name per logit; else t1..tV."""
    if "tokens" not in data:
        return tuple(f"t{j + 1}" for j in range(count))
    tokens = reader.text_list(("tokens",), data["tokens"])
    if len(tokens) != count:
        raise reader.error(("tokens",), "softmax.token_count", count=len(tokens), expected=count)
    seen: set[str] = set()
    for index, name in enumerate(tokens):
        if name in seen:
            raise reader.error(("tokens", index), "softmax.duplicate_token", name=name)
        seen.add(name)
    return tokens


def _targets(reader: FieldReader, data: dict, tokens: tuple[str, ...], rows: int) -> tuple[int, ...] | None:
    """Each row's target as an index: a token's name, or its position from 1 (a name wins over a position)."""
    if "targets" not in data:
        return None
    given = data["targets"]
    listed_targets = given if isinstance(given, list) else [given]
    if len(listed_targets) != rows:
        raise reader.error(("targets",), "softmax.target_count", count=len(listed_targets), expected=rows)
    return tuple(_target(reader, ("targets", i), value, tokens) for i, value in enumerate(listed_targets))


def _target(reader: FieldReader, path: FieldPath, value: object, tokens: tuple[str, ...]) -> int:
    if isinstance(value, str) and value in tokens:
        return tokens.index(value)
    position = int(value) if isinstance(value, str) and value.strip().isdecimal() else value
    if isinstance(position, bool) or not isinstance(position, (int, str)):
        raise reader.error(path, "softmax.bad_target", got=kind_of(value))
    if isinstance(position, str):
        raise reader.error(path, "softmax.unknown_target", name=position, names=listed(tokens))
    if not 1 <= position <= len(tokens):
        raise reader.error(path, "softmax.target_position", position=position, count=len(tokens))
    return position - 1


def _temperature(reader: FieldReader, data: dict, rows: np.ndarray) -> float:
    """T above 0, small enough that every s/T stays within float64's range (1e300 / 1e-10 does not)."""
    if "temperature" not in data:
        return 1.0
    value = reader.number(("temperature",), data["temperature"])
    if value <= 0:
        raise reader.error(("temperature",), "softmax.bad_temperature", got=_number(value))
    with np.errstate(over="ignore"):
        if not np.isfinite(rows / value).all():
            raise reader.error(("temperature",), "core.overflow")
    return value


def _within_range(reader: FieldReader, scaled: np.ndarray) -> None:
    """Every s − m finite (1e308 − (−1e308) is not); then so is each −ln p_t = m − s_t + ln Σ e^(s − m)."""
    with np.errstate(over="ignore"):
        if not np.isfinite(scaled - scaled.max(axis=1, keepdims=True)).all():
            raise reader.error(("logits",), "core.overflow")


def _top_k(reader: FieldReader, data: dict) -> int | None:
    value = data.get("top_k")
    if value is None and "top_k" not in data:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise reader.error(("top_k",), "softmax.bad_top_k", got=kind_of(value))
    return value


def _top_p(reader: FieldReader, data: dict) -> float | None:
    if "top_p" not in data:
        return None
    value = reader.number(("top_p",), data["top_p"])
    if not 0 < value <= 1:
        raise reader.error(("top_p",), "softmax.bad_top_p", got=_number(value))
    return value


def _number(value: float) -> Message:
    """What a number field held, for its error: the number 0, the number 1.66667 (written 2/3 + 1)."""
    return phrase("kind.number", value=f"{value:g}")
