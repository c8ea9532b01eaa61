"""The classic mistakes: their codes, one `Mistake` per slip (or pair of slips), and the ones a problem can show.

A Mistake says where the calculation goes wrong and how, field by field; attncli.grading.replay replays
it and attncli.grading.diagnose names it when its replay gives the student's numbers. Adding a
diagnosis is a code here (and in both catalogues), a field of Mistake with the stages it acts at
(ACTS), its replay in attncli.grading.replay, and its place in `singles`.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np

from attncli.core import HeadSteps, Steps
from attncli.problem import Problem, Projection

CODES = (
    "missing_scale",
    "wrong_scale",
    "scale_not_applicable",
    "bias_forgotten",
    "no_exp",
    "unnormalized",
    "not_normalized",
    "wrong_axis",
    "mask_ignored",
    "mask_inverted",
    "causal_shifted",
    "causal_upper_left",
    "rope_reversed",
    "rope_pairing",
    "not_transposed",
    "values_as_keys",
    "keys_as_values",
    "cosine_no_norm",
    "additive_no_tanh",
    "wrong_row",
    "other_head",
    "concat_order",
    "forgot_w_o",
    "transposed",
    "rounded_early",
    "too_few_decimals",
)
RIGHT, CARRIED, WRONG = "right", "carried", "wrong"
NOT_ANSWERED, MISSING, TOO_FEW_DECIMALS = "not_answered", "missing", "too_few_decimals"
CARRIED_STEPS = ("queries", "keys", "values", "dot", "scores", "exp", "weights", "output")  # where rounding happens
EARLY_DECIMALS = (1, 2, 3)
WRONG_SCALES = ("d_k", "sqrt_d_v", "sqrt_d_model", "sqrt_keys", "sqrt_queries", "times_sqrt_d_k")  # for 1/√d_k
PAIRABLE = ("scale", "applied", "bias", "mask", "compat", "exp", "axis", "mix")  # slips of method two can make at once
# A replay goes stage by stage: each head's inputs, dot, scores and weights, then every head's output, concat, final.
STAGES = ("inputs", "dot", "scores", "weights", "output", "concat", "final")
ACTS = {  # the stages at which each field of a Mistake changes the calculation
    "compat": ("dot",),
    "rope": ("dot",),
    "mask": ("dot", "scores"),
    "scale": ("scores",),
    "applied": ("scores",),
    "bias": ("scores",),
    "exp": ("weights",),
    "axis": ("weights",),
    "mix": ("output",),
    "swap": ("output",),
    "weights_of": ("output",),
    "order": ("concat",),
    "w_o": ("final",),
    "shift": ("weights",),
}
EARLY_ACTS = {  # rounded_early at one step: where its rounding happens (its e^s unshifted is the field `shift`)
    "queries": ("inputs", "dot"),
    "keys": ("inputs", "dot"),
    "values": ("inputs",),
    "dot": ("dot",),
    "scores": ("scores",),
    "exp": ("weights",),
    "weights": ("weights",),
    "output": ("output",),
}


@dataclass(frozen=True)
class Mistake:
    """A classic slip (or two), replayed through the whole calculation to see whether it gives the student's numbers.

    Each field is one place where the calculation can go wrong; the default is the right way.
    """

    codes: tuple[str, ...] = ()  # () for the calculation as it should be
    scale: str = "true"  # true | none | one of WRONG_SCALES
    applied: float | None = None  # scale_not_applicable: the 1/√d applied to a score that takes none
    bias: bool = True  # False: bias_forgotten, the scaled scores taken without the problem's bias
    mask: str = "true"  # true | none | inverted | transposed | strict | wide | upper_left
    rope: str = "true"  # true | reversed (turned by −m·θ) | pairing (the other of half and interleaved)
    compat: str = "true"  # true | not_transposed | values | no_norm | no_tanh
    exp: bool = True  # False: no_exp, the scores normalised as they are
    axis: str = "keys"  # keys | queries (wrong_axis) | none (unnormalized)
    mix: str = "values"  # values | keys
    swap: tuple[int, int] | None = None  # wrong_row: these two tokens' values swapped in the weighted sum
    weights_of: tuple[int, ...] | None = None  # other_head: head h mixes its values with weights_of[h]'s weights
    order: tuple[int, ...] | None = None  # concat_order: the heads' outputs concatenated in this order
    w_o: bool = True  # False: forgot_w_o, the concatenation given as the final output
    decimals: int | None = None  # rounded_early: carried with this many decimals ...
    where: str | None = None  # ... at this step of CARRIED_STEPS only (None: at every one)
    shift: bool = True  # False: e^s taken as it is, as a student who rounds early does (not e^(s − m))

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash(tuple(getattr(self, name) for name in _MISTAKE_FIELDS)))

    def __hash__(self) -> int:
        """The fields' hash, made once: a replay is looked up by its Mistake hundreds of times a file."""
        return self._hash  # type: ignore[attr-defined]


_MISTAKE_FIELDS = tuple(f.name for f in fields(Mistake))
NO_MISTAKE = Mistake()  # the calculation as it should be


def ordered(codes: Sequence[str]) -> tuple[str, ...]:
    """`codes` once each, in the order of CODES: how a diagnosis lists them."""
    return tuple(code for code in CODES if code in codes)


def acts(mistake: Mistake, name: str) -> tuple[str, ...]:
    """The stages at which field `name` of `mistake` changes the calculation."""
    if name in ACTS:
        return ACTS[name]
    return STAGES if mistake.where is None else EARLY_ACTS[mistake.where]  # decimals and where


def pair(a: Mistake, b: Mistake) -> Mistake | None:
    """Both slips at once, when they are slips of method made in different places."""
    left, right = changed(a), changed(b)
    if a.codes == b.codes or not left | right <= set(PAIRABLE) or left & right or {"scale", "applied"} <= left | right:
        return None
    return replace(a, codes=(*a.codes, *b.codes), **{name: getattr(b, name) for name in right})


@functools.lru_cache(maxsize=4096)
def changed(mistake: Mistake) -> frozenset[str]:
    """The fields in which `mistake` departs from the right calculation (asked for every replay: kept)."""
    default = NO_MISTAKE
    names = (f.name for f in fields(Mistake) if f.name != "codes")
    return frozenset(name for name in names if getattr(mistake, name) != getattr(default, name))


def singles(steps: Steps) -> list[Mistake]:
    """Every single classic mistake this problem can show."""
    heads = len(steps.heads)
    tokens = len(steps.problem.tokens)
    found = [
        Mistake(("missing_scale",), scale="none"),
        *(Mistake(("wrong_scale",), scale=scale) for scale in WRONG_SCALES),
        *(Mistake(("scale_not_applicable",), applied=factor) for factor in _inapplicable_scales(steps)),
        *([Mistake(("bias_forgotten",), bias=False)] if steps.problem.bias is not None else []),
        Mistake(("no_exp",), exp=False),
        Mistake(("unnormalized",), axis="none"),
        Mistake(("wrong_axis",), axis="queries"),
        Mistake(("mask_ignored",), mask="none"),
        Mistake(("mask_inverted",), mask="inverted"),
        Mistake(("mask_inverted",), mask="transposed"),
        Mistake(("causal_shifted",), mask="strict"),
        Mistake(("causal_shifted",), mask="wide"),
        *_decoding_and_rope(steps),
        Mistake(("not_transposed",), compat="not_transposed"),
        Mistake(("values_as_keys",), compat="values"),
        Mistake(("keys_as_values",), mix="keys"),
        Mistake(("cosine_no_norm",), compat="no_norm"),
        Mistake(("additive_no_tanh",), compat="no_tanh"),
        *(Mistake(("wrong_row",), swap=(a, b)) for a, b in itertools.combinations(range(tokens), 2)),
        *(
            Mistake(("other_head",), weights_of=tuple(other if h == head else h for h in range(heads)))
            for head in range(heads)
            for other in range(heads)
            if other != head
        ),
        *(
            Mistake(("concat_order",), order=order)
            for order in itertools.permutations(range(heads))
            if order != tuple(range(heads))
        ),
        Mistake(("forgot_w_o",), w_o=False),
    ]
    return found


def _decoding_and_rope(steps: Steps) -> list[Mistake]:
    """The slips of today's models: the top-left causal mask when decoding against a KV cache, RoPE turned
    the wrong way round, or with the other pairing (which differs only from d_k = 4 on)."""
    problem = steps.problem
    found = []
    rule = problem.mask_rule
    if rule.kind == "causal_lower_right" and rule.window is None and len(problem.query_tokens) < len(problem.tokens):
        found.append(Mistake(("causal_upper_left",), mask="upper_left"))
    if problem.rope is not None:
        found.append(Mistake(("rope_reversed",), rope="reversed"))
        if any(head.rotation is not None and head.rotation.queries.shape[1] >= 4 for head in steps.heads):
            found.append(Mistake(("rope_pairing",), rope="pairing"))
    return found


def _inapplicable_scales(steps: Steps) -> list[float]:
    """The 1/√d a student might apply to a score that takes no scale (score: dot, or scores given)."""
    widths = {head.keys.shape[1] for head in steps.heads if head.keys is not None}
    factors = []
    for head in steps.heads:
        if head.spec.score.kind == "dot" or head.queries is None:
            candidates = widths | {head.values.shape[1]} if head.queries is None else {head.k.shape[1]}
            factors += [1 / math.sqrt(d) for d in sorted(candidates) if d > 1]
    return sorted(set(factors))


def mask_of(kind: str, mask: np.ndarray, problem: Problem) -> np.ndarray:
    """The mask as a slip applies it; causal_shifted moves a causal mask's diagonal by one; causal_upper_left
    aligns a decoding mask to the first key instead of the last (query i sees keys 0..i, padding kept)."""
    if kind == "true":
        return mask
    if kind == "upper_left":
        padded = np.isin(np.array(problem.tokens, dtype=object), np.array(problem.mask_rule.padding, dtype=object))
        return np.tri(*mask.shape, dtype=np.bool_) & ~padded[None, :]
    if kind == "none":
        return np.ones_like(mask)
    if kind == "inverted":
        return ~mask
    square = mask.shape[0] == mask.shape[1]
    causal = square and np.array_equal(mask, np.tri(mask.shape[0], dtype=bool))
    if kind == "transposed" and square:
        return mask.T  # causal the wrong way: each query sees itself and the later positions
    if kind == "strict" and causal:
        return np.tri(mask.shape[0], k=-1, dtype=bool)  # each query without itself
    if kind == "wide" and causal:
        return np.tri(mask.shape[0], k=1, dtype=bool)  # each query with the next position too
    return mask


def scale_of(mistake: Mistake, steps: Steps, h: int) -> float:
    """The factor a head's scores are multiplied by under the slip (the true one where it cannot apply)."""
    head = steps.heads[h]
    score = head.spec.score
    kind = mistake.scale
    if mistake.applied is not None and (score.kind == "dot" or head.queries is None):
        return mistake.applied
    if kind == "true" or head.queries is None:
        return score.scale
    if kind == "none":
        return 1.0
    if score.kind != "scaled_dot":
        return score.scale
    wrong = wrong_scales(head, steps.problem)[kind]
    return score.scale if math.isclose(wrong, 1.0) else wrong  # a factor of 1 is missing_scale, not wrong_scale


def wrong_scales(head: HeadSteps, problem: Problem) -> dict[str, float]:
    """The factors a student may take for `head`'s 1/√d_k, by WRONG_SCALES' names (the head has keys)."""
    d_k, d_v = head.k.shape[1], head.values.shape[1]
    queries = head.spec.queries
    d_model = queries.x.shape[1] if isinstance(queries, Projection) else d_k
    return {
        "d_k": 1 / d_k,
        "sqrt_d_v": 1 / math.sqrt(d_v),
        "sqrt_d_model": 1 / math.sqrt(d_model),
        "sqrt_keys": 1 / math.sqrt(len(problem.tokens)),
        "sqrt_queries": 1 / math.sqrt(len(problem.query_tokens)),
        "times_sqrt_d_k": math.sqrt(d_k),
    }
