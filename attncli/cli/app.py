"""The Typer application and the boundary every command runs inside.

numpy, PyYAML and Rich are imported inside the commands, so `attncli --help`
and shell completion start without them. Help texts come from the catalogue
when the commands are imported, in the language attncli.launch has chosen.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer
from typer._click import exceptions as _clicks  # Typer ≥ 0.26 carries its own copy of click
from typer.core import TyperGroup

from attncli import __version__
from attncli.cli.output import silence_stdout
from attncli.errors import AttnError, ExitCode, fail
from attncli.i18n import LANGUAGES, language_in_arguments, set_language, t

EXIT_CODES_HELP = t("help.exit_codes")


class _OneLineErrors(TyperGroup):
    """Typer's command group, with usage errors (a bad flag, a missing argument) on one line of stderr.

    Typer would print them in a framed panel of several lines; every other error of
    attncli is one line, and scripts read the first line of stderr.
    """

    def main(self, *args: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        if not standalone_mode:
            return super().main(*args, standalone_mode=False, **kwargs)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except _clicks.UsageError as error:
            if type(error).__name__ != "NoArgsIsHelpError":  # the help has been printed already
                set_language(language_in_arguments(sys.argv[1:]))
                command = error.ctx.command_path if error.ctx else self.name
                say(t("cli.usage", message=error.format_message(), command=command))
            sys.exit(ExitCode.BAD_INPUT)
        except _clicks.ClickException as error:
            say(error.format_message())
            sys.exit(error.exit_code)
        except typer.Abort:
            say(t("cli.interrupted"))
            sys.exit(ExitCode.INTERRUPTED)
        except SystemExit as stop:  # Rich and Typer end help sent to a closed pipe (`| head`) with status 1
            sys.exit(ExitCode.OK if stop.code == 1 else stop.code)
        sys.exit(code if isinstance(code, int) else ExitCode.OK)


app = typer.Typer(
    cls=_OneLineErrors,
    name="attncli",
    help=f"{t('help.app')}\n\n{EXIT_CODES_HELP}",
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
Command = TypeVar("Command", bound=Callable[..., Any])

Lang = Annotated[Optional[str], typer.Option("--lang", help=t("help.lang", languages=", ".join(LANGUAGES)))]
Debug = Annotated[bool, typer.Option("--debug", help=t("help.debug"))]
Precision = Annotated[int, typer.Option(min=0, max=17, help=t("help.precision"))]
Output = Annotated[Optional[Path], typer.Option("--output", "-o", help=t("help.output"))]
NoColor = Annotated[bool, typer.Option("--no-color", help=t("help.no_color"))]


def format_option(formats: Sequence[str]) -> Any:
    """The --format option of a command that offers `formats`."""
    return Annotated[str, typer.Option("--format", "-f", help=t("help.format", formats=", ".join(formats)))]


def epilog(*paragraphs: str) -> str:
    """A command's epilog: its examples, then the exit codes.

    The example command lines stay as they are in every language; only the words
    around them come from the catalogue.
    """
    return "\n\n".join((t("help.examples"), *paragraphs, EXIT_CODES_HELP))


def choose(value: str, known: Sequence[str], option: str, message: str = "cli.bad_format") -> str:
    """`value` when it is one of `known`; otherwise the one-line usage error, in the user's language."""
    if value not in known:
        raise fail(message, name=value, known=", ".join(known)).at(source=option)
    return value


def boundary(command: Command) -> Command:
    """Turn whatever a command raises into one line on stderr and a documented exit code.

    The command must take `lang` and `debug` keyword arguments (the Lang and Debug options).
    """

    @functools.wraps(command)
    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return _reported(command, args, kwargs)
        except typer.Exit:
            raise
        except Exception as error:  # anything else is our bug, not the user's (even one in reporting an error)
            if kwargs.get("debug"):
                traceback.print_exc()
            say(t("cli.internal", error=f"{type(error).__name__}: {error}"))
            raise typer.Exit(ExitCode.INTERNAL) from None

    return run  # type: ignore[return-value]


def _reported(command: Callable[..., Any], args: tuple, kwargs: dict[str, Any]) -> Any:
    """Run `command`, turning the user's mistakes, Ctrl-C and a closed pipe into exit codes."""
    try:
        set_language(kwargs.get("lang"))  # an unknown --lang is reported like any bad input
        return command(*args, **kwargs)
    except AttnError as error:
        say(describe(error))
        raise typer.Exit(ExitCode.BAD_INPUT) from None
    except KeyboardInterrupt:
        say(t("cli.interrupted"))
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    except BrokenPipeError:
        silence_stdout()
        raise typer.Exit(ExitCode.OK) from None


def describe(error: AttnError) -> str:
    """`file:line: field: message`, leaving out what is not known."""
    where = error.where
    place = ":".join(str(part) for part in (where.source, where.line) if part is not None)
    parts = [part for part in (place, where.field, t(error.key, **error.params)) if part]
    return ": ".join(parts)


def say(line: str) -> None:
    """One line on stderr, prefixed with the program's name.

    Control characters (a newline or an escape sequence inside a field name, a token,
    an expression) are shown escaped: the message stays one line, and a hostile file
    cannot send commands to the terminal.
    """
    with contextlib.suppress(OSError):
        print(f"attncli: {line.translate(_ESCAPED)}", file=sys.stderr)


_ESCAPED = {
    code: ascii(chr(code))[1:-1] for code in (*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029)
}  # C0, DEL, C1, and the Unicode line and paragraph separators


def _version(value: bool) -> None:
    if value:
        print(f"attncli {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help=t("help.version"))
    ] = None,
) -> None:
    """The options of attncli itself; its help is the app's, which adds the exit codes."""
