"""Positions and biases as a student works them by hand, and their slips: x + PE, RoPE's turned vectors, a bias b.

Each brings numbers a student looks up or writes down rather than computes from the problem's: the
encodings PE, the cos and sin of RoPE's angles, ALiBi's slopes and each b. A careful student has them at
the carry precision, so the rounding of each is part of how far their numbers may be from the truth
(the rounding rule's widening: attncli.grading.rule). The slips are a Mistake's `sinusoidal`, `rope`,
`rope_at` and `alibi` fields (attncli.grading.mistakes). Pure numpy, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from attncli import positions
from attncli.core import HeadSteps
from attncli.grading import interval
from attncli.grading.interval import Carried
from attncli.grading.mistakes import Mistake
from attncli.grading.rule import half_unit
from attncli.problem import PositionEncoding, Problem

Keep = Callable[[str, Carried], Carried]  # how a student keeps a number of a step (attncli.grading.stages._Stage.keep)


def encoding(at: np.ndarray, width: int, base: float, slip: str) -> np.ndarray:
    """Vaswani et al.'s PE (n, d) at positions `at`, or as a slip makes it: counted from 1 (`from_one`), sin and
    cos swapped (`swapped`)."""
    if slip == "from_one":
        at = at + 1
    found = positions.sinusoidal(at, width, base)  # (n, d)
    if slip == "swapped":
        found = found.copy()
        found[:, 0::2], found[:, 1::2] = found[:, 1::2].copy(), found[:, 0::2].copy()
    return found


def positioned(encoding_: PositionEncoding, slip: str, keep: Keep) -> Carried:
    """x + PE (S, d) as the student has it: x exact, each PE looked up at the carry precision."""
    assert encoding_.x is not None, "sinusoidal positions keep x"
    pe = encoding(encoding_.key_at, encoding_.x.shape[1], encoding_.base, slip)  # (S, d)
    return interval.add(interval.exact(encoding_.x), keep("inputs", interval.exact(pe)))


def query_inputs(problem: Problem, slip: str, keep: Keep, passed: Carried) -> Carried:
    """What the queries' projection multiplies with sinusoidal positions: the rows of x + PE (`passed`) of the query
    tokens, or in cross-attention x_query + PE at the queries' own positions."""
    rows = problem.query_rows if problem.query_rows is not None else None if problem.cross else range(len(passed.t))
    if rows is not None:
        return interval.rows(passed, list(rows))
    encoding_ = problem.positions
    assert encoding_ is not None and encoding_.x_query is not None, "cross-attention with positions has x_query"
    pe = encoding(encoding_.query_at, encoding_.x_query.shape[1], encoding_.base, slip)  # (L, d)
    return interval.add(interval.exact(encoding_.x_query), keep("inputs", interval.exact(pe)))


def turned(
    head: HeadSteps, mistake: Mistake, rope: PositionEncoding, queries: Carried, keys: Carried, carry: int
) -> tuple[Carried, Carried]:
    """RoPE's turn of the queries and keys as the student makes it (before rounding), or its slip: forgotten,
    turned by −m·θ, paired the other way, at positions shifted by one."""
    rotation = head.rotation
    assert rotation is not None, "a head turned by RoPE"
    if mistake.rope == "forgotten":
        return queries, keys
    style = rotation.style
    if mistake.rope == "pairing":
        style = next(other for other in positions.STYLES if other != style)
    query_at, key_at = shifted(rope, mistake.rope_at)
    width = queries.t.shape[1]
    sign = -1.0 if mistake.rope == "reversed" else 1.0
    query_angles = sign * positions.angles(query_at, width, rope.base)  # (L, d/2)
    key_angles = sign * positions.angles(key_at, width, rope.base)  # (S, d/2)
    return _turn(queries, query_angles, style, carry), _turn(keys, key_angles, style, carry)


def shifted(rope: PositionEncoding, slip: str) -> tuple[np.ndarray, np.ndarray]:
    """The positions of the queries and the keys as a slip takes them: every one + 1, the keys' alone + 1, or the
    queries counted from 0 (a new token put at 0 when decoding)."""
    query_at, key_at = rope.query_at, rope.key_at
    if slip == "plus_one":
        return query_at + 1, key_at + 1
    if slip == "keys_plus_one":
        return query_at, key_at + 1
    if slip == "queries_from_zero":
        return np.arange(len(query_at), dtype=query_at.dtype), key_at
    return query_at, key_at


def exact_turn(num: Carried, angles: np.ndarray, style: str) -> Carried:
    """A carried matrix turned with exact cos and sin (the backward pass's replay turns its gradients back so)."""
    return _turn(num, angles, style, None)


def _turn(num: Carried, angles: np.ndarray, style: str, carry: int | None) -> Carried:
    """A carried matrix turned pair by pair: linear in it with exact cos and sin, so its parts turn alike and the
    bound on the rest mixes by |cos| and |sin|; with each cos and sin looked up at the carry precision, what that
    rounding moves, |a|·δcos + |b|·δsin, joins the rest (none where they are on its grid: 1, 0, ½; none for
    `carry` None, cos and sin exact)."""
    first, second = positions.pairs(num.t.shape[1], style)
    cos, sin = np.cos(angles), np.sin(angles)
    moved_cos, moved_sin = _moved(cos, carry), _moved(sin, carry)
    size = np.abs(num.t) + num.radius  # how large each coordinate can be
    rest = np.empty_like(num.e)
    rest[:, first] = np.abs(cos) * num.e[:, first] + np.abs(sin) * num.e[:, second]
    rest[:, second] = np.abs(cos) * num.e[:, second] + np.abs(sin) * num.e[:, first]
    rest[:, first] += size[:, first] * moved_cos + size[:, second] * moved_sin
    rest[:, second] += size[:, second] * moved_cos + size[:, first] * moved_sin
    return Carried(positions.rotate(num.t, angles, style), positions.rotate(num.g, angles, style), rest)


def _moved(constants: np.ndarray, carry: int | None) -> np.ndarray:
    """How far a constant looked up at the carry precision may be from the true one: half a unit, 0 on the grid."""
    if carry is None:
        return np.zeros_like(constants)
    on_grid = np.abs(np.round(constants, carry) - constants) <= 1e-15 + 1e-12 * np.abs(constants)
    return np.where(on_grid, 0.0, half_unit(carry))


def bias(problem: Problem, h: int, mistake: Mistake, keep: Keep) -> Carried | None:
    """Head h's bias b (L, S) as the student has it, None without one: a matrix as given; ALiBi's −m_h·|i − j| from
    the slope m_h looked up at the carry precision, b itself then kept at it (a student may write b as the tool
    shows it, or multiply the slope out), or its slip: +m_h·|i − j|, another slope."""
    given = problem.bias
    if given is None:
        return None
    if given.kind != "alibi":
        return keep("inputs", interval.exact(given.of(h)))
    slope = mistake.slopes[h] if mistake.alibi == "slopes" else given.slopes[h]
    sign = 1.0 if mistake.alibi == "flipped" else -1.0
    found = interval.times(interval.exact(sign * given.matrix), keep("inputs", interval.exact(slope)))
    return keep("inputs", found)
