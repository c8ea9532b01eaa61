"""The step-by-step as a LaTeX document (amsmath): every dot product, exponential and weighted sum written out.

The output compiles on its own with pdflatex; a student pastes the body into a
report whose preamble loads amsmath. Text that is not Latin-1 and has no LaTeX
spelling below is replaced by `?`, so the document always compiles.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from attncli.core import HeadSteps, Steps
from attncli.i18n import t
from attncli.problem import Problem
from attncli.render import writeup
from attncli.render.numbers import entry, fixed

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
RAW = {
    "scaled_dot": r"\mathbf{q}\cdot\mathbf{k}_j",
    "dot": r"\mathbf{q}\cdot\mathbf{k}_j",
    "cosine": r"\frac{\mathbf{q}\cdot\mathbf{k}_j}{\lVert\mathbf{q}\rVert\,\lVert\mathbf{k}_j\rVert}",
    "general": r"\mathbf{q}\,W\,\mathbf{k}_j^{\top}",
    "additive": r"\mathbf{v}^{\top}\tanh(\mathbf{q}\,W_{\mathrm{query}} + \mathbf{k}_j\,W_{\mathrm{key}})",
}


def render(steps: Steps, precision: int = 4, follow: tuple[str, ...] | None = None) -> str:
    """A complete document; `follow` picks the queries written out in detail (default: all, up to three)."""
    problem = steps.problem
    p = precision
    lines = [
        f"% {text(t('writeup.latex_comment'))}",
        r"\documentclass{article}",
        r"\usepackage[T1]{fontenc}",
        r"\usepackage[utf8]{inputenc}",
        r"\usepackage{amsmath}",
        rf"\setcounter{{MaxMatrixCols}}{{{_widest(steps)}}}",
        r"\begin{document}",
        "",
        rf"\section*{{{text(problem.title or t('writeup.title'))}}}",
    ]
    if problem.notes:
        lines += [text(problem.notes), ""]
    lines += _facts(steps, p)
    rows = writeup.followed(problem, follow)
    for head in steps.heads:
        if len(steps.heads) > 1:
            lines.append(rf"\subsection*{{{text(head.spec.name)}}}")
        for part in writeup.projections(head, problem):
            lines += [
                r"\[",
                rf"{part.name} = X\,{_sub(part.weight)} = {_matrix(part.operand.x, p, 'entry')}\,"
                rf"{_matrix(part.operand.w, p, 'entry')} = {_matrix(part.result, p)}",
                r"\]",
            ]
        for row in rows:
            lines += _query(head, row, problem, p)
        if len(rows) < len(problem.query_tokens):
            lines += _matrices(head, problem, p)
    lines += _combination(steps, p)
    lines += ["", rf"\emph{{{text(t('writeup.rounding_note', precision=p))}}}", "", r"\end{document}"]
    return "\n".join(lines) + "\n"


def text(value: str) -> str:
    """Plain text made safe for LaTeX's text mode."""
    return "".join(_TEXT.get(c, c if ord(c) < 256 else "?") for c in str(value))


def _facts(steps: Steps, p: int) -> list[str]:
    problem = steps.problem
    kind = t("render.cross_attention") if problem.cross else t("render.self_attention")
    lines = [
        r"\begin{itemize}",
        rf"\item \textbf{{{text(t('render.tokens'))}:}} {text(', '.join(problem.tokens))}",
        rf"\item \textbf{{{text(t('render.queries'))}:}} {text(', '.join(problem.query_tokens))} ({text(kind)})",
    ]
    for head in steps.heads:
        prefix = f"{text(head.spec.name)}: " if len(steps.heads) > 1 else ""
        facts = text(writeup.score_facts(head))
        lines.append(rf"\item \textbf{{{text(t('render.score'))}:}} {prefix}{facts}; ${_formula(head, p)}$")
    lines.append(rf"\item \textbf{{{text(t('render.mask'))}:}} {text(writeup.mask_facts(problem))}")
    if writeup.masked(problem):
        lines.append(r"\begin{itemize}")
        for row, name in enumerate(problem.query_tokens):
            lines.append(rf"\item {text(t('writeup.may_use', query=name, keys=writeup.allowed(problem, row)))}")
        lines.append(r"\end{itemize}")
    return [*lines, r"\end{itemize}", ""]


def _formula(head: HeadSteps, p: int) -> str:
    """The score formula with this head's scale, in math mode."""
    score = head.spec.score
    if score.kind == "given":
        return r"s_j \text{ " + text(t("writeup.scores_given")) + "}"
    if writeup.default_scale(head):
        return rf"s_j = \frac{{{RAW[score.kind]}}}{{\sqrt{{{head.keys.shape[1]}}}}}"
    if score.scale == 1:
        return rf"s_j = {RAW[score.kind]}"
    return rf"s_j = {RAW[score.kind]} \times {fixed(score.scale, p)}"


def _query(head: HeadSteps, row: int, problem: Problem, p: int) -> list[str]:
    name = problem.query_tokens[row]
    lines = [rf"\subsubsection*{{{text(t('render.query_heading', name=name))}}}"]
    if head.queries is not None:
        lines += [r"\[", rf"\mathbf{{q}} = {_matrix(head.queries[row : row + 1], p, 'entry')}", r"\]"]
    lines += _scores(head, row, problem, p)
    lines += _softmax(head, row, problem, p)
    lines += _mix(head, row, problem, p)
    return lines


def _scores(head: HeadSteps, row: int, problem: Problem, p: int) -> list[str]:
    score = head.spec.score
    equations = []
    for j, key in enumerate(problem.tokens):
        s = rf"s_{{{_name(key)}}}"
        if not problem.mask[row, j]:
            equations.append(rf"{s} &= -\infty \quad \text{{({text(t('render.masked'))})}}")
            continue
        value = fixed(head.scores[row, j], p)
        if score.kind == "given":
            equations.append(rf"{s} &= {value}")
            continue
        chain = _raw(head, row, j, p)
        if writeup.default_scale(head):
            root = rf"\sqrt{{{head.keys.shape[1]}}}"
            equations.append(rf"{s} &= " + " = ".join(rf"\frac{{{c}}}{{{root}}}" for c in chain) + f" = {value}")
        elif score.scale == 1:
            equations.append(rf"{s} &= " + " = ".join(chain))
        else:
            scaled = " = ".join(rf"\left({c}\right) \times {fixed(score.scale, p)}" for c in chain)
            equations.append(rf"{s} &= {scaled} = {value}")
    heading = rf"\paragraph{{{text(t('writeup.step_scores'))}}} ${_formula(head, p)}$"
    return [heading, *_align(equations)]


def _raw(head: HeadSteps, row: int, j: int, p: int) -> list[str]:
    """A query and a key's compatibility before the scale, written out as far as it can be followed by hand."""
    kind = head.spec.score.kind
    value = fixed(head.compatibility[row, j], p)
    q, k = head.queries[row], head.keys[j]
    if writeup.written_out(head):
        return [writeup.dot_terms(q, k, p, times=r" \times "), value]
    if kind == "cosine":
        dot, norms = writeup.cosine_terms(q, k, p, times=r" \times ")
        return [rf"\frac{{{dot}}}{{{norms}}}", value]
    return [value]


def _softmax(head: HeadSteps, row: int, problem: Problem, p: int) -> list[str]:
    shift = float(head.shift[row])
    minus = "" if shift == 0 else f" - {fixed(shift, p)}"
    kept = [j for j in range(len(problem.tokens)) if problem.mask[row, j]]
    total = fixed(float(head.exp[row].sum()), p)
    powers = [rf"e^{{{fixed(head.scores[row, j], p)}{minus}}}" for j in kept]
    values = [fixed(head.exp[row, j], p) for j in kept]
    equations = [
        rf"\sum_j e^{{s_j{minus}}} &= " + _sum(powers) + r" \\ &= " + _sum(values) + f" = {total}",
    ]
    for j, key in enumerate(problem.tokens):
        alpha = rf"\alpha_{{{_name(key)}}}"
        if problem.mask[row, j]:
            power, weight = rf"e^{{s_{{{_name(key)}}}{minus}}}", fixed(head.weights[row, j], p)
            exp = values[kept.index(j)]
            equations.append(rf"{alpha} &= \frac{{{power}}}{{{total}}} = \frac{{{exp}}}{{{total}}} = {weight}")
        else:
            equations.append(rf"{alpha} &= 0 \quad \text{{({text(t('render.masked'))})}}")
    heading = (
        rf"\paragraph{{{text(t('writeup.step_softmax'))}}} $\alpha_j = e^{{s_j{minus}}} \big/ \sum_i e^{{s_i{minus}}}$"
    )
    rows = [
        [text(key), fixed(head.scores[row, j], p), fixed(head.exp[row, j], p), fixed(head.weights[row, j], p)]
        if problem.mask[row, j]
        else [text(key), r"$-\infty$", "0", "0"]
        for j, key in enumerate(problem.tokens)
    ]
    rows.append([text(t("render.sum")), "", total, fixed(float(head.weights[row].sum()), p)])
    headers = [text(t("render.key")), "$s$", rf"$e^{{s{minus}}}$", text(t("render.weight"))]
    return [heading, *_align(equations), *_tabular(headers, rows)]


def _mix(head: HeadSteps, row: int, problem: Problem, p: int) -> list[str]:
    kept = [j for j in range(len(problem.tokens)) if problem.mask[row, j]]
    terms = [rf"{fixed(head.weights[row, j], p)}\,{_matrix(head.values[j : j + 1], p, 'entry')}" for j in kept]
    z = rf"\mathbf{{z}}_{{{_name(problem.query_tokens[row])}}}"
    equations = [rf"{z} &= " + _sum(terms) + rf" \\ &= {_matrix(head.output[row : row + 1], p)}"]
    heading = rf"\paragraph{{{text(t('writeup.step_output'))}}} $\mathbf{{z}} = \sum_j \alpha_j\,\mathbf{{v}}_j$"
    return [heading, *_align(equations)]


def _matrices(head: HeadSteps, problem: Problem, p: int) -> list[str]:
    rows = [
        [text(name), *(fixed(float(w), p) if ok else "$\\cdot$" for w, ok in zip(head.weights[i], problem.mask[i]))]
        for i, name in enumerate(problem.query_tokens)
    ]
    outputs = [[text(name), f"${_matrix(out[None, :], p)}$"] for name, out in zip(problem.query_tokens, head.output)]
    return [
        rf"\paragraph{{{text(t('render.weight_matrix_title'))}}}",
        *_tabular([text(t("render.query")), *(text(name) for name in problem.tokens)], rows),
        rf"\paragraph{{{text(t('render.outputs_title'))}}}",
        *_tabular([text(t("render.query")), text(t("render.output"))], outputs),
    ]


def _combination(steps: Steps, p: int) -> list[str]:
    if steps.concat is None:
        return []
    problem = steps.problem
    lines = [
        rf"\subsection*{{{text(t('writeup.concat_title'))}}}",
        r"\[",
        rf"\mathrm{{concat}} = {_matrix(steps.concat, p)}",
        r"\]",
    ]
    if problem.w_o is not None:
        product = rf"{_matrix(steps.concat, p)}\,{_matrix(problem.w_o, p, 'entry')} = {_matrix(steps.output, p)}"
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
    """Terms joined by +, a new aligned line every BREAK_EVERY terms."""
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


def _matrix(matrix: np.ndarray, p: int, style: str = "fixed") -> str:
    rows = [" & ".join(_number(float(v), p, style) for v in row) for row in matrix]
    return r"\begin{bmatrix} " + r" \\ ".join(rows) + r" \end{bmatrix}"


def _number(value: float, p: int, style: str = "fixed") -> str:
    shown = entry(value, p) if style == "entry" else fixed(value, p)
    return shown.replace("−∞", r"-\infty").replace("∞", r"\infty")


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
        widths += [head.values.shape[1], *(m.shape[1] for m in (head.queries, head.keys) if m is not None)]
        widths += [part.operand.x.shape[1] for part in writeup.projections(head, problem)]
    if steps.concat is not None:
        widths.append(steps.concat.shape[1])
    return max(MIN_MATRIX_COLUMNS, *widths)
