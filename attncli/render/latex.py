"""The step-by-step as a LaTeX document (amsmath): every dot product, exponential and weighted sum written out.

The output compiles on its own with pdflatex; a student pastes the body into a
report whose preamble loads amsmath and graphicx and defines `\\attnfit` (the lines
of FIT). Text that is not Latin-1 and has no LaTeX spelling is replaced by `?`, so
the document always compiles. Nothing runs off the page: every equation, matrix and
table goes through attncli.render.latex_page, which breaks and splits them at
article's text width.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from attncli.core import Steps
from attncli.i18n import t
from attncli.layers import StackSteps
from attncli.render import sheets, stack_walk, tiles, walk
from attncli.render.latex_page import (
    BIN,
    FIT,
    REL,
    SCRIPT,
    Equation,
    Math,
    atom,
    cell,
    display,
    frac,
    glyphs,
    matrix_equations,
    matrix_of,
    named,
    number,
    prose,
    sub,
    summed,
    tabular,
    text,
)
from attncli.written import Additive, Arithmetic, Cosine, Terms, fixed, products, shown_of

BLANK = r"\rule{0pt}{3.2ex}\hspace{3.6em}"  # a cell of a sheet's grid, room for 0.6652 written by hand
WIDE_BLANK = r"\rule{0pt}{3.2ex}\hspace{16em}"  # room for an output vector
MIN_MATRIX_COLUMNS = 10  # amsmath's default limit for bmatrix


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
    backward = _backward(steps, view, layer)
    return _document(stack_walk.stack_items(steps, view, layer, rollout), widest, precision, backward)


def _backward(steps: Steps | StackSteps, view: walk.View, layer: int | None = None) -> list[str]:
    """Every gradient, when the problem asks for them (attncli.render.backward_show's records): sections, notes
    as paragraphs of text, tables as tabulars (their text made safe); a stack's `layer`'s alone when given."""
    if steps.backward is None:
        return []
    from attncli.render import backward_show, backward_walk

    out: list[str] = []
    for item in backward_show.records(steps, view, layer):
        if isinstance(item, backward_walk.Section):
            out.append(rf"\{'sub' * (item.level - 1)}section*{{{prose(item.title)}}}")
        elif isinstance(item, backward_walk.Note):
            out += [prose(item.text), ""]
        else:
            out += _grid(item)
    return out


def _document(items: Sequence[stack_walk.Item], widest: int, precision: int, backward: Sequence[str] = ()) -> str:
    lines = [
        *preamble(widest),
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
    paper = sheets.sheet(steps)
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
            lines += [rf"\paragraph{{{text(t(title))}}}", *tabular(keys, grid, ruled=True)]
        grid = [[query, WIDE_BLANK] for query in queries]
        lines += [rf"\paragraph{{{text(t('render.outputs_title'))}}}", *tabular(outputs, grid, ruled=True)]
    if steps.problem.w_o is not None:
        grid = [[query, WIDE_BLANK] for query in queries]
        lines += [rf"\paragraph{{{prose(t('writeup.sheet_final'))}}}", *tabular(outputs, grid, ruled=True)]
    return "\n".join([*preamble(_widest(steps)), *lines, "", r"\end{document}"]) + "\n"


def preamble(widest: int) -> list[str]:
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


def _given(given: sheets.Given) -> list[str]:
    """A given matrix as a table: its rows' names (tokens, or row numbers) and one column per coordinate."""
    headers = [text(given.label), *(f"${j + 1}$" for j in range(len(given.rows[0])))]
    rows = [[text(name), *(f"${_exact(x)}$" for x in row)] for name, row in zip(given.row_names, given.rows)]
    return [rf"\paragraph{{${_weight(given.name).tex}$}}", *tabular(headers, rows)]


def _exact(written: str) -> str:
    """sheets.exact's -√2/2 in math: -\\sqrt{2}/2; a position's 3π/2: 3\\pi/2."""
    return re.sub(r"√(\d+)", r"\\sqrt{\1}", written).replace("π", r"\pi ")


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
    return [rf"\paragraph{{{prose(grid.title)}}}", *tabular([prose(h) for h in grid.headers], rows)]


def _encoded(item: walk.Encoded, p: int) -> list[str]:
    return _grid(walk.encoded_grid(item, p))


def _rotary(item: walk.Rotary, p: int) -> list[str]:
    return [line for grid in walk.rotary_grids(item, p) for line in _grid(grid)]


def _head_title(item: walk.HeadTitle, p: int) -> list[str]:
    return [rf"\subsection*{{{text(item.name)}}}"]


def _projected(part: walk.Projected, p: int) -> list[str]:
    """X, then W, then the product: one matrix a row, so that three side by side never overflow."""
    weight = _weight(part.weight)
    product = atom(rf"{part.name} = X\,{weight.tex}", glyphs(part.name) + REL + glyphs("X") + weight.width + 1.7)
    return display(
        [
            *matrix_equations(atom("X"), part.x, p),
            *matrix_equations(weight, part.w, p),
            *matrix_equations(product, part.result, p),
        ]
    )


def _weight(name: str) -> Math:
    """W_Q as math: W_{Q}."""
    base, _, index = name.partition("_")
    return sub(base, atom(index, glyphs(index) * SCRIPT)) if index else atom(base)


def _query(query: walk.Query, p: int) -> list[str]:
    lines = [rf"\subsubsection*{{{text(t('render.query_heading', name=query.name))}}}"]
    if query.q is not None:
        lines += display(matrix_equations(atom(r"\mathbf{q}", 6.0), (query.q,), p))
    relative = walk.relative_grid(query, p)
    lines += _scores(query, p) + ([] if relative is None else _grid(relative))
    return lines + _softmax(query, p) + _mix(query, p)


def _scores(query: walk.Query, p: int) -> list[str]:
    formula = query.formula
    masked = Math(rf"-\infty \quad \text{{({text(t('render.masked'))})}}", 24 + glyphs(t("render.masked")))
    equations: list[Equation] = []
    for key in query.keys:
        s = sub("s", named(key.key))
        value = number(key.score.text(p) if key.biased is None else key.biased.scaled.text(p))
        if not key.allowed:
            equations.append((s, [[masked]]))
            continue
        if key.dot is None:
            equations.append((s, [[value]]))
        elif formula.root is not None:
            root = atom(rf"\sqrt{{{formula.root}}}", glyphs(str(formula.root)) + 8.4)
            equations.append((s, [*([frac(c, root)] for c in _chain(key.dot, p)), [value]]))
        elif formula.scale == 1:
            equations.append((s, [[c] for c in _chain(key.dot, p)]))
        else:
            scale = number(fixed(formula.scale, p))
            scaled = (Math(rf"\left({c.tex}\right) \times ", c.width + 7.8 + BIN) + scale for c in _chain(key.dot, p))
            equations.append((s, [*([c] for c in scaled), [value]]))
        if key.biased is not None:  # the bias, added before softmax
            b = sub("b", named(key.key))
            bias = number(f"({key.biased.bias.text(p)})")
            equations.append((s + Math(" + ", BIN) + b, [[value, bias], [number(key.score.text(p))]]))
    heading = rf"\paragraph{{{text(t('writeup.step_scores'))}}} ${_formula(formula, p)}$"
    return [heading, *display(equations)]


def _chain(written: Arithmetic, p: int) -> list[Math]:
    """A compatibility before the scale as a chain of equal expressions, ending with its value."""
    value = number(written.value.text(p))
    match written:
        case Terms(pairs=pairs):
            terms = [
                replace(number(term.first) + Math(r" \times ", BIN) + number(term.second), sign=term.sign or "+")
                for term in products((a.text(p), b.text(p)) for a, b in pairs)
            ]
            return [summed([replace(term, sign="-" if term.sign == "−" else term.sign) for term in terms]), value]
        case Cosine(dot=dot, norms=(left, right)):
            norms = number(left.text(p)) + Math(r" \times ", BIN) + number(right.text(p))
            return [frac(number(dot.text(p)), norms), value]
        case Additive(hidden=hidden):
            return [Math(r"\mathbf{v}\cdot", 8.6) + matrix_of((hidden,), p), value]
    return [value]


def _softmax(query: walk.Query, p: int) -> list[str]:
    shift = "" if query.shift.value == 0 else f" - {query.shift.text(p)}"
    shift_width = glyphs(shift) * SCRIPT
    biased = walk.exponent(query) != "s"

    def power(index: str) -> str:
        """s_j, or s_j + b_j with a bias: what is exponentiated (a longer index in braces)."""
        sub = index if len(index) == 1 else f"{{{index}}}"
        return f"s_{sub} + b_{sub}" if biased else f"s_{sub}"

    bias_width = (4 * SCRIPT * 3.4) if biased else 0.0  # " + b_j" in the exponent
    kept = [key for key in query.keys if key.allowed]
    total = number(query.total.text(p))
    powers = [
        Math(rf"e^{{{key.score.text(p)}{shift}}}", 4.7 + glyphs(key.score.text(p)) * SCRIPT + shift_width)
        for key in kept
    ]
    lhs = Math(rf"\sum_j e^{{{power('j')}{shift}}}", 18 + shift_width + bias_width)
    equations: list[Equation] = [(lhs, [powers, [number(key.exp.text(p)) for key in kept], [total]])]
    masked = Math(rf"0 \quad \text{{({text(t('render.masked'))})}}", 15 + glyphs(t("render.masked")))
    for key in query.keys:
        alpha = sub(r"\alpha", named(key.key))
        if key.allowed:
            power_j = Math(
                rf"e^{{{power(named(key.key).tex)}{shift}}}",
                4.7 + 3.4 + named(key.key).width * SCRIPT * (2 if biased else 1) + shift_width + bias_width,
            )
            sides = [[frac(power_j, total)], [frac(number(key.exp.text(p)), total)], [number(key.weight.text(p))]]
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
    return [heading, *display(equations), *tabular(headers, rows)]


def _mix(query: walk.Query, p: int) -> list[str]:
    terms = [
        number(key.weight.text(p)) + Math(r"\,", 1.7) + matrix_of((key.value,), p) for key in query.keys if key.allowed
    ]
    z = Math(rf"\mathbf{{z}}_{{{named(query.name).tex}}}", 5.6 + named(query.name).width)
    heading = rf"\paragraph{{{text(t('writeup.step_output'))}}} $\mathbf{{z}} = \sum_j \alpha_j\,\mathbf{{v}}_j$"
    output = matrix_equations(z, (query.output,), p)
    equations = [(z, [terms, [output[0][1][0][0]]])] if len(output) == 1 else [(z, [terms]), *output]
    return [heading, *display(equations)]


def worked(shown: tiles.Worked) -> list[str]:
    """A table of worked numbers (attncli.render.tiles), its formulas displayed; one too wide for the line is scaled."""
    headers = [text(header) if isinstance(header, str) else f"${header.latex}$" for header in shown.headers]
    rows = [[cell(written) for written in row] for row in (*shown.rows, *([shown.footer] if shown.footer else []))]
    lines = [
        rf"\paragraph{{{text(shown.words)}}}",
        rf"\[\attnfit{{${shown.formula.latex}$}}\]",
        *tabular(headers, rows),
    ]
    return [*lines, *(rf"{text(words)} \[\attnfit{{${formula.latex}$}}\]" for words, formula in shown.closing)]


def _matrix_item(item: walk.WeightMatrix, p: int) -> list[str]:
    rows = [[text(name), *("$\\cdot$" if w is None else cell(w.text(p)) for w in row)] for name, row in item.weights]
    outputs = [[text(name), *(cell(number.text(p)) for number in out.cells)] for name, out in item.outputs]
    shown, gap = shown_of(int(item.head.output.shape[1]), item.outputs[0][1].gap is not None)
    coordinates = [f"$z_{{{j + 1}}}$" for j in shown]
    if gap is not None:
        coordinates.insert(gap, r"$\cdots$")
    return [
        rf"\paragraph{{{text(t('render.weight_matrix_title'))}}}",
        *tabular([text(t("render.query")), *(text(name) for name in item.tokens)], rows),
        rf"\paragraph{{{text(t('render.outputs_title'))}}}",
        *tabular([text(t("render.query")), *coordinates], outputs),
    ]


def _combination(item: walk.Combination, p: int) -> list[str]:
    concat = atom(r"\mathrm{concat}", 29.0)
    lines = [rf"\subsection*{{{text(t('writeup.concat_title'))}}}", *display(matrix_equations(concat, item.concat, p))]
    if item.w_o is not None:
        w_o = sub("W", atom("O", 5.3))
        product = concat + Math(r"\,", 1.7) + w_o
        lines += [
            rf"\subsection*{{{prose(t('render.final_title'))}}}",
            *display([*matrix_equations(w_o, item.w_o, p), *matrix_equations(product, item.output, p)]),
        ]
    return lines


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


def _stack_facts(facts: stack_walk.StackFacts, p: int) -> list[str]:
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


def _layer_title(item: stack_walk.LayerTitle, p: int) -> list[str]:
    title = t("render.layer_title", number=item.number, count=item.of, name=item.name).strip()
    norm = rf"\item \textbf{{{text(t('render.norm_label'))}:}} {prose(item.norm)}"
    return [rf"\subsection*{{{text(title)}}}", r"\begin{itemize}", norm, *_rules(item.facts, p), r"\end{itemize}", ""]


def _stream(item: stack_walk.Stream, p: int) -> list[str]:
    heading = rf"\paragraph{{{text(t(f'render.stream_{item.kind}', formula='').rstrip(': '))}}} ${item.latex}$"
    rows = [[text(token), f"${matrix_of((row,), p).tex}$"] for token, row in zip(item.tokens, item.rows)]
    return [heading, *tabular([text(t("render.token")), f"${item.latex.split(' = ')[0]}$"], rows)]


def _rollout(item: stack_walk.Rollout, p: int) -> list[str]:
    headers = [text(t("render.query")), *(text(name) for name in item.tokens)]
    raw_title = text(t("render.rollout_raw", number=item.last))
    product = rf"$\tilde A_{{{item.last}}}\cdots\tilde A_{{1}}$, $\tilde A = \tfrac12\,\overline{{A}} + \tfrac12 I$"
    flow_title = f"{text(t('render.rollout_name'))} {product}"
    lines = []
    shown = [(raw_title, item.raw)] if item.raw is not None else []
    for title, matrix in (*shown, (flow_title, item.rollout)):
        rows = [[text(name), *(cell(fixed(float(w), p)) for w in row)] for name, row in zip(item.tokens, matrix)]
        lines += [rf"\paragraph{{{title}}}", *tabular(headers, rows)]
    return [*lines, rf"\emph{{{prose(t('analysis.caution_rollout'))}}}", ""]


_RENDER: dict[type, Callable[[Any, int], list[str]]] = {  # each type's own writer
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
    stack_walk.StackFacts: _stack_facts,
    stack_walk.LayerTitle: _layer_title,
    stack_walk.Stream: _stream,
    stack_walk.Rollout: _rollout,
}
