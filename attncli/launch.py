"""The `attncli` program: the language first, then the command line, every way out through `ending`.

The language is chosen first: the commands build their --help texts as they load.
Nothing heavy is imported here, so that Ctrl-C while the command line loads also
ends with one line.
"""

from __future__ import annotations

import signal
import sys
import warnings

from attncli.cli.ending import ending
from attncli.errors import Terminated


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
