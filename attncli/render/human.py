"""The step-by-step explanation on a screen (formats rich and text): the records of `walk` as styled lines."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from attncli import core
from attncli.core import Steps
from attncli.i18n import t
from attncli.render import probes, stack_walk, summary, tiles, walk
from attncli.render.layout import BLANK, Cell, Line, bar, line, table
from attncli.render.walk import View
from attncli.written import MASKED, arithmetic_text, fixed

if TYPE_CHECKING:
    from attncli.layers import StackSteps

BAR_WIDTH = 20


def render(steps: Steps, view: View, width: int, extra: Sequence[Line] = ()) -> list[Line]:
    """The whole explanation as styled lines, laid out for a screen `width` columns wide.

    `extra` (norms, interventions) goes after the result and the backward pass, before the note on rounding.
    """
    backward = _backward(steps, view, width)
    if summary.is_large(steps.problem):
        found = core.overview(steps, summary.kept_rows(steps.problem, view.follow), summary.MAP_SHAPE)
        return [*summary.render(found, view.follow, view.precision, width), *backward, *extra]
    out = [line for item in walk.items(steps, view) for line in _RENDER[type(item)](item, view.precision, width)]
    rounding = line((t("render.rounding_note", precision=view.precision), "dim"))
    return probes.cautioned_once([*out, *backward, *extra, rounding])


def _backward(steps: Steps | StackSteps, view: View, width: int, layer: int | None = None) -> list[Line]:
    """Every gradient, when the problem asks for them (attncli.render.backward_show); a stack's `layer`'s alone."""
    if steps.backward is None:
        return []
    from attncli.render import backward_show

    return backward_show.terminal(steps, view, width, layer)


def render_stack(
    steps: StackSteps, view: View, width: int, layer: int | None = None, rollout: np.ndarray | None = None
) -> list[Line]:
    """A stack's explanation, layer by layer (only `layer` when given), then the rollout when asked for."""
    records = stack_walk.stack_items(steps, view, layer, rollout)
    out = [line for item in records for line in _RENDER[type(item)](item, view.precision, width)]
    out += _backward(steps, view, width, layer)
    return probes.cautioned_once([*out, line((t("render.rounding_note", precision=view.precision), "dim"))])


def _facts(facts: walk.Facts, p: int, width: int) -> list[Line]:
    lines: list[Line] = []
    if facts.title:
        lines.append(line((facts.title, "bold underline")))
    if facts.notes:
        lines.append(line((facts.notes, "italic")))
    lines.append(_fact(t("render.tokens"), ", ".join(facts.tokens)))
    kind = t("render.cross_attention") if facts.cross else t("render.self_attention")
    lines.append(_fact(t("render.queries"), f"{', '.join(facts.query_tokens)} ({kind})"))
    return lines + _rules(facts, p, width)


def _rules(facts: walk.Facts, p: int, width: int) -> list[Line]:
    """The score of each head, the mask, the bias and which keys each query may use."""
    lines = []
    for name, formula in facts.scores:
        prefix = f"{name}: " if name is not None else ""
        lines.append(_fact(t("render.score"), prefix + _score_description(formula, p)))
    lines.append(_fact(t("render.mask"), facts.mask))
    if facts.bias is not None:
        lines.append(_fact(t("render.bias"), facts.bias))
    if facts.positions is not None:
        lines.append(_fact(t("render.positions"), facts.positions))
    return lines + (_access_map(facts, facts.access, width) if facts.access is not None else [BLANK])  # ends blank


def _fact(label: str, value: str) -> Line:
    return line((f"{label}: ", "bold"), value)


def _score_description(formula: walk.Formula, p: int) -> str:
    """The score function, its formula with the scale (1/√d_k = 0.7071 when it is the usual one), and the widths."""
    if formula.kind == "given":
        return formula.words()
    return formula.words(_scaled(walk.FORMULAS[formula.kind].text, formula, p))


def _scaled(compatibility: str, formula: walk.Formula, p: int, root: bool = True) -> str:
    """s = compatibility × the scale, which `root` writes 1/√d_k = 0.7071 when it is the usual one.

    A scale of 1 that no rule asked for (dot, cosine, additive) is left out: × 1.0000 says nothing.
    """
    if formula.root is None and formula.scale == 1:
        return f"s = {compatibility}"
    scale = fixed(formula.scale, p)
    return f"s = {compatibility} × {f'1/√{formula.root} = {scale}' if root and formula.root is not None else scale}"


def _access_map(facts: walk.Facts, access: tuple[tuple[bool, ...], ...], width: int) -> list[Line]:
    """Which keys each query may use (`access`, a row per query): ● allowed, · excluded (access, not weights).

    A table, so that on a narrow screen each query's keys stay listed under its name.
    """
    rows: list[list[Cell]] = [
        [name, *(("●", "green") if allowed else ("·", "dim") for allowed in row)]
        for name, row in zip(facts.query_tokens, access)
    ]
    headers = [t("render.query"), *facts.tokens]
    return table(t("render.access_legend"), headers, rows, width, center=range(1, len(headers)))


def _condensed(item: walk.Condensed, p: int, width: int) -> list[Line]:
    return [line((item.words(), "dim")), BLANK]


def _grid(grid: walk.Grid, width: int) -> list[Line]:
    return table(grid.title, grid.headers, grid.rows, width, right=grid.right)


def _encoded(item: walk.Encoded, p: int, width: int) -> list[Line]:
    return _grid(walk.encoded_grid(item, p), width)


def _rotary(item: walk.Rotary, p: int, width: int) -> list[Line]:
    return [line for grid in walk.rotary_grids(item, p) for line in _grid(grid, width)]


def _head_title(item: walk.HeadTitle, p: int, width: int) -> list[Line]:
    return [line((t("render.head_title", name=item.name), "bold reverse"))]


def _projected(part: walk.Projected, p: int, width: int) -> list[Line]:
    w_rows = [[str(i + 1), row.text(p)] for i, row in enumerate(part.w)]
    out = table(t("render.weight_matrix", name=part.weight), [t("render.row"), part.weight], w_rows, width)
    rows = [[token, x.text(p), r.text(p)] for token, x, r in zip(part.tokens, part.x, part.result)]
    return out + table(f"{part.name} = X·{part.weight}", [t("render.token"), "x", part.name.lower()], rows, width)


def _query(query: walk.Query, p: int, width: int) -> list[Line]:
    q = f"  q = {query.q.text(p)}" if query.q is not None else ""
    return [
        line((t("render.query_heading", name=query.name), "bold"), q),
        *_score_table(query, p, width),
        *_relative_table(query, p, width),
        *_softmax_table(query, p, width),
        *_output_table(query, p, width),
        line((t("render.output_line", name=query.name), "bold"), (query.output.text(p), "bold green")),
        BLANK,
    ]


def _score_table(query: walk.Query, p: int, width: int) -> list[Line]:
    formula = query.formula
    masked = (t("render.masked"), "dim")
    if formula.kind == "given":
        given: list[list[Cell]] = [[key.key, key.score.text(p) if key.allowed else masked] for key in query.keys]
        return table(t("render.step_scores_given"), [t("render.key"), "s"], given, width, right=(1,))
    rows: list[list[Cell]] = [
        [
            key.key,
            key.k.text(p),
            arithmetic_text(key.dot, p),
            *walk.score_cells(key, p, masked),
        ]
        for key in query.keys
        if key.k is not None and key.dot is not None  # every key of scores worked out, as these are
    ]
    spelling = walk.FORMULAS[formula.kind]
    headers = [t("render.key"), "k", spelling.text, *walk.score_headers(query)]
    return table(
        t("render.step_scores", formula=_scaled(spelling.spelled, formula, p, root=False)),
        headers,
        rows,
        width,
        right=range(3, len(headers)),
    )


def _relative_table(query: walk.Query, p: int, width: int) -> list[Line]:
    grid = walk.relative_grid(query, p)
    return [] if grid is None else _grid(grid, width)


def _softmax_table(query: walk.Query, p: int, width: int) -> list[Line]:
    exp_header = walk.exp_label(query, p)
    rows: list[list[Cell]] = []
    for j, key in enumerate(query.keys):
        if not key.allowed:
            rows.append([key.key, (MASKED, "dim"), ("0", "dim"), ("0", "dim"), (t("render.excluded"), "dim")])
            continue
        style = "bold" if j == query.best else ""
        weight = (key.weight.text(p), style)
        rows.append([key.key, key.score.text(p), key.exp.text(p), weight, (bar(key.weight.value, BAR_WIDTH), "cyan")])
    total = query.total.text(p)
    return table(
        t("render.step_softmax", exp=exp_header, total=total),
        [t("render.key"), walk.score_headers(query)[-1], exp_header, t("render.weight"), ""],
        rows,
        width,
        footer=[t("render.sum"), "", total, query.weight_sum.text(p), ""],
        right=(1, 2, 3),
    )


def _output_table(query: walk.Query, p: int, width: int) -> list[Line]:
    rows: list[list[Cell]] = [
        [key.key, key.weight.text(p), key.value.text(p), key.contribution.text(p)]
        if key.allowed
        else [key.key, ("0", "dim"), (key.value.text(p), "dim"), (t("render.excluded"), "dim")]
        for key in query.keys
    ]
    return table(
        t("render.step_output"),
        [t("render.key"), t("render.weight"), "v", t("render.weight_times_v")],
        rows,
        width,
        footer=[t("render.sum"), "", "", query.output.text(p)],
        right=(1,),
    )


def worked(shown: tiles.Worked, width: int) -> list[Line]:
    """A table of worked numbers (attncli.render.tiles): its title, the table, then its closing lines."""
    headers = [header if isinstance(header, str) else header.text for header in shown.headers]
    title = f"{shown.words}: {shown.formula.text}"
    out = table(title, headers, shown.rows, width, footer=shown.footer, right=shown.right)
    return [*out, *(line(f"{words} ", (formula.text, "bold")) for words, formula in shown.closing), BLANK]


def _matrix(item: walk.WeightMatrix, p: int, width: int) -> list[Line]:
    outputs = [[name, out.text(p)] for name, out in item.outputs]
    hint = [line((t("render.follow_hint"), "dim")), BLANK] if len(item.outputs) > walk.AUTO_FOLLOW else []
    return [
        *probes.heatmap(item.head, item.problem, p, width),
        *table(t("render.outputs_title"), [t("render.query"), t("render.output")], outputs, width),  # ends blank
        *hint,
    ]


def _combination(item: walk.Combination, p: int, width: int) -> list[Line]:
    names = " ‖ ".join(item.names)
    rows = [[name, row.text(p)] for name, row in zip(item.query_tokens, item.concat)]
    out = table(t("render.concat_title", names=names), [t("render.query"), "concat"], rows, width)
    if item.w_o is not None:
        w_rows = [[str(i + 1), row.text(p)] for i, row in enumerate(item.w_o)]
        out += table(t("render.weight_matrix", name="W_O"), [t("render.row"), "W_O"], w_rows, width)
        final = [[name, row.text(p)] for name, row in zip(item.query_tokens, item.output)]
        out += table(t("render.final_title"), [t("render.query"), t("render.output")], final, width)
    return out


def _stack_facts(facts: stack_walk.StackFacts, p: int, width: int) -> list[Line]:
    lines = [line((facts.title, "bold underline"))] if facts.title else []
    if facts.notes:
        lines.append(line((facts.notes, "italic")))
    lines.append(_fact(t("render.tokens"), ", ".join(facts.tokens)))
    lines.append(_fact(t("render.stack_width"), str(facts.d)))
    rows = [[str(number), name, norm] for number, (name, norm) in enumerate(facts.layers, 1)]
    return [*lines, BLANK, *table(t("render.stack_layers"), ["#", t("render.layer"), t("render.norm")], rows, width)]


def _layer_title(item: stack_walk.LayerTitle, p: int, width: int) -> list[Line]:
    title = t("render.layer_title", number=item.number, count=item.of, name=item.name)
    return [line((title, "bold reverse")), _fact(t("render.norm_label"), item.norm), *_rules(item.facts, p, width)]


def _stream(item: stack_walk.Stream, p: int, width: int) -> list[Line]:
    rows = [[token, row.text(p)] for token, row in zip(item.tokens, item.rows)]
    title = t(f"render.stream_{item.kind}", formula=item.formula)
    return table(title, [t("render.token"), item.name], rows, width)


def _rollout(item: stack_walk.Rollout, p: int, width: int) -> list[Line]:
    """The layer's mean weights (with several heads), then the rollout, each legend naming what it scales."""
    names = (item.tokens, item.tokens)
    out = []
    if item.raw is not None:
        raw_title = t("render.rollout_raw", number=item.last)
        out += probes.weight_map(
            item.raw, *names, raw_title, p, width, "analysis.caution_map", largest_of="analysis.largest_mean"
        )
    rollout_title = t("render.rollout_title", number=item.last)
    caution = "analysis.caution_rollout"
    return [
        *out,
        *probes.weight_map(
            item.rollout, *names, rollout_title, p, width, caution, largest_of="analysis.largest_rollout"
        ),
    ]


_RENDER: dict[type, Callable[..., list[Line]]] = {
    walk.Facts: _facts,
    walk.Condensed: _condensed,
    walk.Encoded: _encoded,
    walk.HeadTitle: _head_title,
    walk.Projected: _projected,
    walk.Rotary: _rotary,
    walk.Query: _query,
    tiles.StableSoftmax: lambda item, p, width: worked(tiles.table(item, p), width),
    tiles.TileTrace: lambda item, p, width: worked(tiles.table(item, p), width),
    walk.WeightMatrix: _matrix,
    walk.Combination: _combination,
    stack_walk.StackFacts: _stack_facts,
    stack_walk.LayerTitle: _layer_title,
    stack_walk.Stream: _stream,
    stack_walk.Rollout: _rollout,
}
