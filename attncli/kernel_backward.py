"""The blocked backward pass behind `from attncli import attention_backward`: dq, dk, dv in O((L + S)·d) memory.

It follows FlashAttention-2's backward (Dao, 2023, "FlashAttention-2: Faster Attention with Better
Parallelism and Work Partitioning", Algorithm 2): the forward pass (attncli.kernel) keeps one number
per query, its log-sum-exp L_i = log Σ_j e^(s_ij), and D_i = dO_i·O_i; then, a block of keys at a
time (the outer loop) and a tile of query rows at a time (the inner one), the weights are
recomputed from the scores, P = e^(s − L), and

    dV_j += Pᵀ·dO_i    dP = dO_i·V_jᵀ    dS = P ∘ (dP − D_i)    dQ_i += dS·K_j·scale    dK_j += dSᵀ·Q_i·scale

so no (L, S) matrix is ever built. Blocks of keys go to the kernel's threads, one per core; a thread
owns the dK and dV of its keys, and the dQ it gathers goes straight into dq when it owns a whole
(batch, kv head) too, else into a buffer of its own, added to dq once every block is done (so the
last bits of dq may change with the number of threads).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from attncli import kernel, kernel_threads

# Keys per block and query rows per tile: a tile of scores is 2^18 numbers, as the forward pass's (BLOCK_CELLS).
# On one core (BLAS at one thread, n = 4096, d = 64) tiles from 256 × 256 to 2048 × 512 all took within 6 % of
# this one's time, in float64 and float32: the five matrix products of a tile take 85 % of it.
BLOCK_KEYS = 512
TILE_ROWS = 512


def attention_backward(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    grad_output: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    causal: bool | str = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    block_keys: int | None = None,
    tile_rows: int | None = None,
    threads: int | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The gradients (dq, dk, dv) of Σ grad_output ∘ attention(q, k, v, ...), each the shape of its input.

    Shapes, masks, `causal`, `scale` and `enable_gqa` as attncli.kernel.attention (SDPA's conventions);
    grad_output is dO, the shape of the output (..., L, E_v). Inputs broadcast over leading
    dimensions get the gradient summed over them, as autograd gives it; with `enable_gqa` each
    key/value head's gradient is the sum over the query heads that read it. `block_keys` keys
    per block and `tile_rows` query rows per tile (BLOCK_KEYS, TILE_ROWS by default), `threads`
    as in attention. The dtype of the inputs is kept.
    """
    q, k, v, grad_output = (np.asarray(a) for a in (q, k, v, grad_output))
    dtype = np.result_type(q.dtype, k.dtype, v.dtype, grad_output.dtype, np.float16)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(np.float64)
    shapes = q.shape, k.shape, v.shape  # the gradients' own shapes
    q, k, v, grad_output = (a.astype(dtype, copy=False) for a in (q, k, v, grad_output))
    options: dict[str, Any] = {"mask": mask, "causal": causal, "scale": scale, "enable_gqa": enable_gqa}
    options["threads"] = threads
    out, lse = kernel.attention(q, k, v, **options, return_lse=True)  # (..., L, E_v), (..., L)
    if grad_output.shape != out.shape:
        raise ValueError(f"grad_output has shape {grad_output.shape}, expected the output's {out.shape}")
    row_term = np.einsum("...ij,...ij->...i", grad_output, out)  # (..., L) D_i = dO_i·O_i
    del out
    grouped = enable_gqa and q.ndim >= 3 and (q.shape[-3], v.shape[-3]) != (k.shape[-3],) * 2
    heads, groups = (q.shape[-3], k.shape[-3]) if grouped else (1, 1)
    lead = q.ndim - (3 if grouped else 2)  # batch dimensions before the heads
    batch = np.broadcast_shapes(q.shape[:lead], k.shape[:lead], v.shape[:lead])
    n_q, n_k = q.shape[-2], k.shape[-2]
    split = (*batch, groups, heads // groups)  # query head h = g·H/G + r reads kv head g
    q = np.broadcast_to(q, (*batch, *q.shape[lead:])).reshape(*split, n_q, q.shape[-1])
    grad_output = np.broadcast_to(grad_output, (*batch, *grad_output.shape[lead:])).reshape(*split, n_q, -1)
    lse, row_term = (a.reshape(*split, n_q) for a in (lse, row_term))
    k, v = (np.broadcast_to(a, (*batch, *a.shape[lead:])).reshape(*batch, groups, n_k, a.shape[-1]) for a in (k, v))
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask), (*batch, *((heads,) if grouped else ()), n_q, n_k))
        mask = mask.reshape(*split, n_q, n_k)
    factor = dtype.type(1 / np.sqrt(q.shape[-1]) if scale is None else scale)
    dq = np.zeros(q.shape, dtype=dtype)  # (..., G, H/G, L, E)
    dk = np.empty(k.shape, dtype=dtype)  # (..., G, S, E)
    dv = np.empty(v.shape, dtype=dtype)  # (..., G, S, E_v)
    units = [
        _Unit(q[i], k[i], v[i], grad_output[i], lse[i], row_term[i], None if mask is None else mask[i], factor)
        for i in np.ndindex(*batch, groups)
    ]
    sizes = (block_keys or BLOCK_KEYS, tile_rows or TILE_ROWS)
    _run(units, dq, dk, dv, kernel._diagonal(causal, n_q, n_k), sizes, threads)
    dq = dq.reshape(*batch, *((heads,) if grouped else ()), n_q, q.shape[-1])
    if not grouped:
        dk, dv = dk.reshape(*batch, n_k, -1), dv.reshape(*batch, n_k, -1)
    return tuple(_summed(grad, shape) for grad, shape in zip((dq, dk, dv), shapes))  # type: ignore[return-value]


class _Unit:
    """One (batch, kv head): its query heads' q, dO, L, D (H/G, L, ...), its k and v (S, ...), its mask."""

    __slots__ = ("factor", "grad_output", "k", "lse", "mask", "q", "row_term", "v")

    def __init__(
        self,
        q: np.ndarray,
        k: np.ndarray,
        v: np.ndarray,
        grad_output: np.ndarray,
        lse: np.ndarray,
        row_term: np.ndarray,
        mask: np.ndarray | None,
        factor: np.floating,
    ) -> None:
        self.q, self.k, self.v, self.grad_output = q, k, v, grad_output  # (R, L, E), (S, E), (S, E_v), (R, L, E_v)
        self.lse, self.row_term, self.mask, self.factor = lse, row_term, mask, factor  # (R, L), (R, L), (R, L, S)


class _Scratch:
    """One thread's buffers: a tile's scaled queries, scores and dP, a block's dK and dV, the key offsets."""

    def __init__(self, keys: int, rows: int, d: int, d_v: int, dtype: np.dtype) -> None:
        self.queries = np.empty((rows, d), dtype=dtype)
        self.scores = np.empty((rows, keys), dtype=dtype)
        self.grad_weights = np.empty((rows, keys), dtype=dtype)
        self.grad_queries = np.empty((rows, d), dtype=dtype)
        self.grad_keys = np.empty((keys, d), dtype=dtype)
        self.grad_values = np.empty((keys, d_v), dtype=dtype)
        self.offsets = np.arange(keys)[None, :] - np.arange(rows)[:, None]  # key − row within a tile


def _run(
    units: list[_Unit],
    dq: np.ndarray,
    dk: np.ndarray,
    dv: np.ndarray,
    diagonal: int | None,
    sizes: tuple[int, int],
    threads: int | None,
) -> None:
    """Every unit's blocks of keys, on the kernel's threads: dk and dv written, dq gathered."""
    n_q, d = dq.shape[-2:]
    n_k, d_v = dv.shape[-2:]
    keys, rows = min(sizes[0], max(n_k, 1)), min(sizes[1], max(n_q, 1))
    work = len(units) * dq.shape[-3] * n_q * n_k * (2 * d + 3 * d_v)  # multiply-adds
    own = threads == 1 or (threads is None and work <= kernel.PARALLEL_WORK)
    cores = 1 if own or (threads is None and work <= kernel.SERIAL_WORK) else threads or kernel_threads.cores()
    starts = list(range(0, n_k, keys))
    parts = max(1, min(len(starts), cores // len(units))) if len(units) < cores else 1  # key ranges per unit
    flat_dq = dq.reshape(len(units), *dq.shape[-3:])
    flat_dk, flat_dv = dk.reshape(len(units), n_k, d), dv.reshape(len(units), n_k, d_v)
    blocks, buffers = [], []
    for index, unit in enumerate(units):
        for part in range(parts):  # every parts-th block of keys: as much work each, with a causal mask too
            target = flat_dq[index] if parts == 1 else np.zeros_like(flat_dq[index])  # (R, L, E)
            buffers.append((index, target))
            blocks.append((unit, starts[part::parts], target, flat_dk[index], flat_dv[index]))
    order = None if diagonal is None else sorted(range(len(blocks)), key=lambda i: blocks[i][1][0])  # longest first
    run = functools.partial(_keys_block, diagonal, keys, rows)
    call = kernel_threads.Call(blocks, run, lambda: _Scratch(keys, rows, d, d_v, dq.dtype), order)
    kernel_threads.run(call, None if own else min(len(blocks), cores) - 1)
    if parts > 1:
        for index, target in buffers:
            flat_dq[index] += target
    dq *= dq.dtype.type(units[0].factor) if units else 1


def _keys_block(
    diagonal: int | None,
    keys: int,
    rows: int,
    unit: _Unit,
    starts: list[int],
    grad_queries: np.ndarray,
    dk: np.ndarray,
    dv: np.ndarray,
    scratch: _Scratch,
) -> None:
    """The blocks of `keys` keys starting at `starts` of `unit`, in tiles of `rows` query rows under the
    causal `diagonal`: their dK and dV whole, and their part of Σ dS·K in `grad_queries` (R, L, E), which
    the caller scales."""
    n_q, n_k = unit.q.shape[-2], unit.k.shape[0]
    for first in starts:
        last = min(n_k, first + keys)
        width = last - first
        grad_keys, grad_values = scratch.grad_keys[:width], scratch.grad_values[:width]  # (T, E), (T, E_v)
        grad_keys[:] = 0
        grad_values[:] = 0
        low = 0 if diagonal is None else max(0, first - diagonal)  # the first row that sees key `first`
        for head in range(unit.q.shape[0]):
            for start in range(low - low % rows, n_q, rows):
                stop = min(n_q, start + rows)
                _tile(unit, head, start, stop, first, last, diagonal, scratch, grad_queries[head])
        dk[first:last] = grad_keys  # Σ dSᵀ·(Q·scale)
        dv[first:last] = grad_values


def _tile(
    unit: _Unit,
    head: int,
    start: int,
    stop: int,
    first: int,
    last: int,
    diagonal: int | None,
    scratch: _Scratch,
    grad_queries: np.ndarray,
) -> None:
    """Query rows start..stop of query head `head` against keys first..last: P recomputed, then dV, dP, dS,
    and their parts of dK and of dQ (the latter without the scale)."""
    count, width = stop - start, last - first
    q = np.multiply(unit.q[head, start:stop], unit.factor, out=scratch.queries[:count])  # (B, E) q·scale
    s = np.matmul(q, unit.k[first:last].T, out=scratch.scores[:count, :width])  # (B, T) q·k·scale
    if diagonal is not None and last - 1 > start + diagonal:  # some key of the tile is after some row's last
        np.copyto(s, -np.inf, where=scratch.offsets[:count, :width] > start + diagonal - first)
    if unit.mask is not None:
        block = unit.mask[head, start:stop, first:last]  # (B, T)
        if block.dtype == np.bool_:
            np.copyto(s, -np.inf, where=~block)
        else:
            s += block
    s -= unit.lse[head, start:stop, None]
    p = np.exp(s, out=s)  # (B, T) the weights, recomputed
    grad_output = unit.grad_output[head, start:stop]  # (B, E_v)
    scratch.grad_values[:width] += p.T @ grad_output  # (T, E_v)
    dp = np.matmul(grad_output, unit.v[first:last].T, out=scratch.grad_weights[:count, :width])  # (B, T)
    dp -= unit.row_term[head, start:stop, None]
    ds = np.multiply(p, dp, out=dp)  # (B, T) dS = P ∘ (dP − D)
    grad_queries[start:stop] += np.matmul(ds, unit.k[first:last], out=scratch.grad_queries[:count])  # (B, E)
    scratch.grad_keys[:width] += ds.T @ q  # (T, E)


def _summed(grad: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """`grad` summed over the dimensions its input was broadcast along, as autograd does: back to `shape`."""
    extra = grad.ndim - len(shape)
    grad = grad.sum(axis=tuple(range(extra))) if extra else grad
    stretched = tuple(axis for axis, size in enumerate(shape) if size == 1 and grad.shape[axis] != 1)
    return grad.sum(axis=stretched, keepdims=True) if stretched else grad
