"""The `attncli` program: loads the command line, so that Ctrl-C while it loads also ends with one line."""

import sys


def main() -> None:
    try:
        from attncli.cli import main as run

        run()
    except KeyboardInterrupt:
        from attncli.errors import ExitCode
        from attncli.i18n import set_language, t

        set_language(None)
        print(f"attncli: {t('cli.interrupted')}", file=sys.stderr)
        sys.exit(ExitCode.INTERRUPTED)
