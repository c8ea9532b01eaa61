"""The two attention paths agree: the blocked kernel (`attncli.attention`) and the every-step core.

The core's `attend` keeps every (L, S) intermediate; the kernel keeps none and shares blocks
of query rows among threads. On random dot-product problems (masks, causal, scales, large
scores that need the shift) they must give the same output and weights within float64
rounding, whatever the block size and the number of threads.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli import attention, core, kernel
from attncli.problem import Head, Score
from tests.paths import ROOT

EPS = np.finfo(np.float64).eps


@settings(max_examples=80, deadline=None)
@given(
    n_q=st.integers(1, 24),
    n_k=st.integers(1, 24),
    d=st.integers(1, 6),
    d_v=st.integers(1, 4),
    heads=st.integers(1, 3),
    causal=st.booleans(),
    use_mask=st.booleans(),
    scale=st.one_of(st.none(), st.floats(0.01, 4.0)),
    magnitude=st.sampled_from([0.5, 3.0, 40.0]),  # 40: scores in the thousands, past e^s's range
    block_rows=st.sampled_from([None, 1, 2, 5]),
    threads=st.sampled_from([1, 2, 3]),
    seed=st.integers(0, 2**32 - 1),
)
def test_kernel_agrees_with_every_step_core(
    n_q: int,
    n_k: int,
    d: int,
    d_v: int,
    heads: int,
    causal: bool,
    use_mask: bool,
    scale: float | None,
    magnitude: float,
    block_rows: int | None,
    threads: int,
    seed: int,
) -> None:
    rng = np.random.default_rng(seed)
    q, k = rng.standard_normal((heads, n_q, d)) * magnitude, rng.standard_normal((heads, n_k, d)) * magnitude
    v = rng.standard_normal((heads, n_k, d_v))
    allowed = np.ones((n_q, n_k), dtype=bool)
    if use_mask:
        allowed = rng.random((n_q, n_k)) < 0.6
        allowed[:, 0] = True  # every query keeps a key, as the problem parser guarantees
    factor = 1 / math.sqrt(d) if scale is None else scale
    out, weights = attention(
        q,
        k,
        v,
        mask=allowed if use_mask else None,
        causal=causal,
        scale=scale,
        return_weights=True,
        block_rows=block_rows,
        threads=threads,
    )
    if causal:
        allowed = allowed & (np.arange(n_q)[:, None] >= np.arange(n_k)[None, :])
    for h in range(heads):
        steps = core.attend(Head("h", Score("scaled_dot", factor), q[h], k[h], v[h]), allowed)
        # The two paths round q·k·scale differently (the kernel scales q first): |δs| is a few
        # ulps of the largest |q|·|k|·scale, and moves each weight by that much relatively.
        spread = factor * np.abs(q[h]).max() * np.abs(k[h]).max() * d
        tolerance = 16 * EPS * (1 + spread + n_k)
        np.testing.assert_allclose(weights[h], steps.weights, rtol=0, atol=tolerance)
        np.testing.assert_allclose(out[h], steps.output, rtol=0, atol=tolerance * np.abs(v[h]).max())
        assert (weights[h][~allowed] == 0).all()


@settings(max_examples=60, deadline=None)
@given(
    n_q=st.integers(1, 30),
    n_k=st.integers(1, 30),
    causal=st.booleans(),
    block_rows=st.integers(1, 8),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**32 - 1),
)
def test_threads_and_blocks_do_not_change_a_bit(
    n_q: int, n_k: int, causal: bool, block_rows: int, dtype: type, seed: int
) -> None:
    """Each row's numbers come from the same products in the same order, however rows are shared out."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((2, n, 4)).astype(dtype) for n in (n_q, n_k, n_k))
    one = attention(q, k, v, causal=causal, block_rows=block_rows, threads=1, return_weights=True)
    two = attention(q, k, v, causal=causal, block_rows=block_rows, threads=2, return_weights=True)
    assert all(np.array_equal(a, b) for a, b in zip(one, two))


def given_scores(scores: np.ndarray) -> core.HeadSteps:
    """`attend` on scores given directly, every key visible, values the identity (output = weights)."""
    n_q, n_k = scores.shape
    head = Head("given", Score("given", 1.0), None, None, np.eye(n_k, dtype=scores.dtype), scores)
    return core.attend(head, np.ones((n_q, n_k), dtype=bool))


@settings(max_examples=100, deadline=None)
@given(
    n_q=st.integers(1, 6),
    n_k=st.integers(1, 6),
    offset=st.floats(-800, 800),
    spread=st.floats(0, 200),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**32 - 1),
)
def test_shown_exponentials_divided_by_their_sum_are_the_weights(
    n_q: int, n_k: int, offset: float, spread: float, dtype: type, seed: int
) -> None:
    """One softmax in `attend`: weight = e^s / Σ e^s with the very e^s displayed, to the last bit."""
    rng = np.random.default_rng(seed)
    scores = (offset + spread * rng.standard_normal((n_q, n_k))).astype(dtype)
    limit = float(np.log(np.finfo(dtype).max))
    scores = np.clip(scores, -limit, limit)  # finite after the scale, as the parser requires
    steps = given_scores(scores)
    assert np.array_equal(steps.exp / steps.exp.sum(axis=1, keepdims=True), steps.weights)
    assert np.isfinite(steps.exp.sum(axis=1)).all()
    gap = scores.astype(np.float64) - scores.astype(np.float64).max(axis=1, keepdims=True)  # ≤ 0
    reference = np.exp(gap) / np.exp(gap).sum(axis=1, keepdims=True)  # softmax shifted by the maximum
    # e^x carries x's rounding |x|-fold: the gap's own rounding is |gap|·eps, each side's exp and sum a few eps
    allowed = 8 * np.finfo(dtype).eps * (n_k - gap) * reference + np.finfo(dtype).tiny
    assert (np.abs(steps.weights - reference) <= allowed).all()


def test_shift_keeps_the_digits_of_small_weights() -> None:
    """float32 scores −70 and −100: e^−100 is subnormal, its weight e^−30/(1 + e^−30) is not, so the row is shifted."""
    scores = np.array([[-70.0, -100.0]], dtype=np.float32)
    steps = given_scores(scores)
    assert steps.shift.tolist() == [-70.0]
    small = math.exp(-30) / (1 + math.exp(-30))
    np.testing.assert_allclose(steps.weights[0], [1 - small, small], rtol=1e-6)


def test_shown_exponentials_are_not_shifted_when_nothing_is_lost() -> None:
    """The worked example's row (2, 1, 0) and a row near −70 in float64 show e^s itself."""
    scores = np.array([[2.0, 1.0, 0.0], [-70.0, -71.0, -75.0]])
    steps = given_scores(scores)
    assert steps.shift.tolist() == [0.0, 0.0]
    assert steps.exp[0].tolist() == [math.exp(2.0), math.exp(1.0), 1.0]


def test_a_query_with_every_key_masked_is_named_whichever_thread_meets_it() -> None:
    """Rows 3 and 6 have no key; row 3 is named with blocks of one row over two threads."""
    mask = np.ones((8, 4), dtype=bool)
    mask[[3, 6]] = False
    for _ in range(20):
        with pytest.raises(ValueError, match="query row 3 "):
            kernel.attention(np.ones((8, 2)), np.ones((4, 2)), np.ones((4, 2)), mask=mask, block_rows=1, threads=2)


def test_import_attncli_does_not_import_threadpoolctl() -> None:
    code = "import attncli, sys; print('threadpoolctl' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip() == "False"


def test_benchmark_script_runs_in_quick_mode() -> None:
    """--quick checks the script at toy sizes (torch, slow to import, left out); nothing here looks at a time."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench
    finally:
        sys.path.pop(0)
    rows = bench.main(["--quick", "--without-torch"])
    names = [row.name for row in rows]
    assert "attention / matmul, float32" in names and "compute / baseline" in names
    assert all(row.median == row.median for row in rows if not row.missing)  # no NaN but what is not installed


def test_calls_from_several_threads_at_once_each_get_their_own_result() -> None:
    """The helper threads and the BLAS limit are shared: four callers at once, each result as if alone,
    and BLAS back at its own number of threads afterwards."""
    from threadpoolctl import threadpool_info

    before = [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"]
    rng = np.random.default_rng(7)
    problems = [tuple(rng.standard_normal((2, 40, 8)) for _ in range(3)) for _ in range(4)]
    alone = [attention(*problem, block_rows=3, threads=2) for problem in problems]
    results: list[np.ndarray | None] = [None] * len(problems)

    def call(index: int) -> None:
        results[index] = attention(*problems[index], block_rows=3, threads=2)

    callers = [threading.Thread(target=call, args=(index,)) for index in range(len(problems))]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert all(np.array_equal(a, b) for a, b in zip(alone, results))
    assert [library["num_threads"] for library in threadpool_info() if library["user_api"] == "blas"] == before


FORK = """
import os, sys, threading
import numpy as np
from attncli import kernel
q = np.ones((64, 8))
kernel.attention(q, q, q, block_rows=4, threads=2)  # the parent's helpers exist now
pid = os.fork()
if pid == 0:
    out = kernel.attention(q, q, q, block_rows=4, threads=2)
    helped = any(thread.name == "attncli-kernel" for thread in threading.enumerate())
    os._exit(0 if np.allclose(out, 1) and helped else 1)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_computes_with_threads_of_its_own() -> None:
    """A child has none of its parent's helper threads: it starts its own rather than wait for them."""
    subprocess.run([sys.executable, "-c", FORK], cwd=ROOT, check=True, timeout=60)
