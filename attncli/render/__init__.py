"""One renderer per output format, each reading the `Steps` record, and what each format can show.

`human_lines` lays out styled lines (formats rich and text); `document` returns
the text or bytes of every other format (npz: a writer that streams it). Renderer modules are imported on demand.
`refuse` says, before anything is computed, when a format cannot show what was
asked: norms and interventions, or more cells than a text format can print.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, BinaryIO

from attncli.errors import fail
from attncli.render.npz import npz

if TYPE_CHECKING:
    import numpy as np

    from attncli.core import Steps
    from attncli.layers import StackSteps
    from attncli.probes import Intervention, Norms
    from attncli.problem import Problem, Stack
    from attncli.render.layout import Line

HUMAN_FORMATS = ("rich", "text")
DOCUMENT_FORMATS = ("json", "csv", "tsv", "npy", "npz", "markdown", "latex")
BINARY_FORMATS = ("npy", "npz")
CSV_LAYOUTS = ("long", "wide")
DELIMITERS = {"csv": ",", "tsv": "\t"}
ANALYSIS_FORMATS = (*HUMAN_FORMATS, "json")  # the formats that show norms and interventions
CONDENSED_FORMATS = ("markdown", "latex")  # write-ups of a large problem show the corners (walk.condensed)
PICTURES = ("svg", "html")  # --svg and --html: the step-by-step view as a picture (`refuse` takes them as formats)
STACK_FORMATS = (
    *HUMAN_FORMATS,
    "json",
    "csv",
    "tsv",
    "npy",
    "markdown",
    "latex",
)  # the formats that show stacked layers
MAX_DOCUMENT_CELLS = 2_000_000  # (query, key) cells over all heads that text formats print, a few at each
WRITTEN_FORMATS = (*HUMAN_FORMATS, *CONDENSED_FORMATS)  # the formats that write numbers for a reader, rounded
# The options that shape what a format shows, and the formats that use each: any other refuses it, rather than
# ignore it (json, csv, npy and npz hold every query and every digit, whatever --follow and --precision say).
SHAPING = {
    "--follow": WRITTEN_FORMATS,
    "--precision": WRITTEN_FORMATS,
    "--heatmap": WRITTEN_FORMATS,
    "--rollout": (*WRITTEN_FORMATS, "json", "csv", "tsv"),
}
# ... that the step-by-step view (rich, text, --svg, --html) and the write-ups lay out cell by cell: 64 heads of
# 64 queries × 16 keys (the most a head shows before it is condensed) take about 2 s as text and 6 s as SVG
MAX_SHOWN_CELLS = 65_536


def refuse(fmt: str, *, analyses: bool = False, problem: Problem | Stack | None = None) -> None:
    """Raise when format `fmt` cannot show norms or interventions (`analyses`), or every cell of `problem`."""
    from attncli.problem import Stack

    if analyses and fmt not in ANALYSIS_FORMATS:
        raise fail("render.no_analyses", format=fmt)
    if isinstance(problem, Stack) and fmt not in STACK_FORMATS:
        raise fail("render.no_layers", format=fmt, formats=", ".join(STACK_FORMATS))
    if problem is None or fmt in BINARY_FORMATS:
        return  # npy holds the output, npz every step
    if fmt in (*HUMAN_FORMATS, *CONDENSED_FORMATS, *PICTURES):  # a large problem condensed, a few cells a head
        shown, limit = cells(problem, shown_only=True), MAX_SHOWN_CELLS
    else:
        shown, limit = cells(problem), MAX_DOCUMENT_CELLS
    if shown > limit:
        raise fail("render.too_many_cells", format=fmt, cells=shown, limit=limit)


def refuse_options(fmt: str, given: Sequence[str]) -> None:
    """Raise for the first of the options `given` (SHAPING's) that format `fmt` would not honour."""
    for option in given:
        if fmt not in SHAPING[option]:
            raise fail("render.option_unused", option=option, format=fmt, formats=", ".join(SHAPING[option]))


def cells(problem: Problem | Stack, shown_only: bool = False) -> int:
    """The (query, key) cells of every head of every layer: what MAX_DOCUMENT_CELLS counts; with `shown_only`
    those of the layers the step-by-step view lays out cell by cell (not condensed): what MAX_SHOWN_CELLS counts."""
    from attncli.problem import Stack
    from attncli.render.walk import condensed

    layers = [layer.attention for layer in problem.layers] if isinstance(problem, Stack) else [problem]
    return sum(len(layer.heads) * layer.mask.size for layer in layers if not (shown_only and condensed(layer)))


def every_number(problem: Problem | Stack) -> str:
    """Where every number of `problem` is to be had, in words: json (or csv) within their limit, else npz where
    every step fits in memory, else the Python API alone. What a condensed output's note recommends."""
    from attncli import pipeline
    from attncli.i18n import t
    from attncli.problem import Stack

    if cells(problem) <= MAX_DOCUMENT_CELLS:
        return t("render.every_json")
    if not isinstance(problem, Stack) and pipeline.every_step_fits(problem):
        return t("render.every_npz")
    return t("render.every_api")


def results_only(fmt: str, silent: bool, pictures_or_analyses: bool) -> bool:
    """Whether the output needs the final result alone, not the steps: `npy`, or nothing shown at all."""
    return not pictures_or_analyses and (silent or fmt == "npy")


def npy(output: np.ndarray) -> Callable[[BinaryIO], None]:
    """The result as a .npy file, written into the stream it is given: never a second copy in memory."""
    import numpy as np

    return lambda stream: np.save(stream, output, allow_pickle=False)


def human_lines(
    steps: Steps,
    *,
    precision: int = 4,
    follow: tuple[str, ...] | None = None,
    heatmap: bool = False,
    norms: Norms | None = None,
    interventions: Sequence[Intervention] = (),
) -> Callable[[int], list[Line]]:
    """The human output (formats rich and text) as a function of the width: the steps, then norms and interventions."""
    from attncli.render import human as terminal
    from attncli.render.walk import View

    view = View(precision=precision, follow=follow, heatmap=heatmap)

    def build(width: int) -> list[Line]:
        extra: list[Line] = []
        if norms or interventions:
            from attncli.render import analysis  # only then: its import is part of every start-up otherwise

            extra += analysis.norms(norms, steps, precision, width) if norms else []
            extra += analysis.interventions(interventions, steps, precision, width) if interventions else []
        return terminal.render(steps, view, width, extra)

    return build


def stack_lines(
    steps: StackSteps,
    *,
    precision: int = 4,
    follow: tuple[str, ...] | None = None,
    heatmap: bool = False,
    layer: int | None = None,
    rollout: np.ndarray | None = None,
) -> Callable[[int], list[Line]]:
    """A stack's human output as a function of the width: layer by layer (only `layer`), then `rollout`."""
    from attncli.render import human as terminal
    from attncli.render.walk import View

    view = View(precision=precision, follow=follow, heatmap=heatmap)
    return lambda width: terminal.render_stack(steps, view, width, layer, rollout)


def stack_document(
    steps: StackSteps,
    fmt: str,
    *,
    precision: int = 4,
    follow: tuple[str, ...] | None = None,
    layer: int | None = None,
    rollout: np.ndarray | None = None,
    csv_layout: str = "long",
    heatmap: bool = False,
) -> str | Callable[[BinaryIO], None]:
    """A stack in format `fmt`, one of STACK_FORMATS but the human ones: every layer, or number `layer` alone
    (and the output, the stream it leaves); `rollout` joins when asked for."""
    if fmt == "json":
        from attncli.render import json_doc

        return json_doc.stack_document(steps, rollout, layer)
    if fmt in ("csv", "tsv"):
        from attncli.render import long_table

        writer = long_table.wide_stack if csv_layout == "wide" else long_table.render_stack
        return writer(steps, DELIMITERS[fmt], layer, rollout)
    if fmt == "npy":
        return npy(steps.output if layer is None else steps.layers[layer - 1].output)
    from attncli.render import latex, markdown

    writer = markdown if fmt == "markdown" else latex
    return writer.render_stack(steps, precision, follow, layer, rollout, heatmap=heatmap)


def document(
    steps: Steps,
    fmt: str,
    *,
    precision: int = 4,
    follow: tuple[str, ...] | None = None,
    norms: Norms | None = None,
    interventions: Sequence[Intervention] = (),
    csv_layout: str = "long",
    heatmap: bool = False,
) -> str | bytes | Callable[[BinaryIO], None]:
    """The whole output in format `fmt`, one of DOCUMENT_FORMATS.

    `precision`, `follow` and `heatmap` shape the write-ups (markdown, latex); `norms` and
    `interventions` join the JSON document when they were asked for; `csv_layout`
    (one of CSV_LAYOUTS) is the shape of csv and tsv.
    """
    if fmt == "json":
        from attncli.render import json_doc

        return json_doc.render(steps, norms, interventions)
    if fmt in ("csv", "tsv"):
        from attncli.render import long_table

        return (long_table.wide if csv_layout == "wide" else long_table.render)(steps, DELIMITERS[fmt])
    if fmt == "npy":
        return npy(steps.output)
    if fmt == "npz":
        return npz(steps)
    if fmt in ("markdown", "latex"):
        from attncli.render import latex, markdown

        return (markdown if fmt == "markdown" else latex).render(steps, precision, follow, heatmap)
    raise ValueError(f"no renderer for {fmt!r}")
