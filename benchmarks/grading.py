"""Benchmark of grading a class: `attncli check --key KEY.yaml` over 1,000 student files, in one process.

    python benchmarks/grading.py            # 1,000 files
    python benchmarks/grading.py --quick     # 20 files: checks the script, measures nothing

The key is one generated exercise (4 tokens, 2 heads, a causal mask, W_O) with its answers. The
class is made by the replayed-mistake students of tests/replays (numpy, not attncli): 70 % work
every step carrying 4 decimals; 30 % make one of the classic mistakes, a pair of slips or a slip
of shape (forgot_w_o, the output written transposed) at the step where it happens and carry on
correctly from it. The class is graded by one `check --key` in this process and by one as a
subprocess; then every file alone (CPU time, after one file of each kind), for what a right and a
wrong file cost once the key is solved. Last, a class of 1,000 files that no mistake explains: each
student works carefully but writes one row of one step as 1.1·x + 0.37 and carries on from it, so
that check tries every replay and every pair of slips on every file (issue 23).
Target (issues 10 and 23): ≤ 10 s for 1,000 files, either class, on the machine the suite runs on.

Scale (issue 27): 10,000 small files (the default exercise: 3 tokens, one head; 70 % careful, 30 % a mistake)
against one key, by one `check --key --format csv -o` process on one core (`--jobs 1`) and on every core (the
default): the ratio of the two wall times (goal ≤ 0.6 on two cores, on a quiet machine: the load average is
printed beside it), that both gradebooks are the same rows in the same order, and the peak memory of each run,
beside a run over a tenth of the files (flat: rows are written as they are graded).

    python benchmarks/grading.py --scale-only    # only the scale figures
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attncli.exercises import Options, exercise  # noqa: E402
from attncli.grading import submissions  # noqa: E402  (the repository, not an installed copy)
from tests.replays.mistakes import CATALOGUE, NotApplicable  # noqa: E402
from tests.replays.student import Context, Work, answers_yaml, read  # noqa: E402
from tests.replays.suite import clear_limit, differs  # noqa: E402

TARGET = 10.0  # seconds for 1,000 files
WRONG = 0.3  # the share of the class that slips
KEY = (Options(tokens=4, heads=2, mask="causal", answers=True), 7)
SMALL_KEY = (Options(answers=True), 7)  # the scale class: generate's default exercise
SCALE_FILES = 10_000
SCALE_GOAL = 0.6  # wall time on every core / on one, two cores


def slipped(problem: object) -> list[tuple[str, str]]:
    """(mistake, answers) for every mistake of the catalogue that shows clearly on this problem."""
    found = []
    for mistake in CATALOGUE:
        if not mistake.applies(problem):
            continue
        key = (mistake.head, mistake.step)
        try:
            work = Work(problem, slips={key: mistake.slip})
        except NotApplicable:
            continue
        if differs(work.steps[key], work.careful_alternative[key], clear_limit(problem, key)) > 1:
            found.append((mistake.name, answers_yaml(work)))
    return found


def write_class(
    folder: Path, count: int, key_options: tuple[Options, int] = KEY
) -> tuple[Path, list[tuple[Path, str]]]:
    """The key and `count` homework files, each with what its student did ("careful" or the mistake)."""
    key = exercise(*key_options)
    problem = read(key)
    (folder / "key.yaml").write_text(key, encoding="utf-8")
    careful = answers_yaml(Work(problem))
    mistakes = slipped(problem)
    files: list[tuple[Path, str]] = []
    for n in range(count):
        slips = n % 10 < round(10 * WRONG)  # 3 in every 10, the mistakes taken in turn
        name, text = (
            mistakes[sum(what != "careful" for _, what in files) % len(mistakes)] if slips else ("careful", careful)
        )
        path = folder / f"student-{n:04d}.yaml"
        path.write_text(text, encoding="utf-8")
        files.append((path, name))
    return folder / "key.yaml", files


def unexplained(problem: object, n: int) -> str:
    """The answers of a careful student who writes one row of one step as 1.1·x + 0.37 (the `n`th in turn)."""
    steps = list(Work(problem).steps)
    key = steps[n % len(steps)]

    def slip(context: Context) -> np.ndarray:
        done = np.array(context.careful(), dtype=float)
        row = (n // len(steps)) % done.shape[0]
        done[row] = 1.1 * done[row] + 0.37
        return done

    return answers_yaml(Work(problem, slips={key: slip}))


def write_unexplained_class(folder: Path, count: int) -> tuple[Path, list[Path]]:
    """The key and `count` homework files, each wrong in one row that no classic mistake explains."""
    key = exercise(*KEY)
    (folder / "key.yaml").write_text(key, encoding="utf-8")
    problem = read(key)
    files = []
    for n in range(count):
        path = folder / f"unexplained-{n:04d}.yaml"
        path.write_text(unexplained(problem, n), encoding="utf-8")
        files.append(path)
    return folder / "key.yaml", files


def in_process(key: Path, files: list[Path], grades: Path) -> tuple[float, float]:
    """Wall and CPU seconds for `check --key` over every file, run as a command inside this process."""
    from typer.testing import CliRunner

    from attncli.cli import app

    arguments = ["check", "--key", str(key), *map(str, files), "--format", "csv", "-o", str(grades)]
    start, cpu = time.perf_counter(), time.process_time()
    done = CliRunner().invoke(app, arguments)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    if done.exit_code not in (0, 1):
        raise SystemExit(f"check --key ended with {done.exit_code}: {done.output}")
    return elapsed, cpu


def as_subprocess(key: Path, files: list[Path], grades: Path) -> tuple[float, float]:
    """Wall and CPU seconds of one `python -m attncli check --key` process over every file."""
    command = [sys.executable, "-m", "attncli", "check", "--key", str(key), *map(str, files)]
    command += ["--format", "csv", "-o", str(grades)]
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    before = os.times()
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, cwd=ROOT, env=environment)
    elapsed = time.perf_counter() - start
    after = os.times()
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr.decode())
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    return elapsed, cpu


def measured_run(key: Path, files: list[Path], grades: Path, jobs: int | None) -> tuple[float, float]:
    """Wall seconds and peak memory (MB, the largest process: the run or one of its workers) of one `check --key`
    process over every file, with `--jobs` (None: its default, every core). A wrapper process runs it, so that the
    peak is this run's alone."""
    command = [sys.executable, "-m", "attncli", "check", "--key", str(key), *map(str, files)]
    command += ["--format", "csv", "-o", str(grades), *(["--jobs", str(jobs)] if jobs else [])]
    wrapper = (
        "import resource, subprocess, sys, time; start = time.perf_counter(); "
        "code = subprocess.run(sys.argv[1:]).returncode; elapsed = time.perf_counter() - start; "
        "print(code, elapsed, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
    )
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *command], capture_output=True, text=True, cwd=ROOT, env=environment
    )
    code, elapsed, peak_kb = done.stdout.split()
    if int(code) not in (0, 1):
        raise SystemExit(done.stderr)
    return float(elapsed), int(peak_kb) / 1024


def scale_figures(folder: Path, count: int) -> list[tuple[str, float, str]]:
    """`count` small files graded on one core and on every core: the ratio of the wall times, the same rows, the
    peak memory beside a tenth of the class."""
    key, files = write_class(folder, count, SMALL_KEY)
    paths = [path for path, _ in files]
    load = os.getloadavg()[0]
    one, one_peak = measured_run(key, paths, folder / "one.csv", 1)
    every, every_peak = measured_run(key, paths, folder / "every.csv", None)
    _, tenth_peak = measured_run(key, paths[: count // 10], folder / "tenth.csv", None)
    same = (folder / "one.csv").read_bytes() == (folder / "every.csv").read_bytes()
    rows = (folder / "every.csv").read_text(encoding="utf-8").count("\n") - 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return [
        (f"check --key, {count} small files, --jobs 1 (s)", one, f"load average {load:.2f} before"),
        (f"  on every core ({cores}) (s)", every, ""),
        ("  every core / one core", every / one, f"goal ≤ {SCALE_GOAL} on two cores"),
        ("  the same gradebook, rows in order (1 = yes)", float(same and rows == count), "must be 1"),
        ("  peak memory, one core (MB)", one_peak, ""),
        ("  peak memory, every core (MB)", every_peak, "the largest process"),
        (f"  peak memory, every core, {count // 10} files (MB)", tenth_peak, "flat: about the same"),
    ]


def one_by_one(key: Path, files: list[tuple[Path, str]]) -> dict[str, list[float]]:
    """CPU seconds each file takes to grade alone, by what its student did, once one file of each kind has been
    graded: what depends on the key alone is then solved."""
    loaded = submissions.load_key(str(key))
    for path in {name: path for path, name in files}.values():
        submissions.grade_file(str(path), loaded, submissions.Options(), str)
    times: dict[str, list[float]] = {}
    for path, name in files:
        start = time.process_time()
        submissions.grade_file(str(path), loaded, submissions.Options(), str)
        times.setdefault(name, []).append(time.process_time() - start)
    return times


def main(argv: list[str] | None = None) -> list[tuple[str, float, str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 files: checks the script, measures nothing")
    parser.add_argument("--scale-only", action="store_true", help=f"only {SCALE_FILES:,} small files, 1 vs every core")
    args = parser.parse_args(argv)
    count = 20 if args.quick else 1000
    with tempfile.TemporaryDirectory() as name:
        scale = scale_figures(Path(name), 40 if args.quick else SCALE_FILES)
    if args.scale_only:
        return report(scale)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        key, files = write_class(folder, count)
        paths = [path for path, _ in files]
        grades = folder / "grades.csv"
        inside, inside_cpu = in_process(key, paths, grades)
        rows = list(csv.DictReader(io.StringIO(grades.read_text(encoding="utf-8"))))
        wall, cpu = as_subprocess(key, paths, grades)
        alone = one_by_one(key, files)
        odd = folder / "unexplained"
        odd.mkdir()
        odd_key, odd_files = write_unexplained_class(odd, count)
        unexplained, unexplained_cpu = in_process(odd_key, odd_files, odd / "grades.csv")
        odd_rows = list(csv.DictReader(io.StringIO((odd / "grades.csv").read_text(encoding="utf-8"))))
    expected = ["right" if what == "careful" else "wrong" for _, what in files]
    agree = sum(row["status"] == want for row, want in zip(rows, expected))
    right = alone.pop("careful")
    wrong = [t for ts in alone.values() for t in ts]
    slowest = max(alone, key=lambda name: statistics.mean(alone[name]))
    target = f"target ≤ {TARGET * count / 1000:.3g}"
    figures = [
        (f"check --key, {count} files, in this process (s)", inside, target),
        ("  its CPU time (s)", inside_cpu, "the same on a busy machine"),
        (f"check --key, {count} files, one subprocess (s)", wall, target),
        ("  its CPU time, user + system (s)", cpu, "the same on a busy machine"),
        ("gradebook rows / files", len(rows) / count, "must be 1"),
        ("files graded right or wrong as their students did / files", agree / count, "must be 1"),
        (f"a right file alone, CPU, median of {len(right)} (ms)", 1000 * statistics.median(right), ""),
        (f"a wrong file alone, CPU, median of {len(wrong)} (ms)", 1000 * statistics.median(wrong), ""),
        ("  mean (ms)", 1000 * statistics.mean(wrong), f"{len(alone)} mistakes"),
        ("  the slowest mistake, mean (ms)", 1000 * statistics.mean(alone[slowest]), slowest),
        (f"check --key, {count} files, an unexplained row each, in this process (s)", unexplained, target),
        ("  its CPU time (s)", unexplained_cpu, "the same on a busy machine"),
        ("  files graded wrong / files", sum(row["status"] == "wrong" for row in odd_rows) / count, "must be 1"),
    ]
    return report(figures + scale)


def report(figures: list[tuple[str, float, str]]) -> list[tuple[str, float, str]]:
    """The figures printed as a table, and returned."""
    print(f"{'measure':<60} {'value':>10}  note")
    for label, value, note in figures:
        print(f"{label:<60} {value:>10.4g}  {note}")
    return figures


if __name__ == "__main__":
    main()
