"""`attncli compute`: the whole calculation of a problem, step by step."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

from attncli.cli.common import (
    SCORES,
    Debug,
    Lang,
    NoColor,
    boundary,
    choose,
    command,
    completion,
    epilog,
    format_options,
    located,
)
from attncli.cli.environment import Environment
from attncli.cli.output import check_targets, output_format, print_human, save_pictures, write
from attncli.errors import fail, listed
from attncli.i18n import t
from attncli.render import BINARY_FORMATS, CSV_LAYOUTS, DOCUMENT_FORMATS, HUMAN_FORMATS, refuse, refuse_options

if TYPE_CHECKING:
    import typer  # the annotations' typer.Option is read by attncli.cli.common.boundary, Typer only if needed

    from attncli.core import Steps
    from attncli.probes import Intervention, Norms
    from attncli.problem import Problem, Stack
    from attncli.render.layout import Line

FORMATS = HUMAN_FORMATS + DOCUMENT_FORMATS
DEFAULT_PRECISION = 4
Format, Output = format_options(FORMATS)
DTYPES = ("float64", "float32")
MASKS = ("none", "causal", "causal_lower_right")
LOSSES = ("sum",)  # --loss: a target goes in the file, backward: {loss: {target: MATRIX}}
WEIGHTS = ("uniform", "permute", "permute:")
PICTURES = {"svg": ("--svg", ""), "html": ("--html", ""), "png": ("--figure", ".png"), "pdf": ("--figure", ".pdf")}
EXAMPLES = epilog(
    "  attncli compute samples/bank.yaml",
    '  attncli compute --tokens fisherman,net,bank --query-tokens bank --queries "sqrt(2), 0" '
    '--keys "2,0; 1,1; 0,1" --values "2,0; 0,2; 1,1"',
    "  attncli compute samples/storm_causal.yaml --follow bank --precision 6",
    "  cat problem.yaml | attncli compute - --format json",
    "  attncli compute samples/bank.yaml --norms --ablate net --weights permute:3",
    "  attncli compute samples/storm_causal.yaml --heatmap --svg storm.svg",
    "  attncli compute --queries @q.npy --keys @k.npy --values @v.npy --dtype float32 --format npy -o out.npy",
    "  attncli compute samples/layers.yaml --layer 2 --rollout",
    "  attncli compute samples/bank.yaml --tiles 1",
    "  attncli compute samples/bank.yaml --grad-output 1,0",
)


@command(t("help.compute"), EXAMPLES)
@boundary
def compute(
    env: Environment,
    file: Annotated[Optional[str], typer.Argument(metavar=t("help.metavar.file"), help=t("help.compute.file"))] = None,
    tokens: Annotated[
        Optional[str], typer.Option(metavar=t("help.metavar.tokens"), help=t("help.compute.tokens"))
    ] = None,
    query_tokens: Annotated[
        Optional[str], typer.Option(metavar=t("help.metavar.tokens"), help=t("help.compute.query_tokens"))
    ] = None,
    queries: Annotated[
        Optional[str], typer.Option(metavar=t("help.metavar.rows"), help=t("help.compute.queries"))
    ] = None,
    keys: Annotated[Optional[str], typer.Option(metavar=t("help.metavar.rows"), help=t("help.compute.keys"))] = None,
    values: Annotated[
        Optional[str], typer.Option(metavar=t("help.metavar.rows"), help=t("help.compute.values"))
    ] = None,
    scores: Annotated[
        Optional[str], typer.Option(metavar=t("help.metavar.rows"), help=t("help.compute.scores"))
    ] = None,
    mask: Annotated[
        Optional[str],
        typer.Option(metavar=t("help.metavar.mask"), autocompletion=completion(*MASKS), help=t("help.compute.mask")),
    ] = None,
    score: Annotated[
        Optional[str],
        typer.Option(metavar=t("help.metavar.name"), autocompletion=completion(*SCORES), help=t("help.score")),
    ] = None,
    scale: Annotated[Optional[str], typer.Option(metavar=t("help.metavar.x"), help=t("help.compute.scale"))] = None,
    loss: Annotated[
        Optional[str],
        typer.Option(metavar=t("help.metavar.name"), autocompletion=completion(*LOSSES), help=t("help.compute.loss")),
    ] = None,
    grad_output: Annotated[
        Optional[str], typer.Option(metavar=t("help.metavar.rows"), help=t("help.compute.grad_output"))
    ] = None,
    follow: Annotated[
        Optional[list[str]], typer.Option(metavar=t("help.metavar.token"), help=t("help.compute.follow"))
    ] = None,
    precision: Annotated[
        Optional[int], typer.Option(metavar="N", min=0, max=17, help=t("help.compute.precision"))
    ] = None,
    tiles: Annotated[Optional[int], typer.Option(metavar="B", help=t("help.compute.tiles"))] = None,
    stable: Annotated[bool, typer.Option("--stable", help=t("help.compute.stable"))] = False,
    format: Format = None,
    output: Output = None,
    csv_layout: Annotated[
        str,
        typer.Option(
            "--csv-layout",
            metavar=t("help.metavar.layout"),
            autocompletion=completion(*CSV_LAYOUTS),
            help=t("help.compute.csv_layout"),
        ),
    ] = "long",
    no_color: NoColor = False,
    dtype: Annotated[
        str,
        typer.Option(
            metavar=t("help.metavar.type"),
            autocompletion=completion(*DTYPES),
            help=t("help.compute.dtype", dtypes=", ".join(DTYPES)),
        ),
    ] = "float64",
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=t("help.compute.quiet"))] = False,
    heatmap: Annotated[bool, typer.Option("--heatmap", help=t("help.compute.heatmap"))] = False,
    norms: Annotated[bool, typer.Option("--norms", help=t("help.compute.norms"))] = False,
    ablate: Annotated[
        Optional[list[str]], typer.Option(metavar=t("help.metavar.token"), help=t("help.compute.ablate"))
    ] = None,
    ablate_head: Annotated[Optional[list[int]], typer.Option(help=t("help.compute.ablate_head"))] = None,
    weights: Annotated[
        Optional[list[str]],
        typer.Option(
            metavar=t("help.metavar.how"), autocompletion=completion(*WEIGHTS), help=t("help.compute.weights")
        ),
    ] = None,
    svg: Annotated[Optional[Path], typer.Option(help=t("help.compute.svg"))] = None,
    html: Annotated[Optional[Path], typer.Option(help=t("help.compute.html"))] = None,
    figure: Annotated[Optional[Path], typer.Option(metavar=t("help.metavar.file"), help=t("help.figure"))] = None,
    layer: Annotated[Optional[int], typer.Option(metavar="N", help=t("help.compute.layer"))] = None,
    rollout: Annotated[bool, typer.Option("--rollout", help=t("help.compute.rollout"))] = False,
    lang: Lang = None,
    debug: Debug = False,
) -> None:
    format = choose(output_format(format, output, FORMATS), FORMATS, "--format", elsewhere=PICTURES)
    choose(dtype, DTYPES, "--dtype", "cli.bad_dtype")
    choose(csv_layout, CSV_LAYOUTS, "--csv-layout", "cli.bad_csv_layout")
    if csv_layout != "long" and format not in ("csv", "tsv"):
        raise fail("cli.csv_layout_needs_csv", format=format).at(source="--csv-layout")
    with located("--format"):
        if format in BINARY_FORMATS and output is None and not quiet and env.stdout_is_terminal:
            raise fail("cli.binary_to_terminal", format=format)
        refuse(format, analyses=norms or bool(ablate or ablate_head or weights))
    given = {"tokens": tokens, "query_tokens": query_tokens, "queries": queries, "keys": keys, "values": values}
    given |= {"scores": scores, "mask": mask, "score": score, "scale": scale, "tiles": tiles}
    given |= {"stable": True if stable else None, "grad_output": grad_output, "loss": loss}
    flags = {name: value for name, value in given.items() if value is not None}
    if file is None and not flags:
        raise fail("cli.no_input")
    shaping = {"--follow": bool(follow), "--precision": precision is not None, "--heatmap": heatmap}
    precision = DEFAULT_PRECISION if precision is None else precision
    from attncli import pipeline, render
    from attncli.problem import Stack

    analyses = norms or bool(ablate or ablate_head or weights)
    silent = quiet and output is None
    results_only = render.results_only(format, silent, analyses or bool(svg or html or figure))
    # what a large problem then shows is its summary (and its figure a map): the kernel's budget, as for npy
    summarised = not analyses and (format in HUMAN_FORMATS or silent)
    if figure is not None:  # a wrong suffix is refused before any work; its message names --figure
        from attncli.render.figure import figure_format

        figure_format(figure)
    parsed = pipeline.load(file, flags, dtype=dtype, results_only=results_only or summarised)
    check_targets(("-o", output), ("--svg", svg), ("--html", html), ("--figure", figure))
    with located("--format"):
        refuse(format, problem=None if quiet else parsed)
    for option, picture in (("--svg", svg), ("--html", html)):
        if picture is not None:
            with located(option):
                refuse(option.removeprefix("--"), problem=parsed)
    _check_follow(follow or [], parsed)
    if not (quiet and output is None):  # a format that would ignore an option refuses it
        refuse_options(format, [option for option, given in (*shaping.items(), ("--rollout", rollout)) if given])
    if isinstance(parsed, Stack):
        shape = {"precision": precision, "follow": tuple(follow) if follow else None, "heatmap": heatmap}
        pictures = (svg, html, figure, no_color)
        _stack(env, parsed, format, output, quiet, shape, (layer, rollout, analyses), pictures, csv_layout)
        return
    for option, given in (("--layer", layer is not None), ("--rollout", rollout)):
        if given:
            raise fail("cli.layers_only", option=option)
    if results_only:
        result = pipeline.result(parsed)
        if not (quiet and output is None):
            write(render.npy(result), output, env)
        return
    shape = {"precision": precision, "follow": tuple(follow) if follow else None, "heatmap": heatmap}
    if summarised:
        from attncli.render import summary

        # the summary of a large problem, from one pass of the kernel (gradients need every step)
        if parsed.backward is None and summary.is_large(parsed):
            _summary(env, parsed, shape, output, silent, (svg, html, figure, no_color))
            return
        pipeline.within_budget(parsed)  # loaded on the kernel's budget, it takes every step after all
    steps = pipeline.solve(parsed)
    found, changes = _probe(steps, norms, ablate or [], ablate_head or [], weights or [])
    build = render.human_lines(steps, **shape, norms=found, interventions=changes)
    if svg or html:
        save_pictures(build, svg, html, steps.problem.title or "attncli", no_color, env)
    if figure:
        from attncli.render.figure import compute_figure

        with located("--figure"):
            write(compute_figure(steps, found, figure), figure, env)
    if quiet and output is None:
        return
    if format in DOCUMENT_FORMATS:
        document = render.document(steps, format, **shape, norms=found, interventions=changes, csv_layout=csv_layout)
        write(document, output, env)
    else:
        print_human(build, output, env)


def _summary(
    env: Environment,
    problem: Problem,
    shape: dict,
    output: Path | None,
    silent: bool,
    pictures: tuple[Path | None, Path | None, Path | None, bool],
) -> None:
    """A large problem's summary, its SVG or HTML, and its figure (the same record's finer map): no step kept whole."""
    from attncli.render import summary

    svg, html, figure, no_color = pictures
    fine = None
    if figure is not None:
        from attncli.render import figure as figures

        fine = figures.MAP_SHAPE
    found = summary.overview(problem, shape["follow"], fine)
    if figure is not None:
        with located("--figure"):
            write(figures.overview_figure(found, figure), figure, env)

    def build(width: int) -> list[Line]:
        return summary.render(found, shape["follow"], shape["precision"], width)

    if svg or html:
        save_pictures(build, svg, html, problem.title or "attncli", no_color, env)
    if not silent:
        print_human(build, output, env)


def _check_follow(follow: list[str], parsed: Problem | Stack) -> None:
    from attncli.problem import Stack

    names = parsed.tokens if isinstance(parsed, Stack) else parsed.query_tokens
    for name in follow:
        if name not in names:
            raise fail("cli.unknown_follow", name=name, names=listed(names))


def _stack(
    env: Environment,
    stack: Stack,
    format: str,
    output: Path | None,
    quiet: bool,
    shape: dict,
    asked: tuple[int | None, bool, bool],
    pictures: tuple[Path | None, Path | None, Path | None, bool],
    csv_layout: str,
) -> None:
    """`compute` of stacked layers: the walk layer by layer (or `asked`'s layer alone, and the rollout when asked),
    JSON's `layers`, CSV's rows by layer, the output as npy (each only that layer's, when one is asked for), the
    figure of one layer; `asked`'s last: analyses, which stacks do not take."""
    from attncli import layers, pipeline, render

    layer, rollout, analyses = asked
    svg, html, figure, no_color = pictures
    if analyses:
        raise fail("cli.no_layer_analyses")
    if layer is not None and not 1 <= layer <= len(stack.layers):
        raise fail("cli.bad_layer", number=layer, count=len(stack.layers))
    if figure is not None and layer is None:
        raise fail("cli.figure_needs_layer", count=len(stack.layers)).at(source="--figure")
    if render.results_only(format, quiet and output is None, bool(svg or html or figure)):
        result = pipeline.result(stack if layer is None else stack._replace(layers=stack.layers[:layer]))
        if not (quiet and output is None):
            write(render.npy(result), output, env)
        return
    steps = pipeline.solve(stack)
    flow = layers.rollout(steps.layers[: layer or len(steps.layers)]) if rollout else None
    build = render.stack_lines(steps, **shape, layer=layer, rollout=flow)
    if svg or html:
        save_pictures(build, svg, html, stack.title or "attncli", no_color, env)
    if figure is not None:
        from attncli.render.figure import layer_figure

        with located("--figure"):
            write(layer_figure(steps, layer, flow, figure), figure, env)
    if quiet and output is None:
        return
    if format in DOCUMENT_FORMATS:
        shown = {key: shape[key] for key in ("precision", "follow", "heatmap")} | {"layer": layer, "rollout": flow}
        write(render.stack_document(steps, format, **shown, csv_layout=csv_layout), output, env)
    else:
        print_human(build, output, env)


def _probe(
    steps: Steps, norms: bool, ablate: list[str], ablate_head: list[int], weights: list[str]
) -> tuple[Norms | None, tuple[Intervention, ...]]:
    """The norm-based view and the interventions the options ask for, each error placed at its option.

    The original `steps` stay as they are.
    """
    if not (norms or ablate or ablate_head or weights):
        return None, ()
    from attncli import probes

    probes.check_memory(steps, norms, len(ablate) + len(ablate_head) + len(weights))
    with located("--ablate"):
        removed = [probes.ablate(steps, name) for name in ablate]
    with located("--ablate-head"):
        zeroed = [probes.ablate_head(steps, number) for number in ablate_head]
    with located("--weights"):
        replaced = [probes.replace_weights(steps, *probes.parse_weights(text)) for text in weights]
    return (probes.norms(steps) if norms else None), (*removed, *zeroed, *replaced)
