"""`layers:` attention layers stacked with residual connections, each read as a problem of its own.

The top level gives the tokens and the inputs `x` (S, d) that layer 1 reads; each layer gives
what a one-layer problem gives for its heads (w_q, w_k, w_v, heads, kv_heads, w_o, mask, bias,
score, scale) and an optional `norm:`. Every layer reads a residual stream d wide, so its
projections take d rows and its output must be d wide again, to be added to its input.
"""

from __future__ import annotations

import numpy as np

from attncli.parsing import backward, heads, masks, tiling
from attncli.parsing.fields import FieldReader
from attncli.parsing.heads import Inputs
from attncli.parsing.problem_file import TOP_FIELDS, Builder
from attncli.problem import NORM_KINDS, NORM_PLACES, Backward, Layer, Norm, Problem, Stack, width
from attncli.yamldoc import FieldPath, did_you_mean, kind_of

STACK_FIELDS = (
    "title", "notes", "tokens", "x", "layers", "exercise", "answers", "tolerance", "carry", "min_decimals", "require",
    "decimal_comma", "points", "student", "student_id", "backward", *backward.FIELDS, "tiles", "stable",
)  # fmt: skip
SHARED = ("tiles", "stable")  # how the softmax is written out: the top level's is every layer's, unless a layer says
GIVEN = ("queries", "keys", "values", "scores")  # fixed matrices: a layer computes them from its input instead
NOT_IN_LAYER = ("query_tokens", "x_query")  # a stack is self-attention over one sequence
LAYER_FIELDS = (
    "name", "norm", *(f for f in TOP_FIELDS if f in SHARED or f not in (*STACK_FIELDS, *GIVEN, *NOT_IN_LAYER)),
)  # fmt: skip
NORM_FIELDS = ("type", "place", "eps", "gain", "bias")
DEFAULT_EPS = 1e-5  # torch.nn.LayerNorm's and RMSNorm's usual eps
DEFAULT_PLACE = "pre"  # as in GPT-2 and Llama; `post` is the original Transformer's


def read(reader: FieldReader, data: dict) -> Stack:
    """The stack of `data`, whose `layers:` is given; every other top-level field belongs to a layer."""
    for name in data:
        if name not in STACK_FIELDS and name in (*TOP_FIELDS, *LAYER_FIELDS):
            raise reader.error((name,), "layers.field_in_layer", name=name)
    reader.check_fields(data, (), STACK_FIELDS)
    listed = data["layers"]
    if not (isinstance(listed, list) and listed and all(isinstance(layer, dict) for layer in listed)):
        raise reader.error(("layers",), "layers.bad_layers", got=kind_of(listed))
    if "x" not in data:
        raise reader.error(("layers",), "layers.no_x")
    heads.check_heads(reader, ("layers",), sum(_head_count(layer) for layer in listed))
    shared = {name: data[name] for name in SHARED if name in data}
    tiling.read(reader, shared, (), 0, 0)  # a bad value is refused where it is written, before any layer reads it
    tokens = _tokens(reader, data)
    x = reader.matrix(("x",), data["x"], tokens, "tokens")  # (S, d)
    layers: list[Layer] = []
    held = 0  # what the layers read so far will hold: the memory budget is the stack's, not each layer's
    for i, fields in enumerate(listed):
        layer, needed = _layer(reader.within(("layers", i)), shared | fields, tokens, x, i, held)
        layers.append(layer)
        held += needed
    asked = _backward(reader, data, tokens, x.shape[1], tuple(layers))
    return Stack(
        tokens=tokens,
        x=x,
        layers=tuple(layers),
        title=reader.optional_text(data, "title"),
        notes=reader.optional_text(data, "notes"),
        source=reader.document.name,
        backward=asked,
    )


def _backward(
    reader: FieldReader, data: dict, tokens: tuple[str, ...], d: int, layers: tuple[Layer, ...]
) -> Backward | None:
    """The gradients `backward:` asks for: dO a row per token of the last layer's stream, d wide."""
    labelled = [(f"{layer.label}, {head.label}", head.score) for layer in layers for head in layer.attention.heads]
    asked = backward.read(reader, data, ("tokens", tokens), d, labelled)
    if asked is not None:
        for layer in layers:
            problem = layer.attention
            scores = [head.score for head in problem.heads]
            backward.check_memory(reader, scores, len(tokens), len(tokens), problem.bias is not None)
    return asked


def _tokens(reader: FieldReader, data: dict) -> tuple[str, ...]:
    """`tokens:`, else the names of x written as a mapping, else t1..tS."""
    if "tokens" in data:
        return reader.text_list(("tokens",), data["tokens"])
    x = data["x"]
    if isinstance(x, dict) and "file" not in x:
        return reader.text_list(("x",), list(x))
    return tuple(f"t{i + 1}" for i in range(len(reader.matrix(("x",), x))))


class _Fed(Builder):
    """A layer's problem: the stack's tokens, self-attention, projections of the stack's x (S, d)."""

    def __init__(
        self, reader: FieldReader, data: dict, tokens: tuple[str, ...], x: np.ndarray, held: int, layers: int
    ) -> None:
        super().__init__(reader, data, held=held, layers=layers)
        self.fed = tokens, x

    def tokens(self) -> tuple[str, ...]:
        return self.fed[0]

    def query_tokens(self, tokens: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
        return tokens, False

    def inputs(self, positions: masks.Positions) -> Inputs:
        return Inputs(self.fed[1], self.fed[1], "x", tuple(range(len(self.fed[0]))))


def _head_count(layer: dict) -> int:
    """The query heads a layer's mapping lists (one without `heads:`), before it is read."""
    listed = layer.get("heads")
    return len(listed) if isinstance(listed, list) else 1


def _layer(
    reader: FieldReader, data: dict, tokens: tuple[str, ...], x: np.ndarray, index: int, held: int
) -> tuple[Layer, int]:
    """Layer `index` (read by `reader`, rooted at the layer), whose output must be as wide as x to be added to it,
    and the bytes its calculation holds, counted with the `held` of the layers before it against the budget."""
    _refuse_given(reader, data)
    reader.check_fields(data, (), LAYER_FIELDS)
    fed = _Fed(reader, data, tokens, x, held, index + 1)
    attention = fed.problem()
    _check_residual(reader, data, attention, x.shape[1])
    given = reader.optional_text(data, "name")
    name = given or f"layer {index + 1}"  # English in every language: JSON's
    return Layer(name, attention, _norm(reader, data, x.shape[1]), None if given else index + 1), fed.needed


def _refuse_given(reader: FieldReader, data: dict) -> None:
    """Queries, keys, values or scores given as numbers would ignore the layer's input: refused where written."""
    places: list[tuple[FieldPath, object]] = [((), data)]
    for listing in ("heads", "kv_heads"):
        if isinstance(data.get(listing), list):
            places += [((listing, i), head) for i, head in enumerate(data[listing])]
    for path, fields in places:
        name = next((name for name in GIVEN if isinstance(fields, dict) and name in fields), None)
        if name is not None:
            raise reader.error((*path, name), "layers.given_matrix", name=name)


def _check_residual(reader: FieldReader, data: dict, attention: Problem, d: int) -> None:
    """The layer's output (W_O's columns, else the heads' values side by side) must be d wide, as x."""
    out = attention.w_o.shape[1] if attention.w_o is not None else sum(width(head.values) for head in attention.heads)
    if out != d:
        if "w_o" in data:
            raise reader.error(("w_o",), "layers.residual_width", count=out, expected=d)
        raise reader.error((), "layers.residual_width_concat", count=out, expected=d)


def _norm(reader: FieldReader, data: dict, d: int) -> Norm | None:
    """`norm: layer`, or `norm: {type:, place:, eps:, gain:, bias:}`; None without one."""
    if "norm" not in data:
        return None
    fields = data["norm"]
    path: FieldPath
    if isinstance(fields, str):
        path, fields = ("norm",), {"type": fields}
    elif isinstance(fields, dict):
        path = ("norm", "type")
        reader.check_fields(fields, ("norm",), NORM_FIELDS)
    else:
        raise reader.error(("norm",), "layers.bad_norm", got=kind_of(fields))
    if "type" not in fields:
        raise reader.error(("norm",), "layers.norm_without_type", kinds=", ".join(NORM_KINDS))
    kind = _choice(reader, path, fields["type"], NORM_KINDS)
    place = _choice(reader, ("norm", "place"), fields.get("place", DEFAULT_PLACE), NORM_PLACES)
    eps = reader.number(("norm", "eps"), fields["eps"]) if "eps" in fields else DEFAULT_EPS
    if not eps > 0:
        raise reader.error(("norm", "eps"), "layers.bad_eps", got=kind_of(fields["eps"]))
    if kind == "rms" and "bias" in fields:
        raise reader.error(("norm", "bias"), "layers.rms_bias")
    gain, shift = (_norm_vector(reader, fields, name, d) for name in ("gain", "bias"))
    return Norm(kind, place, eps, gain, shift)


def _choice(reader: FieldReader, path: FieldPath, value: object, known: tuple[str, ...]) -> str:
    """`value` if it is one of the words `known`: a norm's type or place."""
    if not isinstance(value, str) or value not in known:
        hint = did_you_mean(value, known) if isinstance(value, str) else ""
        raise reader.error(path, "layers.unknown_norm", got=kind_of(value), known=", ".join(known), hint=hint)
    return value


def _norm_vector(reader: FieldReader, fields: dict, name: str, d: int) -> np.ndarray | None:
    """The norm's learned `gain` or `bias` (d,), None when not given."""
    if name not in fields:
        return None
    vector = reader.vector(("norm", name), fields[name])
    if vector.shape[0] != d:
        raise reader.error(("norm", name), "layers.norm_width", count=vector.shape[0], expected=d)
    return vector
