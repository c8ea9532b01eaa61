"""The command line: one module per command, all registered on the app in app.py."""

import copy
import os
import sys

from typer.models import CommandInfo

from attncli.cli import check, compare, compute, generate, practice, scaling, template  # noqa: F401  (registers the commands)
from attncli.cli.app import app


def main() -> None:
    """Run attncli, building only the command named on the command line.

    Typer turns the signature of every registered command into options at each
    start; the one being run is all that a start-up needs. `attncli --help` and
    shell completion still see every command.
    """
    wanted = sys.argv[1] if len(sys.argv) > 1 else ""
    only = [info for info in app.registered_commands if _name(info) == wanted]
    if only and "_ATTNCLI_COMPLETE" not in os.environ:
        single = copy.copy(app)
        single.registered_commands = only
        single()
    else:
        app()


def _name(info: CommandInfo) -> str:
    return info.name or info.callback.__name__.replace("_", "-")
