"""Where results go: stdout or a file written whole, as Rich on a terminal or plain text elsewhere."""

from __future__ import annotations

import errno
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from attncli.errors import fail
from attncli.render.layout import Line, fit, to_text

if TYPE_CHECKING:
    from rich.console import Console

FILE_WIDTH = 100
STDOUT = "<stdout>"


def write(content: str | bytes, output: Path | None) -> None:
    """Write to stdout, or to `output` whole or not at all.

    A regular file is written to a temporary file beside it, flushed to disk and
    renamed into place, so a reader never sees half of it; on any failure (a full
    disk, Ctrl-C) the temporary file is removed and the old file stays. A symbolic
    link keeps pointing where it did; a device or pipe (-o /dev/stdout) is written
    directly, since renaming over it would replace it.
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    if output is None:
        stdout = _stdout()
        try:
            stdout.flush()
            stdout.buffer.write(data)
            stdout.buffer.flush()
        except BrokenPipeError:
            raise  # the reader stopped early (| head): not an error, the boundary ends quietly
        except OSError as error:  # a full disk behind > file, or /dev/full
            silence_stdout()
            raise fail("cli.output_failed", path=STDOUT, reason=error.strerror or str(error)) from None
        return
    target = Path(os.path.realpath(output))
    try:
        if target.exists() and not target.is_file():
            with open(target, "wb") as handle:
                handle.write(data)
        else:
            _replace(target, data)
    except OSError as error:
        raise fail("cli.output_failed", path=str(output), reason=error.strerror or str(error)) from None


def _replace(target: Path, data: bytes) -> None:
    temporary = target.with_name(f".{target.name}.{os.getpid()}.attncli-tmp")
    created = False
    try:
        with open(temporary, "xb") as handle:  # a new file, with the permissions any new file gets
            created = True
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    except BaseException:
        if created:
            temporary.unlink(missing_ok=True)
        raise


def _stdout() -> TextIO:
    """Standard output, or an error when the shell closed it (`>&-`)."""
    if sys.stdout is None:
        raise fail("cli.output_failed", path=STDOUT, reason=os.strerror(errno.EBADF))
    return sys.stdout


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what could not be written stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def stdout_is_terminal() -> bool:
    """Whether stdout is a terminal; a closed stdout (`>&-`) is an error, reported once we write."""
    return _stdout().isatty()


def print_human(build: Callable[[int], list[Line]], output: Path | None, plain: bool) -> None:
    """Print the styled lines `build(width)` returns, fitted to the width.

    On a terminal (or with FORCE_COLOR) Rich prints them in colour; otherwise (a
    pipe, a file, --format text, --no-color, NO_COLOR) they go out as plain text
    without importing Rich, which would cost a noticeable part of the start-up.
    """
    wants_colour = (output is None and _stdout().isatty()) or bool(os.environ.get("FORCE_COLOR"))
    width = shutil.get_terminal_size((80, 24)).columns if output is None else FILE_WIDTH
    lines = fit(build(width), width)
    if output is None and not plain and wants_colour and not os.environ.get("NO_COLOR"):
        from rich.console import Console

        print_lines(Console(highlight=False), lines)
        return
    write(to_text(lines), output)


def print_lines(console: Console, lines: Iterable[Line]) -> None:
    """Each line in its styles; the lines are fitted already, so Rich must not wrap or crop them."""
    from rich.text import Text

    for spans in lines:
        console.print(Text.assemble(*spans), soft_wrap=True)
