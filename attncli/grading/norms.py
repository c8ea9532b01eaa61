"""A layer's norm as a student works it by hand, and its slips: each row's mean, its root, the normalised row.

LayerNorm: mean = Σx/d, root = √(Σ(x − mean)²/d + ε), N(x) = (x − mean)/root·gain + bias; RMSNorm:
root = √(Σx²/d + ε), N(x) = x/root·gain. A student writes the mean and the root down (or keeps them) at
the carry precision and divides by what they wrote, so each is a number carried, and the student's own
where they wrote it (attncli.grading.layers judges each step from the ones before it). The slips replay
the same arithmetic another way: the variance over d − 1 (`layernorm_unbiased`), RMSNorm for LayerNorm or
the reverse (`norm_swapped`), the gain or the bias left out (`norm_affine_forgotten`). Pure numpy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from attncli.grading import interval
from attncli.grading.interval import Carried
from attncli.grading.rule import half_unit
from attncli.problem import Norm

CODES = ("layernorm_unbiased", "norm_swapped", "norm_affine_forgotten")  # beside attncli.grading.CODES


@dataclass(frozen=True)
class Slip:
    """How a student's norm departs from the layer's; the default is none."""

    code: str = ""
    swapped: bool = False  # norm_swapped: RMSNorm worked for LayerNorm, or LayerNorm for RMSNorm
    unbiased: bool = False  # layernorm_unbiased: the variance over d − 1
    gain: bool = True  # False: norm_affine_forgotten, the gain left out
    shift: bool = True  # False: norm_affine_forgotten, the bias left out


NONE = Slip()


def slips(norm: Norm) -> list[Slip]:
    """Every slip of `norm` a student can make: the unbiased variance (LayerNorm), the other norm, the gain or the
    bias or both left out (where the norm has them)."""
    found = [Slip("norm_swapped", swapped=True)]
    if norm.kind == "layer":
        found.append(Slip("layernorm_unbiased", unbiased=True))
    learned = [(norm.gain is not None, "gain"), (norm.shift is not None, "shift")]
    left_out = [name for given, name in learned if given]
    for names in ([name] for name in left_out):
        found.append(Slip("norm_affine_forgotten", **dict.fromkeys(names, False)))
    if len(left_out) == 2:
        found.append(Slip("norm_affine_forgotten", gain=False, shift=False))
    return found


def worked(
    rows: Carried, norm: Norm, carry: int | None, written: Mapping[str, Carried] | None = None, slip: Slip = NONE
) -> dict[str, Carried]:
    """The mean (LayerNorm), the root and the normalised rows of `rows` (S, d) as a student works them: each from
    the student's own mean and root where they wrote them (`written`), else from their own kept at the carry
    precision (`carry` None: not rounded, as attncli.layers.normalise on carried numbers); under `slip` another
    way."""
    written = written or {}
    layer = (norm.kind == "layer") != slip.swapped
    width = rows.t.shape[1]
    out: dict[str, Carried] = {}
    centred = rows
    if layer:
        out["mean"] = interval.matmul(rows, interval.exact(np.full((width, 1), 1 / width)))  # (S, 1)
        mean = written.get("mean", _kept(out["mean"], carry))
        centred = interval.add(rows, _negated(_wide(mean, width)))  # (S, d)
    squares = interval.row_sums(interval.square(centred))  # (S, 1)
    count = width - 1 if slip.unbiased and width > 1 else width
    variance = interval.times(squares, interval.exact(1 / count))
    out["root"] = interval.sqrt(interval.add(variance, interval.exact(np.full(variance.t.shape, norm.eps))), 0.0)
    root = written.get("root", _kept(out["root"], carry))
    normed = interval.divide_rows(centred, root)  # (S, d)
    if norm.gain is not None and slip.gain:
        normed = interval.matmul(normed, interval.exact(np.diag(norm.gain)))
    if norm.shift is not None and slip.shift and layer:
        normed = interval.add(normed, interval.exact(np.broadcast_to(norm.shift, normed.t.shape)))
    out["normed"] = normed
    return out


def _kept(num: Carried, carry: int | None) -> Carried:
    """A number a student keeps at the carry precision: within half a unit of it more (a rounding not tracked)."""
    return num if carry is None else Carried(num.t, num.g, num.e + half_unit(carry))


def _wide(column: Carried, width: int) -> Carried:
    """A column (S, 1) repeated `width` times (S, d): the same number subtracted from every coordinate of a row."""
    shape = (column.t.shape[0], width)
    g = np.broadcast_to(column.g, (*shape, column.g.shape[-1]))
    return Carried(np.broadcast_to(column.t, shape), g, np.broadcast_to(column.e, shape))


def _negated(num: Carried) -> Carried:
    return Carried(-num.t, -num.g, num.e)
