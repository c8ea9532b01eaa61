"""`attncli compare`: the same query in two problems, weights and outputs side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from attncli.cli.app import EXIT_CODES_HELP, Debug, Lang, app, boundary
from attncli.cli.output import print_human, write
from attncli.errors import fail

FORMATS = ("rich", "text", "json")
EXAMPLES = (
    "Examples:\n\n"
    "  attncli compare samples/bank.yaml samples/bank_cashier.yaml\n\n"
    "  attncli compare samples/storm_causal.yaml samples/storm_bidirectional.yaml --format json\n\n"
    f"{EXIT_CODES_HELP}"
)


@app.command(epilog=EXAMPLES)
@boundary
def compare(
    a: Annotated[str, typer.Argument(help="First problem file (YAML or JSON); '-' reads standard input.")],
    b: Annotated[str, typer.Argument(help="Second problem file, with the same query token(s).")],
    precision: Annotated[int, typer.Option(min=0, max=17, help="Decimals shown in human output.")] = 4,
    format: Annotated[str, typer.Option("--format", "-f", help=f"Output: {', '.join(FORMATS)}.")] = "rich",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", help="Write to this file, not stdout.")] = None,
    no_color: Annotated[bool, typer.Option("--no-color", help="Plain text without colours.")] = False,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    """Compare two problems that share query tokens: each one's weights, both outputs and their difference."""
    if format not in FORMATS:
        raise fail("cli.bad_format", name=format, known=", ".join(FORMATS)).at(source="--format")
    from attncli import analysis, core, problem, yamldoc
    from attncli.render import analysis as views

    first, second = (
        core.compute(problem.parse(yamldoc.read(name), base=Path(name).parent if name != "-" else Path(".")))
        for name in (a, b)
    )
    record = analysis.compare(first, second)
    if format == "json":
        write(views.compare_document(record), output)
        return
    print_human(lambda width: views.compare(record, precision, width), output, plain=no_color or format == "text")
