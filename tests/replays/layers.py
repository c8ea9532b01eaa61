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


def work(stack: Stack, slip: str | None = None, at: int | None = None, norm_moved: bool = False) -> Work:
    """Every layer's answers; `slip` at layer `at`: residual_forgotten, or norm_misplaced (pre worked as post)."""
    stream = stack.x
    out = []
    for index, layer in enumerate(stack.layers):
        norm = layer.norm
        place = None if norm is None else norm.place
        if slip == "norm_misplaced" and index == at:
            place = "post" if place == "pre" else "pre"
        answers: dict = {}
        fed = stream
        if place == "pre":
            fed = kept(norm_of(stream, norm.kind, norm.eps))
            if norm.place == "pre":
                answers["normed"] = fed
        steps = attend(layer, fed)
        total = stream + steps["z"]
        if slip == "residual_forgotten" and index == at:
            total = steps["z"]
        passed = kept(norm_of(total, norm.kind, norm.eps) if place == "post" else total)
        if norm is not None and norm.place == "post" and place == "post":
            answers["residual"] = kept(total)
        answers |= {"steps": steps, "stream": passed}
        out.append(answers)
        stream = passed
    return Work(out, slip, at)


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
        body = block("normed", tokens, answers["normed"], 6) if "normed" in answers else []
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
        body += block("stream", tokens, answers["stream"], 6)
        lines += [f"    - {body[0].lstrip()}", *body[1:]]
    return "\n".join(lines) + "\n"


def students(key: str) -> list[tuple[str, Work, str]]:
    """(name, work, answers file text) for a careful student and each slip at each layer but the last but one."""
    stack = pipeline.load(key)
    assert isinstance(stack, Stack)
    cases = [("careful", work(stack))]
    for at in range(len(stack.layers)):
        cases.append((f"residual_forgotten@{at}", work(stack, "residual_forgotten", at)))
        if stack.layers[at].norm is not None:
            cases.append((f"norm_misplaced@{at}", work(stack, "norm_misplaced", at)))
    return [(name, done, answers_yaml(stack, done)) for name, done in cases]
