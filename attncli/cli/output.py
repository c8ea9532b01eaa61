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
from typing import TYPE_CHECKING, BinaryIO, NamedTuple, TextIO

from attncli import inputs
from attncli.cli.ending import silence_stdout
from attncli.cli.environment import FILE_WIDTH, Environment
from attncli.errors import AttnError, fail, phrase
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
    directly, since renaming over it would replace it. A folder, or a file the run
    reads, is refused (`check_targets`). Inside `all_or_nothing` the file is kept
    back until the whole run has succeeded, and what goes to stdout is printed only
    once every file is written: a run that cannot write one prints nothing. A `Stream`
    writes itself into the file (or stdout), so that a large output is never held
    twice in memory.
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    if output is None:
        _printed(lambda: to_stdout(data, env))
        return
    pending = _Pending(output, data)
    staged = _STAGED.get()
    if staged is not None:
        staged.files.append(pending)
        return
    try:
        pending.finish()
    finally:
        pending.discard()


def check_targets(*targets: tuple[str, Path | None]) -> None:
    """Refuse, before anything is computed or printed, an output (option, path) that cannot be written: a file
    the run has read (an input, links followed), a folder, or a file in a folder that does not exist or cannot
    be written to. A pipe or a device (-o /dev/stdout) is written as it is."""
    for option, path in targets:
        if path is None:
            continue
        try:
            _check_target(path)
            if not path.exists():
                folder = path.absolute().parent
                if not folder.is_dir():
                    raise OSError(errno.ENOENT, os.strerror(errno.ENOENT))
                if not os.access(folder, os.W_OK | os.X_OK):
                    raise OSError(errno.EACCES, os.strerror(errno.EACCES))
        except OSError as error:
            reason = error.strerror or str(error)
            raise fail("cli.output_failed", path=str(path), reason=reason).at(source=option) from None
        except AttnError as error:
            raise error.at(source=option) from None


def _check_target(output: Path) -> None:
    """Refuse to write over a file the run reads, or over a folder (an OSError: the reason is the system's)."""
    read = inputs.reading(os.fspath(output))
    if read is not None:
        reason = phrase("cli.is_input") if read == os.fspath(output) else phrase("cli.is_input_as", input=read)
        raise fail("cli.output_failed", path=str(output), reason=reason)
    if output.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))


def make_folder(output: Path, option: str) -> list[Path]:
    """Make the folder `output` (given with `option`) and those above it that are missing: the ones made, the
    innermost first, for a run that fails to remove again."""
    made, folder = [], output
    while not folder.exists() and not folder.is_symlink() and folder != folder.parent:
        made.append(folder)
        folder = folder.parent
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = error.strerror or str(error)
        raise fail("cli.output_failed", path=str(output), reason=reason).at(source=option) from None
    return made


def write_at_once(content: Content, output: Path, env: Environment) -> None:
    """Write `output` whole now, even inside `all_or_nothing`: a file that holds a conversation as it goes (the
    tutor's record, rewritten after every answer), so that an interrupted run keeps what it said."""
    token = _STAGED.set(None)
    try:
        write(content, output, env)
    finally:
        _STAGED.reset(token)


def to_stdout(content: Content, env: Environment) -> None:
    """Print `content` now, even inside `all_or_nothing`: what a conversation (the tutor) says as it goes."""
    data = content.encode("utf-8") if isinstance(content, str) else content
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


def _printed(show: Callable[[], None]) -> None:
    """Print now, or inside `all_or_nothing` once every file of the run is written."""
    staged = _STAGED.get()
    if staged is None:
        show()
    else:
        staged.printed.append(show)


class _Pending:
    """One output file on its way: a regular file as a temporary beside it, a pipe or device as its bytes."""

    def __init__(self, output: Path, data: bytes | Stream) -> None:
        self.output, self.data, self.temporary = output, data, None
        with _failing_as(output):
            _check_target(output)  # refused now, before the run prints anything, not when the files are written
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


class _Staged(NamedTuple):
    """What a run has kept back: its files, then what it prints."""

    files: list[_Pending]
    printed: list[Callable[[], None]]


_STAGED: ContextVar[_Staged | None] = ContextVar("attncli_staged_outputs", default=None)


@contextlib.contextmanager
def all_or_nothing() -> Iterator[None]:
    """Keep back every file `write` is given inside, and write them all once the block has succeeded; then print.

    A run that fails (bad input, a file that cannot be written, Ctrl-C) leaves no output behind
    and prints nothing: `--svg pic.svg -o nodir/out.json` writes no pic.svg, `--html /dev/full`
    prints no step. A command that returns, whatever its exit code (check's 1 for wrong answers),
    has succeeded in writing what it wrote. The files the block reads are recorded
    (attncli.inputs): none of them is written over.
    """
    staged = _Staged([], [])
    token = _STAGED.set(staged)
    try:
        with inputs.recorded():
            yield
        _finish(staged)
    finally:
        _STAGED.reset(token)
        for pending in staged.files:
            pending.discard()


def _finish(staged: _Staged) -> None:
    """The files renamed into place as a set, then what goes to stdout (outside the block, as it would be)."""
    for pending in staged.files:
        pending.finish()
    outer = _STAGED.get()
    for show in staged.printed:
        if outer is not None and outer is not staged:
            outer.printed.append(show)
        else:
            show()


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
    """`data` in a new file beside `target`, flushed to disk; removed again if writing it fails.

    The removal is armed before the file is made: a signal (Ctrl-C, SIGTERM) that arrives as `open`
    returns leaves nothing behind. Only a file that was there already (the name is taken) stays.
    """
    temporary = target.with_name(f".{target.name}.{os.getpid()}.attncli-tmp")
    try:
        with open(temporary, "xb") as handle:  # a new file, with the permissions any new file gets
            _put(handle, data)
            handle.flush()
            os.fsync(handle.fileno())
    except FileExistsError:
        raise
    except BaseException:
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

        lines = fit(build(width), width)
        _printed(lambda: print_lines(Console(file=_stdout(env), highlight=False), lines))
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
