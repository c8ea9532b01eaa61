"""attncli against PyTorch, in float64 to 1e-12: the lower-right causal mask, grouped-query heads, additive biases.

PyTorch is a development tool only (never a dependency): without it these tests are skipped.
Each problem is written as YAML from random numbers and solved by attncli's every-step core;
PyTorch computes the same attention on its own.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import numpy as np
import pytest

from attncli import pipeline
from attncli.errors import AttnError
from tests.reference import press_get_slopes

torch = pytest.importorskip("torch")
F = torch.nn.functional
from torch.nn.attention.bias import causal_lower_right  # noqa: E402

TOLERANCE = 1e-12


def solve(fields: dict) -> pipeline.Steps:
    """The problem `fields` (numpy arrays become nested lists of exact floats), solved by attncli."""
    text = json.dumps(fields, default=lambda array: array.tolist())
    return pipeline.solve(pipeline.load(text=text, name="torch.yaml"))


def tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float64))


def refused(call: Callable[[], object]) -> str:
    """Why `call` was refused: the reason an AttnError carries."""
    with pytest.raises(AttnError) as caught:
        call()
    return str(caught.value.params.get("reason", caught.value.key))


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(count)]


@pytest.mark.parametrize(("queries", "keys"), [(1, 4), (2, 5), (3, 3)])
def test_lower_right_causal(queries: int, keys: int) -> None:
    """`mask: causal_lower_right` is the mask of torch's causal_lower_right, and so are the outputs."""
    rng = np.random.default_rng(queries * 10 + keys)
    q, k, v = rng.normal(size=(queries, 3)), rng.normal(size=(keys, 3)), rng.normal(size=(keys, 2))
    steps = solve({
        "tokens": names("k", keys), "query_tokens": names("q", queries),
        "queries": q, "keys": k, "values": v, "mask": "causal_lower_right",
    })  # fmt: skip
    bias = causal_lower_right(queries, keys)
    assert steps.problem.mask.tolist() == bias._materialize().tolist()
    want = F.scaled_dot_product_attention(tensor(q), tensor(k), tensor(v), attn_mask=bias).numpy()
    assert np.abs(steps.output - want).max() <= TOLERANCE


@pytest.mark.parametrize(("queries", "keys", "block_rows"), [(1, 6, None), (3, 7, 2), (5, 5, 2), (6, 3, None)])
def test_kernel_lower_right(queries: int, keys: int, block_rows: int | None) -> None:
    """attention(causal="lower_right") is SDPA with causal_lower_right, whatever the blocks; True is is_causal."""
    rng = np.random.default_rng(queries + 100 * keys)
    q, k, v = rng.normal(size=(2, queries, 4)), rng.normal(size=(2, keys, 4)), rng.normal(size=(2, keys, 3))
    if queries <= keys:
        got = pipeline.attention(q, k, v, causal="lower_right", block_rows=block_rows)
        bias = causal_lower_right(queries, keys)
        want = F.scaled_dot_product_attention(tensor(q), tensor(k), tensor(v), attn_mask=bias).numpy()
        assert np.abs(got - want).max() <= TOLERANCE
    else:  # the first L − S rows have no key: torch gives NaN, attncli an error
        assert "row 0 has no key" in refused(lambda: pipeline.attention(q, k, v, causal="lower_right"))
    if queries <= keys:
        upper = F.scaled_dot_product_attention(tensor(q), tensor(k), tensor(v), is_causal=True).numpy()
        for causal in (True, "upper_left"):
            assert np.abs(pipeline.attention(q, k, v, causal=causal, block_rows=block_rows) - upper).max() <= TOLERANCE


@pytest.mark.parametrize(("heads", "groups"), [(4, 2), (6, 3), (4, 1), (3, 3)])
def test_kernel_grouped_query(heads: int, groups: int) -> None:
    """attention(enable_gqa=True) is SDPA's enable_gqa=True, with a mask over (H, L, S) and the weights too."""
    rng = np.random.default_rng(heads * 10 + groups)
    q = rng.normal(size=(2, heads, 3, 4))
    k, v = rng.normal(size=(2, groups, 5, 4)), rng.normal(size=(2, groups, 5, 2))
    mask = rng.random(size=(heads, 3, 5)) < 0.7
    mask[..., 0] = True
    got, weights = pipeline.attention(q, k, v, mask=mask, enable_gqa=True, return_weights=True, block_rows=2)
    tq, tk, tv = tensor(q), tensor(k), tensor(v)
    want = F.scaled_dot_product_attention(tq, tk, tv, attn_mask=torch.from_numpy(mask), enable_gqa=True).numpy()
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= TOLERANCE
    # the weights, from torch's own repeat_interleave of K (as its documentation writes enable_gqa)
    keys = tk.repeat_interleave(heads // groups, dim=-3)
    scores = (tq @ keys.transpose(-2, -1)) / 2.0 + torch.where(torch.from_numpy(mask), 0.0, -torch.inf)
    assert np.abs(weights - torch.softmax(scores, dim=-1).numpy()).max() <= TOLERANCE


def test_kernel_grouped_query_refused() -> None:
    """H = 4 query heads cannot share G = 3 key/value heads."""
    q, k = np.ones((4, 2, 2)), np.ones((3, 2, 2))
    assert "a multiple of them" in refused(lambda: pipeline.attention(q, k, k, enable_gqa=True))
    assert "causal must be" in refused(lambda: pipeline.attention(q, q, q, causal="lower-right"))


def test_kv_heads_file() -> None:
    """`kv_heads:` with projections: six query heads over two kv heads, as SDPA's enable_gqa=True."""
    rng = np.random.default_rng(7)
    x, tokens = rng.normal(size=(4, 3)), names("t", 4)
    w_q, w_k, w_v = rng.normal(size=(6, 3, 2)), rng.normal(size=(2, 3, 2)), rng.normal(size=(2, 3, 2))
    steps = solve({
        "tokens": tokens, "x": x, "mask": "causal",
        "heads": [{"w_q": w} for w in w_q],
        "kv_heads": [{"w_k": wk, "w_v": wv} for wk, wv in zip(w_k, w_v)],
    })  # fmt: skip
    assert [head.spec.kv_head for head in steps.heads] == [0, 0, 0, 1, 1, 1]
    q, k, v = (tensor(np.einsum("sd,hde->hse", x, w)) for w in (w_q, w_k, w_v))
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).numpy()  # (H, L, E_v)
    got = np.stack([head.output for head in steps.heads])
    assert np.abs(got - want).max() <= TOLERANCE


def test_additive_bias() -> None:
    """`bias:` a matrix is SDPA's float attn_mask, with a causal mask on top of it."""
    rng = np.random.default_rng(11)
    q, k, v, bias = rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 3))
    steps = solve({"queries": q, "keys": k, "values": v, "bias": bias, "mask": "causal"})
    causal = np.where(np.tril(np.ones((3, 3), dtype=bool)), 0.0, -np.inf)
    want = F.scaled_dot_product_attention(tensor(q), tensor(k), tensor(v), attn_mask=tensor(bias + causal)).numpy()
    assert np.abs(steps.output - want).max() <= TOLERANCE
    assert np.abs(pipeline.attention(q, k, v, mask=bias + causal) - want).max() <= TOLERANCE


@pytest.mark.parametrize("heads", [3, 8, 12])
def test_alibi_heads(heads: int) -> None:
    """H = 8 heads: slopes 1/2, 1/4, …, 1/256 (Press et al.); H = 3 and 12 the slopes of Press et al.'s code,
    and the bias −m_h·(i − j) under the causal mask, through SDPA."""
    rng = np.random.default_rng(12)
    q, k, v = (rng.normal(size=(heads, 4, 2)) for _ in range(3))
    steps = solve({
        "tokens": names("t", 4), "mask": "causal", "bias": "alibi",
        "heads": [{"queries": a, "keys": b, "values": c} for a, b, c in zip(q, k, v)],
    })  # fmt: skip
    if heads == 8:
        assert steps.problem.bias.slopes == tuple(1 / 2**h for h in range(1, 9))
    i, j = np.arange(4)[:, None], np.arange(4)[None, :]
    for slope, h, head in zip(press_get_slopes(heads), range(heads), steps.heads):
        alibi = np.where(j <= i, -(i - j) * slope, -np.inf)
        want = F.scaled_dot_product_attention(tensor(q[h]), tensor(k[h]), tensor(v[h]), attn_mask=tensor(alibi))
        assert np.abs(head.output - want.numpy()).max() <= TOLERANCE


def torch_rope_half(x: torch.Tensor, at: torch.Tensor, base: float) -> torch.Tensor:
    """Hugging Face's Llama in torch: inv_freq, emb = cat(freqs, freqs), x·cos + rotate_half(x)·sin."""
    d = x.shape[-1]
    inv_freq = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    emb = torch.cat([torch.outer(at, inv_freq)] * 2, dim=-1)
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * emb.cos() + torch.cat((-x2, x1), dim=-1) * emb.sin()


def torch_rope_interleaved(x: torch.Tensor, at: torch.Tensor, base: float) -> torch.Tensor:
    """Meta's original Llama / RoFormer: pairs (2i, 2i + 1) as complex numbers times torch.polar(1, m·θ_i)."""
    d = x.shape[-1]
    theta = 1.0 / base ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    cis = torch.polar(torch.ones(len(at), d // 2, dtype=torch.float64), torch.outer(at, theta))
    z = torch.view_as_complex(x.reshape(*x.shape[:-1], d // 2, 2).contiguous())
    return torch.view_as_real(z * cis).flatten(-2)


@pytest.mark.parametrize(("style", "rope"), [("half", torch_rope_half), ("interleaved", torch_rope_interleaved)])
def test_rope_with_grouped_heads_and_the_causal_mask(style: str, rope: Callable) -> None:
    """RoPE (both conventions) on four query heads sharing two kv heads, causal: SDPA on torch's turned q and k."""
    rng = np.random.default_rng(13)
    q, k, v = rng.normal(size=(4, 5, 6)), rng.normal(size=(2, 5, 6)), rng.normal(size=(2, 5, 3))
    at = np.array([0.0, 1, 2, 5, 9])
    steps = solve({
        "tokens": names("t", 5), "mask": "causal", "position_ids": at,
        "positions": {"type": "rope", "base": 500, "style": style},
        "kv_heads": [{"keys": a, "values": b} for a, b in zip(k, v)],
        "heads": [{"queries": a} for a in q],
    })  # fmt: skip
    q_rot, k_rot = rope(tensor(q), tensor(at), 500.0), rope(tensor(k), tensor(at), 500.0)
    want = F.scaled_dot_product_attention(q_rot, k_rot, tensor(v), is_causal=True, enable_gqa=True).numpy()
    got = np.stack([head.output for head in steps.heads])
    assert np.abs(got - want).max() <= TOLERANCE
    turned = np.stack([head.rotation.keys for head in steps.heads[::2]])
    assert np.abs(turned - k_rot.numpy()).max() <= TOLERANCE
