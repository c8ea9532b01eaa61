"""What `attncli compute` leaves out of its start-up, so that it cannot come back unnoticed (issue 14, target 3).

Times are too noisy for a test; what is imported and what is built at import time is not.
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attncli.cli import app
from attncli.cli.application import application
from attncli.cli.common import COMMANDS, REGISTERED
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
    [
        ["compute", "samples/bank.yaml", "--format", "json"],
        ["compute", "--precision", "2", "-"],
        ["compute", "samples/bank.yaml", "-f", "markdown", "--no-color"],
        ["compute", "--queries=1,0", "--keys", "1,0; 0,1", "--values", "1; 2", "--mask", "none"],
    ],
)
def test_options_in_the_plain_form_run_without_typer_and_print_what_typer_does(arguments: list[str]) -> None:
    text = Path(ROOT / "samples" / "bank.yaml").read_text(encoding="utf-8")
    done, seen = _run(arguments, stdin=text)
    assert (done.returncode, done.stderr, seen["imported"]["typer"]) == (0, "", False)
    typed = CliRunner().invoke(app, arguments, input=text, env={"LANG": "C", "LC_ALL": None, "COLUMNS": "80"})
    assert (typed.exit_code, typed.stdout) == (0, done.stdout)


@pytest.mark.parametrize(
    "arguments",
    [["compute", "samples/bank.yaml", "--help"], ["compute", "-qf", "json", "x.yaml"], ["compute", "--nope"]],
)
def test_any_other_command_line_goes_through_typer(arguments: list[str]) -> None:
    done, seen = _run(arguments)
    assert seen["imported"]["typer"]
    assert done.returncode == (0 if "--help" in arguments else 2), done.stderr


# A plain command line of every command, and what it ends with: none of them may need Typer.
PLAIN_RUNS = {
    "compute": (["compute", "samples/bank.yaml"], 0),
    "check": (["check", "tests/check_cases/bank_right.yaml", "tests/check_cases/carried.yaml"], 1),
    "template": (["template", "samples/bank.yaml"], 0),
    "generate": (["generate", "--seed", "3", "--answers"], 0),
    "practice": (["practice", "samples/bank.yaml"], 1),  # no answer on stdin: not every step right
    "compare": (["compare", "samples/bank.yaml", "samples/bank_cashier.yaml"], 0),
    "scaling": (["scaling", "--dk", "1,4", "--keys", "4", "--samples", "50"], 0),
    "softmax": (["softmax", "2, 1, 0.1"], 0),
    "cost": (["cost", "--d-model", "64", "--heads", "4", "--tokens", "8"], 0),
}


@pytest.mark.parametrize("name", COMMANDS)
def test_a_plain_command_line_of_every_command_runs_without_typer(name: str) -> None:
    """Every command returns its exit code rather than raising typer.Exit, so that none imports Typer: each
    plain run ends as it should, having written something, with Typer never imported."""
    arguments, code = PLAIN_RUNS[name]
    done, seen = _run(arguments, stdin="")
    assert (done.returncode, done.stderr) == (code, ""), done.stderr
    assert done.stdout
    assert not seen["imported"]["typer"], name


def _typed_options(name: str, arguments: list[str], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any] | None:
    """The options Typer passes to command `name` for `attncli name ARGUMENTS`, or None when it refuses them."""
    callback = REGISTERED[name].callback
    passed: list[dict[str, Any]] = []
    monkeypatch.setattr(type(callback), "run", lambda self, options: passed.append(options) or 0)
    result = CliRunner().invoke(application(only=name), [name, *arguments])
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
        assert lean == _typed_options(name, [value], monkeypatch)
    if name == "compute" and (value == "-" or not value.startswith("-")):
        assert lean is not None and lean["file"] == value
    if value.startswith("-") and value != "-":
        assert lean is None


# Values an option may be given: plain ones, and ones Typer reads otherwise or refuses (out of range, not a
# number, empty, taken for an option, written with "=").
VALUES = ["samples/bank.yaml", "json", "3", "0", "17", "18", "-1", "2.5", "nan", "1_0", " 4", "x", "", "-", "--format"]


@settings(max_examples=300, deadline=None)
@given(data=st.data(), name=st.sampled_from(COMMANDS))
def test_a_command_line_the_lean_start_reads_is_read_as_typer_reads_it(data: st.DataObject, name: str) -> None:
    """Random command lines of every command, from its own option names: whenever the lean start takes one,
    Typer passes the command the very same options; a line it does not take is Typer's to read or refuse."""
    callback = REGISTERED[name].callback
    names = [*sorted(callback._lean_table[1]), "--help", "-qf", "--nope"]
    tokens: list[str] = []
    for _ in range(data.draw(st.integers(0, 5))):
        kind = data.draw(st.sampled_from(["option", "option=", "value"]))
        option = data.draw(st.sampled_from(names))
        value = data.draw(st.sampled_from(VALUES))
        tokens += {"option": [option, value], "option=": [f"{option}={value}"], "value": [value]}[kind]
    lean = callback.lean(tokens)
    if lean is not None:
        with pytest.MonkeyPatch.context() as monkeypatch:
            assert lean == _typed_options(name, tokens, monkeypatch), tokens


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_alone_is_read_as_typer_reads_it(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each option name of each command (--no-x too), with each of a few values, and twice: the lean start
    passes what Typer passes, and takes every option in some plain line."""
    callback = REGISTERED[name].callback
    needed = [f"{p.name}.yaml" for p in callback._lean_table[0] if p.default is inspect.Parameter.empty]
    for option in callback._lean_table[1]:
        taken = 0
        for value in (None, "3", "18", "json", "samples/bank.yaml"):  # 18: past --precision's 17
            arguments = [*needed, option, *([] if value is None else [value])]
            lean = callback.lean(arguments)
            if lean is not None:
                taken += 1
                assert lean == _typed_options(name, arguments, monkeypatch), arguments
        assert taken, option
        twice = [*needed, option, "3", option, "4"]  # a list option gathers both; another is Typer's to read
        lean = callback.lean(twice)
        if lean is not None:
            assert lean == _typed_options(name, twice, monkeypatch), twice


def test_the_lean_start_reads_a_scripts_command_lines() -> None:
    """The command lines of scripts and the benchmark: the lean start reads them all."""
    lines = {
        "compute": ["--dtype", "float32", "--queries", "@q.npy", "--keys", "@k.npy", "--values", "@v.npy", "-f", "npy"],
        "check": ["a.yaml", "b.yaml", "--key", "key.yaml", "--format", "json"],
        "generate": ["--seed", "3", "--count", "30", "-o", "class"],
    }
    for name, arguments in lines.items():
        assert REGISTERED[name].callback.lean(arguments) is not None, name
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
