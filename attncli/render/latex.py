"""The step-by-step as a LaTeX document (amsmath): every dot product, exponential and weighted sum written out.

The output compiles on its own with pdflatex; a student pastes the body into a
report whose preamble loads amsmath and graphicx and defines `\\attnfit` (the lines
of FIT). Text that is not Latin-1 and has no LaTeX spelling below is replaced by
`?`, so the document always compiles.

Nothing runs off the page: every piece of math carries an estimate of its width
(`_Math`, from Computer Modern's metrics at 10 pt), and equations break between
their sides and terms, wide matrices split into blocks of columns and wide tables
into several tables with the row labels repeated, all aiming at article's text
width. `\\attnfit` is the last resort for what no split can narrow (a single
column wider than the page): it scales such a box down to the line, and says so in
the log.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from attncli.core import Steps
from attncli.errors import printable
from attncli.i18n import t
from attncli.layers import StackSteps
from attncli.render import latex_math, tiles, walk
from attncli.render.numbers import fixed, products

BLANK = r"\rule{0pt}{3.2ex}\hspace{3.6em}"  # a cell of a sheet's grid, room for 0.6652 written by hand
WIDE_BLANK = r"\rule{0pt}{3.2ex}\hspace{16em}"  # room for an output vector
_NUMERIC = re.compile(r"[\[\]()0-9.,\s+\-−e∞⋯⋮]*[0-9∞⋯⋮][\[\]()0-9.,\s+\-−e∞⋯⋮]*")  # a number or vector as written
MIN_MATRIX_COLUMNS = 10  # amsmath's default limit for bmatrix
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


def render(steps: Steps, precision: int = 4, follow: tuple[str, ...] | None = None, heatmap: bool = False) -> str:
    """A complete document; `follow` picks the queries written out in detail (default: all, up to three);
    `heatmap` shows the weight matrix even of one query."""
    view = walk.View(precision, follow, heatmap)
    return _document(walk.items(steps, view), _widest(steps), precision, _backward(steps, view))


def render_stack(
    steps: StackSteps,
    precision: int = 4,
    follow: tuple[str, ...] | None = None,
    layer: int | None = None,
    rollout: np.ndarray | None = None,
    *,
    heatmap: bool = False,
) -> str:
    """A stack's complete document, layer by layer (only `layer` when given), then `rollout` when given."""
    widest = max(_widest(record.attention) for record in steps.layers)
    widest = max(widest, steps.stack.x.shape[1], len(steps.stack.tokens))
    view = walk.View(precision, follow, heatmap)
    return _document(walk.stack_items(steps, view, layer, rollout), widest, precision, _backward(steps, view))


def _backward(steps: Steps | StackSteps, view: walk.View) -> list[str]:
    """Every gradient, when the problem asks for them (attncli.render.backward_show)."""
    if steps.backward is None:
        return []
    from attncli.render import backward_show

    return backward_show.latex(steps, view)


def _document(items: Sequence[walk.Item], widest: int, precision: int, backward: Sequence[str] = ()) -> str:
    lines = [
        *_preamble(widest),
        *(line for item in items for line in _RENDER[type(item)](item, precision)),
        *backward,
        "",
        rf"\emph{{{text(t('writeup.rounding_note', precision=precision))}}}",
        "",
        r"\end{document}",
    ]
    return "\n".join(lines) + "\n"


def sheet(steps: Steps) -> str:
    """The exercise to hand out: what it gives, and ruled grids to fill in for the scores, weights and outputs."""
    paper = walk.sheet(steps)
    lines = _facts(paper.facts, 4)
    lines[1:1] = [rf"\noindent\textbf{{{text(t('writeup.sheet_name'))}}} \rule{{7cm}}{{0.4pt}}", ""]
    lines += [prose(paper.task), "", rf"\subsection*{{{text(t('writeup.sheet_given'))}}}"]
    lines += [line for given in paper.inputs for line in _given(given)]
    for name, givens in paper.heads:
        lines += [rf"\subsubsection*{{{text(name)}}}"] if name is not None else []
        lines += [line for given in givens for line in _given(given)]
    lines += [line for given in paper.shared for line in _given(given)]
    lines.append(rf"\subsection*{{{text(t('writeup.sheet_answers'))}}}")
    queries = [text(name) for name in paper.query_tokens]
    keys = [text(t("render.query")), *(text(name) for name in paper.tokens)]
    outputs = [text(t("render.query")), text(t("render.output"))]
    for name, _ in paper.heads:
        lines += [rf"\subsubsection*{{{text(name)}}}"] if name is not None else []
        for title in ("writeup.sheet_scores", "writeup.sheet_weights"):
            grid = [[query, *[BLANK] * len(paper.tokens)] for query in queries]
            lines += [rf"\paragraph{{{text(t(title))}}}", *_tabular(keys, grid, ruled=True)]
        grid = [[query, WIDE_BLANK] for query in queries]
        lines += [rf"\paragraph{{{text(t('render.outputs_title'))}}}", *_tabular(outputs, grid, ruled=True)]
    if steps.problem.w_o is not None:
        grid = [[query, WIDE_BLANK] for query in queries]
        lines += [rf"\paragraph{{{prose(t('writeup.sheet_final'))}}}", *_tabular(outputs, grid, ruled=True)]
    return "\n".join([*_preamble(_widest(steps)), *lines, "", r"\end{document}"]) + "\n"


def _preamble(widest: int) -> list[str]:
    """The document's start; `widest` is the most columns of any bmatrix (amsmath's MaxMatrixCols)."""
    return [
        f"% {text(t('writeup.latex_comment'))}",
        r"\documentclass{article}",
        r"\usepackage[T1]{fontenc}",
        r"\usepackage[utf8]{inputenc}",
        r"\usepackage{amsmath}",
        r"\usepackage{graphicx}",
        rf"\setcounter{{MaxMatrixCols}}{{{widest}}}",
        *FIT,
        r"\begin{document}",
        "",
    ]


def _given(given: walk.Given) -> list[str]:
    """A given matrix as a table: its rows' names (tokens, or row numbers) and one column per coordinate."""
    headers = [text(given.label), *(f"${j + 1}$" for j in range(len(given.rows[0])))]
    rows = [[text(name), *(f"${_exact(x)}$" for x in row)] for name, row in zip(given.row_names, given.rows)]
    return [rf"\paragraph{{${_weight(given.name).tex}$}}", *_tabular(headers, rows)]


def _exact(written: str) -> str:
    """walk.exact's -√2/2 in math: -\\sqrt{2}/2; a position's 3π/2: 3\\pi/2."""
    return re.sub(r"√(\d+)", r"\\sqrt{\1}", written).replace("π", r"\pi ")


def prose(value: str) -> str:
    """Sentences with formulas in them (a title, notes, a task, the facts, a table's title): d_k = 2, W_O,
    1/√2 and θ_i = base^(−2i/d) in math mode (attncli.render.latex_math), the rest as text."""
    return "".join(f"${piece.text}$" if piece.math else text(piece.text) for piece in latex_math.split(value))


def cell(written: str) -> str:
    """A table cell: a number or a vector as written (−1.4142, [1.2247, -1.2247], ⋯) in math, with real minus
    signs; anything else (a token) as text."""
    return f"${_number(written).tex}$" if _NUMERIC.fullmatch(written) else text(written)


def text(value: str) -> str:
    """Plain text made safe for LaTeX's text mode (control characters escaped as on a terminal, line breaks kept);
    `--format` keeps its two hyphens (TeX would join them)."""
    value = printable(str(value), lines=True)
    return "".join(
        "-{}" if value[i : i + 2] == "--" else _TEXT.get(c, c if ord(c) < 256 else "?") for i, c in enumerate(value)
    )


@dataclass(frozen=True)
class _Math:
    """A piece of math and how wide it comes out, in pt, so that a line can be broken before it is full."""

    tex: str
    width: float
    height: float = LINE  # with the depth: a line, or more for a fraction or a matrix
    sign: str = "+"  # the operator before it as a term of a sum that is not its first: + or -

    def __add__(self, other: _Math) -> _Math:
        return _Math(self.tex + other.tex, self.width + other.width, max(self.height, other.height), self.sign)


Equation = tuple[_Math, Sequence[Sequence[_Math]]]  # left side = side = side ..., each side a sum of terms


def _glyphs(written: str) -> float:
    """The width of plain characters: digits, letters, signs."""
    return sum(
        _GLYPH.get(c, LETTER if c.islower() or c.isdigit() else CAPITAL if c.isupper() else OTHER) for c in written
    )


def _source_width(source: str) -> float:
    """A rough width of a short LaTeX source: each command one letter wide, braces and $ nothing, struts none,
    \\hspace{3em} 30 pt."""
    spaces = sum(float(em) * 10 for em in re.findall(r"\\hspace\{([\d.]+)em\}", source))
    source = re.sub(r"\\hspace\{[^}]*\}|\\rule\{[^}]*\}\{[^}]*\}", "", source)
    return spaces + _glyphs(re.sub(r"[{}$&]", "", re.sub(r"\\[A-Za-z]+\s*|\\.", "a", source)))


def _m(tex: str, width: float | None = None) -> _Math:
    return _Math(tex, _glyphs(tex) if width is None else width)


def _name(token: str) -> _Math:
    """A token as a subscript in math mode."""
    return _Math(rf"\text{{{text(token)}}}", _glyphs(token) * SCRIPT)


def _sub(base: str, index: _Math) -> _Math:
    return _Math(f"{base}_{{{index.tex}}}", _glyphs(base) + index.width)


def _frac(top: _Math, bottom: _Math) -> _Math:
    return _Math(rf"\frac{{{top.tex}}}{{{bottom.tex}}}", max(top.width, bottom.width) + 2.4, top.height + bottom.height)


def _number(written: str) -> _Math:
    """A number (or a gap, ⋯ or ⋮) in math."""
    tex = written.replace("∞", r"\infty").replace("⋯", r"\cdots").replace("⋮", r"\vdots").replace("−", "-")
    return _m(tex, _glyphs(written.replace("∞", "00").replace("⋯", "000")))


def _sum(terms: Sequence[_Math]) -> _Math:
    out = terms[0]
    for term in terms[1:]:
        out = out + _Math(f" {term.sign} ", BIN) + term
    return out


def _bmatrix(rows: Sequence[Sequence[_Math]]) -> _Math:
    columns = [max(row[c].width for row in rows) for c in range(len(rows[0]))]
    cells = r" \\ ".join(" & ".join(cell.tex for cell in row) for row in rows)
    width = sum(columns) + MATRIX_GAP * (len(columns) - 1) + BRACKETS
    return _Math(r"\begin{bmatrix} " + cells + r" \end{bmatrix}", width, LINE * len(rows) + 2)


def _matrix(rows: Sequence[walk.Vec], p: int) -> _Math:
    return _bmatrix([[_number(cell.text(p)) for cell in row.cells] for row in rows])


def _display(equations: Sequence[Equation]) -> list[str]:
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


def _rows(lhs: _Math, sides: Sequence[Sequence[_Math]], budget: float) -> tuple[list[str], float]:
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


def _columns(lhs: _Math, rows: Sequence[walk.Vec], p: int) -> list[Equation]:
    """`lhs = matrix`, or for a matrix wider than the page or taller than MATRIX_ROWS, one equation per block
    of its rows and columns, each named (rows 1–24, columns 1–4)."""
    cells = [[_number(cell.text(p)) for cell in row.cells] for row in rows]
    whole = _bmatrix(cells)
    if lhs.width + REL + whole.width <= PAGE and len(cells) <= MATRIX_ROWS:
        return [(lhs, [[whole]])]
    column = max(cell.width for row in cells for cell in row) + MATRIX_GAP
    count = len(cells[0])
    wide = lhs.width + REL + whole.width > PAGE
    tall = len(cells) > MATRIX_ROWS
    notes = [t("writeup.rows", first=888, last=888)] * tall + [t("writeup.columns", first=88, last=88)] * wide
    label = _glyphs(", ".join(notes)) + QUAD
    per_block = max(1, int((PAGE - lhs.width - label - REL - BRACKETS) // column)) if wide else count
    out = []
    for down in _blocks(len(cells), -(-len(cells) // MATRIX_ROWS)):
        for across in _blocks(count, -(-count // per_block)):
            notes = []
            if tall:
                notes.append(t("writeup.rows", first=down.start + 1, last=down.stop))
            if across != slice(0, count):
                notes.append(t("writeup.columns", first=across.start + 1, last=across.stop))
            name = lhs + _Math(rf"\;\text{{({text(', '.join(notes))})}}", label)
            out.append((name, [[_bmatrix([row[across] for row in cells[down]])]]))
    return out


def _facts(facts: walk.Facts, p: int) -> list[str]:
    lines = [rf"\section*{{{prose(facts.title or t('writeup.title'))}}}"]
    if facts.notes:
        lines += [prose(facts.notes), ""]
    kind = t("render.cross_attention") if facts.cross else t("render.self_attention")
    lines += [
        r"\begin{itemize}",
        rf"\item \textbf{{{text(t('render.tokens'))}:}} {text(', '.join(facts.tokens))}",
        rf"\item \textbf{{{text(t('render.queries'))}:}} {text(', '.join(facts.query_tokens))} ({text(kind)})",
    ]
    return [*lines, *_rules(facts, p), r"\end{itemize}", ""]


def _rules(facts: walk.Facts, p: int) -> list[str]:
    """The score of each head, the mask, the bias and which keys each query may use, as items of a list."""
    lines = []
    for name, formula in facts.scores:
        prefix = f"{text(name)}: " if name is not None else ""
        widths = f"$d_v = {formula.d_v}$" if formula.d_k is None else f"$d_k = {formula.d_k}$, $d_v = {formula.d_v}$"
        words = f"{text(t(f'writeup.score_{formula.kind}'))} ({widths})"  # Formula.words, the widths in math
        lines.append(rf"\item \textbf{{{text(t('render.score'))}:}} {prefix}{words}; ${_formula(formula, p)}$")
    lines.append(rf"\item \textbf{{{text(t('render.mask'))}:}} {prose(facts.mask)}")
    if facts.bias is not None:
        lines.append(rf"\item \textbf{{{text(t('render.bias'))}:}} {prose(facts.bias)}")
    if facts.positions is not None:
        lines.append(rf"\item \textbf{{{text(t('render.positions'))}:}} {prose(facts.positions)}")
    if facts.access is not None:
        lines.append(r"\begin{itemize}")
        for name, row in zip(facts.query_tokens, facts.access):
            keys = ", ".join(key for key, ok in zip(facts.tokens, row) if ok)
            lines.append(rf"\item {text(t('writeup.may_use', query=name, keys=keys))}")
        lines.append(r"\end{itemize}")
    return lines


def _condensed(item: walk.Condensed, p: int) -> list[str]:
    return [rf"\emph{{{text(item.words())}}}", ""]


def _formula(formula: walk.Formula, p: int) -> str:
    """The score formula with this head's scale, in math mode."""
    if formula.kind == "given":
        return r"s_j \text{ " + text(t("writeup.scores_given")) + "}"
    raw = walk.FORMULAS[formula.kind].latex
    if formula.root is not None:
        return rf"s_j = \frac{{{raw}}}{{\sqrt{{{formula.root}}}}}"
    if formula.scale == 1:
        return rf"s_j = {raw}"
    return rf"s_j = {raw} \times {fixed(formula.scale, p)}"


def _grid(grid: walk.Grid) -> list[str]:
    """A walk table as a paragraph and a tabular, every cell in text mode."""
    rows = [[text(row[0]), *(cell(written) for written in row[1:])] for row in grid.rows]
    return [rf"\paragraph{{{prose(grid.title)}}}", *_tabular([prose(h) for h in grid.headers], rows)]


def _encoded(item: walk.Encoded, p: int) -> list[str]:
    return _grid(walk.encoded_grid(item, p))


def _rotary(item: walk.Rotary, p: int) -> list[str]:
    return [line for grid in walk.rotary_grids(item, p) for line in _grid(grid)]


def _head_title(item: walk.HeadTitle, p: int) -> list[str]:
    return [rf"\subsection*{{{text(item.name)}}}"]


def _projected(part: walk.Projected, p: int) -> list[str]:
    """X, then W, then the product: one matrix a row, so that three side by side never overflow."""
    weight = _weight(part.weight)
    product = _m(rf"{part.name} = X\,{weight.tex}", _glyphs(part.name) + REL + _glyphs("X") + weight.width + 1.7)
    return _display([*_columns(_m("X"), part.x, p), *_columns(weight, part.w, p), *_columns(product, part.result, p)])


def _weight(name: str) -> _Math:
    """W_Q as math: W_{Q}."""
    base, _, index = name.partition("_")
    return _sub(base, _m(index, _glyphs(index) * SCRIPT)) if index else _m(base)


def _query(query: walk.Query, p: int) -> list[str]:
    lines = [rf"\subsubsection*{{{text(t('render.query_heading', name=query.name))}}}"]
    if query.q is not None:
        lines += _display(_columns(_m(r"\mathbf{q}", 6.0), (query.q,), p))
    relative = walk.relative_grid(query, p)
    lines += _scores(query, p) + ([] if relative is None else _grid(relative))
    return lines + _softmax(query, p) + _mix(query, p)


def _scores(query: walk.Query, p: int) -> list[str]:
    formula = query.formula
    masked = _Math(rf"-\infty \quad \text{{({text(t('render.masked'))})}}", 24 + _glyphs(t("render.masked")))
    equations: list[Equation] = []
    for key in query.keys:
        s = _sub("s", _name(key.key))
        value = _number(key.score.text(p) if key.biased is None else key.biased.scaled.text(p))
        if not key.allowed:
            equations.append((s, [[masked]]))
            continue
        if key.compatibility is None:
            equations.append((s, [[value]]))
        elif formula.root is not None:
            root = _m(rf"\sqrt{{{formula.root}}}", _glyphs(str(formula.root)) + 8.4)
            equations.append((s, [*([_frac(c, root)] for c in _chain(key.compatibility, p)), [value]]))
        elif formula.scale == 1:
            equations.append((s, [[c] for c in _chain(key.compatibility, p)]))
        else:
            scale = _number(fixed(formula.scale, p))
            scaled = (
                _Math(rf"\left({c.tex}\right) \times ", c.width + 7.8 + BIN) + scale
                for c in _chain(key.compatibility, p)
            )
            equations.append((s, [*([c] for c in scaled), [value]]))
        if key.biased is not None:  # the bias, added before softmax
            b = _sub("b", _name(key.key))
            bias = _number(f"({key.biased.bias.text(p)})")
            equations.append((s + _Math(" + ", BIN) + b, [[value, bias], [_number(key.score.text(p))]]))
    heading = rf"\paragraph{{{text(t('writeup.step_scores'))}}} ${_formula(formula, p)}$"
    return [heading, *_display(equations)]


def _chain(written: walk.Arithmetic, p: int) -> list[_Math]:
    """A compatibility before the scale as a chain of equal expressions, ending with its value."""
    value = _number(written.value.text(p))
    match written:
        case walk.Terms(pairs=pairs):
            terms = [
                replace(_number(term.first) + _Math(r" \times ", BIN) + _number(term.second), sign=term.sign or "+")
                for term in products((a.text(p), b.text(p)) for a, b in pairs)
            ]
            return [_sum([replace(term, sign="-" if term.sign == "−" else term.sign) for term in terms]), value]
        case walk.Cosine(dot=dot, norms=(left, right)):
            norms = _number(left.text(p)) + _Math(r" \times ", BIN) + _number(right.text(p))
            return [_frac(_number(dot.text(p)), norms), value]
        case walk.Additive(hidden=hidden):
            return [_Math(r"\mathbf{v}\cdot", 8.6) + _matrix((hidden,), p), value]
    return [value]


def _softmax(query: walk.Query, p: int) -> list[str]:
    shift = "" if query.shift.value == 0 else f" - {query.shift.text(p)}"
    shift_width = _glyphs(shift) * SCRIPT
    biased = walk.exponent(query) != "s"

    def power(index: str) -> str:
        """s_j, or s_j + b_j with a bias: what is exponentiated (a longer index in braces)."""
        sub = index if len(index) == 1 else f"{{{index}}}"
        return f"s_{sub} + b_{sub}" if biased else f"s_{sub}"

    bias_width = (4 * SCRIPT * 3.4) if biased else 0.0  # " + b_j" in the exponent
    kept = [key for key in query.keys if key.allowed]
    total = _number(query.total.text(p))
    powers = [
        _Math(rf"e^{{{key.score.text(p)}{shift}}}", 4.7 + _glyphs(key.score.text(p)) * SCRIPT + shift_width)
        for key in kept
    ]
    lhs = _Math(rf"\sum_j e^{{{power('j')}{shift}}}", 18 + shift_width + bias_width)
    equations: list[Equation] = [(lhs, [powers, [_number(key.exp.text(p)) for key in kept], [total]])]
    masked = _Math(rf"0 \quad \text{{({text(t('render.masked'))})}}", 15 + _glyphs(t("render.masked")))
    for key in query.keys:
        alpha = _sub(r"\alpha", _name(key.key))
        if key.allowed:
            power_j = _Math(
                rf"e^{{{power(_name(key.key).tex)}{shift}}}",
                4.7 + 3.4 + _name(key.key).width * SCRIPT * (2 if biased else 1) + shift_width + bias_width,
            )
            sides = [[_frac(power_j, total)], [_frac(_number(key.exp.text(p)), total)], [_number(key.weight.text(p))]]
            equations.append((alpha, sides))
        else:
            equations.append((alpha, [[masked]]))
    heading = (
        rf"\paragraph{{{text(t('writeup.step_softmax'))}}} "
        rf"$\alpha_j = e^{{{power('j')}{shift}}} \big/ \sum_i e^{{{power('i')}{shift}}}$"
    )
    rows = [
        [text(key.key), *(cell(number.text(p)) for number in (key.score, key.exp, key.weight))]
        if key.allowed
        else [text(key.key), r"$-\infty$", "$0$", "$0$"]
        for key in query.keys
    ]
    rows.append([text(t("render.sum")), "", cell(query.total.text(p)), cell(query.weight_sum.text(p))])
    score = walk.exponent(query)
    headers = [text(t("render.key")), f"${score}$", rf"$e^{{{score}{shift}}}$", text(t("render.weight"))]
    return [heading, *_display(equations), *_tabular(headers, rows)]


def _mix(query: walk.Query, p: int) -> list[str]:
    terms = [
        _number(key.weight.text(p)) + _Math(r"\,", 1.7) + _matrix((key.value,), p) for key in query.keys if key.allowed
    ]
    z = _Math(rf"\mathbf{{z}}_{{{_name(query.name).tex}}}", 5.6 + _name(query.name).width)
    heading = rf"\paragraph{{{text(t('writeup.step_output'))}}} $\mathbf{{z}} = \sum_j \alpha_j\,\mathbf{{v}}_j$"
    output = _columns(z, (query.output,), p)
    equations = [(z, [terms, [output[0][1][0][0]]])] if len(output) == 1 else [(z, [terms]), *output]
    return [heading, *_display(equations)]


def worked(shown: tiles.Worked) -> list[str]:
    """A table of worked numbers (attncli.render.tiles), its formulas displayed; one too wide for the line is scaled."""
    headers = [text(header) if isinstance(header, str) else f"${header.latex}$" for header in shown.headers]
    rows = [[cell(written) for written in row] for row in (*shown.rows, *([shown.footer] if shown.footer else []))]
    lines = [
        rf"\paragraph{{{text(shown.words)}}}",
        rf"\[\attnfit{{${shown.formula.latex}$}}\]",
        *_tabular(headers, rows),
    ]
    return [*lines, *(rf"{text(words)} \[\attnfit{{${formula.latex}$}}\]" for words, formula in shown.closing)]


def _matrix_item(item: walk.WeightMatrix, p: int) -> list[str]:
    rows = [[text(name), *("$\\cdot$" if w is None else cell(w.text(p)) for w in row)] for name, row in item.weights]
    outputs = [[text(name), *(cell(number.text(p)) for number in out.cells)] for name, out in item.outputs]
    shown, gap = walk.shown_of(int(item.head.output.shape[1]), item.outputs[0][1].gap is not None)
    coordinates = [f"$z_{{{j + 1}}}$" for j in shown]
    if gap is not None:
        coordinates.insert(gap, r"$\cdots$")
    return [
        rf"\paragraph{{{text(t('render.weight_matrix_title'))}}}",
        *_tabular([text(t("render.query")), *(text(name) for name in item.tokens)], rows),
        rf"\paragraph{{{text(t('render.outputs_title'))}}}",
        *_tabular([text(t("render.query")), *coordinates], outputs),
    ]


def _combination(item: walk.Combination, p: int) -> list[str]:
    concat = _m(r"\mathrm{concat}", 29.0)
    lines = [rf"\subsection*{{{text(t('writeup.concat_title'))}}}", *_display(_columns(concat, item.concat, p))]
    if item.w_o is not None:
        w_o = _sub("W", _m("O", 5.3))
        product = concat + _Math(r"\,", 1.7) + w_o
        lines += [
            rf"\subsection*{{{prose(t('render.final_title'))}}}",
            *_display([*_columns(w_o, item.w_o, p), *_columns(product, item.output, p)]),
        ]
    return lines


def _tabular(headers: Sequence[str], rows: Sequence[Sequence[str]], ruled: bool = False) -> list[str]:
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


def _widest(steps: Steps) -> int:
    """The most columns of any bmatrix, for amsmath's MaxMatrixCols."""
    problem = steps.problem
    widths = [steps.output.shape[1], len(problem.tokens)]
    for head in steps.heads:
        matrices = (head.queries, head.keys, head.hidden[0] if head.hidden is not None else None)
        widths += [head.values.shape[1], *(m.shape[-1] for m in matrices if m is not None)]
        widths += [len(part.x[0].values) for part in walk.projections(head, problem)]
    if steps.concat is not None:
        widths.append(steps.concat.shape[1])
    return max(MIN_MATRIX_COLUMNS, *widths)


def _stack_facts(facts: walk.StackFacts, p: int) -> list[str]:
    lines = [rf"\section*{{{prose(facts.title or t('writeup.title'))}}}"]
    if facts.notes:
        lines += [prose(facts.notes), ""]
    lines += [
        r"\begin{itemize}",
        rf"\item \textbf{{{text(t('render.tokens'))}:}} {text(', '.join(facts.tokens))}",
        rf"\item \textbf{{{text(t('render.stack_width'))}:}} ${facts.d}$",
        r"\end{itemize}",
        rf"\paragraph{{{text(t('render.stack_layers'))}}}",
    ]
    rows = [[str(number), text(name), prose(norm)] for number, (name, norm) in enumerate(facts.layers, 1)]
    return [*lines, *_list(rows), ""]


def _list(rows: Sequence[Sequence[str]]) -> list[str]:
    """Numbered rows as a description list: wide cells of words do not fit a tabular."""
    return [
        r"\begin{description}",
        *(rf"\item[{n}] \textbf{{{name}}}: {words}" for n, name, words in rows),
        r"\end{description}",
    ]


def _layer_title(item: walk.LayerTitle, p: int) -> list[str]:
    title = t("render.layer_title", number=item.number, count=item.count, name=item.name).strip()
    norm = rf"\item \textbf{{{text(t('render.norm_label'))}:}} {prose(item.norm)}"
    return [rf"\subsection*{{{text(title)}}}", r"\begin{itemize}", norm, *_rules(item.facts, p), r"\end{itemize}", ""]


def _stream(item: walk.Stream, p: int) -> list[str]:
    heading = rf"\paragraph{{{text(t(f'render.stream_{item.kind}', formula='').rstrip(': '))}}} ${item.latex}$"
    rows = [[text(token), f"${_matrix((row,), p).tex}$"] for token, row in zip(item.tokens, item.rows)]
    return [heading, *_tabular([text(t("render.token")), f"${item.latex.split(' = ')[0]}$"], rows)]


def _rollout(item: walk.Rollout, p: int) -> list[str]:
    headers = [text(t("render.query")), *(text(name) for name in item.tokens)]
    raw_title = text(t("render.rollout_raw", number=item.last))
    product = rf"$\tilde A_{{{item.last}}}\cdots\tilde A_{{1}}$, $\tilde A = \tfrac12\,\overline{{A}} + \tfrac12 I$"
    flow_title = f"{text(t('render.rollout_name'))} {product}"
    lines = []
    shown = [(raw_title, item.raw)] if item.raw is not None else []
    for title, matrix in (*shown, (flow_title, item.rollout)):
        rows = [[text(name), *(cell(fixed(float(w), p)) for w in row)] for name, row in zip(item.tokens, matrix)]
        lines += [rf"\paragraph{{{title}}}", *_tabular(headers, rows)]
    return [*lines, rf"\emph{{{prose(t('analysis.caution_rollout'))}}}", ""]


_RENDER: dict[type, Callable[[walk.Item, int], list[str]]] = {
    walk.Facts: _facts,
    walk.Condensed: _condensed,
    walk.Encoded: _encoded,
    walk.HeadTitle: _head_title,
    walk.Projected: _projected,
    walk.Rotary: _rotary,
    walk.Query: _query,
    tiles.StableSoftmax: lambda item, p: worked(tiles.table(item, p)),
    tiles.TileTrace: lambda item, p: worked(tiles.table(item, p)),
    walk.WeightMatrix: _matrix_item,
    walk.Combination: _combination,
    walk.StackFacts: _stack_facts,
    walk.LayerTitle: _layer_title,
    walk.Stream: _stream,
    walk.Rollout: _rollout,
}
