"""The score function of one head: its kind, its scale and the learned matrices some kinds need."""

from __future__ import annotations

import math

import numpy as np

from attncli.parsing.fields import FieldReader
from attncli.problem import SCORE_KINDS, Score
from attncli.yamldoc import FieldPath, did_you_mean, kind_of

DEFAULT = "scaled_dot"
SAME_WIDTH = ("scaled_dot", "dot", "cosine")  # q and k meet in a dot product, so d_q = d_k
LEARNED = {"general": ("w",), "additive": ("w_query", "w_key", "v")}  # the fields each kind needs


def read(
    reader: FieldReader,
    spec: tuple[FieldPath, object] | None,
    top_scale: tuple[FieldPath, object] | None,
    d_q: int,
    d_k: int,
    keys_path: FieldPath,
) -> Score:
    """The score `spec` (a kind, or `{type: ..., scale: ...}`; scaled_dot when None) for queries d_q and keys d_k wide.

    `top_scale`, the top-level `scale:` or `--scale`, overrides every head's own scale.
    """
    path, fields = _fields(reader, *(spec or (("score",), DEFAULT)))
    kind = fields.get("type", DEFAULT)
    if not isinstance(kind, str):
        raise reader.error((*path, "type"), "problem.bad_score", got=kind_of(kind), kinds=", ".join(SCORE_KINDS))
    if kind not in SCORE_KINDS:
        hint = did_you_mean(kind, SCORE_KINDS)
        raise reader.error((*path, "type"), "problem.unknown_score", name=kind, kinds=", ".join(SCORE_KINDS), hint=hint)
    reader.check_fields(fields, path, ("type", "scale", *LEARNED.get(kind, ())))
    scale = _scale(reader, path, fields, top_scale, 1 / math.sqrt(d_k) if kind == "scaled_dot" else 1.0)
    if kind in SAME_WIDTH and d_q != d_k:
        raise reader.error(keys_path, "problem.dk_mismatch", d_q=d_q, d_k=d_k, kind=kind)
    if kind == "general":
        w = _learned(reader, path, fields, "w")
        _check_shape(reader, (*path, "w"), w, (d_q, d_k))
        return Score(kind, scale, w=w)
    if kind == "additive":
        w_query, w_key = _learned(reader, path, fields, "w_query"), _learned(reader, path, fields, "w_key")
        v = reader.vector((*path, "v"), _required(reader, path, fields, "v"))
        d_a = v.shape[0]
        _check_shape(reader, (*path, "w_query"), w_query, (d_q, d_a))
        _check_shape(reader, (*path, "w_key"), w_key, (d_k, d_a))
        return Score(kind, scale, w_query=w_query, w_key=w_key, v=v)
    return Score(kind, scale)


def _fields(reader: FieldReader, path: FieldPath, spec: object) -> tuple[FieldPath, dict]:
    """`score: dot` and `score: {type: dot}` alike, as a mapping."""
    if isinstance(spec, str):
        return path, {"type": spec}
    if not isinstance(spec, dict):
        raise reader.error(path, "problem.bad_score", got=kind_of(spec), kinds=", ".join(SCORE_KINDS))
    return path, spec


def _scale(
    reader: FieldReader, path: FieldPath, fields: dict, top_scale: tuple[FieldPath, object] | None, default: float
) -> float:
    """The top-level scale, else the score's own `scale:`, else the kind's default (1/√d_k for scaled_dot)."""
    if top_scale is not None:
        return reader.number(*top_scale)
    if "scale" in fields:
        return reader.number((*path, "scale"), fields["scale"])
    return default


def _learned(reader: FieldReader, path: FieldPath, fields: dict, name: str) -> np.ndarray:
    """The learned matrix `name` of the score at `path`."""
    return reader.matrix((*path, name), _required(reader, path, fields, name))


def _check_shape(reader: FieldReader, path: FieldPath, w: np.ndarray, shape: tuple[int, int]) -> None:
    if w.shape != shape:
        raise reader.error(path, "problem.shape", shape=_shape(w.shape), expected=_shape(shape))


def _required(reader: FieldReader, path: FieldPath, fields: dict, name: str) -> object:
    if name not in fields:
        raise reader.error(path, "problem.score_field_missing", name=name, kind=fields.get("type"))
    return fields[name]


def _shape(shape: tuple[int, ...]) -> str:
    return "×".join(str(n) for n in shape)
