"""attncli against PyTorch, in float64 to 1e-12: the lower-right causal mask, grouped-query heads, additive biases.

PyTorch is a development tool only (never a dependency): without it these tests are skipped.
Each problem is written as YAML from random numbers and solved by attncli's every-step core;
PyTorch computes the same attention on its own.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from attncli import pipeline

torch = pytest.importorskip("torch")
F = torch.nn.functional
from torch.nn.attention.bias import causal_lower_right  # noqa: E402

TOLERANCE = 1e-12


def solve(fields: dict) -> pipeline.Steps:
    """The problem `fields` (numpy arrays become nested lists of exact floats), solved by attncli."""
    plain = {name: value.tolist() if isinstance(value, np.ndarray) else value for name, value in fields.items()}
    return pipeline.solve(pipeline.load(text=json.dumps(plain), name="torch.yaml"))


def tensor(array: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=np.float64))


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
