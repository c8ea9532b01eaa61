"""The `answers:` section of a problem, step by step: blank (`?` in every cell) for students, or filled as a key.

Both come from the same walk through the calculation, so a template always has
the shape the key has and the grader expects: rows are the queries (the tokens
for keys and values), columns the keys or the coordinates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attncli.core import Steps
from attncli.grading import backward_templates
from attncli.i18n import t
from attncli.layers import StackSteps
from attncli.parsing.answers import NOT_ANSWERED, Settings, before_attention, stream_steps
from attncli.parsing.student import FIELDS as STUDENT_FIELDS
from attncli.softmax import SoftmaxSteps
from attncli.steps import (
    BY_NAME,
    HEAD_STEPS,
    INDEX,
    KEYS,
    NONE,
    QUERIES,
    SHARED_STEPS,
    SOFTMAX,
    TILE_STEPS,
    TILED,
    answered,
    asked,
    computed,
    labels,
)
from attncli.yamldoc import comment, flow, scalar

Cell = Callable[[float, bool], str]  # (true value, masked) -> the text written in the cell


@dataclass(frozen=True)
class _Block:
    step: str
    rows: tuple[str, ...]
    matrix: np.ndarray
    masked: np.ndarray | None  # (rows, columns) True where the mask leaves the cell out; None for unmaskable steps
    columns: str  # what the columns are, for the template's comment


def template(steps: Steps | StackSteps, exercise: str | None = None, settings: Settings | None = None) -> str:
    """A blank answers: section for the problem of `steps`: who hands it in (`student:` and `student_id:`, blank),
    every step to compute, `?` in every cell. Its instructions say what the key's `settings` enforce: at least
    min_decimals decimals (or as many as the student carries), a decimal comma in quotes where it is read."""
    settings = settings or Settings()
    decimals = (
        t("template.decimals_carried")
        if settings.min_decimals is None
        else t("template.decimals_at_least", count=settings.min_decimals)
    )
    lines = [comment(t("template.comment", decimals=decimals)), comment(t("template.rows"))]
    lines += [comment(t("template.decimal_comma"))] if settings.decimal_comma else []
    lines.append(comment(t("template.student")))
    if exercise is not None:
        lines.append(f"exercise: {scalar(exercise)}")
    lines += [f"{name}:" for name in STUDENT_FIELDS]
    return "\n".join([*lines, *answer_lines(steps, lambda value, masked: scalar(NOT_ANSWERED), True)]) + "\n"


def answer_lines(steps: Steps | StackSteps, cell: Cell, comments: bool = False) -> list[str]:
    """`answers:` and every step a student computes, each cell written by `cell`; with `comments`, what columns are.

    A stack's are under `layers:`, one mapping per layer: its normalised input (norm placed pre), its
    attention's steps, its residual sum (norm placed post) and the stream it leaves.
    """
    if not isinstance(steps, StackSteps):
        return ["answers:", *_step_lines(steps, cell, comments, 2), *gradient_lines(steps, cell, comments)]
    lines = ["answers:", "  layers:"]
    for layer in steps.layers:
        tokens = layer.attention.problem.tokens
        streams = [
            _Block(name, tokens, numbers, None, _columns(name, False, numbers))
            for name, numbers in stream_steps(layer).items()
        ]
        first = [block for block in streams if before_attention(layer, block.step)]
        before = [line for block in first for line in _block(block, cell, 6, comments)]
        after = [line for block in streams if block not in first for line in _block(block, cell, 6, comments)]
        layer_lines = [*before, *_step_lines(layer.attention, cell, comments, 6), *after]
        lines += [f"    - {layer_lines[0].lstrip()}", *layer_lines[1:]]
    return lines + gradient_lines(steps, cell, comments)


def gradient_lines(steps: Steps | StackSteps, cell: Cell, comments: bool) -> list[str]:
    """`backward:` when the problem asks for gradients (attncli.grading.backward_templates), each written as a step."""

    def write(
        name: str, rows: tuple[str, ...], found: np.ndarray, masked: np.ndarray | None, what: str, indent: int
    ) -> list[str]:
        return _block(_Block(name, rows, found, masked, what), cell, indent, comments)

    if isinstance(steps, StackSteps):
        return backward_templates.stack_lines(steps, write, comments, 2)
    return backward_templates.lines(steps, write, comments, 2)


def _step_lines(steps: Steps, cell: Cell, comments: bool, indent: int) -> list[str]:
    """One layer's attention, `indent` spaces in: its one head's steps, or each head's under `heads:`, concat, final."""
    per_head = [_head_blocks(steps, h) for h in range(len(steps.heads))]
    shared = [name for name in SHARED_STEPS if computed(steps, name)]
    lines = [
        line
        for name in shared
        if INDEX[name] < INDEX["queries"]  # x + PE, before every head
        for line in _block(_step_block(steps, name, None), cell, indent, comments)
    ]
    if steps.concat is None:
        blocks = per_head[0]
        return [
            *lines,
            *(line for block in blocks for line in _block(block, cell, indent, comments)),
            *_tiles(steps, 0, cell, indent, comments),
        ]
    pad = " " * indent
    lines.append(f"{pad}heads:")
    for h, blocks in enumerate(per_head):
        head_lines = [line for block in blocks for line in _block(block, cell, indent + 4, comments)]
        head_lines += _tiles(steps, h, cell, indent + 4, comments)
        lines += [f"{pad}  - {head_lines[0].lstrip()}", *head_lines[1:]]
    for name in shared:
        if INDEX[name] > INDEX["queries"]:
            lines += _block(_step_block(steps, name, None), cell, indent, comments)
    return lines


def _head_blocks(steps: Steps, h: int) -> list[_Block]:
    """One head's steps to compute: the projections (when the problem gives x and W), dot unless scores are given,
    scores unless given, weights and output."""
    return [_step_block(steps, name, h) for name in HEAD_STEPS if asked(steps, name, h)]


def _step_block(steps: Steps, name: str, head: int | None) -> _Block:
    """Step `name` (of `head`) as a block: its rows, its true numbers, its masked cells, what its columns are."""
    step, problem, found = BY_NAME[name], steps.problem, answered(steps, name, head)
    assert found is not None, name
    rows, _ = labels(problem, name, found.shape[1])
    if step.columns == KEYS:
        columns = t("template.keys", names=", ".join(problem.tokens))
        columns += f"; {t('template.aside')}" if step.aside else ""
    else:
        columns = _columns(name, step.rows == QUERIES, found)
    return _Block(name, rows, found, ~problem.mask if step.maskable else None, columns)


def _tiles(steps: Steps, h: int, cell: Cell, indent: int, comments: bool) -> list[str]:
    """Head `h`'s online softmax when the problem has `tiles:`: per query, a record per tile of its running max,
    rescale, running sum and accumulator (attncli.parsing.tile_answers reads them back); none without tiles."""
    tiles = steps.heads[h].tiles
    if tiles is None:
        return []
    pad = " " * indent
    title = f"{pad}{TILED}:" + (f"  {comment(t('template.tiles', size=tiles.size))}" if comments else "")
    lines = [title]
    queries = steps.problem.query_tokens
    named = len(set(queries)) == len(queries)  # names that read back as a mapping query: tiles; else a list
    for i, query in enumerate(queries):
        lines.append(f"{pad}  {scalar(query)}:" if named else f"{pad}  -  {comment(query)}")
        for tile in range(tiles.running_max.shape[1]):
            numbers = {name: getattr(tiles, name)[i, tile] for name in TILE_STEPS}
            fields = [
                f"{name}: {flow(cell(float(v), False) for v in value)}"
                if name == "accumulator"
                else f"{name}: {cell(float(value), name == 'running_max' and bool(np.isneginf(value)))}"
                for name, value in numbers.items()
            ]
            lines.append(f"{pad}    - {{{', '.join(fields)}}}")
    return lines


def _columns(name: str, per_query: bool, matrix: np.ndarray) -> str:
    """What a step's columns are, for the template's comment: its coordinates, or one number a row (Σ e^s, a norm's
    mean and root); a number written on the way says it is optional."""
    if BY_NAME[name].columns == NONE:
        said = t("template.per_query" if per_query else "template.per_token")
    else:
        said = t("template.query_coordinates" if per_query else "template.token_coordinates", count=matrix.shape[1])
    return f"{said}; {t('template.aside')}" if BY_NAME[name].aside else said


def _block(block: _Block, cell: Cell, indent: int, comments: bool) -> list[str]:
    pad = " " * indent
    title = f"{pad}{block.step}:" + (f"  {comment(block.columns)}" if comments else "")
    rows = [
        [cell(float(value), block.masked is not None and bool(block.masked[i, j])) for j, value in enumerate(row)]
        for i, row in enumerate(block.matrix)
    ]
    if len(set(block.rows)) == len(block.rows):  # names that read back as a mapping token: row
        return [title, *(f"{pad}  {scalar(name)}: {flow(row)}" for name, row in zip(block.rows, rows))]
    return [title, *(f"{pad}  - {flow(row)}  {comment(name)}" for name, row in zip(block.rows, rows))]


def softmax_template(steps: SoftmaxSteps, exercise: str | None = None) -> str:
    """A blank answers: section for a softmax homework (attncli.parsing.softmax_answers reads it back): each step
    its problem has, by the names of `attncli softmax --format json`, `?` in every cell."""
    lines = [comment(t("template.comment")), comment(t("template.softmax_rows"))]
    if exercise is not None:
        lines.append(f"exercise: {scalar(exercise)}")
    lines.append("answers:")
    count, width = steps.logits.rows.shape
    present = {"kept": steps.filtered is not None, "filtered": steps.filtered is not None}
    present |= {"cross_entropy": steps.cross_entropy is not None, "grad_logits": steps.cross_entropy is not None}
    blank = scalar(NOT_ANSWERED)
    for step in SOFTMAX:
        if not present.get(step.name, True):
            continue
        row = blank if step.columns == NONE else flow([blank] * width)
        if count == 1:
            lines.append(f"  {step.name}: {row}")
        elif step.columns == NONE:
            lines.append(f"  {step.name}: {flow([blank] * count)}")
        else:
            lines += [f"  {step.name}:", *(f"    - {row}" for _ in range(count))]
    return "\n".join(lines) + "\n"
