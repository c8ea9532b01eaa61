"""Numbers as a careful student has them: the exact value, and a rigorous bound on how far theirs can be.

A student who carries a number rounds it: the rounding moves it by some ε·half with ε in
[−1, 1], a different ε for every number carried. Each `Carried` keeps its value `t`, its
first-order dependence `g` on every ε made so far (one column per rounding, as in affine
arithmetic), and `e`, a bound on everything else: the second-order terms, and numbers the
student wrote themselves. Its radius |g|·1 + e bounds |student's number − t| for every
choice of the ε. Keeping the ε apart makes the bound tight where roundings cancel: a query
rounded once and used against every key, or weights whose deviations add up to 0 because
the student divided by their own sum. Pure numpy, no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from attncli.grading.rule import half_unit

# Numbers of g one matrix may hold (4 MiB): a replay tracks at most this over its largest matrix's cells roundings
# apart (a homework of 12 tokens and 4 heads makes thousands); beyond them new roundings go into e, looser and still
# rigorous. The exercises of the replayed-mistake suite stay far below (about 200 roundings, 3,000 numbers).
BUDGET = 1 << 18
TANH_CURVATURE = 4 / (3 * math.sqrt(3))  # max |tanh''|


@dataclass(frozen=True)
class Carried:
    """A matrix as a student may have it: within `radius` of `t` whatever the roundings were."""

    t: np.ndarray
    g: np.ndarray  # (*t.shape, n): how the student's number moves with each rounding ε_k ∈ [−1, 1]
    e: np.ndarray  # (*t.shape): a bound on the rest

    @property
    def radius(self) -> np.ndarray:
        """|g|·1 + e, made once: every operation on a carried number asks for it (kept without a lock, unlike
        functools.cached_property in Python 3.11)."""
        found: np.ndarray | None = self.__dict__.get("_radius")
        if found is None:
            found = np.abs(self.g).sum(axis=-1) + self.e if self.g.shape[-1] else self.e
            object.__setattr__(self, "_radius", found)
        return found


class Noise:
    """Counts the roundings made in one replay, so that each gets its own column of g; or, not `tracked`, puts
    every rounding into e.

    Untracked, g stays empty: a looser bound made at a fraction of the cost, which never falls below the
    tracked one (each operation's bound grows with its inputs' radii, and |g|·1 of a sum or a product is at
    most what the radii of its parts give), so that a number outside it is outside the tracked one too.
    """

    def __init__(self, count: int = 0, tracked: bool = True, largest: int = 1) -> None:
        self.count = count
        self.tracked = tracked
        self.columns = BUDGET // max(largest, 1)  # `largest`: the cells of the largest matrix a replay carries

    def tracks(self, count: int) -> bool:
        """Whether `count` new roundings get columns of their own (else they go into e)."""
        return self.tracked and self.count + count <= self.columns


def exact(matrix: np.ndarray | float) -> Carried:
    """A number the student has exactly: given in the problem, or written by them."""
    t = np.asarray(matrix, dtype=np.float64)
    return Carried(t, np.zeros((*t.shape, 0)), np.zeros(t.shape))


def known(t: np.ndarray, e: np.ndarray) -> Carried:
    """A number known to be within `e` of `t`, for reasons not tracked one by one."""
    return Carried(np.asarray(t, dtype=np.float64), np.zeros((*np.shape(t), 0)), np.asarray(e, dtype=np.float64))


def where(condition: np.ndarray, a: Carried, b: Carried) -> Carried:
    """Cell by cell, a where `condition` holds, else b."""
    ga, gb = _same(a.g, b.g)
    return Carried(np.where(condition, a.t, b.t), np.where(condition[..., None], ga, gb), np.where(condition, a.e, b.e))


def carry(num: Carried, decimals: int, noise: Noise) -> Carried:
    """The number a student keeps: rounded to `decimals`, a new rounding of up to half a unit for each cell.

    Cells that are exact and have no more decimals than that are not moved.
    """
    half = half_unit(decimals)
    finite = np.isfinite(num.t)
    if not noise.tracked:  # every finite cell moved: no tighter than the rule below, and a few calls instead of ten
        return Carried(num.t, num.g, num.e + np.where(finite, half, 0.0))
    with np.errstate(invalid="ignore"):  # np.isclose's rule (rtol 1e-12, atol 1e-15), for the finite cells
        on_grid = np.abs(np.round(np.where(finite, num.t, 0.0), decimals) - num.t) <= 1e-15 + 1e-12 * np.abs(num.t)
    return carry_by(num, np.where(finite & ~((num.radius == 0) & on_grid), half, 0.0), noise)


def carry_by(num: Carried, half: np.ndarray, noise: Noise) -> Carried:
    """`num` moved by a new rounding of up to `half` in each cell where that is not 0."""
    moved = half > 0
    count = int(np.count_nonzero(moved))
    if count == 0:
        return num
    if not noise.tracks(count):
        return Carried(num.t, num.g, num.e + half)
    before = max(num.g.shape[-1], noise.count)  # the new columns come after every rounding made so far
    g = np.zeros((num.t.size, before + count))
    if num.g.shape[-1]:
        g[:, : num.g.shape[-1]] = num.g.reshape(num.t.size, -1)
    g[np.flatnonzero(moved), before + np.arange(count)] = half[moved]
    noise.count += count
    return Carried(num.t, g.reshape((*num.t.shape, before + count)), num.e)


def written(t: np.ndarray, half: np.ndarray, noise: Noise) -> Carried:
    """Numbers a student wrote, each standing for one they kept within `half` of it (0: exactly it)."""
    return carry_by(exact(t), half, noise)


def round_to(num: Carried, decimals: int) -> Carried:
    """The number a student keeps who rounds to `decimals` early: the value rounded, the other roundings as before.

    A model of one slip (a replay), not a bound: near a midpoint the student's own rounding may go
    the other way, and then the replay simply does not reproduce their number.
    """
    finite = np.isfinite(num.t)
    return Carried(np.where(finite, np.round(num.t, decimals), num.t), num.g, num.e)


def transpose(num: Carried) -> Carried:
    return Carried(num.t.T, np.swapaxes(num.g, 0, 1), num.e.T)


def expand(num: Carried, axis: int) -> Carried:
    """A new axis of length 1 at `axis`, for broadcasting (the additive score's query × key grid)."""
    return Carried(np.expand_dims(num.t, axis), np.expand_dims(num.g, axis), np.expand_dims(num.e, axis))


def rows(num: Carried, order: list[int]) -> Carried:
    return Carried(num.t[order], num.g[order], num.e[order])


def join(parts: list[Carried]) -> Carried:
    """Matrices side by side (the heads' outputs concatenated)."""
    width = max(p.g.shape[-1] for p in parts)
    g = np.concatenate([_pad(p.g, width) for p in parts], axis=1)
    return Carried(np.concatenate([p.t for p in parts], axis=1), g, np.concatenate([p.e for p in parts], axis=1))


def matmul(a: Carried, b: Carried) -> Carried:
    """a @ b. (a + Δa)(b + Δb) = ab + a·Δb + Δa·b + Δa·Δb: the middle terms stay linear, the last is bounded."""
    t = a.t @ b.t
    g = np.zeros((*t.shape, 0))
    if a.g.shape[-1]:
        g = _sum(g, np.moveaxis(np.moveaxis(a.g, -1, 0) @ b.t, 0, -1))
    if b.g.shape[-1]:
        g = _sum(g, np.moveaxis(a.t @ np.moveaxis(b.g, -1, 0), 0, -1))
    e = np.abs(a.t) @ b.e + a.e @ np.abs(b.t) + a.radius @ b.radius
    return Carried(t, g, e)


def add(a: Carried, b: Carried) -> Carried:
    return Carried(a.t + b.t, _sum(a.g, b.g), a.e + b.e)


def times(a: Carried, s: Carried) -> Carried:
    """a times a scalar s, both carried."""
    g = _sum(a.g * s.t, a.t[..., None] * s.g)
    return Carried(a.t * s.t, g, a.e * np.abs(s.t) + np.abs(a.t) * s.e + a.radius * s.radius)


def apply(f: Callable[[np.ndarray], np.ndarray], slope: Callable[[np.ndarray], np.ndarray], a: Carried) -> Carried:
    """f(a) for an increasing f that is convex or concave where a may be: linear part f'(t)·Δ, and the rest,
    which for such an f is largest at an end of [t − r, t + r]."""
    t, r, d = f(a.t), a.radius, slope(a.t)
    rest = np.maximum(np.abs(f(a.t + r) - t - d * r), np.abs(f(a.t - r) - t + d * r))
    return Carried(t, a.g * np.where(np.isfinite(d), d, 0.0)[..., None], np.abs(d) * a.e + _finite(rest))


def tanh(a: Carried) -> Carried:
    """tanh(a): linear part (1 − tanh²)·Δ, the rest at most max|tanh''|·r²/2."""
    t = np.tanh(a.t)
    d = 1 - t**2
    return Carried(t, a.g * d[..., None], d * a.e + TANH_CURVATURE * a.radius**2 / 2)


def quotient(a: Carried, b: Carried) -> Carried:
    """a / b cell by cell. The rest beyond the linear part is at most (|b|·ra + |a|·rb)·rb / (b²·(|b| − rb));
    where |b| ≤ rb nothing can be told (an infinite radius). 0 / b is exactly 0."""
    t = a.t / b.t
    ra, rb = a.radius, b.radius
    g = _sum(a.g, -(t[..., None] * b.g)) / b.t[..., None]
    size = np.abs(b.t)
    rest = (size * ra + np.abs(a.t) * rb) * rb / (b.t**2 * (size - rb))
    e = (a.e + np.abs(t) * b.e) / size + rest
    e = np.where(size > rb, e, np.inf)
    zero = (a.t == 0) & (ra == 0)
    return Carried(np.where(zero, 0.0, t), np.where(zero[..., None], 0.0, g), np.where(zero, 0.0, e))


def row_sums(a: Carried) -> Carried:
    return Carried(a.t.sum(axis=1, keepdims=True), a.g.sum(axis=1, keepdims=True), a.e.sum(axis=1, keepdims=True))


def normalise(e: Carried) -> Carried:
    """Each row divided by its sum (softmax after e^s): the deviations of a row then add up to 0, as g keeps."""
    total = row_sums(e)
    return quotient(
        e, Carried(np.broadcast_to(total.t, e.t.shape), _broadcast(total.g, e.g), np.broadcast_to(total.e, e.t.shape))
    )


def divide_rows(e: Carried, total: Carried) -> Carried:
    """Each row of e divided by the row's number in `total` (L, 1), a sum carried apart (the student's own)."""
    return quotient(
        e, Carried(np.broadcast_to(total.t, e.t.shape), _broadcast(total.g, e.g), np.broadcast_to(total.e, e.t.shape))
    )


def scale_rows(a: Carried, factor: np.ndarray) -> Carried:
    """Each row of `a` times an exact positive factor (L, 1)."""
    return Carried(a.t * factor, a.g * factor[..., None], a.e * factor)


def square(a: Carried) -> Carried:
    """a² cell by cell: linear part 2a·Δ, the rest at most 2|a|·(the untracked part) + r²."""
    return Carried(a.t**2, 2 * a.t[..., None] * a.g, 2 * np.abs(a.t) * a.e + a.radius**2)


def sqrt(a: Carried, floor: float) -> Carried:
    """√a, at least `floor` (as the core clamps a norm); where a may reach 0, only the bound √(t + r)."""
    r = a.radius
    safe = a.t - r > 0
    positive = np.where(safe, a.t, 1.0)
    t = np.maximum(np.sqrt(np.maximum(a.t, 0.0)), floor)
    inner = apply(np.sqrt, lambda x: 0.5 / np.sqrt(x), Carried(positive, a.g, a.e))
    exact_zero = (a.t == 0) & (r == 0)
    g = np.where(safe[..., None], inner.g, 0.0)
    e = np.where(safe, inner.e, np.where(exact_zero, 0.0, np.sqrt(np.maximum(a.t + r, 0.0))))
    return Carried(t, g, e)


def _pad(g: np.ndarray, width: int) -> np.ndarray:
    if g.shape[-1] >= width:
        return g
    return np.concatenate([g, np.zeros((*g.shape[:-1], width - g.shape[-1]))], axis=-1)


def _same(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    width = max(a.shape[-1], b.shape[-1])
    return _pad(a, width), _pad(b, width)


def _sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    left, right = _same(a, b)
    total: np.ndarray = left + right
    return total


def _broadcast(g: np.ndarray, like: np.ndarray) -> np.ndarray:
    return np.broadcast_to(g, (*like.shape[:-1], g.shape[-1]))


def _finite(a: np.ndarray) -> np.ndarray:
    return np.where(np.isnan(a), 0.0, a)
