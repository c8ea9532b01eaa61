"""Students of stacked layers: a careful one, and the slips of a stack, each written as an answers file for `check`.

A student reads the sheet (the matrices, through attncli.pipeline.load), then works in plain numpy,
layer after layer, keeping every number to `CARRY` decimals as a careful student does: the
normalised input, Q, K, V, the dot products (unmasked), the scores (masked: `masked`), the
weights, the output, W_O, and the stream passed on, which the next layer reads as written.
A slip changes one layer's stream; the layers after it are then worked from that wrong stream.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attncli import pipeline
from attncli.problem import Layer, Stack

CARRY = 4
Slip = Callable[[np.ndarray, np.ndarray, Layer], np.ndarray]  # (stream read, attention output, layer) -> passed on


def kept(matrix: np.ndarray) -> np.ndarray:
    return np.round(matrix, CARRY)


def norm_of(rows: np.ndarray, kind: str, eps: float) -> np.ndarray:
    """LayerNorm or RMSNorm of each row, without gain or bias, written out as the student does."""
    centred = rows - rows.mean(axis=1, keepdims=True) if kind == "layer" else rows
    return centred / np.sqrt((centred**2).mean(axis=1, keepdims=True) + eps)


OTHER_NORM = {"layer": "rms", "rms": "layer"}
NORM_SLIPS = ("layernorm_unbiased", "norm_swapped", "norm_affine_forgotten")  # the norm's own slips


def worked_norm(rows: np.ndarray, layer: Layer, slip: str | None, every: bool) -> tuple[dict, np.ndarray]:
    """The layer's norm of `rows` kept to CARRY decimals, and (`every`) its mean and root written down first and
    divided by as written; under `slip` the variance over d − 1 or the other norm."""
    norm = layer.norm
    assert norm is not None
    kind = OTHER_NORM[norm.kind] if slip == "norm_swapped" else norm.kind
    gain = 1.0 if norm.gain is None or slip == "norm_affine_forgotten" else norm.gain
    shift = 0.0 if norm.shift is None or kind != "layer" else norm.shift  # norm_affine_forgotten: the gain left out
    if not every and slip is None:
        return {}, kept(norm_of(rows, kind, norm.eps) * gain + shift)
    parts = {}
    centred = rows
    if kind == "layer":
        parts["mean"] = kept(rows.mean(axis=1, keepdims=True)) if every else rows.mean(axis=1, keepdims=True)
        centred = rows - parts["mean"]
    count = rows.shape[1] - (slip == "layernorm_unbiased")
    root = np.sqrt((centred**2).sum(axis=1, keepdims=True) / count + norm.eps)
    parts["root"] = kept(root) if every else root
    written = {name: parts[name] for name in ("mean", "root") if name in parts and (name, norm.kind) != ("mean", "rms")}
    return (written if every else {}), kept(centred / parts["root"] * gain + shift)  # an RMSNorm layer asks no mean


def attend(layer: Layer, x: np.ndarray) -> dict:
    """One layer's attention from the stream x, every step kept to CARRY decimals: the answers of that layer."""
    problem = layer.attention
    allowed = problem.mask
    heads = []
    for head in problem.heads:
        q, k, v = (kept(x @ operand.w) for operand in (head.queries, head.keys, head.values))
        dot = kept(q @ k.T)
        scores = kept(dot * head.score.scale)
        shifted = np.where(allowed, scores, -np.inf)
        e = np.exp(shifted - shifted.max(axis=1, keepdims=True))
        weights = kept(e / e.sum(axis=1, keepdims=True))
        output = kept(weights @ v)
        heads.append({"queries": q, "keys": k, "values": v, "dot": dot, "scores": scores, "weights": weights,
                      "output": output})  # fmt: skip
    if len(heads) == 1 and problem.w_o is None:
        return {"heads": heads, "z": heads[0]["output"]}
    concat = np.concatenate([head["output"] for head in heads], axis=1)
    final = kept(concat @ problem.w_o) if problem.w_o is not None else concat
    return {"heads": heads, "concat": concat, "final": final, "z": final}


def right(stream: np.ndarray, z: np.ndarray, layer: Layer) -> np.ndarray:
    """X + Attn, normalised after the sum when the norm is placed post."""
    norm = layer.norm
    total = stream + z
    return norm_of(total, norm.kind, norm.eps) if norm is not None and norm.place == "post" else total


def residual_forgotten(stream: np.ndarray, z: np.ndarray, layer: Layer) -> np.ndarray:
    """The attention output alone passed on (normalised when the norm is placed post)."""
    norm = layer.norm
    return norm_of(z, norm.kind, norm.eps) if norm is not None and norm.place == "post" else z


@dataclass(frozen=True)
class Work:
    """A student's file: the answers of every layer, and where they slipped (None: careful)."""

    layers: list[dict]
    slip: str | None
    at: int | None  # the layer of the slip, counting from 0
    every: bool = False  # the norm's mean and root written down


def work(stack: Stack, slip: str | None = None, at: int | None = None, every: bool = False) -> Work:
    """Every layer's answers; `slip` at layer `at`: residual_forgotten, norm_misplaced (pre worked as post), or one
    of the norm's own (NORM_SLIPS); with `every`, each norm's mean and root written down too."""
    stream = stack.x
    out = []
    for index, layer in enumerate(stack.layers):
        norm = layer.norm
        place = None if norm is None else norm.place
        if slip == "norm_misplaced" and index == at:
            place = "post" if place == "pre" else "pre"
        own = slip if index == at and slip in NORM_SLIPS else None
        answers: dict = {}
        fed = stream
        if place == "pre":
            parts, fed = worked_norm(stream, layer, own, every and norm.place == "pre")
            if norm.place == "pre":
                answers |= parts | {"normed": fed}
        steps = attend(layer, fed)
        total = stream + steps["z"]
        if slip == "residual_forgotten" and index == at:
            total = steps["z"]
        passed = kept(total)
        if place == "post":
            parts, passed = worked_norm(kept(total), layer, own, every and norm.place == "post")
        if norm is not None and norm.place == "post" and place == "post":
            answers["residual"] = kept(total)
            answers |= parts
        answers |= {"steps": steps, "stream": passed}
        out.append(answers)
        stream = passed
    return Work(out, slip, at, every)


def text(value: float, masked: bool = False) -> str:
    if masked:
        return "masked"
    return f"{value:.{CARRY}f}" if math.isfinite(value) else "masked"


def block(
    name: str, rows: tuple[str, ...], matrix: np.ndarray, indent: int, allowed: np.ndarray | None = None
) -> list[str]:
    pad = " " * indent
    lines = [f"{pad}{name}:"]
    for i, token in enumerate(rows):
        cells = [text(float(v), allowed is not None and not allowed[i, j]) for j, v in enumerate(matrix[i])]
        lines.append(f"{pad}  {token}: [{', '.join(cells)}]")
    return lines


def answers_yaml(stack: Stack, student: Work) -> str:
    """The student's answers file, `answers: layers:` as attncli template writes it (dot unmasked)."""
    lines = ["answers:", "  layers:"]
    tokens = stack.tokens
    for layer, answers in zip(stack.layers, student.layers):
        mask = layer.attention.mask
        body = [line for name in ("mean", "root") if "normed" in answers and name in answers
                for line in block(name, tokens, answers[name], 6)]  # fmt: skip
        body += block("normed", tokens, answers["normed"], 6) if "normed" in answers else []
        heads = answers["steps"]["heads"]
        several = "concat" in answers["steps"]
        indent = 10 if several else 6
        head_lines = []
        for head in heads:
            one = []
            for step in ("queries", "keys", "values", "dot", "scores", "weights", "output"):
                one += block(step, tokens, head[step], indent, mask if step in ("scores", "weights") else None)
            head_lines.append(one)
        if several:
            body.append("      heads:")
            for one in head_lines:
                body += [f"        - {one[0].lstrip()}", *one[1:]]
            body += block("concat", tokens, answers["steps"]["concat"], 6)
            body += block("final", tokens, answers["steps"]["final"], 6)
        else:
            body += head_lines[0]
        if "residual" in answers:
            body += block("residual", tokens, answers["residual"], 6)
            body += [
                line for name in ("mean", "root") if name in answers for line in block(name, tokens, answers[name], 6)
            ]
        body += block("stream", tokens, answers["stream"], 6)
        lines += [f"    - {body[0].lstrip()}", *body[1:]]
    return "\n".join(lines) + "\n"


def students(key: str) -> list[tuple[str, Work, str]]:
    """(name, work, answers file text) for a careful student and each slip at each layer but the last but one."""
    stack = pipeline.load(key)
    assert isinstance(stack, Stack)
    cases = [("careful", work(stack)), ("careful-every", work(stack, every=True))]
    for at in range(len(stack.layers)):
        cases.append((f"residual_forgotten@{at}", work(stack, "residual_forgotten", at)))
        norm = stack.layers[at].norm
        if norm is not None:
            cases.append((f"norm_misplaced@{at}", work(stack, "norm_misplaced", at)))
            learned = norm.gain is not None
            for slip in NORM_SLIPS[norm.kind != "layer" : 3 if learned else 2]:  # RMSNorm: no mean, no unbiased
                cases += [(f"{slip}@{at}{'-every' * every}", work(stack, slip, at, every)) for every in (False, True)]
    return [(name, done, answers_yaml(stack, done)) for name, done in cases]
