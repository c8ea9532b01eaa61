"""Benchmark of grading a class: `attncli check --key KEY.yaml` over 1,000 student files, in one process.

    python benchmarks/grading.py            # 1,000 files
    python benchmarks/grading.py --quick     # 10 files: checks the script, measures nothing

The key is a generated exercise with its answers; the students hand in answers only
(as `attncli template` lays them out): most copy the key, one in five slips at the
weights (and carries the slip on), one in ten writes a decimal comma and is not graded.
Target (issue 10): ≤ 10 s for 1,000 files on the machine the suite runs on.
"""

from __future__ import annotations

import argparse
import csv
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from attncli.exercises import Options, exercise  # noqa: E402  (the repository, not an installed copy)

TARGET = 10.0  # seconds for 1,000 files


def students(key: str, count: int) -> list[str]:
    """`count` homework files: answers: only, most right, some wrong, some unreadable."""
    answers = "answers:" + key.split("\nanswers:", 1)[1]
    lines = answers.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.strip().startswith("weights:")) + 1
    name, row = lines[first].split(": ", 1)  # the first query's weights: "    she: [0.2119, 0.2119, 0.5761]"
    reverse = "[" + ", ".join(reversed(row.strip().strip("[]").split(", "))) + "]\n"
    slipped = "".join([*lines[:first], f"{name}: {reverse}", *lines[first + 1 :]])
    comma = re.sub(r"(-?\d+)\.(\d+)", r'"\1,\2"', answers, count=1)
    return [comma if n % 10 == 9 else slipped if n % 5 == 1 else answers for n in range(count)]


def grade_class(count: int, options: Options) -> list[tuple[str, float, str]]:
    """Time one `attncli check --key` process over `count` files, and check its gradebook has a row per file."""
    key = exercise(options, 7)
    with tempfile.TemporaryDirectory() as folder:
        base = Path(folder)
        (base / "key.yaml").write_text(key, encoding="utf-8")
        files = []
        for n, text in enumerate(students(key, count)):
            path = base / f"student-{n:04d}.yaml"
            path.write_text(text, encoding="utf-8")
            files.append(str(path))
        grades = base / "grades.csv"
        command = [sys.executable, "-m", "attncli", "check", "--key", str(base / "key.yaml"), *files]
        command += ["--format", "csv", "-o", str(grades)]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, cwd=ROOT)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
        if done.returncode not in (0, 1, 2):
            raise SystemExit(done.stderr.decode())
        rows = list(csv.DictReader(grades.open(encoding="utf-8")))
    statuses = {status: sum(row["status"] == status for row in rows) for status in ("right", "wrong", "not_graded")}
    shape = f"{len(key.split('tokens: [')[1].split(']')[0].split(','))} tokens, {options.heads} head(s)"
    return [
        (f"check --key, {count} files, {shape} (s)", elapsed, f"target ≤ {TARGET * count / 1000:.3g}"),
        ("  its CPU time, user + system (s)", cpu, "the same on a busy machine"),
        ("gradebook rows / files", len(rows) / count, "must be 1"),
        *((f"  {status}", float(value), "") for status, value in statuses.items()),
    ]


def main(argv: list[str] | None = None) -> list[tuple[str, float, str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 files: checks the script, measures nothing")
    args = parser.parse_args(argv)
    count = 10 if args.quick else 1000
    rows = grade_class(count, Options(answers=True))
    rows += grade_class(count, Options(tokens=4, heads=2, mask="causal", answers=True))
    print(f"{'measure':<48} {'value':>12}  note")
    for name, value, note in rows:
        print(f"{name:<48} {value:>12.4g}  {note}")
    return rows


if __name__ == "__main__":
    main()
