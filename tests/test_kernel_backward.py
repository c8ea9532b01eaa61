"""`attention_backward`, the blocked backward pass, against the every-step backward and PyTorch's autograd.

Without torch, random problems against attncli.backward's head_gradients (every (L, S) matrix
built): the same dq, dk, dv within float64 rounding, whatever the blocks and the threads. With torch,
autograd through scaled_dot_product_attention: float64 within 1e-12 of each array's largest entry, and
float32's error over the whole array (against float64) within 1.5× torch's own float32 error.
"""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli import attention, attention_backward, backward, core, kernel
from attncli.errors import AttnError
from attncli.problem import Head, Score
from tests.paths import ROOT

EPS = np.finfo(np.float64).eps


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.tuples(st.integers(1, 20), st.integers(1, 20), st.integers(1, 5), st.integers(1, 4)),  # L, S, d, d_v
    causal=st.sampled_from([False, True, "lower_right"]),
    use_mask=st.booleans(),
    magnitude=st.sampled_from([0.5, 3.0, 30.0]),  # 30: scores in the hundreds, the forward's shifted softmax
    blocks=st.tuples(st.sampled_from([None, 1, 3, 7]), st.sampled_from([None, 1, 2, 5]), st.integers(1, 3)),
    seed=st.integers(0, 2**32 - 1),
)
def test_blocks_give_the_every_step_gradients(
    sizes: tuple[int, int, int, int],
    causal: bool | str,
    use_mask: bool,
    magnitude: float,
    blocks: tuple[int | None, int | None, int],
    seed: int,
) -> None:
    """Keys per block, query rows per tile and threads as `blocks` says."""
    n_q, n_k, d, d_v = sizes
    if causal == "lower_right":
        n_k = max(n_k, n_q)  # else the first queries see no key
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((2, n_q, d)) * magnitude, rng.standard_normal((2, n_k, d)) * magnitude
    v, grad_output = rng.standard_normal((2, n_k, d_v)), rng.standard_normal((2, n_q, d_v))
    allowed = np.ones((n_q, n_k), dtype=bool)
    if use_mask:
        allowed = rng.random((n_q, n_k)) < 0.6
        allowed[:, 0] = True  # every query keeps a key: the first one is seen under either causal alignment
    options = dict(zip(("block_keys", "tile_rows", "threads"), blocks))
    dq, dk, dv = attention_backward(q, k, v, grad_output, mask=allowed if use_mask else None, causal=causal, **options)
    diagonal = {False: None, True: 0, "lower_right": n_k - n_q}[causal]
    if diagonal is not None:
        allowed = allowed & (np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + diagonal)
    factor = 1 / math.sqrt(d)
    for h in range(2):
        steps = core.attend(Head("h", Score("scaled_dot", factor), q[h], k[h], v[h]), allowed)
        grads = backward.head_gradients(steps, grad_output[h], allowed)
        # dS carries P's rounding, a few ulps of the largest |q·k·scale| (the two paths scale q·k apart)
        spread = factor * np.abs(q[h]).max() * np.abs(k[h]).max() * d
        tolerance = 64 * EPS * (1 + spread + n_k) * np.abs(grad_output[h]).max() * (1 + np.abs(v[h]).max())
        np.testing.assert_allclose(dv[h], grads.grad_values, rtol=0, atol=tolerance)
        np.testing.assert_allclose(dq[h], grads.grad_queries, rtol=0, atol=tolerance * (1 + np.abs(k[h]).max()))
        np.testing.assert_allclose(dk[h], grads.grad_keys, rtol=0, atol=tolerance * (1 + np.abs(q[h]).max()))


def test_bad_arrays_are_one_error_naming_the_call() -> None:
    q = np.ones((3, 2))
    with pytest.raises(AttnError) as caught:
        attention_backward(q, q, q, np.ones((3, 3)))
    assert (
        caught.value.key == "api.attention_backward" and "expected the output's (3, 2)" in caught.value.params["reason"]
    )
    with pytest.raises(AttnError):
        attention_backward(q, q, q, q, mask=np.zeros((3, 3), dtype=bool))  # no query sees a key


# Against PyTorch


def _sdpa_grads(torch: object, q: np.ndarray, k: np.ndarray, v: np.ndarray, grad_output: np.ndarray, **options: object):
    """autograd's (dq, dk, dv) through F.scaled_dot_product_attention, in the arrays' dtype."""
    tensors = [torch.tensor(a, requires_grad=True) for a in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*tensors, **options)
    return [g.numpy() for g in torch.autograd.grad(out, tensors, torch.tensor(grad_output))]


CASES = [
    # (q shape, k shape, v shape, options for attncli)
    ((4, 3), (6, 3), (6, 2), {}),  # 2-D
    ((1, 3), (7, 3), (7, 2), {}),  # L = 1
    ((2, 5, 4), (2, 9, 4), (2, 9, 3), {"causal": True}),  # 3-D, causal top-left
    ((2, 3, 5, 4), (2, 3, 9, 4), (2, 3, 9, 3), {"causal": "lower_right"}),  # 4-D, bottom-right
    ((2, 4, 6, 4), (2, 2, 6, 4), (2, 2, 6, 3), {"enable_gqa": True, "causal": True}),  # GQA
    ((3, 5, 4), (1, 11, 4), (1, 11, 2), {"mask": "bool"}),  # k, v broadcast over the batch
    ((2, 6, 4), (2, 6, 4), (2, 6, 2), {"mask": "float", "scale": 0.3}),  # additive mask, a scale
]


@pytest.mark.parametrize(("q_shape", "k_shape", "v_shape", "options"), CASES)
def test_float64_is_autograds_through_sdpa(q_shape: tuple, k_shape: tuple, v_shape: tuple, options: dict) -> None:
    torch = pytest.importorskip("torch")
    from torch.nn.attention.bias import causal_lower_right

    rng = np.random.default_rng(sum(q_shape) + 10 * sum(k_shape))
    q, k, v = rng.standard_normal(q_shape), rng.standard_normal(k_shape), rng.standard_normal(v_shape)
    n_q, n_k = q_shape[-2], k_shape[-2]
    ours, theirs = dict(options), dict(options)
    if options.get("mask") == "bool":
        allowed = rng.random((n_q, n_k)) < 0.6
        allowed[:, 0] = True
        ours["mask"], theirs["attn_mask"] = allowed, torch.from_numpy(allowed)
    elif options.get("mask") == "float":
        bias = rng.standard_normal((n_q, n_k))
        ours["mask"], theirs["attn_mask"] = bias, torch.from_numpy(bias)
    theirs.pop("mask", None)
    if options.get("causal") == "lower_right":
        theirs["attn_mask"] = causal_lower_right(n_q, n_k)
        theirs.pop("causal")
    elif "causal" in options:
        theirs["is_causal"] = theirs.pop("causal")
    grad_output = rng.standard_normal(attention(q, k, v, **ours).shape)
    got = attention_backward(q, k, v, grad_output, **ours, block_keys=4, tile_rows=3)
    want = _sdpa_grads(torch, q, k, v, grad_output, **theirs)
    for name, a, b in zip(("dq", "dk", "dv"), got, want):
        assert a.shape == b.shape, name
        assert np.abs(a - b).max() <= 1e-12 * np.abs(b).max(), name


@pytest.mark.parametrize("causal", [False, True])
def test_float32_error_is_within_torchs_own(causal: bool) -> None:
    """‖g₃₂ − g₆₄‖ / ‖g₆₄‖ of each gradient, attncli's against torch's, both measured against torch's float64."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((2, 300, 64)) for _ in range(4)]
    exact = _sdpa_grads(torch, *arrays, is_causal=causal)
    single = [a.astype(np.float32) for a in arrays]
    ours = attention_backward(*single, causal=causal)
    theirs = _sdpa_grads(torch, *single, is_causal=causal)

    def error(grad: np.ndarray, truth: np.ndarray) -> float:
        return float(np.linalg.norm(grad.astype(np.float64) - truth) / np.linalg.norm(truth))

    for name, a, b, truth in zip(("dq", "dk", "dv"), ours, theirs, exact):
        assert a.dtype == np.float32
        assert error(a, truth) <= 1.5 * error(b, truth), name


def test_the_backward_benchmark_runs_in_quick_mode() -> None:
    """benchmarks/backward.py --quick: toy sizes, torch left out; nothing here looks at a time."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import backward as benchmark
    finally:
        sys.path.pop(0)
    rows = {row.name: row for row in benchmark.main(["--quick", "--without-torch"])}
    assert "backward / forward, float64" in rows and rows["attncli / torch backward, float32"].missing
    assert rows["peak RSS added, n=256, d=64, float64 (MiB)"].minimum >= 0


@pytest.mark.parametrize("case", ["plain", "tiny values", "huge values", "huge scores", "values near the top", "mixed"])
def test_the_log_sum_exp_is_each_rows_whichever_way_the_kernel_gathered_it(case: str) -> None:
    """Rows gathered unshifted, shifted, or shifted and lowered (extreme values) in one block: each row's
    log Σ e^s within 1e-15 of the shifted sum in numpy (the offset each row was gathered from is its own)."""
    rng = np.random.default_rng(7)
    q, k, v = rng.normal(size=(7, 3)), rng.normal(size=(9, 3)), rng.normal(size=(9, 2))
    q, v = {
        "plain": (q, v),
        "tiny values": (q, 1e-300 * rng.random((9, 2))),
        "huge values": (q, v * np.where(np.arange(9) < 3, 1e300, 1)[:, None]),
        "huge scores": (q * 40, v),
        "values near the top": (q, np.full((9, 2), 1e307)),
        "mixed": (q * np.where(np.arange(7) == 2, 60, 1)[:, None], v * 1e-300),
    }[case]
    _, lse = kernel.attention(q, k, v, return_lse=True, block_keys=4)
    s = q @ k.T / np.sqrt(3)  # (L, S)
    top = s.max(axis=1)
    expected = top + np.log(np.exp(s - top[:, None]).sum(axis=1))
    assert np.allclose(lse, expected, rtol=1e-15, atol=1e-15)
