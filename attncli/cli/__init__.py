"""The command line: one module per command, all registered on the app in app.py."""

from attncli.cli import check, compare, compute, generate, scaling  # noqa: F401  (registers the commands)
from attncli.cli.app import app


def main() -> None:
    app()
