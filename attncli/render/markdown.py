"""The step-by-step as Markdown, to paste into a report or a notebook: the records of `walk` as text and tables."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from attncli.core import Steps
from attncli.errors import printable
from attncli.i18n import t
from attncli.layers import StackSteps
from attncli.render import sheets, stack_walk, tiles, walk
from attncli.written import arithmetic_text, fixed


def render(steps: Steps, precision: int = 4, follow: tuple[str, ...] | None = None, heatmap: bool = False) -> str:
    """The whole calculation; `follow` picks the queries written out in detail (default: all, up to three);
    `heatmap` shows the weight matrix even of one query."""
    lines = [
        line
        for item in walk.items(steps, walk.View(precision, follow, heatmap))
        for line in _RENDER[type(item)](item, precision)
    ]
    lines += _backward(steps, precision, follow)
    lines.append(f"_{t('writeup.rounding_note', precision=precision)}_")
    return "\n".join(lines) + "\n"


def sheet(steps: Steps) -> str:
    """The exercise to hand out: what it gives, and empty grids for the scores, weights and outputs."""
    paper = sheets.sheet(steps)
    lines = _facts(paper.facts, 4)
    lines[2:2] = [f"{t('writeup.sheet_name')} ____________________", ""]
    lines[-1:-1] = ["", paper.task]
    lines += [f"## {t('writeup.sheet_given')}", ""]
    lines += [line for given in paper.inputs for line in _given(given)]
    for name, givens in paper.heads:
        lines += [f"### {escape(name)}", ""] if name is not None else []
        lines += [line for given in givens for line in _given(given)]
    lines += [line for given in paper.shared for line in _given(given)]
    lines += [f"## {t('writeup.sheet_answers')}", ""]
    queries = [escape(name) for name in paper.query_tokens]
    keys = [t("render.query"), *(escape(name) for name in paper.tokens)]
    for name, _ in paper.heads:
        lines += [f"### {escape(name)}", ""] if name is not None else []
        for title in ("writeup.sheet_scores", "writeup.sheet_weights"):
            lines += _table(t(title), keys, [[query, *[""] * len(paper.tokens)] for query in queries])
        lines += _table(t("render.outputs_title"), [t("render.query"), t("render.output")], [[q, ""] for q in queries])
    if steps.problem.w_o is not None:
        lines += _table(t("writeup.sheet_final"), [t("render.query"), t("render.output")], [[q, ""] for q in queries])
    return "\n".join(lines).rstrip("\n") + "\n"


def _given(given: sheets.Given) -> list[str]:
    rows = [[escape(name), f"[{', '.join(row)}]"] for name, row in zip(given.row_names, given.rows)]
    return _table(given.name, [given.label, given.name], rows)


def render_stack(
    steps: StackSteps,
    precision: int = 4,
    follow: tuple[str, ...] | None = None,
    layer: int | None = None,
    rollout: np.ndarray | None = None,
    *,
    heatmap: bool = False,
) -> str:
    """A stack layer by layer (only `layer` when given), then `rollout` when given."""
    records = stack_walk.stack_items(steps, walk.View(precision, follow, heatmap), layer, rollout)
    lines = [line for item in records for line in _RENDER[type(item)](item, precision)]
    lines += _backward(steps, precision, follow, layer)
    lines.append(f"_{t('writeup.rounding_note', precision=precision)}_")
    return "\n".join(lines) + "\n"


def _backward(
    steps: Steps | StackSteps, precision: int, follow: tuple[str, ...] | None, layer: int | None = None
) -> list[str]:
    """Every gradient, when the problem asks for them (attncli.render.backward_show's records): a heading per
    section, the notes as paragraphs, pipe tables; a stack's `layer`'s alone when given."""
    if steps.backward is None:
        return []
    from attncli.render import backward_show, backward_walk

    out: list[str] = []
    for item in backward_show.records(steps, walk.View(precision, follow), layer):
        if isinstance(item, backward_walk.Section):
            out += [f"{'#' * (item.level + 1)} {escape(item.title)}", ""]
        elif isinstance(item, backward_walk.Note):
            out += [escape(item.text), ""]
        else:
            out += _grid(item)
    return out


def _facts(facts: walk.Facts, p: int) -> list[str]:
    lines = [f"# {escape(facts.title or t('writeup.title'))}", ""]
    if facts.notes:
        lines += [escape(facts.notes), ""]
    kind = t("render.cross_attention") if facts.cross else t("render.self_attention")
    lines += [
        f"- **{t('render.tokens')}:** {escape(', '.join(facts.tokens))}",
        f"- **{t('render.queries')}:** {escape(', '.join(facts.query_tokens))} ({kind})",
    ]
    return lines + _rules(facts, p)


def _rules(facts: walk.Facts, p: int) -> list[str]:
    """The score of each head, the mask, the bias and which keys each query may use, as a list."""
    lines = []
    for name, formula in facts.scores:
        prefix = f"{escape(name)}: " if name is not None else ""
        lines.append(f"- **{t('render.score')}:** {prefix}{formula.words()}; {_formula(formula, p)}")
    lines.append(f"- **{t('render.mask')}:** {facts.mask}")
    if facts.bias is not None:
        lines.append(f"- **{t('render.bias')}:** {facts.bias}")
    if facts.positions is not None:
        lines.append(f"- **{t('render.positions')}:** {facts.positions}")
    for name, row in zip(facts.query_tokens, facts.access or ()):
        keys = ", ".join(key for key, ok in zip(facts.tokens, row) if ok)
        lines.append(f"  - {t('writeup.may_use', query=escape(name), keys=escape(keys))}")
    return [*lines, ""]


def _condensed(item: walk.Condensed, p: int) -> list[str]:
    return [f"_{escape(item.words())}_", ""]


def _formula(formula: walk.Formula, p: int) -> str:
    """The score formula with this head's scale: s = q·k / √2, s = q·k × 0.5000, ..."""
    if formula.kind == "given":
        return t("writeup.scores_given")
    raw = walk.FORMULAS[formula.kind].text
    if formula.root is not None:
        return f"s = {raw} / √{formula.root}"
    return f"s = {raw}" if formula.scale == 1 else f"s = {raw} × {fixed(formula.scale, p)}"


def _grid(grid: walk.Grid) -> list[str]:
    rows = [[escape(row[0]), *row[1:]] for row in grid.rows]  # the first column names tokens
    return _table(grid.title, grid.headers, rows, right=grid.right)


def _encoded(item: walk.Encoded, p: int) -> list[str]:
    return _grid(walk.encoded_grid(item, p))


def _rotary(item: walk.Rotary, p: int) -> list[str]:
    return [line for grid in walk.rotary_grids(item, p) for line in _grid(grid)]


def _head_title(item: walk.HeadTitle, p: int) -> list[str]:
    return [f"## {escape(item.name)}", ""]


def _projected(part: walk.Projected, p: int) -> list[str]:
    weight_rows = [[str(i + 1), row.text(p)] for i, row in enumerate(part.w)]
    lines = _table(t("render.weight_matrix", name=part.weight), [t("render.row"), part.weight], weight_rows)
    result = [[token, x.text(p), r.text(p)] for token, x, r in zip(part.tokens, part.x, part.result)]
    return lines + _table(f"{part.name} = X·{part.weight}", [t("render.token"), "x", part.name.lower()], result)


def _query(query: walk.Query, p: int) -> list[str]:
    name = escape(query.name)
    lines = [f"### {t('render.query_heading', name=name)}", ""]
    if query.q is not None:
        lines += [f"q = {query.q.text(p)}", ""]
    lines += _scores(query, p)
    relative = walk.relative_grid(query, p)
    lines += [] if relative is None else _grid(relative)
    lines += _softmax(query, p)
    lines += _mix(query, p)
    return [*lines, f"**{t('writeup.output_line', name=name)}:** {query.output.text(p)}", ""]


def _scores(query: walk.Query, p: int) -> list[str]:
    kind = query.formula.kind
    rows = []
    for key in query.keys:
        s = key.score.text(p) if key.allowed else t("render.masked")
        if key.k is None or key.dot is None:  # the scores were given: no key vectors, no arithmetic
            rows.append([escape(key.key), s])
        else:
            cells = walk.score_cells(key, p, t("render.masked"))
            rows.append([escape(key.key), key.k.text(p), arithmetic_text(key.dot, p), *cells])
    headers = [t("render.key"), "s"]
    if kind != "given":
        headers = [t("render.key"), "k", walk.FORMULAS[kind].text, *walk.score_headers(query)]
    title = f"{t('writeup.step_scores')}: {_formula(query.formula, p)}"
    return _table(title, headers, rows, right=(len(headers) - 1,))


def _softmax(query: walk.Query, p: int) -> list[str]:
    exp = walk.exp_label(query, p)
    total = query.total.text(p)
    rows = [
        [escape(key.key), key.score.text(p), key.exp.text(p), key.weight.text(p)]
        if key.allowed
        else [escape(key.key), t("render.masked"), "0", "0"]
        for key in query.keys
    ]
    rows.append([f"**{t('render.sum')}**", "", total, query.weight_sum.text(p)])
    title = f"{t('writeup.step_softmax')}: {t('render.weight')} = {exp} / Σ {exp} = {exp} / {total}"
    score = walk.score_headers(query)[-1]
    return _table(title, [t("render.key"), score, exp, t("render.weight")], rows, right=(1, 2, 3))


def _mix(query: walk.Query, p: int) -> list[str]:
    rows = [
        [
            escape(key.key),
            key.weight.text(p),
            key.value.text(p),
            key.contribution.text(p) if key.allowed else t("render.masked"),
        ]
        for key in query.keys
    ]
    rows.append([f"**{t('render.sum')}**", "", "", query.output.text(p)])
    title = f"{t('writeup.step_output')}: {t('render.output')} = Σ {t('render.weight')} × v"
    return _table(title, [t("render.key"), t("render.weight"), "v", f"{t('render.weight')} × v"], rows, right=(1,))


def worked(shown: tiles.Worked) -> list[str]:
    """A table of worked numbers (attncli.render.tiles): its title, the table, then its closing lines."""
    headers = [escape(header) if isinstance(header, str) else header.text for header in shown.headers]
    rows = [[escape(row[0]), *row[1:]] for row in shown.rows]
    if shown.footer:
        rows.append([f"**{shown.footer[0]}**", *shown.footer[1:]])
    lines = _table(f"{escape(shown.words)}: {shown.formula.text}", headers, rows, right=shown.right)
    return [*lines, *(f"{escape(words)} {formula.text}\n" for words, formula in shown.closing)]


def _matrix(item: walk.WeightMatrix, p: int) -> list[str]:
    weights = [[escape(name), *("·" if w is None else w.text(p) for w in row)] for name, row in item.weights]
    headers = [t("render.query"), *(escape(name) for name in item.tokens)]
    outputs = [[escape(name), out.text(p)] for name, out in item.outputs]
    return [
        *_table(t("render.weight_matrix_title"), headers, weights, right=range(1, len(headers))),
        *_table(t("render.outputs_title"), [t("render.query"), t("render.output")], outputs),
    ]


def _combination(item: walk.Combination, p: int) -> list[str]:
    names = " ‖ ".join(escape(name) for name in item.names)
    rows = [[escape(name), row.text(p)] for name, row in zip(item.query_tokens, item.concat)]
    lines = _table(f"{t('writeup.concat_title')}: {names}", [t("render.query"), "concat"], rows)
    if item.w_o is not None:
        w_rows = [[str(i + 1), row.text(p)] for i, row in enumerate(item.w_o)]
        lines += _table(t("render.weight_matrix", name="W_O"), [t("render.row"), "W_O"], w_rows)
        final = [[escape(name), row.text(p)] for name, row in zip(item.query_tokens, item.output)]
        lines += _table(t("render.final_title"), [t("render.query"), t("render.output")], final)
    return lines


def _table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> list[str]:
    """A bold title and a pipe table; columns in `right` align right, so numbers line up."""
    rule = ["---:" if c in right else "---" for c in range(len(headers))]
    body = [f"| {' | '.join(cell(text) or ' ' for text in row)} |" for row in rows]
    return [
        f"**{title}**",
        "",
        f"| {' | '.join(cell(h) or ' ' for h in headers)} |",
        f"| {' | '.join(rule)} |",
        *body,
        "",
    ]


def cell(text: str) -> str:
    """Text for a table cell: control characters escaped (as on a terminal), a pipe made literal."""
    return printable(text).replace("|", "\\|")


def escape(text: str) -> str:
    """User text (titles, token names) with Markdown's own characters made literal, control characters escaped
    (line breaks kept: notes written on several lines)."""
    return "".join(f"\\{c}" if c in "\\`*_[]<>#" else c for c in printable(str(text), lines=True))


def _stack_facts(facts: stack_walk.StackFacts, p: int) -> list[str]:
    lines = [f"# {escape(facts.title or t('writeup.title'))}", ""]
    if facts.notes:
        lines += [escape(facts.notes), ""]
    lines += [
        f"- **{t('render.tokens')}:** {escape(', '.join(facts.tokens))}",
        f"- **{t('render.stack_width')}:** {facts.d}",
        "",
    ]
    rows = [[str(number), escape(name), norm] for number, (name, norm) in enumerate(facts.layers, 1)]
    return lines + _table(t("render.stack_layers"), ["#", t("render.layer"), t("render.norm")], rows)


def _layer_title(item: stack_walk.LayerTitle, p: int) -> list[str]:
    title = t("render.layer_title", number=item.number, count=item.of, name=escape(item.name)).strip()
    return [f"## {title}", "", f"- **{t('render.norm_label')}:** {item.norm}", *_rules(item.facts, p)]


def _stream(item: stack_walk.Stream, p: int) -> list[str]:
    rows = [[escape(token), row.text(p)] for token, row in zip(item.tokens, item.rows)]
    return _table(t(f"render.stream_{item.kind}", formula=item.formula), [t("render.token"), item.name], rows)


def _rollout(item: stack_walk.Rollout, p: int) -> list[str]:
    headers = [t("render.query"), *(escape(name) for name in item.tokens)]
    lines = []
    shown = [(t("render.rollout_raw", number=item.last), item.raw)] if item.raw is not None else []
    for title, matrix in (*shown, (t("render.rollout_title", number=item.last), item.rollout)):
        rows = [[escape(name), *(fixed(float(w), p) for w in row)] for name, row in zip(item.tokens, matrix)]
        lines += _table(title, headers, rows, right=range(1, len(headers)))
    return [*lines, f"_{t('analysis.caution_rollout')}_", ""]


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
    walk.WeightMatrix: _matrix,
    walk.Combination: _combination,
    stack_walk.StackFacts: _stack_facts,
    stack_walk.LayerTitle: _layer_title,
    stack_walk.Stream: _stream,
    stack_walk.Rollout: _rollout,
}
