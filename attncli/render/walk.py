"""The one walk through a calculation that every human format follows: what is shown, in what order, how.

`walk` decides once, from a `Steps` record and the reader's `View`, everything the
terminal (`human`), Markdown and LaTeX show: the facts of the problem, each head's
projections, the followed queries step by step (scores with their arithmetic
written out, softmax, weighted sum), the weight matrix whenever there are several
queries, and how the heads combine. It returns small frozen records whose numbers
carry the way they are written (`Num`, `Vec`, attncli.written); the three backends only
turn them into their syntax, so they cannot disagree on what is shown or on any number.
A stack of layers is walked layer by layer (render/stack_walk.py), an exercise sheet laid
out from the same facts (render/sheets.py). The records are NamedTuples, not frozen
dataclasses, which cost ten times as much to create when attncli starts.
"""

import math
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

import numpy as np

from attncli import positions
from attncli.core import HeadSteps, Rotation, Steps, row_norms
from attncli.i18n import t
from attncli.problem import PositionEncoding, Problem, Projection
from attncli.render import tiles
from attncli.render.formats import MAX_KEYS, MAX_QUERIES, condensed
from attncli.written import (
    ACROSS,
    DOWN,
    EDGE,
    ENTRY,
    EXP,
    FIXED,
    GAPS,
    Arithmetic,
    Num,
    Vec,
    arithmetic,
    entry,
    names_of,
    rows,
    scored,
    shown_of,
    vec,
)

AUTO_FOLLOW = 3  # every query in detail up to this many; beyond, the weight matrix and the outputs
Masked = TypeVar("Masked")  # how a backend writes a masked cell: plain text, or text with its style


class Spelling(NamedTuple):
    """A score function's compatibility before the scale: in text, in text written out, and in LaTeX."""

    text: str
    spelled: str
    latex: str


_DOT = Spelling("q·k", "q·k", r"\mathbf{q}\cdot\mathbf{k}_j")
FORMULAS = {
    "scaled_dot": _DOT,
    "dot": _DOT,
    "cosine": Spelling(
        "cos(q, k)",
        "q·k / (‖q‖‖k‖)",
        r"\frac{\mathbf{q}\cdot\mathbf{k}_j}{\lVert\mathbf{q}\rVert\,\lVert\mathbf{k}_j\rVert}",
    ),
    "general": Spelling("q·W·k", "q·W·k", r"\mathbf{q}\,W\,\mathbf{k}_j^{\top}"),
    "additive": Spelling(
        "v·tanh(q·W_query + k·W_key)",
        "v·tanh(q·W_query + k·W_key)",
        r"\mathbf{v}^{\top}\tanh(\mathbf{q}\,W_{\mathrm{query}} + \mathbf{k}_j\,W_{\mathrm{key}})",
    ),
}


class View(NamedTuple):
    """What the reader asked to see: how many decimals, and which queries in detail."""

    precision: int = 4
    follow: tuple[str, ...] | None = None
    heatmap: bool = False  # the weight map even when there is only one query


# The records of the walk, in the order they come


class Formula(NamedTuple):
    """A head's score function: its kind, the factor, the widths; `root` is d_k when the factor is the usual 1/√d_k."""

    kind: str
    scale: float
    root: int | None
    d_k: int | None  # None when the scores are given
    d_v: int

    def words(self, written: str = "") -> str:
        """The score function in words, then the `written` formula when one is given, then the widths."""
        widths = f"d_v = {self.d_v}" if self.d_k is None else f"d_k = {self.d_k}, d_v = {self.d_v}"
        name = t(f"writeup.score_{self.kind}")
        return f"{name}, {written} ({widths})" if written else f"{name} ({widths})"


class Facts(NamedTuple):
    """The problem in a few lines: tokens, queries, each head's score (head name None for a single head), mask."""

    title: str | None
    notes: str | None
    tokens: tuple[str, ...]
    query_tokens: tuple[str, ...]
    cross: bool
    scores: tuple[tuple[str | None, Formula], ...]
    mask: str  # in words
    access: tuple[tuple[bool, ...], ...] | None  # which keys each query may use; None when no mask was asked for
    bias: str | None = None  # the bias in words, when there is one
    positions: str | None = None  # the position encoding in words, when there is one


class Condensed(NamedTuple):
    """The note of a condensed walk: the problem's size, that only the corners of its matrices are shown, and
    where every number is to be had at this size (`render.every_number`)."""

    queries: int
    keys: int
    every: str

    def words(self) -> str:
        """What is shown and where every number is; a query is not followed past MAX_KEYS keys."""
        size = dict(queries=self.queries, keys=self.keys, max_keys=MAX_KEYS, max_queries=MAX_QUERIES, edge=EDGE)
        follow = f" {t('writeup.condensed_follow', max_keys=MAX_KEYS)}" if self.keys > MAX_KEYS else ""
        return t("writeup.condensed", **size, every=self.every) + follow


class HeadTitle(NamedTuple):
    """The start of one head's steps, when there are several."""

    name: str


class Projected(NamedTuple):
    """One of Q, K, V made from the inputs: name, its weight matrix's name, X, W, the result, the rows' tokens."""

    name: str
    weight: str
    x: tuple[Vec, ...]
    w: tuple[Vec, ...]
    result: tuple[Vec, ...]
    tokens: tuple[str, ...]


class Biased(NamedTuple):
    """A score before its bias, and the bias added to it: the key's `score` is then s + b."""

    scaled: Num
    bias: Num


class Encoded(NamedTuple):
    """Sinusoidal positions: each row's position m, its x as given, PE(m), and x + PE(m), which the projections read."""

    name: str  # x or x_query
    tokens: tuple[str, ...]
    at: tuple[Num, ...]
    x: tuple[Vec, ...]
    encoding: tuple[Vec, ...]
    total: tuple[Vec, ...]


class Turned(NamedTuple):
    """One query or key under RoPE: its position m, the angles m·θ_i, the vector before the turn and after it."""

    token: str
    at: Num
    angles: Vec
    before: Vec
    after: Vec


class Rotary(NamedTuple):
    """RoPE in one head: which coordinates each pair turns (1-based) at what frequency θ_i, then each q and k."""

    style: str
    pairs: tuple[tuple[int, int], ...]
    frequencies: Vec
    queries: tuple[Turned, ...]
    keys: tuple[Turned, ...]


class Relative(NamedTuple):
    """RoPE's point for one key: q·R((n − m)·θ)·k, from the unturned q and k and the distance n − m alone."""

    key: str
    distance: Num
    value: Num


class KeyStep(NamedTuple):
    """One key in a followed query's steps; masked keys (not `allowed`) have score −∞ and weight 0."""

    key: str
    allowed: bool
    k: Vec | None  # None when the scores are given
    dot: Arithmetic | None  # None when the scores are given
    score: Num
    exp: Num  # e^(s − shift)
    weight: Num
    value: Vec
    contribution: Vec  # weight × value
    biased: Biased | None = None  # with a bias: the score before it, and the bias
    relative: Relative | None = None  # with RoPE: the same compatibility from the distance alone


class Query(NamedTuple):
    """One followed query from its scores to its output: q, each key's steps, and the sums."""

    name: str
    q: Vec | None
    formula: Formula
    keys: tuple[KeyStep, ...]
    shift: Num  # subtracted from every score before e^s; 0 unless e^s would overflow
    total: Num  # Σ e^(s − shift)
    weight_sum: Num
    best: int  # the key with the largest weight
    output: Vec


def score_cells(key: KeyStep, precision: int, masked: Masked) -> list[str | Masked]:
    """A key's last cells in the score table: s, or with a bias s, b and s + b (`masked` where masked)."""
    last = key.score.text(precision) if key.allowed else masked
    if key.biased is None:
        return [last]
    return [key.biased.scaled.text(precision), key.biased.bias.text(precision), last]


def score_headers(query: Query) -> list[str]:
    """The headers of those cells: s, or s, b, s + b."""
    return ["s", "b", "s + b"] if query.keys[0].biased is not None else ["s"]


def exponent(query: Query) -> str:
    """What softmax exponentiates: s, or s + b with a bias."""
    return "s + b" if query.keys[0].biased is not None else "s"


def exp_label(query: Query, precision: int) -> str:
    """The exponential's header in text: e^s, e^(s + b), or with the shift e^(s − 2.0000)."""
    power = exponent(query)
    if query.shift.value != 0:
        return f"e^({power} − {query.shift.text(precision)})"
    return "e^s" if power == "s" else f"e^({power})"


class WeightMatrix(NamedTuple):
    """A head's weights for every query (None where masked) and every query's output."""

    head: HeadSteps  # and `problem`: what the terminal's shaded map (render.probes.heatmap) reads
    problem: Problem
    tokens: tuple[str, ...]
    weights: tuple[tuple[str, tuple[Num | None, ...]], ...]
    outputs: tuple[tuple[str, Vec], ...]


class Combination(NamedTuple):
    """How the heads become one result: their outputs side by side, then W_O when there is one."""

    names: tuple[str, ...]
    query_tokens: tuple[str, ...]
    concat: tuple[Vec, ...]
    w_o: tuple[Vec, ...] | None
    output: tuple[Vec, ...]


Item = (
    Facts
    | Condensed
    | Encoded
    | HeadTitle
    | Projected
    | Rotary
    | Query
    | tiles.StableSoftmax
    | tiles.TileTrace
    | WeightMatrix
    | Combination
)


def items(steps: Steps, view: View, every: str | None = None) -> list[Item]:
    """Everything a human format shows, in order: facts (and sinusoidal encodings); per head its projections,
    RoPE's turns, the followed queries and,
    with several queries (or `view.heatmap`), the weight matrix; then the combination of the heads.
    `every` is where every number is to be had, when the problem is part of a larger whole (a stack's layer)."""
    from attncli.render.formats import every_number

    problem = steps.problem
    short = condensed(problem)
    followed_rows = followed(problem, view.follow) if len(problem.tokens) <= MAX_KEYS else []
    items: list[Item] = [facts_of(steps, short)]
    if short:
        items.append(Condensed(len(problem.query_tokens), len(problem.tokens), every or every_number(problem)))
    else:  # the positions' tables list every token: a condensed write-up leaves them to JSON
        items += encoded(problem)
    for head in steps.heads:
        if len(steps.heads) > 1:
            items.append(HeadTitle(head_title(head, problem)))
        items += projections(head, problem, short)
        rope = _rope(head, problem)
        if rope is not None and not short:
            items.append(_rotary(head, problem, *rope))
        for row in followed_rows:
            items.append(_query(head, row, problem))
            if head.logsumexp is not None:  # `stable:` or `tiles:`: the softmax worked out again (render.tiles)
                items += tiles.items(head, row, problem)
        if view.heatmap or len(problem.query_tokens) > 1:
            items.append(_matrix(head, problem, short))
    if steps.concat is not None:
        items.append(_combination(steps, steps.concat, short))
    return items


def head_title(head: HeadSteps, problem: Problem) -> str:
    """A head's name, and with grouped-query attention the shared keys and values it reads."""
    if head.spec.kv_head is None:
        return head.spec.label
    return t("render.head_reads", name=head.spec.label, kv=problem.kv_label(head.spec.kv_head))


def followed(problem: Problem, follow: tuple[str, ...] | None) -> list[int]:
    """The rows of the queries written out in detail: those named, else all of them when there are only a few."""
    if follow:
        return [problem.query_tokens.index(name) for name in follow]
    return list(range(len(problem.query_tokens))) if len(problem.query_tokens) <= AUTO_FOLLOW else []


def projections(head: HeadSteps, problem: Problem, short: bool = False) -> Iterator[Projected]:
    """Those of the head's Q, K and V that are projected from inputs, in that order (`short`: condensed)."""
    parts = (
        ("Q", "W_Q", head.spec.queries, head.queries, problem.query_tokens),
        ("K", "W_K", head.spec.keys, head.keys, problem.tokens),
        ("V", "W_V", head.spec.values, head.values, problem.tokens),
    )
    for name, weight, operand, result, tokens in parts:
        if isinstance(operand, Projection) and result is not None:  # a projected operand always has its result
            x, w = rows(operand.x, ENTRY, short), rows(operand.w, ENTRY, short)
            yield Projected(name, weight, x, w, rows(result, FIXED, short), names_of(tokens, short))


def encoded(problem: Problem) -> Iterator[Encoded]:
    """Sinusoidal positions: x and PE side by side, and x_query's when the queries have inputs of their own."""
    encoding = problem.positions
    if encoding is None or encoding.kind != "sinusoidal":
        return
    parts = [("x", problem.tokens, encoding.key_at, encoding.x, encoding.encoding)]
    if problem.cross:
        parts.append(("x_query", problem.query_tokens, encoding.query_at, encoding.x_query, encoding.query_encoding))
    for name, tokens, at, x, pe in parts:
        if x is None or pe is None:  # cross-attention whose queries have no inputs of their own
            continue
        places = tuple(Num(float(m), ENTRY) for m in at)
        yield Encoded(name, tokens, places, rows(x, ENTRY), rows(pe), rows(x + pe))


def positions_words(encoding: PositionEncoding) -> str:
    """The encoding in one line: which, its base, and for RoPE how the coordinates pair."""
    base = entry(encoding.base, 4)
    if encoding.kind == "rope":
        return t(f"render.positions_rope_{encoding.style}", base=base)
    return t("render.positions_sinusoidal", base=base)


def _rope(head: HeadSteps, problem: Problem) -> tuple[Rotation, PositionEncoding] | None:
    """The head's RoPE turns and the positions they turn by; None without RoPE."""
    rope = problem.rope
    return None if head.rotation is None or rope is None else (head.rotation, rope)


def _rotary(head: HeadSteps, problem: Problem, rotation: Rotation, encoding: PositionEncoding) -> Rotary:
    first, second = positions.pairs(rotation.queries.shape[1], rotation.style)

    def turned(
        tokens: tuple[str, ...], at: np.ndarray, angles: np.ndarray, before: np.ndarray, after: np.ndarray
    ) -> tuple[Turned, ...]:
        return tuple(
            Turned(token, Num(float(m), ENTRY), vec(a), vec(b, ENTRY), vec(c))
            for token, m, a, b, c in zip(tokens, at, angles, before, after)
        )

    return Rotary(
        style=rotation.style,
        pairs=tuple((int(a) + 1, int(b) + 1) for a, b in zip(first, second)),
        frequencies=vec(rotation.frequencies),
        queries=turned(problem.query_tokens, encoding.query_at, rotation.query_angles, head.q, rotation.queries),
        keys=turned(problem.tokens, encoding.key_at, rotation.key_angles, head.k, rotation.keys),
    )


def _relative(
    head: HeadSteps, problem: Problem, row: int, j: int, rotation: Rotation, encoding: PositionEncoding
) -> Relative:
    """q·R((n − m)·θ)·k computed afresh from the unturned vectors: equal to q̃·k̃ whatever m and n are."""
    distance = encoding.key_at[j] - encoding.query_at[row]
    turns = distance * rotation.frequencies[None, :]  # (1, d/2)
    turned_key = positions.rotate(head.k[j][None, :], turns, rotation.style)[0]
    value = float(head.q[row] @ turned_key)
    if head.spec.score.kind == "cosine":
        value /= float(np.prod(row_norms(np.stack([head.q[row], head.k[j]]))))
    return Relative(problem.tokens[j], Num(float(distance), ENTRY), Num(value))


class Grid(NamedTuple):
    """A table as text, laid out by each backend in its own syntax: title, headers, rows, right-aligned columns."""

    title: str
    headers: list[str]
    rows: list[list[str]]
    right: tuple[int, ...]


def encoded_grid(item: Encoded, p: int) -> Grid:
    """The sinusoidal table: token, m, x, PE(m), x + PE(m)."""
    rows = [
        [token, m.text(p), x.text(p), pe.text(p), total.text(p)]
        for token, m, x, pe, total in zip(item.tokens, item.at, item.x, item.encoding, item.total)
    ]
    headers = [t("render.token"), "m", item.name, "PE(m)", f"{item.name} + PE(m)"]
    return Grid(t("render.encoded_title", name=item.name), headers, rows, (1,))


def rotary_grids(item: Rotary, p: int) -> list[Grid]:
    """RoPE's tables: each pair's coordinates and frequency; then every query and key, its angles and the turn."""
    pairs = [
        [str(i), f"({a}, {b})", theta.text(p)]
        for i, ((a, b), theta) in enumerate(zip(item.pairs, item.frequencies.cells))
    ]
    grids = [
        Grid(t(f"render.rotary_pairs_{item.style}"), [t("render.pair"), t("render.coordinates"), "θ_i"], pairs, (2,))
    ]
    for name, turned, position in (("q", item.queries, "m"), ("k", item.keys, "n")):
        rows = [
            [row.token, row.at.text(p), row.angles.text(p), row.before.text(p), row.after.text(p)] for row in turned
        ]
        headers = [t("render.token"), position, f"{position}·θ_i", name, f"R({position}·θ)·{name}"]
        grids.append(Grid(t(f"render.rotary_{name}"), headers, rows, (1,)))
    return grids


def relative_grid(query: Query, p: int) -> Grid | None:
    """With RoPE: each key's n − m and q·R((n − m)·θ)·k beside the q̃·k̃ the scores used."""
    rows = [
        [key.key, key.relative.distance.text(p), key.relative.value.text(p), key.dot.value.text(p)]
        for key in query.keys
        if key.relative is not None and key.dot is not None  # every key under RoPE, none without
    ]
    if not rows:
        return None
    spelling = FORMULAS[query.formula.kind].text
    turned = "cos(q, R((n − m)·θ)·k)" if query.formula.kind == "cosine" else "q·R((n − m)·θ)·k"
    headers = [t("render.key"), "n − m", turned, f"{spelling} (q̃, k̃)"]
    return Grid(t("render.relative_title", name=query.name), headers, rows, (1, 2, 3))


def formula(head: HeadSteps) -> Formula:
    score = head.spec.score
    d_k = None if head.keys is None else int(head.keys.shape[1])  # given scores have no keys
    usual = (
        d_k is not None and score.kind == "scaled_dot" and math.isclose(score.scale, 1 / math.sqrt(d_k), rel_tol=1e-12)
    )
    return Formula(score.kind, float(score.scale), d_k if usual else None, d_k, int(head.values.shape[1]))


def facts_of(steps: Steps, short: bool = False) -> Facts:
    problem = steps.problem
    rule = problem.mask_rule
    masked = rule.kind != "none" or rule.window is not None or bool(rule.padding)
    parts = [t(f"render.mask_{rule.kind}")]
    if rule.window is not None:
        parts.append(t("render.mask_window", window=rule.window))
    if rule.padding:
        parts.append(t("render.mask_padding", tokens=", ".join(rule.padding)))
    several = len(steps.heads) > 1
    bias = problem.bias
    if bias is not None:
        slopes = ", ".join(f"{m:g}" for m in bias.slopes)
        bias_words = t("render.bias_alibi", slopes=slopes) if bias.kind == "alibi" else t("render.bias_matrix")
    return Facts(
        title=problem.title,
        notes=problem.notes,
        tokens=names_of(problem.tokens, short, GAPS[ACROSS]),
        query_tokens=names_of(problem.query_tokens, short, GAPS[ACROSS]),
        cross=problem.cross,
        scores=tuple((head.spec.label if several else None, formula(head)) for head in steps.heads),
        mask="; ".join(parts),
        access=tuple(tuple(bool(ok) for ok in row) for row in problem.mask) if masked and not short else None,
        bias=None if bias is None else bias_words,
        positions=None if problem.positions is None else positions_words(problem.positions),
    )


def _query(head: HeadSteps, row: int, problem: Problem) -> Query:
    vectors = None if head.spec.score.kind == "given" else scored(head)  # None: the scores were given
    rope = _rope(head, problem)
    keys = []
    for j, key in enumerate(problem.tokens):
        weight = float(head.weights[row, j])
        keys.append(
            KeyStep(
                key=key,
                allowed=bool(problem.mask[row, j]),
                k=None if vectors is None else vec(vectors.keys[j], vectors.style),
                dot=None if vectors is None else arithmetic(head, row, j),
                score=Num(float(head.scores[row, j])),
                exp=Num(float(head.exp[row, j]), EXP),
                weight=Num(weight),
                value=vec(head.values[j], ENTRY),
                contribution=vec(weight * head.values[j]),
                biased=_biased(head, row, j),
                relative=None if rope is None else _relative(head, problem, row, j, *rope),
            )
        )
    return Query(
        name=problem.query_tokens[row],
        q=None if vectors is None else vec(vectors.queries[row], vectors.style),
        formula=formula(head),
        keys=tuple(keys),
        shift=Num(float(head.shift[row])),
        total=Num(float(head.exp[row].sum()), EXP),
        weight_sum=Num(float(head.weights[row].sum())),
        best=int(np.argmax(head.weights[row])),
        output=vec(head.output[row]),
    )


def _biased(head: HeadSteps, row: int, j: int) -> Biased | None:
    """With a bias, the score before it and the bias; None without one (the head keeps both or neither)."""
    if head.scaled is None or head.bias is None:
        return None
    return Biased(Num(float(head.scaled[row, j])), Num(float(head.bias[row, j])))


def _matrix(head: HeadSteps, problem: Problem, short: bool = False) -> WeightMatrix:
    """The weights (None where masked) and the outputs; `short`, their first and last EDGE rows and columns."""
    tokens, weights = weight_grid(lambda i: head.weights[i], problem, short)
    outputs = tuple(zip(names_of(problem.query_tokens, short), rows(head.output, FIXED, short)))
    return WeightMatrix(head, problem, tokens, weights, outputs)


def weight_grid(
    weights_of: Callable[[int], np.ndarray], problem: Problem, short: bool
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[Num | None, ...]], ...]]:
    """The keys' tokens and each query's weights (None where masked), `weights_of(i)` being query i's row (S,);
    `short`, the first and last EDGE rows and columns (the terminal summary reads only those rows)."""
    shown, gap = shown_of(len(problem.tokens), short)
    grid: list[tuple[str, tuple[Num | None, ...]]] = []
    for i in shown_of(len(problem.query_tokens), short)[0]:
        weights = weights_of(i)
        row = [Num(float(weights[j])) if problem.mask[i, j] else None for j in shown]
        if gap is not None:
            row.insert(gap, Num(0.0, ACROSS))
        grid.append((problem.query_tokens[i], tuple(row)))
    row_gap = shown_of(len(problem.query_tokens), short)[1]
    if row_gap is not None:
        grid.insert(row_gap, (GAPS[DOWN], tuple(Num(0.0, DOWN) for _ in grid[0][1])))
    return names_of(problem.tokens, short, GAPS[ACROSS]), tuple(grid)


def _combination(steps: Steps, concat: np.ndarray, short: bool = False) -> Combination:
    """How the heads' outputs, side by side in `concat` (L, Σ d_v), become the final output."""
    problem = steps.problem
    return Combination(
        names=tuple(head.spec.label for head in steps.heads),
        query_tokens=names_of(problem.query_tokens, short),
        concat=rows(concat, FIXED, short),
        w_o=None if problem.w_o is None else rows(problem.w_o, ENTRY, short),
        output=rows(steps.output, FIXED, short),
    )
