"""JSON documents of compute, compare and scaling: the stable, full-precision contract for scripts (see README)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from attncli import __version__
from attncli.core import Steps
from attncli.errors import quoted_escapes
from attncli.problem import PositionEncoding
from attncli.steps import BY_NAME, HEAD_STEPS, SHARED_STEPS, each

if TYPE_CHECKING:
    from attncli.backward import Gradients, StackGradients
    from attncli.layers import LayerSteps, StackSteps
    from attncli.probes import Comparison, Intervention, Norms, Scaling


def dumps(document: object) -> str:
    """One JSON document on a line: UTF-8 as it is, numbers at full precision, and every control character of a
    text from a file or a student escaped (json.dumps leaves C1, DEL, the line separators and bidirectional
    controls raw), so that `cat` or a JSON viewer shows them inert."""
    return json.dumps(document, ensure_ascii=False, allow_nan=False).translate(quoted_escapes()) + "\n"


def render(steps: Steps, norms: Norms | None = None, interventions: Sequence[Intervention] = ()) -> str:
    """The document; "norms" and "interventions" only when they were asked for."""
    doc = document(steps)
    if norms is not None:
        doc["norms"] = {
            "heads": [{"transformed": h.transformed.tolist(), "weighted": h.weighted.tolist()} for h in norms.heads],
            "summed": norms.summed.tolist(),
        }
    if interventions:
        doc["interventions"] = [_intervention(record) for record in interventions]
    return dumps(doc)


def _intervention(record: Intervention) -> dict:
    """weights (and tv) per query as in heads[].weights: (L, S) for one head, one such matrix per head otherwise."""
    one = len(record.weights) == 1
    return {
        "kind": record.kind,
        "target": record.target,
        "weights": (record.weights[0] if one else record.weights).tolist(),
        "output": record.output.tolist(),
        "delta": record.delta.tolist(),
        "tv": (record.tv[0] if one else record.tv).tolist(),
    }


def document(steps: Steps) -> dict:
    problem = steps.problem
    doc: dict = {
        "attncli": __version__,
        "title": problem.title,
        "notes": problem.notes,
        "tokens": list(problem.tokens),
        "query_tokens": list(problem.query_tokens),
        "cross": problem.cross,
        "mask": problem.mask.tolist(),
        "mask_rule": {
            "kind": problem.mask_rule.kind,
            "window": problem.mask_rule.window,
            "padding": list(problem.mask_rule.padding),
        },
        "heads": [_head(steps, number) for number in range(len(steps.heads))],
    }
    if problem.bias is not None:  # added to every head's scaled scores: heads[].bias, and heads[].scores include it
        doc["bias"] = {"kind": problem.bias.kind, "slopes": list(problem.bias.slopes)}
        for head, record in zip(steps.heads, doc["heads"]):
            record["bias"] = _matrix(head.bias)
    if problem.positions is not None:  # where each query and key stands; RoPE's turned vectors per head
        doc["positions"] = _positions(problem.positions)
        for head, record in zip(steps.heads, doc["heads"]):
            if head.rotation is not None:
                record["rope"] = {
                    "frequencies": head.rotation.frequencies.tolist(),
                    "query_angles": head.rotation.query_angles.tolist(),
                    "key_angles": head.rotation.key_angles.tolist(),
                    "queries": head.rotation.queries.tolist(),
                    "keys": head.rotation.keys.tolist(),
                }
    if problem.kv_names:  # grouped-query attention: the shared key/value heads, and which each head reads
        doc["kv_heads"] = list(problem.kv_names)
        for head, record in zip(steps.heads, doc["heads"]):
            record["kv_head"] = head.spec.kv_head
    if problem.stable or problem.tiles is not None:  # heads[].logsumexp, and heads[].tiles per query
        from attncli.render import tiles

        for head, record in zip(steps.heads, doc["heads"]):
            record |= tiles.json_fields(head, problem.tokens)
    doc |= {step.field: found.tolist() for step, found in each(steps, SHARED_STEPS)}  # concat, and the final output
    if steps.backward is not None:
        doc["backward"] = _backward(steps.backward)
    return doc


def _backward(record: Gradients | StackGradients, layer: int | None = None) -> object:
    """The top-level "backward" object: every gradient, full precision (attncli.render.backward_doc); a stack's
    `layer` alone when given (see backward_doc.fields)."""
    from attncli.render import backward_doc

    return backward_doc.json_ready(backward_doc.fields(record, layer))


def stack_document(steps: StackSteps, rollout: np.ndarray | None = None, layer: int | None = None) -> str:
    """A stack's document: the inputs, `layers` (each with its attention as a one-layer document), the output.

    With `layer` (from 1) it says so (`"layer": N`), `layers` holds that layer alone and `output` is the
    stream it leaves.
    """
    stack = steps.stack
    chosen = steps.layers if layer is None else steps.layers[layer - 1 : layer]
    doc: dict = {
        "attncli": __version__,
        "title": stack.title,
        "notes": stack.notes,
        "tokens": list(stack.tokens),
        "x": stack.x.tolist(),
        **({} if layer is None else {"layer": layer}),
        "layers": [_layer(record) for record in chosen],
        "output": chosen[-1].output.tolist(),
    }
    if rollout is not None:
        doc["rollout"] = rollout.tolist()
    if steps.backward is not None:
        doc["backward"] = _backward(steps.backward, layer)
    return dumps(doc)


def _layer(steps: LayerSteps) -> dict:
    """One layer: its norm, the stream it reads (normalised with a norm placed pre), its attention, the residual sum."""
    norm = steps.layer.norm
    attention = {k: v for k, v in document(steps.attention).items() if k not in ("attncli", "title", "notes")}
    return {
        "name": steps.layer.name,
        "norm": None
        if norm is None
        else {
            "type": norm.kind,
            "place": norm.place,
            "eps": norm.eps,
            "gain": _matrix(norm.gain),
            "bias": _matrix(norm.shift),
        },
        "input": steps.input.tolist(),
        "normed": _matrix(steps.normed),
        "attention": attention,
        "residual": steps.residual.tolist(),
        "output": steps.output.tolist(),
    }


def _head(steps: Steps, number: int) -> dict:
    """A head's record: its name and score, then every step answers: holds, null where it has none (given scores)."""
    spec = steps.heads[number].spec
    record: dict = {"name": spec.name, "score": spec.score.kind, "scale": spec.score.scale}
    record |= dict.fromkeys(BY_NAME[name].field for name in HEAD_STEPS)
    for step, found in each(steps, HEAD_STEPS, number):
        record[step.field] = _masked(found) if step.name == "scores" else found.tolist()  # only scores hold -inf
    return record


def _positions(encoding: PositionEncoding) -> dict:
    """The encoding, its positions, and for sinusoidal the encodings added to x (and to x_query)."""
    record = {
        "kind": encoding.kind,
        "base": encoding.base,
        "query_positions": encoding.query_at.tolist(),
        "key_positions": encoding.key_at.tolist(),
    }
    if encoding.kind == "rope":
        record["style"] = encoding.style
    else:
        record["encoding"] = _matrix(encoding.encoding)
        record["query_encoding"] = _matrix(encoding.query_encoding)
    return record


def _matrix(array: np.ndarray | None) -> list | None:
    """An array as nested lists, or null where there is none (given scores; outputs of unequal widths)."""
    return None if array is None else array.tolist()


def _masked(scores: np.ndarray) -> list:
    """Scores with null where the mask excluded a key (JSON has no -inf)."""
    return [[float(s) if np.isfinite(s) else None for s in row] for row in scores]


def compare_document(record: Comparison) -> str:
    def side(steps: Steps) -> dict:
        problem = steps.problem
        return {"source": problem.source, "title": problem.title, "tokens": list(problem.tokens)}

    queries = [
        {
            "query": query.query,
            "heads": [
                {
                    "a": pair.name_a,
                    "b": pair.name_b,
                    "weights_a": pair.weights_a.tolist(),
                    "weights_b": pair.weights_b.tolist(),
                    "difference": _matrix(pair.difference),
                }
                for pair in query.heads
            ],
            "output_a": query.output_a.tolist(),
            "output_b": query.output_b.tolist(),
            "difference": _matrix(query.difference),
            "distance": query.distance,
        }
        for query in record.queries
    ]
    doc = {"attncli": __version__, "a": side(record.a), "b": side(record.b), "queries": queries}
    return dumps(doc)


def scaling_document(record: Scaling) -> str:
    rows = [
        {
            "d_k": row.d_k,
            "var_dot": row.var_dot,
            "var_scaled": row.var_scaled,
            "max_weight_dot": row.max_weight_dot,
            "max_weight_scaled": row.max_weight_scaled,
        }
        for row in record.rows
    ]
    doc = {"keys": record.keys, "samples": record.samples, "seed": record.seed, "rows": rows}
    return dumps(doc)
