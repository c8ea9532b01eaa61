"""`practice --record FILE`: the session as a homework file that `attncli check` grades as the tutor did.

The file is the problem's own text (without an answers: section it may have had) followed by
the answers as first given: a second try or a shown answer is practice, not homework.
"""

from __future__ import annotations

import re

from attncli.parsing.answers import Answer, Entry
from attncli.practice import backward, tiles
from attncli.practice.session import Session
from attncli.steps import TILE_STEPS
from attncli.yamldoc import comment, flow, scalar

_TOP_ANSWERS = re.compile(r"^answers\s*:")
_TOP_FIELD = re.compile(r"^[^\s#-]")
_PLAIN_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")


def homework(problem: str, session: Session) -> str:
    """The homework file of `session` on the problem whose YAML text is `problem`."""
    text = without_answers(problem).rstrip("\n") + "\n"
    answers = session.answers()
    found = answers.steps
    gradients = backward.record_lines(session.steps, answers.backward, _step)  # after the forward steps
    if not found:
        return text + "\n".join(["answers:", *gradients]) + "\n" if gradients else text
    heads, queries = len(session.steps.heads), len(session.steps.problem.query_tokens)
    tiled = [a for a in found if a.step in TILE_STEPS]  # written as tiles: records (attncli.practice.tiles)
    found = tuple(a for a in found if a.step not in TILE_STEPS)
    if session.steps.concat is None:
        lines = [line for a in found for line in _step(a, 2)] + tiles.record(tiled, queries, _cell, 2)
        return text + "\n".join(["answers:", *lines, *gradients]) + "\n"
    lines = ["answers:", "  heads:"]
    last = max((a.head for a in (*found, *tiled) if a.head is not None), default=-1)
    for h in range(min(last + 1, heads)):
        head_lines = [line for a in found if a.head == h for line in _step(a, 6)]
        head_lines += tiles.record([a for a in tiled if a.head == h], queries, _cell, 6)
        lines += [f"    - {head_lines[0].lstrip()}", *head_lines[1:]] if head_lines else ["    - {}"]
    lines += [line for a in found if a.head is None for line in _step(a, 2)]
    return text + "\n".join([*lines, *gradients]) + "\n"


def without_answers(text: str) -> str:
    """`text` without its top-level answers: section: practising a recorded file records it afresh."""
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if _TOP_ANSWERS.match(line):
            skipping = True
            continue
        if skipping and _TOP_FIELD.match(line):
            skipping = False
        if not skipping:
            out.append(line)
    return "".join(out)


def _step(answer: Answer, indent: int) -> list[str]:
    pad = " " * indent
    rows = [[_cell(e) for e in row] for row in answer.cells]
    if len(set(answer.rows)) == len(answer.rows):
        return [f"{pad}{answer.step}:", *(f"{pad}  {scalar(n)}: {flow(r)}" for n, r in zip(answer.rows, rows))]
    return [f"{pad}{answer.step}:", *(f"{pad}  - {flow(r)}  {comment(n)}" for n, r in zip(answer.rows, rows))]


def _cell(e: Entry | None) -> str:
    """A number as the student wrote it (its decimals are its precision), an expression quoted, `?` if unanswered."""
    if e is None:
        return scalar("?")
    return e.text if _PLAIN_NUMBER.fullmatch(e.text) else scalar(e.text)
