"""Tables that never cut a number: a Rich table when it fits the width, a stacked list when it does not."""

from __future__ import annotations

from collections.abc import Sequence

from rich import box
from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

Cell = str | Text


def table(
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    width: int,
    footer: Sequence[Cell] | None = None,
    right: Sequence[int] = (),
    center: Sequence[int] = (),
) -> RenderableType:
    """`rows` as a table of `headers`; on a narrow screen each row becomes a small block of lines.

    Columns listed in `right` are right-aligned (numbers line up on the decimal point), those in
    `center` centred (marks under a word).
    """
    everything = [list(headers), *rows, *([footer] if footer else [])]
    natural = sum(max(cell_len(_plain(row[c])) for row in everything) + 3 for c in range(len(headers))) + 1
    if natural <= width:
        grid = Table(box=box.SIMPLE_HEAD, show_footer=bool(footer), show_edge=False, pad_edge=False)
        for c, header in enumerate(headers):
            grid.add_column(
                header,
                footer=_text(footer[c]) if footer else "",
                justify="right" if c in right else "center" if c in center else "left",
                no_wrap=True,
                overflow="fold",
            )
        for row in rows:
            grid.add_row(*(_text(cell) for cell in row))
        return Group(Text(title, style="bold"), grid, Text(""))
    lines: list[RenderableType] = [Text(title, style="bold")]
    for row in [*rows, *([footer] if footer else [])]:
        lines.append(Text.assemble(_text(row[0]), style="bold"))
        for header, cell in zip(headers[1:], row[1:]):
            if _plain(cell):
                label = Text(f"{header}: " if header else "", style="dim")  # a bar's column has no header
                lines.append(Text("  ").append_text(label).append_text(_text(cell)))
    return Group(*lines, Text(""))


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else Text(cell, overflow="fold")


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell
