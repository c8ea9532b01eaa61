"""The backward pass's records (attncli.render.backward_walk), and the terminal's layout of them.

Headings, notes and tables only: the numbers are already written. The terminal lays its tables
out with attncli.render.layout (a table too wide for the screen becomes one block per row);
Markdown and LaTeX lay the same `records` out with the helpers their forward steps use, so both
read alike (render/markdown.py, render/latex.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from attncli.render import backward_walk as walk
from attncli.render.layout import BLANK, Line, line, table

if TYPE_CHECKING:
    from attncli.core import Steps
    from attncli.layers import StackSteps
    from attncli.render.walk import View


def records(steps: Steps | StackSteps, view: View, layer: int | None = None) -> list[walk.Item]:
    """The records of `steps.backward`, for a problem or a stack (its `layer` alone, counted from 1, when given)."""
    from attncli.core import Steps

    return walk.items(steps, view) if isinstance(steps, Steps) else walk.stack_items(steps, view, layer)


def terminal(steps: Steps | StackSteps, view: View, width: int, layer: int | None = None) -> list[Line]:
    """Styled lines for a screen `width` columns wide (formats rich and text); a stack's `layer` alone when given."""
    out: list[Line] = []
    for item in records(steps, view, layer):
        if isinstance(item, walk.Section):
            out.append(line((item.title, "bold underline" if item.level == 1 else "bold reverse")))
        elif isinstance(item, walk.Note):
            out += [line(item.text), BLANK]
        else:
            out += table(item.title, item.headers, item.rows, width, right=item.right)
    return out
