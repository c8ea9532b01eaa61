"""The one error a user can cause, how its message lists names, and the exit codes the command line promises.

Also which characters a terminal obeys instead of showing: a name, a title or a file name holding
one is refused (in a problem) or shown escaped (in a message, a report).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

NAMES_SHOWN = 10  # a message lists at most this many token names, then how many there are
# C0, DEL, C1, the Unicode line and paragraph separators, the bidirectional embeddings,
# overrides and isolates (U+202A-U+202E, U+2066-U+2069), which can make text read backwards,
# lone surrogates: bytes of a command line that were not UTF-8, which no stream can encode; and the
# noncharacters U+FFFE, U+FFFF, which YAML does not allow anywhere, even in a comment.
CONTROL_RANGES = (
    (0x00, 0x1F),
    (0x7F, 0x9F),
    (0x2028, 0x2029),
    (0x202A, 0x202E),
    (0x2066, 0x2069),
    (0xD800, 0xDFFF),
    (0xFFFE, 0xFFFF),
)
CONTROL_CODES = tuple(code for low, high in CONTROL_RANGES for code in range(low, high + 1))


class ExitCode(IntEnum):
    """What `attncli` returns to the shell; scripts depend on these numbers."""

    OK = 0
    WRONG_ANSWERS = 1
    BAD_INPUT = 2
    INTERNAL = 70
    INTERRUPTED = 130
    TERMINATED = 143  # 128 + SIGTERM, as a shell reports it


class Terminated(BaseException):
    """SIGTERM, raised where the program is so that it unwinds like Ctrl-C: temporary files removed."""


class Message(NamedTuple):
    """A catalogue key and its parameters, translated only when printed: a part of an error's message, or its field."""

    key: str
    params: dict[str, object]


@dataclass
class Where:
    """Where in the input a problem sits: file (or flag), line, and field path."""

    source: str | None = None
    line: int | None = None
    field: str | Message | None = None  # a Message where the field is named in words (`keys, row 3 (bank)`)


@dataclass
class AttnError(Exception):
    """Anything wrong with what the user gave us.

    `key` names a message in the catalogue (attncli/i18n) and `params` fill its
    placeholders, so the text is chosen in the user's language only when printed
    (attncli.i18n.describe); a parameter that is a `Message`, such as a hint, is
    translated then too.
    """

    key: str
    params: dict[str, object] = field(default_factory=dict)
    where: Where = field(default_factory=Where)

    def __post_init__(self) -> None:
        super().__init__(self.key)

    def __str__(self) -> str:
        """The sentence the command line prints, in English: what a traceback or a log shows a programmer."""
        from attncli.i18n import in_english  # the catalogues import this module

        return in_english(self)

    def at(self, source: str | None = None, line: int | None = None, field: str | Message | None = None) -> AttnError:
        """Fill in location details that the raiser did not know."""
        self.where = Where(
            source=self.where.source or source,
            line=self.where.line or line,
            field=self.where.field or field,
        )
        return self


def fail(key: str, /, **params: object) -> AttnError:
    """Build an AttnError to raise: `raise fail("expr.unknown_name", name=n)`.

    `key` is positional-only so that a message may have a placeholder called `key` too.
    """
    return AttnError(key, dict(params))


def phrase(key: str, /, **params: object) -> Message:
    """A part of an error's message (a hint, what was found), passed as one of its parameters or as its field:
    `fail(key, hint=phrase("hint.did_you_mean", name=n))`. Translated with the message, when printed."""
    return Message(key, dict(params))


def listed(names: Sequence[str]) -> str:
    """Token names for a one-line message: the first few, and how many there are in all."""
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown if len(names) <= NAMES_SHOWN else f"{shown}, ... ({len(names)})"


def printable(text: str, lines: bool = False) -> str:
    """`text` with every control character (CONTROL_CODES) written as its escape, \\x1b or \\u202e: how text from a
    file or a student is shown on a terminal, and the first step of every other medium's escaping. With `lines`,
    line breaks and tabs stay (a title or notes written on several lines)."""
    return text.translate(_escaped(lines))


@functools.cache
def _escaped(lines: bool) -> dict[int, str]:
    """The table `printable` translates with, made the first time a run has something to escape."""
    kept = (ord("\n"), ord("\t")) if lines else ()
    return {code: ascii(chr(code))[1:-1] for code in CONTROL_CODES if code not in kept}


@functools.cache
def quoted_escapes() -> dict[int, str]:
    """What a JSON (or double-quoted YAML) string written by json.dumps(ensure_ascii=False) still holds raw: C1, DEL,
    line and paragraph separators, bidirectional controls, lone surrogates and noncharacters, as \\uXXXX escapes
    (json.dumps escapes C0 itself)."""
    return {code: f"\\u{code:04x}" for code in (*CONTROL_CODES, 0xFEFF, 0xFFFE, 0xFFFF) if code >= 0x20}
