"""The command line: one module per command, all registered on the app in app.py."""

from attncli.cli import compute  # noqa: F401  (registers the command)
from attncli.cli.app import app


def main() -> None:
    app()
