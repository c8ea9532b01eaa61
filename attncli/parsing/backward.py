"""`backward:` the gradients a problem asks for, and which top-level fields several heads share.

A problem asks for its backward pass with `backward: {grad_output: MATRIX}` (the upstream gradient
dO of the final output), `backward: {loss: sum}` (L = Σ O, dO all ones) or `backward: {loss: {target:
MATRIX}}` (L = ½·Σ (O − T)², dO = O − T); `--grad-output ROWS` and `--loss sum` say the same from the
command line and win over the file. Everything is checked here, once: dO's shape, its numbers, and
that every head's score has a gradient attncli writes out (attncli.backward).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attncli import core
from attncli.errors import phrase
from attncli.parsing.budget import within_budget
from attncli.parsing.fields import FieldReader
from attncli.parsing.heads import Heads, Level
from attncli.problem import GIVEN, Backward, Head, Projection, Score
from attncli.yamldoc import FieldPath, kind_of

FIELDS = ("grad_output", "loss")  # under `backward:`, and as the flags --grad-output and --loss
SUM, TARGET = "sum", "target"
SCORES = ("scaled_dot", "dot", GIVEN)  # the scores whose gradient is written out (given ones: down to dS)
# (L, S) matrices the backward pass keeps per head (dP, dS, d(q·k)) and builds on the way (dP − D)
MATRICES = 4
SHAREABLE = (("queries", "w_q"), ("keys", "w_k"), ("values", "w_v"))  # a head reads one of each pair


def read(
    reader: FieldReader,
    data: dict,
    rows: tuple[str, tuple[str, ...]],
    width: int,
    scores: Sequence[tuple[str, Score]],
) -> Backward | None:
    """The backward pass `data` asks for (flags first), None without one.

    `rows` is the field that names dO's rows and those names (query_tokens, or a stack's tokens), `width`
    the final output's; `scores` each head's label and score, for the kinds the backward pass refuses.
    """
    for name in FIELDS:
        if name in data and name not in reader.flags:
            raise reader.error((name,), "problem.unknown_field", name=name, hint=phrase("hint.under_backward"))
    flagged = [name for name in FIELDS if name in reader.flags]
    if len(flagged) > 1:
        raise reader.error((flagged[1],), "backward.both")
    if flagged:
        path: FieldPath = ()
        section = {flagged[0]: data[flagged[0]]}
    elif data.get("backward") is None:
        return None
    else:
        path, section = ("backward",), data["backward"]
        if not isinstance(section, dict):
            raise reader.error(path, "backward.not_mapping", got=kind_of(section))
        reader.check_fields(section, path, FIELDS)
        given = [name for name in FIELDS if name in section]
        if len(given) != 1:
            raise reader.error((*path, given[1]) if given else path, "backward.both" if given else "backward.empty")
    for label, score in scores:
        if score.kind not in SCORES:
            where = (*path, next(iter(section)))
            raise reader.error(where, "backward.score_kind", head=label, kind=score.kind)
    if "grad_output" in section:
        return Backward("grad_output", grad_output=_matrix(reader, (*path, "grad_output"), section, rows, width))
    return _loss(reader, (*path, "loss"), section["loss"], rows, width)


def _loss(
    reader: FieldReader, path: FieldPath, value: object, rows: tuple[str, tuple[str, ...]], width: int
) -> Backward:
    """`loss: sum`, or `loss: {target: MATRIX}` with T the shape of the output."""
    if isinstance(value, str) and value.strip() == SUM:
        return Backward(SUM)
    if isinstance(value, dict):
        reader.check_fields(value, path, (TARGET,))
        if TARGET in value:
            return Backward(TARGET, target=_matrix(reader, (*path, TARGET), value, rows, width))
    raise reader.error(path, "backward.bad_loss", got=kind_of(value))


def _matrix(
    reader: FieldReader, path: FieldPath, section: dict, rows: tuple[str, tuple[str, ...]], width: int
) -> np.ndarray:
    """dO or T: a row per output row (by name, or in order) and `width` columns, every number finite."""
    field, names = rows
    matrix = reader.matrix(path, section[path[-1]], names, field)  # (L, d_out)
    if matrix.shape[1] != width:
        raise reader.error(path, "backward.width", count=matrix.shape[1], expected=width)
    return matrix


def check_memory(reader: FieldReader, scores: Sequence[Score | None], queries: int, keys: int, bias: bool) -> None:
    """Refuse a backward pass whose (L, S) matrices, the forward's and its own, would pass the memory budget."""
    forward = core.bytes_needed(scores, queries, keys, reader.dtype, bias)
    needed = forward + len(scores) * MATRICES * queries * keys * reader.dtype.itemsize
    within_budget(needed, len(scores), queries, keys, reader.document.name)


def shared_fields(heads: Heads, built: Sequence[Head]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The fields given once at the top level that several heads read (queries or w_q, keys or w_k, ...),
    and those heads: a gradient of theirs is the sum over the heads that read it."""
    readers: dict[str, list[int]] = {}
    for index, head in enumerate(built):
        for (given, weight), operand in zip(SHAREABLE, (head.queries, head.keys, head.values)):
            name = weight if isinstance(operand, Projection) else given
            if operand is not None and heads.level(index, name) == Level.TOP:
                readers.setdefault(name, []).append(index)
    return tuple((name, tuple(users)) for name, users in readers.items() if len(users) > 1)
