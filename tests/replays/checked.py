"""What the replays of issue 29 share (tests/replays/tiles.py, softmax.py): one `check` run over every case's
file, each case's verdict from its file's JSON object, and the figures printed per kind of student."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from tests.replays.suite import env

GOOD, FALSE_ALARM, MISSED, UNNAMED = "good", "false alarm", "missed", "unnamed"
RIGHT_KINDS = ("careful", "unshifted")  # students whose every step must pass


class Case(Protocol):
    kind: str  # one of RIGHT_KINDS, a slip's code, or another kind its module judges itself
    path: Path
    result: dict


def run(found: Sequence[Case]) -> int:
    """`check --format json` once over every case's file; each case gets its file's object. The exit code."""
    command = [sys.executable, "-m", "attncli", "check", "--format", "json", *(str(c.path) for c in found)]
    done = subprocess.run(command, env=env(), capture_output=True, text=True, timeout=900)
    results = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            obj = json.loads(line)
            results[obj.get("file")] = obj
    for case in found:
        case.result = results.get(str(case.path), {"error": done.stderr.strip()[:300] or "no result", "steps": []})
    return done.returncode


def verdict(case: Case) -> tuple[str, str]:
    """A right student passes every step; a slipped one is wrong first where its slip is named."""
    steps = case.result.get("steps", [])
    if case.result.get("error") or not steps:
        return FALSE_ALARM, str(case.result.get("error", "no steps"))
    wrong = [s for s in steps if s["status"] != "right"]
    if case.kind in RIGHT_KINDS:
        return (GOOD, "") if not wrong else (FALSE_ALARM, f"{wrong[0]['step']}: {wrong[0]['diagnosis']}")
    if not wrong:
        return MISSED, "every step right"
    named = case.kind in wrong[0]["diagnosis"]
    return (GOOD, "") if named else (UNNAMED, f"{wrong[0]['step']}: {wrong[0]['diagnosis']}")


def failures(found: Sequence[Case], kind: str, judge: Callable[[Case], tuple[str, str]] = verdict) -> list[str]:
    """Every case of `kind` that did not end GOOD, with what check said (at least 10 cases of it)."""
    cases = [c for c in found if c.kind == kind]
    assert len(cases) >= 10, f"only {len(cases)} cases of {kind}"
    return [f"{c.path.name}: {v[0]} {v[1]}" for c in cases for v in [judge(c)] if v[0] != GOOD]


def main(module: str, make: Callable[[Path, range], Sequence[Case]], judge: Callable[[Case], tuple[str, str]]) -> None:
    """`python -m tests.replays.<module> [COUNT]`: the figures per kind of student, then every case not GOOD."""
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    with tempfile.TemporaryDirectory() as folder:
        found = make(Path(folder), range(count))
        code = run(found)
        print(f"python -m tests.replays.{module} {count}: {len(found)} files, check exit {code}")
        table: dict[str, Counter[str]] = {}
        for case in found:
            table.setdefault(case.kind, Counter())[judge(case)[0]] += 1
        for kind, counts in table.items():
            print(f"  {kind:28} {sum(counts.values()):3} cases: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        for case in found:
            status, why = judge(case)
            if status != GOOD:
                print(f"  {status}: {case.path.name}: {why}")
