"""`attncli compare`: the same query in two problems, weights and outputs side by side."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from attncli.cli.common import (
    Debug,
    Lang,
    NoColor,
    Precision,
    boundary,
    choose,
    command,
    epilog,
    format_options,
    located,
)
from attncli.cli.environment import Environment
from attncli.cli.output import check_targets, output_format, print_human, write
from attncli.i18n import t

FORMATS = ("rich", "text", "json", "csv", "tsv")
PICTURES = {kind: ("--figure", f".{kind}") for kind in ("svg", "png", "pdf")}
Format, Output = format_options(FORMATS)
EXAMPLES = epilog(
    "  attncli compare samples/bank.yaml samples/bank_cashier.yaml",
    "  attncli compare samples/storm_causal.yaml samples/storm_bidirectional.yaml --format json",
    "  attncli compare samples/bank.yaml samples/bank_cashier.yaml -o compare.csv",
)


@command(t("help.compare"), EXAMPLES)
@boundary
def compare(
    env: Environment,
    a: Annotated[str, typer.Argument(help=t("help.compare.a"))],
    b: Annotated[str, typer.Argument(help=t("help.compare.b"))],
    precision: Precision = 4,
    format: Format = None,
    output: Output = None,
    no_color: NoColor = False,
    figure: Annotated[Optional[Path], typer.Option(metavar=t("help.metavar.file"), help=t("help.figure"))] = None,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    format = choose(output_format(format, output, FORMATS), FORMATS, "--format", elsewhere=PICTURES)
    if figure is not None:  # a wrong suffix is refused before any work; its message names --figure
        from attncli.render.figure import figure_format

        figure_format(figure)
    from attncli import pipeline, probes
    from attncli.render import analysis

    first, second = (pipeline.solve(pipeline.single(pipeline.load(name), "compare")) for name in (a, b))
    check_targets(("-o", output), ("--figure", figure))
    record = probes.compare(first, second)
    if figure:
        from attncli.render.figure import compare_figure

        with located("--figure"):
            write(compare_figure(record, figure), figure, env)
    if format == "json":
        from attncli.render import json_doc

        write(json_doc.compare_document(record), output, env)
        return
    if format in ("csv", "tsv"):
        from attncli.render import long_table

        write(long_table.compare_table(record, "," if format == "csv" else "\t"), output, env)
        return
    print_human(lambda width: analysis.compare(record, precision, width), output, env)
