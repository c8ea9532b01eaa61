"""The two attention paths agree: the blocked kernel (`attncli.attention`) and the every-step core.

The core's `attend` keeps every (L, S) intermediate; the kernel keeps none and shares blocks
of query rows among threads. On random dot-product problems (masks, causal, scales, large
scores that need the shift) they must give the same output and weights within float64
rounding, whatever the block size and the number of threads.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading
import warnings
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli import attention, core, kernel
from attncli.errors import AttnError
from attncli.problem import Head, Score
from tests.paths import ROOT

EPS = np.finfo(np.float64).eps
# Ulps of a result's size by which the same numbers may come out of other BLAS calls: another number of rows in
# a block is another matrix shape, which some BLAS kernels round otherwise (OpenBLAS's AVX-512 ones, up to 4e-16
# in float64), so block shapes, threads and calls are compared within this, never to the bit.
BLAS_ULPS = 16


def assert_equal_but_rounding(found: np.ndarray, expected: np.ndarray, size: float = 1.0) -> None:
    """`found` as `expected`, but for BLAS_ULPS ulps of `size` (a weight's 1, an output's largest |v|)."""
    np.testing.assert_allclose(found, expected, rtol=0, atol=BLAS_ULPS * float(np.finfo(found.dtype).eps) * size)


@settings(max_examples=80, deadline=None)
@given(
    n_q=st.integers(1, 24),
    n_k=st.integers(1, 24),
    d=st.integers(1, 6),
    d_v=st.integers(1, 4),
    heads=st.integers(1, 3),
    causal=st.booleans(),
    use_mask=st.booleans(),
    scale=st.one_of(st.none(), st.floats(0.01, 4.0)),
    magnitude=st.sampled_from([0.5, 3.0, 40.0]),  # 40: scores in the thousands, past e^s's range
    block_rows=st.sampled_from([None, 1, 2, 5]),
    threads=st.sampled_from([1, 2, 3]),
    seed=st.integers(0, 2**32 - 1),
)
def test_kernel_agrees_with_every_step_core(
    n_q: int,
    n_k: int,
    d: int,
    d_v: int,
    heads: int,
    causal: bool,
    use_mask: bool,
    scale: float | None,
    magnitude: float,
    block_rows: int | None,
    threads: int,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((heads, n_q, d)) * magnitude, rng.standard_normal((heads, n_k, d)) * magnitude
    v = rng.standard_normal((heads, n_k, d_v))
    allowed = np.ones((n_q, n_k), dtype=bool)
    if use_mask:
        allowed = rng.random((n_q, n_k)) < 0.6
        allowed[:, 0] = True  # every query keeps a key, as the problem parser guarantees
    factor = 1 / math.sqrt(d) if scale is None else scale
    out, weights = attention(
        q,
        k,
        v,
        mask=allowed if use_mask else None,
        causal=causal,
        scale=scale,
        return_weights=True,
        block_rows=block_rows,
        threads=threads,
    )
    if causal:
        allowed = allowed & (np.arange(n_q)[:, None] >= np.arange(n_k)[None, :])
    for h in range(heads):
        steps = core.attend(Head("h", Score("scaled_dot", factor), q[h], k[h], v[h]), allowed)
        # The two paths round q·k·scale differently (the kernel scales q first): |δs| is a few
        # ulps of the largest |q|·|k|·scale, and moves each weight by that much relatively.
        spread = factor * np.abs(q[h]).max() * np.abs(k[h]).max() * d
        tolerance = 16 * EPS * (1 + spread + n_k)
        np.testing.assert_allclose(weights[h], steps.weights, rtol=0, atol=tolerance)
        np.testing.assert_allclose(out[h], steps.output, rtol=0, atol=tolerance * np.abs(v[h]).max())
        assert (weights[h][~allowed] == 0).all()


@settings(max_examples=80, deadline=None)
@given(
    n_q=st.integers(1, 20),
    n_k=st.integers(1, 30),
    causal=st.sampled_from([False, True, "lower_right"]),
    use_mask=st.booleans(),
    additive=st.booleans(),
    magnitude=st.sampled_from([0.5, 40.0]),  # 40: every tile shifted, and a later tile's maximum rescales the earlier
    block_rows=st.sampled_from([None, 1, 3]),
    block_keys=st.sampled_from([None, 1, 2, 7]),
    seed=st.integers(0, 2**32 - 1),
)
def test_tiles_of_keys_give_every_steps_softmax(
    n_q: int,
    n_k: int,
    causal: bool | str,
    use_mask: bool,
    additive: bool,
    magnitude: float,
    block_rows: int | None,
    block_keys: int | None,
    seed: int,
) -> None:
    """Keys a tile at a time (the online softmax) against `core.attend`, which sees every key at once:
    the output, and each query's weights summed over bins of keys that straddle the tiles."""
    if causal == "lower_right":
        n_k = max(n_k, n_q)  # else the first queries see no key
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((n_q, 3)) * magnitude, rng.standard_normal((n_k, 3)) * magnitude
    v = rng.standard_normal((n_k, 2))
    offset = n_k - n_q if causal == "lower_right" else 0
    allowed = np.arange(n_q)[:, None] + offset >= np.arange(n_k) if causal else np.ones((n_q, n_k), dtype=bool)
    bias = np.zeros((n_q, n_k))
    if use_mask:  # the causal rule folded into a mask, some more keys hidden; key 0 stays in sight
        allowed &= rng.random((n_q, n_k)) < 0.5
        allowed[:, 0] = True
        bias = rng.standard_normal((n_q, n_k)) * 3 if additive else bias
    mask = (np.where(allowed, bias, -np.inf) if additive else allowed) if use_mask else None
    bins = np.unique(np.r_[0, rng.integers(0, n_k, 3)])
    out, sums = attention(
        q,
        k,
        v,
        mask=mask,
        causal=False if use_mask else causal,
        key_bins=bins,
        block_rows=block_rows,
        block_keys=block_keys,
        threads=2,
    )
    scores = np.where(allowed, q @ k.T / math.sqrt(3) + bias, -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)
    tolerance = 32 * EPS * (1 + np.abs(scores[allowed]).max() + n_k)
    np.testing.assert_allclose(out, weights @ v, rtol=0, atol=tolerance * np.abs(v).max())
    expected = np.stack([weights[:, a:b].sum(axis=1) for a, b in pairwise([*bins, n_k])], axis=1)
    np.testing.assert_allclose(sums, expected, rtol=0, atol=tolerance)


def test_a_later_tile_that_raises_the_maximum_wipes_what_the_earlier_gathered() -> None:
    """Tiles of two keys. Row 0: scores 0, 0, then 1000 — e^(0 − 1000) is 0, so the output is the last
    value alone. Row 1: its first tile all masked (−∞), then the one key it sees. With the scores negated,
    row 0 is the mean of the first two values (e^−1000 is 0) and row 1 still its one key's value."""
    q = np.array([[1.0], [1.0]])
    k = np.array([[0.0], [0.0], [1000.0]])
    v = np.array([[1.0], [2.0], [3.0]])
    mask = np.array([[True, True, True], [False, False, True]])
    assert attention(q, k, v, mask=mask, scale=1.0, block_keys=2).tolist() == [[3.0], [3.0]]
    assert attention(q, -k, v, mask=mask, scale=1.0, block_keys=2).tolist() == [[1.5], [3.0]]  # e^−1000 = 0


def test_long_sequences_keep_whole_blocks_of_rows_and_tiles_within_the_block_cells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """65,536 keys: blocks of BLOCK_ROWS query rows (BLAS repacks the keys for each block, so few rows
    would spend the time packing), each over tiles of keys within BLOCK_CELLS scores."""
    shapes: list[tuple[int, int]] = []
    original = kernel._attend_block

    def attend_block(head: object, start: int, stop: int, causal: object, scratch: kernel._Scratch) -> None:
        shapes.append((stop - start, scratch.keys))
        original(head, start, stop, causal, scratch)

    monkeypatch.setattr(kernel, "_attend_block", attend_block)
    rng = np.random.default_rng(5)
    q, k = rng.standard_normal((2 * kernel.BLOCK_ROWS, 2)), rng.standard_normal((1 << 16, 2))
    kernel.attention(q, k, k, threads=2)
    assert shapes == [(kernel.BLOCK_ROWS, kernel.BLOCK_CELLS // kernel.BLOCK_ROWS)] * 2


@settings(max_examples=60, deadline=None)
@given(
    n_q=st.integers(1, 30),
    n_k=st.integers(1, 30),
    causal=st.booleans(),
    block_rows=st.integers(1, 8),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**32 - 1),
)
def test_threads_and_blocks_change_nothing_but_the_last_bits(
    n_q: int, n_k: int, causal: bool, block_rows: int, dtype: type, seed: int
) -> None:
    """Each row's numbers come from the same products in the same order however rows are shared out among
    threads, and from the same BLAS calls; one block of every row (the default here) against blocks of
    `block_rows` differs by BLAS's rounding of another shape at most."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((2, n, 4)).astype(dtype) for n in (n_q, n_k, n_k))
    one = attention(q, k, v, causal=causal, block_rows=block_rows, threads=1, return_weights=True)
    two = attention(q, k, v, causal=causal, block_rows=block_rows, threads=2, return_weights=True)
    whole = attention(q, k, v, causal=causal, threads=1, return_weights=True)
    for found in (two, whole):
        assert_equal_but_rounding(found[0], one[0], float(np.abs(v).max()))
        assert_equal_but_rounding(found[1], one[1])


def every_step(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float) -> core.HeadSteps:
    """`core.attend` on one head of dot-product scores times `scale`, every key visible, in the inputs' dtype."""
    head = Head("h", Score("scaled_dot", scale), q, k, v)
    return core.attend(head, np.ones((len(q), len(k)), dtype=bool))


def assert_as_every_step(q: np.ndarray, k: np.ndarray, v: np.ndarray, scale: float, **options: object) -> None:
    """The kernel's output as `core.attend`'s, coordinate by coordinate, within the rounding either path may do.

    The tolerance: a few ulps times (1 + the largest |score| + S) of Σ weight·|v| (what the output is made of:
    with values of both signs it may cancel to far less), plus S smallest subnormals of the largest |v|
    (the every-step path's own weight·v when a weight is subnormal). Losing a tiny output to underflow, or
    an infinity from finite values, is far outside it.
    """
    steps = every_step(q, k, v, scale)
    got = attention(q, k, v, scale=scale, **options)
    info = np.finfo(q.dtype)
    spread = float(np.abs(steps.scores).max())
    magnitude = steps.weights.astype(np.float64) @ np.abs(v.astype(np.float64))  # (L, E_v)
    subnormal = float(info.smallest_subnormal) * len(k) * max(1.0, float(np.abs(v).max()))
    allowed = 16 * float(info.eps) * (1 + spread + len(k)) * magnitude + subnormal
    assert got.dtype == q.dtype and np.isfinite(got).all()
    assert (np.abs(got.astype(np.float64) - steps.output) <= allowed).all(), (got, steps.output)


def aligned(rng: np.random.Generator, n_q: int, n_k: int, largest: float) -> tuple[np.ndarray, np.ndarray, float]:
    """q (L, 4) and k (S, 4) pointing nearly the same way, and the scale that puts their largest possible score
    (Cauchy–Schwarz: max‖q‖·max‖k‖·scale, the kernel's bound) at `largest`: every score is then close to it."""
    q, k = 1 + 0.01 * rng.standard_normal((n_q, 4)), 1 + 0.01 * rng.standard_normal((n_k, 4))
    norms = np.linalg.norm(q, axis=1).max() * np.linalg.norm(k, axis=1).max()
    return q, k, largest / float(norms)


def extreme_case(name: str, dtype: type) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """q, k, v and the scale of one case of issue 22's, at the same distance from `dtype`'s limits."""
    info = np.finfo(dtype)
    safe = 0.7 * float(np.log(info.max))  # the kernel's largest unshifted |score|: 496 in float64, 62 in float32
    tiny, huge = float(info.tiny), float(info.max)
    rng = np.random.default_rng(len(name))
    if name == "tiny values, low scores":  # the issue's q [[-22.1]], k [[22.1], [22.0], [22.05]] in float64
        low = math.sqrt(0.98 * safe)
        q, k = np.array([[-low]]), np.array([[low], [low - 0.1], [low - 0.05]])
        return q, k, np.array([[1.0], [2.0], [3.0]]) * tiny * 1e8, 1.0
    if name == "huge values":  # the issue's 1e100 in float64: scores near the unshifted bound
        q, k, scale = aligned(rng, 6, 9, 0.9 * safe)
        return q, k, rng.uniform(0.5, 1, (9, 3)) * huge / 1e20, scale
    if name == "many keys, large values":  # the issue's float32 case: 5,000 keys, values 1e9
        q, k, scale = aligned(rng, 3, 5000, 0.98 * safe)
        return q, k, np.full((5000, 2), huge / 1e29), scale
    if name == "values near the largest float":  # even shifted, Σ e^s·v of 50 equal scores passes float's range
        return np.ones((4, 4)), np.ones((50, 4)), rng.uniform(0.5, 1, (50, 2)) * huge / 4, 1.5 * safe / 4
    if name == "mixed magnitudes":  # per column: tiny, ordinary and huge values side by side, both signs
        q, k = rng.standard_normal((5, 3)), rng.standard_normal((7, 3))
        v = rng.standard_normal((7, 4)) * np.array([tiny * 1e4, 1.0, huge / 1e3, 1.0])
        v[:, 3] *= np.geomspace(tiny * 1e6, huge / 1e6, 7)
        return q, k, v, 0.5 * safe / float(np.abs(q @ k.T).max())
    if name == "huge scores":  # every row shifted by its maximum, tiny values
        q, k = rng.standard_normal((4, 4)) * 40, rng.standard_normal((6, 4)) * 40
        return q, k, rng.uniform(1, 2, (6, 2)) * tiny * 10, 1.0
    # "small scores": e^s all near 1, values at both ends
    q, k = rng.standard_normal((4, 4)) * 1e-3, rng.standard_normal((6, 4))
    return q, k, np.array([[tiny * 3, huge / 10]] * 3 + [[tiny * 2, -huge / 20]] * 3), 1.0


EXTREMES = [
    "tiny values, low scores",
    "huge values",
    "many keys, large values",
    "values near the largest float",
    "mixed magnitudes",
    "huge scores",
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", [*EXTREMES, "small scores"])
def test_extreme_values_and_scores_give_what_every_step_gives(name: str, dtype: type) -> None:
    """Issue 22: tiny values under moderate scores came out 0 (the every-step path: 2.1537e-300), huge
    values and 5,000 keys of 1e9 in float32 came out inf. In float32 and float64, through one block and many."""
    q, k, v, scale = (np.asarray(a, dtype=dtype) if isinstance(a, np.ndarray) else a for a in extreme_case(name, dtype))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_as_every_step(q, k, v, scale)


@pytest.mark.parametrize("name", EXTREMES)
def test_extreme_values_and_scores_give_what_torch_gives(name: str) -> None:
    """The float64 extremes through torch's scaled_dot_product_attention: the kernel within a few ulps of
    Σ weight·|v| (torch's own weights, e^(s − max) normalised, times the values)."""
    torch = pytest.importorskip("torch")
    q, k, v, scale = extreme_case(name, np.float64)
    expected = torch.nn.functional.scaled_dot_product_attention(*map(torch.from_numpy, (q, k, v)), scale=scale).numpy()
    weights = torch.softmax(torch.from_numpy(q @ k.T * scale), dim=-1).numpy()
    spread = float(np.abs(q @ k.T * scale).max())
    allowed = 16 * EPS * (1 + spread + len(k)) * (weights @ np.abs(v)) + 5e-324 * len(k) * max(1.0, np.abs(v).max())
    assert (np.abs(attention(q, k, v, scale=scale) - expected) <= allowed).all()


def test_the_issues_tiny_values_come_out_as_torch_gives_them() -> None:
    """q [[-22.1]], k [[22.1], [22.0], [22.05]], v [[1e-300], [2e-300], [3e-300]], scale 1: 2.1537e-300 (torch,
    and by hand: the scores are −488.41, −486.2, −487.305, the weights e^(−2.21, 0, −1.105) normalised)."""
    q, k, v = np.array([[-22.1]]), np.array([[22.1], [22.0], [22.05]]), np.array([[1e-300], [2e-300], [3e-300]])
    gaps = np.array([-22.1 * 0.1, 0.0, -22.1 * 0.05])
    expected = float(np.exp(gaps) @ [1e-300, 2e-300, 3e-300] / np.exp(gaps).sum())
    got = float(attention(q, k, v, scale=1.0)[0, 0])
    assert abs(got - expected) <= 1e-13 * expected and abs(got - 2.1537e-300) < 1e-304


def test_a_sum_of_exponentials_past_the_dtypes_range_is_gathered_again() -> None:
    """float16 (largest 65504): 200 keys scored 7.6, under the unshifted bound, give Σ e^s = 4e5 = inf, while
    Σ e^s·v of values 1e-4 stays finite: the output came out 0, not the values' 1e-4."""
    q, k, v = np.ones((2, 4), np.float16), np.ones((200, 4), np.float16), np.full((200, 2), 1e-4, np.float16)
    found = attention(q, k, v, scale=1.9)
    assert found.dtype == np.float16
    np.testing.assert_allclose(found.astype(np.float64), 1e-4, rtol=2e-3)


@settings(max_examples=60, deadline=None)
@given(
    n_q=st.integers(1, 9),
    n_k=st.integers(1, 40),
    score=st.floats(1e-3, 1.1),  # the largest |score| as a share of what the kernel leaves unshifted
    low=st.integers(-300, 300),  # the values' decimal exponents: each column a range of them
    span=st.integers(0, 600),
    negative=st.booleans(),
    dtype=st.sampled_from([np.float32, np.float64]),
    block_rows=st.sampled_from([None, 1, 3]),
    seed=st.integers(0, 2**32 - 1),
)
def test_values_of_any_magnitude_give_what_every_step_gives(
    n_q: int, n_k: int, score: float, low: int, span: int, negative: bool, dtype: type, block_rows: int, seed: int
) -> None:
    """Values anywhere in the dtype's range (10^low .. 10^(low + span), clipped), scores up to past the
    unshifted bound, float32 and float64: the kernel's output within rounding of the every-step path's."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    q, k = rng.standard_normal((n_q, 4)), rng.standard_normal((n_k, 4))
    scale = score * 0.7 * float(np.log(info.max)) / max(float(np.abs(q @ k.T).max()), 1e-300)
    exponents = np.clip(rng.uniform(low, low + span, (n_k, 3)), np.log10(info.tiny), np.log10(info.max / 16))
    v = 10.0**exponents * (rng.choice([-1, 1], (n_k, 3)) if negative else 1)
    assert_as_every_step(*(a.astype(dtype) for a in (q, k, v)), scale, block_rows=block_rows, threads=1)


def given_scores(scores: np.ndarray) -> core.HeadSteps:
    """`attend` on scores given directly, every key visible, values the identity (output = weights)."""
    n_q, n_k = scores.shape
    head = Head("given", Score("given", 1.0), None, None, np.eye(n_k, dtype=scores.dtype), scores)
    return core.attend(head, np.ones((n_q, n_k), dtype=bool))


@settings(max_examples=100, deadline=None)
@given(
    n_q=st.integers(1, 6),
    n_k=st.integers(1, 6),
    offset=st.floats(-800, 800),
    spread=st.floats(0, 200),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**32 - 1),
)
def test_shown_exponentials_divided_by_their_sum_are_the_weights(
    n_q: int, n_k: int, offset: float, spread: float, dtype: type, seed: int
) -> None:
    """One softmax in `attend`: weight = e^s / Σ e^s with the very e^s displayed, to the last bit."""
    rng = np.random.default_rng(seed)
    scores = (offset + spread * rng.standard_normal((n_q, n_k))).astype(dtype)
    limit = float(np.log(np.finfo(dtype).max))
    scores = np.clip(scores, -limit, limit)  # finite after the scale, as the parser requires
    steps = given_scores(scores)
    assert np.array_equal(steps.exp / steps.exp.sum(axis=1, keepdims=True), steps.weights)
    assert np.isfinite(steps.exp.sum(axis=1)).all()
    gap = scores.astype(np.float64) - scores.astype(np.float64).max(axis=1, keepdims=True)  # ≤ 0
    reference = np.exp(gap) / np.exp(gap).sum(axis=1, keepdims=True)  # softmax shifted by the maximum
    # e^x carries x's rounding |x|-fold: the gap's own rounding is |gap|·eps, each side's exp and sum a few eps
    allowed = 8 * np.finfo(dtype).eps * (n_k - gap) * reference + np.finfo(dtype).tiny
    assert (np.abs(steps.weights - reference) <= allowed).all()


def test_shift_keeps_the_digits_of_small_weights() -> None:
    """float32 scores −70 and −100: e^−100 is subnormal, its weight e^−30/(1 + e^−30) is not, so the row is shifted."""
    scores = np.array([[-70.0, -100.0]], dtype=np.float32)
    steps = given_scores(scores)
    assert steps.shift.tolist() == [-70.0]
    small = math.exp(-30) / (1 + math.exp(-30))
    np.testing.assert_allclose(steps.weights[0], [1 - small, small], rtol=1e-6)


def test_shown_exponentials_are_not_shifted_when_nothing_is_lost() -> None:
    """The worked example's row (2, 1, 0) and a row near −70 in float64 show e^s itself."""
    scores = np.array([[2.0, 1.0, 0.0], [-70.0, -71.0, -75.0]])
    steps = given_scores(scores)
    assert steps.shift.tolist() == [0.0, 0.0]
    assert steps.exp[0].tolist() == [math.exp(2.0), math.exp(1.0), 1.0]


def test_a_query_with_every_key_masked_is_named_whichever_thread_meets_it() -> None:
    """Rows 3 and 6 have no key; row 3 is named with blocks of one row over two threads."""
    mask = np.ones((8, 4), dtype=bool)
    mask[[3, 6]] = False
    for _ in range(20):
        with pytest.raises(ValueError, match="query row 3 "):
            kernel.attention(np.ones((8, 2)), np.ones((4, 2)), np.ones((4, 2)), mask=mask, block_rows=1, threads=2)


@pytest.mark.parametrize("threads", [1, 2])
def test_causal_blocks_go_widest_first_and_the_first_failing_row_is_still_named(
    threads: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Causal blocks are handed out from the last; rows 0..3 of 10 queries over 6 keys see no key
    (bottom-right), nor does row 7 under the mask: row 0 is named, and the blocks' results are those in order."""
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((10, 3)), rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    mask = np.ones((10, 6), dtype=bool)
    mask[7] = False
    for _ in range(10):
        with pytest.raises(ValueError, match="query row 0 "):
            kernel.attention(q, k, v, mask=mask, causal="lower_right", block_rows=1, threads=threads)
    taken: list[int] = []
    original = kernel._attend_block

    def attend_block(head: object, start: int, *rest: object) -> None:
        taken.append(start)
        original(head, start, *rest)

    monkeypatch.setattr(kernel, "_attend_block", attend_block)
    out = kernel.attention(q[4:], k, v, causal="lower_right", block_rows=2, threads=1)
    assert taken == [4, 2, 0]  # 6 rows in blocks of 2, widest first
    s = np.where(np.tril(np.ones((6, 6), dtype=bool)), q[4:] @ k.T / np.sqrt(3), -np.inf)
    weights = np.exp(s - s.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out, weights / weights.sum(axis=1, keepdims=True) @ v, rtol=0, atol=1e-15)


def test_a_call_below_serial_work_stays_on_the_callers_thread_with_blas_at_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """n = 256, d = 64: past PARALLEL_WORK (BLAS would start its threads) and below SERIAL_WORK (no helper)."""
    from threadpoolctl import threadpool_info

    seen: list[tuple[bool, list[int]]] = []
    original = kernel._attend_block

    def attend_block(*args: object) -> None:
        blas = [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"]
        seen.append((threading.current_thread() is threading.main_thread(), blas))
        original(*args)

    monkeypatch.setattr(kernel, "_attend_block", attend_block)
    q = np.random.default_rng(4).standard_normal((256, 64))
    assert kernel.PARALLEL_WORK < 256 * 256 * 128 <= kernel.SERIAL_WORK
    before = [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"]
    kernel.attention(q, q, q)
    assert seen and all(main and set(blas) == {1} for main, blas in seen), seen
    assert [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"] == before


def test_import_attncli_does_not_import_threadpoolctl() -> None:
    code = "import attncli, sys; print('threadpoolctl' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "False"


def test_benchmark_script_runs_in_quick_mode() -> None:
    """--quick checks the script at toy sizes (torch, slow to import, left out); nothing here looks at a time."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench
    finally:
        sys.path.pop(0)
    rows = bench.main(["--quick", "--without-torch"])
    names = [row.name for row in rows]
    assert "attention / matmul, float32" in names and "compute / baseline" in names
    assert all(row.median == row.median for row in rows if not row.missing)  # no NaN but what is not installed


def test_benchmark_takes_turns_in_a_turning_order_and_takes_each_rounds_ratio() -> None:
    """bench.interleaved runs A, B, C then B, C, A ...; bench.ratio is of the minima and the median of the
    rounds' own ratios (made-up times: a slow round slows both contenders, and its ratio stays 1)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench
    finally:
        sys.path.pop(0)
    ran: list[str] = []
    times = bench.interleaved({name: lambda name=name: ran.append(name) for name in "ABC"}, 3, 0.0)
    assert ran == list("ABCBCACAB") and all(len(found) == 3 for found in times.values())
    row = bench.ratio("r", [2.0, 20.0, 3.0], [2.0, 20.0, 1.0])
    assert (row.minimum, row.median) == (2.0, 1.0)  # rounds 1, 1, 3; the ratio of medians would be 3 / 2


def test_calls_from_several_threads_at_once_each_get_their_own_result() -> None:
    """The helper threads and the BLAS limit are shared: four callers at once, each result as if alone,
    and BLAS back at its own number of threads afterwards."""
    from threadpoolctl import threadpool_info

    before = [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"]
    rng = np.random.default_rng(7)
    problems = [tuple(rng.standard_normal((2, 40, 8)) for _ in range(3)) for _ in range(4)]
    alone = [attention(*problem, block_rows=3, threads=2) for problem in problems]
    results: list[np.ndarray | None] = [None] * len(problems)

    def call(index: int) -> None:
        results[index] = attention(*problems[index], block_rows=3, threads=2)

    callers = [threading.Thread(target=call, args=(index,)) for index in range(len(problems))]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    for found, expected in zip(results, alone):
        assert_equal_but_rounding(found, expected, float(np.abs(problems[0][2]).max()))
    assert [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"] == before


FORK = """
import os, sys, threading
import numpy as np
from attncli import kernel
q = np.ones((64, 8))
kernel.attention(q, q, q, block_rows=4, threads=2)  # the parent's helpers exist now
pid = os.fork()
if pid == 0:
    out = kernel.attention(q, q, q, block_rows=4, threads=2)
    helped = any(thread.name == "attncli-kernel" for thread in threading.enumerate())
    os._exit(0 if np.allclose(out, 1) and helped else 1)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_computes_with_threads_of_its_own() -> None:
    """A child has none of its parent's helper threads: it starts its own rather than wait for them."""
    subprocess.run([sys.executable, "-c", FORK], cwd=ROOT, check=True, timeout=60)


def rule_problem(rule: dict, n_q: int, n_k: int, seed: int) -> tuple[str, list[int]]:
    """A YAML problem of n_k tokens under `rule` (mask:, window:, padding:, queries:) and each query's position.

    Queries are the tokens, another sequence of n_q ("cross"), n_q of the tokens ("subset") or the
    last n_q ("last"); under causal_lower_right query i stands at i + S − L.
    """
    rng = np.random.default_rng(seed)
    tokens = [f"t{j + 1}" for j in range(n_k)]
    lines = [f"tokens: [{', '.join(tokens)}]"]
    if rule.get("queries") == "cross":
        lines.append(f"query_tokens: [{', '.join(f'q{i + 1}' for i in range(n_q))}]")
        where = list(range(n_q))
    elif rule.get("queries") in ("subset", "last"):
        where = sorted(int(j) for j in rng.choice(n_k, size=min(n_q, n_k), replace=False))
        where = where if rule["queries"] == "subset" else list(range(n_k - len(where), n_k))
        lines.append(f"query_tokens: [{', '.join(tokens[j] for j in where)}]")
    else:
        where = list(range(n_k))
    if rule.get("mask") == "causal_lower_right" and rule.get("queries") == "cross":
        where = [i + n_k - n_q for i in range(n_q)]
    for name, rows in (("queries", len(where)), ("keys", n_k), ("values", n_k)):
        lines.append(f"{name}: {rng.integers(-3, 4, size=(rows, 2)).tolist()}")
    lines += [f"{field}: {rule[field]}" for field in ("mask", "window", "padding") if field in rule]
    return "\n".join(lines), where


RULES = [
    {},
    {"mask": "causal"},
    {"mask": "causal", "queries": "cross"},
    {"mask": "causal", "queries": "subset"},
    {"mask": "causal_lower_right", "queries": "last"},
    {"mask": "causal_lower_right", "queries": "cross"},
    {"window": 2},
    {"window": 1, "mask": "causal"},
    {"window": 3, "queries": "subset"},
    {"padding": "[t2]"},
    {"padding": "[t1]", "mask": "causal", "queries": "cross"},
]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: ",".join(f"{k}={v}" for k, v in rule.items()) or "none")
@pytest.mark.parametrize("seed", range(3))
def test_a_mask_made_by_rules_is_the_rule_cell_by_cell_and_the_kernel_obeys_it(rule: dict, seed: int) -> None:
    """Causal, window and padding masks as the parser builds them (views of O(L + S) cells where one
    rule makes them, and queries stand at consecutive positions) against the rule written out cell
    by cell; and `result` (the kernel, given the mask or its causal rule) against every step's output."""
    from attncli import pipeline

    rng = np.random.default_rng(seed)
    n_k = int(rng.integers(3, 12))
    n_q = n_k if rule.get("queries") != "cross" else int(rng.integers(1, 12))
    text, where = rule_problem(
        rule, n_q if rule.get("queries") not in ("subset", "last") else int(rng.integers(1, n_k)), n_k, seed
    )
    window, padding = rule.get("window"), {"[t1]": {0}, "[t2]": {1}}.get(rule.get("padding"), set())
    causal = rule.get("mask", "").startswith("causal")
    expected = [
        [
            (not causal or j <= p)
            and (window is None or (p - window <= j and (causal or j <= p + window)))
            and j not in padding
            for j in range(n_k)
        ]
        for p in where
    ]
    if not all(any(row) for row in expected):
        with pytest.raises(AttnError):
            pipeline.load(text=text)
        return
    problem = pipeline.load(text=text)
    assert problem.mask.tolist() == expected
    one_rule = bool(causal) + (window is not None) + bool(padding) <= 1
    consecutive = where == list(range(where[0], where[0] + len(where)))  # else causal and window are dense
    low, high = np.lib.array_utils.byte_bounds(problem.mask)
    assert high - low <= len(where) + n_k or not one_rule or not (consecutive or padding)  # the memory it spans
    assert np.abs(pipeline.result(problem) - pipeline.solve(problem).output).max() <= 1e-12


def long_problem(tmp_path: Path, n: int, d: int) -> dict[str, str]:
    """Flags naming q, k and v of n tokens, saved as .npy files."""
    rng = np.random.default_rng(n)
    flags = {}
    for name in ("queries", "keys", "values"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((n, d)))
        flags[name] = f"@{tmp_path / name}.npy"
    return flags


def test_results_only_loads_past_the_every_step_budget_and_falls_back_only_within_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a budget of 1 MiB, 400 tokens (49 bytes a cell every step: 7.5 MiB) load only for the
    result alone, which matches softmax written out in numpy; what needs every step is refused."""
    from attncli import pipeline
    from attncli.parsing import budget

    monkeypatch.setattr(budget, "MEMORY_BUDGET", 2**20)
    flags = long_problem(tmp_path, 400, 4)
    with pytest.raises(AttnError) as refused:
        pipeline.load(None, flags)
    assert refused.value.key == "problem.too_large"
    for mask in ("none", "causal"):
        problem = pipeline.load(None, flags | {"mask": mask}, results_only=True)
        q, k, v = (np.load(flags[name][1:]) for name in ("queries", "keys", "values"))
        s = q @ k.T / 2  # 1/√d_k
        if mask == "causal":
            s[np.triu_indices(400, 1)] = -np.inf
        e = np.exp(s - s.max(axis=1, keepdims=True))
        assert np.abs(pipeline.result(problem) - e @ v / e.sum(axis=1, keepdims=True)).max() <= 1e-12
    with pytest.raises(AttnError) as refused:  # not q·kᵀ: every step, known as soon as the score is read
        pipeline.load(None, flags | {"score": "cosine"}, results_only=True)
    assert refused.value.key == "problem.too_large"
    problem = pipeline.load(None, flags | {"scale": "1e307"}, results_only=True)
    with pytest.raises(AttnError) as refused:  # scores that could overflow: every step, found out later
        pipeline.result(problem)
    assert refused.value.key == "problem.too_large"


def test_the_result_of_a_long_sequence_holds_no_matrix_of_its_cells(tmp_path: Path) -> None:
    """8,192 tokens, causal or not: less is allocated than one byte per (query, key) cell (64 MiB),
    so no score matrix and no dense mask is ever built; numpy reports its buffers to tracemalloc."""
    import tracemalloc

    from attncli import pipeline

    flags = long_problem(tmp_path, 8192, 4)
    for mask in ("none", "causal"):
        tracemalloc.start()
        try:
            pipeline.result(pipeline.load(None, flags | {"mask": mask}, results_only=True))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 8192 * 8192 / 2, mask


def test_the_startup_benchmark_reports_each_rounds_ratio_to_the_floor() -> None:
    """benchmarks/startup.py's figures from made-up times: per-round ratios, their minimum and median."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import startup
    finally:
        sys.path.pop(0)
    times = {"baseline": [0.10, 0.20, 0.10], "compute": [0.11, 0.30, 0.13], "help": [0.09, 0.20, 0.12]}
    rows = {name: (low, middle) for name, low, middle, _ in startup.report(times)}
    assert rows["compute (s)"] == (0.11, 0.13)
    assert rows["compute / baseline, per round"] == pytest.approx((1.1, 1.3))  # 1.1, 1.5, 1.3
    assert rows["help / baseline, per round"] == pytest.approx((0.9, 1.0))  # 0.9, 1.0, 1.2
    programs = startup.commands(Path("/venv/bin/python"), here=False)
    assert programs["compute"][0] == "/venv/bin/attncli" and programs["baseline"][-1] == startup.BASELINE


@pytest.mark.parametrize("causal", [False, True])
def test_key_bins_sum_each_querys_weights_over_each_bin(causal: bool) -> None:
    """The binned sums against the weights, summed bin by bin in plain numpy; grouped heads too."""
    rng = np.random.default_rng(11)
    q = rng.standard_normal((4, 30, 3))
    k, v = rng.standard_normal((2, 45, 3)), rng.standard_normal((2, 45, 2))
    bins = [0, 1, 7, 20, 44]
    out, weights, sums = attention(
        q, k, v, causal=causal, enable_gqa=True, return_weights=True, key_bins=bins, block_rows=4, threads=2
    )
    edges = [*bins, 45]
    expected = np.stack([weights[..., a:b].sum(axis=-1) for a, b in pairwise(edges)], axis=-1)
    np.testing.assert_allclose(sums, expected, rtol=0, atol=1e-15)
    assert sums.shape == (4, 30, 5)
    assert_equal_but_rounding(attention(q, k, v, causal=causal, enable_gqa=True), out, float(np.abs(v).max()))
    for wrong in ([1, 5], [0, 5, 5], [0, 45], [[0]], [0.0, 1.0]):
        with pytest.raises(ValueError, match="key_bins"):
            kernel.attention(q, k, v, enable_gqa=True, key_bins=wrong)


SUMMARY_CASES = [
    {"n_q": 300, "n_k": 300},
    {"n_q": 200, "n_k": 200, "mask": "causal", "follow": ("t5", "t150", "t200")},
    {"n_q": 70, "n_k": 130, "mask": "causal_lower_right"},
    {"n_q": 90, "n_k": 90, "heads": 2, "window": 9},
    {"n_q": 6, "n_k": 40, "dtype": "float32"},
]


def _large_problem(case: dict) -> str:
    """A problem of random queries, keys and values (as YAML) of the case's size, heads and mask."""
    rng = np.random.default_rng(case["n_q"])
    n_q, n_k = case["n_q"], case["n_k"]
    lines = [f"tokens: [{', '.join(f't{j + 1}' for j in range(n_k))}]"]
    if n_q != n_k:
        lines.append(f"query_tokens: [{', '.join(f't{j + 1}' for j in range(n_k - n_q, n_k))}]")
    lines.append("heads:")
    for _ in range(case.get("heads", 1)):
        lines.append(f"  - queries: {np.round(rng.standard_normal((n_q, 4)) * 2, 3).tolist()}")
        lines += [f"    {name}: {np.round(rng.standard_normal((n_k, 4)), 3).tolist()}" for name in ("keys", "values")]
    return "\n".join(lines + [f"{field}: {case[field]}" for field in ("mask", "window") if field in case])


@pytest.mark.parametrize("case", SUMMARY_CASES, ids=lambda case: "-".join(map(str, case.values())))
def test_the_summary_from_the_kernel_is_the_summary_from_every_step(case: dict) -> None:
    """`pipeline.overview` (the kernel's pass and the kept rows) against `core.overview` (every step), both
    against a plain numpy softmax averaged block by block; the printed summaries are the same to the byte."""
    from attncli import pipeline, render
    from attncli.render import summary

    problem = pipeline.load(text=_large_problem(case), dtype=case.get("dtype", "float64"))
    n_q, n_k = problem.mask.shape
    follow = case.get("follow")
    rows = summary.kept_rows(problem, follow)
    assert {0, 1, 2, 3, n_q - 4, n_q - 1} <= set(rows)  # the corners' rows, and by default the first three
    fast = pipeline.overview(problem, rows, summary.MAP_SHAPE)
    slow = core.overview(pipeline.solve(problem), rows, summary.MAP_SHAPE)
    row_edges, column_edges = (np.linspace(0, n, min(m, n) + 1).astype(int) for n, m in zip((n_q, n_k), (16, 48)))
    tolerance = 1e-6 if case.get("dtype") == "float32" else 1e-12
    for h, (ours, every) in enumerate(zip(fast.heads, slow.heads)):
        head = problem.heads[h]
        q, k = (np.asarray(x, dtype=np.float64) for x in (head.queries, head.keys))
        s = np.where(problem.mask, q @ k.T / 2, -np.inf)  # 1/√d_k
        weights = np.exp(s - s.max(axis=1, keepdims=True))
        weights /= weights.sum(axis=1, keepdims=True)
        means = [[weights[a:b, c:d].mean() for c, d in pairwise(column_edges)] for a, b in pairwise(row_edges)]
        for found in (ours, every):
            np.testing.assert_allclose(found.blocks, means, rtol=tolerance, atol=tolerance * 1e-3)
            np.testing.assert_allclose(found.weights, weights[list(rows)], rtol=0, atol=tolerance)
            assert np.array_equal(found.scores == -np.inf, ~problem.mask[list(rows)])
        assert_equal_but_rounding(ours.weights, every.weights)  # the kept rows take every step, as `solve`'s do
        assert_equal_but_rounding(
            ours.scores, every.scores, float(np.abs(every.scores[np.isfinite(every.scores)]).max())
        )
    assert_equal_but_rounding(fast.output, slow.output, float(np.abs(slow.output).max()))
    by_kernel = summary.lines(problem, follow=follow)
    assert by_kernel is not None
    for width in (60, 100):
        assert by_kernel(width) == render.human_lines(pipeline.solve(problem), follow=follow)(width)


def test_compute_shows_a_large_problem_without_solving_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The terminal summary of a large dot-product problem never builds every step (`pipeline.solve`);
    one with a bias must, and still prints its summary."""
    from typer.testing import CliRunner

    from attncli import pipeline
    from attncli.cli import app

    solved: list[object] = []
    every_step = pipeline.solve
    monkeypatch.setattr(pipeline, "solve", lambda problem: solved.append(problem) or every_step(problem))
    path = tmp_path / "large.yaml"
    path.write_text(_large_problem({"n_q": 70, "n_k": 70}))
    quick = CliRunner().invoke(app, ["compute", str(path), "--format", "text"])
    assert quick.exit_code == 0 and "t70" in quick.stdout and not solved, quick.stdout
    path.write_text(_large_problem({"n_q": 70, "n_k": 70}) + "\nbias: alibi")
    slow = CliRunner().invoke(app, ["compute", str(path), "--format", "text"])
    assert slow.exit_code == 0 and len(solved) == 1, slow.stdout
