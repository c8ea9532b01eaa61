"""The blocked attention kernel behind `from attncli import attention`: O(L + S) memory, no intermediates kept.

It follows PyTorch's scaled_dot_product_attention (boolean masks True = may attend, additive
float masks, causal top-left or bottom-right, grouped-query heads, scale 1/√E by default) and
works on blocks of query rows, each over tiles of keys, the softmax gathered tile by tile as in
FlashAttention (Dao et al., 2022, "FlashAttention: Fast and Memory-Efficient Exact Attention").
The every-step path the CLI shows is attncli.core.attend; its docstring says how the two relate.

The blocks are shared among the caller's thread and helper threads kept between calls, one
per core, BLAS held to one thread meanwhile (attncli.kernel_threads).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from attncli import kernel_threads

BLOCK_CELLS = 1 << 18  # scores per block: 1 MiB in float32, so a tile of scores stays in a core's L2 cache
# Query rows per block when the keys are many: BLAS repacks a tile of keys for every block, and with
# few rows the repacking costs as much as the product (n = 32768: 8 rows took 2.2× as long as 64).
BLOCK_ROWS = 256
# Multiply-adds in all above which OpenBLAS would run its own threads: the blocks go to ours instead.
# (Under load, OpenBLAS's spinning threads make a 0.3 ms call take 80 ms; ours wait without spinning.)
PARALLEL_WORK = 1 << 19
# ... and below which the caller's thread does them alone (BLAS still at one thread): n = 256, d = 64
# (8.4M) is 0.3 ms of work on one core, and took 1.15 ms with a helper to wake on a quiet machine.
SERIAL_WORK = 1 << 24


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    causal: bool | str = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    return_weights: bool = False,
    key_bins: np.ndarray | None = None,
    return_lse: bool = False,
    block_rows: int | None = None,
    block_keys: int | None = None,
    threads: int | None = None,
) -> np.ndarray | tuple[np.ndarray, ...]:
    """softmax(q·kᵀ·scale + mask)·v, like torch's scaled_dot_product_attention, in O(L + S) memory.

    q (..., L, E), k (..., S, E), v (..., S, E_v); leading dimensions are batches.
    `mask` is boolean (True = may attend, as in SDPA) or additive floats, and broadcasts
    to (..., L, S). `causal=True` or "upper_left" lets query i see keys 0..i (top-left,
    as SDPA's is_causal); "lower_right" keys 0..i + S − L (torch's causal_lower_right: the
    last query sees every key, as when decoding against a KV cache). With `enable_gqa`,
    q (..., H, L, E) meets k, v (..., G, S, E): query head h reads key/value head ⌊h·G/H⌋,
    as SDPA's enable_gqa=True. The scale defaults to 1/√E. The dtype of the inputs is
    kept: float32 in, float32 out.
    Queries are processed a block of rows at a time (`block_rows`), and each block a tile of
    keys at a time (`block_keys`), the softmax gathered over the tiles as FlashAttention's is;
    by default a block holds about BLOCK_CELLS scores. The (L, S) score matrix is never built
    unless `return_weights` asks for it (a block then takes whole rows of keys). `key_bins`,
    the first key of each of a few bins of keys (increasing, from 0), also returns each
    query's weights summed over each bin, (..., L, bins), after the weights if those are
    asked for: an attention map drawn to scale in the same pass. `return_lse` returns last each
    query's log Σ_j e^(s_j) (..., L), from which the backward pass recomputes the weights
    (attncli.kernel_backward).
    `threads` defaults to the cores this process may use once a problem is big enough
    (SERIAL_WORK; below it the caller's thread alone, BLAS held at one thread, and below
    PARALLEL_WORK BLAS left as it is); `threads=1` is a plain loop that leaves BLAS as it is.
    The threads and the block shapes change the last bits at most, never to the bit on every
    BLAS: each block is the same BLAS calls whichever thread takes it, but BLAS may round a row
    otherwise among another number of rows (OpenBLAS's AVX-512 kernels do, by up to 4e-16 in
    float64; its Haswell ones do not), and tiles of another size add the same terms in another order.
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    dtype = np.result_type(q.dtype, k.dtype, v.dtype, np.float16)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(np.float64)
    q, k, v = q.astype(dtype, copy=False), k.astype(dtype, copy=False), v.astype(dtype, copy=False)
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ValueError(f"q, k and v need the same number (≥ 2) of dimensions, got {q.ndim}, {k.ndim}, {v.ndim}")
    if enable_gqa and q.ndim >= 3 and (q.shape[-3], v.shape[-3]) != (k.shape[-3],) * 2:
        options: dict[str, Any] = {"causal": causal, "scale": scale, "return_weights": return_weights}
        options |= {"key_bins": key_bins, "return_lse": return_lse}
        sizes = {"block_rows": block_rows, "block_keys": block_keys, "threads": threads}
        return _grouped(q, k, v, mask, options | sizes)
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    (n_q, d), (n_k, d_k), (n_v, d_v) = q.shape[-2:], k.shape[-2:], v.shape[-2:]
    if d != d_k or n_k != n_v:
        raise ValueError(f"shapes do not line up: q {q.shape}, k {k.shape}, v {v.shape}")
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask), (*batch, n_q, n_k))
    diagonal = _diagonal(causal, n_q, n_k)
    _check_blocks(block_rows=block_rows, block_keys=block_keys, threads=threads)
    with np.errstate(over="ignore"):  # a scale past float32's range: the scores overflow, which is reported
        factor = dtype.type((1 / math.sqrt(d) if d else 1.0) if scale is None else scale)  # E = 0: every score is 0
    out = np.empty((*batch, n_q, d_v), dtype=dtype)  # (..., L, E_v)
    weights = np.empty((*batch, n_q, n_k), dtype=dtype) if return_weights else None  # (..., L, S)
    bins = None if key_bins is None else _bins(key_bins, n_k)
    sums = None if bins is None else np.empty((*batch, n_q, len(bins)), dtype=dtype)  # (..., L, bins)
    lse = np.empty((*batch, n_q), dtype=dtype) if return_lse else None  # (..., L)
    if n_q == 0 or (n_k == 0 and mask is None and diagonal is None):  # as torch: no rows, or a mean of no values
        out[...] = 0
        if lse is not None:
            lse[...] = -np.inf  # log of an empty sum
        return _results(out, weights, sums, lse)
    q, k, v = (a if a.shape[:-2] == batch else np.broadcast_to(a, (*batch, *a.shape[-2:])) for a in (q, k, v))
    heads = [
        _Head(
            q[index],
            factor,
            k[index],
            v[index],
            None if mask is None else mask[index],
            out[index],
            None if weights is None else weights[index],
            bins,
            None if sums is None else sums[index],
            None if lse is None else lse[index],
        )
        for index in np.ndindex(*batch)
    ]
    work = len(heads) * n_q * n_k * (d + d_v)  # multiply-adds
    own = threads == 1 or (threads is None and work <= PARALLEL_WORK)  # one thread, BLAS left as it is
    cores = 1 if own or (threads is None and work <= SERIAL_WORK) else threads or kernel_threads.cores()
    rows, keys = _block_shape(n_q, n_k, cores, return_weights, block_rows, block_keys)
    blocks = [(head, start, min(n_q, start + rows)) for head in heads for start in range(0, n_q, rows)]
    order = None if diagonal is None else sorted(range(len(blocks)), key=lambda i: -blocks[i][1])  # the widest first
    call = kernel_threads.Call(blocks, _attend(diagonal), lambda: _Scratch(rows, keys, d, d_v, dtype, diagonal), order)
    kernel_threads.run(call, None if own else min(len(blocks), cores) - 1)
    return _results(out, weights, sums, lse)


def _results(out: np.ndarray, *asked: np.ndarray | None) -> np.ndarray | tuple[np.ndarray, ...]:
    """The output, then the weights, the binned sums and the log-sum-exp where they were asked for."""
    extra = tuple(array for array in asked if array is not None)
    return (out, *extra) if extra else out


def _check_blocks(**sizes: int | None) -> None:
    """`block_rows`, `block_keys` and `threads`: None or a whole number from 1."""
    for name, size in sizes.items():
        if size is not None and (isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1):
            raise ValueError(f"{name} must be a whole number from 1, got {size!r}")


def _block_shape(
    n_q: int, n_k: int, cores: int, whole_rows: bool, block_rows: int | None, block_keys: int | None
) -> tuple[int, int]:
    """Query rows and keys per block: every core a share of the rows, about BLOCK_CELLS scores a block."""
    fit = max(1, BLOCK_CELLS // max(n_k, 1))  # rows whose every key fits in BLOCK_CELLS
    rows = block_rows or min(n_q, -(-n_q // cores), fit if whole_rows else max(fit, BLOCK_ROWS))
    if whole_rows:
        return rows, max(n_k, 1)
    return rows, max(1, block_keys or min(n_k, BLOCK_CELLS // rows))


def _bins(key_bins: np.ndarray, n_k: int) -> np.ndarray:
    """`key_bins` checked: integers from 0, increasing, each below S."""
    bins = np.asarray(key_bins)
    if bins.ndim != 1 or not len(bins) or bins.dtype.kind not in "iu":
        raise ValueError(f"key_bins must be a list of integers, got {key_bins!r}")
    if bins[0] != 0 or (np.diff(bins) <= 0).any() or bins[-1] >= n_k:
        raise ValueError(f"key_bins must increase from 0 and stay below {n_k} keys, got {bins.tolist()}")
    return bins.astype(np.intp)


class _Head:
    """One (L, S) problem, ready for its blocks: `q` to be scaled a block at a time, and whether to shift at once.

    A plain class: a dataclass is built, at some cost, by every start of the command line.
    """

    __slots__ = ("bins", "factor", "k", "lse", "mask", "out", "q", "shift", "sums", "v", "weights")

    def __init__(
        self,
        q: np.ndarray,
        factor: np.floating,
        k: np.ndarray,
        v: np.ndarray,
        mask: np.ndarray | None,
        out: np.ndarray,
        weights: np.ndarray | None,
        bins: np.ndarray | None,
        sums: np.ndarray | None,
        lse: np.ndarray | None = None,
    ) -> None:
        """Softmax is shift-invariant, and subtracting the row maximum only guards e^s against overflow.

        When |q·k| ≤ ‖q‖·max‖k‖ (Cauchy–Schwarz) is small enough for e^s to stay a normal
        float, each block is first gathered without the shift and the pass that finds the
        maximum, and kept only where that lost nothing (`_attend_block`): the same softmax,
        rounded no worse.
        """
        safe = _safe_exponent(q.dtype)
        # ≥ every |q·k·scale|; in Python floats, which take a product past float's range, or 0·∞, without a warning
        bound = math.sqrt(float(_largest_square(q)) * float(_largest_square(k))) * abs(float(factor))
        self.shift = not (bound < safe and (mask is None or mask.dtype == np.bool_))  # subtract each row's maximum
        self.q = q  # (L, E), as given: a block's rows are scaled into the thread's buffer, never all of q at once
        self.factor = factor  # the scale, of q's dtype
        self.k = k  # (S, E)
        self.v = v  # (S, E_v)
        self.mask = mask  # (L, S)
        self.out = out  # (L, E_v)
        self.weights = weights  # (L, S)
        self.bins = bins  # (C,) the first key of each bin
        self.sums = sums  # (L, C) the weights summed over each bin
        self.lse = lse  # (L,) log Σ e^s of each query


@functools.cache
def _safe_exponent(dtype: np.dtype[Any]) -> np.floating[Any]:
    """e^±safe is a normal float of `dtype` (np.finfo and a log cost more than the rest of a small call)."""
    safe: np.floating[Any] = 0.7 * np.log(np.finfo(dtype).max)
    return safe


def _largest_square(rows: np.ndarray) -> np.floating[Any]:
    """max_i ‖row_i‖², NaN if a row holds one: einsum's one pass keeps no temporary the size of `rows`."""
    largest: np.floating[Any] = np.einsum("ij,ij->i", rows, rows).max(initial=0)
    return largest


def _diagonal(causal: bool | str, n_q: int, n_k: int) -> int | None:
    """The last key query row 0 may see under `causal`: 0 top-left, S − L bottom-right; None without a causal mask."""
    if causal is False:
        return None
    if causal is True or causal == "upper_left":
        return 0
    if causal == "lower_right":
        return n_k - n_q
    raise ValueError(f"causal must be True, False, 'upper_left' or 'lower_right', got {causal!r}")


def _grouped(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray | None, options: dict[str, Any]
) -> np.ndarray | tuple[np.ndarray, ...]:
    """H query heads over G key/value heads, query head h reading kv head ⌊h·G/H⌋ (SDPA's repeat_interleave).

    q is viewed as (..., G, H/G, L, E) and k, v as (..., G, 1, S, E), so the shared keys and
    values are broadcast to their H/G query heads, never copied.
    """
    heads, groups = q.shape[-3], k.shape[-3]
    if v.shape[-3] != groups or heads % groups:
        raise ValueError(
            f"enable_gqa needs as many key as value heads, and query heads a multiple of them: "
            f"q {q.shape}, k {k.shape}, v {v.shape}"
        )
    batch = np.broadcast_shapes(q.shape[:-3], k.shape[:-3], v.shape[:-3])
    n_q, n_k = q.shape[-2], k.shape[-2]
    split = (*batch, groups, heads // groups)
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask), (*batch, heads, n_q, n_k)).reshape(*split, n_q, n_k)
    q = np.broadcast_to(q, (*batch, *q.shape[-3:])).reshape(*split, *q.shape[-2:])
    result = attention(q, k[..., None, :, :], v[..., None, :, :], mask=mask, **options)
    arrays = [
        array.reshape(*batch, heads, *array.shape[len(split) :])  # out, and weights, sums and lse when asked for
        for array in (result if isinstance(result, tuple) else (result,))
    ]
    return tuple(arrays) if isinstance(result, tuple) else arrays[0]


class _Scratch:
    """One thread's buffers, allocated once per call: a block's scaled queries, a tile's scores, and what
    the block gathers over its tiles (Σ e^s·v goes straight into the output's rows)."""

    def __init__(self, rows: int, keys: int, d: int, d_v: int, dtype: np.dtype, causal: int | None) -> None:
        self.keys = keys  # per tile
        self._queries = np.empty(rows * d, dtype=dtype)
        self._scores = np.empty(rows * keys, dtype=dtype)
        self._mixed = np.empty(rows * d_v, dtype=dtype)
        self._totals = np.empty((2, rows), dtype=dtype)
        self._tops = np.empty((2, rows), dtype=dtype)
        self._offsets = np.empty(rows, dtype=dtype)
        self.ones = np.ones(keys, dtype=dtype)  # Σ e^s as a product: a third of the time of .sum(axis=1)
        self.d, self.d_v = d, d_v
        # above[r, c]: key c is after query r within a diagonal block
        self.above = np.triu(np.ones((rows, rows), dtype=bool), 1) if causal is not None else None

    def queries(self, rows: int) -> np.ndarray:
        return self._queries[: rows * self.d].reshape(rows, self.d)

    def scores(self, rows: int, width: int) -> np.ndarray:
        return self._scores[: rows * width].reshape(rows, width)  # contiguous, as BLAS writes it

    def mixed(self, rows: int) -> np.ndarray:
        return self._mixed[: rows * self.d_v].reshape(rows, self.d_v)

    def totals(self, rows: int, at: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Σ e^s over the tiles so far, and over this tile, of the block's rows at..at + rows."""
        return self._totals[0, at : at + rows], self._totals[1, at : at + rows]

    def tops(self, rows: int, at: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """Each row's largest score over the tiles so far, and what e^s is taken from (0 while it is −∞)."""
        return self._tops[0, at : at + rows], self._tops[1, at : at + rows]

    def offsets(self, rows: int) -> np.ndarray:
        """What each row's kept Σ e^s was taken from: 0 unshifted, its largest score (and lowering) once shifted."""
        return self._offsets[:rows]


def _attend_block(head: _Head, start: int, stop: int, causal: int | None, scratch: _Scratch) -> None:
    """Query rows start..stop of `head`, into its `out` (and `weights`, `sums`): softmax(q·kᵀ·scale)·v.

    Never a result the every-step path (attncli.core.attend) would not give. Without the shift
    (`head.shift` false: every e^s a normal float), a row is kept only if its Σ e^s is at least 1
    and finite, and its Σ e^s·v finite: the every-step path's weight·v is e^s·v / Σ e^s, so no product
    e^s·v lost more to underflow than that one may (tiny values under low scores), and none
    overflowed (huge values). The other rows (from the first to the last of them, the rows kept
    between them put back) are gathered again with each row's maximum subtracted, so the
    largest e^s is 1 and Σ e^s·v ≤ S·max|v|; where even that overflows (values near float's
    largest, or S past float16's), once more with the exponents lowered by log(2S), so that Σ e^s ≤ 1/2. Each
    row's way depends on its own numbers alone, not on the rows beside it.
    """
    rows = stop - start
    width = head.k.shape[0] if causal is None else max(0, min(head.k.shape[0], stop + causal))
    if width == 0:
        _check_rows(np.zeros(rows, dtype=bool), start)
    q = np.multiply(head.q[start:stop], head.factor, out=scratch.queries(rows))  # (B, E)
    out = head.out[start:stop]  # (B, E_v) Σ e^s·v until divided by Σ e^s
    total, _ = scratch.totals(rows)  # (B,)
    offset = scratch.offsets(rows)  # (B,)
    offset[:] = 0
    if head.shift:
        _gather_again(head, q, start, width, causal, scratch, np.zeros(rows, dtype=bool))
    else:
        _gather(head, q, start, width, causal, scratch, None, 0)
        if not (total.min() >= 1 and total.max() < np.inf and np.isfinite(out).all()):
            kept = (total >= 1) & (total < np.inf) & np.isfinite(out).all(axis=1)  # (B,)
            _gather_again(head, q, start, width, causal, scratch, kept)
    _check_rows(total > 0, start)
    if head.lse is not None:  # log Σ e^s = offset + log Σ e^(s − offset)
        np.add(np.log(total), offset, out=head.lse[start:stop])
    out /= total[:, None]  # (B, E_v)
    if head.weights is not None:
        head.weights[start:stop, :width] /= total[:, None]
        head.weights[start:stop, width:] = 0
    if head.sums is not None:
        head.sums[start:stop] /= total[:, None]


def _gather_again(
    head: _Head, q: np.ndarray, start: int, width: int, causal: int | None, scratch: _Scratch, done: np.ndarray
) -> None:
    """The block's rows not `done` (B,) gathered again with the shift, then lowered by log(2S) where Σ e^s·v
    still overflows; each time the rows from the first not done to the last, the done ones between put back."""
    out, (total, _), (top, base) = head.out[start : start + len(q)], scratch.totals(len(q)), scratch.tops(len(q))
    offset = scratch.offsets(len(q))  # (B,)
    for lowered in (0.0, float(np.log(2 * width))):
        redone = np.flatnonzero(~done)
        low, high = int(redone[0]), int(redone[-1]) + 1
        kept = _Kept(head, start + low, start + high, width, total[low:high], done[low:high])
        _gather(head, q[low:high], start + low, width, causal, scratch, lowered, low)
        if not lowered:
            _check_tops(top[low:high], start + low)
        kept.restore()
        now = ~done[low:high] & np.isfinite(out[low:high]).all(axis=1) & np.isfinite(total[low:high])  # (R,)
        offset[low:high][now] = base[low:high][now]
        done[low:high] |= now
        if done.all():
            return


class _Kept:
    """The rows of a block already done, copied aside while the block is gathered again, then put back."""

    def __init__(self, head: _Head, start: int, stop: int, width: int, total: np.ndarray, rows: np.ndarray) -> None:
        self.rows = rows
        self.parts = [
            (part, part[rows].copy())
            for part in (
                head.out[start:stop],  # (B, E_v)
                total,  # (B,)
                None if head.weights is None else head.weights[start:stop, :width],  # (B, S)
                None if head.sums is None else head.sums[start:stop],  # (B, C)
            )
            if part is not None
        ]

    def restore(self) -> None:
        for part, copy in self.parts:
            part[self.rows] = copy


def _gather(
    head: _Head,
    q: np.ndarray,
    start: int,
    width: int,
    causal: int | None,
    scratch: _Scratch,
    lowered: float | None,
    at: int,
) -> None:
    """Σ e^s·v into rows start..start + len(q) of `out`, and Σ e^s into the scratch's totals from row `at`
    of the block, a tile of keys at a time.

    `lowered` None: e^s as they are. Otherwise each row's largest score so far plus `lowered` is
    subtracted, and a tile that raises a row's largest score first scales what the row has
    gathered by e^(old − new): the online softmax of FlashAttention (Dao et al., 2022), exact up
    to rounding. With a causal mask row r sees keys up to r + `causal` (`_diagonal`): keys past
    `stop - 1 + causal` are not computed, and keys before `start + causal` are visible to every
    row: only the square on the diagonal needs a mask.
    """
    rows = q.shape[0]
    out = head.out[start : start + rows]  # (B, E_v)
    total, part = scratch.totals(rows, at)  # (B,), (B,)
    top, base = scratch.tops(rows, at)  # (B,), (B,)
    sums = None if head.sums is None else head.sums[start : start + rows]  # (B, C)
    if sums is not None:
        sums[:] = 0
    for first in range(0, width, scratch.keys):
        last = min(width, first + scratch.keys)
        s = np.matmul(q, head.k[first:last].T, out=scratch.scores(rows, last - first))  # (B, T)
        _mask_tile(head, s, start, first, last, causal, scratch)
        if lowered is not None:
            if first:
                np.copyto(part, top)  # (B,) the largest scores before this tile
                np.maximum(top, s.max(axis=1), out=top)
            else:
                s.max(axis=1, out=top)  # (B,)
            np.add(top, lowered, out=base)
            base[np.isneginf(top)] = 0  # a row that has seen only masked keys: its e^s are 0 whatever the base
            s -= base[:, None]
            if first:  # what earlier tiles gathered, moved to the new base: e^(old − new) ≤ 1, 0 from −∞
                part += lowered  # the earlier base, −∞ for a row that saw only masked keys
                np.exp(np.subtract(part, base, out=part), out=part)
                out *= part[:, None]
                total *= part
                if sums is not None:
                    sums *= part[:, None]
        np.exp(s, out=s)  # (B, T) unnormalised weights
        if first:
            out += np.matmul(s, head.v[first:last], out=scratch.mixed(rows))  # (B, E_v)
            total += np.matmul(s, scratch.ones[: last - first], out=part)  # (B,)
        else:
            np.matmul(s, head.v[:last], out=out)  # (B, E_v)
            np.matmul(s, scratch.ones[:last], out=total)  # (B,)
        if sums is not None and head.bins is not None:  # given together
            _add_bin_sums(head.bins, s, first, last, sums)
        if head.weights is not None:  # whole rows: one tile
            head.weights[start : start + rows, :last] = s


def _mask_tile(
    head: _Head, s: np.ndarray, start: int, first: int, last: int, causal: int | None, scratch: _Scratch
) -> None:
    """−∞ on the scores of keys first..last that rows start.. may not see: the causal diagonal, then `mask`."""
    diagonal = start + (causal or 0)  # the last key the block's first row sees
    low = max(diagonal, first)
    if causal is not None and scratch.above is not None and low < last:  # made for a causal call
        where = scratch.above[: s.shape[0], low - diagonal : last - diagonal]
        np.copyto(s[:, low - first :], -np.inf, where=where)
    if head.mask is not None:
        block = head.mask[start : start + s.shape[0], first:last]  # (B, T)
        if block.dtype == np.bool_:
            np.copyto(s, -np.inf, where=~block)
        else:
            s += block


def _add_bin_sums(bins: np.ndarray, s: np.ndarray, first: int, last: int, sums: np.ndarray) -> None:
    """Adds the e^s of keys first..last to the bins they fall in (bin c: keys bins[c] .. bins[c + 1] − 1)."""
    low = int(np.searchsorted(bins, first, side="right")) - 1  # the bin of key `first`
    high = int(np.searchsorted(bins, last))  # bins low..high − 1 meet this tile
    edges = bins[low:high] - first
    edges[0] = 0
    sums[:, low:high] += np.add.reduceat(s, edges, axis=1)


def _check_rows(ok: np.ndarray, start: int) -> None:
    if not ok.all():
        row = start + int(np.argmin(ok))
        raise ValueError(f"query row {row} has no key to attend to: every key is masked")


def _check_tops(top: np.ndarray, start: int) -> None:
    """Each row's largest score (R,), from row `start`: −∞ where every key is masked, +∞ or NaN where q·k·scale
    passed float's range (finite inputs: a huge scale, or huge q and k)."""
    finite = np.isfinite(top)  # (R,)
    if not finite.all():
        row = int(np.argmin(finite))
        _check_rows(top[row : row + 1] != -np.inf, start + row)
        raise ValueError(f"query row {start + row}: a score q·k·scale passes the range of {top.dtype}")


def _attend(causal: int | None) -> Callable[[_Head, int, int, _Scratch], None]:
    """What `kernel_threads.Call` runs for a block of the forward pass: `_attend_block` under `causal`, overflow
    found in its rows."""

    def run(head: _Head, start: int, stop: int, scratch: _Scratch) -> None:
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow is found in the rows, gathered again
            _attend_block(head, start, stop, causal, scratch)

    return run
