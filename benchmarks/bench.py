"""Benchmarks of attncli: every comparison interleaved (A, B, C, then B, C, A, …) in one run, min and median.

    pip install '.[bench]'
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE python benchmarks/bench.py

(Some machines here set OPENBLAS_CORETYPE, which slows a current numpy; unset it for
this command only.) The contenders of a comparison take turns, the order turning each round,
so a burst of load from the rest of the machine falls on all of them; a ratio's "min" is of the
minima, its "median" the median of each round's ratio (a round's contenders ran seconds apart,
under the same load). The load average is printed at the start and the end: figures taken at a
load near the number of cores are not worth comparing. `--quick` runs every measurement at a
toy size, to check that the script works: its figures mean nothing.

Targets: attention at n = 4096, d = 64 ≤ 1.5× a matrix product of the same FLOPs
(float32 and float64) and ≥ 1.5× faster than torch's scaled_dot_product_attention with
(1, 1, L, E) inputs (2 threads, float32: plain, causal, 8 heads × 2048), and no slower
than it at n = 256. The row torch / matmul says what the second asks: where torch's fused
kernel costs 1.36 matrix products, 1.5× faster than torch is 0.9 of one. The floor rows time
the numpy calls attention cannot do without (q·kᵀ, e^s, the weighted sum), alone, on one core:
what they add up to is as fast as attention built from numpy can be. Peak memory ≤ 512 MiB
above the inputs at n = 32768, and `attncli compute -f npy` on 32,768 tokens within 3× its
inputs' size (peak RSS, the interpreter included); `attncli compute samples/bank.yaml` ≤ 1.15× and
`attncli --help` ≤ 1.0× `python -c "import numpy, yaml, rich.table"`; `attncli compute -f
npy` on 4096 tokens ≤ 1.3× a Python script doing the same, the human summary ≤ 2×.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # measure the checkout this script is in, not an installed attncli
THREADS = 2


@dataclass(frozen=True)
class Row:
    """One line of the report: a time (s), a ratio of two, or another figure."""

    name: str
    minimum: float
    median: float
    note: str = ""
    missing: bool = False  # a contender that is not installed: NaN, not a failure


Contenders = dict[str, Callable[[], object]]


@dataclass(frozen=True)
class Plan:
    """How long to measure: sizes, turns, and the pause before each timed run."""

    n: int  # tokens of the large cases
    small: int  # tokens of the per-call-overhead case
    big: int  # tokens of the memory probe
    repeats: int  # turns of each kernel comparison
    runs: int  # turns of each command-line comparison
    settle: float  # s before each timed run (0: no warm-up round either)


def interleaved(contenders: Contenders, repeats: int, settle: float) -> dict[str, list[float]]:
    """Wall times of each contender, taking turns `repeats` times after a warm-up round, the order
    turning each round (so none always runs after the same one).

    Each run starts after a pause of `settle`: OpenBLAS's idle threads spin for ~0.1 s after
    a call and libgomp's (torch's) for a few ms, and whoever ran next would pay for them.
    """
    for run in contenders.values() if settle else ():
        run()
    names = list(contenders)
    times: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(repeats):
        for name in names[turn % len(names) :] + names[: turn % len(names)]:
            run = contenders[name]
            time.sleep(settle)
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return times


def timed(name: str, times: list[float], note: str = "") -> Row:
    return Row(name, min(times), statistics.median(times), note)


def ratio(name: str, top: list[float], bottom: list[float], note: str = "") -> Row:
    """top / bottom: of the minima, and the median of each round's ratio (the two ran in the same round)."""
    return Row(name, min(top) / min(bottom), statistics.median(a / b for a, b in zip(top, bottom)), note)


def _torch(wanted: bool) -> ModuleType | None:
    """torch at THREADS threads, or None when it is not installed or not wanted (it is only a rival here)."""
    if not wanted:
        return None
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(THREADS)
    return torch


def kernel(plan: Plan, d: int, heads: int, torch: ModuleType | None) -> list[Row]:
    """`attention` against a matrix product of the same FLOPs and against torch's fused SDPA."""
    from attncli import attention

    rng = np.random.default_rng(0)
    rows: list[Row] = []
    n = plan.n
    cases = [("float32", np.float32, False, 1, n), ("float64", np.float64, False, 1, n)]
    cases += [("float32 causal", np.float32, True, 1, n), (f"float32 {heads} heads", np.float32, False, heads, n // 2)]
    for label, dtype, causal, count, length in cases:
        q, k, v = (rng.standard_normal((1, count, length, d)).astype(dtype) for _ in range(3))
        flops = 4 * count * length * length * d // (2 if causal else 1)  # q·kᵀ and weights·v
        side = round((flops / 2) ** (1 / 3))  # a side³ product costs 2·side³ FLOPs
        square = rng.standard_normal((side, side)).astype(dtype)
        contenders: Contenders = {
            "attncli": partial(attention, q, k, v, causal=causal),
            "matmul": partial(np.matmul, square, square),
        }
        if torch is not None:
            tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
            sdpa = torch.nn.functional.scaled_dot_product_attention
            contenders["torch"] = partial(sdpa, tq, tk, tv, is_causal=causal)
        times = interleaved(contenders, plan.repeats, plan.settle)
        size = f"n={length}, d={d}" + (f", {count} heads" if count > 1 else "")
        rows += [
            timed(f"attncli.attention, {label} (s)", times["attncli"], size),
            timed(f"square matmul {side}³, {label} (s)", times["matmul"], "same FLOPs"),
            ratio(f"attention / matmul, {label}", times["attncli"], times["matmul"], "target ≤ 1.5"),
        ]
        if torch is None:
            rows.append(Row(f"torch / attncli, {label}", np.nan, np.nan, "torch not installed", missing=True))
        else:
            rows += [
                timed(f"torch SDPA (1, {count}, L, E), {label} (s)", times["torch"], f"{THREADS} threads"),
                ratio(f"torch / matmul, {label}", times["torch"], times["matmul"], "torch's own cost"),
                ratio(
                    f"torch / attncli, {label}",
                    times["torch"],
                    times["attncli"],
                    "target ≥ 1.5" if dtype == np.float32 else "",
                ),
            ]
    return rows + floor(plan, d) + small(plan, d, torch) + errors(min(n, 2048), d, torch)


def floor(plan: Plan, d: int) -> list[Row]:
    """q·kᵀ, e^s and [e^s]·v over n × n, in the kernel's blocks, on one core (BLAS at one thread), each
    alone against the square matmul of the same FLOPs on one core: attention made of these numpy calls
    costs at least their sum. (On both cores each side gains about 1.9× here; timed alone side by side,
    the calls contend with each other more than the kernel's mix of them does, so only one core is shown.)"""
    from threadpoolctl import threadpool_limits

    from attncli.kernel import BLOCK_CELLS, BLOCK_ROWS

    rng = np.random.default_rng(3)
    n, rows = plan.n, min(plan.n, BLOCK_ROWS)
    keys = min(n, BLOCK_CELLS // rows)
    figures = []
    for label, dtype in (("float32", np.float32), ("float64", np.float64)):
        q, k, v = (rng.standard_normal((length, d)).astype(dtype) for length in (rows, keys, keys))
        s = (np.matmul(q, k.T) / np.sqrt(d)).astype(dtype)  # (B, T) scores, as in a tile
        mixed = np.empty((rows, d), dtype=dtype)
        exp = np.empty_like(s)
        side = round((2 * n * n * d) ** (1 / 3))
        square = rng.standard_normal((side, side)).astype(dtype)
        blocks = n * n // (rows * keys)

        def each_block(call: Callable[[], object], blocks: int = blocks) -> Callable[[], None]:
            return lambda: [call() for _ in range(blocks)] and None

        contenders: Contenders = {
            "q·kᵀ": each_block(partial(np.matmul, q, k.T, out=np.empty_like(s))),
            "e^s": each_block(partial(np.exp, s, out=exp)),
            "e^s·v": each_block(partial(np.matmul, exp, v, out=mixed)),
            "matmul": partial(np.matmul, square, square),
        }
        with threadpool_limits(1):
            times = interleaved(contenders, plan.repeats, plan.settle)
        total = [sum(parts) for parts in zip(*(times[name] for name in ("q·kᵀ", "e^s", "e^s·v")))]
        figures += [
            ratio(f"floor: q·kᵀ, e^s, e^s·v alone / matmul, {label}", total, times["matmul"], "one core"),
            ratio(f"  of which e^s / matmul, {label}", times["e^s"], times["matmul"], f"blocks {rows}×{keys}"),
        ]
    return figures


# Calls in a row for the short sequence: its cost per call, as a loop over many small problems sees it. One
# call alone, after the pause each run starts with, measured the machine waking up instead (a cold call took
# 2.5× a warm one here, torch's and attncli's alike).
BURST = 20


def small(plan: Plan, d: int, torch: ModuleType | None) -> list[Row]:
    """A short sequence (n = 256): per-call overhead, where torch's fused kernel is at its best."""
    from attncli import attention

    n = plan.small
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 1, n, d)).astype(np.float32) for _ in range(3))
    if torch is None:
        return [Row(f"torch / attncli, float32 n={n}", np.nan, np.nan, "torch not installed", missing=True)]
    tq, tk, tv = (torch.from_numpy(x) for x in (q, k, v))
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def burst(call: Callable[[], object]) -> Callable[[], None]:
        return lambda: [call() for _ in range(BURST)] and None

    contenders = {"attncli": burst(partial(attention, q, k, v)), "torch": burst(partial(sdpa, tq, tk, tv))}
    times = {
        name: [time / BURST for time in each]
        for name, each in interleaved(contenders, 4 * plan.repeats, plan.settle).items()
    }
    return [
        timed(f"attncli.attention, float32 n={n}, per call (s)", times["attncli"], f"{BURST} in a row"),
        timed(f"torch SDPA (1, 1, L, E), float32 n={n}, per call (s)", times["torch"], f"{BURST} in a row"),
        ratio(f"torch / attncli, float32 n={n}", times["torch"], times["attncli"], "target ≥ 1"),
    ]


def errors(n: int, d: int, torch: ModuleType | None, seeds: int = 4) -> list[Row]:
    """|error| of float32 against float64 on the same inputs, plain and causal, over a few random problems:
    the largest (the "min" column) and the root mean square (the "median" column). One problem's largest
    error is one draw of the last output digit: between attncli and torch it went either way from seed to seed."""
    from attncli import attention

    rows = []
    for causal in (False, True):
        label = "causal" if causal else "plain"
        found: dict[str, list[np.ndarray]] = {"attncli": [], "torch": []}
        for seed in range(seeds):
            rng = np.random.default_rng(20 + seed)
            q, k, v = (rng.standard_normal((1, 1, n, d)) for _ in range(3))
            exact = attention(q, k, v, causal=causal)
            single = [x.astype(np.float32) for x in (q, k, v)]
            found["attncli"].append(attention(*single, causal=causal) - exact)
            if torch is not None:
                sdpa = torch.nn.functional.scaled_dot_product_attention
                found["torch"].append(sdpa(*(torch.from_numpy(x) for x in single), is_causal=causal).numpy() - exact)
        for name, differences in found.items():
            if differences:
                largest = max(float(np.abs(x).max()) for x in differences)
                rms = float(np.sqrt(np.mean([np.mean(x**2) for x in differences])))
                note = f"n={n}, {seeds} problems: largest, rms"
                rows.append(Row(f"float32 |error|, {name}, {label}", largest, rms, note))
    return rows


PEAK_RSS = """
import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, capture_output=True)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)  # KiB, of the one child
"""


def peak_rss(plan: Plan, d: int) -> list[Row]:
    """Peak RSS of `attncli compute -f npy` on `plan.big` tokens from .npy files, float64 and float32, the
    interpreter and its imports included, against 3× the size of the inputs it computes with."""
    rng = np.random.default_rng(4)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for label, dtype in (("float64", np.float64), ("float32", np.float32)):
            paths = [os.path.join(folder, f"{name}.npy") for name in ("q", "k", "v")]
            for path in paths:
                np.save(path, rng.standard_normal((plan.big, d)).astype(dtype))
            cli = [sys.executable, "-m", "attncli", "compute", "--dtype", label, "-f", "npy"]
            cli += ["--queries", f"@{paths[0]}", "--keys", f"@{paths[1]}", "--values", f"@{paths[2]}"]
            probe = [sys.executable, "-c", PEAK_RSS, *cli, "-o", os.path.join(folder, "out.npy")]
            peak = int(subprocess.run(probe, capture_output=True, text=True, check=True, cwd=ROOT).stdout) / 1024
            inputs = 3 * plan.big * d * np.dtype(dtype).itemsize / 2**20
            rows += [
                _figure(f"compute -f npy {plan.big} tokens, peak RSS {label} (MiB)", peak),
                _figure(f"  / the inputs' size ({inputs:.3g} MiB)", peak / inputs, "target ≤ 3"),
            ]
    return rows


def _figure(name: str, value: float, note: str = "") -> Row:
    return Row(name, value, value, note)


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


def memory(n: int, d: int) -> list[Row]:
    """Peak memory one call allocates on top of its inputs (numpy buffers included, via tracemalloc)."""
    result = subprocess.run(
        [sys.executable, "-c", MEMORY_PROBE, str(n), str(d)], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return [
        _figure(f"peak above inputs, n={n} (MiB)", float(result.stdout), "target ≤ 512"),
        _figure("the full score matrix would be (MiB)", n * n * 4 / 2**20, "never built"),
    ]


# The programs run with their bytecode compiled (the first, unmeasured, run writes it), as after `pip install .`:
# with PYTHONDONTWRITEBYTECODE set, every start would compile attncli's modules anew (0.1 s here).
COMPILED = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def _command(command: list[str]) -> Callable[[], object]:
    return partial(subprocess.run, command, capture_output=True, check=True, cwd=ROOT, env=COMPILED)


def startup(plan: Plan) -> list[Row]:
    """Wall time of the CLI on the worked example, and of --help, against importing its heavy libraries."""
    cli = [sys.executable, "-m", "attncli"]
    times = interleaved(
        {
            "baseline": _command([sys.executable, "-c", "import numpy, yaml, rich.table"]),
            "compute": _command([*cli, "compute", str(ROOT / "samples" / "bank.yaml")]),
            "help": _command([*cli, "--help"]),
        },
        plan.runs,
        plan.settle,
    )
    return [
        timed("python -c 'import numpy, yaml, rich.table' (s)", times["baseline"], "baseline"),
        timed("attncli compute samples/bank.yaml (s)", times["compute"], "piped"),
        ratio("compute / baseline", times["compute"], times["baseline"], "target ≤ 1.15"),
        timed("attncli --help (s)", times["help"]),
        ratio("--help / baseline", times["help"], times["baseline"], "target ≤ 1.0"),
    ]


SCRIPT = """
import sys
import numpy as np
from attncli import attention
q, k, v = (np.load(path) for path in sys.argv[1:4])
np.save(sys.argv[4], attention(q, k, v))
"""


def large_cli(plan: Plan, d: int) -> list[Row]:
    """`attncli compute` on n tokens from .npy files against a Python script that loads, computes and saves."""
    n = plan.n
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as folder:
        paths = [os.path.join(folder, f"{name}.npy") for name in ("q", "k", "v")]
        for path in paths:
            np.save(path, rng.standard_normal((n, d)).astype(np.float32))
        out = os.path.join(folder, "out.npy")
        cli = [sys.executable, "-m", "attncli", "compute", "--dtype", "float32"]
        cli += ["--queries", f"@{paths[0]}", "--keys", f"@{paths[1]}", "--values", f"@{paths[2]}"]
        times = interleaved(
            {
                "script": _command([sys.executable, "-c", SCRIPT, *paths, out]),
                "npy": _command([*cli, "-f", "npy", "-o", out]),
                "summary": _command(cli),
            },
            plan.runs,
            plan.settle,
        )
    return [
        timed(f"python script: load, attention(), save, {n} tokens (s)", times["script"]),
        timed(f"attncli compute -f npy, {n} tokens (s)", times["npy"]),
        ratio("compute -f npy / script", times["npy"], times["script"], "target ≤ 1.3"),
        timed(f"attncli compute (summary), {n} tokens (s)", times["summary"]),
        ratio("summary / script", times["summary"], times["script"], "target ≤ 2"),
    ]


def blas() -> str:
    """The BLAS numpy calls, as threadpoolctl finds it: library, version, CPU kernel, threads."""
    from threadpoolctl import threadpool_info

    found = [lib for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return "; ".join(
        f"{lib['internal_api']} {lib.get('version')} ({lib.get('architecture', '?')} kernel, "
        f"{lib['num_threads']} threads)"
        for lib in found
    )


def report(rows: list[Row]) -> None:
    """The rows as a table, then the BLAS in use."""
    print(f"{'measure':<58} {'min':>10} {'median':>10}  note")
    for row in rows:
        print(f"{row.name:<58} {row.minimum:>10.4g} {row.median:>10.4g}  {row.note}")
    print(f"BLAS: {blas()}")


def main(argv: list[str] | None = None) -> list[Row]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="toy sizes: checks the script, measures nothing")
    parser.add_argument("--without-torch", action="store_true", help="leave torch out even if it is installed")
    args = parser.parse_args(argv)
    plan = Plan(64, 32, 256, 2, 2, 0.0) if args.quick else Plan(4096, 256, 32768, 21, 15, 0.15)
    load = os.getloadavg()[0]
    rows = kernel(plan, 64, 8, _torch(not args.without_torch)) + memory(plan.big, 64) + peak_rss(plan, 64)
    rows += startup(plan) + large_cli(plan, 64)
    end = os.getloadavg()[0]
    rows.append(Row("load average over 1 min, at the start and the end", load, end, f"{os.cpu_count()} cores"))
    report(rows)
    print(f"numpy {np.__version__}, cores={os.cpu_count()}, OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE')}")
    return rows


if __name__ == "__main__":
    main()
