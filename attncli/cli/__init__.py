"""The command line: one module per command (attncli.cli.common.COMMANDS), each registering its command there.

`app`, the Typer application with every command (what the tests and a program embedding
attncli run), is built when it is first asked for: importing this package imports no Typer.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any


def main() -> None:
    """Run attncli, building no more of the command line than the run needs.

    A command line in the plain form (`attncli compute samples/bank.yaml -f json`: the
    arguments, and options written `--option VALUE` or `--flag`) runs without Typer, which
    is a good part of a start-up: the options are read from their declarations (`lean`).
    Any other command line of a command builds Typer with that command alone, since Typer
    turns the signature of every command it has into options at each start; `attncli
    --help`, shell completion and an unknown command see them all.
    """
    from attncli.cli.common import COMMANDS, REGISTERED

    arguments = sys.argv[1:]
    name = arguments[0] if arguments else ""
    lean = name in COMMANDS and "_ATTNCLI_COMPLETE" not in os.environ
    if lean:
        importlib.import_module(f"attncli.cli.{name}")
        command = REGISTERED[name].callback
        options = command.lean(arguments[1:])
        if options is not None:
            sys.exit(command.run(options))
    from attncli.cli.application import application

    application(only=name if lean else None)()


def __getattr__(name: str) -> Any:
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from attncli.cli.application import application

    globals()["app"] = built = application()
    return built
