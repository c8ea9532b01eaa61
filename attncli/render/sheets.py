"""An exercise sheet: what a problem gives, and blanks for what it asks, without a number of the solution.

Markdown and LaTeX lay out the same `Sheet`; each given number is written as by hand (`exact`):
√2/2 rather than 0.7071, a position's angle in quarter turns (3π/2).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from attncli.core import Steps
from attncli.i18n import t
from attncli.problem import Head, Operand, Problem, Projection
from attncli.render.walk import Facts, facts_of
from attncli.written import entry, fixed

ROOTS = (2, 3, 5, 6, 7)  # √n that a hand exercise uses (√d_k, √d_k/2)
DENOMINATORS = (1, 2, 3, 4)


class Given(NamedTuple):
    """A matrix the problem gives: its name (Q, K, V, X, W_Q, ...), its rows' names, and each number as it
    would be written by hand (`exact`)."""

    name: str
    label: str  # what the rows are: token, or row (of a weight matrix)
    row_names: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


class Sheet(NamedTuple):
    """An exercise to hand out: the facts, each head's givens, and the grids to fill in (queries × keys)."""

    facts: Facts
    task: str  # what to work out, in words
    inputs: tuple[Given, ...]  # X, shared by Q, K, V and every head
    heads: tuple[tuple[str | None, tuple[Given, ...]], ...]
    shared: tuple[Given, ...]  # W_O, a bias matrix
    query_tokens: tuple[str, ...]
    tokens: tuple[str, ...]


def exact(value: float) -> str:
    """A given number as a student writes it: 2, 0.5, √2, -√2/2, 3√2/2, 1/3; else 4 decimals."""
    if float(value).is_integer():
        return entry(value, 0)
    if round(value, 4) == value:
        return f"{value:g}"
    sign = "-" if value < 0 else ""
    for root in (1, *ROOTS):
        for den in DENOMINATORS:
            times = abs(value) * den / math.sqrt(root)
            whole = round(times)
            if whole and math.isclose(times, whole, rel_tol=1e-12) and math.gcd(whole, den) == 1:
                top = str(whole) if root == 1 else f"{'' if whole == 1 else whole}√{root}"
                return f"{sign}{top}" + (f"/{den}" if den > 1 else "")
    return fixed(value, 4)


def sheet(steps: Steps) -> Sheet:
    """The givens of `steps.problem`: the inputs X once, then head by head W_Q, W_K, W_V (or Q, K, V) and the
    score's own weights, then W_O."""
    problem = steps.problem
    several = len(steps.heads) > 1
    inputs: list[Given] = []
    for head in steps.heads:
        for operand, names in zip(_operands(head.spec), (problem.query_tokens, problem.tokens, problem.tokens)):
            given = _given("X", operand.x, names) if isinstance(operand, Projection) else None
            if given is not None and given not in inputs:
                inputs.append(given)
    heads = tuple((head.spec.label if several else None, tuple(_givens(head.spec, problem))) for head in steps.heads)
    shared = [] if problem.w_o is None else [_given("W_O", problem.w_o)]
    if problem.bias is not None and problem.bias.kind == "matrix":
        shared.append(_given("B", problem.bias.matrix, problem.query_tokens))
    if problem.positions is not None:  # where each key (and, in cross-attention, each query) stands
        shared.append(_placed("m", problem.positions.key_at, problem.tokens))
        if problem.cross:
            shared.append(_placed("m (queries)", problem.positions.query_at, problem.query_tokens))
    facts = facts_of(steps)._replace(notes=None)  # a generated exercise's notes are about its YAML answers
    task = t("writeup.sheet_task") + (f" {t('writeup.sheet_task_w_o')}" if problem.w_o is not None else "")
    return Sheet(facts, task, tuple(inputs), heads, tuple(shared), problem.query_tokens, problem.tokens)


def _operands(spec: Head) -> tuple[Operand | None, Operand | None, Operand]:
    return spec.queries, spec.keys, spec.values


def _givens(spec: Head, problem: Problem) -> Iterator[Given]:
    names = (problem.query_tokens, problem.tokens, problem.tokens)
    for name, operand, row_names in zip("QKV", _operands(spec), names):
        if isinstance(operand, Projection):
            yield _given(f"W_{name}", operand.w)
        elif operand is not None:
            yield _given(name, operand, row_names)
    if spec.scores is not None:
        yield _given("S", spec.scores, problem.query_tokens)
    score = spec.score
    for name, matrix in (("W", score.w), ("W_query", score.w_query), ("W_key", score.w_key)):
        if matrix is not None:
            yield _given(name, matrix)
    if score.v is not None:
        yield _given("v", score.v[None, :])


def _placed(name: str, at: np.ndarray, names: tuple[str, ...]) -> Given:
    """Positions as a column, multiples of π/2 written so (π/2, π, 3π/2): generated RoPE exercises' quarter turns."""
    return Given(name, t("render.token"), names, tuple((_quarter_turns(float(m)),) for m in at))


def _quarter_turns(m: float) -> str:
    """A position as a student writes it: kπ/2 as π/2, π, 3π/2, 2π; any other number as `exact` writes it."""
    quarters = m / (math.pi / 2)
    whole = round(quarters)
    if not whole or not math.isclose(quarters, whole, rel_tol=1e-12):
        return exact(m)
    sign, count = ("-" if whole < 0 else ""), abs(whole)
    if count % 2:
        return sign + ("π/2" if count == 1 else f"{count}π/2")
    return sign + ("π" if count == 2 else f"{count // 2}π")


def _given(name: str, matrix: np.ndarray, names: tuple[str, ...] | None = None) -> Given:
    rows = tuple(tuple(exact(float(x)) for x in row) for row in matrix)
    if names is None:
        return Given(name, t("render.row"), tuple(str(i + 1) for i in range(len(rows))), rows)
    return Given(name, t("render.token"), names, rows)
