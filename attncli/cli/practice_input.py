"""The tutor's two front-ends: a pipe (one answer per line, echoed, so the output reads as a transcript) and a
terminal (the standard library's `readline` where it exists: arrow keys move, backspace deletes, ↑ recalls).

Input is read as bytes and bounded: a line longer than MAX_LINE characters is refused as a whole (read
on to its end without being kept), bytes that are not UTF-8 become U+FFFD, so junk reaches the
session as a line it answers with one message, and what is echoed is escaped.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import BinaryIO

from attncli.cli.environment import Environment
from attncli.cli.output import to_stdout
from attncli.errors import printable
from attncli.i18n import t
from attncli.render.layout import Line, fit, to_text

MAX_LINE = 4096  # characters in one answer: a line past this is refused, and the session goes on
CHUNK = 65536
TOO_LONG = "\x00too long"  # what read() gives for a line past MAX_LINE (no line typed can hold NUL: it is escaped)


class Pipe:
    """Without a terminal: the prompt, then the line read, echoed."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    def show(self, lines: list[Line]) -> None:
        if lines:
            to_stdout(to_text(fit(lines, self.env.width)), self.env)

    def read(self, prompt: str) -> str | None:
        """The next line (None at the end of the input); a line too long is said so, and the next one read."""
        while True:
            to_stdout(prompt, self.env)
            answer = self._line()
            if answer is None:
                self.newline()
                return None
            if answer != TOO_LONG:
                to_stdout(f"{printable(answer)}\n", self.env)
                return answer
            self.newline()
            self.show([((t("practice.line_too_long", most=MAX_LINE), "yellow"),)])

    def _line(self) -> str | None:
        stream = self.env.stdin
        if stream is None:  # closed by the shell (`<&-`): the end of the input
            return None
        raw: BinaryIO | None = getattr(stream, "buffer", None)
        if raw is None:  # a text stream without bytes beneath (an embedding program's)
            text = stream.readline(MAX_LINE + 1)
            return _bounded(_bytes(text), lambda: _bytes(stream.readline(CHUNK)))
        return _bounded(raw.readline(MAX_LINE * 4 + 2), lambda: raw.readline(CHUNK))

    def newline(self) -> None:
        to_stdout("\n", self.env)


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate becomes bytes that decode as U+FFFD


def _bounded(first: bytes, more: Callable[[], bytes]) -> str | None:
    """A line from its first bytes (None at the end of the input), TOO_LONG for one past MAX_LINE characters, its
    rest read through `more` and dropped."""
    if not first:
        return None
    ended = first.endswith(b"\n")
    text = first.decode("utf-8", "replace").rstrip("\r\n")
    if len(text) <= MAX_LINE and (ended or len(first) <= MAX_LINE):
        return text
    while not ended:
        chunk = more()
        if not chunk:
            break
        ended = chunk.endswith(b"\n")
    return TOO_LONG


class Terminal(Pipe):
    """On a terminal: Rich, in colour unless NO_COLOR or --no-color; the line read with `readline` (when the
    platform has it); an empty line asks again."""

    def __init__(self, env: Environment) -> None:
        super().__init__(env)
        from rich.console import Console

        self.console = Console(file=env.stdout, highlight=False, no_color=not env.colour, force_terminal=env.colour)
        self.colour = env.colour
        self.editing = False
        with contextlib.suppress(ImportError):  # Windows without pyreadline: input() as it is
            import readline  # noqa: F401  # input() edits lines with it: arrows, backspace, history

            self.editing = True

    def show(self, lines: list[Line]) -> None:
        from attncli.cli.output import print_lines

        if lines:
            print_lines(self.console, fit(lines, self.console.width))

    def read(self, prompt: str) -> str | None:
        colour = self.colour and self.editing  # \x01…\x02 tell readline the colour has no width; without it, none
        shown = f"\x01\x1b[1;36m\x02{prompt}\x01\x1b[0m\x02" if colour else prompt
        try:
            while True:
                self.console.file.flush()
                answer = input(shown) if _is_stdio(self.env) else self._typed(prompt)
                if answer is None:
                    raise EOFError
                if len(answer) > MAX_LINE:
                    self.show([((t("practice.line_too_long", most=MAX_LINE), "yellow"),)])
                elif answer.strip():
                    return answer  # an Enter pressed by accident skips nothing here: `skip` does
        except EOFError:  # Ctrl-D
            self.newline()
            return None
        except UnicodeDecodeError:  # bytes that are not UTF-8: a line the session answers as junk
            return "\ufffd"

    def _typed(self, prompt: str) -> str | None:
        to_stdout(prompt, self.env)
        return self._line()

    def newline(self) -> None:
        self.console.print()


def _is_stdio(env: Environment) -> bool:
    """Whether the session reads and writes the process's own terminal, where input() and readline work."""
    try:
        own = sys.stdin is not None and os.isatty(sys.stdin.fileno())
        return own and env.stdin is sys.stdin and env.stdout is sys.stdout
    except (AttributeError, OSError, ValueError):
        return False
