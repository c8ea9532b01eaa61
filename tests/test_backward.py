"""The backward pass (attncli.backward) without PyTorch: central differences, hand-worked numbers, bad input.

Central differences: each input number x moved by ±h, the loss recomputed by attncli's forward
pass, (L(x + h) − L(x − h)) / 2h against the gradient the backward pass gives, over the whole array
within 1e-6 of its largest entry.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests import backward_cases as cases

STEP = 1e-5  # h: truncation error ~h² and rounding error ~1e-16/h both below 1e-9 of the loss's scale
RELATIVE = 1e-6


def central_differences(fields: dict, path: tuple) -> np.ndarray:
    """dL/d(input at `path`), one number at a time."""
    value = np.asarray(cases.get(fields, path), dtype=float)
    out = np.empty_like(value)
    for index in np.ndindex(value.shape):
        moved = []
        for sign in (1, -1):
            changed = value.copy()
            changed[index] += sign * STEP
            moved.append(cases.loss(cases.replaced(fields, path, changed)))
        out[index] = (moved[0] - moved[1]) / (2 * STEP)
    return out


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_every_input_gradient_is_the_central_difference(name: str) -> None:
    fields = cases.with_grad_output(cases.CASES[name])
    record = cases.solve(fields).backward
    paths = list(cases.inputs(fields))
    assert paths
    for path, _ in paths:
        want = central_differences(fields, path)
        got = cases.recorded(record, fields, path)
        assert got is not None, path
        assert got.shape == want.shape, path
        assert np.abs(got - want).max() <= RELATIVE * max(np.abs(want).max(), 1e-3), (path, got, want)
