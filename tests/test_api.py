"""The blocked `attncli.attention` against the direct formula, PyTorch's mask convention and dtypes."""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli import attention, kernel
from attncli.errors import AttnError


def direct(q: np.ndarray, k: np.ndarray, v: np.ndarray, allowed: np.ndarray | None, scale: float) -> np.ndarray:
    """softmax(q·kᵀ·scale) · v with the full score matrix, in float64."""
    s = (q.astype(np.float64) @ k.astype(np.float64).T) * scale
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    w = np.exp(s - s.max(axis=1, keepdims=True))
    return (w / w.sum(axis=1, keepdims=True)) @ v.astype(np.float64)


@settings(max_examples=60, deadline=None)
@given(
    n_q=st.integers(1, 40),
    n_k=st.integers(1, 40),
    d=st.integers(1, 8),
    d_v=st.integers(1, 5),
    causal=st.booleans(),
    use_mask=st.booleans(),
    block=st.sampled_from([1, 7, 64, 1 << 20]),
    magnitude=st.sampled_from([1.0, 30.0]),
    seed=st.integers(0, 2**32 - 1),
)
def test_blocked_matches_direct_formula(
    n_q: int, n_k: int, d: int, d_v: int, causal: bool, use_mask: bool, block: int, magnitude: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((n_q, d)) * magnitude, rng.standard_normal((n_k, d)) * magnitude
    v = rng.standard_normal((n_k, d_v))
    allowed = np.ones((n_q, n_k), dtype=bool)
    if causal:
        allowed &= np.arange(n_q)[:, None] >= np.arange(n_k)[None, :]
    if use_mask:
        allowed &= rng.random((n_q, n_k)) < 0.7
    allowed[:, 0] = True  # every query keeps one key
    mask = allowed if use_mask else None
    with mock.patch.object(kernel, "BLOCK_CELLS", block):
        got = attention(q, k, v, mask=mask, causal=causal)
    expected = direct(q, k, v, allowed if (causal or use_mask) else None, 1 / math.sqrt(d))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def test_mask_convention_true_means_may_attend() -> None:
    """By hand: with key 1 hidden, query 0 copies value 0 exactly, as in torch's SDPA."""
    q = np.array([[1.0, 0.0]])
    k = np.array([[1.0, 0.0], [0.0, 1.0]])
    v = np.array([[10.0, 0.0], [0.0, 10.0]])
    out = attention(q, k, v, mask=np.array([[True, False]]))
    assert out.tolist() == [[10.0, 0.0]]
    both = attention(q, k, v)
    weight = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)
    np.testing.assert_allclose(both, [[10 * weight, 10 * (1 - weight)]], rtol=1e-14)


def test_the_article_example_through_the_api() -> None:
    out, weights = attention(
        np.array([[math.sqrt(2), 0.0]]),
        np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 1.0]]),
        np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]]),
        return_weights=True,
    )
    total = math.e**2 + math.e + 1
    np.testing.assert_allclose(weights, [[math.e**2 / total, math.e / total, 1 / total]], rtol=1e-14)
    np.testing.assert_allclose(out, [[(2 * math.e**2 + 1) / total, (2 * math.e + 1) / total]], rtol=1e-14)


def test_causal_is_top_left_aligned_for_cross_attention() -> None:
    """L = 2 queries, S = 3 keys: query 0 sees key 0 only, query 1 keys 0 and 1 (torch's is_causal)."""
    v = np.array([[1.0], [2.0], [4.0]])
    out, weights = attention(np.zeros((2, 1)), np.zeros((3, 1)), v, causal=True, return_weights=True)
    assert weights.tolist() == [[1.0, 0.0, 0.0], [0.5, 0.5, 0.0]]
    assert out.tolist() == [[1.0], [1.5]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_kept(dtype: type) -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((5, 4)).astype(dtype) for _ in range(3))
    out, weights = attention(q, k, v, return_weights=True)
    assert out.dtype == dtype and weights.dtype == dtype


def test_float32_agrees_with_float64_to_float32_precision() -> None:
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((50, 16)) for _ in range(3))
    single = attention(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32))
    np.testing.assert_allclose(single, attention(q, k, v), rtol=1e-5, atol=1e-6)


def test_batches_and_additive_float_masks() -> None:
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((2, 3, 6, 5)), rng.standard_normal((2, 3, 6, 2))
    bias = rng.standard_normal((4, 6))
    out = attention(q, k, v, mask=bias, scale=0.5)
    for b, h in np.ndindex(2, 3):
        s = q[b, h] @ k[b, h].T * 0.5 + bias
        w = np.exp(s - s.max(axis=1, keepdims=True))
        np.testing.assert_allclose(out[b, h], (w / w.sum(axis=1, keepdims=True)) @ v[b, h], rtol=1e-12)


def test_large_scores_do_not_overflow() -> None:
    q = np.array([[1e4, 0.0]])
    k = np.array([[1e4, 0.0], [0.0, 1.0]])
    out = attention(q, k, np.eye(2), scale=1.0)
    assert out.tolist() == [[1.0, 0.0]]


def test_a_query_with_every_key_masked_is_an_error() -> None:
    with pytest.raises(AttnError) as caught:
        attention(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), mask=np.array([[True, False], [False, False]]))
    assert caught.value.params["reason"].startswith("query row 1 ")


def test_mismatched_shapes_are_an_error() -> None:
    with pytest.raises(AttnError) as caught:
        attention(np.ones((2, 3)), np.ones((2, 2)), np.ones((2, 2)))
    assert "line up" in caught.value.params["reason"]
