"""What every human format shows of the backward pass, in order, decided once: headings, notes and tables.

As attncli.render.walk does for the forward steps, `items` turns the backward record
(attncli.backward) into small records whose numbers are already written as text: the
terminal, Markdown and LaTeX only lay them out (attncli.render.backward_show), so they cannot
disagree. The order follows the gradient: dO, W_O and the concatenation, then each head (its
followed queries written out term by term, each key's dk and dv, RoPE's turn back, the
projections), the shared key/value heads, the inputs; a stack from its last layer to its first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attncli.backward import Gradients, HeadGradients, LayerGradients, StackGradients
from attncli.core import HeadSteps, Steps
from attncli.i18n import t
from attncli.problem import Backward, Norm, Problem, Projection
from attncli.render.formats import MAX_KEYS, MAX_QUERIES, condensed
from attncli.render.walk import Grid, View, followed, head_title
from attncli.written import (
    DOWN,
    ENTRY,
    FIXED,
    GAPS,
    WRITE_OUT,
    Num,
    fixed,
    names_of,
    rows,
    shown_of,
    sum_of_products,
    vec,
)

if TYPE_CHECKING:
    from attncli.layers import LayerSteps, StackSteps

MASKED = "·"  # a masked cell of dS: no gradient reaches it
TURNED = "\u0303"  # the combining tilde of q̃, k̃: RoPE's turned vectors
FIELDS = {"grad_queries": ("dQ", "query"), "grad_keys": ("dK", "token"), "grad_values": ("dV", "token"),
          "grad_w_q": ("dW_Q", "row"), "grad_w_k": ("dW_K", "row"), "grad_w_v": ("dW_V", "row")}  # fmt: skip


class Section(NamedTuple):
    """A heading: the backward pass itself (level 1), a head or a layer (level 2)."""

    title: str
    level: int


class Note(NamedTuple):
    """A sentence or a formula between tables."""

    text: str


Item = Section | Note | Grid


class _Shown(NamedTuple):
    """How one problem is shown: its decimals, the queries followed, whether its matrices are condensed."""

    view: View
    short: bool

    @property
    def p(self) -> int:
        return self.view.precision


def items(steps: Steps, view: View) -> list[Item]:
    """Everything a human format shows of `steps.backward`, after the forward steps."""
    shown = _Shown(view, condensed(steps.problem))
    out = _upstream(steps.problem.backward, steps.backward, steps.output, (steps.problem.query_tokens, "query"), shown)
    return out + attention(steps, steps.backward, shown)


def stack_items(steps: StackSteps, view: View, layer: int | None = None) -> list[Item]:
    """A stack's backward pass: dO of the last stream, then each layer from the last to the first (only `layer`,
    counted from 1, when given, as the forward steps show it alone: it ends with the gradient of the stream it
    reads), then dx."""
    record, tokens = steps.backward, steps.stack.tokens
    shown = _Shown(view, len(tokens) > MAX_KEYS)
    out = _upstream(steps.stack.backward, record, steps.output, (tokens, "token"), shown)
    count = len(steps.layers)
    for number in range(count, 0, -1) if layer is None else (layer,):
        out += _layer(steps.layers[number - 1], record.layers[number - 1], number, count, tokens, shown)
    if layer is not None:
        return out
    return [*out, _rows_grid(t("backward.grad_x_stack"), tokens, "token", record.grad_x, "dx", shown)]


def _upstream(
    asked: Backward,
    record: Gradients | StackGradients,
    output: np.ndarray,
    rows_of: tuple[Sequence[str], str],
    shown: _Shown,
) -> list[Item]:
    """The heading, the loss in words with its value, dO row by row (beside O and T for a target), the rules.

    `rows_of`: the output's rows' names and what they are (query, or token for a stack).
    """
    names, label = rows_of
    out: list[Item] = [Section(t("backward.title"), 1)]
    if asked.loss == "target":
        out.append(Note(t("backward.loss_target", value=fixed(record.loss, shown.p))))
        columns = zip(_rows(output, shown), _rows(asked.target, shown, ENTRY), _rows(record.grad_output, shown))
        lines = [[name, *(row.text(shown.p) for row in three)] for name, three in zip(_names(names, shown), columns)]
        out.append(Grid(t("backward.grad_output_target"), [t(f"render.{label}"), "O", "T", "dO = O − T"], lines, ()))
    else:
        words = (
            t("backward.given")
            if asked.loss == "grad_output"
            else t("backward.loss_sum", value=fixed(record.loss, shown.p))
        )
        out += [Note(words), _rows_grid("dO", names, label, record.grad_output, "dO", shown, ENTRY)]
    return [*out, Note(t("backward.rules"))]


def attention(steps: Steps, record: Gradients, shown: _Shown, name: str = "dO") -> list[Item]:
    """One attention problem backwards: W_O and the split, every head, the kv heads, the shared fields, dX."""
    problem = steps.problem
    out: list[Item] = []
    if record.grad_w_o is not None:
        concat = t("backward.grad_concat_w_o", name=name)
        out.append(_rows_grid(concat, problem.query_tokens, "query", record.grad_concat, "d(concat)", shown))
        out.append(_rows_grid(t("backward.grad_w_o", name=name), None, "row", record.grad_w_o, "dW_O", shown))
    elif record.grad_concat is not None:
        out.append(Note(t("backward.split", name=name)))
    several = len(steps.heads) > 1
    for head, grads in zip(steps.heads, record.heads):
        if several:
            out.append(Section(t("backward.head_title", name=head_title(head, problem)), 2))
            out.append(_rows_grid(t("backward.grad_head_output"), problem.query_tokens, "query", grads.grad_output,
                                  "dO_h", shown))  # fmt: skip
        out += _head(head, grads, problem, shown)
    for group, kv in enumerate(record.kv_heads):
        summed = {"kv": problem.kv_label(group), "heads": " + ".join(steps.heads[h].spec.label for h in kv.heads)}
        for key, array in zip(("grad_keys", "grad_values", "grad_w_k", "grad_w_v"), kv[1:]):
            if array is not None:
                title = t("backward.kv_sum", field=FIELDS[key][0], **summed)
                out.append(_sum_grid(title, key, kv.heads, array, steps, record, shown))
    for (key, array), (_, readers) in zip(record.shared, problem.shared):
        out.append(_sum_grid(t("backward.shared", field=FIELDS[key][0]), key, readers, array, steps, record, shown))
    if record.grad_bias is not None:
        out.append(_matrix_grid(t("backward.grad_bias_sum"), record.grad_bias, problem, shown, masked=False))
    if record.grad_x is not None:
        out.append(_rows_grid(t("backward.grad_x"), problem.tokens, "token", record.grad_x, "dX", shown))
    if record.grad_x_query is not None:
        title = t("backward.grad_x_query")
        out.append(_rows_grid(title, problem.query_tokens, "query", record.grad_x_query, "dX_query", shown))
    return out


def _head(head: HeadSteps, grads: HeadGradients, problem: Problem, shown: _Shown) -> list[Item]:
    """A head backwards: its followed queries in full, dP and dS whole, each key's dk and dv, RoPE, projections."""
    out: list[Item] = []
    given = head.spec.scores is not None
    for row in followed(problem, shown.view.follow) if len(problem.tokens) <= MAX_KEYS else []:
        out += _query(head, grads, problem, row, shown.p)
    if shown.view.heatmap or len(problem.query_tokens) > 1:
        out.append(_matrix_grid(t("backward.grad_weights_matrix"), grads.grad_weights, problem, shown, masked=False))
        out.append(_matrix_grid(t("backward.grad_scores_matrix"), grads.grad_scores, problem, shown, masked=True))
    if given:
        out.append(_rows_grid(t("backward.grad_values_given"), problem.tokens, "token", grads.grad_values, "dV", shown))
    else:
        out += _keys(head, grads, problem, shown)
        if head.rotation is not None:
            out.append(_turned_back(grads.grad_turned_queries, grads.grad_queries, problem, shown, queries=True))
            out.append(_turned_back(grads.grad_turned_keys, grads.grad_keys, problem, shown, queries=False))
        elif len(problem.query_tokens) > 1:
            out.append(_rows_grid(t("backward.grad_queries"), problem.query_tokens, "query", grads.grad_queries, "dq",
                                  shown))  # fmt: skip
    parts = (("W_Q", head.spec.queries, grads.grad_w_q), ("W_K", head.spec.keys, grads.grad_w_k),
             ("W_V", head.spec.values, grads.grad_w_v))  # fmt: skip
    for weight, operand, gradient in parts:
        if isinstance(operand, Projection) and gradient is not None:
            title = t("backward.grad_weight", weight=weight, letter=weight[-1])
            out.append(_rows_grid(title, None, "row", gradient, f"d{weight}", shown))
    if head.bias is not None:
        out.append(Note(t("backward.grad_bias")))
    return out


def _query(head: HeadSteps, grads: HeadGradients, problem: Problem, row: int, p: int) -> list[Item]:
    """One query key by key: dP = dO·v written out, then D, dS and d(q·k); D again as dO·O; its dq."""
    name = problem.query_tokens[row]
    grad_output = grads.grad_output[row]  # (d_v,)
    given = head.spec.scores is not None
    products = [
        [
            key,
            vec(head.values[j], ENTRY).text(p),
            _dot(grad_output, head.values[j], float(grads.grad_weights[row, j]), p),
        ]
        for j, key in enumerate(problem.tokens)
    ]
    term = fixed(float(grads.row_term[row]), p)
    lines = []
    for j, key in enumerate(problem.tokens):
        weight, dp = float(head.weights[row, j]), float(grads.grad_weights[row, j])
        cells = [key, fixed(weight, p), fixed(dp, p)]
        if problem.mask[row, j]:
            cells += [
                fixed(weight * dp, p),
                fixed(dp - float(grads.row_term[row]), p),
                fixed(float(grads.grad_scores[row, j]), p),
            ]
            cells += [] if given else [fixed(float(grads.grad_dot[row, j]), p)]
        else:
            cells += [MASKED] * (3 if given else 4)
        lines.append(cells)
    headers = [t("render.key"), "P", "dP", "P·dP", "dP − D", "dS"] + ([] if given else ["d(q·k)"])
    lines.append(
        [t("render.sum"), fixed(float(head.weights[row].sum()), p), "", f"D = {term}", "", ""] + ([] if given else [""])
    )
    output = head.output[row]  # (d_v,)
    written = _dot(grad_output, output, float(grad_output @ output), p)
    out: list[Item] = [
        Grid(t("backward.query_products", name=name), [t("render.key"), "v", "dP = dO·v"], products, ()),
        Grid(_softmax_title(name, head, p), headers, lines, tuple(range(1, len(headers)))),
        Note(t("backward.row_term", name=name, written=written, value=term)),
    ]
    return out if given else [*out, _sum_of_keys(head, grads, problem, row, p)]


def _softmax_title(name: str, head: HeadSteps, p: int) -> str:
    """The second table's title: D, dS and, from computed scores, d(q·k) with this head's scale."""
    if head.spec.scores is not None:
        return t("backward.query_title_given", name=name)
    return t("backward.query_title", name=name, scale=fixed(head.spec.score.scale, p))


def _sum_of_keys(head: HeadSteps, grads: HeadGradients, problem: Problem, row: int, p: int) -> Grid:
    """dq of one query: Σ_j d(q·k)_j·k_j over the keys it sees (k̃ and dq̃ with RoPE)."""
    rotation = head.rotation
    keys = head.keys if rotation is None else rotation.keys  # (S, d_k)
    mark = "" if rotation is None else TURNED
    style = ENTRY if rotation is None else FIXED
    lines = [
        [
            key,
            fixed(float(grads.grad_dot[row, j]), p),
            vec(keys[j], style).text(p),
            vec(grads.grad_dot[row, j] * keys[j]).text(p),
        ]
        for j, key in enumerate(problem.tokens)
        if problem.mask[row, j]
    ]
    grad = grads.grad_queries if rotation is None else grads.grad_turned_queries  # (L, d_k)
    lines.append([t("render.sum"), "", "", vec(grad[row]).text(p)])
    headers = [t("render.key"), "d(q·k)", f"k{mark}", f"d(q·k)×k{mark}"]
    return Grid(t("backward.query_sum", name=problem.query_tokens[row], mark=mark), headers, lines, (1,))


def _keys(head: HeadSteps, grads: HeadGradients, problem: Problem, shown: _Shown) -> list[Grid]:
    """Each key's dv = Σ_i P_ij·dO_i and dk = Σ_i d(q·k)_ij·q_i, written out over up to four queries."""
    rotation = head.rotation
    queries = head.queries if rotation is None else rotation.queries  # (L, d_k)
    grad_keys = grads.grad_keys if rotation is None else grads.grad_turned_keys  # (S, d_k)
    mark = "" if rotation is None else TURNED
    style = ENTRY if rotation is None else FIXED
    kept, gap = shown_of(len(problem.tokens), shown.short)
    values, keys = [], []
    for j in kept:
        seen = problem.mask[:, j]
        values.append(
            [
                problem.tokens[j],
                _weighted(head.weights[:, j], grads.grad_output, ENTRY, grads.grad_values[j], seen, shown.p),
            ]
        )
        keys.append([problem.tokens[j], _weighted(grads.grad_dot[:, j], queries, style, grad_keys[j], seen, shown.p)])
    if gap is not None:
        values.insert(gap, [GAPS[DOWN]] * 2)
        keys.insert(gap, [GAPS[DOWN]] * 2)
    return [
        Grid(t("backward.values_title"), [t("render.key"), "dv = Σ P·dO"], values, ()),
        Grid(t("backward.keys_title", mark=mark), [t("render.key"), f"dk{mark} = Σ d(q·k)·q{mark}"], keys, ()),
    ]


def _turned_back(turned: np.ndarray, grad: np.ndarray, problem: Problem, shown: _Shown, queries: bool) -> Grid:
    """RoPE backwards: each dq̃ (or dk̃) turned by −m·θ_i, the gradient of the unturned vector."""
    encoding = problem.positions
    names, at = (problem.query_tokens, encoding.query_at) if queries else (problem.tokens, encoding.key_at)
    letter, p = "q" if queries else "k", shown.p
    kept, gap = shown_of(len(names), shown.short)
    lines = [[names[i], Num(float(at[i]), ENTRY).text(p), vec(turned[i]).text(p), vec(grad[i]).text(p)] for i in kept]
    if gap is not None:
        lines.insert(gap, [GAPS[DOWN]] * 4)
    headers = [t("render.token"), "m", f"d{letter}{TURNED}", f"d{letter} = R(−m·θ)·d{letter}{TURNED}"]
    return Grid(t(f"backward.turn_back_{letter}"), headers, lines, (1,))


def _layer(
    steps: LayerSteps, record: LayerGradients, number: int, count: int, tokens: tuple[str, ...], shown: _Shown
) -> list[Item]:
    """A layer backwards: through its norm (post), its attention, its norm (pre), the residual's two paths."""
    norm = steps.layer.norm
    place = None if norm is None else norm.place
    out: list[Item] = [Section(t("backward.layer_title", number=number, count=count, name=steps.layer.label), 2)]
    leaves = f"dX{_sub(number + 1)}"
    out.append(
        _rows_grid(t("backward.grad_layer_output", name=leaves), tokens, "token", record.grad_output, leaves, shown)
    )
    if place == "post":
        out += _norm(steps.residual, record.grad_output, record.grad_residual, norm, tokens, shown, "post")
    out += attention(steps.attention, record.attention, shown, name="dA")
    if place == "pre":
        out += _norm(steps.input, record.grad_normed, record.grad_branch, norm, tokens, shown, "pre")
    residual = record.grad_residual if place == "post" else record.grad_output  # (S, d)
    parts = zip(_rows(residual, shown), _rows(record.grad_branch, shown), _rows(record.grad_input, shown))
    lines = [[token, *(row.text(shown.p) for row in three)] for token, three in zip(_names(tokens, shown), parts)]
    reads = f"dX{_sub(number)}"
    headers = [t("render.token"), t("backward.residual_path"), t("backward.attention_path"), reads]
    return [*out, Grid(t("backward.grad_input", name=reads), headers, lines, ())]


def _norm(
    rows_in: np.ndarray,
    grad: np.ndarray,
    result: np.ndarray,
    norm: Norm,
    tokens: Sequence[str],
    shown: _Shown,
    place: str,
) -> list[Item]:
    """A norm backwards, token by token: x̂, dx̂ = dy ∘ gain, the means, σ (or RMSNorm's root), dx."""
    from attncli.layers import norm_parts

    centred, root = norm_parts(rows_in, norm)  # (S, d), (S, 1)
    hat = centred / root  # (S, d) x̂
    grad_hat = grad * norm.gain if norm.gain is not None else grad  # (S, d)
    layer, p = norm.kind == "layer", shown.p
    kept, gap = shown_of(len(tokens), shown.short)
    lines = []
    for i in kept:
        cells = [tokens[i], vec(hat[i]).text(p), vec(grad_hat[i]).text(p)]
        cells += [fixed(float(grad_hat[i].mean()), p)] if layer else []
        cells += [fixed(float((grad_hat[i] * hat[i]).mean()), p), fixed(float(root[i, 0]), p), vec(result[i]).text(p)]
        lines.append(cells)
    hat_name, grad_name = "x\u0302", "dx\u0302"
    headers = [t("render.token"), hat_name, f"{grad_name} = dy{'∘g' if norm.gain is not None else ''}"]
    headers += [f"mean({grad_name})"] if layer else []
    headers += [f"mean({grad_name}∘{hat_name})", "σ" if layer else "r", "dx"]
    if gap is not None:
        lines.insert(gap, [GAPS[DOWN]] * len(headers))
    return [
        Note(t(f"backward.norm_{norm.kind}_{place}")),
        Grid(t(f"backward.norm_title_{norm.kind}"), headers, lines, ()),
    ]


# Writing numbers out


def _dot(a: np.ndarray, b: np.ndarray, value: float, p: int) -> str:
    """a·b term by term, up to WRITE_OUT coordinates, as the forward writes q·k: 1×2 − 1×(−1) = 3.0000."""
    if len(a) > WRITE_OUT:
        return fixed(value, p)
    terms = sum_of_products((x.text(p), y.text(p)) for x, y in zip(vec(a, ENTRY).cells, vec(b, ENTRY).cells))
    return f"{terms} = {fixed(value, p)}"


def _weighted(weights: np.ndarray, vectors: np.ndarray, style: str, value: np.ndarray, seen: np.ndarray, p: int) -> str:
    """Σ_i w_i·v_i over the rows that see the key, written out up to WRITE_OUT of them, a negative weight's term
    subtracted: 0.2726×[2, 0] − 0.2458×[1, 1] = [0.2994, -0.2458]."""
    kept = np.flatnonzero(seen)
    result = vec(value).text(p)
    if not 0 < len(kept) <= WRITE_OUT:
        return result
    terms = sum_of_products((fixed(float(weights[i]), p), vec(vectors[i], style).text(p)) for i in kept)
    return f"{terms} = {result}"


def _rows_grid(
    title: str,
    names: Sequence[str] | None,
    label: str,
    matrix: np.ndarray,
    header: str,
    shown: _Shown,
    style: str = FIXED,
) -> Grid:
    """A matrix as a table, a row per name (a token, a query), or per row number of a weight matrix (`names` None)."""
    names = tuple(str(i + 1) for i in range(len(matrix))) if names is None else tuple(names)
    lines = [[name, row.text(shown.p)] for name, row in zip(_names(names, shown), _rows(matrix, shown, style))]
    return Grid(title, [t(f"render.{label}"), header], lines, ())


def _sum_grid(
    title: str, key: str, readers: Sequence[int], total: np.ndarray, steps: Steps, record: Gradients, shown: _Shown
) -> Grid:
    """A gradient several heads add up to: each reader's share side by side, then the sum, row by row."""
    field, label = FIELDS[key]
    names = _row_names(label, steps.problem) or tuple(str(i + 1) for i in range(len(total)))
    shares = [_rows(getattr(record.heads[h], key), shown) for h in readers]
    lines = [
        [name, *(rows_of[i].text(shown.p) for rows_of in shares), row.text(shown.p)]
        for i, (name, row) in enumerate(zip(_names(names, shown), _rows(total, shown)))
    ]
    headers = [t(f"render.{label}"), *(f"{field} ({steps.heads[h].spec.label})" for h in readers), field]
    return Grid(title, headers, lines, ())


def _row_names(label: str, problem: Problem) -> tuple[str, ...] | None:
    return {"query": problem.query_tokens, "token": problem.tokens}.get(label)


def _rows(matrix: np.ndarray, shown: _Shown, style: str = FIXED) -> tuple:
    """A matrix's rows as `rows` writes them: condensed to its corners with the problem."""
    return rows(matrix, style, shown.short or len(matrix) > MAX_QUERIES)


def _names(names: Sequence[str], shown: _Shown) -> tuple[str, ...]:
    return names_of(tuple(names), shown.short or len(names) > MAX_QUERIES)


def _matrix_grid(title: str, matrix: np.ndarray, problem: Problem, shown: _Shown, masked: bool) -> Grid:
    """An (L, S) gradient, queries down and keys across; `masked` cells (dS) written ·."""
    keys, key_gap = shown_of(len(problem.tokens), shown.short)
    queries, query_gap = shown_of(len(problem.query_tokens), shown.short)
    lines = []
    for i in queries:
        cells = [MASKED if masked and not problem.mask[i, j] else fixed(float(matrix[i, j]), shown.p) for j in keys]
        if key_gap is not None:
            cells.insert(key_gap, GAPS["across"])
        lines.append([problem.query_tokens[i], *cells])
    if query_gap is not None:
        lines.insert(query_gap, [GAPS[DOWN]] * (len(lines[0])))
    headers = [t("render.query"), *names_of(problem.tokens, shown.short, GAPS["across"])]
    return Grid(title, headers, lines, tuple(range(1, len(headers))))


def _sub(number: int) -> str:
    """₁, ₂, …: the subscript of a stream's name, X₂."""
    return str(number).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))
