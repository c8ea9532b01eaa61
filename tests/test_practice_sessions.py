"""Sessions that survive: `--resume` from a record, line editing on a real terminal, and a fuzz of hostile input.

Issue 26's "done when": a resume test quits half-way and finishes with `--resume` (and `check` grades the record as
one session); a pty test types with arrow keys and backspace and gets the edited answer; a fuzz test drives random
answers and commands over every sample and every `generate` kind through the pipe and asserts exit 0/1/130 and a
readable summary.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from attncli.cli import app
from attncli.practice.record import MARK
from tests.paths import SAMPLES
from tests.test_fuzz import budget
from tests.test_practice import BANK, NEEDS_25, Terminal, known_to_check
from tests.test_practice_kinds import EXERCISES, problem, right_lines


def practise(args: list[str], stdin: str | bytes) -> object:
    return CliRunner().invoke(app, ["practice", *args], input=stdin)


def lines_in(lines: list[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


# --resume


@pytest.mark.parametrize("name", ["bank.yaml", "rope.yaml", "layers.yaml", "rope_half"])
def test_a_session_quit_half_way_is_finished_with_resume_and_check_grades_it_as_one(name: str, tmp_path: Path) -> None:
    args, text = problem(name)
    _, lines = right_lines(text, "en")
    half = len(lines) // 2
    record = tmp_path / "record.yaml"
    first = practise([*args, "--record", str(record)], lines_in([*lines[:half], "quit"]))
    assert first.exit_code == 1, first.output[-1500:]
    assert f"{half} of {len(lines)} steps right." in first.stdout
    kept = record.read_text()
    assert json.loads(kept.splitlines()[-1].removeprefix(MARK))["lines"] == lines[:half]
    again = practise([*args, "--record", str(record)], "")  # without --resume: refused, the record as it was
    assert again.exit_code == 2 and "--resume" in again.stderr and "--force" in again.stderr
    assert record.read_text() == kept
    second = practise(["--record", str(record), "--resume"], lines_in(lines[half:]))
    assert second.exit_code == 0, second.output[-1500:]
    assert f"[{half + 1}/{len(lines)}]" in second.stdout and f"[{half}/{len(lines)}]" not in second.stdout
    assert f"{len(lines)} of {len(lines)} steps right." in second.stdout  # the summary counts both parts
    graded = tmp_path / "graded.yaml"
    graded.write_text(known_to_check(record.read_text()))
    checked = CliRunner().invoke(app, ["check", str(graded), "--format", "json"])
    assert checked.exit_code == 0, checked.output[-1500:]
    report = json.loads(checked.stdout)
    assert {cell["status"] for step in report["steps"] for cell in step["cells"]} == {"right"}


def test_resume_continues_at_the_records_level_and_refuses_another(tmp_path: Path) -> None:
    """Before, --resume --level 1 on a level-3 record went on at level 3 without a word."""
    record = tmp_path / "record.yaml"
    practise([BANK, "--record", str(record), "--level", "3"], "quit\n")
    kept = record.read_text()
    other = practise(["--record", str(record), "--resume", "--level", "1"], "quit\n")
    assert (other.exit_code, other.stdout) == (2, "") and "level 3" in other.stderr and "--level 1" in other.stderr
    assert other.stderr.count("\n") == 1 and record.read_text() == kept
    same = practise(["--record", str(record), "--resume", "--level", "3"], "quit\n")
    assert same.exit_code == 1 and "Traceback" not in same.output


def test_force_starts_a_new_session_over_an_old_record(tmp_path: Path) -> None:
    record = tmp_path / "record.yaml"
    practise([BANK, "--record", str(record)], "2.8284\n")
    result = practise([BANK, "--record", str(record), "--force"], "quit\n")
    assert result.exit_code == 1 and '"lines": []' in record.read_text()


@NEEDS_25
@pytest.mark.parametrize("name", ["bank.yaml", "rope.yaml", "sinusoidal.yaml", "bias.yaml", "layers.yaml"])
def test_check_grades_the_whole_record_with_the_tutor_s_own_fields(name: str, tmp_path: Path) -> None:
    args, text = problem(name)
    _, lines = right_lines(text, "en")
    record = tmp_path / "record.yaml"
    assert practise([*args, "--record", str(record)], lines_in(lines)).exit_code == 0
    checked = CliRunner().invoke(app, ["check", str(record)])
    assert checked.exit_code == 0, checked.output[-1500:]


# A real terminal: readline's line editing


def test_arrow_keys_and_backspace_edit_the_answer_and_up_recalls_the_last_one() -> None:
    pytest.importorskip("readline")
    terminal = Terminal([BANK])
    terminal.wait_for("[1/16]")
    terminal.type("2.8x\x7f84")  # backspace deletes the x: 2.884
    terminal.type("\x1b[D\x1b[D2\r")  # ← ← then 2: 2.8284
    terminal.wait_for("✓ right")
    terminal.wait_for("[2/16]")
    terminal.type("\x1b[A\r")  # ↑ recalls 2.8284: not q·k for 'net'
    terminal.wait_for("Try again")
    terminal.type("1.4142\r")
    terminal.wait_for("[3/16]")
    terminal.interrupt()  # Ctrl-C
    assert terminal.end() == 130
    screen = terminal.screen
    assert "\x1b" not in screen and "\x7f" not in screen  # no raw ESC or DEL reached the page
    assert screen.count("✓ right") == 2 and screen.count("✗") == 1
    assert "2 of 16 steps right." in screen


# Fuzz: hostile input never ends a session in an internal error

JUNK = [
    "hint",
    "show",
    "skip",
    "back",
    "quit",
    "",
    "   ",
    "help",
    "pista",
    "1e400",
    "-1e308*10",
    "e^1000",
    "0/0",
    "nan",
    "inf",
    "1, 2, 3, 4, 5, 6, 7, 8, 9",
    "2,8284",
    "sqrt(-1)",
    "\x1b[31mred\x1b[0m",
    "((((((((((1))))))))))",
    "9" * 5000,
    "1" * 100_000,
]
LINE = st.one_of(
    st.sampled_from(JUNK),
    st.floats(-10, 10, allow_nan=False).map(lambda x: f"{x:.4f}"),
    st.text(max_size=20),
)
BYTES = st.one_of(LINE.map(lambda s: s.encode("utf-8", "surrogatepass")), st.binary(max_size=12))


@budget(40)
@given(
    name=st.sampled_from(EXERCISES),
    lines=st.lists(BYTES, max_size=40),
    lang=st.sampled_from(["en", "es"]),
    level=st.sampled_from(["1", "2", "3"]),
)
def test_random_answers_and_commands_end_0_1_or_130_with_a_readable_summary(
    name: str, lines: list[bytes], lang: str, level: str
) -> None:
    args, _ = problem(name)
    stdin = b"".join(line.replace(b"\n", b" ") + b"\n" for line in lines)
    result = CliRunner().invoke(app, ["practice", *args, "--lang", lang, "--level", level], input=stdin)
    assert result.exit_code in (0, 1, 130), (result.exit_code, result.output[-1500:])
    assert "Traceback" not in result.output
    assert {"en": "Summary", "es": "Resumen"}[lang] in result.stdout


def test_an_endless_line_of_zero_bytes_is_refused_and_the_session_ends_with_its_summary() -> None:
    result = CliRunner().invoke(app, ["practice", BANK], input=b"\0" * 3_000_000)
    assert result.exit_code == 1 and "longer than 4096 characters" in result.stdout
    assert "Summary" in result.stdout


def test_bytes_that_are_not_utf8_are_one_invalid_answer_and_the_session_goes_on() -> None:
    result = CliRunner().invoke(app, ["practice", BANK], input=b"2*sqrt(2)\n\xff\xfe\n1.4142\n")
    assert result.exit_code == 1, result.output
    assert result.stdout.count("✓ right") == 2 and "\ufffd" in result.stdout and "? " in result.stdout


def test_a_problem_s_own_huge_tolerance_does_not_end_the_session(tmp_path: Path) -> None:
    problem_file = tmp_path / "wide.yaml"
    problem_file.write_text((SAMPLES / "bank.yaml").read_text() + "\ntolerance: 1000\n")
    result = CliRunner().invoke(app, ["practice", str(problem_file)], input="9\n" * 20)
    assert result.exit_code in (0, 1) and "Summary" in result.stdout, result.output[-1500:]


# The record is a fresh YAML document: check reads it whatever the problem's text looked like

BANK_AS = {
    "json": '{"tokens": ["fisherman", "net", "bank"], "query_tokens": ["bank"], "queries": {"bank": ["sqrt(2)", 0]},'
    ' "keys": [[2, 0], [1, 1], [0, 1]], "values": [[2, 0], [0, 2], [1, 1]]}',
    "flow and an end marker": "{tokens: [fisherman, net, bank], query_tokens: [bank], queries: {bank: [sqrt(2), 0]},"
    " keys: [[2, 0], [1, 1], [0, 1]], values: [[2, 0], [0, 2], [1, 1]]}\n...\n",
    "anchors": "tokens: [fisherman, net, bank]\nquery_tokens: [bank]\nqueries: {bank: [sqrt(2), 0]}\n"
    "keys: &rows [[2, 0], [1, 1], [0, 1]]\nvalues: *rows\n",
    "an old answers section": (SAMPLES / "bank.yaml").read_text() + "answers:\n  dot:\n    bank: [9, 9, 9]\n",
}


@pytest.mark.parametrize("shape", BANK_AS)
def test_the_record_of_any_problem_text_is_read_back_by_check(shape: str, tmp_path: Path) -> None:
    """The record copied the problem's text before: a JSON or flow problem, `...` or anchors made it unreadable."""
    problem_file = tmp_path / "problem.yaml"
    problem_file.write_text(BANK_AS[shape])
    record = tmp_path / "record.yaml"
    result = practise([str(problem_file), "--record", str(record)], "2.8284\n1.4142\n0\n")
    assert result.exit_code == 1, result.output[-1500:]
    graded = tmp_path / "graded.yaml"
    graded.write_text(known_to_check(record.read_text()))
    checked = CliRunner().invoke(app, ["check", str(graded), "--format", "json"])
    assert checked.exit_code in (0, 1), checked.output[-1500:]
    dots = [c["given"] for step in json.loads(checked.stdout)["steps"] if step["step"] == "dot" for c in step["cells"]]
    assert dots == ["2.8284", "1.4142", "0"]


def test_a_record_points_at_the_problem_s_array_files_where_they_are(tmp_path: Path) -> None:
    """A relative {file:} array is written out in the record: the record, written elsewhere, holds the problem's own
    array, not the file of the same name beside it (nor one outside its folder, which check refuses)."""
    folder = tmp_path / "problem"
    folder.mkdir()
    corpus = Path(__file__).parent / "corpus"
    for name in ("reads_array.yaml", "two.npz"):
        (folder / name).write_bytes((corpus / name).read_bytes())
    elsewhere = tmp_path / "records"
    elsewhere.mkdir()
    (elsewhere / "two.npz").write_bytes(b"not the array")  # a file of the same name beside the record
    record = elsewhere / "record.yaml"
    result = practise([str(folder / "reads_array.yaml"), "--record", str(record)], "2.8284\n")
    assert result.exit_code == 1, result.output[-1500:]
    assert "two.npz" not in record.read_text()
    graded = elsewhere / "graded.yaml"
    graded.write_text(known_to_check(record.read_text()))
    checked = CliRunner().invoke(app, ["check", str(graded)])
    assert checked.exit_code in (0, 1), checked.output[-1500:]


def test_practice_makes_the_exercise_generate_makes_for_the_same_options_and_seed(tmp_path: Path) -> None:
    from attncli import yamldoc

    options = ["--rope", "half", "--dk", "4", "--heads", "2", "--projections", "--seed", "5"]
    made = CliRunner().invoke(app, ["generate", *options])
    record = tmp_path / "record.yaml"
    practise([*options, "--record", str(record)], "quit\n")
    recorded = yamldoc.load(record.read_text(), "record").data
    assert recorded == yamldoc.load(made.stdout, "generated").data


def test_the_record_holds_every_answer_as_it_is_given_even_when_the_process_is_killed(tmp_path: Path) -> None:
    """SIGKILL (a crash, a closed laptop): nothing after the last answer is lost, and --resume goes on from it."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.test_practice import ENVIRONMENT

    record = tmp_path / "record.yaml"
    process = subprocess.Popen(
        [sys.executable, "-m", "attncli", "practice", BANK, "--record", str(record)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=ENVIRONMENT,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"2.8284\n1.4142\n")
    process.stdin.flush()
    seen, deadline = b"", time.monotonic() + 60
    while b"[3/16]" not in seen and time.monotonic() < deadline:
        seen += os.read(process.stdout.fileno(), 4096)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=60)
    process.stdout.close()
    process.stdin.close()
    assert json.loads(record.read_text().splitlines()[-1].removeprefix(MARK))["lines"] == ["2.8284", "1.4142"]
    resumed = practise(["--record", str(record), "--resume"], "0\nquit\n")
    assert "[3/16]" in resumed.stdout and "3 of 16 steps right." in resumed.stdout


def test_control_characters_typed_are_echoed_and_reported_escaped() -> None:
    """An ESC sequence typed into a pipe was echoed raw (it recoloured the student's terminal)."""
    result = CliRunner().invoke(app, ["practice", BANK], input="\x1b[31m2.8284\x1b[0m\n")
    assert "\x1b" not in result.stdout and "\\x1b[31m2.8284\\x1b[0m" in result.stdout
