"""The step-by-step explanation for people: the problem, then each followed query from q·k to the output."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from attncli.core import HeadSteps, Steps
from attncli.i18n import t
from attncli.problem import Problem
from attncli.render import analysis, summary, writeup
from attncli.render.layout import BLANK, Line, bar, line, table
from attncli.render.numbers import MASKED, fixed, vector

BAR_WIDTH = 20
FORMULA = {**writeup.RAW, "cosine": "q·k / (‖q‖‖k‖)"}  # the score in a step's title: cosine spelled out


@dataclass(frozen=True)
class View:
    """What the reader asked to see: how many decimals, and which queries in detail."""

    precision: int = 4
    follow: tuple[str, ...] | None = None
    heatmap: bool = False  # the weight map even when every query is shown step by step


def render(steps: Steps, view: View, width: int, extra: Sequence[Line] = ()) -> list[Line]:
    """The whole explanation as styled lines, laid out for a screen `width` columns wide.

    `extra` (norms, interventions) goes after the result, before the note on rounding.
    """
    if summary.is_large(steps):
        return [*summary.render(steps, view.follow, view.precision, width), *extra]
    problem = steps.problem
    followed = writeup.followed(problem, view.follow)
    out = _problem(steps, view, width)
    for head in steps.heads:
        if len(steps.heads) > 1:
            out.append(line((t("render.head_title", name=head.spec.name), "bold reverse")))
        out += _projections(head, problem, view, width)
        for row in followed:
            out += _query(head, row, problem, view, width)
        if view.heatmap or len(problem.query_tokens) > 1:  # the map of several queries, as well as their steps
            out += _matrices(head, problem, view, width)
    out += _combination(steps, view, width)
    out += extra
    out.append(line((t("render.rounding_note", precision=view.precision), "dim")))
    return out


def _problem(steps: Steps, view: View, width: int) -> list[Line]:
    problem = steps.problem
    lines: list[Line] = []
    if problem.title:
        lines.append(line((problem.title, "bold underline")))
    if problem.notes:
        lines.append(line((problem.notes, "italic")))
    lines.append(_fact(t("render.tokens"), ", ".join(problem.tokens)))
    kind = t("render.cross_attention") if problem.cross else t("render.self_attention")
    lines.append(_fact(t("render.queries"), f"{', '.join(problem.query_tokens)} ({kind})"))
    for head in steps.heads:
        prefix = f"{head.spec.name}: " if len(steps.heads) > 1 else ""
        lines.append(_fact(t("render.score"), prefix + _score_description(head, view.precision)))
    lines.append(_fact(t("render.mask"), writeup.mask_facts(problem)))
    rule = problem.mask_rule
    masked = rule.kind != "none" or rule.window is not None or rule.padding
    lines += _access_map(problem, width) if masked else [BLANK]  # a table ends with its own blank line
    return lines


def _fact(label: str, value: str) -> Line:
    return line((f"{label}: ", "bold"), value)


def _score_description(head: HeadSteps, precision: int) -> str:
    """The score function, its formula with the scale (1/√d_k = 0.7071 when it is the usual one), and the widths."""
    score = head.spec.score
    if score.kind == "given":
        return writeup.score_facts(head)
    scale = fixed(score.scale, precision)
    if writeup.default_scale(head):
        scale = f"1/√{head.keys.shape[1]} = {scale}"
    return writeup.score_facts(head, formula=f"s = {writeup.RAW[score.kind]} × {scale}")


def _access_map(problem: Problem, width: int) -> list[Line]:
    """Which keys each query may use: ● allowed, · excluded (access, not weights).

    A table, so that on a narrow screen each query's keys stay listed under its name.
    """
    rows = [
        [name, *(("●", "green") if allowed else ("·", "dim") for allowed in row)]
        for name, row in zip(problem.query_tokens, problem.mask)
    ]
    headers = [t("render.query"), *problem.tokens]
    return table(t("render.access_legend"), headers, rows, width, center=range(1, len(headers)))


def _projections(head: HeadSteps, problem: Problem, view: View, width: int) -> list[Line]:
    p = view.precision
    out: list[Line] = []
    for part in writeup.projections(head, problem):
        name, weight, operand = part.name, part.weight, part.operand
        w_rows = [[str(i + 1), vector(row, p, "entry")] for i, row in enumerate(operand.w)]
        out += table(t("render.weight_matrix", name=weight), [t("render.row"), weight], w_rows, width)
        products = zip(part.tokens, operand.x, part.result)
        rows = [[token, vector(x, p, "entry"), vector(r, p)] for token, x, r in products]
        out += table(f"{name} = X·{weight}", [t("render.token"), "x", name.lower()], rows, width)
    return out


def _query(head: HeadSteps, row: int, problem: Problem, view: View, width: int) -> list[Line]:
    p = view.precision
    name = problem.query_tokens[row]
    q = f"  q = {vector(head.queries[row], p, 'entry')}" if head.queries is not None else ""
    return [
        line((t("render.query_heading", name=name), "bold"), q),
        *_score_table(head, row, problem, view, width),
        *_softmax_table(head, row, problem, view, width),
        *_output_table(head, row, problem, view, width),
        line((t("render.output_line", name=name), "bold"), (vector(head.output[row], p), "bold green")),
        BLANK,
    ]


def _score_table(head: HeadSteps, row: int, problem: Problem, view: View, width: int) -> list[Line]:
    p = view.precision
    score = head.spec.score
    scale = fixed(score.scale, p)
    rows = []
    for j, key in enumerate(problem.tokens):
        s = fixed(head.scores[row, j], p) if problem.mask[row, j] else (t("render.masked"), "dim")
        if score.kind == "given":
            rows.append([key, s])
            continue
        k = vector(head.keys[j], p, "entry")
        raw = _raw_cell(head, row, j, p)
        rows.append([key, k, raw, s])
    if score.kind == "given":
        return table(t("render.step_scores_given"), [t("render.key"), "s"], rows, width, right=(1,))
    return table(
        t("render.step_scores", formula=f"s = {FORMULA[score.kind]} × {scale}"),
        [t("render.key"), "k", writeup.RAW[score.kind], "s"],
        rows,
        width,
        right=(3,),
    )


def _raw_cell(head: HeadSteps, row: int, j: int, p: int) -> str:
    """The compatibility of query `row` and key `j`, written out when it is short enough to follow."""
    kind = head.spec.score.kind
    value = fixed(head.compatibility[row, j], p)
    if kind == "additive":
        return f"v·{vector(head.hidden[row, j], p)} = {value}"
    q, k = head.queries[row], head.keys[j]
    if writeup.written_out(head):
        return f"{writeup.dot_terms(q, k, p)} = {value}"
    if kind == "cosine":
        dot, norms = writeup.cosine_terms(q, k, p)
        return f"{dot} / ({norms}) = {value}"
    return value


def _softmax_table(head: HeadSteps, row: int, problem: Problem, view: View, width: int) -> list[Line]:
    p = view.precision
    exp_header = writeup.exp_label(float(head.shift[row]), p)
    total = float(head.exp[row].sum())
    rows = []
    best = int(np.argmax(head.weights[row]))
    for j, key in enumerate(problem.tokens):
        if not problem.mask[row, j]:
            excluded = (t("render.excluded"), "dim")
            rows.append([key, (MASKED, "dim"), ("0", "dim"), ("0", "dim"), excluded])
            continue
        weight = float(head.weights[row, j])
        style = "bold" if j == best else ""
        rows.append(
            [
                key,
                fixed(head.scores[row, j], p),
                _exp_text(float(head.exp[row, j]), p),
                (fixed(weight, p), style),
                (bar(weight, BAR_WIDTH), "cyan"),
            ]
        )
    footer = [t("render.sum"), "", _exp_text(total, p), fixed(float(head.weights[row].sum()), p), ""]
    return table(
        t("render.step_softmax", exp=exp_header, total=_exp_text(total, p)),
        [t("render.key"), "s", exp_header, t("render.weight"), ""],
        rows,
        width,
        footer=footer,
        right=(1, 2, 3),
    )


def _exp_text(value: float, p: int) -> str:
    """e^s in fixed notation while readable, in scientific notation for very large or tiny values."""
    if value != 0 and (abs(value) >= 1e12 or abs(value) < 10.0**-p):
        return f"{value:.{p}e}"
    return fixed(value, p)


def _output_table(head: HeadSteps, row: int, problem: Problem, view: View, width: int) -> list[Line]:
    p = view.precision
    rows = []
    for j, key in enumerate(problem.tokens):
        value = vector(head.values[j], p, "entry")
        if not problem.mask[row, j]:
            excluded = (t("render.excluded"), "dim")
            rows.append([key, ("0", "dim"), (value, "dim"), excluded])
            continue
        weight = float(head.weights[row, j])
        rows.append([key, fixed(weight, p), value, vector(weight * head.values[j], p)])
    footer = [t("render.sum"), "", "", vector(head.output[row], p)]
    return table(
        t("render.step_output"),
        [t("render.key"), t("render.weight"), "v", t("render.weight_times_v")],
        rows,
        width,
        footer=footer,
        right=(1,),
    )


def _matrices(head: HeadSteps, problem: Problem, view: View, width: int) -> list[Line]:
    p = view.precision
    outputs = [[name, vector(out, p)] for name, out in zip(problem.query_tokens, head.output)]
    hint = [line((t("render.follow_hint"), "dim")), BLANK] if len(problem.query_tokens) > writeup.AUTO_FOLLOW else []
    return [
        *analysis.heatmap(head, problem, p, width),
        *table(t("render.outputs_title"), [t("render.query"), t("render.output")], outputs, width),  # ends blank
        *hint,
    ]


def _combination(steps: Steps, view: View, width: int) -> list[Line]:
    if steps.concat is None:
        return []
    p = view.precision
    problem = steps.problem
    names = " ‖ ".join(head.spec.name for head in steps.heads)
    rows = [[name, vector(row, p)] for name, row in zip(problem.query_tokens, steps.concat)]
    out = table(t("render.concat_title", names=names), [t("render.query"), "concat"], rows, width)
    if problem.w_o is not None:
        w_rows = [[str(i + 1), vector(row, p, "entry")] for i, row in enumerate(problem.w_o)]
        out += table(t("render.weight_matrix", name="W_O"), [t("render.row"), "W_O"], w_rows, width)
        final = [[name, vector(row, p)] for name, row in zip(problem.query_tokens, steps.output)]
        out += table(t("render.final_title"), [t("render.query"), t("render.output")], final, width)
    return out
