"""The Typer application: the commands registered (attncli.cli.common) on one command line, and its help.

Built only when a run needs Typer, with only the command that runs when that is all it
needs: Typer turns the signature of every command it is given into options. The help is
attncli's own plain text (attncli.cli.help), so Typer's rich help is never imported.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperCommand, TyperGroup

from attncli import __version__
from attncli.cli.common import COMMANDS, REGISTERED, Lang
from attncli.cli.ending import ending
from attncli.cli.environment import checked_language
from attncli.errors import ExitCode
from attncli.i18n import LANGUAGE, language_from_environment, language_in_arguments, t

EXAMPLES = "\n".join(  # the top-level help's: one of each thing attncli is for
    (
        "  attncli compute samples/bank.yaml",
        "  attncli compute samples/storm_causal.yaml --heatmap",
        "  attncli generate --seed 7 --answers > exercise-key.yaml",
        "  attncli check --key exercise-key.yaml homework.yaml",
        "  attncli scaling --dk 2,32,512",
        '  attncli softmax "2, 1, 0.1" --target 2 --top-p 0.9',
        "  attncli cost --d-model 4096 --heads 32 --kv-heads 8 --tokens 16384",
    )
)


class _OneLineErrors(TyperGroup):
    """Typer's command group, ending every run through `ending`: usage errors (a bad flag, a missing
    argument) on one line of stderr, in the language of --lang.

    Typer would print them in a framed panel of several lines; every other error of
    attncli is one line, and scripts read the first line of stderr.
    """

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        prog_name = prog_name or "attncli"  # not "python -m attncli": the help and errors name the program
        given = {"complete_var": complete_var, "windows_expand_args": windows_expand_args, **extra}
        if not standalone_mode:
            return super().main(args, prog_name, standalone_mode=False, **given)
        arguments = sys.argv[1:] if args is None else list(args)
        language = LANGUAGE.set(language_in_arguments(arguments) or language_from_environment())
        try:
            code = super().main(arguments, prog_name, standalone_mode=False, **given)
        except BaseException as error:
            code = ending(error, debug="--debug" in arguments)
        finally:
            LANGUAGE.reset(language)
        sys.exit(code if isinstance(code, int) else ExitCode.OK)

    def format_help(self, ctx: Any, formatter: Any) -> None:  # Typer's own copy of click.Context
        from attncli.cli.help import group_help

        commands = [self.commands[name] for name in sorted(self.commands)]
        formatter.write(group_help(ctx, self, commands, EXAMPLES))


class _Helped(TyperCommand):
    """A command whose --help is attncli's own (attncli.cli.help), not Typer's rich panels."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        from attncli.cli.help import command_help

        formatter.write(command_help(ctx, self))


def application(only: str | None = None) -> typer.Typer:
    """The Typer application with every command of COMMANDS, or with `only` that one."""
    for name in COMMANDS if only is None else (only,):
        importlib.import_module(f"attncli.cli.{name}")  # registers its command
    app = typer.Typer(
        cls=_OneLineErrors,
        name="attncli",
        help=t("help.app"),
        invoke_without_command=True,  # bare `attncli` is a request for help: printed on stdout, exit 0
        add_completion=True,
        context_settings={"help_option_names": ["-h", "--help"]},
        pretty_exceptions_enable=False,
    )
    app.callback()(_main)
    for name in COMMANDS if only is None else (only,):
        registered = REGISTERED[name]
        app.command(cls=_Helped, help=registered.help, epilog=registered.epilog)(registered.callback)
    return app


def _version(value: bool) -> None:
    if value:
        print(f"attncli {__version__}")
        raise typer.Exit()


def _main(
    ctx: typer.Context,
    version: Annotated[
        Optional[bool], typer.Option("--version", callback=_version, is_eager=True, help=t("help.version"))
    ] = None,
    lang: Annotated[Optional[str], Lang.__metadata__[0].made(typer)] = None,
) -> None:
    """The options of attncli itself. Run bare, attncli prints its help (clig.dev: no arguments ask for help).

    `--lang` before the command is the command's own, unless the command is given one too;
    with no command it is the language of the help (chosen at launch, checked here).
    """
    if lang is not None and ctx.invoked_subcommand is not None:
        ctx.default_map = {ctx.invoked_subcommand: {"lang": lang}}
    if ctx.invoked_subcommand is None and not ctx.resilient_parsing:
        checked_language(lang)
        typer.echo(ctx.get_help())
