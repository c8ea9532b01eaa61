"""`attncli compute`: the whole calculation of a problem, step by step."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NamedTuple, Optional

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
    format_option,
    located,
    output_option,
)
from attncli.cli.environment import Environment
from attncli.cli.lean import argument, option
from attncli.cli.output import check_targets, output_format, print_human, save_pictures, write
from attncli.errors import ExitCode, fail
from attncli.i18n import t
from attncli.render import formats
from attncli.render.formats import CSV_LAYOUTS
from attncli.render.formats import FORMATS as FORMAT_RECORDS

if TYPE_CHECKING:
    from attncli.plan import Plan, Request

FORMATS = formats.offering(formats.STEPS)
Format = Annotated[Optional[str], format_option(FORMATS)]
Output = Annotated[Optional[Path], output_option(FORMATS)]
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


class Options(NamedTuple):
    """The options of `compute`, as the command line gives them (attncli.cli.common.boundary reads them here)."""

    file: Annotated[Optional[str], argument(metavar=t("help.metavar.file"), help=t("help.compute.file"))] = None
    tokens: Annotated[Optional[str], option(metavar=t("help.metavar.tokens"), help=t("help.compute.tokens"))] = None
    query_tokens: Annotated[
        Optional[str], option(metavar=t("help.metavar.tokens"), help=t("help.compute.query_tokens"))
    ] = None
    queries: Annotated[Optional[str], option(metavar=t("help.metavar.rows"), help=t("help.compute.queries"))] = None
    keys: Annotated[Optional[str], option(metavar=t("help.metavar.rows"), help=t("help.compute.keys"))] = None
    values: Annotated[Optional[str], option(metavar=t("help.metavar.rows"), help=t("help.compute.values"))] = None
    scores: Annotated[Optional[str], option(metavar=t("help.metavar.rows"), help=t("help.compute.scores"))] = None
    mask: Annotated[
        Optional[str],
        option(metavar=t("help.metavar.mask"), autocompletion=completion(*MASKS), help=t("help.compute.mask")),
    ] = None
    score: Annotated[
        Optional[str],
        option(metavar=t("help.metavar.name"), autocompletion=completion(*SCORES), help=t("help.score")),
    ] = None
    scale: Annotated[Optional[str], option(metavar=t("help.metavar.x"), help=t("help.compute.scale"))] = None
    loss: Annotated[
        Optional[str],
        option(metavar=t("help.metavar.name"), autocompletion=completion(*LOSSES), help=t("help.compute.loss")),
    ] = None
    grad_output: Annotated[
        Optional[str], option(metavar=t("help.metavar.rows"), help=t("help.compute.grad_output"))
    ] = None
    follow: Annotated[Optional[list[str]], option(metavar=t("help.metavar.token"), help=t("help.compute.follow"))] = (
        None
    )
    precision: Annotated[Optional[int], option(metavar="N", min=0, max=17, help=t("help.compute.precision"))] = None
    tiles: Annotated[Optional[int], option(metavar="B", help=t("help.compute.tiles"))] = None
    stable: Annotated[bool, option("--stable", help=t("help.compute.stable"))] = False
    format: Format = None
    output: Output = None
    csv_layout: Annotated[
        str,
        option(
            "--csv-layout",
            metavar=t("help.metavar.layout"),
            autocompletion=completion(*CSV_LAYOUTS),
            help=t("help.compute.csv_layout"),
        ),
    ] = "long"
    no_color: NoColor = False
    dtype: Annotated[
        str,
        option(
            metavar=t("help.metavar.type"),
            autocompletion=completion(*DTYPES),
            help=t("help.compute.dtype", dtypes=", ".join(DTYPES)),
        ),
    ] = "float64"
    quiet: Annotated[bool, option("--quiet", "-q", help=t("help.compute.quiet"))] = False
    heatmap: Annotated[bool, option("--heatmap", help=t("help.compute.heatmap"))] = False
    norms: Annotated[bool, option("--norms", help=t("help.compute.norms"))] = False
    ablate: Annotated[Optional[list[str]], option(metavar=t("help.metavar.token"), help=t("help.compute.ablate"))] = (
        None
    )
    ablate_head: Annotated[Optional[list[int]], option(help=t("help.compute.ablate_head"))] = None
    weights: Annotated[
        Optional[list[str]],
        option(metavar=t("help.metavar.how"), autocompletion=completion(*WEIGHTS), help=t("help.compute.weights")),
    ] = None
    svg: Annotated[Optional[Path], option(help=t("help.compute.svg"))] = None
    html: Annotated[Optional[Path], option(help=t("help.compute.html"))] = None
    figure: Annotated[Optional[Path], option(metavar=t("help.metavar.file"), help=t("help.figure"))] = None
    layer: Annotated[Optional[int], option(metavar="N", help=t("help.compute.layer"))] = None
    rollout: Annotated[bool, option("--rollout", help=t("help.compute.rollout"))] = False
    lang: Lang = None
    debug: Debug = False


# The fields of a problem the options may give, in the order they are laid over the file.
PROBLEM_FLAGS = ("tokens", "query_tokens", "queries", "keys", "values", "scores", "mask", "score", "scale", "tiles")


@command(t("help.compute"), EXAMPLES)
@boundary
def compute(env: Environment, given: Options) -> ExitCode:
    """Build the library's request from the options, ask it for the plan, and write what the plan holds."""
    from attncli import plan

    request = _request(env, given)
    with located():
        problem = plan.load(request)
        check_targets(("-o", given.output), ("--svg", given.svg), ("--html", given.html), ("--figure", given.figure))
        made = plan.plan(request, problem)
    _write(made, request, given, env)
    return ExitCode.OK


def _request(env: Environment, given: Options) -> Request:
    """The request the options make, once every option the command line alone can judge is checked: the format
    (and -o's suffix), the dtype, the CSV layout, binary output on a terminal, the analyses a format cannot show,
    some input given at all, the figure's suffix. Each error is placed at its option."""
    from attncli.plan import Analyses, Request

    format = choose(output_format(given.format, given.output, FORMATS), FORMATS, "--format", elsewhere=PICTURES)
    choose(given.dtype, DTYPES, "--dtype", "cli.bad_dtype")
    choose(given.csv_layout, CSV_LAYOUTS, "--csv-layout", "cli.bad_csv_layout")
    if given.csv_layout != "long" and not FORMAT_RECORDS[format].delimiter:
        raise fail("cli.csv_layout_needs_csv", format=format).at(source="--csv-layout")
    analyses = Analyses(
        given.norms, tuple(given.ablate or ()), tuple(given.ablate_head or ()), tuple(given.weights or ())
    )
    with located("--format"):
        if FORMAT_RECORDS[format].binary and given.output is None and not given.quiet and env.stdout_is_terminal:
            raise fail("cli.binary_to_terminal", format=format)
        formats.refuse(format, analyses=analyses.asked())
    flags = {name: getattr(given, name) for name in PROBLEM_FLAGS if getattr(given, name) is not None}
    flags |= {"stable": True} if given.stable else {}
    flags |= {name: getattr(given, name) for name in ("grad_output", "loss") if getattr(given, name) is not None}
    if given.file is None and not flags:
        raise fail("cli.no_input")
    if given.figure is not None:  # a wrong suffix is refused before any work; its message names --figure
        from attncli.render.figure import figure_format

        figure_format(given.figure)
    follow = tuple(given.follow) if given.follow else None
    shown = not (given.quiet and given.output is None)
    pictures = tuple(kind for kind, path in (("svg", given.svg), ("html", given.html)) if path is not None)
    return Request(
        given.file, flags, format, given.dtype, given.csv_layout, given.precision, follow, given.heatmap, analyses,
        given.layer, given.rollout, pictures, given.figure, given.quiet, shown,
    )  # fmt: skip


def _write(made: Plan, request: Request, given: Options, env: Environment) -> None:
    """The plan's outputs where the options say: the pictures in --svg and --html, the figure in --figure (a large
    problem's summary draws it first), the output on stdout or in -o."""
    if made.figure_first:
        _figure(made, given, env)
    if made.pictures is not None:
        save_pictures(made.pictures, given.svg, given.html, made.title, given.no_color, env)
    if not made.figure_first:
        _figure(made, given, env)
    if made.output is not None and FORMAT_RECORDS[request.format].human:
        print_human(made.output, given.output, env)  # type: ignore[arg-type]
    elif made.output is not None:
        write(made.output, given.output, env)  # type: ignore[arg-type]


def _figure(made: Plan, given: Options, env: Environment) -> None:
    if made.figure is not None and given.figure is not None:
        with located("--figure"):
            write(made.figure, given.figure, env)
