"""`attncli scaling`: why scores are divided by √d_k, shown with random vectors (the article's note 1)."""

from __future__ import annotations

from typing import Annotated

import typer

from attncli.cli import progress
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

FORMATS = ("rich", "text", "json")
Format, Output = format_options(FORMATS)
EXAMPLES = epilog(
    "  attncli scaling",
    "  attncli scaling --dk 2,32,512 --keys 8 --samples 5000 --seed 1",
    "  attncli scaling --format json",
)


@command(t("help.scaling"), EXAMPLES)
@boundary
def scaling(
    env: Environment,
    dk: Annotated[
        str, typer.Option("--dk", metavar=t("help.metavar.list"), help=t("help.scaling.dk"))
    ] = "1,4,16,64,256",
    keys: Annotated[int, typer.Option(min=1, max=4096, help=t("help.scaling.keys"))] = 16,
    samples: Annotated[int, typer.Option(min=2, max=10_000_000, help=t("help.scaling.samples"))] = 2000,
    seed: Annotated[int, typer.Option(min=0, help=t("help.scaling.seed"))] = 0,
    precision: Precision = 4,
    format: Format = None,
    output: Output = None,
    no_color: NoColor = False,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    format = choose(output_format(format, output, FORMATS), FORMATS, "--format")
    check_targets(("-o", output))
    from attncli import probes
    from attncli.render import analysis

    with located("--dk"):
        dims = probes.parse_dims(dk)
    with progress.bar(probes.scaling_work(dims, keys, samples), t("analysis.scaling_progress"), env) as advance:
        record = probes.scaling(dims, keys=keys, samples=samples, seed=seed, progress=advance)
    if format == "json":
        from attncli.render import json_doc

        write(json_doc.scaling_document(record), output, env)
        return
    print_human(lambda width: analysis.scaling(record, precision, width), output, env)
