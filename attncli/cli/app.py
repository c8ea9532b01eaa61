"""The Typer application and the boundary every command runs inside.

numpy, PyYAML and Rich are imported inside the commands, so `attncli --help`
and shell completion start without them; the help is attncli's own plain text
(attncli.cli.help), so Typer's rich help is never imported either. Help texts come
from the catalogue when the commands are imported, in the language attncli.launch
has chosen.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Optional, TypeVar

import typer
from typer.core import TyperCommand, TyperGroup

from attncli import __version__
from attncli.cli.environment import Environment
from attncli.errors import AttnError, ExitCode, Where, fail
from attncli.i18n import LANGUAGE, LANGUAGES, language_from_environment, language_in_arguments, t
from attncli.launch import ending

EXIT_CODES_HELP = t("help.exit_codes")
EXAMPLES = "\n".join(  # the top-level help's: one of each thing attncli is for
    (
        "  attncli compute samples/bank.yaml",
        "  attncli compute samples/storm_causal.yaml --heatmap",
        "  attncli generate --seed 7 --answers > exercise-key.yaml",
        "  attncli check --key exercise-key.yaml homework.yaml",
        "  attncli scaling --dk 2,32,512",
    )
)


class _OneLineErrors(TyperGroup):
    """Typer's command group, ending every run through `ending`: usage errors (a bad flag, a missing
    argument) on one line of stderr, in the language of --lang.

    Typer would print them in a framed panel of several lines; every other error of
    attncli is one line, and scripts read the first line of stderr.
    """

    def main(self, args: Sequence[str] | None = None, *rest: Any, standalone_mode: bool = True, **kwargs: Any) -> Any:
        kwargs.setdefault("prog_name", "attncli")  # not "python -m attncli": the help and errors name the program
        if not standalone_mode:
            return super().main(args, *rest, standalone_mode=False, **kwargs)
        arguments = sys.argv[1:] if args is None else list(args)
        language = LANGUAGE.set(language_in_arguments(arguments) or language_from_environment())
        try:
            code = super().main(arguments, *rest, standalone_mode=False, **kwargs)
        except BaseException as error:
            code = ending(error, debug="--debug" in arguments)
        finally:
            LANGUAGE.reset(language)
        sys.exit(code if isinstance(code, int) else ExitCode.OK)

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        from attncli.cli.help import group_help

        commands = [self.commands[name] for name in sorted(self.commands)]
        formatter.write(group_help(ctx, self, commands, EXAMPLES))


class _Helped(TyperCommand):
    """A command whose --help is attncli's own (attncli.cli.help), not Typer's rich panels."""

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:
        from attncli.cli.help import command_help

        formatter.write(command_help(ctx, self))


app = typer.Typer(
    cls=_OneLineErrors,
    name="attncli",
    help=t("help.app"),
    invoke_without_command=True,  # bare `attncli` is a request for help: printed on stdout, exit 0
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
Command = TypeVar("Command", bound=Callable[..., Any])


def command(help: str, examples: str) -> Callable[[Command], Command]:
    """Register a command with its help (one sentence) and the `epilog` of its examples."""
    return app.command(cls=_Helped, help=help, epilog=examples)


def completion(*values: str) -> Callable[[str], list[str]]:
    """Shell completion of an option's value: those of `values` that start with what is typed so far."""

    def complete(incomplete: str) -> list[str]:
        return [value for value in values if value.startswith(incomplete)]

    return complete


SCORES = ("scaled_dot", "dot", "cosine")  # the score functions a command-line option names
Lang = Annotated[
    Optional[str],
    typer.Option(
        "--lang",
        metavar=t("help.metavar.lang"),
        autocompletion=completion(*LANGUAGES),
        help=t("help.lang", languages=", ".join(LANGUAGES)),
    ),
]
Debug = Annotated[bool, typer.Option("--debug", help=t("help.debug"))]
Precision = Annotated[int, typer.Option(min=0, max=17, help=t("help.precision"))]
Output = Annotated[Optional[Path], typer.Option("--output", "-o", help=t("help.output"))]
NoColor = Annotated[bool, typer.Option("--no-color", help=t("help.no_color"))]


def format_option(formats: Sequence[str]) -> Any:
    """The --format option of a command that offers `formats`."""
    return Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            metavar=t("help.metavar.format"),
            autocompletion=completion(*formats),
            help=t("help.format", formats=", ".join(formats)),
        ),
    ]


def epilog(*lines: str, exit_codes: str = EXIT_CODES_HELP) -> str:
    """A command's epilog: its examples (indented command lines, and notes), then its exit codes.

    The help shows the examples before the options and the exit codes last. The example
    command lines stay as they are in every language; only the notes around them come
    from the catalogue.
    """
    return "\n".join(lines) + "\n\n" + exit_codes


def choose(
    value: str,
    known: Sequence[str],
    option: str,
    message: str = "cli.bad_format",
    elsewhere: Mapping[str, tuple[str, str]] = {},
) -> str:
    """`value` when it is one of `known`; otherwise the one-line usage error, in the user's language, with the
    closest of `known` or, for a value another option gives (`-f svg`), that option: `elsewhere[value]` is
    the option and the suffix of its FILE (`("--figure", ".png")`)."""
    if value in known:
        return value
    from attncli.errors import phrase
    from attncli.yamldoc import did_you_mean  # only on this error path

    if value in elsewhere:
        other, suffix = elsewhere[value]
        hint: object = phrase("cli.other_option", option=other, file=t("help.metavar.file") + suffix)
    else:
        hint = did_you_mean(value, known)
    raise fail(message, name=value, known=", ".join(known), hint=hint).at(source=option)


@contextlib.contextmanager
def located(option: str | None = None) -> Iterator[None]:
    """Place an AttnError raised inside at a command-line option: `option`, or the one named like its field.

    The library names its own parameters (`tokens`, `score`) and never a flag; the
    command line knows which flag gave each value.
    """
    try:
        yield
    except AttnError as error:
        where = error.where
        if where.source is None and (option or where.field):
            error.where = Where(option or f"--{where.field}", where.line, where.field if option else None)
        raise


def boundary(command: Command) -> Command:
    """Run `command` with the run's `Environment` as its first argument, and end it through `ending`.

    Typer sees the command's options without that first argument. The command must
    take `lang` and `debug` (the Lang and Debug options); `no_color` and `format`,
    when it has them, decide the colour.
    """
    return _Bounded(command)  # type: ignore[return-value]


class _Bounded:
    """A command inside the boundary; Typer reads its signature only when it builds this very command."""

    def __init__(self, command: Callable[..., Any]) -> None:
        functools.update_wrapper(self, command)
        self._command = command

    @functools.cached_property
    def __signature__(self) -> inspect.Signature:  # evaluating the annotations costs milliseconds per command
        signature = inspect.signature(self._command, eval_str=True)
        return signature.replace(parameters=tuple(signature.parameters.values())[1:])

    def __call__(self, **options: Any) -> Any:
        language = LANGUAGE.set(language_from_environment())  # an unknown --lang is reported in this one
        try:
            plain = options.get("no_color", False) or options.get("format") == "text"
            environment = Environment.of_process(options.get("lang"), plain)
            LANGUAGE.set(environment.language)
            from attncli.cli.output import all_or_nothing

            with all_or_nothing():
                return self._command(environment, **options)
        except BaseException as error:
            raise typer.Exit(ending(error, debug=options.get("debug", False))) from None
        finally:
            LANGUAGE.reset(language)


def _version(value: bool) -> None:
    if value:
        print(f"attncli {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    ctx: typer.Context,
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help=t("help.version"))
    ] = None,
) -> None:
    """The options of attncli itself. Run bare, attncli prints its help (clig.dev: no arguments ask for help)."""
    if ctx.invoked_subcommand is None and not ctx.resilient_parsing:
        typer.echo(ctx.get_help())
