"""The public `attncli.attention` by hand: PyTorch's mask, causal and scale conventions, dtypes, batches, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from attncli import attention
from attncli.errors import AttnError


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
