"""`bias:` an additive term between the scaled scores and softmax: ALiBi's distances, or any matrix.

Like the float `attn_mask` of PyTorch's scaled_dot_product_attention, the bias is added to
every head's scaled scores before the mask and softmax. Given scores are final (no scale
applies to them), so no bias does either: such a problem is refused.
"""

from __future__ import annotations

import numpy as np

from attncli.parsing import masks
from attncli.parsing.fields import FieldReader
from attncli.problem import GIVEN, Bias, Head

ALIBI = "alibi"


def read(reader: FieldReader, data: dict, positions: masks.Positions, heads: tuple[Head, ...]) -> Bias | None:
    """The bias of `data` for `heads` over `positions`; None without `bias:`."""
    if data.get("bias") is None:
        return None
    written = data["bias"]
    if any(head.score.kind == GIVEN for head in heads):
        raise reader.error(("bias",), "problem.bias_given_scores")
    if isinstance(written, str) and not reader.flags.get("bias"):
        if written.strip() != ALIBI:
            raise reader.error(("bias",), "problem.bad_bias", got=written)
        return alibi(reader, data, positions, len(heads))
    matrix = reader.matrix(("bias",), written, positions.query_tokens, "query_tokens")
    if matrix.shape[1] != len(positions.tokens):
        raise reader.error(("bias",), "problem.bias_width", count=matrix.shape[1], expected=len(positions.tokens))
    return Bias("matrix", matrix)


def alibi(reader: FieldReader, data: dict, positions: masks.Positions, heads: int) -> Bias:
    """Press et al.'s ALiBi: head h adds −m_h·|i − j|, with the slopes m_h of `slopes`.

    With a causal mask only j ≤ i is kept, where |i − j| = i − j, the paper's form; without one the
    symmetric distance is used. Distances are within one sequence, so cross-attention is refused
    unless `causal_lower_right` places the queries at the end of the keys.
    """
    kind = masks.rule_kind(data)
    if positions.cross and kind != "causal_lower_right":
        raise reader.error(("bias",), "problem.alibi_cross")
    query_at = masks.query_at(reader, positions, kind, "bias")  # (L,)
    distance = np.abs(query_at[:, None] - np.arange(len(positions.tokens))[None, :]).astype(reader.dtype)  # (L, S)
    return Bias(ALIBI, distance, slopes(heads))


def slopes(heads: int) -> tuple[float, ...]:
    """ALiBi's slope of each of `heads` heads, as Press et al.'s code (`get_slopes`) and BLOOM's
    (`build_alibi_tensor`) make them, so that a real model's heads get their own slopes.

    With H = n a power of two, m_h = 2^(−8h/n) for h = 1..n (H = 8: 1/2 … 1/256). Otherwise the
    slopes of n, the closest power of two below H, then every other slope of 2n heads,
    2^(−8h/2n) for h = 1, 3, 5, …, until there are H (H = 3: 1/16, 1/256, then 1/4). Each is
    2^x correctly rounded; the paper's start·ratio^i lands a few ulps off it.
    """
    n = 1 << (heads.bit_length() - 1)  # the closest power of two ≤ H
    below = [2.0 ** (-8 * h / n) for h in range(1, n + 1)]
    return tuple(below + [2.0 ** (-8 * h / (2 * n)) for h in range(1, 2 * (heads - n), 2)])
