"""`attncli compare`: the same query in two problems, weights and outputs side by side."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli.app import (
    EXIT_CODES_HELP,
    Debug,
    Lang,
    NoColor,
    Output,
    Precision,
    app,
    boundary,
    choose,
    format_option,
)
from attncli.cli.output import print_human, write

FORMATS = ("rich", "text", "json")
Format = format_option(FORMATS)
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
    precision: Precision = 4,
    format: Format = "rich",
    output: Output = None,
    no_color: NoColor = False,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    """Compare two problems that share query tokens: each one's weights, both outputs and their difference."""
    choose(format, FORMATS, "--format")
    from attncli import analysis, core, problem, yamldoc
    from attncli.render import analysis as views

    first, second = (core.compute(problem.parse(yamldoc.read(name), base=problem.base_folder(name))) for name in (a, b))
    record = analysis.compare(first, second)
    if format == "json":
        from attncli.render import json_doc

        write(json_doc.compare_document(record), output)
        return
    print_human(lambda width: views.compare(record, precision, width), output, plain=no_color or format == "text")
