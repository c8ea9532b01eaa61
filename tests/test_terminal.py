"""attncli in a real pseudo-terminal at 40, 80 and 200 columns, and in a pipe.

On a terminal the output is coloured and laid out for the terminal's width; no number may
be cut ("0.66…") or missing at any width. NO_COLOR turns the colour off on a terminal; a
pipe gets plain text unless FORCE_COLOR asks for colour.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from attncli.cli import app
from tests.paths import ROOT, SAMPLES

BANK = str(SAMPLES / "bank.yaml")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
ARTICLE = (
    "1.4142",
    "2.8284",
    "0.7071",
    "7.3891",
    "2.7183",
    "11.1073",
    "0.6652",
    "0.2447",
    "0.0900",
    "1.4205",
    "0.5795",
)


def environment(**extra: str) -> dict[str, str]:
    """A clean environment: English, no width or colour settings unless a test gives them."""
    keep = {k: v for k, v in os.environ.items() if k not in {"NO_COLOR", "FORCE_COLOR", "COLUMNS", "LINES"}}
    keep = {k: v for k, v in keep.items() if not k.startswith("LC_")}
    return {**keep, "LANG": "C.UTF-8", "TERM": "xterm-256color", "PYTHONPATH": str(ROOT), **extra}


def in_terminal(args: list[str], columns: int, **extra: str) -> tuple[int, str]:
    """Run attncli with a pseudo-terminal `columns` wide as its stdin, stdout and stderr."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    process = subprocess.Popen(
        [sys.executable, "-m", "attncli", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=environment(**extra),
        start_new_session=True,
    )
    os.close(follower)
    chunks, deadline = [], time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(leader)
    code = process.wait(timeout=10)
    return code, b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def piped(args: list[str], **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attncli", *args], env=environment(**extra), capture_output=True, text=True, timeout=30
    )


@pytest.fixture(scope="module")
def bank_numbers() -> list[str]:
    """Every number of bank.yaml as the explanation shows it (4 decimals), derived from --format json."""
    doc = json.loads(CliRunner().invoke(app, ["compute", BANK, "--format", "json"]).stdout)
    head = doc["heads"][0]
    numbers = [*ARTICLE]
    for key in ("dot", "scores", "weights", "output"):
        numbers += [f"{value:.4f}" for row in head[key] for value in row]
    numbers += [f"{math.exp(s):.4f}" for s in head["scores"][0]]
    numbers.append(f"{sum(math.exp(s) for s in head['scores'][0]):.4f}")
    return sorted(set(numbers))


@pytest.mark.parametrize("columns", [40, 80, 200])
def test_a_terminal_of_any_width_gets_colour_and_every_number(columns: int, bank_numbers: list[str]) -> None:
    code, output = in_terminal(["compute", BANK], columns)
    assert code == 0, output
    assert ANSI.search(output), "no colour on a terminal"
    text = ANSI.sub("", output)
    missing = [number for number in bank_numbers if number not in text]
    assert missing == [], f"numbers missing at {columns} columns"
    assert "…" not in text
    assert max(cell_len(line) for line in text.splitlines()) <= columns


def test_no_color_on_a_terminal_means_no_escape_codes(bank_numbers: list[str]) -> None:
    code, output = in_terminal(["compute", BANK], 80, NO_COLOR="1")
    assert code == 0, output
    assert "\x1b" not in output
    assert all(number in output for number in bank_numbers)


@pytest.mark.parametrize("flag", ["--no-color", "--format=text"])
def test_plain_flags_on_a_terminal_mean_no_escape_codes(flag: str) -> None:
    code, output = in_terminal(["compute", BANK, flag], 80)
    assert code == 0, output
    assert "\x1b" not in output
    assert "0.6652" in output


def test_a_pipe_gets_plain_text(bank_numbers: list[str]) -> None:
    result = piped(["compute", BANK])
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    assert all(number in result.stdout for number in bank_numbers)
    assert "…" not in result.stdout


def test_force_color_is_honoured_in_a_pipe(bank_numbers: list[str]) -> None:
    result = piped(["compute", BANK], FORCE_COLOR="1")
    assert result.returncode == 0, result.stderr
    assert ANSI.search(result.stdout)
    assert all(number in ANSI.sub("", result.stdout) for number in bank_numbers)


def test_an_error_on_a_terminal_is_one_plain_line() -> None:
    code, output = in_terminal(["compute", "--keys", "1,2; 3", "--values", "1; 2"], 80)
    assert code == 2
    assert output == "attncli: --keys: keys, row 2: 1 number, expected 2 like the rows before it\n"


def test_a_usage_error_on_a_terminal_is_one_line_not_a_panel() -> None:
    code, output = in_terminal(["compute", BANK, "--bogus"], 80)
    assert code == 2
    assert len(output.splitlines()) == 1
    assert "No such option: --bogus" in output
    assert "╭" not in output
