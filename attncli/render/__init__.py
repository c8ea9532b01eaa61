"""One renderer per output format, each reading the `Steps` record (attncli.render.formats: what each can show).

`human_lines` lays out styled lines (formats rich and text); `document` returns
the text or bytes of every other format (npz: a writer that streams it), `stack_document`
those of a stack of layers. Renderer modules are imported on demand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, BinaryIO, NamedTuple, Union

from attncli.render.formats import FORMATS
from attncli.render.npz import npz

if TYPE_CHECKING:
    import numpy as np

    from attncli.core import Steps
    from attncli.layers import StackSteps
    from attncli.probes import Intervention, Norms
    from attncli.render.layout import Line


def npy(output: np.ndarray) -> Stream:
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
            from attncli.render import probes  # only then: its import is part of every start-up otherwise

            extra += probes.norms(norms, steps, precision, width) if norms else []
            extra += probes.interventions(interventions, steps, precision, width) if interventions else []
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


class Shape(NamedTuple):
    """What the reader asked of a document: its decimals, the queries followed, the heatmap, the CSV layout (one of
    formats.CSV_LAYOUTS); a problem's norms and interventions, when asked for; a stack's layer and rollout."""

    precision: int = 4
    follow: tuple[str, ...] | None = None
    heatmap: bool = False
    csv_layout: str = "long"
    norms: Norms | None = None
    interventions: Sequence[Intervention] = ()
    layer: int | None = None  # a stack's layer shown alone (its number from 1), or all of them
    rollout: np.ndarray | None = None  # (S, S) a stack's attention rollout, when asked for


Stream = Callable[[BinaryIO], None]  # writes a large binary output into the stream it is given, piece by piece
Content = Union[str, bytes, Stream]  # a document's text or bytes, or a writer that streams it


def document(steps: Steps, fmt: str, shape: Shape) -> Content:
    """The whole output of `steps` in format `fmt`, one that writes steps (formats.FORMATS) but the human ones.

    `precision`, `follow` and `heatmap` shape the write-ups (markdown, latex); norms and
    interventions join the JSON document when they were asked for; the CSV layout shapes csv and tsv.
    """
    return _DOCUMENTS[fmt](steps, shape, fmt)


def stack_document(steps: StackSteps, fmt: str, shape: Shape) -> Content:
    """A stack in format `fmt`, one that writes stacks but the human ones: every layer, or number `shape.layer`
    alone (and the output, the stream it leaves); the rollout joins when asked for."""
    return _STACK_DOCUMENTS[fmt](steps, shape, fmt)


def _json(steps: Steps, shape: Shape, fmt: str) -> Content:
    from attncli.render import json_doc

    return json_doc.render(steps, shape.norms, shape.interventions)


def _table(steps: Steps, shape: Shape, fmt: str) -> Content:
    from attncli.render import long_table

    return (long_table.wide if shape.csv_layout == "wide" else long_table.render)(steps, FORMATS[fmt].delimiter)


def _writeup(steps: Steps, shape: Shape, fmt: str) -> Content:
    from attncli.render import latex, markdown

    writer = markdown if fmt == "markdown" else latex
    return writer.render(steps, shape.precision, shape.follow, shape.heatmap)


_DOCUMENTS: dict[str, Callable[[Steps, Shape, str], Content]] = {
    "json": _json,
    "csv": _table,
    "tsv": _table,
    "npy": lambda steps, shape, fmt: npy(steps.output),
    "npz": lambda steps, shape, fmt: npz(steps),
    "markdown": _writeup,
    "latex": _writeup,
}


def _stack_json(steps: StackSteps, shape: Shape, fmt: str) -> Content:
    from attncli.render import json_doc

    return json_doc.stack_document(steps, shape.rollout, shape.layer)


def _stack_table(steps: StackSteps, shape: Shape, fmt: str) -> Content:
    from attncli.render import long_table

    writer = long_table.wide_stack if shape.csv_layout == "wide" else long_table.render_stack
    return writer(steps, FORMATS[fmt].delimiter, shape.layer, shape.rollout)


def _stack_writeup(steps: StackSteps, shape: Shape, fmt: str) -> Content:
    from attncli.render import latex, markdown

    writer = markdown if fmt == "markdown" else latex
    return writer.render_stack(steps, shape.precision, shape.follow, shape.layer, shape.rollout, heatmap=shape.heatmap)


_STACK_DOCUMENTS: dict[str, Callable[[StackSteps, Shape, str], Content]] = {
    "json": _stack_json,
    "csv": _stack_table,
    "tsv": _stack_table,
    "npy": lambda steps, shape, fmt: npy(steps.output if shape.layer is None else steps.layers[shape.layer - 1].output),
    "markdown": _stack_writeup,
    "latex": _stack_writeup,
}
