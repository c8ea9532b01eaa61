"""FlashAttention's online softmax, tile by tile, every running value kept: the arithmetic of attncli.kernel, shown.

Pure numpy, no I/O. References: Milakov & Gimelshein 2018, "Online normalizer calculation for
softmax"; Dao et al. 2022, "FlashAttention", Algorithm 1; Dao 2023, "FlashAttention-2" (the
log-sum-exp L = m + ln ℓ it saves for the backward pass); UW CSE 599M, "From Online Softmax to
FlashAttention"; Stanford CS336, assignment 2.

For each query the keys come in tiles of B, in order. The running max m starts at −∞, the
running sum ℓ at 0 and the accumulator o at 0 (d_v numbers). For each tile, masked keys skipped:

    m' = max(m, the tile's max score)       the tile's max is −∞ when every key of it is masked
    α  = e^(m − m')                         0 while m = −∞: there is nothing to rescale yet
    ℓ' = α·ℓ + Σ e^(s − m')
    o' = α·o + Σ e^(s − m')·v

After the last tile o/ℓ is the output, and L = m + ln ℓ = ln Σ e^s. A tile whose keys are all
masked leaves m, ℓ and o as they were (α = 1 once m is finite).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attncli.errors import fail
from attncli.softmax import log_sum_exp

if TYPE_CHECKING:
    from attncli.core import HeadSteps

# Numbers a trace may hold over all heads (each tile: its max, m, α, ℓ and o; each key its e^(s − m')):
# beyond this there are more than a write-up or a JSON document can hold, and `within_limit` refuses.
TRACE_NUMBERS = 4_000_000
RUNNING = 4  # numbers a tile keeps besides its accumulator: its max, m, α, ℓ


class Tiles(NamedTuple):
    """One head's online softmax, query by query (rows) and tile by tile (columns)."""

    size: int  # B, keys per tile; the last tile may have fewer
    maxima: np.ndarray  # (L, T) each tile's largest score; −∞ where every key of the tile is masked
    running_max: np.ndarray  # (L, T) m after each tile; −∞ until a key has been seen
    rescale: np.ndarray  # (L, T) α = e^(m − m'), what ℓ and o were multiplied by
    exp: np.ndarray  # (L, S) e^(s − m') of each key, m' being m after its tile; 0 where masked
    running_sum: np.ndarray  # (L, T) ℓ after each tile
    accumulator: np.ndarray  # (L, T, d_v) o after each tile
    output: np.ndarray  # (L, d_v) o/ℓ after the last tile
    logsumexp: np.ndarray  # (L,) L = m + ln ℓ after the last tile

    @property
    def accumulated(self) -> np.ndarray:
        """(L·T, d_v) o after each tile as rows, query by query (row i·T + t): how answers: and the tutor lay it out."""
        return self.accumulator.reshape(-1, self.accumulator.shape[2])

    def spans(self) -> list[slice]:
        """The keys of each tile, in order: 0..B − 1, B..2B − 1, ..."""
        keys = self.exp.shape[1]
        return [slice(first, min(first + self.size, keys)) for first in range(0, keys, self.size)]


def count(keys: int, size: int) -> int:
    """How many tiles of `size` keys cover `keys` keys: ⌈S/B⌉."""
    return -(-keys // size)


def within_limit(size: int, queries: int, keys: int, widths: list[int]) -> int:
    """How many numbers the traces of heads whose values are `widths` wide hold; an AttnError past TRACE_NUMBERS."""
    tiles = count(keys, size)
    numbers = sum(queries * (tiles * (RUNNING + width) + keys) for width in widths)
    if numbers > TRACE_NUMBERS:
        raise fail("problem.too_many_tiles", numbers=numbers, limit=TRACE_NUMBERS, tiles=tiles, size=size)
    return numbers


@np.errstate(over="ignore", invalid="ignore")  # an accumulator that overflows is an error, not a warning
def online_softmax(scores: np.ndarray, values: np.ndarray, size: int) -> Tiles:
    """The online softmax of every row of `scores` (L, S; −∞ where masked) over `values` (S, d_v), `size` keys a tile.

    Every row has at least one key (the problem parser sees to it). An AttnError when o passes
    float's range, as Σ e^(s − m')·v can for values near it while their weighted mean cannot.
    """
    n_q, n_k = scores.shape
    dtype = scores.dtype
    tiles = count(n_k, size)
    maxima, running_max, rescale, running_sum = (np.empty((n_q, tiles), dtype=dtype) for _ in range(RUNNING))
    accumulator = np.empty((n_q, tiles, values.shape[1]), dtype=dtype)  # (L, T, d_v)
    exp = np.empty_like(scores)  # (L, S)
    m = np.full(n_q, -np.inf, dtype=dtype)  # (L,)
    total = np.zeros(n_q, dtype=dtype)  # (L,)
    o = np.zeros((n_q, values.shape[1]), dtype=dtype)  # (L, d_v)
    for t, first in enumerate(range(0, n_k, size)):
        keys = slice(first, first + size)
        tile = scores[:, keys]  # (L, B)
        maxima[:, t] = tile.max(axis=1)
        new = np.maximum(m, maxima[:, t])  # (L,) m'
        base = np.where(np.isneginf(new), 0, new)  # (L,) what e^s is taken from: 0 while nothing is seen
        alpha = np.exp(m - base)  # (L,) e^(m − m'): e^(−∞) = 0 on the first tile that sees a key
        exp[:, keys] = np.exp(tile - base[:, None])  # (L, B) e^(s − m'), 0 where masked
        total = alpha * total + exp[:, keys].sum(axis=1)  # (L,)
        o = alpha[:, None] * o + exp[:, keys] @ values[keys]  # (L, d_v)
        m = new
        running_max[:, t], rescale[:, t], running_sum[:, t], accumulator[:, t] = m, alpha, total, o
    if not np.isfinite(o).all():
        raise fail("core.overflow").at(field="tiles")
    return Tiles(
        size, maxima, running_max, rescale, exp, running_sum, accumulator, o / total[:, None], log_sum_exp(m, total)
    )


def worked(head: HeadSteps, size: int | None) -> HeadSteps:
    """`head`, softmaxed with each row's max as its shift (`core.attend(stable=True)`), with its log-sum-exp
    ln Σ e^s = m + ln Σ e^(s − m) per query and, given a tile `size`, its online softmax."""
    logsumexp = log_sum_exp(head.shift, head.exp.sum(axis=1))  # (L,)
    trace = None if size is None else online_softmax(head.scores, head.values, size)
    return head._replace(logsumexp=logsumexp, tiles=trace)
