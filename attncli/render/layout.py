"""Styled lines, and tables laid out so that no number is ever cut.

Human output is a list of `Line`s: runs of text, each with a Rich style name.
Tables become aligned lines when they fit the width and a stacked list of
`header: value` lines when they do not; `fit` wraps long lines between words.
The same lines are printed through Rich on a terminal (colour) or joined as
plain text elsewhere — so plain output never needs to import Rich, which
would cost a noticeable part of the start-up time.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

Span = tuple[str, str]  # text, style ("" for none; any Rich style such as "bold" or "black on #c6dbef")
Line = tuple[Span, ...]
Cell = str | Span | Line  # a table cell: plain, one style, or several (a check mark in colour after a number)
GAP = "   "  # between the columns of a table
TAB = 8  # a tab stops where a terminal's would
_RUNS = re.compile(r"\s+|\S+")
_EIGHTHS = " ▏▎▍▌▋▊▉"  # a column filled to 0/8 .. 7/8 from the left


def line(*parts: str | Span) -> Line:
    """A line from plain strings and (text, style) pairs; empty parts are left out."""
    return tuple(span for span in ((part, "") if isinstance(part, str) else part for part in parts) if span[0])


BLANK: Line = ()


def plain(content: Cell) -> str:
    """The text of a line or a cell, without its styles."""
    return "".join(text for text, _ in _spans(content))


def _spans(cell: Cell) -> Line:
    """Any cell (or line) as a line: a lone span is told from a line by its text coming first."""
    if isinstance(cell, str):
        return ((cell, ""),)
    if cell and isinstance(cell[0], str):
        return (cell,)
    return cell


def width_of(text: str) -> int:
    """Terminal columns `text` takes: wide East Asian characters count two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.category(c) in ("Mn", "Me", "Cf") else 2 if unicodedata.east_asian_width(c) in "WF" else 1
        for c in text
    )


def table(
    title: str,
    headers: Sequence[str],
    rows: Sequence[Sequence[Cell]],
    width: int,
    footer: Sequence[Cell] | None = None,
    right: Sequence[int] = (),
    center: Sequence[int] = (),
) -> list[Line]:
    """`rows` under `headers`; when that is wider than `width`, each row becomes a small block of lines.

    Columns in `right` are right-aligned (numbers line up on the decimal point), those in `center`
    centred (marks under a word). The footer (sums, totals) follows a rule. Ends with a blank line.
    """
    everything = [list(headers), *rows, *([footer] if footer else [])]
    widths = [max(width_of(plain(row[c])) for row in everything) for c in range(len(headers))]
    total = sum(widths) + len(GAP) * (len(widths) - 1)
    if total > width:
        return _stacked(title, headers, rows, footer)
    rule = line(("─" * total, "dim"))
    out = [line((title, "bold")), _row([(h, "bold") for h in headers], widths, right, center), rule]
    out += [_row(row, widths, right, center) for row in rows]
    if footer:
        out += [rule, _row(footer, widths, right, center)]
    return [*out, BLANK]


def _row(cells: Sequence[Cell], widths: Sequence[int], right: Sequence[int], center: Sequence[int]) -> Line:
    spans: list[Span] = []
    last = len(widths) - 1
    for c, (cell, size) in enumerate(zip(cells, widths)):
        room = size - width_of(plain(cell))
        before = room if c in right else room // 2 if c in center else 0
        after = "" if c == last else " " * (room - before) + GAP
        spans += [(" " * before, ""), *_spans(cell), (after, "")]
    return _trimmed(spans)


def _stacked(
    title: str, headers: Sequence[str], rows: Sequence[Sequence[Cell]], footer: Sequence[Cell] | None
) -> list[Line]:
    """Each row as its first cell in bold, then an indented `header: value` line per non-empty cell."""
    out = [line((title, "bold"))]
    for row in [*rows, *([footer] if footer else [])]:
        out.append(line(*((text, f"bold {style}".strip()) for text, style in _spans(row[0]))))
        for header, cell in zip(headers[1:], row[1:]):
            if plain(cell):
                label = f"{header}: " if header else ""  # a bar's column has no header
                out.append(line("  ", (label, "dim"), *_spans(cell)))
    return [*out, BLANK]


def _trimmed(spans: list[Span]) -> Line:
    """Without the padding at the end of a row (an empty last cell too), so that no line ends in spaces."""
    kept = [span for span in spans if span[0]]
    while kept and not kept[-1][1] and not kept[-1][0].strip():
        kept.pop()
    if kept and not kept[-1][1]:
        kept[-1] = (kept[-1][0].rstrip(), "")
    return tuple(kept)


def fit(lines: Iterable[Line], width: int) -> list[Line]:
    """Every line within `width` columns: cut at its newlines, tabs expanded, wrapped between words.

    A word longer than a line is folded; a wrapped line keeps its indentation when that is narrow.
    """
    width = max(width, 1)
    out: list[Line] = []
    for current in lines:
        for piece in _physical(current):
            out += _wrapped(piece, width) if width_of(plain(piece)) > width else [piece]
    return out


def _physical(current: Line) -> list[Line]:
    """`current` cut where its text has newlines (notes of several lines), tabs turned into spaces."""
    if not any("\n" in text or "\t" in text for text, _ in current):
        return [current]
    rows: list[list[Span]] = [[]]
    column = 0
    for text, style in current:
        for number, part in enumerate(text.split("\n")):
            if number:
                rows.append([])
                column = 0
            chunks = part.split("\t")
            expanded = chunks[0]
            for chunk in chunks[1:]:
                expanded += " " * (TAB - (column + width_of(expanded)) % TAB) + chunk
            rows[-1].append((expanded, style))
            column += width_of(expanded)
    return [line(*row) for row in rows]


def _wrapped(current: Line, width: int) -> list[Line]:
    """A line too long for `width`, as several, broken where it has spaces."""
    runs = _runs(current)
    indent: list[Span] = []
    if runs and runs[0][0]:  # the line's own indentation, repeated on its continuation lines
        leading = runs.pop(0)[1]
        indent = leading if _columns(leading) < width // 2 else []
    start = _columns(indent)
    out: list[Line] = []
    row, used, pending = list(indent), start, []
    for spaces, spans in runs:
        if spaces:
            pending = spans if len(row) > len(indent) else []  # spaces begin no line
            continue
        size, gap = _columns(spans), _columns(pending)
        if pending and used + gap + size > width:
            out.append(tuple(row))
            row, used, pending, gap = list(indent), start, [], 0
        row += pending
        used += gap
        pending = []
        while used + size > width:  # a word wider than the line: fold it
            head, spans = _split(spans, width - used)
            out.append((*row, *head))
            row, used = list(indent), start
            size = _columns(spans)
        row += spans
        used += size
    out.append(tuple(row))
    return out


def _columns(spans: Sequence[Span]) -> int:
    return sum(width_of(text) for text, _ in spans)


def _runs(current: Line) -> list[tuple[bool, list[Span]]]:
    """The line as alternating runs of spaces (True) and words; a word may have several styles ("1.7" + "↷")."""
    runs: list[tuple[bool, list[Span]]] = []
    for text, style in current:
        for run in _RUNS.findall(text):
            spaces = run.isspace()
            if runs and runs[-1][0] == spaces:
                runs[-1][1].append((run, style))
            else:
                runs.append((spaces, [(run, style)]))
    return runs


def _split(spans: list[Span], room: int) -> tuple[list[Span], list[Span]]:
    """The first `room` columns of a word, and the rest; at least one character, so that folding ends."""
    head: list[Span] = []
    used = 0
    for index, (text, style) in enumerate(spans):
        for cut, char in enumerate(text):
            size = width_of(char)
            if used + size > room and (head or cut):
                return [*head, (text[:cut], style)] if cut else head, [(text[cut:], style), *spans[index + 1 :]]
            used += size
        head.append((text, style))
    return head, []


def bar(fraction: float, width: int) -> str:
    """`fraction` (0 to 1) of `width` columns as a bar of block characters, to an eighth of a column."""
    eighths = round(fraction * width * 8)
    return "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")


def to_text(lines: Iterable[Line]) -> str:
    """Plain text: one line each, no trailing spaces.

    A heading in reverse video (" head 1 ") is padded so that its block of colour
    frames the words; without the colour the padding is a stray space, and goes.
    """
    return "".join(
        "".join(text.strip(" ") if "reverse" in style else text for text, style in current).rstrip() + "\n"
        for current in lines
    )
