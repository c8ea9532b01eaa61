"""Problems whose backward pass tests/test_backward.py (central differences) and tests/test_backward_torch.py
(PyTorch's autograd) check, and where each input's gradient sits in attncli's record.

Each case is a problem file's fields with random numbers; `inputs` lists the numeric fields a
gradient is taken of (dotted paths: `heads.1.w_q`, `layers.0.norm.gain`), and `recorded` reads the
gradient attncli gives for one of them, wherever the record keeps it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np

from attncli import pipeline
from attncli.backward import Gradients, StackGradients

NUMERIC = ("x", "x_query", "queries", "keys", "values", "w_q", "w_k", "w_v", "w_o", "bias", "scores", "gain")


def names(prefix: str, count: int) -> list[str]:
    return [f"{prefix}{i + 1}" for i in range(count)]


def _cases() -> dict[str, dict]:
    rng = np.random.default_rng(2023)

    def n(*shape: int) -> np.ndarray:
        return rng.normal(size=shape)

    def w(*shape: int) -> np.ndarray:
        """A projection small enough that softmax is not saturated: a weight near 1 leaves dS a difference
        of nearly equal numbers, which no order of operations rounds to 1e-12 of itself."""
        return rng.normal(size=shape) / shape[0]

    t3, t4, t5 = names("t", 3), names("t", 4), names("t", 5)
    return {
        "one_head": {"tokens": t3, "queries": n(3, 2), "keys": n(3, 2), "values": n(3, 2)},
        "heads_w_o": {
            "tokens": t4, "w_o": n(5, 3),
            "heads": [{"queries": n(4, 2), "keys": n(4, 2), "values": n(4, 3)},
                      {"queries": n(4, 3), "keys": n(4, 3), "values": n(4, 2)}],
        },
        "self_projections": {  # two of the tokens ask; W_K and W_V shared from the top level
            "tokens": t4, "query_tokens": ["t2", "t4"], "x": n(4, 3), "w_k": n(3, 2), "w_v": n(3, 2),
            "heads": [{"w_q": n(3, 2)}, {"w_q": n(3, 2)}], "w_o": n(4, 3),
        },
        "cross_projections": {
            "tokens": t4, "query_tokens": names("q", 3), "x": n(4, 3), "x_query": n(3, 2),
            "w_q": n(2, 2), "w_k": n(3, 2), "w_v": n(3, 3),
        },
        "shared_queries": {  # one top-level W_Q read by both heads; a head's own keys beside top-level ones
            "tokens": t3, "x": n(3, 2), "w_q": n(2, 2), "w_k": n(2, 2), "values": n(3, 2),
            "heads": [{}, {"keys": n(3, 2)}],
        },
        "causal": {"tokens": t5, "x": n(5, 3), "w_q": n(3, 2), "w_k": n(3, 2), "w_v": n(3, 2), "mask": "causal"},
        "causal_lower_right": {
            "tokens": t5, "query_tokens": names("q", 2), "queries": n(2, 3), "keys": n(5, 3), "values": n(5, 2),
            "mask": "causal_lower_right",
        },
        "mask_matrix": {
            "tokens": t4, "queries": n(4, 2), "keys": n(4, 2), "values": n(4, 2),
            "mask": [[1, 0, 1, 0], [0, 1, 1, 0], [1, 1, 1, 1], [0, 0, 0, 1]],
        },
        "padding_window": {
            "tokens": t5, "queries": n(5, 2), "keys": n(5, 2), "values": n(5, 2), "padding": ["t2"], "window": 2,
        },
        "bias_two_heads": {
            "tokens": t4, "bias": n(4, 4), "mask": "causal", "w_o": n(4, 2),
            "heads": [{"queries": n(4, 2), "keys": n(4, 2), "values": n(4, 2)},
                      {"queries": n(4, 2), "keys": n(4, 2), "values": n(4, 2)}],
        },
        "alibi": {
            "tokens": t4, "bias": "alibi", "mask": "causal", "x": n(4, 3), "w_v": n(3, 2),
            "heads": [{"w_q": n(3, 2), "w_k": n(3, 2)}, {"w_q": n(3, 2), "w_k": n(3, 2)}],
        },
        "rope_half": {
            "tokens": t4, "x": n(4, 3), "w_q": n(3, 4), "w_k": n(3, 4), "w_v": n(3, 2),
            "positions": {"type": "rope", "base": 100, "style": "half"}, "position_ids": [0, 1, 3, 7],
        },
        "rope_interleaved_gqa": {
            "tokens": t4, "mask": "causal", "positions": {"type": "rope", "base": 50, "style": "interleaved"},
            "kv_heads": [{"keys": n(4, 4), "values": n(4, 2)}],
            "heads": [{"queries": n(4, 4)}, {"queries": n(4, 4)}],
        },
        "gqa_projections": {
            "tokens": t4, "x": n(4, 3), "w_o": n(8, 3),
            "kv_heads": [{"w_k": n(3, 2), "w_v": n(3, 2)}, {"w_k": n(3, 2), "w_v": n(3, 2)}],
            "heads": [{"w_q": n(3, 2)} for _ in range(4)],
        },
        "dot_and_scale": {
            "tokens": t3, "score": "dot", "queries": n(3, 2), "keys": n(3, 2), "values": n(3, 2),
            "heads": [{}, {"score": {"type": "scaled_dot", "scale": 0.3}}],
        },
        "given_scores": {"tokens": t3, "scores": n(3, 3), "values": n(3, 2), "mask": "causal"},
        "loss_sum": {"tokens": t3, "queries": n(3, 2), "keys": n(3, 2), "values": n(3, 2),
                     "backward": {"loss": "sum"}},
        "loss_target": {"tokens": t3, "x": n(3, 2), "w_q": n(2, 2), "w_k": n(2, 2), "w_v": n(2, 2),
                        "backward": {"loss": {"target": n(3, 2)}}},
        **{
            f"stack_{kind}_{place}": {
                "tokens": t3, "x": n(3, 4),
                "layers": [
                    {"w_q": w(4, 2), "w_k": w(4, 2), "w_v": w(4, 4), "mask": "causal",
                     "norm": {"type": kind, "place": place, "eps": 1e-3, **extra}},
                    {"heads": [{"w_q": w(4, 2), "w_k": w(4, 2), "w_v": w(4, 2)},
                               {"w_q": w(4, 2), "w_k": w(4, 2), "w_v": w(4, 2)}],
                     "norm": {"type": kind, "place": place, **extra}},
                ],
                "backward": {"loss": {"target": n(3, 4)}},
            }
            for kind, place, extra in (
                ("layer", "pre", {"gain": n(4).tolist(), "bias": n(4).tolist()}),
                ("layer", "post", {}),
                ("rms", "pre", {}),
                ("rms", "post", {"gain": n(4).tolist()}),
            )
        },
    }  # fmt: skip


CASES = _cases()


def with_grad_output(fields: dict, seed: int = 0) -> dict:
    """The case itself when it names its loss, else with a random dO the shape of its output."""
    if "backward" in fields:
        return fields
    steps = pipeline.solve(load(fields))
    grad = np.random.default_rng(seed).normal(size=steps.output.shape)
    return {**fields, "backward": {"grad_output": grad}}


def load(fields: dict) -> pipeline.Problem:
    """The problem `fields` (arrays written as nested lists of exact floats)."""
    return pipeline.load(text=json.dumps(fields, default=lambda array: array.tolist()), name="case.yaml")


def solve(fields: dict) -> pipeline.Steps:
    return pipeline.solve(load(fields))


def loss(fields: dict) -> float:
    """The loss whose gradients the record holds: the one named, else Σ dO ∘ O for the given dO."""
    steps = solve({key: value for key, value in fields.items() if key != "backward"})
    asked = fields["backward"]
    if "grad_output" in asked:
        return float((np.asarray(asked["grad_output"]) * steps.output).sum())
    if asked["loss"] == "sum":
        return float(steps.output.sum())
    return float(0.5 * ((steps.output - np.asarray(asked["loss"]["target"])) ** 2).sum())


def inputs(fields: dict, prefix: tuple = ()) -> Iterator[tuple[tuple, np.ndarray]]:
    """Every numeric input of the problem: its path in `fields` and its numbers."""
    for key, value in fields.items():
        if key in ("backward", "position_ids"):
            continue
        path = (*prefix, key)
        if isinstance(value, dict):
            yield from inputs(value, path)
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for index, item in enumerate(value):
                yield from inputs(item, (*path, index))
        elif (key in NUMERIC and not isinstance(value, str)) or (key == "bias" and prefix[-1:] == ("norm",)):
            yield path, np.asarray(value, dtype=float)


def get(fields: dict, path: tuple) -> object:
    for key in path:
        fields = fields[key]
    return fields


def replaced(fields: dict, path: tuple, array: np.ndarray) -> dict:
    """`fields` with the input at `path` replaced by `array` (a deep copy along the path only)."""
    if len(path) == 1:
        return {**fields, path[0]: array}
    inner = fields[path[0]]
    if isinstance(inner, list):
        items = list(inner)
        items[path[1]] = replaced(items[path[1]], path[2:], array)
        return {**fields, path[0]: items}
    return {**fields, path[0]: replaced(inner, path[1:], array)}


def recorded(record: Gradients | StackGradients, fields: dict, path: tuple) -> np.ndarray:
    """The gradient attncli gives of the input at `path`."""
    if isinstance(record, StackGradients):
        if path == ("x",):
            return record.grad_x
        layer = record.layers[path[1]]
        if path[2:4] == ("norm", "gain"):
            return layer.grad_gain
        if path[2:4] == ("norm", "bias"):
            return layer.grad_shift
        return recorded(layer.attention, fields["layers"][path[1]], path[2:])
    name = path[-1]
    if path[0] == "heads":
        return getattr(record.heads[path[1]], "grad_scores" if name == "scores" else f"grad_{name}")
    if path[0] == "kv_heads":
        return getattr(record.kv_heads[path[1]], f"grad_{name}")
    top = {"x": record.grad_x, "x_query": record.grad_x_query, "w_o": record.grad_w_o, "bias": record.grad_bias}
    if name in top:
        return top[name]
    shared = dict(record.shared)
    if f"grad_{name}" in shared:
        return shared[f"grad_{name}"]
    pairs = {"queries": "w_q", "keys": "w_k", "values": "w_v", "scores": "queries"}
    rival = pairs.get(name) or {weight: given for given, weight in pairs.items()}[name]
    (reader,) = [h for h, head in enumerate(fields.get("heads", [{}])) if name not in head and rival not in head]
    return getattr(record.heads[reader], "grad_scores" if name == "scores" else f"grad_{name}")
