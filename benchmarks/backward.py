"""Benchmarks of `attention_backward`: its time against the forward pass and against torch's, one interleaved run.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/backward.py

The contenders take turns as in bench.py (A, B, C, then B, C, A, …; min and median, a ratio's
median the median of each round's own ratio). `attention_backward` takes q, k, v and dO and keeps
nothing between calls, so it runs the forward pass itself (for the log-sum-exp and D); torch's
backward reuses what its forward kept. Both comparisons are shown: against torch's forward +
backward (what gives torch the same gradients from the same inputs) and against its backward
alone (each round's forward time taken from its forward + backward). Goal: no slower than
torch's. Then the peak RSS the call adds at n = 16,384, d = 64 (a fresh process, its VmHWM),
against 3× the bytes of q, k, v and dO plus 64 MiB. `--quick`: toy sizes, figures meaningless.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from types import ModuleType

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import ROOT, THREADS, Row, _figure, _torch, interleaved, ratio, report, timed

LIMIT_EXTRA = 64 * 2**20  # bytes above 3× the inputs the call may add


def speed(n: int, d: int, repeats: int, settle: float, torch: ModuleType | None) -> list[Row]:
    """attention_backward against attention, torch's forward + backward and torch's forward, taking turns."""
    from attncli import attention, attention_backward

    rows: list[Row] = []
    for label, dtype, causal in (("float32", np.float32, False), ("float64", np.float64, False),
                                 ("float32 causal", np.float32, True)):  # fmt: skip
        rng = np.random.default_rng(0)
        q, k, v, grad_output = (rng.standard_normal((1, 1, n, d), dtype=dtype) for _ in range(4))
        contenders = {
            "backward": partial(attention_backward, q, k, v, grad_output, causal=causal),
            "forward": partial(attention, q, k, v, causal=causal),
        }
        if torch is not None:
            tensors = [torch.from_numpy(x) for x in (q, k, v)]
            contenders["torch"] = partial(_torch_gradients, torch, tensors, torch.from_numpy(grad_output), causal)
            sdpa = torch.nn.functional.scaled_dot_product_attention
            contenders["torch forward"] = partial(sdpa, *tensors, is_causal=causal)
        rows += _rows(label, interleaved(contenders, repeats, settle), f"n={n}, d={d}")
    return rows


def _rows(label: str, times: dict[str, list[float]], size: str) -> list[Row]:
    """One case's figures: attncli's two passes and their ratio, then torch's and the ratios to it."""
    found = [
        timed(f"attention_backward, {label} (s)", times["backward"], size),
        timed(f"attention, {label} (s)", times["forward"], "the forward pass"),
        ratio(f"backward / forward, {label}", times["backward"], times["forward"], "FA-2: ~2.5 + 1 recomputed"),
    ]
    if "torch" not in times:
        return [*found, Row(f"attncli / torch backward, {label}", np.nan, np.nan, "torch not installed", missing=True)]
    alone = [both - forward for both, forward in zip(times["torch"], times["torch forward"])]
    return [
        *found,
        timed(f"torch SDPA forward + backward, {label} (s)", times["torch"], f"{THREADS} threads"),
        timed(f"torch SDPA backward alone, {label} (s)", alone, "each round's forward taken away"),
        ratio(f"attncli / torch forward + backward, {label}", times["backward"], times["torch"], "goal ≤ 1"),
        ratio(f"attncli / torch backward alone, {label}", times["backward"], alone, "goal ≤ 1"),
    ]


def _torch_gradients(torch: ModuleType, tensors: list, grad_output: object, causal: bool) -> object:
    """torch's dq, dk, dv: SDPA forward, then autograd's backward through it."""
    leaves = [tensor.detach().requires_grad_() for tensor in tensors]
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, is_causal=causal)
    return torch.autograd.grad(out, leaves, grad_output)


PEAK_PROBE = """
import resource, sys
import numpy as np
from attncli import attention_backward


def peak_kib():
    # the peak RSS of this process's own memory: /proc's VmHWM where there is one. getrusage's ru_maxrss also
    # keeps, across exec, the RSS of the process this one was forked from (a benchmark holding torch: 600 MiB)
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


n, d, dtype = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(0)
q, k, v, grad_output = (rng.standard_normal((n, d), dtype=dtype) for _ in range(4))
attention_backward(q[:8], k[:8], v[:8], grad_output[:8])  # imports, threads: not the call's
before = peak_kib()
attention_backward(q, k, v, grad_output)
print(peak_kib() - before)
"""


def peak(n: int, d: int) -> list[Row]:
    """The peak RSS one call adds, in a fresh process, float64 and float32, against 3× q, k, v, dO + 64 MiB."""
    rows = []
    for label in ("float64", "float32"):
        probe = [sys.executable, "-c", PEAK_PROBE, str(n), str(d), label]
        added = int(subprocess.run(probe, capture_output=True, text=True, check=True, cwd=ROOT).stdout) / 1024
        inputs = 4 * n * d * np.dtype(label).itemsize
        limit = (3 * inputs + LIMIT_EXTRA) / 2**20
        rows += [
            _figure(f"peak RSS added, n={n}, d={d}, {label} (MiB)", added, f"limit {limit:.4g}"),
            _figure("  / the limit", added / limit, "target < 1"),
        ]
    return rows


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="toy sizes: checks the script, measures nothing")
    parser.add_argument("--without-torch", action="store_true", help="leave torch out even if it is installed")
    args = parser.parse_args(argv)
    n, big, repeats, settle = (64, 256, 2, 0.0) if args.quick else (4096, 16384, 11, 0.15)
    load = os.getloadavg()[0]
    rows = speed(n, 64, repeats, settle, _torch(not args.without_torch)) + peak(big, 64)
    end = os.getloadavg()[0]
    rows.append(Row("load average over 1 min, at the start and the end", load, end, f"{os.cpu_count()} cores"))
    report(rows)
    return rows


if __name__ == "__main__":
    main()
