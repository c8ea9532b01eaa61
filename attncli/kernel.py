"""The blocked attention kernel behind `from attncli import attention`: O(L + S) memory, no intermediates kept.

attncli.core computes the same softmax(q·kᵀ·scale + mask)·v but keeps every (L, S) step for
display and grading; this module keeps none of them and works on blocks of query rows,
like PyTorch's scaled_dot_product_attention (its semantics: boolean masks True = may attend,
additive float masks, causal top-left, scale 1/√E by default). tests/test_kernel.py checks
that the two agree.
"""

from __future__ import annotations

import numpy as np


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    mask: np.ndarray | None = None,
    causal: bool = False,
    scale: float | None = None,
    return_weights: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """softmax(q·kᵀ·scale + mask)·v, like torch's scaled_dot_product_attention, in O(L + S) memory.

    q (..., L, E), k (..., S, E), v (..., S, E_v); leading dimensions are batches.
    `mask` is boolean (True = may attend, as in SDPA) or additive floats, and broadcasts
    to (..., L, S). `causal` lets query i see keys 0..i (top-left aligned). The scale
    defaults to 1/√E. The dtype of the inputs is kept: float32 in, float32 out.
    Queries are processed a block of rows at a time, so the (L, S) score matrix is
    never built unless `return_weights` asks for it.
    """
    q, k, v = np.asarray(q), np.asarray(k), np.asarray(v)
    dtype = np.result_type(q.dtype, k.dtype, v.dtype, np.float16)
    if not np.issubdtype(dtype, np.floating):
        dtype = np.dtype(np.float64)
    q, k, v = q.astype(dtype, copy=False), k.astype(dtype, copy=False), v.astype(dtype, copy=False)
    if q.ndim < 2 or k.ndim != q.ndim or v.ndim != q.ndim:
        raise ValueError(f"q, k and v need the same number (≥ 2) of dimensions, got {q.ndim}, {k.ndim}, {v.ndim}")
    batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    (n_q, d), (n_k, d_k), (n_v, d_v) = q.shape[-2:], k.shape[-2:], v.shape[-2:]
    if d != d_k or n_k != n_v:
        raise ValueError(f"shapes do not line up: q {q.shape}, k {k.shape}, v {v.shape}")
    if mask is not None:
        mask = np.broadcast_to(np.asarray(mask), (*batch, n_q, n_k))
    factor = dtype.type(1 / np.sqrt(d) if scale is None else scale)
    out = np.empty((*batch, n_q, d_v), dtype=dtype)  # (..., L, E_v)
    weights = np.empty((*batch, n_q, n_k), dtype=dtype) if return_weights else None  # (..., L, S)
    q, k, v = (np.broadcast_to(a, (*batch, *a.shape[-2:])) for a in (q, k, v))
    for index in np.ndindex(*batch):
        _attend_blocks(
            q[index] * factor,
            k[index],
            v[index],
            None if mask is None else mask[index],
            causal,
            out[index],
            None if weights is None else weights[index],
        )
    return (out, weights) if return_weights else out


BLOCK_CELLS = 1 << 20  # scores per block of query rows: a few MiB, so a block stays in cache


def _attend_blocks(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None,
    causal: bool,
    out: np.ndarray,
    weights: np.ndarray | None,
) -> None:
    """One (L, S) problem, a block of query rows at a time; `q` is already scaled.

    Softmax is shift-invariant, and subtracting the row maximum only guards e^s
    against overflow. When |q·k| ≤ ‖q‖·max‖k‖ (Cauchy–Schwarz) is small enough for
    e^s to stay a normal float, the shift and the pass that finds the maximum are
    skipped; the result is the same softmax, rounded no worse.
    """
    L, S = q.shape[0], k.shape[0]
    safe = 0.7 * np.log(np.finfo(q.dtype).max)  # e^±safe is a normal float of this dtype
    bound = np.sqrt((q * q).sum(axis=1).max() * (k * k).sum(axis=1).max())  # ≥ every |q·k|
    shift = not (bound < safe and (mask is None or mask.dtype == np.bool_))
    v_ones = np.concatenate([v, np.ones((S, 1), dtype=v.dtype)], axis=1)  # (S, E_v + 1): last column sums weights
    rows = max(1, min(L, BLOCK_CELLS // max(S, 1)))
    for start in range(0, L, rows):
        stop = min(L, start + rows)
        width = min(S, stop) if causal else S  # causal rows never see keys past `stop - 1`
        s = q[start:stop] @ k[:width].T  # (B, S')
        if causal:
            s[np.arange(start, stop)[:, None] < np.arange(width)[None, :]] = -np.inf
        if mask is not None:
            block = mask[start:stop, :width]  # (B, S')
            if block.dtype == np.bool_:
                s[~block] = -np.inf
            else:
                s += block
        if shift:
            top = s.max(axis=1, keepdims=True)  # (B, 1)
            _check_rows(np.isfinite(top[:, 0]), start)
            s -= top
        np.exp(s, out=s)  # (B, S') unnormalised weights
        mixed = s @ v_ones[:width]  # (B, E_v + 1)
        total = mixed[:, -1:]  # (B, 1)
        _check_rows(total[:, 0] > 0, start)
        out[start:stop] = mixed[:, :-1] / total  # (B, E_v)
        if weights is not None:
            weights[start:stop, :width] = s / total
            weights[start:stop, width:] = 0


def _check_rows(ok: np.ndarray, start: int) -> None:
    if not ok.all():
        row = start + int(np.argmin(ok))
        raise ValueError(f"query row {row} has no key to attend to: every key is masked")
