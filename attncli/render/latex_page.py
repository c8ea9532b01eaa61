"""LaTeX that fits the page: text made safe, math that knows its width, equations broken where the line ends,
matrices and tables split into blocks that fit.

Every piece of math carries an estimate of its width (`Math`, from Computer Modern's metrics at
10 pt), so that equations break between their sides and terms (`display`), wide matrices split into
blocks of columns (`matrix_equations`) and wide tables into several tables with the row labels
repeated (`tabular`), all aiming at article's text width (PAGE). `\\attnfit` (FIT) is the last resort
for what no split can narrow: it scales such a box down to the line, and says so in the log.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from attncli.errors import printable
from attncli.i18n import t
from attncli.render import latex_math
from attncli.written import Vec

_NUMERIC = re.compile(r"[\[\]()0-9.,\s+\-−e∞⋯⋮×=]*[0-9∞⋯⋮][\[\]()0-9.,\s+\-−e∞⋯⋮×=]*")  # a number, a vector, arithmetic
PAGE = 345.0  # pt: article's \\textwidth at 10 pt, the width every split aims below
FIT = (  # \\attnfit{box}: the box as it is, or scaled down to the line's width (and a line in the log) when wider
    r"\newsavebox{\attnbox}",
    r"\newcommand{\attnfit}[1]{\sbox{\attnbox}{#1}\ifdim\wd\attnbox>\linewidth"
    r"\typeout{attncli: scaled down from \the\wd\attnbox\space on line \the\inputlineno}"
    r"\resizebox{\linewidth}{!}{\usebox{\attnbox}}"
    r"\else\usebox{\attnbox}\fi}",
)
# Widths in pt of Computer Modern at 10 pt, rounded up: digits 5, a minus or binary sign 7.78 (math), a space
# between columns of a bmatrix 10, of a tabular 12; the spacing around = and around + or ×.
_GLYPH = {".": 2.8, ",": 2.8, ":": 2.8, ";": 2.8, "'": 2.8, " ": 3.4, "(": 3.9, ")": 3.9, "[": 2.8, "]": 2.8}
_GLYPH |= {"-": 7.8, "+": 7.8, "=": 7.8, "i": 2.8, "j": 3.1, "l": 2.8, "m": 8.4, "w": 7.3, "W": 10.3, "M": 9.2}
LETTER, CAPITAL, OTHER = 5.3, 7.5, 6.0
REL, BIN, QUAD = 13.4, 12.3, 10.0  # = with its spaces, + or × with theirs, \\quad
MATRIX_GAP, BRACKETS, TABLE_GAP = 10.0, 11.0, 12.0
SCRIPT = 0.7  # sub- and superscripts are set at 7 pt
LINE, JOT = 12.0, 3.0  # a row of a matrix or of an aligned display, and the space amsmath adds between rows
DISPLAY_HEIGHT = 250.0  # pt: displays are cut into several below this (a display never breaks across pages)
MATRIX_ROWS = 24  # rows of a matrix shown at once; a taller one is split into blocks of rows
_TEXT = {
    "\\": r"\textbackslash{}",
    "{": r"\{",
    "}": r"\}",
    "$": r"\$",
    "&": r"\&",
    "#": r"\#",
    "_": r"\_",
    "%": r"\%",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "·": r"$\cdot$",
    "×": r"$\times$",
    "√": r"$\surd$",
    "−": "$-$",
    "∞": r"$\infty$",
    "‖": r"$\|$",
    "Σ": r"$\Sigma$",
    "…": r"\ldots{}",
    "⋮": r"$\vdots$",
    "⋯": r"$\cdots$",
    "—": "---",
    "–": "--",
    "→": r"$\to$",
    "ε": r"$\varepsilon$",
    "θ": r"$\theta$",
    "\u0303": r"\~{}",  # the combining tilde of q̃ and k̃, RoPE's turned vectors
    "\u0302": r"\^{}",  # the combining circumflex of x̂, a normalised row (the backward pass)
    "ᵀ": r"$^{\top}$",
    "∘": r"$\circ$",
    "σ": r"$\sigma$",
    "∂": r"$\partial$",
    **{chr(0x2080 + digit): f"$_{digit}$" for digit in range(10)},  # X₂, a stream's subscript
    "‘": "`",
    "’": "'",
    "“": "``",
    "”": "''",
}


def prose(value: str) -> str:
    """Sentences with formulas in them (a title, notes, a task, the facts, a table's title): d_k = 2, W_O,
    1/√2 and θ_i = base^(−2i/d) in math mode (attncli.render.latex_math), the rest as text."""
    return "".join(f"${piece.text}$" if piece.math else text(piece.text) for piece in latex_math.split(value))


def cell(written: str) -> str:
    """A table cell: a number or a vector as written (−1.4142, [1.2247, -1.2247], ⋯), or arithmetic on them
    (1×2 − 1×(−1) = 3.0000, the backward pass's), in math with real minus signs; anything else (a token) as text."""
    return f"${number(written).tex}$" if _NUMERIC.fullmatch(written) else text(written)


def text(value: str) -> str:
    """Plain text made safe for LaTeX's text mode (control characters escaped as on a terminal, line breaks kept);
    `--format` keeps its two hyphens (TeX would join them)."""
    value = printable(str(value), lines=True)
    return "".join(
        "-{}" if value[i : i + 2] == "--" else _TEXT.get(c, c if ord(c) < 256 else "?") for i, c in enumerate(value)
    )


@dataclass(frozen=True)
class Math:
    """A piece of math and how wide it comes out, in pt, so that a line can be broken before it is full."""

    tex: str
    width: float
    height: float = LINE  # with the depth: a line, or more for a fraction or a matrix
    sign: str = "+"  # the operator before it as a term of a sum that is not its first: + or -

    def __add__(self, other: Math) -> Math:
        return Math(self.tex + other.tex, self.width + other.width, max(self.height, other.height), self.sign)


Equation = tuple[Math, Sequence[Sequence[Math]]]  # left side = side = side ..., each side a sum of terms


def glyphs(written: str) -> float:
    """The width of plain characters: digits, letters, signs."""
    return sum(
        _GLYPH.get(c, LETTER if c.islower() or c.isdigit() else CAPITAL if c.isupper() else OTHER) for c in written
    )


def _source_width(source: str) -> float:
    """A rough width of a short LaTeX source: each command one letter wide, braces and $ nothing, struts none,
    \\hspace{3em} 30 pt."""
    spaces = sum(float(em) * 10 for em in re.findall(r"\\hspace\{([\d.]+)em\}", source))
    source = re.sub(r"\\hspace\{[^}]*\}|\\rule\{[^}]*\}\{[^}]*\}", "", source)
    return spaces + glyphs(re.sub(r"[{}$&]", "", re.sub(r"\\[A-Za-z]+\s*|\\.", "a", source)))


def atom(tex: str, width: float | None = None) -> Math:
    return Math(tex, glyphs(tex) if width is None else width)


def named(token: str) -> Math:
    """A token as a subscript in math mode."""
    return Math(rf"\text{{{text(token)}}}", glyphs(token) * SCRIPT)


def sub(base: str, index: Math) -> Math:
    return Math(f"{base}_{{{index.tex}}}", glyphs(base) + index.width)


def frac(top: Math, bottom: Math) -> Math:
    return Math(rf"\frac{{{top.tex}}}{{{bottom.tex}}}", max(top.width, bottom.width) + 2.4, top.height + bottom.height)


def number(written: str) -> Math:
    """A number (or a gap, ⋯ or ⋮) in math."""
    tex = written.replace("∞", r"\infty").replace("⋯", r"\cdots").replace("⋮", r"\vdots").replace("−", "-")
    tex = tex.replace("×", r" \times ")
    return atom(tex, glyphs(written.replace("∞", "00").replace("⋯", "000")))


def summed(terms: Sequence[Math]) -> Math:
    out = terms[0]
    for term in terms[1:]:
        out = out + Math(f" {term.sign} ", BIN) + term
    return out


def bmatrix(rows: Sequence[Sequence[Math]]) -> Math:
    columns = [max(row[c].width for row in rows) for c in range(len(rows[0]))]
    cells = r" \\ ".join(" & ".join(cell.tex for cell in row) for row in rows)
    width = sum(columns) + MATRIX_GAP * (len(columns) - 1) + BRACKETS
    return Math(r"\begin{bmatrix} " + cells + r" \end{bmatrix}", width, LINE * len(rows) + 2)


def matrix_of(rows: Sequence[Vec], p: int) -> Math:
    return bmatrix([[number(cell.text(p)) for cell in row.cells] for row in rows])


def display(equations: Sequence[Equation]) -> list[str]:
    """Equations aligned at their = signs, each broken into rows where the page would end.

    A side that does not fit after the last one starts a row of its own (`= ...`); a sum that does not
    fit goes on in the next row (`+ ...`). What is still too wide (a single term) is scaled by \\attnfit.
    Equations taller together than DISPLAY_HEIGHT go into several displays, so that pages can break between.
    """
    left = max(lhs.width for lhs, _ in equations)
    budget = PAGE - left - REL
    displays: list[list[str]] = [[]]
    height = 0.0
    for lhs, sides in equations:
        rows, tall = _rows(lhs, sides, budget)
        if displays[-1] and height + tall > DISPLAY_HEIGHT:
            displays.append([])
            height = 0.0
        displays[-1] += rows
        height += tall
    return [
        line
        for rows in displays
        for line in (r"\[\attnfit{$\displaystyle\begin{aligned}", " \\\\\n".join(rows), r"\end{aligned}$}\]")
    ]


def _rows(lhs: Math, sides: Sequence[Sequence[Math]], budget: float) -> tuple[list[str], float]:
    """One equation's rows within `budget` pt right of its = sign, and their height."""
    rows: list[str] = []
    row, used, tall, height = f"{lhs.tex} &= ", 0.0, lhs.height, 0.0
    for k, side in enumerate(sides):
        for i, term in enumerate(side):
            if k == 0 and i == 0:
                row, used, tall = row + term.tex, term.width, max(tall, term.height)
                continue
            sign, width = ("=", REL) if i == 0 else (term.sign, BIN)
            if used + width + term.width <= budget:
                row, used, tall = row + f" {sign} {term.tex}", used + width + term.width, max(tall, term.height)
                continue
            rows.append(row)
            height += tall + JOT
            row, used = ("&= ", 0.0) if i == 0 else (rf"&\quad {sign} ", QUAD + BIN)
            row, used, tall = row + term.tex, used + term.width, term.height
    rows.append(row)
    return rows, height + tall + JOT


def matrix_equations(lhs: Math, rows: Sequence[Vec], p: int) -> list[Equation]:
    """`lhs = matrix`, or for a matrix wider than the page or taller than MATRIX_ROWS, one equation per block
    of its rows and columns, each named (rows 1–24, columns 1–4)."""
    cells = [[number(cell.text(p)) for cell in row.cells] for row in rows]
    whole = bmatrix(cells)
    if lhs.width + REL + whole.width <= PAGE and len(cells) <= MATRIX_ROWS:
        return [(lhs, [[whole]])]
    column = max(cell.width for row in cells for cell in row) + MATRIX_GAP
    count = len(cells[0])
    wide = lhs.width + REL + whole.width > PAGE
    tall = len(cells) > MATRIX_ROWS
    notes = [t("writeup.rows", first=888, last=888)] * tall + [t("writeup.columns", first=88, last=88)] * wide
    label = glyphs(", ".join(notes)) + QUAD
    per_block = max(1, int((PAGE - lhs.width - label - REL - BRACKETS) // column)) if wide else count
    out: list[Equation] = []
    for down in _blocks(len(cells), -(-len(cells) // MATRIX_ROWS)):
        for across in _blocks(count, -(-count // per_block)):
            notes = []
            if tall:
                notes.append(t("writeup.rows", first=down.start + 1, last=down.stop))
            if across != slice(0, count):
                notes.append(t("writeup.columns", first=across.start + 1, last=across.stop))
            name = lhs + Math(rf"\;\text{{({text(', '.join(notes))})}}", label)
            out.append((name, [[bmatrix([row[across] for row in cells[down]])]]))
    return out


def tabular(headers: Sequence[str], rows: Sequence[Sequence[str]], ruled: bool = False) -> list[str]:
    """A table; one wider than the page becomes several, each with some of the columns and the row labels again.

    `ruled`: a grid to write in, every cell boxed.
    """
    widths = [max(_source_width(row[c]) for row in [headers, *rows]) + TABLE_GAP for c in range(len(headers))]
    room = PAGE - widths[0]
    blocks = 1
    while (
        any(sum(widths[1:][block]) > room for block in _blocks(len(headers) - 1, blocks)) and blocks < len(headers) - 1
    ):
        blocks += 1
    out = []
    for block in _blocks(len(headers) - 1, blocks):
        columns = [0, *(c + 1 for c in range(len(headers) - 1)[block])]
        body = [" & ".join(row[c] for c in columns) + r" \\" + (r" \hline" if ruled else "") for row in rows]
        spec = "|l|" + "c|" * (len(columns) - 1) if ruled else "l" + "r" * (len(columns) - 1)
        out += [
            r"\begin{center}",
            rf"\attnfit{{\begin{{tabular}}{{{spec}}}",
            r"\hline",
            " & ".join(headers[c] for c in columns) + r" \\",
            r"\hline",
            *body,
            *([] if ruled else [r"\hline"]),
            r"\end{tabular}}",
            r"\end{center}",
        ]
    return out


def _blocks(count: int, blocks: int) -> list[slice]:
    """`count` columns in `blocks` runs as even as can be."""
    size = -(-count // blocks)
    return [slice(start, min(start + size, count)) for start in range(0, count, size)]
