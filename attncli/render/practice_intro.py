"""What the tutor shows before it asks: the problem, in the words `compute` uses, and each section as it starts.

The intro says what a student needs to work by hand: the tokens, each head's score and vectors (x as
given, and the projections' W), the positions (RoPE's style and each token's position and θ_i; a
sinusoidal PE table, added to x in the first step), the mask (and, decoding with a KV cache, which
keys each new token sees), the bias b (ALiBi's slopes), W_O or that the heads' concatenation is the
final output. A stack shows its x and then each layer as it starts (its norm, its matrices); with
several heads each head is named before its steps, with the kv head it reads.
"""

from __future__ import annotations

import numpy as np

from attncli.core import HeadSteps, Steps
from attncli.i18n import t
from attncli.layers import StackSteps
from attncli.practice.plan import Prompt
from attncli.practice.session import Session
from attncli.practice.working import num, vector
from attncli.problem import Problem, Projection
from attncli.render.layout import BLANK, Line, line
from attncli.render.walk import positions_words


def intro(session: Session) -> list[Line]:
    """The problem as the student needs it before the first step."""
    solved = session.solved
    if isinstance(solved, StackSteps):
        stack = solved.stack
        out = [line((t("practice.title", title=stack.title or t("practice.untitled")), "bold"))]
        out.append(line(t("practice.tokens", tokens=", ".join(stack.tokens))))
        out += [line(f"  x({token}) = {vector(row)}") for token, row in zip(stack.tokens, stack.x)]
        out.append(line(t("practice.layers", count=len(solved.layers))))
    else:
        out = _problem(solved)
    return [*out, BLANK, line((t("practice.commands"), "dim")), BLANK]


def section(session: Session, prompt: Prompt, before: Prompt | None) -> list[Line]:
    """The lines shown as a new part of the problem starts: a stack's layer (all it needs), a head of several."""
    out: list[Line] = []
    solved = session.solved
    if isinstance(solved, StackSteps) and prompt.layer is not None and (before is None or before.layer != prompt.layer):
        out += _layer(solved, prompt.layer)
    steps = session.part(prompt)
    new_head = before is None or (before.head, before.layer) != (prompt.head, prompt.layer)
    if prompt.head is not None and len(steps.heads) > 1 and new_head:
        out.append(line((_head_title(steps.heads[prompt.head], steps.problem), "bold")))
    return out


def _problem(steps: Steps) -> list[Line]:
    problem = steps.problem
    out = [line((t("practice.title", title=problem.title or t("practice.untitled")), "bold"))]
    out.append(line(t("practice.tokens", tokens=", ".join(problem.tokens))))
    if problem.cross or problem.query_tokens != problem.tokens:
        out.append(line(t("practice.query_tokens", tokens=", ".join(problem.query_tokens))))
    return [*out, *_attention(steps)]


def _attention(steps: Steps) -> list[Line]:
    """One attention problem's own lines: positions, mask, each head's score and vectors, bias, W_O."""
    problem = steps.problem
    out = _positions(problem)
    for index, head in enumerate(steps.heads):
        if len(steps.heads) > 1:
            out.append(line((_head_title(head, problem), "bold")))
        out += _head(head, problem, index)
    out += _mask(problem)
    if problem.w_o is not None:
        out.append(line(f"  W_O = {'; '.join(vector(row) for row in problem.w_o)}"))
    elif len(steps.heads) > 1:
        out.append(line(t("practice.no_w_o")))
    return out


def _head_title(head: HeadSteps, problem: Problem) -> str:
    """A head named once ("head 2"), and the kv head it reads with grouped-query attention."""
    spec = head.spec
    if spec.kv_head is None:
        return spec.label
    return t("render.head_reads", name=spec.label, kv=problem.kv_label(spec.kv_head))


def _head(head: HeadSteps, problem: Problem, index: int) -> list[Line]:
    spec = head.spec
    widths = f"d_v = {head.values.shape[1]}" if head.keys is None else f"d_k = {head.keys.shape[1]}"
    out = [line(t("practice.score", name=t(f"writeup.score_{spec.score.kind}"), widths=widths))]
    for name, operand, matrix, tokens in (
        ("q", spec.queries, head.queries, problem.query_tokens),
        ("k", spec.keys, head.keys, problem.tokens),
        ("v", spec.values, head.values, problem.tokens),
    ):
        if matrix is None:
            continue
        if isinstance(operand, Projection):
            out += _projection(name, operand, tokens, problem)
        else:
            out += [line(f"  {name}({token}) = {vector(row)}") for token, row in zip(tokens, matrix)]
    if head.queries is None:
        out += [line(f"  s({token}) = {vector(row)}") for token, row in zip(problem.query_tokens, head.scores)]
    if head.bias is not None:
        if problem.bias is not None and problem.bias.kind == "alibi":
            out.append(line(t("practice.alibi", slope=num(problem.bias.slopes[index]))))
        out += [line(f"  b({token}) = {vector(row)}") for token, row in zip(problem.query_tokens, head.bias)]
    return out


def _projection(name: str, operand: Projection, tokens: tuple[str, ...], problem: Problem) -> list[Line]:
    """q = x·W_Q from x as given (with sinusoidal positions, x + PE: the first step), and W."""
    encoding = problem.positions
    sinusoidal = encoding is not None and encoding.kind == "sinusoidal"
    weight = f"W_{name.upper()}"
    out = [line(t("practice.projected_positions" if sinusoidal else "practice.projected", name=name, weight=weight))]
    if not sinusoidal:
        out += [line(f"  x({token}) = {vector(row)}") for token, row in zip(tokens, operand.x)]
    return [*out, line(f"  {weight} = {'; '.join(vector(row) for row in operand.w)}")]


def _positions(problem: Problem) -> list[Line]:
    """RoPE's style, each token's position and θ_i; sinusoidal positions: x as given, then PE(m) of each token."""
    encoding = problem.positions
    if encoding is None:
        return []
    out = [line(t("practice.positions", words=positions_words(encoding)))]
    if encoding.kind == "rope":
        places = [f"{token} m = {num(float(m))}" for token, m in zip(problem.tokens, encoding.key_at)]
        out.append(line(t("practice.places", places=", ".join(places))))
        queries = [f"{token} m = {num(float(m))}" for token, m in zip(problem.query_tokens, encoding.query_at)]
        if queries != places[: len(queries)] or len(queries) != len(places):
            out.append(line(t("practice.query_places", places=", ".join(queries))))
        return out
    assert encoding.x is not None and encoding.encoding is not None, "sinusoidal positions keep x and PE"
    out += [line(f"  x({token}) = {vector(row)}") for token, row in zip(problem.tokens, encoding.x)]
    out += [
        line(f"  PE({token}, m = {num(float(m))}) = {vector(row)}")
        for token, m, row in zip(problem.tokens, encoding.key_at, encoding.encoding)
    ]
    return out


def _mask(problem: Problem) -> list[Line]:
    """Which keys each query may not use; decoding against a KV cache, which keys the new tokens see."""
    out = []
    if problem.mask_rule.kind == "causal_lower_right":
        out.append(line(t("practice.mask", words=t("render.mask_causal_lower_right"))))
        for i, query in enumerate(problem.query_tokens):
            seen = [problem.tokens[j] for j in np.flatnonzero(problem.mask[i])]
            out.append(line(t("practice.sees", query=query, keys=", ".join(seen))))
        return out
    if not problem.mask.all():
        for i, token in enumerate(problem.query_tokens):
            masked = [problem.tokens[j] for j in range(len(problem.tokens)) if not problem.mask[i, j]]
            if masked:
                out.append(line(t("practice.masked", query=token, keys=", ".join(masked))))
    return out


def _layer(solved: StackSteps, index: int) -> list[Line]:
    """A stack's layer as it starts: its name and norm, then its attention's heads and matrices."""
    layer = solved.layers[index]
    norm = layer.layer.norm
    words = t("practice.no_norm") if norm is None else t(f"practice.norm.{norm.kind}_{norm.place}", eps=f"{norm.eps:g}")
    out = [BLANK] if index > 0 else []  # the first follows the intro's blank line
    out.append(line((t("practice.layer", name=layer.layer.label, norm=words), "bold")))
    if index > 0:
        out.append(line(t("practice.layer_reads", name=solved.layers[index - 1].layer.label)))
    steps = layer.attention
    for head in steps.heads:
        if len(steps.heads) > 1:
            out.append(line((_head_title(head, steps.problem), "bold")))
        out.append(line(t("practice.score", name=t(f"writeup.score_{head.spec.score.kind}"), widths=_widths(head))))
        for name in ("queries", "keys", "values"):
            operand = getattr(head.spec, name)
            if isinstance(operand, Projection):
                weight = f"W_{name[0].upper()}"
                out.append(line(f"  {weight} = {'; '.join(vector(row) for row in operand.w)}"))
    if steps.problem.w_o is not None:
        out.append(line(f"  W_O = {'; '.join(vector(row) for row in steps.problem.w_o)}"))
    return [*out, *_positions(steps.problem)[:1], *_mask(steps.problem)]


def _widths(head: HeadSteps) -> str:
    return f"d_v = {head.values.shape[1]}" if head.keys is None else f"d_k = {head.keys.shape[1]}"
