"""What a calculation run asks for (`Request`), and what answers it (`plan`): every output made, ready to write.

`attncli compute` is one client: it reads its options into a Request, loads the problem on the
budget the outputs need (the final result alone, a large problem's summary, or every step:
`load`), asks for the plan and writes what the plan holds, where its options say. The plan
checks that the format can show what was asked before anything is computed, then solves,
probes and renders. An error names the request's own field (`format`, `figure`, `ablate-head`), never a
command-line flag: the command line places it at its option (attncli.cli.common.located).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from attncli import pipeline, render
from attncli.errors import AttnError, Where, fail, listed
from attncli.problem import Problem, Stack
from attncli.render import formats
from attncli.render.formats import FORMATS

if TYPE_CHECKING:
    from attncli.core import Steps
    from attncli.probes import Intervention, Norms
    from attncli.render.layout import Line

DEFAULT_PRECISION = 4
Build = Callable[[int], "list[Line]"]  # the human output as styled lines for a width


class Analyses(NamedTuple):
    """The norm-based view and the interventions asked for: tokens ablated, heads ablated, weights replaced."""

    norms: bool = False
    ablate: tuple[str, ...] = ()
    ablate_head: tuple[int, ...] = ()
    weights: tuple[str, ...] = ()

    def asked(self) -> bool:
        return self.norms or bool(self.ablate or self.ablate_head or self.weights)


class Request(NamedTuple):
    """A calculation run: its problem, the format and shape of its output, and what else to make of it."""

    source: str | None  # the problem's file ("-": standard input), or None: the problem is all in `flags`
    flags: Mapping[str, object]  # fields laid over the file, spelled as on the command line
    format: str  # one of formats.offering(formats.STEPS)
    dtype: str = "float64"
    csv_layout: str = "long"
    precision: int | None = None  # None: DEFAULT_PRECISION, not asked for (a format without decimals takes it)
    follow: tuple[str, ...] | None = None  # the queries shown in detail
    heatmap: bool = False
    analyses: Analyses = Analyses()
    layer: int | None = None  # a stack's layer shown alone, from 1
    rollout: bool = False  # a stack's attention rollout
    pictures: tuple[str, ...] = ()  # formats.PICTURES the human output is recorded as too (--svg, --html)
    figure: Path | None = None  # a figure's file: its suffix says svg, png or pdf
    quiet: bool = False  # no output but the files asked for
    shown: bool = True  # the output goes somewhere: not quiet, or quiet with a file for it


class Plan(NamedTuple):
    """Every output of a run, made: the output itself (None when not shown; styled lines for the human formats),
    the lines a picture records, the figure's bytes, and the title both take."""

    output: render.Content | Build | None = None
    pictures: Build | None = None
    figure: bytes | None = None
    title: str = "attncli"
    figure_first: bool = False  # a large problem's summary makes its figure before its pictures


def load(request: Request) -> Problem | Stack:
    """The request's problem, loaded on the budget its outputs need: the kernel's when they need the final result
    alone (npy, or nothing shown) or a large problem's summary, every step's otherwise."""
    results_only, summarised = _needs(request)
    return pipeline.load(request.source, request.flags, dtype=request.dtype, results_only=results_only or summarised)


def _needs(request: Request) -> tuple[bool, bool]:
    """Whether the outputs need the final result alone, and whether a large problem's summary would do."""
    fmt = FORMATS[request.format]
    asked = request.analyses.asked()
    results_only = not (asked or request.pictures or request.figure) and (not request.shown or fmt.name == "npy")
    return results_only, not asked and (fmt.human or not request.shown)


def plan(request: Request, parsed: Problem | Stack) -> Plan:
    """The outputs `request` asks for, made from its problem `parsed` (`load`); an AttnError, before any work where
    it can be."""
    results_only, summarised = _needs(request)
    with about("format"):
        formats.refuse(request.format, problem=None if request.quiet else parsed)
    for picture in request.pictures:
        with about(picture):
            formats.refuse_picture(picture, parsed)
    _check_follow(request.follow or (), parsed)
    if request.shown:  # a format that would ignore an option refuses it
        given = {"--follow": bool(request.follow), "--precision": request.precision is not None}
        given |= {"--heatmap": request.heatmap, "--rollout": request.rollout}
        formats.refuse_options(request.format, [option for option, wanted in given.items() if wanted])
    if isinstance(parsed, Stack):
        return _stack(request, parsed)
    for option, wanted in (("--layer", request.layer is not None), ("--rollout", request.rollout)):
        if wanted:
            raise fail("cli.layers_only", option=option)
    if results_only:
        result = pipeline.result(parsed)  # computed, and so checked, whether shown or not
        return Plan(render.npy(result) if request.shown else None)
    if summarised:
        from attncli.render import summary

        if parsed.backward is None and summary.is_large(parsed):  # one pass of the kernel: gradients need every step
            return _summary(request, parsed)
        pipeline.within_budget(parsed)  # loaded on the kernel's budget, it takes every step after all
    return _steps(request, pipeline.solve(parsed))


def _steps(request: Request, steps: Steps) -> Plan:
    """A solved problem's outputs: probed as asked, shown in the request's format, pictured, drawn."""
    found, changes = _probe(steps, request.analyses)
    shape = _shape(request)._replace(norms=found, interventions=changes)
    build = render.human_lines(
        steps, precision=shape.precision, follow=shape.follow, heatmap=shape.heatmap, norms=found, interventions=changes
    )

    def draw(path: Path) -> bytes:
        from attncli.render.figure import compute_figure

        return compute_figure(steps, found, path)

    return _made(request, build, draw, lambda: render.document(steps, request.format, shape), steps.problem.title)


def _summary(request: Request, problem: Problem) -> Plan:
    """A large problem's summary, its picture, and its figure (the same record's finer map): no step kept whole."""
    from attncli.render import summary

    fine = None
    if request.figure is not None:
        from attncli.render import figure as figures

        fine = figures.MAP_SHAPE
    found = summary.overview(problem, request.follow, fine)
    figure = None
    if request.figure is not None:
        with about("figure"):
            figure = figures.overview_figure(found, request.figure)
    precision = _shape(request).precision

    def build(width: int) -> list[Line]:
        return summary.render(found, request.follow, precision, width)

    output = build if request.shown else None
    return Plan(output, build if request.pictures else None, figure, problem.title or "attncli", figure_first=True)


def _stack(request: Request, stack: Stack) -> Plan:
    """A stack's outputs: the walk layer by layer (or the request's layer alone, and the rollout when asked),
    its document, the output as npy (each only that layer's, when one is asked for), the figure of one layer."""
    from attncli import layers

    layer = request.layer
    if request.analyses.asked():
        raise fail("cli.no_layer_analyses")
    if layer is not None and not 1 <= layer <= len(stack.layers):
        raise fail("cli.bad_layer", number=layer, count=len(stack.layers))
    if request.figure is not None and layer is None:
        raise fail("cli.figure_needs_layer", count=len(stack.layers)).at(field="figure")
    if not (request.pictures or request.figure) and (not request.shown or request.format == "npy"):
        result = pipeline.result(stack if layer is None else stack._replace(layers=stack.layers[:layer]))
        return Plan(render.npy(result) if request.shown else None)  # computed, and so checked, whether shown or not
    steps = pipeline.solve(stack)
    flow = layers.rollout(steps.layers[: layer or len(steps.layers)]) if request.rollout else None
    shape = _shape(request)._replace(layer=layer, rollout=flow)
    build = render.stack_lines(
        steps, precision=shape.precision, follow=shape.follow, heatmap=shape.heatmap, layer=layer, rollout=flow
    )

    def draw(path: Path) -> bytes:
        from attncli.render.figure import layer_figure

        assert layer is not None  # a stack's figure without a layer was refused above
        return layer_figure(steps, layer, flow, path)

    return _made(request, build, draw, lambda: render.stack_document(steps, request.format, shape), stack.title)


def _made(
    request: Request,
    build: Build,
    draw: Callable[[Path], bytes],
    document: Callable[[], render.Content],
    title: str | None,
) -> Plan:
    """The outputs of what was solved: the output (the lines `build` lays out, or the `document`), the picture's
    lines, the figure `draw` makes for its file."""
    figure = None
    if request.figure is not None:
        with about("figure"):
            figure = draw(request.figure)
    output = None
    if request.shown:
        output = build if FORMATS[request.format].human else document()
    return Plan(output, build if request.pictures else None, figure, title or "attncli")


def _shape(request: Request) -> render.Shape:
    """What the outputs take of the request: decimals (DEFAULT_PRECISION unless asked), queries followed, the
    heatmap, the CSV layout."""
    precision = DEFAULT_PRECISION if request.precision is None else request.precision
    return render.Shape(precision, request.follow, request.heatmap, request.csv_layout)


def _check_follow(follow: tuple[str, ...], parsed: Problem | Stack) -> None:
    names = parsed.tokens if isinstance(parsed, Stack) else parsed.query_tokens
    for name in follow:
        if name not in names:
            raise fail("cli.unknown_follow", name=name, names=listed(names))


def _probe(steps: Steps, asked: Analyses) -> tuple[Norms | None, tuple[Intervention, ...]]:
    """The norm-based view and the interventions asked for, each error about its own field. `steps` stay as
    they are."""
    if not asked.asked():
        return None, ()
    from attncli import probes

    probes.check_memory(steps, asked.norms, len(asked.ablate) + len(asked.ablate_head) + len(asked.weights))
    with about("ablate"):
        removed = [probes.ablate(steps, name) for name in asked.ablate]
    with about("ablate-head"):
        zeroed = [probes.ablate_head(steps, number) for number in asked.ablate_head]
    with about("weights"):
        replaced = [probes.replace_weights(steps, *probes.parse_weights(text)) for text in asked.weights]
    return (probes.norms(steps) if asked.norms else None), (*removed, *zeroed, *replaced)


@contextlib.contextmanager
def about(field: str) -> Iterator[None]:
    """An AttnError raised inside that no file or option placed yet is about the request's `field`."""
    try:
        yield
    except AttnError as error:
        if error.where.source is None:
            error.where = Where(None, error.where.line, field)
        raise
