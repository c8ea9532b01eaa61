"""The backward pass in the machine formats: JSON's top-level "backward" object and npz's `backward/...` arrays.

One nested record (`fields`) holds every gradient under its JSON name, a key only where it applies;
JSON writes it with full precision (round-trip repr, as every number attncli writes) and npz flattens
its paths: `backward/heads/0/grad_scores`. See README, "The backward pass".
"""

from __future__ import annotations

import numpy as np

from attncli.backward import Gradients, KvGradients, LayerGradients, StackGradients

HEAD_KEYS = (
    "grad_output", "grad_values", "grad_weights", "row_term", "grad_scores", "grad_dot", "grad_queries", "grad_keys",
    "grad_turned_queries", "grad_turned_keys", "grad_w_q", "grad_w_k", "grad_w_v", "grad_bias",
)  # fmt: skip
TOP_KEYS = ("grad_w_o", "grad_concat", "grad_x", "grad_x_query", "grad_bias")
Tree = dict[str, object]  # arrays, numbers, None, lists of trees and trees, by JSON name


def fields(record: Gradients | StackGradients, layer: int | None = None) -> Tree:
    """The record by JSON name: loss, grad_output, then the gradients that apply, heads, kv heads or layers.

    A stack's `layer` (counted from 1) alone, as `--layer N` shows the forward steps: `layers` holds that layer,
    `grad_output` is the gradient of the stream it leaves and `grad_x` that of the stream it reads (the loss is
    the stack's).
    """
    if isinstance(record, StackGradients) and layer is not None:
        chosen = record.layers[layer - 1]
        record = record._replace(grad_output=chosen.grad_output, layers=(chosen,))
    tree: Tree = {"loss": record.loss, "grad_output": record.grad_output}
    if isinstance(record, StackGradients):
        tree["grad_x"] = record.grad_x
        tree["layers"] = [_layer(layer) for layer in record.layers]
        return tree
    tree |= {key: getattr(record, key) for key in TOP_KEYS if getattr(record, key) is not None}
    tree |= dict(record.shared)  # grad_keys, grad_w_q, ...: summed over the heads that read one top-level field
    tree["heads"] = [{key: getattr(head, key) for key in HEAD_KEYS if getattr(head, key) is not None}
                     for head in record.heads]  # fmt: skip
    if record.kv_heads:
        tree["kv_heads"] = [_kv_head(kv) for kv in record.kv_heads]
    return tree


def _kv_head(kv: KvGradients) -> Tree:
    named = {"grad_keys": kv.grad_keys, "grad_values": kv.grad_values, "grad_w_k": kv.grad_w_k, "grad_w_v": kv.grad_w_v}
    return {key: value for key, value in named.items() if value is not None}


def _layer(layer: LayerGradients) -> Tree:
    """One layer: the stream's gradient into it, through its norm, and its attention's own object."""
    tree: Tree = {"grad_input": layer.grad_input}
    if layer.grad_normed is not None:
        tree["grad_normed"] = layer.grad_normed
    if layer.grad_residual is not None:
        tree["grad_residual"] = layer.grad_residual
    if layer.grad_gain is not None or layer.grad_shift is not None:
        tree["grad_norm"] = {"gain": layer.grad_gain, "bias": layer.grad_shift}
    tree["attention"] = fields(layer.attention)
    return tree


def json_ready(tree: object) -> object:
    """`tree` with arrays as nested lists of floats (their repr round-trips) and numbers as floats."""
    if isinstance(tree, dict):
        return {key: json_ready(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [json_ready(value) for value in tree]
    if isinstance(tree, np.ndarray):
        return tree.tolist()
    return None if tree is None else float(tree)


def npz_arrays(record: Gradients) -> dict[str, np.ndarray]:
    """Every gradient by its JSON path under `backward/` (`backward/heads/0/grad_scores`); the loss if there is one."""
    out: dict[str, np.ndarray] = {}

    def walk(tree: object, path: str) -> None:
        if isinstance(tree, dict):
            for key, value in tree.items():
                walk(value, f"{path}/{key}")
        elif isinstance(tree, list):
            for index, value in enumerate(tree):
                walk(value, f"{path}/{index}")
        elif tree is not None:
            out[path] = np.asarray(tree)

    walk(fields(record), "backward")
    return out
