"""The step-by-step explanation for people: the problem, then each followed query from q·k to the output."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rich.console import RenderableType
from rich.text import Text

from attncli.core import HeadSteps, Steps
from attncli.i18n import t
from attncli.problem import Problem, Projection
from attncli.render.layout import table
from attncli.render.numbers import MASKED, entry, fixed, vector

AUTO_FOLLOW = 3  # follow every query step by step when there are at most this many
WRITE_OUT_DOT = 4  # write q·k out term by term up to this many dimensions
BAR_WIDTH = 20
_EIGHTHS = " ▏▎▍▌▋▊▉█"


@dataclass(frozen=True)
class View:
    """What the reader asked to see: how many decimals, and which queries in detail."""

    precision: int = 4
    follow: tuple[str, ...] | None = None


def render(steps: Steps, view: View, width: int) -> list[RenderableType]:
    """The whole explanation as Rich renderables, laid out for a screen `width` columns wide."""
    problem = steps.problem
    followed = _followed(problem, view)
    out: list[RenderableType] = [*_problem(steps, view), Text("")]
    for head in steps.heads:
        if len(steps.heads) > 1:
            out.append(Text(t("render.head_title", name=head.head.name), style="bold reverse"))
        out += _projections(head, problem, view, width)
        for row in followed:
            out += _query(head, row, problem, view, width)
        if len(followed) < len(problem.query_tokens):
            out += _matrices(head, problem, view, width)
    out += _combination(steps, view, width)
    out.append(Text(t("render.rounding_note", precision=view.precision), style="dim"))
    return out


def _followed(problem: Problem, view: View) -> list[int]:
    if view.follow is not None:
        return [problem.query_tokens.index(name) for name in view.follow]
    return list(range(len(problem.query_tokens))) if len(problem.query_tokens) <= AUTO_FOLLOW else []


def _problem(steps: Steps, view: View) -> list[RenderableType]:
    problem = steps.problem
    lines: list[RenderableType] = []
    if problem.title:
        lines.append(Text(problem.title, style="bold underline"))
    if problem.notes:
        lines.append(Text(problem.notes, style="italic"))
    lines.append(_fact(t("render.tokens"), ", ".join(problem.tokens)))
    kind = t("render.cross_attention") if problem.cross else t("render.self_attention")
    lines.append(_fact(t("render.queries"), f"{', '.join(problem.query_tokens)} ({kind})"))
    for head in steps.heads:
        prefix = f"{head.head.name}: " if len(steps.heads) > 1 else ""
        lines.append(_fact(t("render.score"), prefix + _score_description(head, view.precision)))
    lines.append(_fact(t("render.mask"), _mask_description(problem)))
    if problem.mask_rule.kind != "none" or problem.mask_rule.window is not None or problem.mask_rule.padding:
        lines.append(_access_map(problem))
    return lines


def _fact(label: str, value: str) -> Text:
    return Text.assemble((f"{label}: ", "bold"), value)


def _score_description(head: HeadSteps, precision: int) -> str:
    score = head.head.score
    d_v = head.values.shape[1]
    if score.kind == "given":
        return t("render.score_given", d_v=d_v)
    d_k = head.keys.shape[1]
    scale = fixed(score.scale, precision)
    if score.kind == "scaled_dot" and score.scale == 1 / math.sqrt(d_k):
        scale = f"1/√{d_k} = {scale}"
    return t(f"render.score_{score.kind}", scale=scale, d_k=d_k, d_v=d_v)


def _mask_description(problem: Problem) -> str:
    rule = problem.mask_rule
    parts = [t(f"render.mask_{rule.kind}")]
    if rule.window is not None:
        parts.append(t("render.mask_window", window=rule.window))
    if rule.padding:
        parts.append(t("render.mask_padding", tokens=", ".join(rule.padding)))
    return "; ".join(parts)


def _access_map(problem: Problem) -> Text:
    """Which keys each query may use: ● allowed, · excluded (access, not weights)."""
    width = max(len(name) for name in problem.query_tokens)
    text = Text()
    for name, row in zip(problem.query_tokens, problem.mask):
        text.append(f"  {name.ljust(width)}  ")
        for key, allowed in zip(problem.tokens, row):
            text.append(f"{key}", style="green" if allowed else "dim strike")
            text.append("● " if allowed else "· ", style="green" if allowed else "dim")
        text.append("\n")
    text.append(t("render.access_legend"), style="dim")
    return text


def _projections(head: HeadSteps, problem: Problem, view: View, width: int) -> list[RenderableType]:
    p = view.precision
    out: list[RenderableType] = []
    parts = (
        ("Q", "W_Q", head.head.queries, head.queries, problem.query_tokens),
        ("K", "W_K", head.head.keys, head.keys, problem.tokens),
        ("V", "W_V", head.head.values, head.values, problem.tokens),
    )
    for name, weight, operand, result, tokens in parts:
        if not isinstance(operand, Projection):
            continue
        w_rows = [[str(i + 1), vector(row, p, "entry")] for i, row in enumerate(operand.w)]
        out.append(table(t("render.weight_matrix", name=weight), [t("render.row"), weight], w_rows, width))
        rows = [[token, vector(x, p, "entry"), vector(r, p)] for token, x, r in zip(tokens, operand.x, result)]
        out.append(table(f"{name} = X·{weight}", [t("render.token"), "x", name.lower()], rows, width))
    return out


def _query(head: HeadSteps, row: int, problem: Problem, view: View, width: int) -> list[RenderableType]:
    p = view.precision
    name = problem.query_tokens[row]
    allowed = problem.mask[row]
    heading = Text.assemble((t("render.query_heading", name=name), "bold"))
    if head.queries is not None:
        heading.append(f"  q = {vector(head.queries[row], p, 'entry')}")
    return (
        [
            heading,
            _score_table(head, row, problem, view, width),
            _softmax_table(head, row, problem, view, width),
            _output_table(head, row, problem, view, width),
            Text.assemble((t("render.output_line", name=name), "bold"), (vector(head.output[row], p), "bold green")),
            Text(""),
        ]
        if allowed.any()
        else []
    )


def _score_table(head: HeadSteps, row: int, problem: Problem, view: View, width: int) -> RenderableType:
    p = view.precision
    score = head.head.score
    scale = fixed(score.scale, p)
    rows = []
    for j, key in enumerate(problem.tokens):
        s = _masked_cell(head.scores[row, j], p) if problem.mask[row, j] else Text(t("render.masked"), style="dim")
        if score.kind == "given":
            rows.append([key, s])
            continue
        k = vector(head.keys[j], p, "entry")
        raw = _raw_cell(head, row, j, p)
        rows.append([key, k, raw, s])
    if score.kind == "given":
        return table(t("render.step_scores_given"), [t("render.key"), "s"], rows, width, right=(1,))
    return table(
        t("render.step_scores", formula=_score_formula(score.kind, scale)),
        [t("render.key"), "k", t(f"render.raw_{score.kind}"), "s"],
        rows,
        width,
        right=(3,),
    )


def _score_formula(kind: str, scale: str) -> str:
    return t(f"render.formula_{kind}", scale=scale)


def _raw_cell(head: HeadSteps, row: int, j: int, p: int) -> str:
    """The compatibility of query `row` and key `j`, written out when it is short enough to follow."""
    kind = head.head.score.kind
    value = fixed(head.raw[row, j], p)
    if kind == "additive":
        return f"v·tanh(…) = v·{vector(head.hidden[row, j], p)} = {value}"
    q, k = head.queries[row], head.keys[j]
    if kind in ("scaled_dot", "dot") and len(q) <= WRITE_OUT_DOT:
        terms = " + ".join(f"{entry(a, p)}×{entry(b, p)}" for a, b in zip(q, k))
        return f"{terms} = {value}"
    if kind == "cosine":
        norms = f"{fixed(float(np.linalg.norm(q)), p)}×{fixed(float(np.linalg.norm(k)), p)}"
        return f"{fixed(float(q @ k), p)} / ({norms}) = {value}"
    return value


def _masked_cell(value: float, p: int) -> Text:
    return Text(fixed(value, p), style="dim" if math.isinf(value) else "")


def _softmax_table(head: HeadSteps, row: int, problem: Problem, view: View, width: int) -> RenderableType:
    p = view.precision
    shift = float(head.shift[row])
    exp_header = "e^s" if shift == 0 else f"e^(s − {fixed(shift, p)})"
    total = float(head.exp[row].sum())
    rows = []
    best = int(np.argmax(head.weights[row]))
    for j, key in enumerate(problem.tokens):
        if not problem.mask[row, j]:
            rows.append([key, Text(MASKED, style="dim"), Text("0", style="dim"), Text(fixed(0.0, p), style="dim"), ""])
            continue
        weight = float(head.weights[row, j])
        style = "bold" if j == best else ""
        rows.append(
            [
                key,
                fixed(head.scores[row, j], p),
                _exp_text(float(head.exp[row, j]), p),
                Text(fixed(weight, p), style=style),
                Text(_bar(weight), style="cyan"),
            ]
        )
    footer = [t("render.sum"), "", _exp_text(total, p), fixed(float(head.weights[row].sum()), p), ""]
    return table(
        t("render.step_softmax", total=_exp_text(total, p)),
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


def _output_table(head: HeadSteps, row: int, problem: Problem, view: View, width: int) -> RenderableType:
    p = view.precision
    rows = []
    for j, key in enumerate(problem.tokens):
        weight = float(head.weights[row, j])
        contribution = weight * head.values[j]
        style = "dim" if not problem.mask[row, j] else ""
        rows.append(
            [
                key,
                Text(fixed(weight, p), style=style),
                Text(vector(head.values[j], p, "entry"), style=style),
                Text(vector(contribution, p), style=style),
            ]
        )
    footer = [t("render.sum"), "", "", vector(head.output[row], p)]
    return table(
        t("render.step_output"),
        [t("render.key"), t("render.weight"), "v", t("render.weight_times_v")],
        rows,
        width,
        footer=footer,
        right=(1,),
    )


def _bar(weight: float) -> str:
    eighths = round(weight * BAR_WIDTH * 8)
    return "█" * (eighths // 8) + (_EIGHTHS[eighths % 8] if eighths % 8 else "")


def _matrices(head: HeadSteps, problem: Problem, view: View, width: int) -> list[RenderableType]:
    p = view.precision
    rows = []
    for i, name in enumerate(problem.query_tokens):
        cells: list[str | Text] = [name]
        best = int(np.argmax(head.weights[i]))
        for j in range(len(problem.tokens)):
            if not problem.mask[i, j]:
                cells.append(Text("·", style="dim"))
            else:
                cells.append(Text(fixed(float(head.weights[i, j]), p), style="bold" if j == best else ""))
        rows.append(cells)
    columns = range(1, len(problem.tokens) + 1)
    weights = table(t("render.weight_matrix_title"), [t("render.query"), *problem.tokens], rows, width, right=columns)
    outputs = [[name, vector(out, p)] for name, out in zip(problem.query_tokens, head.output)]
    hint = [Text(t("render.follow_hint"), style="dim")] if len(problem.query_tokens) > AUTO_FOLLOW else []
    return [
        weights,
        table(t("render.outputs_title"), [t("render.query"), t("render.output")], outputs, width),
        *hint,
        Text(""),
    ]


def _combination(steps: Steps, view: View, width: int) -> list[RenderableType]:
    if steps.concat is None:
        return []
    p = view.precision
    problem = steps.problem
    names = " ‖ ".join(head.head.name for head in steps.heads)
    rows = [[name, vector(row, p)] for name, row in zip(problem.query_tokens, steps.concat)]
    out: list[RenderableType] = [
        table(t("render.concat_title", names=names), [t("render.query"), "concat"], rows, width)
    ]
    if problem.w_o is not None:
        w_rows = [[str(i + 1), vector(row, p, "entry")] for i, row in enumerate(problem.w_o)]
        out.append(table(t("render.weight_matrix", name="W_O"), [t("render.row"), "W_O"], w_rows, width))
        final = [[name, vector(row, p)] for name, row in zip(problem.query_tokens, steps.output)]
        out.append(table(t("render.final_title"), [t("render.query"), t("render.output")], final, width))
    return [*out, Text("")]
