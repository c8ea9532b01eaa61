"""The `attncli` program, and `ending`: the exit ladder every way out of a run goes through.

The language is chosen first: the commands build their --help texts as they load.
Nothing heavy is imported here, so that Ctrl-C while the command line loads also
ends with one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import warnings
from typing import TextIO

from attncli.errors import Terminated, printable


def main() -> None:
    arguments = sys.argv[1:]
    signal.signal(signal.SIGTERM, _terminate)
    if "--debug" not in arguments:
        # A warning speaks of attncli's code, not of the input, and would add lines to stderr: every
        # overflow numpy could warn of is checked and reported as the one error line.
        warnings.simplefilter("ignore")
    try:
        from attncli.i18n import LANGUAGE, language_from_environment, language_in_arguments

        LANGUAGE.set(language_in_arguments(arguments) or language_from_environment())
        from attncli.cli import main as run

        run()
    except SystemExit:  # the command line ended itself, through `ending`
        raise
    except BaseException as error:  # Ctrl-C (or a bug) while the command line loads
        sys.exit(ending(error, debug="--debug" in arguments))


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def ending(error: BaseException, debug: bool = False) -> int:
    """What attncli says on stderr and returns to the shell for whatever ended a run: the whole exit ladder.

    The user's mistake (an AttnError, a usage error) is one line and 2, as is running out of memory; Ctrl-C one line
    and 130, SIGTERM one line and 143, both once every temporary file is removed; a reader
    that closed the pipe (`| head`) nothing and 0; anything else is our bug: one line (the
    traceback with --debug) and 70. A run that ended itself (typer.Exit, SystemExit) keeps
    its code. The language is the run's.
    """
    from attncli.errors import AttnError, ExitCode
    from attncli.i18n import describe, t, usage_message

    if isinstance(error, AttnError):
        say(describe(error))
        return ExitCode.BAD_INPUT
    if isinstance(error, KeyboardInterrupt):
        say(t("cli.interrupted"))
        return ExitCode.INTERRUPTED
    if isinstance(error, Terminated):
        say(t("cli.terminated"))
        return ExitCode.TERMINATED
    if isinstance(error, BrokenPipeError):
        silence_stdout()
        return ExitCode.OK
    if isinstance(error, MemoryError):  # past what the machine (or a ulimit) gives, below attncli's own budget
        say(t("cli.out_of_memory"))
        return ExitCode.BAD_INPUT
    if isinstance(error, SystemExit):  # Typer ends help sent to a closed pipe (`| head`) with status 1
        return ExitCode.OK if error.code in (None, 1) else int(error.code)
    if type(error).__module__.partition(".")[0] == "typer":  # only then need Typer be loaded
        import typer

        if isinstance(error, typer.Exit):
            return error.exit_code
        if isinstance(error, typer.Abort):
            say(t("cli.interrupted"))
            return ExitCode.INTERRUPTED
        if isinstance(error, typer.TyperException):  # a bad flag, a missing argument: Click's usage errors
            if type(error).__name__ != "NoArgsIsHelpError":  # the help has been printed already
                context = getattr(error, "ctx", None)
                command = context.command_path if context else "attncli"
                say(t("cli.usage", message=usage_message(error.format_message()), command=command))
            return ExitCode.BAD_INPUT
    if debug:
        import traceback

        traceback.print_exception(error)
    say(t("cli.internal", error=f"{type(error).__name__}: {error}"))
    return ExitCode.INTERNAL


def say(line: str, stderr: TextIO | None = None, *, whole: bool = False) -> None:
    """One line on stderr (`stderr`, else the process's), prefixed with the program's name.

    Control characters (a newline or an escape sequence inside a field name, a token,
    an expression) are shown escaped: the message stays one line, and a hostile file
    cannot send commands to the terminal. An error line is cut to LINE_LIMIT characters;
    a notice the user may copy (a command that remakes files) is kept `whole`.
    """
    text = f"attncli: {printable(line)}"
    with contextlib.suppress(OSError):
        print(text if whole else _fit(text), file=stderr or sys.stderr)


def _fit(line: str) -> str:
    """`line` cut to LINE_LIMIT characters in the middle, the cut marked "…": its start says where, its end what."""
    if len(line) <= LINE_LIMIT:
        return line
    head = (LINE_LIMIT - 1) * 2 // 3
    return f"{line[:head]}…{line[len(line) - (LINE_LIMIT - 1 - head) :]}"


LINE_LIMIT = 200  # characters of an error line on stderr, "attncli: " included


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what could not be written stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
