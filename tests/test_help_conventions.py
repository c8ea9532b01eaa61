"""Command-line conventions: a slip in any choice gets "did you mean", shell completion offers every
choice's values, and status lines go to stderr."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attncli import exercises, positions
from attncli.cli import app, compare, compute, cost, exercise_options, softmax
from attncli.i18n import LANGUAGES
from tests.paths import ROOT, SAMPLES

BANK = str(SAMPLES / "bank.yaml")
RIGHT = str(ROOT / "tests" / "check_cases" / "bank_right.yaml")
ARGUMENTS = {
    "compute": [BANK],
    "check": [RIGHT],
    "template": [BANK],
    "compare": [BANK, str(SAMPLES / "bank_cashier.yaml")],
    "softmax": ["2, 1, 0.1"],
}
# Every option whose value is one of a few names, with those names, as a user would type them.
CHOICES = {
    ("compute", "--format"): list(compute.FORMATS),
    ("compute", "--mask"): ["none", "causal", "causal_lower_right"],
    ("compute", "--score"): ["scaled_dot", "dot", "cosine"],
    ("compute", "--dtype"): ["float64", "float32"],
    ("compute", "--weights"): ["uniform", "permute", "permute:"],
    ("compute", "--csv-layout"): ["long", "wide"],
    ("compute", "--lang"): list(LANGUAGES),
    ("check", "--format"): ["rich", "text", "json", "csv", "markdown", "html", "gradescope", "canvas", "grades"],
    ("compare", "--format"): list(compare.FORMATS),
    ("scaling", "--format"): ["rich", "text", "json"],
    ("generate", "--mask"): ["none", "causal"],
    ("generate", "--score"): ["scaled_dot", "dot", "cosine"],
    ("generate", "--sheet"): ["markdown", "latex"],
    ("generate", "--norm"): ["none", "layer", "rms", "layer:post", "rms:post"],
    ("generate", "--rope"): ["half", "interleaved"],
    ("practice", "--mask"): ["none", "causal"],
    ("practice", "--score"): ["scaled_dot", "dot", "cosine"],
    ("template", "--lang"): list(LANGUAGES),
    ("softmax", "--format"): list(softmax.FORMATS),
    ("cost", "--format"): list(cost.FORMATS),
    ("cost", "--dtype"): list(cost.DTYPES),
}


def complete(words: str) -> list[str]:
    """What the shell would offer after `words`, through the completion protocol Typer's bash script speaks."""
    env = {**os.environ, "_ATTNCLI_COMPLETE": "complete_bash", "COMP_WORDS": words}
    env["COMP_CWORD"] = str(len(words.split()) - (0 if words.endswith(" ") else 1))
    result = subprocess.run([sys.executable, "-m", "attncli"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


# Options whose values are few numbers: completion offers them; a slip there is a range error, not a name.
NUMBERS = {("practice", "--level"): ["1", "2", "3"]}


@pytest.mark.parametrize(("command", "option"), sorted({**CHOICES, **NUMBERS}))
def test_completion_offers_the_values_of_every_choice(command: str, option: str) -> None:
    values = {**CHOICES, **NUMBERS}[command, option]
    assert complete(f"attncli {command} {option} ") == values
    first = values[0]
    assert complete(f"attncli {command} {option} {first[:2]}") == [
        value for value in values if value.startswith(first[:2])
    ]


def test_the_values_offered_are_the_ones_the_library_takes() -> None:
    """generate's and practice's --norm and --rope complete from one tuple each (the library's need numpy)."""
    assert exercise_options.NORMS == exercises.NORMS
    assert exercise_options.ROPES == positions.STYLES


def test_completion_still_offers_commands_and_options() -> None:
    assert complete("attncli comp") == ["compare", "compute"]
    assert "--min-decimals" in complete("attncli check --min")


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"LANG": "C", "LC_ALL": None, "COLUMNS": "80"})
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(("command", "option"), sorted(CHOICES))
def test_a_slip_in_every_choice_is_answered_with_the_closest_name(command: str, option: str) -> None:
    for value in CHOICES[command, option]:
        if value.endswith(":"):
            continue
        code, stdout, stderr = run(command, *ARGUMENTS.get(command, []), option, value + value[-1])
        assert (code, stdout) == (2, "")
        assert f"did you mean '{value}'?" in stderr, stderr


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["compute", BANK, "-f", "svg"], "--svg FILE"),
        (["compute", BANK, "-f", "html"], "--html FILE"),
        (["compute", BANK, "-f", "png"], "--figure FILE.png"),
        (["compute", BANK, "-f", "pdf"], "--figure FILE.pdf"),
        (["compare", BANK, BANK, "-f", "svg"], "--figure FILE.svg"),
    ],
)
def test_a_picture_asked_of_format_names_the_option_that_saves_it(args: list[str], option: str) -> None:
    code, _, stderr = run(*args)
    assert code == 2 and stderr.count("\n") == 1
    assert stderr.rstrip().endswith(f"for a picture use {option}"), stderr


def test_a_slip_is_answered_in_spanish_too() -> None:
    code, _, stderr = run("compute", BANK, "--mask", "causl", "--lang", "es")
    assert code == 2 and "¿quisiste decir 'causal'?" in stderr


def test_a_mask_of_one_cell_is_still_a_matrix() -> None:
    """Only a word is a slip: `--mask 1` is the 1×1 matrix it always was, refused for its shape here."""
    code, _, stderr = run("compute", BANK, "--mask", "1")
    assert code == 2 and "did you mean" not in stderr and "3 entries" in stderr


def test_status_lines_go_to_stderr(tmp_path: Path) -> None:
    code, stdout, stderr = run("generate", "--seed", "4", "--count", "2", "-o", str(tmp_path / "sheets"))
    assert (code, stdout) == (0, "")
    assert stderr.startswith("attncli: wrote 2 exercises to ")
    code, stdout, stderr = run("generate", "--seed", "4", "--count", "1", "-o", str(tmp_path / "one"))
    assert (code, stdout) == (0, "") and stderr.startswith("attncli: wrote 1 exercise to ")


def tmux_screen(command: str, columns: int, folder: Path) -> tuple[str, str]:
    """The screen of a tmux pane `columns` wide after `command`: as shown, and with soft-wrapped lines joined."""
    session = f"attncli-conventions-{os.getpid()}"
    done = folder / "done"
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES", "TMUX")}
    script = f"cd {ROOT} && {command}; touch {done}; sleep 30"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", str(columns), "-y", "100", script], env=env, timeout=30
    )
    try:
        for _ in range(400):
            if done.exists():
                break
            time.sleep(0.05)
        shown, joined = (
            subprocess.run(
                ["tmux", "capture-pane", "-p", *flag, "-t", session],
                capture_output=True,
                text=True,
                check=True,
                timeout=30,
            ).stdout
            for flag in ([], ["-J"])
        )
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, timeout=30)
    return shown, joined


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_several_files_graded_on_a_terminal_wrap_between_words(tmp_path: Path) -> None:
    cases = sorted(str(path) for path in (ROOT / "tests" / "check_cases").glob("*.yaml"))[:6]
    shown, joined = tmux_screen(f"{sys.executable} -m attncli check {' '.join(cases)} 2>/dev/null", 60, tmp_path)
    assert "all right" in shown
    assert shown == joined  # the terminal had nothing to wrap itself: no word split at the edge
    piped = subprocess.run([sys.executable, "-m", "attncli", "check", *cases], capture_output=True, text=True, cwd=ROOT)
    assert len(piped.stdout.splitlines()) == len(cases) + 1  # a pipe still reads one line per file
