"""The classic mistakes of issue 10 §5, each replayed in numpy at the step where a student makes it.

A replay gets the student's own numbers so far (`Context.own`) and returns what they write for that
step; the student then carries on correctly from it. A replay raises `NotApplicable` when the
exercise cannot show the mistake (no mask to ignore, a division by a sum near zero, ...).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.replays.student import Context, Problem, Slip, Written, encoding, text_of


class NotApplicable(Exception):
    """The mistake cannot be made on this exercise (said why)."""


@dataclass(frozen=True)
class Mistake:
    name: str  # unique, e.g. "causal_shifted+1"
    codes: tuple[str, ...]  # what `check` should name
    step: str
    slip: Slip
    applies: Callable[[Problem], bool]
    head: int | None = 0  # which head the slip is made in (None: concat or final)
    what: str = ""
    # the same act seen at an earlier step under another code: (step, its code, what the student writes there)
    first: tuple[str, str, Slip] | None = None


def _scaled(p: Problem) -> bool:
    return all(h.score == "scaled_dot" for h in p.heads)


def _causal(p: Problem) -> bool:
    return p.causal


def _unmasked(p: Problem) -> bool:
    """No mask, every query a token: the mistakes that move whole rows or transpose a square step."""
    return not p.causal and not p.lower_right


def _rope(p: Problem) -> bool:
    return p.rope is not None


def _pairings_differ(p: Problem) -> bool:
    """With d_k 2 there is one pair, and both pairings are the same turn."""
    return _rope(p) and all(h.score != "given" and _width(h, "keys", "w_k") >= 4 for h in p.heads)


def _decoding(p: Problem) -> bool:
    """Fewer queries than keys under causal_lower_right: a top-left mask shows."""
    return p.lower_right and len(p.queries) < p.n


def _width(h, name: str, w: str) -> int:
    given = getattr(h, name)
    return given.shape[1] if given is not None else getattr(h, w).shape[1]


def _rope_slip(sign: float, other_pairing: bool) -> Slip:
    """The dot products of queries and keys turned the wrong way round, or paired the other way."""

    def slip(c: Context) -> np.ndarray:
        rope = c.work.problem.rope
        assert rope is not None
        style = {"half": "interleaved", "interleaved": "half"}[rope.style] if other_pairing else None
        head = c.work.problem.heads[c.head or 0]
        return c.work.compatibility(head, *c.work.turned(c.own["queries"], c.own["keys"], sign, style))

    return slip


def _any(p: Problem) -> bool:
    return True


def _tiled_differs(p: Problem) -> bool:
    """Grouped-query heads where head 2 reads another kv head by h mod G than by h // (H/G)."""
    return len(p.kv) > 1 and len(p.heads) > 2 and 1 % len(p.kv) != 1 // (len(p.heads) // len(p.kv))


def _kv_tiled(c: Context) -> np.ndarray:
    """Head h's dot products with the keys of kv head h mod G."""
    p = c.work.problem
    keys = p.kv[(c.head or 0) % len(p.kv)][0]
    return c.work.compatibility(p.heads[c.head or 0], *c.work.turned(c.own["queries"], keys))


def _alibi(p: Problem) -> bool:
    return len(p.slopes) > 1


def _alibi_slope(slope_of: Callable[[Problem, int], float]) -> Slip:
    """The scores with ALiBi's b made from another slope (`slope_of(problem, head)`; its sign flipped if negative)."""

    def slip(c: Context) -> np.ndarray:
        p, h = c.work.problem, c.head or 0
        head = p.heads[h]
        assert head.bias is not None
        bias = head.bias * (slope_of(p, h) / p.slopes[h])
        scaled = c.work.scale(head, c.own["dot"], _d_k(c))
        return c.work.masked(c.work.r(scaled + bias), p.allowed)

    return slip


def _from_zero(p: Problem, h: int) -> float:
    """Press et al.'s slope for heads counted from 0: 2^(−8h/n) with h one less (n a power of two here)."""
    return 2.0 ** (-8 * h / len(p.slopes))


def _after_softmax(c: Context) -> np.ndarray:
    """The softmax of the scores (written without b), then b added to each weight."""
    head = c.work.problem.heads[c.head or 0]
    assert head.bias is not None
    weights = c.work.softmax(c.own["scores"])
    return np.where(np.isnan(weights), np.nan, c.work.r(np.nan_to_num(weights) + head.bias))


def _positioned(first: float, swapped: bool) -> Slip:
    """x + PE with the positions counted from `first`, or sin and cos swapped."""

    def slip(c: Context) -> np.ndarray:
        x = c.work.problem.x
        assert x is not None
        pe = encoding(np.arange(len(x), dtype=float), x.shape[1], first, swapped)
        return c.work.r(x + c.work.r(pe))

    return slip


def _d_k(c: Context) -> int:
    return c.own["queries"].shape[1]


def _scores(c: Context, scaled: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """Scores from scaled (or wrongly scaled) dot products: the head's bias added, then the mask `allowed`."""
    return c.work.masked(c.work.biased(c.work.problem.heads[c.head or 0], scaled), allowed)


def _scale_as_dot(c: Context, dot: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    head = c.work.problem.heads[c.head or 0]
    return _scores(c, c.work.scale(head, dot, _d_k(c)), allowed)


def _biased(head: int) -> Callable[[Problem], bool]:
    return lambda p: len(p.heads) > head and p.heads[head].bias is not None


def _forgot_bias(c: Context) -> np.ndarray:
    """The scores as if the problem had no bias."""
    return _mask_all(c, bias=False)


def _mask(c: Context, allowed: np.ndarray) -> np.ndarray:
    """The correct scores under another mask."""
    return _scale_as_dot(c, c.own["dot"], allowed)


def _shifted(p: Problem, by: int) -> np.ndarray:
    """The causal mask moved by one diagonal; by -1 (the strict triangle) the first query sees no key."""
    return np.tril(np.ones((p.n, p.n), dtype=bool), k=by)


def _no_exp(c: Context, axis: int) -> np.ndarray:
    s = np.nan_to_num(c.own["scores"], nan=0.0)
    total = s.sum(axis=axis, keepdims=True)
    if np.any(np.abs(total) < 0.5):
        raise NotApplicable("a sum of scores near 0: s/Σs is no number a student would write")
    return np.where(np.isnan(c.own["scores"]), np.nan, c.work.r(s / total))


def _dropped_term(c: Context) -> np.ndarray:
    e = c.work.exp(c.own["scores"])
    allowed = ~np.isnan(c.own["scores"])
    last = allowed & (np.cumsum(allowed[:, ::-1], axis=1)[:, ::-1] == 1) & (allowed.sum(axis=1, keepdims=True) > 1)
    total = np.round(e.sum(axis=1, keepdims=True) - np.where(last, e, 0).sum(axis=1, keepdims=True), 12)
    return np.where(allowed, c.work.r(e / total), np.nan)


def _swap(a: np.ndarray, axis: int) -> np.ndarray:
    order = list(range(a.shape[axis]))
    order[0], order[1] = 1, 0
    return np.take(a, order, axis=axis)


def _same_width(p: Problem) -> bool:
    return all(h.score != "given" and _width(h, "keys", "w_k") == _width(h, "values", "w_v") for h in p.heads)


def _keys_as_values(c: Context) -> np.ndarray:
    if np.array_equal(c.own["keys"], c.own["values"]):
        raise NotApplicable("keys equal values")
    return c.work.weighted(c.own["weights"], c.own["keys"])


def _square_keys(p: Problem) -> bool:
    """Q·K (without the transpose) can be multiplied only when d_k equals the number of keys."""

    def d_k(h) -> int:
        return h.keys.shape[1] if h.keys is not None else h.w_k.shape[1]

    return all(h.score in ("scaled_dot", "dot") and d_k(h) == p.n for h in p.heads)


def _transposed_shape(c: Context) -> Written:
    right = c.careful()
    if right.shape[0] == right.shape[1]:
        raise NotApplicable("a square matrix has no transposed shape")
    return Written(right, [[text_of(x) for x in row] for row in right.T])


def _additive_no_tanh(c: Context) -> np.ndarray:
    head = c.work.problem.heads[c.head or 0]
    assert head.additive is not None
    w_query, w_key, v = head.additive
    hidden = (c.own["queries"] @ w_query)[:, None, :] + (c.own["keys"] @ w_key)[None, :, :]
    return c.work.r(hidden @ v)


def _other_head(step: str) -> Slip:
    def slip(c: Context) -> np.ndarray:
        return c.work.steps[(0, step)].values.copy()

    return slip


def _forgot_w_o(c: Context) -> Written:
    concat = c.own["concat"]
    if c.work.problem.w_o is not None and c.work.problem.w_o.shape[1] == concat.shape[1]:
        raise NotApplicable("W_O keeps the width: forgetting it is not a shape")
    return Written(concat.copy())


def _rounded_early(step: str, digits: int) -> Slip:
    """One step computed from its inputs rounded to `digits` decimals (while they were written at 4)."""

    def slip(c: Context) -> np.ndarray:
        w = c.work
        if step == "scores":
            return _scale_as_dot(c, np.round(c.own["dot"], digits), c.work.problem.allowed)
        if step == "weights":
            return w.softmax(np.round(c.own["scores"], digits))
        if step == "exp":
            e = np.where(np.isnan(c.own["scores"]), 0.0, np.round(np.exp(np.nan_to_num(c.own["scores"])), digits))
            return w.normalize(e, c.own["scores"])
        return w.weighted(np.round(c.own["weights"], digits), c.own["values"])

    return slip


def _several(p: Problem) -> bool:
    return len(p.heads) > 1


def _kind(kind: str) -> Callable[[Problem], bool]:
    return lambda p: all(h.score == kind for h in p.heads)


def _score_of_head(head: int, kind: str) -> Callable[[Problem], bool]:
    return lambda p: len(p.heads) > head and p.heads[head].score == kind


def _scale_not_applicable(c: Context) -> np.ndarray:
    head = c.work.problem.heads[c.head or 0]
    if head.score == "given":
        assert head.given is not None
        return c.work.masked(c.work.r(head.given / math.sqrt(2)), c.work.problem.allowed)
    return _scores(c, c.work.r(c.own["dot"] / math.sqrt(_d_k(c))), c.work.problem.allowed)


CATALOGUE: tuple[Mistake, ...] = (
    Mistake("missing_scale", ("missing_scale",), "scores", lambda c: _mask_all(c, scale=False), _scaled),
    Mistake(
        "wrong_scale",
        ("wrong_scale",),
        "scores",
        lambda c: _scores(c, c.work.r(c.own["dot"] * math.sqrt(_d_k(c))), c.work.problem.allowed),
        _scaled,
        what="multiplied by √d_k",
    ),
    Mistake("bias_forgotten", ("bias_forgotten",), "scores", _forgot_bias, _biased(0), what="scores without b"),
    Mistake(
        "bias_forgotten:head 2",
        ("bias_forgotten",),
        "scores",
        _forgot_bias,
        _biased(1),
        head=1,
        what="head 2's scores without its ALiBi",
    ),
    Mistake(
        "bias_after_softmax",
        ("bias_after_softmax",),
        "weights",
        _after_softmax,
        _biased(0),
        what="b added to the weights; the scores before it are bias_forgotten's act",
        first=("scores", "bias_forgotten", _forgot_bias),
    ),
    Mistake("no_exp", ("no_exp",), "weights", lambda c: _no_exp(c, axis=1), _any, what="s/Σs"),
    Mistake(
        "unnormalized",
        ("unnormalized",),
        "weights",
        lambda c: np.where(np.isnan(c.own["scores"]), np.nan, c.work.exp(c.own["scores"])),
        _any,
        what="e^s not divided by the sum",
    ),
    Mistake(
        "wrong_axis",
        ("wrong_axis",),
        "weights",
        lambda c: c.work.softmax(c.own["scores"], axis=0),
        _any,
        what="softmax over the queries",
    ),
    Mistake("not_normalized", ("not_normalized",), "weights", _dropped_term, _any, what="the sum leaves out a term"),
    Mistake("mask_ignored", ("mask_ignored",), "scores", lambda c: _mask(c, np.ones_like(c.own["dot"], bool)), _causal),
    Mistake(
        "mask_inverted",
        ("mask_inverted",),
        "scores",
        lambda c: _mask(c, np.triu(np.ones_like(c.own["dot"], bool))),
        _causal,
        what="query i sees keys i..n",
    ),
    Mistake(
        "causal_shifted+1",
        ("causal_shifted",),
        "scores",
        lambda c: _mask(c, _shifted(c.work.problem, 1)),
        _causal,
        what="query i sees keys 0..i+1",
    ),
    Mistake(
        "causal_shifted-1",
        ("causal_shifted",),
        "scores",
        lambda c: _mask(c, _shifted(c.work.problem, -1)),
        _causal,
        what="strict lower triangle: the first query's weights masked, its output not answered (?)",
    ),
    Mistake(
        "causal_upper_left",
        ("causal_upper_left",),
        "scores",
        lambda c: _mask(c, np.tri(*c.own["dot"].shape, dtype=bool)),
        _decoding,
        what="decoding with the top-left mask: query i sees keys 0..i",
    ),
    Mistake("rope_reversed", ("rope_reversed",), "dot", _rope_slip(-1.0, False), _rope, what="q and k turned by −m·θ"),
    Mistake(
        "rope_pairing",
        ("rope_pairing",),
        "dot",
        _rope_slip(1.0, True),
        _pairings_differ,
        what="the other pairing (half for interleaved, or the reverse)",
    ),
    Mistake(
        "rope_forgotten",
        ("rope_forgotten",),
        "dot",
        lambda c: c.work.compatibility(c.work.problem.heads[c.head or 0], c.own["queries"], c.own["keys"]),
        _rope,
        what="q·k not turned",
    ),
    Mistake(
        "rope_positions_shifted",
        ("rope_positions_shifted",),
        "dot",
        lambda c: c.work.compatibility(
            c.work.problem.heads[c.head or 0], *c.work.turned(c.own["queries"], c.own["keys"], keys_from=1.0)
        ),
        _rope,
        what="the keys' positions counted from 1",
    ),
    Mistake(
        "rope_positions_shifted:decoding",
        ("rope_positions_shifted",),
        "dot",
        lambda c: c.work.compatibility(
            c.work.problem.heads[c.head or 0], *c.work.turned(c.own["queries"], c.own["keys"], new_at_zero=True)
        ),
        lambda p: _rope(p) and _decoding(p),
        what="the new tokens put at positions 0, 1, ... when decoding",
    ),
    Mistake("gqa_kv_tiled", ("gqa_kv_tiled",), "dot", _kv_tiled, _tiled_differs, head=1, what="kv head h mod G"),
    Mistake(
        "alibi_sign_flipped",
        ("alibi_sign_flipped",),
        "scores",
        _alibi_slope(lambda p, h: -p.slopes[h]),
        _alibi,
        what="+m_h·|i − j|",
    ),
    Mistake(
        "alibi_wrong_slope",
        ("alibi_wrong_slope",),
        "scores",
        _alibi_slope(lambda p, h: p.slopes[1 - h]),
        _alibi,
        what="head 1 with head 2's slope",
    ),
    Mistake(
        "alibi_wrong_slope:from_zero",
        ("alibi_wrong_slope",),
        "scores",
        _alibi_slope(_from_zero),
        _alibi,
        what="slopes counted from h = 0",
    ),
    *(
        Mistake(code, (code,), "positioned", _positioned(first, swapped), lambda p: p.x is not None, None, what)
        for code, first, swapped, what in (
            ("sinusoidal_from_one", 1.0, False, "positions 1..n"),
            ("sinusoidal_sin_cos_swapped", 0.0, True, "cos in the even coordinates, sin in the odd"),
        )
    ),
    Mistake("keys_as_values", ("keys_as_values",), "output", _keys_as_values, _same_width),
    Mistake(
        "values_as_keys",
        ("values_as_keys",),
        "dot",
        lambda c: c.work.r(c.own["queries"] @ c.own["values"].T),
        lambda p: _same_width(p) and all(h.score in ("scaled_dot", "dot") for h in p.heads) and not _rope(p),
    ),
    Mistake(
        "not_transposed",
        ("not_transposed",),
        "dot",
        lambda c: c.work.r(c.own["queries"] @ c.own["keys"]),
        lambda p: _square_keys(p) and not _rope(p),
        what="Q·K",
    ),
    Mistake("transposed", ("transposed",), "dot", lambda c: c.careful().T, _unmasked, what="K·Qᵀ"),
    Mistake("transposed_shape", ("transposed",), "output", _transposed_shape, _any, what="output written d_v × n"),
    Mistake(
        "wrong_row:dot", ("wrong_row",), "dot", lambda c: _swap(c.careful(), 0), _unmasked, what="two queries swapped"
    ),
    Mistake(
        "wrong_row:weights",
        ("wrong_row",),
        "weights",
        lambda c: _swap(c.careful(), 1),
        _unmasked,
        what="two keys swapped",
    ),
    Mistake(
        "cosine_no_norm",
        ("cosine_no_norm",),
        "dot",
        lambda c: c.work.r(c.own["queries"] @ c.own["keys"].T),
        _kind("cosine"),
    ),
    Mistake("additive_no_tanh", ("additive_no_tanh",), "dot", _additive_no_tanh, _kind("additive")),
    Mistake(
        "scale_not_applicable:dot",
        ("scale_not_applicable",),
        "scores",
        _scale_not_applicable,
        _score_of_head(0, "dot"),
        what="1/√d_k on score: dot",
    ),
    Mistake(
        "scale_not_applicable:given",
        ("scale_not_applicable",),
        "scores",
        _scale_not_applicable,
        _score_of_head(1, "given"),
        head=1,
        what="1/√2 on given scores",
    ),
    Mistake("other_head:weights", ("other_head",), "weights", _other_head("weights"), _several, head=1),
    Mistake("other_head:output", ("other_head",), "output", _other_head("output"), _several, head=1),
    Mistake(
        "concat_order",
        ("concat_order",),
        "concat",
        lambda c: np.hstack(c.own["outputs"][::-1]),  # type: ignore[index]
        _several,
        head=None,
    ),
    Mistake(
        "forgot_w_o",
        ("forgot_w_o",),
        "final",
        _forgot_w_o,
        lambda p: p.w_o is not None,
        head=None,
        what="final = concat",
    ),
    Mistake(
        "missing_scale+mask_ignored",
        ("missing_scale", "mask_ignored"),
        "scores",
        lambda c: _mask_all(c, scale=False, allowed=np.ones_like(c.own["dot"], bool)),
        lambda p: _scaled(p) and p.causal,
    ),
    Mistake(
        "missing_scale+bias_forgotten",
        ("missing_scale", "bias_forgotten"),
        "scores",
        lambda c: _mask_all(c, scale=False, bias=False),
        lambda p: _scaled(p) and _biased(0)(p),
        what="q·k as the scores",
    ),
    Mistake(
        "bias_forgotten+mask_ignored",
        ("bias_forgotten", "mask_ignored"),
        "scores",
        lambda c: _mask_all(c, bias=False, allowed=np.ones_like(c.own["dot"], bool)),
        lambda p: _causal(p) and _biased(0)(p),
        what="q·k/√d_k, every key",
    ),
    Mistake(
        "no_exp+wrong_axis",
        ("no_exp", "wrong_axis"),
        "weights",
        lambda c: _no_exp(c, axis=0),
        _any,
        what="s/Σs by column",
    ),
    Mistake(
        "wrong_scale+mask_inverted",
        ("wrong_scale", "mask_inverted"),
        "scores",
        lambda c: _scores(c, c.work.r(c.own["dot"] * math.sqrt(_d_k(c))), np.triu(np.ones_like(c.own["dot"], bool))),
        lambda p: _scaled(p) and p.causal,
    ),
    Mistake("rounded_early:dot", ("rounded_early",), "scores", _rounded_early("scores", 1), _scaled, what="q·k at 1"),
    Mistake("rounded_early:scores", ("rounded_early",), "weights", _rounded_early("weights", 1), _any, what="s at 1"),
    Mistake("rounded_early:exp", ("rounded_early",), "weights", _rounded_early("exp", 1), _any, what="e^s at 1"),
    Mistake("rounded_early:weights", ("rounded_early",), "output", _rounded_early("output", 2), _any, what="α at 2"),
)


def _mask_all(c: Context, *, scale: bool = True, bias: bool = True, allowed: np.ndarray | None = None) -> np.ndarray:
    """Scores from the student's dot, scaled or not, the bias added or forgotten, under `allowed` (default: the
    problem's mask)."""
    dot = c.own["dot"]
    mask = c.work.problem.allowed if allowed is None else allowed
    scaled = c.work.scale(c.work.problem.heads[c.head or 0], dot, _d_k(c)) if scale else dot.copy()
    return _scores(c, scaled, mask) if bias else c.work.masked(scaled, mask)


BY_NAME = {m.name: m for m in CATALOGUE}
CODES = sorted({code for m in CATALOGUE for code in m.codes})
