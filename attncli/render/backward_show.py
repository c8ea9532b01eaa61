"""The backward pass's records (attncli.render.backward_walk) laid out by each human format.

Headings, notes and tables only: the numbers are already written. The terminal lays its tables
out with attncli.render.layout (a table too wide for the screen becomes one block per row),
Markdown and LaTeX with the same helpers their forward steps use, so both read alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attncli.render import backward_walk as walk
from attncli.render.layout import BLANK, Line, line, table

if TYPE_CHECKING:
    from attncli.core import Steps
    from attncli.layers import StackSteps
    from attncli.render.walk import View


def records(steps: Steps | StackSteps, view: View) -> list[walk.Item]:
    """The records of `steps.backward`, for a problem or a stack."""
    from attncli.core import Steps

    return walk.items(steps, view) if isinstance(steps, Steps) else walk.stack_items(steps, view)


def terminal(steps: Steps | StackSteps, view: View, width: int) -> list[Line]:
    """Styled lines for a screen `width` columns wide (formats rich and text)."""
    out: list[Line] = []
    for item in records(steps, view):
        if isinstance(item, walk.Section):
            out.append(line((item.title, "bold underline" if item.level == 1 else "bold reverse")))
        elif isinstance(item, walk.Note):
            out += [line(item.text), BLANK]
        else:
            out += table(item.title, item.headers, item.rows, width, right=item.right)
    return out


def markdown(steps: Steps | StackSteps, view: View) -> list[str]:
    """Markdown lines: a heading per section, the notes as paragraphs, pipe tables."""
    from attncli.render.markdown import _escape, _grid

    out: list[str] = []
    for item in records(steps, view):
        if isinstance(item, walk.Section):
            out += [f"{'#' * (item.level + 1)} {_escape(item.title)}", ""]
        elif isinstance(item, walk.Note):
            out += [_escape(item.text), ""]
        else:
            out += _grid(item)
    return out


def latex(steps: Steps | StackSteps, view: View) -> list[str]:
    """LaTeX lines: sections, notes as paragraphs of text, tables as tabulars (their text made safe)."""
    from attncli.render.latex import _grid, prose

    out: list[str] = []
    for item in records(steps, view):
        if isinstance(item, walk.Section):
            out.append(rf"\{'sub' * (item.level - 1)}section*{{{prose(item.title)}}}")
        elif isinstance(item, walk.Note):
            out += [prose(item.text), ""]
        else:
            out += _grid(item)
    return out
