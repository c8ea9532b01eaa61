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
    "bias_after_softmax",
    "alibi_sign_flipped",
    "alibi_wrong_slope",
    "no_exp",
    "unnormalized",
    "not_normalized",
    "wrong_axis",
    "mask_ignored",
    "mask_inverted",
    "causal_shifted",
    "causal_upper_left",
    "rope_forgotten",
    "rope_reversed",
    "rope_pairing",
    "rope_positions_shifted",
    "sinusoidal_from_one",
    "sinusoidal_sin_cos_swapped",
    "gqa_kv_tiled",
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
# The single-act rule: a code is named only at the steps where its own act shows. Where two codes reproduce the same
# numbers and one of them needs an act not seen there (bias_after_softmax at the scores: b left out, which is
# bias_forgotten's single act; its own, b added to the weights, shows only at the weights), the other is named.
SHOWN_AT = {"bias_after_softmax": ("weights",)}
RIGHT, CARRIED, WRONG = "right", "carried", "wrong"
NOT_ANSWERED, MISSING, TOO_FEW_DECIMALS = "not_answered", "missing", "too_few_decimals"
# where rounding happens (rounded_early's places)
CARRIED_STEPS = ("queries", "keys", "values", "dot", "scores", "biased_scores", "exp", "weights", "output")
EARLY_DECIMALS = (1, 2, 3)
WRONG_SCALES = ("d_k", "sqrt_d_v", "sqrt_d_model", "sqrt_keys", "sqrt_queries", "times_sqrt_d_k")  # for 1/√d_k
# slips of method two can make at once (in one step)
PAIRABLE = (
    *("scale", "applied", "bias", "bias_at", "alibi", "slopes", "mask", "compat", "rope", "rope_at", "exp", "axis"),
    "mix",
)
ONE_ACT = (frozenset({"bias", "bias_at", "alibi", "slopes"}), frozenset({"rope", "rope_at"}))  # never paired within
# A replay goes stage by stage: x + PE, then each head's inputs, dot (RoPE's turn first), scores (and the biased
# ones), weights (e^s and their sums first), then every head's output, concat, final.
STAGES = ("positioned", "inputs", "dot", "scores", "weights", "output", "concat", "final")
ACTS = {  # the stages at which each field of a Mistake changes the calculation
    "sinusoidal": ("positioned",),
    "kv": ("inputs",),
    "compat": ("dot",),
    "rope": ("dot",),
    "rope_at": ("dot",),
    "mask": ("dot", "scores"),
    "scale": ("scores",),
    "applied": ("scores",),
    "bias": ("scores",),
    "alibi": ("scores",),
    "bias_at": ("scores", "weights"),
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
    "turned_queries": ("dot",),
    "turned_keys": ("dot",),
    "dot": ("dot",),
    "scores": ("scores",),
    "biased_scores": ("scores",),
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
    bias_at: str = "scores"  # weights: bias_after_softmax, b added to the weights instead of the scores
    alibi: str = "true"  # true | flipped (alibi_sign_flipped: +m·|i − j|) | slopes (alibi_wrong_slope: `slopes`)
    slopes: tuple[float, ...] = ()  # alibi_wrong_slope: the slope each head takes
    mask: str = "true"  # true | none | inverted | transposed | strict | strict_kept | wide | upper_left
    sinusoidal: str = "true"  # true | from_one (positions counted from 1) | swapped (sin and cos swapped)
    kv: str = "true"  # true | tiled (gqa_kv_tiled: query head h reads kv head h mod G)
    rope: str = "true"  # true | reversed (turned by −m·θ) | pairing (the other of half and interleaved) | forgotten
    # rope_positions_shifted: every position + 1 (plus_one), the keys' only (keys_plus_one), or the queries counted
    # from 0 when decoding (queries_from_zero)
    rope_at: str = "true"
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
    if any(left & act and right & act for act in ONE_ACT):  # two ways of one act (the bias, RoPE's turn)
        return None
    return replace(a, codes=(*a.codes, *b.codes), **{name: getattr(b, name) for name in right})


@functools.lru_cache(maxsize=4096)
def changed(mistake: Mistake) -> frozenset[str]:
    """The fields in which `mistake` departs from the right calculation (asked for every replay: kept)."""
    default = NO_MISTAKE
    names = (f.name for f in fields(Mistake) if f.name != "codes")
    return frozenset(name for name in names if getattr(mistake, name) != getattr(default, name))


def shown(mistake: Mistake, step: str) -> bool:
    """Whether every act of `mistake` shows at `step` (SHOWN_AT), so that its codes may be named there."""
    return all(step in SHOWN_AT.get(code, (step,)) for code in mistake.codes)


def singles(steps: Steps) -> list[Mistake]:
    """Every single classic mistake this problem can show."""
    heads = len(steps.heads)
    tokens = len(steps.problem.tokens)
    found = [
        Mistake(("missing_scale",), scale="none"),
        *(Mistake(("wrong_scale",), scale=scale) for scale in WRONG_SCALES),
        *(Mistake(("scale_not_applicable",), applied=factor) for factor in _inapplicable_scales(steps)),
        *_biases(steps),
        Mistake(("no_exp",), exp=False),
        Mistake(("unnormalized",), axis="none"),
        Mistake(("wrong_axis",), axis="queries"),
        Mistake(("mask_ignored",), mask="none"),
        Mistake(("mask_inverted",), mask="inverted"),
        Mistake(("mask_inverted",), mask="transposed"),
        Mistake(("causal_shifted",), mask="strict"),
        Mistake(("causal_shifted",), mask="strict_kept"),
        Mistake(("causal_shifted",), mask="wide"),
        *_decoding_and_rope(steps),
        *_positions_and_groups(steps),
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
    """The slips of today's models: the top-left causal mask when decoding against a KV cache, RoPE forgotten,
    turned the wrong way round, with the other pairing (which differs only from d_k = 4 on), or at positions
    shifted by one (every one, the keys' alone, or the new queries counted from 0 when decoding)."""
    problem = steps.problem
    found = []
    rule = problem.mask_rule
    if rule.kind == "causal_lower_right" and rule.window is None and len(problem.query_tokens) < len(problem.tokens):
        found.append(Mistake(("causal_upper_left",), mask="upper_left"))
    rope = problem.rope
    if rope is not None:
        found.append(Mistake(("rope_forgotten",), rope="forgotten"))
        found.append(Mistake(("rope_reversed",), rope="reversed"))
        if any(head.rotation is not None and head.rotation.queries.shape[1] >= 4 for head in steps.heads):
            found.append(Mistake(("rope_pairing",), rope="pairing"))
        shifts = ["plus_one", "keys_plus_one"]
        if not np.array_equal(rope.query_at, np.arange(len(rope.query_at))):
            shifts.append("queries_from_zero")
        found += [Mistake(("rope_positions_shifted",), rope_at=shift) for shift in shifts]
    return found


def _biases(steps: Steps) -> list[Mistake]:
    """A bias forgotten, or added to the weights after the softmax; ALiBi's sign flipped, or another slope taken:
    another head's, or the slopes counted from h = 0 (2^(−8(h − 1)/n) for head h of n)."""
    bias = steps.problem.bias
    if bias is None:
        return []
    found = [Mistake(("bias_forgotten",), bias=False), Mistake(("bias_after_softmax",), bias_at="weights")]
    if bias.kind != "alibi":
        return found
    found.append(Mistake(("alibi_sign_flipped",), alibi="flipped"))
    slopes = bias.slopes
    others = [
        tuple(slopes[other] if h == head else slope for h, slope in enumerate(slopes))
        for head in range(len(slopes))
        for other in range(len(slopes))
        if other != head
    ]
    n = 1 << (len(slopes).bit_length() - 1)  # Press et al.'s power of two, as attncli.parsing.biases.slopes
    from_zero = tuple(slope * 2.0 ** (8 / n) if h < n else slope * 2.0 ** (4 / n) for h, slope in enumerate(slopes))
    for wrong in dict.fromkeys([*others, from_zero]):
        found.append(Mistake(("alibi_wrong_slope",), alibi="slopes", slopes=wrong))
    return found


def _positions_and_groups(steps: Steps) -> list[Mistake]:
    """Sinusoidal positions counted from 1 or with sin and cos swapped; a query head reading kv head h mod G
    (tiled) instead of h // (H/G) (each kv head's queries side by side), which differs from 4 heads over 2 kv heads."""
    problem = steps.problem
    found = []
    if problem.positions is not None and problem.positions.kind == "sinusoidal":
        found += [
            Mistake(("sinusoidal_from_one",), sinusoidal="from_one"),
            Mistake(("sinusoidal_sin_cos_swapped",), sinusoidal="swapped"),
        ]
    if tiled_groups(problem) is not None:
        found.append(Mistake(("gqa_kv_tiled",), kv="tiled"))
    return found


def tiled_groups(problem: Problem) -> tuple[int, ...] | None:
    """For each query head, the head whose keys and values it reads when kv head h mod G is taken for head h (the
    first head reading that kv head); None without kv_heads, or where that is the right kv head for every head."""
    groups = [head.kv_head for head in problem.heads]
    if not problem.kv_names or any(group is None for group in groups):
        return None
    count = len(problem.kv_names)
    first = {group: groups.index(group) for group in groups}
    tiled = tuple(first.get(h % count, h) for h in range(len(groups)))
    return None if all(groups[t] == groups[h] for h, t in enumerate(tiled)) else tiled


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
    if kind == "strict_kept" and causal and mask.shape[0] > 1:
        kept = np.tri(mask.shape[0], k=-1, dtype=bool)  # each query without itself, but the first: it sees itself,
        kept[0, 0] = True  # the only way it still has weights
        return kept
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
