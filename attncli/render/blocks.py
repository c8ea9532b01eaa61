"""A document as a few plain blocks (headings, paragraphs, tables), written as Markdown, HTML or plain text.

Feedback files and the class at a glance are built once as blocks and written in the format asked for, so the
formats cannot say different things. Every text is escaped for its format here, whoever wrote it: a student's
name or number cannot start a heading, close a table, inject HTML or move the terminal's cursor (control
characters are shown as escapes, attncli.errors.printable).
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass

from attncli.errors import printable
from attncli.render.layout import width_of


@dataclass(frozen=True)
class Heading:
    level: int  # 1 or 2
    text: str

    def markdown(self) -> str:
        return f"{'#' * self.level} {_md(self.text)}"

    def html(self) -> str:
        return f"<h{self.level}>{_html(self.text)}</h{self.level}>"

    def text_lines(self) -> str:
        title = one_line(self.text)
        return f"{title}\n{('=' if self.level == 1 else '-') * width_of(title)}"


@dataclass(frozen=True)
class Paragraph:
    text: str

    def markdown(self) -> str:
        return _md(self.text)

    def html(self) -> str:
        return f"<p>{_html(self.text)}</p>"

    def text_lines(self) -> str:
        return one_line(self.text)


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]

    def markdown(self) -> str:
        rows = [[_md(cell, leading=False) for cell in row] for row in (self.header, *self.rows)]
        rows.insert(1, ["---"] * len(self.header))
        return "\n".join("| " + " | ".join(row) + " |" for row in rows)

    def html(self) -> str:
        head = "".join(f"<th>{_html(cell)}</th>" for cell in self.header)
        body = "".join(f"<tr>{''.join(f'<td>{_html(cell)}</td>' for cell in row)}</tr>\n" for row in self.rows)
        return f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{body}</tbody>\n</table>"

    def text_lines(self) -> str:
        """The table's columns aligned, three spaces apart."""
        rows = [[one_line(cell) for cell in row] for row in (self.header, *self.rows)]
        widths = [max(width_of(row[column]) for row in rows) for column in range(len(self.header))]
        return "\n".join("   ".join(c + " " * (w - width_of(c)) for c, w in zip(row, widths)).rstrip() for row in rows)


Block = Heading | Paragraph | Table
_MD_INLINE = re.compile(r"([\\`*_\[\]<>|~&])")  # what means something anywhere in a line of Markdown
_MD_LEADING = re.compile(r"^(\s*|\s*\d+)((?<=\d)[.)](?=\s|$)|(?<!\d)[#+\-=>])")  # at a line's start: a block


def one_line(text: str) -> str:
    """`text` on one line, its control characters escaped (a line break is shown as \\n)."""
    return printable(text)


def markdown(blocks: Sequence[Block]) -> str:
    """The blocks as CommonMark: `#` headings, paragraphs, pipe tables; blank lines between."""
    return "\n\n".join(block.markdown() for block in blocks) + "\n"


def html_blocks(blocks: Sequence[Block]) -> str:
    """The blocks as HTML elements (h1/h2, p, table), every text escaped."""
    return "\n".join(block.html() for block in blocks) + "\n"


def html_document(blocks: Sequence[Block], title: str, language: str) -> str:
    """A whole HTML page of the blocks, in `language` (its lang attribute), UTF-8."""
    return (
        f'<!DOCTYPE html>\n<html lang="{_html(language)}">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{_html(title)}</title>\n</head>\n<body>\n{html_blocks(blocks)}</body>\n</html>\n"
    )


def text(blocks: Sequence[Block]) -> str:
    """The blocks as plain text: headings underlined, tables aligned in columns, control characters escaped."""
    return "\n\n".join(block.text_lines() for block in blocks) + "\n"


def inline_markdown(text: str) -> str:
    """`text` as literal Markdown inside a line (a table cell): what means something anywhere escaped."""
    return _md(text, leading=False)


def _md(text: str, leading: bool = True) -> str:
    """`text` escaped for Markdown; `leading`: also what would start a block (a table cell starts none)."""
    escaped = _MD_INLINE.sub(r"\\\1", one_line(text))
    if not leading:
        return escaped
    return _MD_LEADING.sub(lambda found: found.group(1) + "\\" + found.group(2), escaped, count=1)


def _html(text: str) -> str:
    return html.escape(one_line(text), quote=True)
