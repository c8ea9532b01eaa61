"""The tutor's own step-level slips: what a student did at one step, in the words of that step.

`check` names the mistakes of the steps a homework holds from its replays (attncli.grading); these
are the slips of a single step as the tutor asks it, each replayed on the student's own numbers:
the score typed at the e^s step ("that is the score itself: raise e to it"), √d_k given for the
scale ("that is √d_k: the scale is its inverse"), a RoPE turn forgotten (q·k of the unturned
vectors, `rope_forgotten`, the code `check` gives it). Each slip carries the code of the mistake it
is (the summary counts by code, `check`'s codes where `check` has one) and the words the tutor says
(`says`: a catalogue key; empty for `check`'s own words and hint).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from attncli import core, positions
from attncli.grading import mistakes
from attncli.practice.own import Own, Ref, part_of
from attncli.practice.plan import Prompt, scaled

Expected = list[tuple[float, float]]  # each cell's value and how far it may move


class Slip(NamedTuple):
    """One slip replayed: its code, the tutor's words for it ("" for check's), the numbers it gives."""

    code: str
    says: str
    values: Expected


def slips(own: Own, prompt: Prompt, refs: list[Ref], expected: Expected) -> list[Slip]:
    """The slips of the prompt's step a student may have made, each with the numbers it gives for the prompt's cells."""
    found = SLIPS.get(prompt.step)
    if found is None:
        return []
    widths = [radius for _, radius in expected]
    return [Slip(code, says, list(zip(values, widths))) for code, says, values in found(own, prompt, refs)]


Replayed = list[tuple[str, str, list[float]]]  # (code, says, the value of each cell)


def _scale(own: Own, prompt: Prompt, refs: list[Ref]) -> Replayed:
    """1, 1/d_k, √d_k, and 1/√d_v or 1/√S where they are not 1/√d_k: each with what it is."""
    steps = part_of(own.solved, prompt.layer)
    head = steps.heads[_of(prompt.head)]
    d_k, d_v, tokens = head.k.shape[1], head.values.shape[1], len(steps.problem.tokens)
    wrong = mistakes.wrong_scales(head, steps.problem)
    factors = [
        ("missing_scale", "practice.slip.scale_one", 1.0),
        ("wrong_scale", "practice.slip.scale_over_d_k", wrong["d_k"]),
        ("wrong_scale", "practice.slip.scale_sqrt_d_k", wrong["times_sqrt_d_k"]),
    ]
    if d_v != d_k:
        factors.append(("wrong_scale", "practice.slip.scale_d_v", wrong["sqrt_d_v"]))
    if tokens != d_k:
        factors.append(("wrong_scale", "practice.slip.scale_keys", wrong["sqrt_keys"]))
    true = head.spec.score.scale
    return [(code, says, [value]) for code, says, value in factors if not math.isclose(value, true)]


def _exp(own: Own, prompt: Prompt, refs: list[Ref]) -> Replayed:
    """The score itself; e^(q·k), the scale forgotten; e^s of the score without its bias."""
    head = part_of(own.solved, prompt.layer).heads[_of(prompt.head)]
    shift = [float(head.shift[prompt.row]) for _ in refs]
    scores = [own.value(_as(ref, "biased_scores")) for ref in refs]
    found: Replayed = [("no_exp", "practice.slip.exp_is_score", scores)]
    if scaled(head):
        dots = [own.value(_as(ref, "dot")) + _bias(own, ref) for ref in refs]
        found.append(("missing_scale", "", [_e(d - s) for d, s in zip(dots, shift)]))
    if head.bias is not None:
        plain = [own.value(_as(ref, "scores")) for ref in refs]
        found.append(("bias_forgotten", "", [_e(p - s) for p, s in zip(plain, shift)]))
    return found


def _sum(own: Own, prompt: Prompt, refs: list[Ref]) -> Replayed:
    """The scores added up instead of their e^s."""
    steps = part_of(own.solved, prompt.layer)
    keys = [j for j, allowed in enumerate(steps.problem.mask[prompt.row]) if allowed]
    total = sum(own.value((prompt.layer, "biased_scores", prompt.head, prompt.row, j)) for j in keys)
    return [("no_exp", "practice.slip.sum_of_scores", [total])]


def _product(own: Own, prompt: Prompt, refs: list[Ref]) -> Replayed:
    """The key's vector instead of its value, or another key's value."""
    steps = part_of(own.solved, prompt.layer)
    head = steps.heads[_of(prompt.head)]
    key = prompt.key
    assert key is not None, "a product names its key"
    weight = own.value((prompt.layer, "weights", prompt.head, prompt.row, key))
    found: Replayed = []
    if head.keys is not None and head.keys.shape[1] == head.values.shape[1]:
        found.append(("keys_as_values", "", [weight * float(head.keys[key, c]) for c in prompt.columns]))
    for other in range(len(steps.problem.tokens)):
        if other != key and steps.problem.mask[prompt.row, other]:
            values = [own.value((prompt.layer, "values", prompt.head, other, c)) for c in prompt.columns]
            found.append(("wrong_row", "", [weight * value for value in values]))
    return found


def _turned(own: Own, prompt: Prompt, refs: list[Ref]) -> Replayed:
    """The vector as it was before the turn (RoPE forgotten), or turned by −m·θ_i (the wrong way round)."""
    steps = part_of(own.solved, prompt.layer)
    rotation = steps.heads[_of(prompt.head)].rotation
    assert rotation is not None, "turns need RoPE"
    name = "queries" if prompt.step == "turned_queries" else "keys"
    width = rotation.queries.shape[1]
    vector = np.array([[own.value((prompt.layer, name, prompt.head, prompt.row, c)) for c in range(width)]])
    angles = rotation.query_angles if name == "queries" else rotation.key_angles
    back = positions.rotate(vector, -angles[prompt.row : prompt.row + 1], rotation.style)[0]
    return [
        ("rope_forgotten", "practice.slip.rope_forgotten", [float(vector[0, c]) for c in prompt.columns]),
        ("rope_reversed", "", [float(back[c]) for c in prompt.columns]),
    ]


def _dot(own: Own, prompt: Prompt, refs: list[Ref]) -> Replayed:
    """With RoPE: the compatibility of the unturned query and keys (the turn forgotten)."""
    head = part_of(own.solved, prompt.layer).heads[_of(prompt.head)]
    if head.rotation is None or head.queries is None:
        return []
    width = head.q.shape[1]
    q = [own.value((prompt.layer, "queries", prompt.head, prompt.row, c)) for c in range(width)]
    found = []
    for j in prompt.columns:
        k = [own.value((prompt.layer, "keys", prompt.head, j, c)) for c in range(width)]
        compat, _ = core.compatibility(head.spec.score, np.array([q]), np.array([k]))
        found.append(float(compat[0, 0]))
    return [("rope_forgotten", "practice.slip.rope_forgotten_dot", found)]


def _scores(own: Own, prompt: Prompt, refs: list[Ref]) -> Replayed:
    """The compatibility left unscaled."""
    return [("missing_scale", "", [own.value(_as(ref, "dot")) for ref in refs])]


def _biased(own: Own, prompt: Prompt, refs: list[Ref]) -> Replayed:
    """The score without its bias."""
    return [("bias_forgotten", "", [own.value(_as(ref, "scores")) for ref in refs])]


SLIPS: dict[str, Callable[[Own, Prompt, list[Ref]], Replayed]] = {
    "scale": _scale,
    "exp": _exp,
    "sum": _sum,
    "product": _product,
    "turned_queries": _turned,
    "turned_keys": _turned,
    "dot": _dot,
    "scores": _scores,
    "biased_scores": _biased,
}


def _of(head: int | None) -> int:
    assert head is not None, "this step belongs to a head"
    return head


def _as(ref: Ref, step: str) -> Ref:
    layer, _, head, row, column = ref
    return (layer, step, head, row, column)


def _bias(own: Own, ref: Ref) -> float:
    layer, _, head, row, column = ref
    bias = part_of(own.solved, layer).heads[_of(head)].bias
    return 0.0 if bias is None else float(bias[row, column])


def _e(power: float) -> float:
    try:
        return math.exp(power)
    except OverflowError:
        return math.inf
