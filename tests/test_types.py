"""mypy over the package, held to a committed count of errors that may only go down (.ci/mypy-baseline).

The settings are pyproject.toml's [tool.mypy]: strict where the house's foundations are (the error
type, the record of every step, the kernel, the table of steps, the rounding rule). A change that adds
an error fails here; one that removes some fails too until the baseline is lowered to the new count,
so that the count can never creep back up unseen.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.paths import ROOT

BASELINE = ROOT / ".ci" / "mypy-baseline"


def errors_found(summary: str) -> int:
    """The count of errors in mypy's last line: `Found 311 errors in 33 files (...)`, or `Success: ...` for 0."""
    found = re.match(r"Found (\d+) errors? in \d+ files?", summary)
    if found:
        return int(found.group(1))
    if summary.startswith("Success:"):
        return 0
    raise ValueError(f"not mypy's summary: {summary!r}")


def test_the_summary_is_read_as_mypy_writes_it() -> None:
    assert errors_found("Found 311 errors in 33 files (checked 99 source files)") == 311
    assert errors_found("Found 1 error in 1 file (checked 99 source files)") == 1
    assert errors_found("Success: no issues found in 99 source files") == 0
    with pytest.raises(ValueError):
        errors_found("mypy: can't read file 'attncli': No such file or directory")


def test_mypy_finds_as_many_errors_as_the_baseline_allows_and_no_more() -> None:
    pytest.importorskip("mypy")
    done = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, encoding="utf-8", timeout=280
    )
    lines = done.stdout.strip().splitlines()
    count = errors_found(lines[-1] if lines else done.stderr.strip())
    allowed = int(BASELINE.read_text(encoding="utf-8").split()[0])
    new = [line for line in lines if ": error:" in line]
    assert count <= allowed, (
        f"mypy finds {count} errors, the baseline allows {allowed}: fix the new ones\n" + "\n".join(new)
    )
    assert count == allowed, f"mypy finds {count} errors, fewer than {allowed}: lower .ci/mypy-baseline to {count}"
