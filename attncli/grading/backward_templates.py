"""The `backward:` part of a template or a key: every gradient a student computes, under JSON's names.

It follows `answers:` (attncli.grading.templates) when the problem asks for gradients: the top
level's own first (dO for a target, d(concat), dW_O), then each head's in `heads:` (at the top of
`backward:` with one head), each shared key/value head's in `kv_heads:`, and the sums and dX last,
as attncli.parsing.backward_answers reads them back.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attncli.core import Steps
from attncli.grading.backward import asked
from attncli.i18n import t
from attncli.layers import StackSteps
from attncli.parsing.backward_answers import key_of
from attncli.steps import (
    BACKWARD_KV,
    BACKWARD_LAYER,
    BACKWARD_STEPS,
    BY_NAME,
    COORDINATES,
    KEYS,
    NONE,
    QUERIES,
    Key,
    labels,
    matrix,
)
from attncli.yamldoc import comment

# Writes one gradient `indent` spaces in, as attncli.grading.templates writes a step: its name, rows, numbers,
# masked cells (None: none may be) and what its columns are (the comment); templates passes its own writer.
Write = Callable[[str, tuple[str, ...], np.ndarray, "np.ndarray | None", str, int], list[str]]


def lines(steps: Steps, write: Write, comments: bool, indent: int) -> list[str]:
    """`backward:` and its gradients `indent` spaces in, each written by `write`; none without gradients."""
    keys = asked(steps)
    if not keys:
        return []
    pad = " " * indent
    title = f"{pad}backward:" + (f"  {comment(t('template.backward'))}" if comments else "")
    alone = len(steps.heads) == 1
    top = [key for key in keys if key[1] is None or (alone and BY_NAME[key[0]].place != BACKWARD_KV)]
    out = [title, *_blocks(steps, [key for key in top if _before(key)], write, indent + 2)]
    for group, place in (("heads", "head"), ("kv_heads", "kv")):
        listed = [key for key in keys if key not in top and _kind(key) == place]
        out += _listed(steps, group, listed, write, indent + 2)
    return out + _blocks(steps, [key for key in top if not _before(key)], write, indent + 2)


def stack_lines(steps: StackSteps, write: Write, comments: bool, indent: int) -> list[str]:
    """A stack's `backward:`: `layers:`, a mapping per layer from the first, in the order a student works each one
    (grad_residual post-norm, the attention's under `attention:`, grad_normed pre-norm, grad_input)."""
    from attncli.backward import layer_attention  # the stack's record: read only for a stack's template

    record = steps.backward
    if record is None:
        return []
    pad = " " * indent
    title = f"{pad}backward:" + (f"  {comment(t('template.backward'))}" if comments else "")
    out = [title, f"{pad}  layers:"]
    for layer, grads in zip(steps.layers, record.layers):
        tokens = layer.attention.problem.tokens
        own = [(name, found) for name in _LAYER if (found := getattr(grads, key_of(name))) is not None]
        what = t("template.token_coordinates", count=grads.grad_input.shape[1])

        attention = lines(layer_attention(layer, grads), write, False, indent + 6)
        blocks = {name: write(key_of(name), tokens, found, None, what, indent + 6) for name, found in own}
        mine = [line for name in own_names(blocks, first=True) for line in blocks[name]]
        mine += [f"{pad}      attention:", *attention[1:]]
        mine += [line for name in own_names(blocks, first=False) for line in blocks[name]]
        out += [f"{pad}    - {mine[0].lstrip()}", *mine[1:]]
    return out


_LAYER = tuple(name for name in BACKWARD_STEPS if BY_NAME[name].place == BACKWARD_LAYER)  # grad_residual first


def own_names(blocks: dict[str, list[str]], first: bool) -> list[str]:
    """A layer's own gradients before its attention's (grad_residual) or after them (grad_normed, grad_input)."""
    return [name for name in _LAYER if name in blocks and (name == _LAYER[0]) == first]


def _kind(key: Key) -> str:
    return "kv" if BY_NAME[key[0]].place == BACKWARD_KV else "head"


def _before(key: Key) -> bool:
    """Whether a top-level gradient comes before the heads' (dO, d(concat), dW_O) or after them (sums, dX)."""
    return key[0] in ("backward.grad_output", "backward.grad_concat", "backward.grad_w_o")


def _listed(steps: Steps, group: str, keys: list[Key], write: Write, indent: int) -> list[str]:
    """`heads:` or `kv_heads:`, a mapping per head in order (every head has some gradient)."""
    if not keys:
        return []
    pad = " " * indent
    out = [f"{pad}{group}:"]
    for index in sorted({head for _, head in keys if head is not None}):
        found = _blocks(steps, [key for key in keys if key[1] == index], write, indent + 4)
        out += [f"{pad}  - {found[0].lstrip()}", *found[1:]]
    return out


def _blocks(steps: Steps, keys: list[Key], write: Write, indent: int) -> list[str]:
    return [line for key in keys for line in write(*_gradient(steps, key), indent)]


def _gradient(steps: Steps, key: Key) -> tuple[str, tuple[str, ...], np.ndarray, np.ndarray | None, str]:
    """A gradient as a block: its rows, its numbers, its masked cells, what its rows and columns are."""
    name, head = key
    step, problem = BY_NAME[name], steps.problem
    found = matrix(steps, name, head)
    assert found is not None, key
    rows, _ = labels(problem, name, found.shape[1], found.shape[0])
    if step.rows == COORDINATES:
        what = t("template.coordinate_rows", rows=found.shape[0], count=found.shape[1])
    elif step.columns == NONE:
        what = t("template.row_term")
    elif step.columns == KEYS:
        what = t("template.keys", names=", ".join(problem.tokens))
    else:
        kind = "template.query_coordinates" if step.rows == QUERIES else "template.token_coordinates"
        what = t(kind, count=found.shape[1])
    return key_of(name), rows, found, ~problem.mask if step.maskable else None, what
