"""The bad-input corpus (tests/corpus/cases.yaml): every case exits 2 with one short line, quickly, harmlessly.

Each case runs in-process through Typer's CliRunner (fast enough for the whole corpus), and
a sample also runs as a real subprocess, `python -m attncli compute FILE`, the way a shell
script would. A case must not write a file, start a process, or hang.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from attncli.cli import app
from attncli.errors import ExitCode
from attncli.i18n import t
from tests.paths import ROOT

CORPUS = Path(__file__).parent / "corpus"
PLACEHOLDERS = {"<5000 digits>": "9" * 5000, "<10000 characters>": "n" * 10_000}  # too long to write in cases.yaml


def expanded(case: dict) -> dict:
    args, file = case.get("args", []), case["file"]
    for short, long in PLACEHOLDERS.items():
        args = [arg.replace(short, long) for arg in args]
        file = file.replace(short, long) if file else file
    return {**case, "args": args, "file": file}


CASES = [expanded(case) for case in yaml.safe_load((CORPUS / "cases.yaml").read_text(encoding="utf-8"))]
PWNED = Path("/tmp/attncli-pwned")  # what the hostile cases try to create
SECONDS = 1.0  # CPU seconds per case, in-process (wall time would measure the machine's load)
HANG = 10  # seconds after which an in-process case is stopped as hung
# Run as subprocesses too: the hostile cases, the ones that stress the reader, and some flags.
SUBPROCESS = {
    "tag_python_apply.yaml",
    "tag_in_row.yaml",
    "expr_import.yaml",
    "nested_10000.yaml",
    "alias_bomb.yaml",
    "huge_int.yaml",
    "not_utf8.yaml",
    "array_lying_header.yaml",
    "too_large.yaml",
    "power_tower.yaml",
}


class Hang(BaseException):
    """Raised in a case that runs too long; a BaseException, so the CLI's boundary does not report it."""


def case_id(case: dict) -> str:
    words = " ".join(_short(arg) for arg in case.get("args", []))
    return f"{case.get('command', 'compute')}:{_short(case['file'] or 'flags')}:{words}".rstrip(":")


def _short(arg: str) -> str:
    return arg if len(arg) <= 40 else f"{arg[:12]}…({len(arg)})"


def command(case: dict) -> list[str]:
    """`attncli compute FILE --format json ARGS`, or another command's `NAME FILE ARGS`."""
    name = case.get("command", "compute")
    json = ["--format", "json"] if name == "compute" else []
    return [name, *([case["file"]] if case["file"] else []), *json, *case.get("args", [])]


def listing(folder: Path) -> dict[str, float]:
    return {str(path.relative_to(folder)): path.stat().st_mtime for path in folder.rglob("*")}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A private copy of the corpus, so that "nothing written" can be checked file by file."""
    copy = tmp_path_factory.mktemp("corpus")
    shutil.copytree(CORPUS, copy, dirs_exist_ok=True)
    CliRunner().invoke(app, ["compute", str(copy / "bank.yaml"), "--format", "json"])  # imports, not timed
    return copy


@pytest.fixture
def in_corpus(corpus: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Run inside the corpus copy, with process creation forbidden and a guard against hangs."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"attncli tried to run a program: {args}")

    def hung(signum: int, frame: object) -> None:
        raise Hang(f"no answer after {HANG} s")

    monkeypatch.chdir(corpus)
    for name in ("system", "popen", "execv", "execve", "execvp", "spawnv", "posix_spawn"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, forbidden)
    monkeypatch.setattr(subprocess, "Popen", forbidden)
    PWNED.unlink(missing_ok=True)
    before = listing(corpus)
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(HANG)
    try:
        yield corpus
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert listing(corpus) == before, "a bad input wrote or changed a file"
    assert not PWNED.exists(), "a bad input ran a command"


def check_one_line(stderr: str, case: dict) -> None:
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("attncli: "), lines[0]
    assert case["message"] in lines[0]
    assert len(lines[0]) <= 200, f"not a short message: {len(lines[0])} characters"


def test_the_corpus_is_big_enough_and_every_file_is_used() -> None:
    named = {case["file"] for case in CASES}
    assert len(CASES) >= 40
    inputs = {path.name for path in CORPUS.glob("*.yaml")} - {"cases.yaml"}
    assert inputs <= named, f"corpus files no case uses: {sorted(inputs - named)}"


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_bad_input_exits_2_with_one_line(case: dict, in_corpus: Path) -> None:
    start = time.process_time()
    result = CliRunner().invoke(app, command(case))
    elapsed = time.process_time() - start
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code == case.get("exit", 2), result.stderr
    assert result.stdout == ""
    check_one_line(result.stderr, case)
    assert elapsed < SECONDS, f"took {elapsed:.2f} s"


@pytest.mark.parametrize("case", [case for case in CASES if "--lang" not in case["args"]], ids=case_id)
def test_bad_input_in_spanish_is_one_line_too(case: dict, in_corpus: Path) -> None:
    result = CliRunner().invoke(app, [*command(case), "--lang", "es"], env={"LANG": "es_ES.UTF-8"})
    assert result.exit_code == case.get("exit", 2), result.stderr
    assert result.stdout == ""
    assert result.stderr.startswith("attncli: ")
    assert result.stderr.count("\n") == 1, result.stderr


@pytest.mark.parametrize("case", [case for case in CASES if case["file"] in SUBPROCESS], ids=case_id)
def test_bad_input_as_a_real_process(case: dict, corpus: Path) -> None:
    """The same through the real entry point; the time allowed includes starting Python."""
    PWNED.unlink(missing_ok=True)
    before = listing(corpus)
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = cpu_seconds_of_children()
    result = subprocess.run(
        [sys.executable, "-m", "attncli", *command(case)],
        cwd=corpus,
        env=environment,
        capture_output=True,
        text=True,
        timeout=30,
    )
    elapsed = cpu_seconds_of_children() - start
    assert result.returncode == case.get("exit", 2), result.stderr
    assert result.stdout == ""
    check_one_line(result.stderr, case)
    assert elapsed < SECONDS + 2, f"took {elapsed:.2f} s"
    assert listing(corpus) == before
    assert not PWNED.exists()


def cpu_seconds_of_children() -> float:
    """CPU time of the finished child processes: a refusal's cost, whatever else the machine is doing."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


# Resource limits: refused from the shapes alone, before any (L, S) matrix is allocated


def run_limited(
    arguments: list[str],
    cwd: Path,
    memory: int = 2 * 2**30,
    program: tuple[str, ...] = ("-m", "attncli", "compute"),
    timeout: int = 30,
) -> subprocess.CompletedProcess:
    """attncli in a process that cannot have more than `memory` bytes: allocating first would fail there."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [sys.executable, *program, *arguments],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1"},
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_keys_from_a_large_array_file_are_refused_before_allocating(tmp_path: Path) -> None:
    import numpy as np

    np.save(tmp_path / "x.npy", np.ones((40_000, 2)))  # 640 KB of input, 40 000² cells per matrix
    (tmp_path / "big.yaml").write_text("x: {file: x.npy}\nw_q: [[1], [1]]\nw_k: [[1], [1]]\nw_v: [[1], [1]]\n")
    result = run_limited(["big.yaml", "--format", "json"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1
    assert "1 head × 40000 queries × 40000 keys need about 73.0 GiB of memory (limit 4.0 GiB)" in result.stderr
    assert "from attncli import attention" in result.stderr
    assert result.stdout == ""


def test_additive_scores_count_their_hidden_layer(tmp_path: Path) -> None:
    """1000 × 1000 cells are few, but additive scores keep d_a = 700 numbers for each of them."""
    weights = "[" + ", ".join(["0.001"] * 700) + "]"
    (tmp_path / "additive.yaml").write_text(
        "x: [" + ", ".join(["[1]"] * 1000) + "]\nw_q: [[1]]\nw_k: [[1]]\nw_v: [[1]]\n"
        f"score: {{type: additive, w_query: [{weights}], w_key: [{weights}], v: {weights}}}\n"
    )
    result = run_limited(["additive.yaml"], tmp_path)
    assert result.returncode == 2, result.stderr
    assert "1 head × 1000 queries × 1000 keys need about 10.5 GiB" in result.stderr


def test_readme_and_help_document_every_exit_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Errors and exit codes", 1)[1].split("\n## ", 1)[0]
    assert {int(code) for code in re.findall(r"^\| (\d+) \|", section, re.MULTILINE)} == set(ExitCode)
    assert all(f" {int(code)} " in t("help.exit_codes.app") for code in ExitCode)
    for arguments in (["--help"], ["compute", "--help"]):
        assert "Exit codes" in CliRunner().invoke(app, arguments).stdout
