"""`attncli compute`: the whole calculation of a problem, step by step."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from attncli.cli.app import Debug, Lang, NoColor, Output, Precision, app, boundary, choose, epilog, format_option
from attncli.cli.output import FILE_WIDTH, print_human, print_lines, stdout_is_terminal, write
from attncli.errors import fail, listed
from attncli.i18n import t
from attncli.render import BINARY_FORMATS, DOCUMENT_FORMATS, HUMAN_FORMATS, MAX_DOCUMENT_CELLS
from attncli.render.layout import Line, fit

if TYPE_CHECKING:
    from attncli.core import Steps
    from attncli.probes import Intervention, Norms

FORMATS = HUMAN_FORMATS + DOCUMENT_FORMATS
Format = format_option(FORMATS)
DTYPES = ("float64", "float32")
EXAMPLES = epilog(
    "  attncli compute samples/bank.yaml",
    '  attncli compute --tokens fisherman,net,bank --query-tokens bank --queries "sqrt(2), 0" '
    '--keys "2,0; 1,1; 0,1" --values "2,0; 0,2; 1,1"',
    "  attncli compute samples/storm_causal.yaml --follow bank --precision 6",
    "  cat problem.yaml | attncli compute - --format json",
    "  attncli compute samples/bank.yaml --norms --ablate net --weights permute:3",
    "  attncli compute samples/storm_causal.yaml --heatmap --svg storm.svg",
    "  attncli compute --queries @q.npy --keys @k.npy --values @v.npy --dtype float32 --format npy -o out.npy",
)


@app.command(help=t("help.compute"), epilog=EXAMPLES)
@boundary
def compute(
    file: Annotated[Optional[str], typer.Argument(help=t("help.compute.file"))] = None,
    tokens: Annotated[Optional[str], typer.Option(help=t("help.compute.tokens"))] = None,
    query_tokens: Annotated[Optional[str], typer.Option(help=t("help.compute.query_tokens"))] = None,
    queries: Annotated[Optional[str], typer.Option(help=t("help.compute.queries"))] = None,
    keys: Annotated[Optional[str], typer.Option(help=t("help.compute.keys"))] = None,
    values: Annotated[Optional[str], typer.Option(help=t("help.compute.values"))] = None,
    scores: Annotated[Optional[str], typer.Option(help=t("help.compute.scores"))] = None,
    mask: Annotated[Optional[str], typer.Option(help=t("help.compute.mask"))] = None,
    score: Annotated[Optional[str], typer.Option(help=t("help.score"))] = None,
    scale: Annotated[Optional[str], typer.Option(help=t("help.compute.scale"))] = None,
    follow: Annotated[Optional[list[str]], typer.Option(help=t("help.compute.follow"))] = None,
    precision: Precision = 4,
    format: Format = "rich",
    output: Output = None,
    no_color: NoColor = False,
    dtype: Annotated[str, typer.Option(help=t("help.compute.dtype", dtypes=", ".join(DTYPES)))] = "float64",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=t("help.compute.quiet"))] = False,
    heatmap: Annotated[bool, typer.Option("--heatmap", help=t("help.compute.heatmap"))] = False,
    norms: Annotated[bool, typer.Option("--norms", help=t("help.compute.norms"))] = False,
    ablate: Annotated[Optional[list[str]], typer.Option(help=t("help.compute.ablate"))] = None,
    ablate_head: Annotated[Optional[list[int]], typer.Option(help=t("help.compute.ablate_head"))] = None,
    weights: Annotated[Optional[list[str]], typer.Option(help=t("help.compute.weights"))] = None,
    svg: Annotated[Optional[Path], typer.Option(help=t("help.compute.svg"))] = None,
    html: Annotated[Optional[Path], typer.Option(help=t("help.compute.html"))] = None,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    choose(format, FORMATS, "--format")
    choose(dtype, DTYPES, "--dtype", "cli.bad_dtype")
    if format in BINARY_FORMATS and output is None and not quiet and stdout_is_terminal():
        raise fail("cli.binary_to_terminal", format=format).at(source="--format")
    options = {
        "tokens": tokens,
        "query_tokens": query_tokens,
        "queries": queries,
        "keys": keys,
        "values": values,
        "scores": scores,
        "mask": mask,
        "score": score,
        "scale": scale,
    }
    flags = {name: value for name, value in options.items() if value is not None}
    if file is None and not flags:
        raise fail("cli.no_input")
    analysing = norms or bool(ablate or ablate_head or weights)
    if analysing and format in DOCUMENT_FORMATS and format != "json":
        raise fail("analysis.needs_human_or_json", format=format)
    from attncli import pipeline, render

    parsed = pipeline.load(file, flags, dtype=dtype)
    cells = len(parsed.heads) * parsed.mask.size
    if format in DOCUMENT_FORMATS and format not in BINARY_FORMATS and cells > MAX_DOCUMENT_CELLS and not quiet:
        raise fail("cli.too_many_cells", format=format, cells=cells, limit=MAX_DOCUMENT_CELLS).at(source="--format")
    for name in follow or ():
        if name not in parsed.query_tokens:
            raise fail("cli.unknown_follow", name=name, names=listed(parsed.query_tokens))
    steps = pipeline.solve(parsed)
    norm_record, interventions = _analyse(steps, norms, ablate, ablate_head, weights) if analysing else (None, ())
    from attncli.render import analysis, human

    followed = tuple(follow) if follow else None
    view = human.View(precision=precision, follow=followed, heatmap=heatmap)

    def build(width: int) -> list[Line]:
        extra = analysis.norms(norm_record, steps, precision, width) if norm_record else []
        extra += analysis.interventions(interventions, steps, precision, width) if interventions else []
        return human.render(steps, view, width, extra)

    if svg or html:
        _save_pictures(build, svg, html, steps.problem.title or "attncli", no_color)
    if quiet and output is None:
        return
    if format in DOCUMENT_FORMATS:
        content = render.document(
            steps, format, precision=precision, follow=followed, norms=norm_record, interventions=interventions
        )
        write(content, output)
    else:
        print_human(build, output, plain=no_color or format == "text")


def _analyse(
    steps: Steps,
    norms: bool,
    ablate: list[str] | None,
    ablate_head: list[int] | None,
    weights: list[str] | None,
) -> tuple[Norms | None, tuple[Intervention, ...]]:
    """The norm-based view and the interventions the options ask for; the original `steps` stay as they are."""
    from attncli import probes

    probes.check_memory(steps, norms, len(ablate or ()) + len(ablate_head or ()) + len(weights or ()))
    interventions = (
        *(probes.ablate(steps, name) for name in ablate or ()),
        *(probes.ablate_head(steps, number) for number in ablate_head or ()),
        *(probes.replace_weights(steps, *probes.parse_weights(text)) for text in weights or ()),
    )
    return (probes.norms(steps) if norms else None), interventions


def _save_pictures(
    build: Callable[[int], list[Line]], svg: Path | None, html: Path | None, title: str, plain: bool
) -> None:
    """Record the human output on a Rich console and save it as SVG and/or HTML, each file written whole."""
    from rich.console import Console

    console = Console(
        record=True, file=io.StringIO(), width=FILE_WIDTH, force_terminal=True, color_system="truecolor", no_color=plain
    )
    print_lines(console, fit(build(FILE_WIDTH), FILE_WIDTH))
    if svg:
        write(console.export_svg(title=title, clear=False), svg)
    if html:
        write(console.export_html(inline_styles=True, clear=False), html)
