"""Where results go: stdout or a file written whole, as Rich on a terminal or plain text elsewhere."""

from __future__ import annotations

import errno
import io
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from attncli.cli.environment import FILE_WIDTH, Environment
from attncli.errors import fail
from attncli.launch import silence_stdout
from attncli.render.layout import Line, fit, to_text

if TYPE_CHECKING:
    from rich.console import Console

STDOUT = "<stdout>"


def write(content: str | bytes, output: Path | None, env: Environment) -> None:
    """Write to stdout, or to `output` whole or not at all.

    A regular file is written to a temporary file beside it, flushed to disk and
    renamed into place, so a reader never sees half of it; on any failure (a full
    disk, Ctrl-C) the temporary file is removed and the old file stays. A symbolic
    link keeps pointing where it did; a device or pipe (-o /dev/stdout) is written
    directly, since renaming over it would replace it.
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    if output is None:
        stdout = _stdout(env)
        try:
            stdout.flush()
            stdout.buffer.write(data)
            stdout.buffer.flush()
        except BrokenPipeError:
            raise  # the reader stopped early (| head): not an error, `ending` ends quietly
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


def _stdout(env: Environment) -> TextIO:
    """Standard output, or an error when the shell closed it (`>&-`)."""
    if env.stdout is None:
        raise fail("cli.output_failed", path=STDOUT, reason=os.strerror(errno.EBADF))
    return env.stdout


def print_human(build: Callable[[int], list[Line]], output: Path | None, env: Environment) -> None:
    """Print the styled lines `build(width)` returns, fitted to the width.

    On stdout in colour (env.colour) Rich prints them; otherwise (a pipe, a file,
    --format text, --no-color, NO_COLOR) they go out as plain text without importing
    Rich, which would cost a noticeable part of the start-up.
    """
    width = env.width if output is None else FILE_WIDTH
    if output is None and env.colour:
        from rich.console import Console

        print_lines(Console(file=_stdout(env), highlight=False), fit(build(width), width))
        return
    write(to_text(fit(build(width), width)), output, env)


def save_pictures(
    build: Callable[[int], list[Line]], svg: Path | None, html: Path | None, title: str, plain: bool, env: Environment
) -> None:
    """Record the human output on a Rich console and save it as SVG and/or HTML, each file written whole."""
    from rich.console import Console

    console = Console(
        record=True, file=io.StringIO(), width=FILE_WIDTH, force_terminal=True, color_system="truecolor", no_color=plain
    )
    print_lines(console, fit(build(FILE_WIDTH), FILE_WIDTH))
    if svg:
        write(console.export_svg(title=title, clear=False), svg, env)
    if html:
        write(console.export_html(inline_styles=True, clear=False), html, env)


def print_lines(console: Console, lines: Iterable[Line]) -> None:
    """Each line in its styles; the lines are fitted already, so Rich must not wrap or crop them."""
    from rich.text import Text

    for spans in lines:
        console.print(Text.assemble(*spans), soft_wrap=True)
