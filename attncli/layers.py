"""Layers stacked with residual connections, and attention rollout: pure numpy, every intermediate kept.

Shapes: S tokens, d the width of the residual stream, H heads in a layer. Layer l reads the
stream X_l and gives X_{l+1} = X_l + Attn(N(X_l)) with its norm placed `pre`, N(X_l + Attn(X_l))
placed `post`, X_l + Attn(X_l) without one; X_1 = x.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from attncli import core
from attncli.core import Steps
from attncli.errors import AttnError
from attncli.problem import Layer, Norm, Operand, Problem, Projection, Stack
from attncli.yamldoc import field_name

if TYPE_CHECKING:
    from attncli.backward import StackGradients


@dataclass(frozen=True)
class LayerSteps:
    """Every number one layer produces: the stream it reads, its attention, the residual sum."""

    layer: Layer
    input: np.ndarray  # (S, d) the residual stream reaching the layer
    normed: np.ndarray | None  # (S, d) N(input), what the attention reads with a norm placed pre
    attention: Steps  # the layer's attention, its projections multiplying `normed` or `input`
    residual: np.ndarray  # (S, d) input + attention.output
    output: np.ndarray  # (S, d) the residual sum, normalised when the norm is placed post


@dataclass(frozen=True)
class StackSteps:
    """The whole calculation of a stack: the record every output format renders for `layers:`."""

    stack: Stack
    layers: tuple[LayerSteps, ...]
    backward: StackGradients | None = None  # every gradient, when the stack asks for them (attncli.backward)

    @property
    def output(self) -> np.ndarray:
        """(S, d) the stream after the last layer."""
        return self.layers[-1].output


@np.errstate(over="ignore", invalid="ignore")
def compute(stack: Stack) -> StackSteps:
    """Every layer's steps, each fed the stream the one before it leaves; an AttnError names the layer's field."""
    done: list[LayerSteps] = []
    stream = stack.x  # (S, d)
    for index, layer in enumerate(stack.layers):
        try:
            done.append(through(layer, stream))
        except AttnError as error:
            error.where.field = f"{field_name(('layers', index))}.{error.where.field}"
            raise error.at(source=stack.source) from None
        stream = done[-1].output
    return StackSteps(stack, tuple(done))


def through(layer: Layer, stream: np.ndarray) -> LayerSteps:
    """Layer `layer` fed the residual stream `stream` (S, d): normalised, attended, added back."""
    norm = layer.norm
    normed = normalise(stream, norm) if norm is not None and norm.place == "pre" else None  # (S, d)
    attention = core.compute(feed(layer.attention, stream if normed is None else normed))
    residual = core._finite(stream + attention.output, "w_o")  # (S, d)
    output = normalise(residual, norm) if norm is not None and norm.place == "post" else residual  # (S, d)
    return LayerSteps(layer, stream, normed, attention, residual, output)


def feed(problem: Problem, x: np.ndarray) -> Problem:
    """`problem` with every projection multiplying `x` (S, d) instead of the inputs it was read with.

    Sinusoidal positions are added to `x` here, as a one-layer problem adds them to its own x: the
    projections read x + PE(m), the record keeps `x` and PE for display, and the residual stream,
    which the caller adds the attention to, stays as it was.
    """
    encoding = problem.positions
    queries_x = keys_x = x  # (S, d)
    if encoding is not None and encoding.kind == "sinusoidal":
        queries_x, keys_x = x + encoding.query_encoding, x + encoding.encoding  # (S, d), (S, d)
        encoding = encoding._replace(x=x, x_query=None if encoding.x_query is None else x)

    def fed(operand: Operand, inputs: np.ndarray) -> Operand:
        return Projection(inputs, operand.w) if isinstance(operand, Projection) else operand

    heads = tuple(
        head._replace(
            queries=None if head.queries is None else fed(head.queries, queries_x),  # None: the scores are given
            keys=None if head.keys is None else fed(head.keys, keys_x),
            values=fed(head.values, keys_x),
        )
        for head in problem.heads
    )
    return problem._replace(heads=heads, positions=encoding)


def normalise(rows: np.ndarray, norm: Norm) -> np.ndarray:
    """Each row (S, d) → (S, d) by LayerNorm, (x − mean)/√(var + eps), or RMSNorm, x/√(mean(x²) + eps).

    Then times the gain and plus the shift, when given. var is the biased variance (divided by d),
    as torch.nn.functional.layer_norm. Rows whose squares
    pass float's range are an error: dividing by an infinite root would silently give 0.
    """
    centred, root = norm_parts(rows, norm)  # (S, d), (S, 1)
    out = centred / root  # (S, d)
    if norm.gain is not None:
        out = out * norm.gain
    return core._finite(out + norm.shift if norm.shift is not None else out, "norm")


def norm_parts(rows: np.ndarray, norm: Norm) -> tuple[np.ndarray, np.ndarray]:
    """What a norm divides, and by what (S, d), (S, 1): x − mean and σ = √(var + eps) for LayerNorm, x and
    √(mean(x²) + eps) for RMSNorm. The backward pass (attncli.backward) reads them too."""
    centred = rows - rows.mean(axis=1, keepdims=True) if norm.kind == "layer" else rows  # (S, d)
    square = core._finite((centred * centred).mean(axis=1, keepdims=True), "norm")  # (S, 1) var or mean(x²)
    return centred, np.sqrt(square + norm.eps)


def mean_weights(steps: Steps) -> np.ndarray:
    """(S, S) the layer's attention weights averaged over its heads."""
    return np.mean([head.weights for head in steps.heads], axis=0)


def rollout(layers: Sequence[LayerSteps]) -> np.ndarray:
    """Abnar & Zuidema (2020)'s attention rollout (S, S): Ã_L···Ã_1, Ã = ½·mean_h(A) + ½·I, rows renormalised.

    A heuristic: it assumes the residual stream carries half of each token's identity forward
    and that heads mix linearly, which neither the values nor the norms honour.
    """
    out = np.eye(layers[0].input.shape[0])  # (S, S)
    for layer in layers:
        mixed = 0.5 * mean_weights(layer.attention) + 0.5 * np.eye(out.shape[0])  # (S, S)
        out = (mixed / mixed.sum(axis=1, keepdims=True)) @ out
    return out
