"""The step-by-step as a LaTeX document (amsmath): every dot product, exponential and weighted sum written out.

The output compiles on its own with pdflatex; a student pastes the body into a
report whose preamble loads amsmath. Text that is not Latin-1 and has no LaTeX
spelling below is replaced by `?`, so the document always compiles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from attncli.core import Steps
from attncli.i18n import t
from attncli.render import walk
from attncli.render.numbers import fixed

BREAK_EVERY = 3  # terms per line in a long sum
MIN_MATRIX_COLUMNS = 10  # amsmath's default limit for bmatrix
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
    "−": "-",
    "∞": r"$\infty$",
    "‖": r"$\|$",
    "Σ": r"$\Sigma$",
    "…": r"\ldots{}",
    "—": "---",
    "–": "--",
    "→": r"$\to$",
    "‘": "`",
    "’": "'",
    "“": "``",
    "”": "''",
}


def render(steps: Steps, precision: int = 4, follow: tuple[str, ...] | None = None) -> str:
    """A complete document; `follow` picks the queries written out in detail (default: all, up to three)."""
    items = walk.items(steps, walk.View(precision, follow))
    lines = [
        f"% {text(t('writeup.latex_comment'))}",
        r"\documentclass{article}",
        r"\usepackage[T1]{fontenc}",
        r"\usepackage[utf8]{inputenc}",
        r"\usepackage{amsmath}",
        rf"\setcounter{{MaxMatrixCols}}{{{_widest(steps)}}}",
        r"\begin{document}",
        "",
        *(line for item in items for line in _RENDER[type(item)](item, precision)),
        "",
        rf"\emph{{{text(t('writeup.rounding_note', precision=precision))}}}",
        "",
        r"\end{document}",
    ]
    return "\n".join(lines) + "\n"


def text(value: str) -> str:
    """Plain text made safe for LaTeX's text mode."""
    return "".join(_TEXT.get(c, c if ord(c) < 256 else "?") for c in str(value))


def _facts(facts: walk.Facts, p: int) -> list[str]:
    lines = [rf"\section*{{{text(facts.title or t('writeup.title'))}}}"]
    if facts.notes:
        lines += [text(facts.notes), ""]
    kind = t("render.cross_attention") if facts.cross else t("render.self_attention")
    lines += [
        r"\begin{itemize}",
        rf"\item \textbf{{{text(t('render.tokens'))}:}} {text(', '.join(facts.tokens))}",
        rf"\item \textbf{{{text(t('render.queries'))}:}} {text(', '.join(facts.query_tokens))} ({text(kind)})",
    ]
    for name, formula in facts.scores:
        prefix = f"{text(name)}: " if name is not None else ""
        widths = f"$d_v = {formula.d_v}$" if formula.d_k is None else f"$d_k = {formula.d_k}$, $d_v = {formula.d_v}$"
        words = f"{text(t(f'writeup.score_{formula.kind}'))} ({widths})"  # Formula.words, the widths in math
        lines.append(rf"\item \textbf{{{text(t('render.score'))}:}} {prefix}{words}; ${_formula(formula, p)}$")
    lines.append(rf"\item \textbf{{{text(t('render.mask'))}:}} {text(facts.mask)}")
    if facts.bias is not None:
        lines.append(rf"\item \textbf{{{text(t('render.bias'))}:}} {text(facts.bias)}")
    if facts.access is not None:
        lines.append(r"\begin{itemize}")
        for name, row in zip(facts.query_tokens, facts.access):
            keys = ", ".join(key for key, ok in zip(facts.tokens, row) if ok)
            lines.append(rf"\item {text(t('writeup.may_use', query=name, keys=keys))}")
        lines.append(r"\end{itemize}")
    return [*lines, r"\end{itemize}", ""]


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


def _head_title(item: walk.HeadTitle, p: int) -> list[str]:
    return [rf"\subsection*{{{text(item.name)}}}"]


def _projected(part: walk.Projected, p: int) -> list[str]:
    product = rf"{_matrix(part.x, p)}\,{_matrix(part.w, p)} = {_matrix(part.result, p)}"
    return [r"\[", rf"{part.name} = X\,{_sub(part.weight)} = {product}", r"\]"]


def _query(query: walk.Query, p: int) -> list[str]:
    lines = [rf"\subsubsection*{{{text(t('render.query_heading', name=query.name))}}}"]
    if query.q is not None:
        lines += [r"\[", rf"\mathbf{{q}} = {_matrix((query.q,), p)}", r"\]"]
    return lines + _scores(query, p) + _softmax(query, p) + _mix(query, p)


def _scores(query: walk.Query, p: int) -> list[str]:
    formula = query.formula
    equations = []
    for key in query.keys:
        s = rf"s_{{{_name(key.key)}}}"
        value = key.score.text(p) if key.biased is None else key.biased.scaled.text(p)
        if not key.allowed:
            equations.append(rf"{s} &= -\infty \quad \text{{({text(t('render.masked'))})}}")
        elif key.compatibility is None:
            equations.append(rf"{s} &= {value}")
        elif formula.root is not None:
            chain = " = ".join(rf"\frac{{{c}}}{{\sqrt{{{formula.root}}}}}" for c in _chain(key.compatibility, p))
            equations.append(rf"{s} &= {chain} = {value}")
        elif formula.scale == 1:
            equations.append(rf"{s} &= " + " = ".join(_chain(key.compatibility, p)))
        else:
            scale = fixed(formula.scale, p)
            chain = " = ".join(rf"\left({c}\right) \times {scale}" for c in _chain(key.compatibility, p))
            equations.append(rf"{s} &= {chain} = {value}")
        if key.biased is not None and key.allowed:  # the bias, added before softmax
            b = key.biased.bias.text(p)
            equations[-1] += rf", \quad {s} + b_{{{_name(key.key)}}} = {value} + ({b}) = {key.score.text(p)}"
    heading = rf"\paragraph{{{text(t('writeup.step_scores'))}}} ${_formula(formula, p)}$"
    return [heading, *_align(equations)]


def _chain(written: walk.Arithmetic, p: int) -> list[str]:
    """A compatibility before the scale as a chain of equal expressions, ending with its value."""
    value = written.value.text(p)
    match written:
        case walk.Terms(pairs=pairs):
            return [" + ".join(rf"{a.text(p)} \times {b.text(p)}" for a, b in pairs), value]
        case walk.Cosine(dot=dot, norms=(left, right)):
            return [rf"\frac{{{dot.text(p)}}}{{{left.text(p)} \times {right.text(p)}}}", value]
        case walk.Additive(hidden=hidden):
            return [rf"\mathbf{{v}}\cdot{_matrix((hidden,), p)}", value]
    return [value]


def _softmax(query: walk.Query, p: int) -> list[str]:
    minus = "" if query.shift.value == 0 else f" - {query.shift.text(p)}"
    kept = [key for key in query.keys if key.allowed]
    total = query.total.text(p)
    powers = [rf"e^{{{key.score.text(p)}{minus}}}" for key in kept]
    sums = rf"\sum_j e^{{s_j{minus}}} &= " + _sum(powers) + r" \\ &= " + _sum([key.exp.text(p) for key in kept])
    equations = [f"{sums} = {total}"]
    for key in query.keys:
        alpha = rf"\alpha_{{{_name(key.key)}}}"
        if key.allowed:
            power, exp, weight = rf"e^{{s_{{{_name(key.key)}}}{minus}}}", key.exp.text(p), key.weight.text(p)
            equations.append(rf"{alpha} &= \frac{{{power}}}{{{total}}} = \frac{{{exp}}}{{{total}}} = {weight}")
        else:
            equations.append(rf"{alpha} &= 0 \quad \text{{({text(t('render.masked'))})}}")
    heading = (
        rf"\paragraph{{{text(t('writeup.step_softmax'))}}} $\alpha_j = e^{{s_j{minus}}} \big/ \sum_i e^{{s_i{minus}}}$"
    )
    rows = [
        [text(key.key), key.score.text(p), key.exp.text(p), key.weight.text(p)]
        if key.allowed
        else [text(key.key), r"$-\infty$", "0", "0"]
        for key in query.keys
    ]
    rows.append([text(t("render.sum")), "", total, query.weight_sum.text(p)])
    headers = [text(t("render.key")), "$s$", rf"$e^{{s{minus}}}$", text(t("render.weight"))]
    return [heading, *_align(equations), *_tabular(headers, rows)]


def _mix(query: walk.Query, p: int) -> list[str]:
    terms = [rf"{key.weight.text(p)}\,{_matrix((key.value,), p)}" for key in query.keys if key.allowed]
    z = rf"\mathbf{{z}}_{{{_name(query.name)}}}"
    equations = [rf"{z} &= " + _sum(terms) + rf" \\ &= {_matrix((query.output,), p)}"]
    heading = rf"\paragraph{{{text(t('writeup.step_output'))}}} $\mathbf{{z}} = \sum_j \alpha_j\,\mathbf{{v}}_j$"
    return [heading, *_align(equations)]


def _matrix_item(item: walk.WeightMatrix, p: int) -> list[str]:
    rows = [[text(name), *("$\\cdot$" if w is None else w.text(p) for w in row)] for name, row in item.weights]
    outputs = [[text(name), f"${_matrix((out,), p)}$"] for name, out in item.outputs]
    return [
        rf"\paragraph{{{text(t('render.weight_matrix_title'))}}}",
        *_tabular([text(t("render.query")), *(text(name) for name in item.tokens)], rows),
        rf"\paragraph{{{text(t('render.outputs_title'))}}}",
        *_tabular([text(t("render.query")), text(t("render.output"))], outputs),
    ]


def _combination(item: walk.Combination, p: int) -> list[str]:
    concat = _matrix(item.concat, p)
    lines = [rf"\subsection*{{{text(t('writeup.concat_title'))}}}", r"\[", rf"\mathrm{{concat}} = {concat}", r"\]"]
    if item.w_o is not None:
        product = rf"{concat}\,{_matrix(item.w_o, p)} = {_matrix(item.output, p)}"
        lines += [
            rf"\subsection*{{{text(t('render.final_title'))}}}",
            r"\[",
            rf"\mathrm{{concat}}\,W_O = {product}",
            r"\]",
        ]
    return lines


def _align(equations: Sequence[str]) -> list[str]:
    return [r"\begin{align*}", " \\\\\n".join(equations), r"\end{align*}"]


def _sum(terms: Sequence[str]) -> str:
    """walk.Terms joined by +, a new aligned line every BREAK_EVERY terms."""
    lines = [" + ".join(terms[i : i + BREAK_EVERY]) for i in range(0, len(terms), BREAK_EVERY)]
    return " \\\\\n  &\\quad + ".join(lines)


def _tabular(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    columns = "l" + "r" * (len(headers) - 1)
    body = [" & ".join(row) + r" \\" for row in rows]
    return [
        r"\begin{center}",
        rf"\begin{{tabular}}{{{columns}}}",
        r"\hline",
        " & ".join(headers) + r" \\",
        r"\hline",
        *body,
        r"\hline",
        r"\end{tabular}",
        r"\end{center}",
    ]


def _matrix(rows: Sequence[walk.Vec], p: int) -> str:
    cells = [
        " & ".join(cell.text(p).replace("−∞", r"-\infty").replace("∞", r"\infty") for cell in row.cells) for row in rows
    ]
    return r"\begin{bmatrix} " + r" \\ ".join(cells) + r" \end{bmatrix}"


def _name(token: str) -> str:
    """A token as a subscript in math mode."""
    return rf"\text{{{text(token)}}}"


def _sub(name: str) -> str:
    """W_Q as math: W_{Q}."""
    base, _, index = name.partition("_")
    return f"{base}_{{{index}}}" if index else base


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


_RENDER: dict[type, Callable[[walk.Item, int], list[str]]] = {
    walk.Facts: _facts,
    walk.HeadTitle: _head_title,
    walk.Projected: _projected,
    walk.Query: _query,
    walk.WeightMatrix: _matrix_item,
    walk.Combination: _combination,
}
