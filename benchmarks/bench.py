"""Benchmarks of attncli, each figure a ratio measured side by side in one run.

    pip install '.[bench]'
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench.py

(Some machines here set OPENBLAS_CORETYPE, which slows a current numpy; unset it
for this command only.) `--toy` runs every measurement at a tiny size, to check
that the script works; its figures mean nothing.

Targets (issue 5): speed ≥ 2× torch's scaled_dot_product_attention (2 threads,
float32, n = 4096, d = 64) and ≤ 2.5× a float32 matrix product of the same FLOPs;
peak memory ≤ 512 MiB above the inputs at n = 32768; `attncli compute
samples/bank.yaml` ≤ 1.3× `python -c "import numpy, yaml, rich.table"`;
`attncli --help` without numpy.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
THREADS = 2


def best_time(run: Callable[[], object], repeats: int) -> float:
    """The fastest of `repeats` runs after one warm-up: the least disturbed by the rest of the machine."""
    run()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def speed(n: int, d: int, repeats: int) -> list[tuple[str, float, str]]:
    from attncli import attention

    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((n, d)).astype(np.float32) for _ in range(3))
    side = round((2 * n * n * d) ** (1 / 3))  # a side³ product costs 2·side³ = 4·n²·d FLOPs
    a = rng.standard_normal((side, side)).astype(np.float32)
    ours = best_time(lambda: attention(q, k, v), repeats)
    matmul = best_time(lambda: a @ a, repeats)
    rows = [
        ("attncli.attention (s)", ours, f"n={n}, d={d}, float32"),
        (f"square matmul {side}³, same FLOPs (s)", matmul, "the machine's limit"),
        ("attention / matmul", ours / matmul, "target ≤ 2.5"),
    ]
    try:
        import torch
    except ImportError:
        return [*rows, ("torch", float("nan"), "not installed: pip install '.[bench]'")]
    torch.set_num_threads(THREADS)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    flat = best_time(lambda: sdpa(tq, tk, tv), repeats)
    batched = best_time(lambda: sdpa(tq[None, None], tk[None, None], tv[None, None]), repeats)
    reference = sdpa(tq.double(), tk.double(), tv.double()).numpy()
    error = float(np.abs(attention(q, k, v) - reference).max())
    torch_error = float(np.abs(sdpa(tq, tk, tv).numpy() - reference).max())
    return [
        *rows,
        ("torch SDPA, (L, E) inputs (s)", flat, f"torch {torch.__version__}, {THREADS} threads"),
        ("torch SDPA (L, E) / attncli", flat / ours, "target ≥ 2"),
        ("torch SDPA, (1, 1, L, E) inputs (s)", batched, "torch's fused CPU kernel"),
        ("torch SDPA (1, 1, L, E) / attncli", batched / ours, "for comparison"),
        ("max |error| vs float64, attncli", error, "float32"),
        ("max |error| vs float64, torch", torch_error, "float32"),
    ]


MEMORY_PROBE = """
import sys, tracemalloc
import numpy as np
from attncli import attention
n, d = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
q, k, v = (rng.standard_normal((n, d), dtype=np.float32) for _ in range(3))
tracemalloc.start()  # numpy reports its buffers to tracemalloc: the peak is what the call itself allocates
attention(q, k, v)
print(tracemalloc.get_traced_memory()[1] / 2**20)
"""


def memory(n: int, d: int) -> list[tuple[str, float, str]]:
    """Peak memory one call allocates on top of its inputs (numpy buffers included, via tracemalloc)."""
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(n), str(d)], capture_output=True, text=True, check=True
    )
    full = n * n * 4 / 2**20
    return [
        (f"peak above inputs, n={n} (MiB)", float(result.stdout), "target ≤ 512"),
        ("the full score matrix would be (MiB)", full, "never built"),
    ]


def startup(repeats: int) -> list[tuple[str, float, str]]:
    """Wall time of the CLI on the worked example against importing its heavy libraries."""
    baseline_command = [sys.executable, "-c", "import numpy, yaml, rich.table"]
    compute_command = [sys.executable, "-m", "attncli", "compute", str(ROOT / "samples" / "bank.yaml")]
    runs = {"baseline": float("inf"), "compute": float("inf")}
    for _ in range(repeats):  # interleaved, so both see the same machine
        for name, command in (("baseline", baseline_command), ("compute", compute_command)):
            start = time.perf_counter()
            subprocess.run(command, capture_output=True, check=True)
            runs[name] = min(runs[name], time.perf_counter() - start)
    imports = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "attncli", "--help"], capture_output=True, text=True, check=True
    ).stderr
    numpy_loaded = any(line.rstrip().endswith(" numpy") for line in imports.splitlines())
    return [
        ("python -c 'import numpy, yaml, rich.table' (s)", runs["baseline"], "baseline"),
        ("attncli compute samples/bank.yaml (s)", runs["compute"], ""),
        ("compute / baseline", runs["compute"] / runs["baseline"], "target ≤ 1.3"),
        ("attncli --help imports numpy", float(numpy_loaded), "target 0"),
    ]


def large_cli(n: int, d: int) -> list[tuple[str, float, str]]:
    """`attncli compute` on n tokens from .npy files, human summary output."""
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        names = []
        for name in ("q", "k", "v"):
            path = os.path.join(folder, f"{name}.npy")
            np.save(path, rng.standard_normal((n, d)).astype(np.float32))
            names.append(f"@{path}")
        command = [sys.executable, "-m", "attncli", "compute", "--dtype", "float32"]
        command += ["--queries", names[0], "--keys", names[1], "--values", names[2]]
        start = time.perf_counter()
        subprocess.run(command, capture_output=True, check=True)
        elapsed = time.perf_counter() - start
    return [(f"attncli compute, {n} tokens from .npy (s)", elapsed, "a few seconds")]


def main(argv: list[str] | None = None) -> list[tuple[str, float, str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--toy", action="store_true", help="tiny sizes: checks the script, measures nothing")
    args = parser.parse_args(argv)
    n, big, repeats = (64, 256, 1) if args.toy else (4096, 32768, 7)
    rows = speed(n, 64, repeats) + memory(big, 64) + startup(1 if args.toy else 10) + large_cli(n, 64)
    print(f"{'measure':<48} {'value':>12}  note")
    for name, value, note in rows:
        print(f"{name:<48} {value:>12.4g}  {note}")
    print(f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', '(unset)')}, cores={os.cpu_count()}")
    return rows


if __name__ == "__main__":
    main()
