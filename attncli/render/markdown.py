"""The step-by-step as Markdown, to paste into a report or a notebook: facts, then tables for every query."""

from __future__ import annotations

from collections.abc import Sequence

from attncli.core import HeadSteps, Steps
from attncli.i18n import t
from attncli.problem import Problem
from attncli.render import writeup
from attncli.render.numbers import fixed, vector


def render(steps: Steps, precision: int = 4, follow: tuple[str, ...] | None = None) -> str:
    """The whole calculation; `follow` picks the queries written out in detail (default: all, up to three)."""
    problem = steps.problem
    p = precision
    lines = [f"# {_escape(problem.title or t('writeup.title'))}", ""]
    if problem.notes:
        lines += [_escape(problem.notes), ""]
    lines += _facts(steps, p)
    rows = writeup.followed(problem, follow)
    for head in steps.heads:
        if len(steps.heads) > 1:
            lines += [f"## {_escape(head.spec.name)}", ""]
        for part in writeup.projections(head, problem):
            weight_rows = [[str(i + 1), vector(row, p, "entry")] for i, row in enumerate(part.operand.w)]
            lines += _table(t("render.weight_matrix", name=part.weight), [t("render.row"), part.weight], weight_rows)
            result = [
                [token, vector(x, p, "entry"), vector(r, p)]
                for token, x, r in zip(part.tokens, part.operand.x, part.result)
            ]
            lines += _table(f"{part.name} = X·{part.weight}", [t("render.token"), "x", part.name.lower()], result)
        for row in rows:
            lines += _query(head, row, problem, p)
        if len(rows) < len(problem.query_tokens):
            lines += _matrices(head, problem, p)
    lines += _combination(steps, p)
    lines.append(f"_{t('writeup.rounding_note', precision=p)}_")
    return "\n".join(lines) + "\n"


def _facts(steps: Steps, p: int) -> list[str]:
    problem = steps.problem
    kind = t("render.cross_attention") if problem.cross else t("render.self_attention")
    lines = [
        f"- **{t('render.tokens')}:** {_escape(', '.join(problem.tokens))}",
        f"- **{t('render.queries')}:** {_escape(', '.join(problem.query_tokens))} ({kind})",
    ]
    for head in steps.heads:
        prefix = f"{_escape(head.spec.name)}: " if len(steps.heads) > 1 else ""
        lines.append(f"- **{t('render.score')}:** {prefix}{writeup.score_facts(head)}; {_formula(head, p)}")
    lines.append(f"- **{t('render.mask')}:** {writeup.mask_facts(problem)}")
    if writeup.masked(problem):
        for row, name in enumerate(problem.query_tokens):
            lines.append(
                f"  - {t('writeup.may_use', query=_escape(name), keys=_escape(writeup.allowed(problem, row)))}"
            )
    return [*lines, ""]


def _formula(head: HeadSteps, p: int) -> str:
    """The score formula with this head's scale: s = q·k / √2, s = q·k × 0.5000, ..."""
    score = head.spec.score
    if score.kind == "given":
        return t("writeup.scores_given")
    raw = writeup.RAW[score.kind]
    if writeup.default_scale(head):
        return f"s = {raw} / √{head.keys.shape[1]}"
    return f"s = {raw}" if score.scale == 1 else f"s = {raw} × {fixed(score.scale, p)}"


def _query(head: HeadSteps, row: int, problem: Problem, p: int) -> list[str]:
    name = problem.query_tokens[row]
    lines = [f"### {t('render.query_heading', name=_escape(name))}", ""]
    if head.queries is not None:
        lines += [f"q = {vector(head.queries[row], p, 'entry')}", ""]
    lines += _scores(head, row, problem, p)
    lines += _softmax(head, row, problem, p)
    lines += _mix(head, row, problem, p)
    return [*lines, f"**{t('writeup.output_line', name=_escape(name))}:** {vector(head.output[row], p)}", ""]


def _scores(head: HeadSteps, row: int, problem: Problem, p: int) -> list[str]:
    kind = head.spec.score.kind
    title = f"{t('writeup.step_scores')}: {_formula(head, p)}"
    rows = []
    for j, key in enumerate(problem.tokens):
        s = fixed(head.scores[row, j], p) if problem.mask[row, j] else t("render.masked")
        if kind == "given":
            rows.append([_escape(key), s])
        else:
            rows.append([_escape(key), vector(head.keys[j], p, "entry"), _raw(head, row, j, p), s])
    headers = [t("render.key"), "s"] if kind == "given" else [t("render.key"), "k", writeup.RAW[kind], "s"]
    return _table(title, headers, rows, right=(len(headers) - 1,))


def _raw(head: HeadSteps, row: int, j: int, p: int) -> str:
    """q·k written out term by term when short enough to follow by hand."""
    value = fixed(head.compatibility[row, j], p)
    if writeup.written_out(head):
        return f"{writeup.dot_terms(head.queries[row], head.keys[j], p)} = {value}"
    return value


def _softmax(head: HeadSteps, row: int, problem: Problem, p: int) -> list[str]:
    exp = writeup.exp_label(float(head.shift[row]), p)
    total = fixed(float(head.exp[row].sum()), p)
    rows = []
    for j, key in enumerate(problem.tokens):
        if problem.mask[row, j]:
            rows.append(
                [
                    _escape(key),
                    fixed(head.scores[row, j], p),
                    fixed(head.exp[row, j], p),
                    fixed(head.weights[row, j], p),
                ]
            )
        else:
            rows.append([_escape(key), t("render.masked"), "0", "0"])
    rows.append([f"**{t('render.sum')}**", "", total, fixed(float(head.weights[row].sum()), p)])
    title = f"{t('writeup.step_softmax')}: {t('render.weight')} = {exp} / Σ {exp} = {exp} / {total}"
    return _table(title, [t("render.key"), "s", exp, t("render.weight")], rows, right=(1, 2, 3))


def _mix(head: HeadSteps, row: int, problem: Problem, p: int) -> list[str]:
    rows = []
    for j, key in enumerate(problem.tokens):
        weight = float(head.weights[row, j])
        contribution = vector(weight * head.values[j], p) if problem.mask[row, j] else t("render.masked")
        rows.append([_escape(key), fixed(weight, p), vector(head.values[j], p, "entry"), contribution])
    rows.append([f"**{t('render.sum')}**", "", "", vector(head.output[row], p)])
    title = f"{t('writeup.step_output')}: {t('render.output')} = Σ {t('render.weight')} × v"
    return _table(title, [t("render.key"), t("render.weight"), "v", f"{t('render.weight')} × v"], rows, right=(1,))


def _matrices(head: HeadSteps, problem: Problem, p: int) -> list[str]:
    weights = [
        [_escape(name), *(fixed(float(w), p) if ok else "·" for w, ok in zip(head.weights[i], problem.mask[i]))]
        for i, name in enumerate(problem.query_tokens)
    ]
    columns = range(1, len(problem.tokens) + 1)
    headers = [t("render.query"), *(_escape(name) for name in problem.tokens)]
    outputs = [[_escape(name), vector(out, p)] for name, out in zip(problem.query_tokens, head.output)]
    return [
        *_table(t("render.weight_matrix_title"), headers, weights, right=columns),
        *_table(t("render.outputs_title"), [t("render.query"), t("render.output")], outputs),
    ]


def _combination(steps: Steps, p: int) -> list[str]:
    if steps.concat is None:
        return []
    problem = steps.problem
    names = " ‖ ".join(_escape(head.spec.name) for head in steps.heads)
    rows = [[_escape(name), vector(row, p)] for name, row in zip(problem.query_tokens, steps.concat)]
    lines = _table(f"{t('writeup.concat_title')}: {names}", [t("render.query"), "concat"], rows)
    if problem.w_o is not None:
        w_rows = [[str(i + 1), vector(row, p, "entry")] for i, row in enumerate(problem.w_o)]
        lines += _table(t("render.weight_matrix", name="W_O"), [t("render.row"), "W_O"], w_rows)
        final = [[_escape(name), vector(row, p)] for name, row in zip(problem.query_tokens, steps.output)]
        lines += _table(t("render.final_title"), [t("render.query"), t("render.output")], final)
    return lines


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """A bold title and a pipe table; columns in `right` align right, so numbers line up."""
    rule = ["---:" if c in right else "---" for c in range(len(headers))]
    body = [f"| {' | '.join(_cell(cell) for cell in row)} |" for row in rows]
    return [f"**{title}**", "", f"| {' | '.join(_cell(h) for h in headers)} |", f"| {' | '.join(rule)} |", *body, ""]


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or " "


def _escape(text: str) -> str:
    """User text (titles, token names) with Markdown's own characters made literal."""
    return "".join(f"\\{c}" if c in "\\`*_[]<>#" else c for c in str(text))
