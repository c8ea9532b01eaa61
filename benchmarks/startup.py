"""Start-up of attncli as a user installs it: a fresh venv, `pip install .`, the median of interleaved rounds.

    python benchmarks/startup.py [--rounds 15] [--venv DIR]

Issue 14's measurement. A venv is made in a temporary folder (or DIR, kept for the next run)
that sees this interpreter's site-packages for the dependencies (numpy, Typer, Rich, PyYAML,
threadpoolctl: nothing is downloaded) and for pip and setuptools (a venv's own are older than
pyproject.toml needs), and attncli itself goes in with `pip install --no-deps
--no-build-isolation .`: not editable, its bytecode compiled. Each round then runs, in an order
that turns from round to round, `python -c "import numpy, yaml, rich.table"` (the floor any
attncli run stands on), `attncli compute samples/bank.yaml` with its output piped, and
`attncli --help`, all with the venv's programs and from a folder outside the checkout.
Printed: the minimum and median of each, and the median of each round's ratio to the floor.
Targets: compute ≤ 1.15, --help ≤ 1.0. `--here` skips the venv (this interpreter, `python -m
attncli` from the checkout) and `--quick` runs two rounds: the test suite's check of the script.
`--instructions` also counts the instructions each program executes once, under valgrind's
callgrind: slow (a minute), but the same on a busy machine as on a quiet one, where times are not.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = "import numpy, yaml, rich.table"
TARGETS = {"compute": 1.15, "help": 1.0}


def install(venv: Path) -> Path:
    """A venv at `venv` with attncli installed from this checkout (once); its python."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--force-reinstall"]
    listed = ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard"]
    with tempfile.TemporaryDirectory() as build:  # a copy of the checkout as it is, so no build/ lands in it
        for name in subprocess.run(listed, capture_output=True, text=True, check=True).stdout.splitlines():
            if (ROOT / name).is_file():
                (Path(build) / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / name, Path(build) / name)
        subprocess.run([*pip, build], check=True, cwd=build)
    where = [str(python), "-c", "import attncli; print(attncli.__file__)"]
    found = subprocess.run(where, capture_output=True, text=True, check=True, cwd=venv, env=_clean_env()).stdout
    if not Path(found.strip()).is_relative_to(venv):
        raise SystemExit(f"the venv imports attncli from {found.strip()}, not from its own site-packages")
    return python


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH (which would put a checkout first) or COLUMNS."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "COLUMNS")}


def commands(python: Path, here: bool) -> dict[str, list[str]]:
    """The three programs of a round: the floor, compute piped, and --help."""
    attncli = [str(python), "-m", "attncli"] if here else [str(python.parent / "attncli")]
    return {
        "baseline": [str(python), "-c", BASELINE],
        "compute": [*attncli, "compute", str(ROOT / "samples" / "bank.yaml")],
        "help": [*attncli, "--help"],
    }


def rounds(programs: dict[str, list[str]], count: int, cwd: str, env: dict[str, str]) -> dict[str, list[float]]:
    """Wall times of each program over `count` rounds (after one unmeasured), the order turning each round."""
    names = list(programs)
    times: dict[str, list[float]] = {name: [] for name in names}
    for turn in range(count + 1):
        order = names[turn % len(names) :] + names[: turn % len(names)]
        for name in order:
            start = time.perf_counter()
            subprocess.run(programs[name], capture_output=True, check=True, cwd=cwd, env=env)
            if turn:
                times[name].append(time.perf_counter() - start)
    return times


def instructions(programs: dict[str, list[str]], cwd: str, env: dict[str, str]) -> dict[str, int]:
    """The instructions each program executes, as valgrind's callgrind counts them (hash seed fixed)."""
    counts = {}
    for name, command in programs.items():
        counting = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
        done = subprocess.run(counting, capture_output=True, text=True, cwd=cwd, env={**env, "PYTHONHASHSEED": "0"})
        counts[name] = collected(done.stderr)
    return counts


def collected(stderr: str) -> int:
    """The count in callgrind's summary line, `==12== Collected : 636606963`."""
    found = re.search(r"Collected : (\d+)", stderr)
    if found is None:
        raise SystemExit(f"callgrind printed no count:\n{stderr[-500:]}")
    return int(found.group(1))


def report(times: dict[str, list[float]]) -> list[tuple[str, float, float, str]]:
    """(name, minimum, median, note) rows: each program's times, then each round's ratio to the floor."""
    rows = [(f"{name} (s)", min(values), statistics.median(values), "") for name, values in times.items()]
    for name, target in TARGETS.items():
        ratios = [a / b for a, b in zip(times[name], times["baseline"])]
        rows.append((f"{name} / baseline, per round", min(ratios), statistics.median(ratios), f"target ≤ {target}"))
    return rows


def main(argv: list[str] | None = None) -> list[tuple[str, float, float, str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--venv", type=Path, help="where to make (or find) the venv; default a temporary folder")
    parser.add_argument("--here", action="store_true", help="no venv: this interpreter and the checkout")
    parser.add_argument("--quick", action="store_true", help="two rounds, to check the script")
    parser.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    args = parser.parse_args(argv)
    count = 2 if args.quick else max(args.rounds, 1)
    env = _clean_env()
    with tempfile.TemporaryDirectory() as folder:
        if args.here:
            python, env["PYTHONPATH"] = Path(sys.executable), str(ROOT)
        else:
            python = install(args.venv.resolve() if args.venv else Path(folder) / "venv")
        programs = commands(python, args.here)
        times = rounds(programs, count, folder, env)
        counts = instructions(programs, folder, env) if args.instructions else {}
    rows = report(times)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{'measure':<34} {'min':>8} {'median':>8}  note   ({count} rounds, load {load:.2f})")
    for name, low, middle, note in rows:
        print(f"{name:<34} {low:>8.4g} {middle:>8.4g}  {note}")
    for name, count in counts.items():
        print(f"{name + ' instructions (callgrind)':<34} {count:>17,}  {count / counts['baseline']:.3f} × baseline")
    return rows


if __name__ == "__main__":
    main()
