"""Where results go: stdout or a file written whole, as Rich on a terminal or plain text elsewhere."""

from __future__ import annotations

import io
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

from attncli.errors import fail

FILE_WIDTH = 100


def write(text: str, output: Path | None) -> None:
    """Write to stdout, or to `output` whole: a temporary file renamed into place."""
    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    temporary = output.with_name(f".{output.name}.attncli-tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, output)
    except OSError as error:
        temporary.unlink(missing_ok=True)
        raise fail("cli.output_failed", path=str(output), reason=error.strerror or str(error)) from None


def print_human(build: Callable[[int], list], output: Path | None, plain: bool) -> None:
    """Print what `build(width)` returns on a Console made for this invocation.

    On a terminal (or with FORCE_COLOR) Rich adds colour; otherwise (a pipe, a
    file, --format text, --no-color, NO_COLOR) the same content goes out as plain
    text with trailing spaces trimmed.
    """
    from rich.console import Console

    wants_colour = sys.stdout.isatty() or bool(os.environ.get("FORCE_COLOR"))
    if output is None and not plain and wants_colour and not os.environ.get("NO_COLOR"):
        console = Console(highlight=False)
        for renderable in build(console.width):
            console.print(renderable)
        return
    width = shutil.get_terminal_size((80, 24)).columns if output is None else FILE_WIDTH
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=False, no_color=True, highlight=False, width=width)
    for renderable in build(width):
        console.print(renderable)
    write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()), output)
