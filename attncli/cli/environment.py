"""What a run may know of the world outside it, gathered once at the boundary and passed down.

Nothing below the boundary (attncli.cli.common.boundary) reads sys.stdout, os.environ
or the terminal itself: a test, or a program embedding attncli, can build an
`Environment` of its own.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from typing import NamedTuple, TextIO

from attncli.errors import fail
from attncli.i18n import LANGUAGES, language_from_environment

FILE_WIDTH = 100  # the width of human output written to a file, whatever the terminal's


class Environment(NamedTuple):
    """The streams (None when the shell closed one: `>&-`), whether each is a terminal, the terminal's width,
    whether human output on stdout is in colour, and the language of every message."""

    stdin: TextIO | None
    stdout: TextIO | None
    stderr: TextIO | None
    stdin_is_terminal: bool
    stdout_is_terminal: bool
    stderr_is_terminal: bool
    width: int
    colour: bool
    language: str

    @classmethod
    def of_process(cls, lang: str | None, plain: bool, environ: Mapping[str, str] = os.environ) -> Environment:
        """This process's environment, for a command given `--lang lang` and asked for plain output or not.

        Colour needs a terminal on stdout (or FORCE_COLOR) and neither `plain`
        (--no-color, --format text) nor NO_COLOR. An unknown `lang` is an AttnError.
        """
        terminal = [stream is not None and stream.isatty() for stream in (sys.stdin, sys.stdout, sys.stderr)]
        wanted = terminal[1] or bool(environ.get("FORCE_COLOR"))
        return cls(
            stdin=sys.stdin,
            stdout=sys.stdout,
            stderr=sys.stderr,
            stdin_is_terminal=terminal[0],
            stdout_is_terminal=terminal[1],
            stderr_is_terminal=terminal[2],
            width=shutil.get_terminal_size((80, 24)).columns,
            colour=wanted and not plain and not environ.get("NO_COLOR"),
            language=checked_language(lang, environ),
        )


def checked_language(lang: str | None, environ: Mapping[str, str] = os.environ) -> str:
    """`lang` when we speak it, the environment's language when it is None.

    An unknown `lang` is the user's mistake, reported like any bad input (the caller
    speaks the environment's language meanwhile, so the report is readable).
    """
    if lang is None:
        return language_from_environment(environ)
    if lang.lower() not in LANGUAGES:
        from attncli.yamldoc import did_you_mean  # only on this error path

        hint = did_you_mean(lang.lower(), LANGUAGES)
        raise fail("cli.bad_lang", name=lang, known=", ".join(LANGUAGES), hint=hint).at(source="--lang")
    return lang.lower()
