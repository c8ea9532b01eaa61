"""The Typer application and the boundary every command runs inside.

numpy, PyYAML and Rich are imported inside the commands, so `attncli --help`
and shell completion start without them.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Annotated, Any, Optional, TypeVar

import typer

from attncli import __version__
from attncli.errors import AttnError, ExitCode
from attncli.i18n import LANGUAGES, set_language, t

EXIT_CODES_HELP = (
    "Exit codes: 0 done; 1 `check` found wrong answers; 2 bad input or usage; 70 internal error; 130 interrupted."
)
app = typer.Typer(
    name="attncli",
    help="Attention, calculated step by step: q·k, the 1/√d_k scale, softmax, the weighted sum of values."
    f"\n\n{EXIT_CODES_HELP}",
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
Command = TypeVar("Command", bound=Callable[..., Any])

Lang = Annotated[
    Optional[str],
    typer.Option("--lang", help=f"Language of the output: {', '.join(LANGUAGES)} (default: from LANG)."),
]
Debug = Annotated[bool, typer.Option("--debug", help="Show the traceback of an internal error.")]


def boundary(command: Command) -> Command:
    """Turn whatever a command raises into one line on stderr and a documented exit code.

    The command must take `lang` and `debug` keyword arguments (the Lang and Debug options).
    """

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        set_language(kwargs.get("lang"))
        try:
            return command(*args, **kwargs)
        except AttnError as error:
            say(describe(error))
            raise typer.Exit(ExitCode.BAD_INPUT) from None
        except KeyboardInterrupt:
            say(t("cli.interrupted"))
            raise typer.Exit(ExitCode.INTERRUPTED) from None
        except BrokenPipeError:
            _silence_stdout()
            raise typer.Exit(ExitCode.OK) from None
        except typer.Exit:
            raise
        except Exception as error:  # anything else is our bug, not the user's
            if kwargs.get("debug"):
                traceback.print_exc()
            say(t("cli.internal", error=f"{type(error).__name__}: {error}"))
            raise typer.Exit(ExitCode.INTERNAL) from None

    return run  # type: ignore[return-value]


def describe(error: AttnError) -> str:
    """`file:line: field: message`, leaving out what is not known."""
    where = error.where
    place = ":".join(str(part) for part in (where.source, where.line) if part is not None)
    parts = [part for part in (place, where.field, t(error.key, **error.params)) if part]
    return ": ".join(parts)


def say(line: str) -> None:
    """One line on stderr, prefixed with the program's name."""
    with contextlib.suppress(OSError):
        print(f"attncli: {line}", file=sys.stderr)


def _silence_stdout() -> None:
    """After a closed pipe, point stdout at /dev/null so the interpreter's final flush stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _version(value: bool) -> None:
    if value:
        print(f"attncli {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = None,
) -> None:
    """Attention, calculated step by step."""
