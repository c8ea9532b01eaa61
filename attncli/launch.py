"""The `attncli` program: loads the command line, so that Ctrl-C while it loads also ends with one line.

The language is chosen first: the commands build their --help texts as they load.
"""

import sys


def main() -> None:
    try:
        from attncli.i18n import language_in_arguments, set_language

        set_language(language_in_arguments(sys.argv[1:]))  # before the commands build their --help texts
        from attncli.cli import main as run

        run()
    except KeyboardInterrupt:
        from attncli.errors import ExitCode
        from attncli.i18n import language_in_arguments, set_language, t

        set_language(language_in_arguments(sys.argv[1:]))
        print(f"attncli: {t('cli.interrupted')}", file=sys.stderr)
        sys.exit(ExitCode.INTERRUPTED)
