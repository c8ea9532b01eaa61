"""`answers: backward:`, the gradients a student worked out, under the names of JSON's "backward" object.

The section mirrors that object (attncli.render.backward_doc): a head's gradients in the list `heads:`
(with one head they may stand at the top of `backward:`, as a one-head problem's forward steps stand at
the top of `answers:`), a shared key/value head's in `kv_heads:`, and the top level's own (dO for a
target, d(concat), dW_O, dX, the bias's, a field several heads read) at the top. Each gradient is read
cell by cell as any step of `answers:` is (attncli.parsing.answers), a masked cell of dS or d(q·k)
written `masked` or 0. A name is accepted only where this problem has that gradient, so a typo or a
gradient the problem lacks (dW_O without W_O) is one line naming those it has.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from attncli import steps as table
from attncli.steps import BACKWARD, BACKWARD_HEAD, BACKWARD_KV, BY_NAME, CALCULATION, Key, position, present
from attncli.yamldoc import FieldPath, kind_of

if TYPE_CHECKING:
    from attncli.core import Steps
    from attncli.layers import StackSteps
    from attncli.parsing.answers import Answer, _Reader

PREFIX = "backward."  # a backward step is named backward.<its JSON key> (attncli.steps)
HINT = "check.backward_steps"  # the gradients that can be answered where a name is not one of them


def key_of(name: str) -> str:
    """A backward step's JSON key: backward.grad_values → grad_values, backward.kv_heads.grad_keys → grad_keys."""
    return name.rpartition(".")[2]


def _names(place: str) -> tuple[str, ...]:
    return tuple(step.name for step in CALCULATION if step.place == place)


def read(reader: _Reader, path: FieldPath, value: object) -> tuple[Answer, ...]:
    """The answered gradients of `backward:` at `path`, in the order of the calculation (attncli.steps.position)."""
    steps = reader.steps
    assert steps is not None, "a problem's answers"
    if steps.backward is None:
        raise reader.error(path, "check.no_backward")
    if not isinstance(value, dict) or not value:
        raise reader.error(path, "check.backward_not_mapping", got=kind_of(value))
    placed = _top(reader, path, value)
    if "heads" in value:
        placed += _listed(reader, (*path, "heads"), value["heads"], BACKWARD_HEAD, len(steps.heads))
    if "kv_heads" in value:
        placed += _listed(reader, (*path, "kv_heads"), value["kv_heads"], BACKWARD_KV, len(steps.backward.kv_heads))
    placed.sort(key=lambda item: position(*item[1]))
    return tuple(reader.answer(where, written, *key) for where, key, written in placed)


Placed = list[tuple[FieldPath, Key, object]]  # where each gradient is written, its (step, head), what it holds


def _top(reader: _Reader, path: FieldPath, section: dict) -> Placed:
    """The gradients at the top of `backward:`: the top level's own, and one head's when the problem has one."""
    steps = reader.steps
    assert steps is not None
    own = [name for name in (*_names(BACKWARD), *_names(BACKWARD_HEAD)) if present(steps, name, None)]
    alone = len(steps.heads) == 1
    first = [name for name in _names(BACKWARD_HEAD) if alone and name not in own and present(steps, name, 0)]
    lists = ["heads", *(["kv_heads"] if steps.backward is not None and steps.backward.kv_heads else [])]
    reader.check_fields(section, path, [*map(key_of, own + first), *lists], HINT)
    placed: Placed = []
    for key, written in section.items():
        if key in lists:
            continue
        name = PREFIX + key
        head = None if name in own else 0
        if head == 0 and "heads" in section:
            raise reader.error((*path, key), "check.backward_heads_and_top")
        placed.append(((*path, key), (name, head), written))
    return placed


def _listed(reader: _Reader, path: FieldPath, value: object, place: str, count: int) -> Placed:
    """`heads:` or `kv_heads:`: a list of mappings, one per head (kv head) in order, each naming its gradients."""
    steps = reader.steps
    assert steps is not None
    if not isinstance(value, list) or not value or not all(isinstance(item, dict) for item in value):
        raise reader.error(path, "check.backward_bad_list", group=path[-1], got=kind_of(value))
    if len(value) > count:
        raise reader.error(path, "check.backward_too_many", group=path[-1], count=len(value), expected=count)
    placed: Placed = []
    for index, fields in enumerate(value):
        here = [name for name in _names(place) if present(steps, name, index)]
        reader.check_fields(fields, (*path, index), [key_of(name) for name in here], HINT)
        by_key = {key_of(name): name for name in here}
        placed += [((*path, index, key), (by_key[key], index), written) for key, written in fields.items()]
    return placed


def is_backward(name: str) -> bool:
    """Whether `name` is a step of the backward pass (`require:` may name one)."""
    return name.startswith(PREFIX) and name in BY_NAME


def refuse_in_layers(reader: _Reader, section: dict) -> None:
    """Gradients answered inside a stacked layer's forward answers: one line saying where a stack's go
    (`answers: backward: layers:`, as JSON's backward.layers)."""
    layers = section.get("layers")
    if isinstance(layers, list):
        for index, item in enumerate(layers):
            if isinstance(item, dict) and "backward" in item:
                raise reader.error(("answers", "layers", index, "backward"), "check.backward_stack")


LayerGradients = tuple[tuple["Answer", ...], tuple["Answer", ...]]  # a layer's own gradients, its attention's


def read_stack(
    reader: _Reader, steps: StackSteps, value: object, of: Callable[[Steps], _Reader]
) -> list[LayerGradients]:
    """`answers: backward:` of a stack: `layers:`, a mapping per layer from the first, each with the layer's own
    gradients (grad_residual post-norm, grad_normed pre-norm, grad_input) and its attention's under `attention:`
    (read as a one-layer problem's `backward:`, its dO the gradient reaching the attention); `of` makes the
    reader of a layer's attention."""
    from attncli.backward import layer_attention  # the stack's record: read only for a stack's answers

    path: FieldPath = ("answers", "backward")
    record = steps.backward
    if record is None:
        raise reader.error(path, "check.no_backward")
    if not isinstance(value, dict) or not value:
        raise reader.error(path, "check.backward_not_mapping", got=kind_of(value))
    reader.check_fields(value, path, ("layers",), HINT)
    listed = value["layers"]
    if not isinstance(listed, list) or not listed or not all(isinstance(item, dict) for item in listed):
        raise reader.error((*path, "layers"), "check.backward_layers", got=kind_of(listed))
    if len(listed) > len(steps.layers):
        raise reader.error((*path, "layers"), "check.backward_too_many", group="layers", count=len(listed),
                           expected=len(steps.layers))  # fmt: skip
    found: list[LayerGradients] = []
    for index, fields in enumerate(listed):
        here = (*path, "layers", index)
        layer, grads = steps.layers[index], record.layers[index]
        own = {name: matrix for name in _names(table.BACKWARD_LAYER) if (matrix := _matrix(grads, name)) is not None}
        reader.check_fields(fields, here, [*map(key_of, own), "attention"], HINT)
        layered = of(layer_attention(layer, grads))
        layered.streams = own
        mine = tuple(layered.answer((*here, key_of(name)), fields[key_of(name)], name, None)
                     for name in own if key_of(name) in fields)  # fmt: skip
        attention = read(layered, (*here, "attention"), fields["attention"]) if "attention" in fields else ()
        found.append((mine, attention))
    return found


def _matrix(grads: object, name: str) -> np.ndarray | None:
    return getattr(grads, key_of(name))
