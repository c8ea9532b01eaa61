"""`attncli scaling`: why scores are divided by √d_k, shown with random vectors (the article's note 1)."""

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
from attncli.errors import fail

FORMATS = ("rich", "text", "json")
Format = format_option(FORMATS)
EXAMPLES = (
    "Examples:\n\n"
    "  attncli scaling\n\n"
    "  attncli scaling --dk 2,32,512 --keys 8 --samples 5000 --seed 1\n\n"
    "  attncli scaling --format json\n\n"
    f"{EXIT_CODES_HELP}"
)


@app.command(epilog=EXAMPLES)
@boundary
def scaling(
    dk: Annotated[str, typer.Option("--dk", help="Values of d_k, comma-separated.")] = "1,4,16,64,256",
    keys: Annotated[int, typer.Option(min=1, max=4096, help="Keys each query is compared with.")] = 16,
    samples: Annotated[int, typer.Option(min=2, max=10_000_000, help="Random queries per d_k.")] = 2000,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the random numbers: the same seed, the same table.")] = 0,
    precision: Precision = 4,
    format: Format = "rich",
    output: Output = None,
    no_color: NoColor = False,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    """Monte Carlo with q, k ~ N(0, 1): var(q·k) ≈ d_k, var(q·k/√d_k) ≈ 1, and how softmax saturates unscaled."""
    choose(format, FORMATS, "--format")
    from attncli import analysis
    from attncli.render import analysis as views

    parts = [part.strip() for part in dk.split(",")]
    if not all(part.isdigit() for part in parts):
        raise fail("analysis.bad_dk", got=dk, limit=analysis.MAX_DK)
    record = analysis.scaling([int(part) for part in parts], keys=keys, samples=samples, seed=seed)
    if format == "json":
        from attncli.render import json_doc

        write(json_doc.scaling_document(record), output)
        return
    print_human(lambda width: views.scaling(record, precision, width), output, plain=no_color or format == "text")
