"""What `attncli compute` leaves out of its start-up, so that it cannot come back unnoticed (issue 14, target 3).

Times are too noisy for a test; what is imported and what is built at import time is not.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from attncli.cli import COMMANDS, app
from attncli.cli.application import application
from attncli.cli.common import REGISTERED
from tests.paths import ROOT

GOLDEN = ROOT / "tests" / "golden"
# What the lean start of `attncli compute FILE` does without: Typer (its import is most of the margin over
# numpy, PyYAML and Rich), the other commands, Rich (a pipe gets plain text), what only stacked layers need,
# and what only an error or another language needs.
LEFT_OUT = (
    "typer",
    "attncli.cli.application",
    "attncli.cli.check",
    "attncli.cli.practice",
    "rich",
    "attncli.layers",
    "attncli.i18n.es",
    "attncli.i18n.foreign",
    "traceback",
    "json",
)
# The dataclasses a run of it creates, each costing about ten times a NamedTuple as attncli starts (six
# methods compiled from source): these are changed in place, or check what they are given.
DATACLASSES = [
    "attncli.errors.AttnError",
    "attncli.errors.Where",
    "attncli.problem.Score",
    "attncli.yamldoc.Document",
    "attncli.yamldoc._Open",
]
REPORT = """
def report():
    imported = {name: name in sys.modules for name in left_out}
    import dataclasses, inspect, json
    made = sorted(
        f"{name}.{value.__name__}"
        for name, module in list(sys.modules.items()) if name.startswith("attncli.")
        for value in vars(module).values()
        if inspect.isclass(value) and value.__module__ == name and dataclasses.is_dataclass(value)
    )
    print(json.dumps({"imported": imported, "dataclasses": made}), file=sys.stderr)
"""


def _run(arguments: list[str], lang: str = "C", stdin: str | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """attncli as a program (output piped) with `arguments`; which of LEFT_OUT it imported, which dataclasses
    it created."""
    program = (
        "import atexit, sys\n"
        f"left_out = {LEFT_OUT!r}\n"
        f"{REPORT}"
        "atexit.register(report)\n"
        f"sys.argv = ['attncli', *{arguments!r}]\n"
        "from attncli.launch import main\n"
        "main()\n"
    )
    environment = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "LANG": lang, "COLUMNS": "80"}
    done = subprocess.run(
        [sys.executable, "-c", program],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=environment,
        cwd=ROOT,
        timeout=60,
    )
    *lines, seen = done.stderr.splitlines()
    done.stderr = "".join(f"{line}\n" for line in lines)
    return done, json.loads(seen)


@pytest.mark.parametrize(("lang", "golden"), [("C", "bank.en.txt"), ("es_ES.UTF-8", "bank.es.txt")])
def test_compute_of_a_file_runs_without_typer_and_prints_the_golden_text(lang: str, golden: str) -> None:
    done, seen = _run(["compute", "samples/bank.yaml"], lang)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (GOLDEN / golden).read_text(encoding="utf-8")
    assert seen["imported"] == {name: name == "attncli.i18n.es" and lang != "C" for name in LEFT_OUT}
    assert seen["dataclasses"] == sorted(DATACLASSES)


def test_the_lean_start_ends_errors_as_typer_does() -> None:
    """A file that is not there: the same line and exit code without Typer as through it (with an option)."""
    lean, seen = _run(["compute", "missing.yaml"])
    typed, _ = _run(["compute", "missing.yaml", "--precision", "4"])
    assert not seen["imported"]["typer"] and seen["imported"]["attncli.i18n.foreign"]
    expected = (2, "attncli: missing.yaml: cannot read the file: No such file or directory\n", "")
    assert (lean.returncode, lean.stderr, lean.stdout) == expected
    assert (typed.returncode, typed.stderr, typed.stdout) == expected


@pytest.mark.parametrize(
    "arguments",
    [["compute", "samples/bank.yaml", "--format", "json"], ["compute", "--precision", "2", "-"], ["compute"]],
)
def test_any_option_goes_through_typer(arguments: list[str]) -> None:
    done, seen = _run(arguments, stdin=Path(ROOT / "samples" / "bank.yaml").read_text(encoding="utf-8"))
    assert seen["imported"]["typer"]
    assert done.returncode == (2 if arguments == ["compute"] else 0), done.stderr


def _typed_options(name: str, value: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """The options Typer passes to command `name` for `attncli name value`, or None when it refuses the line."""
    callback = REGISTERED[name].callback
    passed: list[dict[str, Any]] = []
    monkeypatch.setattr(type(callback), "run", lambda self, options: passed.append(options) or 0)
    result = CliRunner().invoke(application(only=name), [name, value])
    monkeypatch.undo()
    return passed[0] if passed and result.exit_code == 0 else None


@pytest.mark.parametrize("name", COMMANDS)
@pytest.mark.parametrize("value", ["samples/bank.yaml", "-", "", "-x", "--format"])
def test_the_lean_start_passes_a_command_what_typer_would(
    name: str, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For every command and a lone argument: the lean start stands in for Typer only where Typer would pass
    the command the same options (derived from the same declarations), and leaves the rest to Typer."""
    lean = REGISTERED[name].callback.lean([value])
    if lean is not None:
        assert lean == _typed_options(name, value, monkeypatch)
    if name == "compute" and (value == "-" or not value.startswith("-")):
        assert lean is not None and lean["file"] == value
    if value.startswith("-") and value != "-":
        assert lean is None


def test_the_lean_start_takes_only_a_lone_argument() -> None:
    compute = REGISTERED["compute"].callback
    for arguments in ([], ["a.yaml", "b.yaml"], ["a.yaml", "-q"], ["--", "a.yaml"]):
        assert compute.lean(arguments) is None
    assert REGISTERED["compare"].callback.lean(["a.yaml"]) is None  # two arguments: Typer says one is missing


def test_every_command_module_registers_its_command_on_the_app() -> None:
    assert sorted(app.registered_commands[i].callback.__name__ for i in range(len(COMMANDS))) == sorted(COMMANDS)
    assert set(COMMANDS) <= set(REGISTERED)


def test_the_benchmark_reads_callgrinds_count() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import startup
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    summary = "==41== Events    : Ir\n==41== Collected : 636606963\n==41==\n==41== I   refs:      636,606,963\n"
    assert startup.collected(summary) == 636_606_963
    with pytest.raises(SystemExit):
        startup.collected("valgrind: command not found")
