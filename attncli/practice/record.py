"""`practice --record FILE`: the session as a homework file that `attncli check` grades as the tutor did.

The file is a fresh YAML document: the problem as data (every value written back as it was read,
arrays given in files written out in full, so a JSON problem, a flow-style one, one with
anchors or `...` all come out the same plain mapping), then the answers as first given (a second
try or a shown answer is practice, not homework), then one comment line holding what `--resume`
needs to rebuild the session: the level, the time spent and every line that moved it. `check`
ignores the comment.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from attncli.core import Steps
from attncli.errors import fail
from attncli.parsing.answers import Answer, Entry
from attncli.parsing.backward_answers import is_backward
from attncli.practice import backward, tiles
from attncli.practice.judge import Recorded, answer_of
from attncli.practice.own import part_of
from attncli.practice.session import Session
from attncli.steps import TILE_STEPS
from attncli.yamldoc import Document, FieldPath, comment, flow, scalar

MARK = "# attncli practice: "  # the comment line a session's state is written on
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


@dataclass(frozen=True)
class Saved:
    """What a record keeps of a session beside its answers: enough to rebuild it (`--resume`)."""

    level: int
    seconds: float
    lines: tuple[str, ...]


def homework(document: Document, session: Session, base: Path | None = None) -> str:
    """The homework file of `session` on the problem read as `document` (its arrays' files relative to `base`)."""
    data = document.data if isinstance(document.data, dict) else {}
    problem = {key: value for key, value in data.items() if key != "answers"}
    lines = [f"{_key(key)}: {_data(value, (key,), document, base)}" for key, value in problem.items()]
    lines += _answers(session)
    saved = {"level": session.level, "seconds": session.summary().seconds, "lines": session.lines}
    lines.append(MARK + json.dumps(saved, ensure_ascii=True))
    return "\n".join(lines) + "\n"


def saved(text: str, name: str) -> Saved:
    """The session a record holds; a file without one (not written by `practice --record`) is refused."""
    for line in reversed(text.splitlines()):
        if line.startswith(MARK):
            try:
                found = json.loads(line[len(MARK) :])
                level, seconds, lines = int(found["level"]), float(found["seconds"]), found["lines"]
                if level in (1, 2, 3) and math.isfinite(seconds) and all(isinstance(x, str) for x in lines):
                    return Saved(level, max(seconds, 0.0), tuple(lines))
            except (ValueError, KeyError, TypeError, OverflowError):
                pass
            break
    raise fail("practice.not_a_record", path=name).at(source="--resume")


# The problem, as data


def _data(value: object, path: FieldPath, document: Document, base: Path | None) -> str:
    """A value as YAML flow text that reads back as the same value."""
    if isinstance(value, dict):
        if "file" in value and isinstance(value["file"], str) and base is not None:
            return _array(base / value["file"], value.get("key"))
        parts = (f"{_key(k)}: {_data(v, (*path, k), document, base)}" for k, v in value.items())
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_data(v, (*path, i), document, base) for i, v in enumerate(value)) + "]"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, (int, float)):
        text = document.texts.get(path, "")
        return text if _PLAIN_NUMBER.fullmatch(text) and float(text) == value else repr(value)
    return scalar(str(value))


def _array(path: Path, key: object) -> str:
    """An array the problem reads from a file, written out in full (check reads no array outside a homework's own
    folder, and one beside the record may be another): each number as repr writes it, which reads back the same."""
    from attncli import arrays

    rows = arrays.load(path, key)
    return "[" + ", ".join("[" + ", ".join(repr(float(x)) for x in row) + "]" for row in rows) + "]"


def _key(key: object) -> str:
    return scalar(str(key))


# The answers, as first given


def _answers(session: Session) -> list[str]:
    found = session.answers()
    if not found:
        return []
    layers = sorted({r.layer for r in found if r.layer is not None})
    if not layers:
        return ["answers:", *_part(found, session, None, 2)]
    lines = ["answers:", "  layers:"]
    for index in range(max(layers) + 1):
        here = _part([r for r in found if r.layer == index], session, index, 6)
        lines += [f"    - {here[0].lstrip()}", *here[1:]] if here else ["    - {}"]
    return lines


def _part(found: list[Recorded], session: Session, layer: int | None, indent: int) -> list[str]:
    """One attention problem's answers (a stack's layer's, with its streams): its heads listed when it has several
    heads or W_O, each head's tiles under `tiles:` (attncli.practice.tiles), then the gradients under `backward:`
    (attncli.practice.backward), as attncli.parsing.answers reads them."""
    steps = part_of(session.solved, layer)
    gradients = [answer_of(r) for r in found if is_backward(r.field)]
    found = [r for r in found if not is_backward(r.field)]
    lines = _heads(found, steps, indent)
    if gradients:  # at the top of answers: (a problem of one layer: a stack's gradients are not asked)
        lines += backward.record_lines(steps, gradients, _step)
    return lines


def _heads(found: list[Recorded], steps: Steps, indent: int) -> list[str]:
    queries = len(steps.problem.query_tokens)
    forward = [answer_of(r) for r in found if r.field not in TILE_STEPS]

    def head_lines(h: int | None, at: int) -> list[str]:
        mine = [line for a in forward if a.head == h for line in _step(a, at)]
        tiled = [answer_of(r) for r in found if r.field in TILE_STEPS and r.head == h]
        return mine + tiles.record(tiled, queries, _cell, at)

    if steps.concat is None:
        return head_lines(0, indent) + head_lines(None, indent)
    pad = " " * (indent - 2)
    lines = [f"{pad}  heads:"] if any(r.head is not None for r in found) else []
    last = max((r.head for r in found if r.head is not None), default=-1)
    for h in range(min(last + 1, len(steps.heads))):
        mine = head_lines(h, indent + 4)
        lines += [f"{pad}    - {mine[0].lstrip()}", *mine[1:]] if mine else [f"{pad}    - {{}}"]
    return lines + head_lines(None, indent)


def _step(answer: Answer, indent: int) -> list[str]:
    pad = " " * indent
    rows = [[_cell(e) for e in row] for row in answer.cells]
    if len(set(answer.rows)) == len(answer.rows):
        return [f"{pad}{answer.step}:", *(f"{pad}  {scalar(n)}: {flow(r)}" for n, r in zip(answer.rows, rows))]
    return [f"{pad}{answer.step}:", *(f"{pad}  - {flow(r)}  {comment(n)}" for n, r in zip(answer.rows, rows))]


def _cell(e: Entry | None) -> str:
    """A number as the student wrote it (its decimals are its precision), an expression quoted, `?` if unanswered."""
    if e is None:
        return scalar("?")
    return e.text if _PLAIN_NUMBER.fullmatch(e.text) else scalar(e.text)
