"""The one walk through a calculation that every human format follows: what is shown, in what order, how.

`walk` decides once, from a `Steps` record and the reader's `View`, everything the
terminal (`human`), Markdown and LaTeX show: the facts of the problem, each head's
projections, the followed queries step by step (scores with their arithmetic
written out, softmax, weighted sum), the weight matrix whenever there are several
queries, and how the heads combine. It returns small frozen records whose numbers
carry the way they are written (`Num`, `Vec`); the three backends only turn them
into their syntax, so they cannot disagree on what is shown or on any number.
The records are NamedTuples, not frozen dataclasses, which cost ten times as much to
create when attncli starts.
"""

import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attncli import positions
from attncli.core import HeadSteps, Steps, row_norms
from attncli.i18n import t
from attncli.problem import Head, Norm, Operand, PositionEncoding, Problem, Projection
from attncli.render.numbers import entry, fixed, sum_of_products

if TYPE_CHECKING:  # stacked layers: attncli.layers is imported only for them
    from attncli.layers import LayerSteps, StackSteps

AUTO_FOLLOW = 3  # every query in detail up to this many; beyond, the weight matrix and the outputs
MAX_KEYS = 16  # more keys than this, or more queries than MAX_QUERIES, and the walk is condensed (`condensed`)
MAX_QUERIES = 64
EDGE = 4  # a condensed matrix shows its first and last EDGE rows and columns, a gap marked between
WRITE_OUT = 4  # q·k written term by term up to this many coordinates
FIXED, ENTRY, EXP = "fixed", "entry", "exp"  # how a number is written: see `Num`
ACROSS, DOWN = "across", "down"  # not a number: the place of those a condensed walk leaves out, ⋯ and ⋮
GAPS = {ACROSS: "⋯", DOWN: "⋮"}
EXP_FIXED_BELOW = 1e12  # an e^s this large or larger is written in scientific notation, 1.0686e+13


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


def condensed(problem: Problem) -> bool:
    """Whether a problem is too large to show cell by cell: then every format shows the first and last EDGE rows
    and columns of each matrix (the terminal a summary), and says where every number is."""
    return len(problem.tokens) > MAX_KEYS or len(problem.query_tokens) > MAX_QUERIES


class Num(NamedTuple):
    """A number and how it is written: FIXED with `precision` decimals, ENTRY as an input (2, not 2.0000),
    EXP as e^s: scientific when fixed notation would show a tiny e^s as 0 or a huge one with 13 digits or more."""

    value: float
    style: str = FIXED

    def text(self, precision: int) -> str:
        if self.style in GAPS:
            return GAPS[self.style]
        if self.style == ENTRY:
            return entry(self.value, precision)
        if (
            self.style == EXP
            and self.value != 0
            and (abs(self.value) >= EXP_FIXED_BELOW or abs(self.value) < 10.0**-precision)
        ):
            return f"{self.value:.{precision}e}"
        return fixed(self.value, precision)


class Vec(NamedTuple):
    """A row of numbers written alike: [1, 0] or [1.4205, 0.5795]; condensed, [1, 2, ⋯, 9] (`gap`: where ⋯ goes).
    A row of style DOWN stands for the rows left out: ⋮."""

    values: tuple[float, ...]
    style: str = FIXED
    gap: int | None = None

    def text(self, precision: int) -> str:
        if self.style == DOWN:
            return GAPS[DOWN]
        return "[" + ", ".join(cell.text(precision) for cell in self.cells) + "]"

    @property
    def cells(self) -> tuple[Num, ...]:
        cells = [Num(value, self.style) for value in self.values]
        if self.gap is not None:
            cells.insert(self.gap, Num(0.0, ACROSS if self.style != DOWN else DOWN))
        return tuple(cells)


def vec(values: np.ndarray, style: str = FIXED, short: bool = False) -> Vec:
    """A row of numbers; `short`, its first and last EDGE when it has more."""
    shown, gap = shown_of(len(values), short)
    return Vec(tuple(float(values[j]) for j in shown), alike(values, style), gap)


def rows(matrix: np.ndarray, style: str = FIXED, short: bool = False) -> tuple[Vec, ...]:
    """A matrix as rows; `short`, its first and last EDGE rows and columns with a gap row (⋮) between."""
    shown, gap = shown_of(len(matrix), short)
    style = alike(matrix, style)
    out = [vec(matrix[i], style, short) for i in shown]
    if gap is not None:
        out.insert(gap, out[0]._replace(values=(0.0,) * len(out[0].values), style=DOWN))
    return tuple(out)


def alike(numbers: np.ndarray, style: str) -> str:
    """The style that writes all of `numbers` one way: ENTRY only when every one is whole ([1, 0]), so that an
    input matrix is never written [0.5000, 0] beside [1, 0]."""
    if style == ENTRY and not np.all(np.mod(numbers, 1) == 0):
        return FIXED
    return style


def shown_of(count: int, short: bool) -> tuple[list[int], int | None]:
    """Which of `count` rows (or columns) are shown, and where the gap goes: all of them unless `short`."""
    if not short or count <= 2 * EDGE + 1:
        return list(range(count)), None
    return [*range(EDGE), *range(count - EDGE, count)], EDGE


def names_of(names: tuple[str, ...], short: bool, mark: str = GAPS[DOWN]) -> tuple[str, ...]:
    """Token names as `rows` shows their rows: condensed, the first and last EDGE with `mark` between."""
    shown, gap = shown_of(len(names), short)
    out = [names[i] for i in shown]
    if gap is not None:
        out.insert(gap, mark)
    return tuple(out)


# The written-out compatibility of one query and one key, for each kind of score


class Terms(NamedTuple):
    """q·k term by term, the inputs as written: 1.4142×2 + 0×0 = 2.8284."""

    pairs: tuple[tuple[Num, Num], ...]
    value: Num


class Cosine(NamedTuple):
    """cos(q, k) = q·k / (‖q‖×‖k‖): 2.0000 / (1.4142×2.0000) = 0.7071."""

    dot: Num
    norms: tuple[Num, Num]
    value: Num


class Additive(NamedTuple):
    """v·tanh(q·W_query + k·W_key) with the tanh written out: v·[0.7616, 0.0000] = 0.7616."""

    hidden: Vec
    value: Num


class Plain(NamedTuple):
    """The compatibility alone, when writing it out would not help (general scores, long dot products)."""

    value: Num


Arithmetic = Terms | Cosine | Additive | Plain


def arithmetic(head: HeadSteps, row: int, j: int) -> Arithmetic:
    """How query `row` and key `j` become their compatibility, as far as it can be followed by hand."""
    kind = head.spec.score.kind
    value = Num(float(head.dot[row, j]))
    if kind == "additive":
        return Additive(vec(head.hidden[row, j]), value)
    queries, keys, style = scored(head)
    q, k = queries[row], keys[j]
    if kind in ("scaled_dot", "dot") and len(k) <= WRITE_OUT:
        return Terms(tuple((Num(float(a), style), Num(float(b), style)) for a, b in zip(q, k)), value)
    if kind == "cosine":
        norms = tuple(Num(float(norm)) for norm in row_norms(np.stack([q, k])))  # ‖[1e200, 1e200]‖ stays finite
        with np.errstate(over="ignore"):  # a q·k beyond float's range is shown as ∞; the cosine itself is exact
            return Cosine(Num(float(q @ k)), norms, value)
    return Plain(value)


def scored(head: HeadSteps) -> tuple[np.ndarray, np.ndarray, str]:
    """The queries and keys the compatibility is computed from, and how they are written: as given,
    or RoPE's turned ones, computed numbers."""
    if head.rotation is None:
        return head.queries, head.keys, ENTRY
    return head.rotation.queries, head.rotation.keys, FIXED


def arithmetic_text(written: Arithmetic, precision: int) -> str:
    """The arithmetic as plain text (terminal, Markdown); LaTeX writes the same records in math."""
    p = precision
    value = written.value.text(p)
    match written:
        case Terms(pairs=pairs):
            return sum_of_products((a.text(p), b.text(p)) for a, b in pairs) + f" = {value}"
        case Cosine(dot=dot, norms=(left, right)):
            return f"{dot.text(p)} / ({left.text(p)}×{right.text(p)}) = {value}"
        case Additive(hidden=hidden):
            return f"v·{hidden.text(p)} = {value}"
    return value


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
        size["every"] = self.every
        follow = f" {t('writeup.condensed_follow', max_keys=MAX_KEYS)}" if self.keys > MAX_KEYS else ""
        return t("writeup.condensed", **size) + follow


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
    compatibility: Arithmetic | None  # None when the scores are given
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


def score_cells(key: KeyStep, precision: int, masked: str) -> list[str]:
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

    head: HeadSteps  # and `problem`: what the terminal's shaded map (render.analysis.heatmap) reads
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


class StackFacts(NamedTuple):
    """A stack in a few lines: title, tokens, the stream's width d, each layer's name and norm in words."""

    title: str | None
    notes: str | None
    tokens: tuple[str, ...]
    d: int
    layers: tuple[tuple[str, str], ...]


class LayerTitle(NamedTuple):
    """The start of one layer's steps: number `number` of `count`, its name, its norm in words, its facts."""

    number: int
    count: int
    name: str
    norm: str
    facts: Facts  # its heads' scores and its mask; the tokens are the stack's


class Stream(NamedTuple):
    """A matrix of the residual stream (S, d), one row per token: what a layer reads, normalises or leaves.

    `kind` is input, normed, residual or output; `formula` says how it was made (X₂ = X₁ + Attn(LN(X₁))),
    `name` is its left side (X₂), `latex` the formula in math mode.
    """

    kind: str
    formula: str
    name: str
    latex: str
    tokens: tuple[str, ...]
    rows: tuple[Vec, ...]


class Rollout(NamedTuple):
    """Attention rollout over the layers shown, beside the last one's raw weights (mean over its heads), (S, S) each."""

    tokens: tuple[str, ...]
    last: int  # the number of the last layer the rollout multiplies: Ã_last···Ã_1
    raw: np.ndarray | None  # (S, S); None for a layer of one head, whose own weights are shown already
    rollout: np.ndarray  # (S, S)


Item = (
    Facts
    | Condensed
    | Encoded
    | HeadTitle
    | Projected
    | Rotary
    | Query
    | WeightMatrix
    | Combination
    | StackFacts
    | LayerTitle
    | Stream
    | Rollout
)


def items(steps: Steps, view: View, every: str | None = None) -> list[Item]:
    """Everything a human format shows, in order: facts (and sinusoidal encodings); per head its projections,
    RoPE's turns, the followed queries and,
    with several queries (or `view.heatmap`), the weight matrix; then the combination of the heads.
    `every` is where every number is to be had, when the problem is part of a larger whole (a stack's layer)."""
    from attncli.render import every_number

    problem = steps.problem
    short = condensed(problem)
    followed_rows = followed(problem, view.follow) if len(problem.tokens) <= MAX_KEYS else []
    items: list[Item] = [_facts(steps, short)]
    if short:
        items.append(Condensed(len(problem.query_tokens), len(problem.tokens), every or every_number(problem)))
    else:  # the positions' tables list every token: a condensed write-up leaves them to JSON
        items += encoded(problem)
    for head in steps.heads:
        if len(steps.heads) > 1:
            items.append(HeadTitle(head_title(head, problem)))
        items += projections(head, problem, short)
        if head.rotation is not None and not short:
            items.append(_rotary(head, problem))
        for row in followed_rows:
            items.append(_query(head, row, problem))
            if head.logsumexp is not None:  # `stable:` or `tiles:`: the softmax worked out again (render.tiles)
                from attncli.render import tiles

                items += tiles.items(head, row, problem)
        if view.heatmap or len(problem.query_tokens) > 1:
            items.append(_matrix(head, problem, short))
    if steps.concat is not None:
        items.append(_combination(steps, short))
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
        if isinstance(operand, Projection):
            x, w = rows(operand.x, ENTRY, short), rows(operand.w, ENTRY, short)
            yield Projected(name, weight, x, w, rows(result, FIXED, short), names_of(tokens, short))


def encoded(problem: Problem) -> Iterator[Encoded]:
    """Sinusoidal positions: x and PE side by side, and x_query's when the queries have inputs of their own."""
    encoding = problem.positions
    if encoding is None or encoding.kind != "sinusoidal":
        return
    parts = [("x", problem.tokens, encoding.key_at, encoding.x, encoding.encoding)]
    if problem.cross and encoding.x_query is not None:
        parts.append(("x_query", problem.query_tokens, encoding.query_at, encoding.x_query, encoding.query_encoding))
    for name, tokens, at, x, pe in parts:
        places = tuple(Num(float(m), ENTRY) for m in at)
        yield Encoded(name, tokens, places, rows(x, ENTRY), rows(pe), rows(x + pe))


def positions_words(encoding: PositionEncoding) -> str:
    """The encoding in one line: which, its base, and for RoPE how the coordinates pair."""
    base = entry(encoding.base, 4)
    if encoding.kind == "rope":
        return t(f"render.positions_rope_{encoding.style}", base=base)
    return t("render.positions_sinusoidal", base=base)


def _rotary(head: HeadSteps, problem: Problem) -> Rotary:
    rotation = head.rotation
    first, second = positions.pairs(rotation.queries.shape[1], rotation.style)
    encoding = problem.positions

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
        queries=turned(problem.query_tokens, encoding.query_at, rotation.query_angles, head.queries, rotation.queries),
        keys=turned(problem.tokens, encoding.key_at, rotation.key_angles, head.keys, rotation.keys),
    )


def _relative(head: HeadSteps, problem: Problem, row: int, j: int) -> Relative:
    """q·R((n − m)·θ)·k computed afresh from the unturned vectors: equal to q̃·k̃ whatever m and n are."""
    encoding, rotation = problem.positions, head.rotation
    distance = encoding.key_at[j] - encoding.query_at[row]
    turns = distance * rotation.frequencies[None, :]  # (1, d/2)
    turned_key = positions.rotate(head.keys[j][None, :], turns, rotation.style)[0]
    value = float(head.queries[row] @ turned_key)
    if head.spec.score.kind == "cosine":
        value /= float(np.prod(row_norms(np.stack([head.queries[row], head.keys[j]]))))
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
    if query.keys[0].relative is None:
        return None
    spelling = FORMULAS[query.formula.kind].text
    rows = [
        [key.key, key.relative.distance.text(p), key.relative.value.text(p), key.compatibility.value.text(p)]
        for key in query.keys
    ]
    turned = "cos(q, R((n − m)·θ)·k)" if query.formula.kind == "cosine" else "q·R((n − m)·θ)·k"
    headers = [t("render.key"), "n − m", turned, f"{spelling} (q̃, k̃)"]
    return Grid(t("render.relative_title", name=query.name), headers, rows, (1, 2, 3))


def formula(head: HeadSteps) -> Formula:
    score = head.spec.score
    d_k = None if score.kind == "given" else int(head.keys.shape[1])
    usual = score.kind == "scaled_dot" and math.isclose(score.scale, 1 / math.sqrt(d_k), rel_tol=1e-12)
    return Formula(score.kind, float(score.scale), d_k if usual else None, d_k, int(head.values.shape[1]))


def _facts(steps: Steps, short: bool = False) -> Facts:
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
    given = head.spec.score.kind == "given"
    queries, key_vectors, style = (None, None, ENTRY) if given else scored(head)
    keys = []
    for j, key in enumerate(problem.tokens):
        weight = float(head.weights[row, j])
        keys.append(
            KeyStep(
                key=key,
                allowed=bool(problem.mask[row, j]),
                k=None if given else vec(key_vectors[j], style),
                compatibility=None if given else arithmetic(head, row, j),
                score=Num(float(head.scores[row, j])),
                exp=Num(float(head.exp[row, j]), EXP),
                weight=Num(weight),
                value=vec(head.values[j], ENTRY),
                contribution=vec(weight * head.values[j]),
                biased=None
                if head.bias is None
                else Biased(Num(float(head.scaled[row, j])), Num(float(head.bias[row, j]))),
                relative=None if head.rotation is None else _relative(head, problem, row, j),
            )
        )
    return Query(
        name=problem.query_tokens[row],
        q=None if given else vec(queries[row], style),
        formula=formula(head),
        keys=tuple(keys),
        shift=Num(float(head.shift[row])),
        total=Num(float(head.exp[row].sum()), EXP),
        weight_sum=Num(float(head.weights[row].sum())),
        best=int(np.argmax(head.weights[row])),
        output=vec(head.output[row]),
    )


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


def _combination(steps: Steps, short: bool = False) -> Combination:
    problem = steps.problem
    return Combination(
        names=tuple(head.spec.label for head in steps.heads),
        query_tokens=names_of(problem.query_tokens, short),
        concat=rows(steps.concat, FIXED, short),
        w_o=None if problem.w_o is None else rows(problem.w_o, ENTRY, short),
        output=rows(steps.output, FIXED, short),
    )


# An exercise sheet: what a problem gives, and blanks for what it asks, without a number of the solution

ROOTS = (2, 3, 5, 6, 7)  # √n that a hand exercise uses (√d_k, √d_k/2)
DENOMINATORS = (1, 2, 3, 4)


class Given(NamedTuple):
    """A matrix the problem gives: its name (Q, K, V, X, W_Q, ...), its rows' names, and each number as it
    would be written by hand (`exact`)."""

    name: str
    label: str  # what the rows are: token, or row (of a weight matrix)
    row_names: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


class Sheet(NamedTuple):
    """An exercise to hand out: the facts, each head's givens, and the grids to fill in (queries × keys)."""

    facts: Facts
    task: str  # what to work out, in words
    inputs: tuple[Given, ...]  # X, shared by Q, K, V and every head
    heads: tuple[tuple[str | None, tuple[Given, ...]], ...]
    shared: tuple[Given, ...]  # W_O, a bias matrix
    query_tokens: tuple[str, ...]
    tokens: tuple[str, ...]


def exact(value: float) -> str:
    """A given number as a student writes it: 2, 0.5, √2, -√2/2, 3√2/2, 1/3; else 4 decimals."""
    if float(value).is_integer():
        return entry(value, 0)
    if round(value, 4) == value:
        return f"{value:g}"
    sign = "-" if value < 0 else ""
    for root in (1, *ROOTS):
        for den in DENOMINATORS:
            times = abs(value) * den / math.sqrt(root)
            whole = round(times)
            if whole and math.isclose(times, whole, rel_tol=1e-12) and math.gcd(whole, den) == 1:
                top = str(whole) if root == 1 else f"{'' if whole == 1 else whole}√{root}"
                return f"{sign}{top}" + (f"/{den}" if den > 1 else "")
    return fixed(value, 4)


def sheet(steps: Steps) -> Sheet:
    """The givens of `steps.problem`: the inputs X once, then head by head W_Q, W_K, W_V (or Q, K, V) and the
    score's own weights, then W_O."""
    problem = steps.problem
    several = len(steps.heads) > 1
    inputs: list[Given] = []
    for head in steps.heads:
        for operand, names in zip(_operands(head.spec), (problem.query_tokens, problem.tokens, problem.tokens)):
            given = _given("X", operand.x, names) if isinstance(operand, Projection) else None
            if given is not None and given not in inputs:
                inputs.append(given)
    heads = tuple((head.spec.label if several else None, tuple(_givens(head.spec, problem))) for head in steps.heads)
    shared = [] if problem.w_o is None else [_given("W_O", problem.w_o)]
    if problem.bias is not None and problem.bias.kind == "matrix":
        shared.append(_given("B", problem.bias.matrix, problem.query_tokens))
    if problem.positions is not None:  # where each key (and, in cross-attention, each query) stands
        shared.append(_placed("m", problem.positions.key_at, problem.tokens))
        if problem.cross:
            shared.append(_placed("m (queries)", problem.positions.query_at, problem.query_tokens))
    facts = _facts(steps)._replace(notes=None)  # a generated exercise's notes are about its YAML answers
    task = t("writeup.sheet_task") + (f" {t('writeup.sheet_task_w_o')}" if problem.w_o is not None else "")
    return Sheet(facts, task, tuple(inputs), heads, tuple(shared), problem.query_tokens, problem.tokens)


def _operands(spec: Head) -> tuple[Operand | None, Operand | None, Operand]:
    return spec.queries, spec.keys, spec.values


def _givens(spec: Head, problem: Problem) -> Iterator[Given]:
    names = (problem.query_tokens, problem.tokens, problem.tokens)
    for name, operand, rows in zip("QKV", _operands(spec), names):
        if isinstance(operand, Projection):
            yield _given(f"W_{name}", operand.w)
        elif operand is not None:
            yield _given(name, operand, rows)
    if spec.scores is not None:
        yield _given("S", spec.scores, problem.query_tokens)
    score = spec.score
    for name, matrix in (("W", score.w), ("W_query", score.w_query), ("W_key", score.w_key)):
        if matrix is not None:
            yield _given(name, matrix)
    if score.v is not None:
        yield _given("v", score.v[None, :])


def _placed(name: str, at: np.ndarray, names: tuple[str, ...]) -> Given:
    """Positions as a column, multiples of π/2 written so (π/2, π, 3π/2): generated RoPE exercises' quarter turns."""
    return Given(name, t("render.token"), names, tuple((_quarter_turns(float(m)),) for m in at))


def _quarter_turns(m: float) -> str:
    """A position as a student writes it: kπ/2 as π/2, π, 3π/2, 2π; any other number as `exact` writes it."""
    quarters = m / (math.pi / 2)
    whole = round(quarters)
    if not whole or not math.isclose(quarters, whole, rel_tol=1e-12):
        return exact(m)
    sign, count = ("-" if whole < 0 else ""), abs(whole)
    if count % 2:
        return sign + ("π/2" if count == 1 else f"{count}π/2")
    return sign + ("π" if count == 2 else f"{count // 2}π")


def _given(name: str, matrix: np.ndarray, names: tuple[str, ...] | None = None) -> Given:
    rows = tuple(tuple(exact(float(x)) for x in row) for row in matrix)
    if names is None:
        return Given(name, t("render.row"), tuple(str(i + 1) for i in range(len(rows))), rows)
    return Given(name, t("render.token"), names, rows)


# Stacked layers: each layer's attention walked as above, between the stream it reads and the one it leaves

NORM_SHORT = {"layer": "LN", "rms": "RMS"}


def stack_items(
    steps: "StackSteps", view: View, layer: int | None = None, rollout: np.ndarray | None = None
) -> list[Item]:
    """Everything a human format shows of a stack: its facts; per layer (only number `layer` when given)
    its title, the stream it reads, its attention as `items` shows it, the residual sum; then `rollout`
    (through the last layer shown) beside that layer's raw weights."""
    from attncli.render import every_number

    stack = steps.stack
    count = len(steps.layers)
    names = tuple((record.layer.label, norm_words(record.layer.norm)) for record in steps.layers)
    out: list[Item] = [StackFacts(stack.title, stack.notes, stack.tokens, int(stack.x.shape[1]), names)]
    for number in [layer] if layer is not None else range(1, count + 1):
        record = steps.layers[number - 1]
        norm = record.layer.norm
        first, *shown = items(record.attention, view, every_number(stack))
        out.append(LayerTitle(number, count, record.layer.label, norm_words(norm), first))
        out += _streams(record, number, stack.tokens, shown)
    if rollout is not None:
        last = layer or count
        from attncli.layers import mean_weights

        attention = steps.layers[last - 1].attention
        raw = mean_weights(attention) if len(attention.heads) > 1 else None
        out.append(Rollout(stack.tokens, last, raw, rollout))
    return out


class Expr(NamedTuple):
    """A stream's formula as text (X₂ + Attn(LN(X₂))) and in LaTeX's math mode."""

    text: str
    latex: str


def _streams(record: "LayerSteps", number: int, tokens: tuple[str, ...], shown: list[Item]) -> list[Item]:
    """A layer's input (normalised with a norm placed pre), its attention's records `shown`, what it leaves."""
    norm = record.layer.norm
    place = None if norm is None else norm.place

    def stream(kind: str, name: Expr, value: Expr, matrix: np.ndarray) -> Stream:
        same = name == value
        formula = name.text if same else f"{name.text} = {value.text}"
        latex = name.latex if same else f"{name.latex} = {value.latex}"
        return Stream(kind, formula, name.text, latex, tokens, rows(matrix))

    x_l = _stream_name(number)
    out = [stream("input", x_l, Expr("x", r"\mathbf{x}") if number == 1 else x_l, record.input)]
    fed = x_l
    if place == "pre":
        fed = _normed(norm, x_l)
        out.append(stream("normed", fed, fed, record.normed))
    out += shown
    residual = Expr(f"{x_l.text} + Attn({fed.text})", rf"{x_l.latex} + \mathrm{{Attn}}({fed.latex})")
    if place == "post":
        out.append(stream("residual", residual, residual, record.residual))
        residual = _normed(norm, residual)
    out.append(stream("output", _stream_name(number + 1), residual, record.output))
    return out


def _normed(norm: Norm, inner: Expr) -> Expr:
    short = NORM_SHORT[norm.kind]
    return Expr(f"{short}({inner.text})", rf"\mathrm{{{short}}}({inner.latex})")


def norm_words(norm: Norm | None) -> str:
    """A layer's norm in words: which one, where, its ε, and whether it learns a gain or a bias."""
    if norm is None:
        return t("render.norm_none")
    words = t(f"render.norm_{norm.kind}", eps=f"{norm.eps:g}")
    learned = [name for name, given in (("gain", norm.gain), ("bias", norm.shift)) if given is not None]
    if learned:
        words += t("render.norm_learned", names=", ".join(learned))
    return t(f"render.norm_{norm.place}", norm=words, short=NORM_SHORT[norm.kind])


def _stream_name(number: int) -> Expr:
    """X₁, X₂, …: the stream layer `number` reads."""
    return Expr("X" + str(number).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")), f"X_{{{number}}}")
