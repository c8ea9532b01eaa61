"""Where results go: stdout or a file written whole, as Rich on a terminal or plain text elsewhere."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, TextIO

from attncli.cli.ending import silence_stdout
from attncli.cli.environment import FILE_WIDTH, Environment
from attncli.errors import fail
from attncli.render import Content, Stream
from attncli.render.formats import implied_by
from attncli.render.layout import Line, fit, to_text

if TYPE_CHECKING:
    from rich.console import Console

STDOUT = "<stdout>"


def output_format(given: str | None, output: Path | None, known: Sequence[str], default: str = "rich") -> str:
    """The format of a run: `--format` when given, else the one `-o`'s extension names (attncli.render.formats),
    else `default`.

    An extension that names a format the command does not write (`check -o grades.npy`) is an error
    rather than the default, which would put text into a file named for something else.
    """
    if given is not None:
        return given
    implied = implied_by(output.suffix) if output is not None else None
    if implied is None:
        return default
    if implied not in known:
        raise fail("cli.extension_not_offered", path=str(output), format=implied, known=", ".join(known)).at(
            source="-o"
        )
    return implied


def write(content: Content, output: Path | None, env: Environment) -> None:
    """Write to stdout, or to `output` whole or not at all.

    A regular file is written to a temporary file beside it, flushed to disk and
    renamed into place, so a reader never sees half of it; on any failure (a full
    disk, Ctrl-C) the temporary file is removed and the old file stays. A symbolic
    link keeps pointing where it did; a device or pipe (-o /dev/stdout) is written
    directly, since renaming over it would replace it. Inside `all_or_nothing` the
    file is kept back until the whole run has succeeded. A `Stream` writes itself into the file
    (or stdout), so that a large output is never held twice in memory.
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    if output is None:
        stdout = _stdout(env)
        try:
            stdout.flush()
            _put(stdout.buffer, data)
            stdout.buffer.flush()
        except BrokenPipeError:
            raise  # the reader stopped early (| head): not an error, `ending` ends quietly
        except OSError as error:  # a full disk behind > file, or /dev/full
            silence_stdout()
            raise fail("cli.output_failed", path=STDOUT, reason=error.strerror or str(error)) from None
        return
    pending = _Pending(output, data)
    staged = _STAGED.get()
    if staged is not None:
        staged.append(pending)
        return
    try:
        pending.finish()
    finally:
        pending.discard()


class _Pending:
    """One output file on its way: a regular file as a temporary beside it, a pipe or device as its bytes."""

    def __init__(self, output: Path, data: bytes | Stream) -> None:
        self.output, self.data, self.temporary = output, data, None
        with _failing_as(output):
            if os.path.isdir(output):  # refused now, before the run prints anything, not when the files are written
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(output))
            if not _is_special(output):  # opened by the name given: /dev/fd/63 resolves to a pipe with no path
                self.target = Path(os.path.realpath(output))
                self.temporary = _temporary(self.target, data)

    def finish(self) -> None:
        with _failing_as(self.output):
            if self.temporary is None:
                with open(self.output, "wb") as handle:
                    _put(handle, self.data)
            else:
                os.replace(self.temporary, self.target)
                self.temporary = None

    def discard(self) -> None:
        if self.temporary is not None:
            self.temporary.unlink(missing_ok=True)
            self.temporary = None


_STAGED: ContextVar[list[_Pending] | None] = ContextVar("attncli_staged_outputs", default=None)


@contextlib.contextmanager
def all_or_nothing() -> Iterator[None]:
    """Keep back every file `write` is given inside, and write them all once the block has succeeded.

    A run that fails (bad input, a file that cannot be written, Ctrl-C) leaves no output behind:
    `--svg pic.svg -o nodir/out.json` writes no pic.svg. A command that returns, whatever its exit
    code (check's 1 for wrong answers), has succeeded in writing what it wrote.
    """
    staged: list[_Pending] = []
    token = _STAGED.set(staged)
    try:
        yield
        for pending in staged:
            pending.finish()
    finally:
        _STAGED.reset(token)
        for pending in staged:
            pending.discard()


@contextlib.contextmanager
def _failing_as(output: Path) -> Iterator[None]:
    try:
        yield
    except OSError as error:
        raise fail("cli.output_failed", path=str(output), reason=error.strerror or str(error)) from None


def _is_special(output: Path) -> bool:
    """Whether `output` exists and is no regular file (symbolic links followed): a pipe, a device, a folder."""
    try:
        return not stat.S_ISREG(os.stat(output).st_mode)
    except FileNotFoundError:
        return False


def _put(handle: BinaryIO, data: bytes | Stream) -> None:
    if isinstance(data, bytes):
        handle.write(data)
    else:
        data(handle)


def _temporary(target: Path, data: bytes | Stream) -> Path:
    """`data` in a new file beside `target`, flushed to disk; removed again if writing it fails."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.attncli-tmp")
    created = False
    try:
        with open(temporary, "xb") as handle:  # a new file, with the permissions any new file gets
            created = True
            _put(handle, data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        if created:
            temporary.unlink(missing_ok=True)
        raise
    return temporary


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
    lines = fit(build(FILE_WIDTH), FILE_WIDTH)
    if plain:  # Rich's no_color leaves the colours in what it records for export: take them out of the styles
        from rich.style import Style

        lines = [
            tuple((text, Style.parse(style).without_color if style else style) for text, style in spans)  # type: ignore[misc]
            for spans in lines
        ]  # Rich takes a Style wherever it takes a style's name
    print_lines(console, lines)
    if svg:
        write(console.export_svg(title=title, clear=False), svg, env)
    if html:
        write(console.export_html(inline_styles=True, clear=False), html, env)


def print_lines(console: Console, lines: Iterable[Line]) -> None:
    """Each line in its styles; the lines are fitted already, so Rich must not wrap or crop them."""
    from rich.text import Text

    for spans in lines:
        console.print(Text.assemble(*spans), soft_wrap=True)
