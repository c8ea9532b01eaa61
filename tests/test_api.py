"""The public `attncli.attention` by hand: PyTorch's mask, causal and scale conventions, dtypes, batches, errors."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# Issue 22: empty inputs, NaN and infinities, integer masks, the error's words, and no numpy warning


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_no_queries_or_no_keys_give_torchs_empty_result(dtype: type) -> None:
    """L = 0: an empty (…, 0, E_v) (it raised ZeroDivisionError); S = 0 without a mask: zeros (L, E_v), a
    softmax over nothing times nothing, as torch's scaled_dot_product_attention returns."""
    out, weights = attention(
        np.zeros((2, 0, 4), dtype), np.ones((2, 5, 4), dtype), np.ones((2, 5, 3), dtype), return_weights=True
    )
    assert (out.shape, weights.shape, out.dtype) == ((2, 0, 3), (2, 0, 5), dtype)
    out, weights = attention(
        np.ones((2, 3, 4), dtype), np.zeros((2, 0, 4), dtype), np.zeros((2, 0, 3), dtype), return_weights=True
    )
    assert (out.shape, weights.shape, out.dtype) == ((2, 3, 3), (2, 3, 0), dtype) and not out.any()
    assert attention(np.zeros((0, 4)), np.zeros((0, 4)), np.zeros((0, 2)), causal=True).shape == (0, 2)


def test_empty_inputs_against_torch() -> None:
    torch = pytest.importorskip("torch")
    sdpa = torch.nn.functional.scaled_dot_product_attention
    for shapes in (((2, 0, 4), (2, 5, 4), (2, 5, 3)), ((2, 3, 4), (2, 0, 4), (2, 0, 3)), ((3, 0), (5, 0), (5, 2))):
        arrays = [np.random.default_rng(0).standard_normal(shape) for shape in shapes]
        expected = sdpa(*map(torch.from_numpy, arrays)).numpy()
        found = attention(*arrays)
        assert found.shape == expected.shape
        np.testing.assert_allclose(found, expected, rtol=0, atol=1e-15 * np.abs(arrays[2]).max(initial=0))


@pytest.mark.parametrize("mask", [{"mask": np.ones((3, 0), dtype=bool)}, {"mask": np.zeros((3, 0))}, {"causal": True}])
def test_no_keys_under_a_mask_is_a_query_with_no_key_to_attend_to(mask: dict) -> None:
    """S = 0 under a mask or causal: every query has every key masked, an error as for S > 0 (README)."""
    with pytest.raises(AttnError) as caught:
        attention(np.ones((3, 4)), np.zeros((0, 4)), np.zeros((0, 2)), **mask)
    assert caught.value.params["reason"].startswith("query row 0 has no key to attend to")


@pytest.mark.parametrize("name", ["q", "k", "v", "scale"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_or_infinity_in_any_input_is_refused_with_its_own_message(name: str, bad: float) -> None:
    """NaN in v passed through ([[nan, 0.5]]), NaN in q was 'every key is masked'."""
    arrays = {"q": np.ones((2, 3)), "k": np.ones((4, 3)), "v": np.ones((4, 2))}
    options: dict = {"scale": bad} if name == "scale" else {}
    if name != "scale":
        arrays[name][1, 2 if name != "v" else 1] = bad
    with pytest.raises(AttnError) as caught:
        attention(arrays["q"], arrays["k"], arrays["v"], **options)
    assert (caught.value.key, caught.value.params) == ("api.not_finite", {"name": name})
    assert str(caught.value) == f"attention(): NaN or infinity in {name}; every number must be finite"


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_an_additive_mask_may_hold_minus_infinity_but_not_nan_or_plus_infinity(bad: float) -> None:
    q, k, v = np.ones((1, 2)), np.eye(2), np.eye(2)
    assert attention(q, k, v, mask=np.array([[-math.inf, 0.0]])).tolist() == [[0.0, 1.0]]
    with pytest.raises(AttnError) as caught:
        attention(q, k, v, mask=np.array([[bad, 0.0]]))
    assert caught.value.key == "api.mask_not_finite"
    assert str(caught.value).startswith("attention(): NaN or +infinity in mask")


@pytest.mark.parametrize("dtype", [np.int64, np.int8, np.uint8, np.complex128, object])
def test_a_mask_of_integers_is_refused_as_torch_refuses_it(dtype: type) -> None:
    """A 1 = attend int mask was added as +0/+1 and silently did nothing."""
    with pytest.raises(AttnError) as caught:
        attention(np.ones((1, 2)), np.eye(2), np.eye(2), mask=np.array([[1, 0]], dtype=dtype))
    assert caught.value.key == "api.mask_dtype"
    assert str(caught.value).endswith("; use bool (True = attend) or additive float")


def test_torch_refuses_an_integer_mask_too() -> None:
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError, match="attn_mask dtype to be bool or float"):
        torch.nn.functional.scaled_dot_product_attention(
            torch.ones(1, 2, dtype=torch.float64), torch.eye(2, dtype=torch.float64), torch.eye(2, dtype=torch.float64),
            attn_mask=torch.tensor([[1, 0]]),
        )  # fmt: skip


@pytest.mark.parametrize("value", [np.ones((1, 2)) * 1j, np.array([["a", "b"]]), np.array([[1.0, None]], dtype=object)])
def test_inputs_that_are_not_real_numbers_are_refused(value: np.ndarray) -> None:
    with pytest.raises(AttnError) as caught:
        attention(value, np.ones((2, 2)), np.ones((2, 2)))
    assert caught.value.key == "api.not_numbers" and caught.value.params["name"] == "q"


def test_str_of_an_error_is_the_english_sentence_with_file_line_and_field() -> None:
    """str(AttnError) was its catalogue key (problem.dk_mismatch, input.unreadable); now what the CLI prints,
    in English whatever the language a run speaks."""
    from attncli import load
    from attncli.i18n import LANGUAGE

    with pytest.raises(AttnError) as caught:
        load(text="queries: [[1, 2]]\nkeys: [[1, 2, 3]]\nvalues: [[1]]\n", name="p.yaml")
    assert caught.value.key == "problem.dk_mismatch"
    assert str(caught.value).startswith("p.yaml:")
    assert "problem.dk_mismatch" not in str(caught.value) and "keys" in str(caught.value)
    with pytest.raises(AttnError) as missing:
        load("no/such/problem.yaml")
    token = LANGUAGE.set("es")
    try:
        assert str(missing.value).startswith("no/such/problem.yaml: ") and "input.unreadable" not in str(missing.value)
        assert "No such file" in str(missing.value)
    finally:
        LANGUAGE.reset(token)
    with pytest.raises(AttnError, match=r"^attention\(\): shapes do not line up"):
        attention(np.ones((2, 3)), np.ones((2, 2)), np.ones((2, 2)))


@given(
    shapes=st.sampled_from(
        [
            ((0, 3), (4, 3), (4, 2)),
            ((2, 3), (0, 3), (0, 2)),
            ((2, 0), (4, 0), (4, 2)),
            ((2, 3), (4, 3), (4, 0)),
            ((2, 3), (4, 3), (4, 2)),
        ]
    ),
    dtype=st.sampled_from([np.float16, np.float32, np.float64, np.int64, np.bool_]),
    poison=st.sampled_from([None, math.nan, math.inf, -math.inf, 1e300, -1e300, 5e-324]),
    where=st.sampled_from(["q", "k", "v"]),
    scale=st.sampled_from([None, 0.0, -1.0, 1e-300, 1e300, 3.0]),
    mask=st.sampled_from([None, "bool", "float", "int", "causal", "lower_right"]),
)
@settings(max_examples=150, deadline=None)
def test_any_api_call_returns_finite_numbers_or_one_attn_error_and_never_a_warning(
    shapes: tuple, dtype: type, poison: float | None, where: str, scale: float | None, mask: str | None
) -> None:
    rng = np.random.default_rng(0)
    arrays = dict(zip("qkv", (rng.standard_normal(shape) for shape in shapes)))
    if poison is not None and arrays[where].size:
        arrays[where].flat[0] = poison
    with np.errstate(all="ignore"):  # NaN as an integer, 1e300 as float16: whatever the cast gives
        arrays = {name: array.astype(dtype) for name, array in arrays.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        n_q, n_k = shapes[0][0], shapes[1][0]
        options: dict = {"scale": scale}
        if mask in ("bool", "float", "int"):
            options["mask"] = (rng.random((n_q, n_k)) < 0.7).astype({"bool": bool, "float": float, "int": int}[mask])
        elif mask is not None:
            options["causal"] = True if mask == "causal" else "lower_right"
        try:
            out = attention(arrays["q"], arrays["k"], arrays["v"], **options)
        except AttnError as error:
            assert str(error).startswith("attention(): ") and "\n" not in str(error)
            return
    assert out.shape == (n_q, shapes[2][1]) and np.isfinite(out).all()
