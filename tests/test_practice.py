"""`attncli practice`: the tutor's prompts, verdicts, hints and summary, in a pipe and in a pseudo-terminal.

The numbers a careful student types are computed here in plain Python (tests/reference.py and
the article's formulas), never taken from attncli; the record a session writes is graded by
`attncli check`, whose verdict on every cell must be the one the tutor gave on the first try.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attncli import exercises, pipeline, yamldoc
from attncli.cli import app
from attncli.i18n import LANGUAGE, en, es
from attncli.practice import record, session
from attncli.steps import ANSWERED, STREAM_STEPS
from tests import reference
from tests.children import as_in_the_background, sigint_by_default
from tests.paths import ROOT, SAMPLES

BANK = str(SAMPLES / "bank.yaml")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ENVIRONMENT = {**os.environ, "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8", "COLUMNS": "100"}
ENVIRONMENT.pop("NO_COLOR", None)
ENVIRONMENT.pop("FORCE_COLOR", None)


def four(value: float) -> str:
    """A number as a careful student writes it: 4 decimals, whole numbers as they are."""
    return str(round(value)) if abs(value - round(value)) < 1e-12 else f"{value:.4f}"


def article(level: int = 2) -> list[str]:
    """The lines a student types for samples/bank.yaml, from the article's numbers, at `level`."""
    q = [math.sqrt(2), 0.0]
    keys = [[2.0, 0.0], [1.0, 1.0], [0.0, 1.0]]
    values = [[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]]
    dots = [reference.dot(q, k) for k in keys]
    scale = 1 / math.sqrt(2)
    scores = [d * scale for d in dots]
    exps = [math.exp(s) for s in scores]
    total = math.fsum(exps)
    weights = [e / total for e in exps]
    output = [math.fsum(w * v[c] for w, v in zip(weights, values)) for c in range(2)]
    if level == 3:
        rows = [dots, [scale], scores, exps, [total], weights, output]
        return [", ".join(four(x) for x in row) for row in rows]
    lines = [four(x) for x in (*dots, scale, *scores, *exps, total, *weights)]
    if level == 1:
        lines += [", ".join(four(float(f"{w:.4f}") * x) for x in v) for w, v in zip(weights, values)]
    return lines + [four(x) for x in output]


def practise(args: list[str], lines: list[str], **extra: str) -> subprocess.CompletedProcess:
    """attncli practice with `lines` on a pipe as its standard input."""
    return subprocess.run(
        [sys.executable, "-m", "attncli", "practice", *args],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        env={**ENVIRONMENT, **extra},
        timeout=120,
    )


# The answer fields of the tutor's steps that `check` grades once issue 25 lands (attncli.steps does not know them yet)
PENDING = ("exp", "sums", "turned_queries", "turned_keys", "positioned", "biased_scores", "mean", "root")
UNKNOWN_TO_CHECK = tuple(name for name in PENDING if name not in (*ANSWERED, *STREAM_STEPS))
NEEDS_25 = pytest.mark.skipif(
    bool(UNKNOWN_TO_CHECK),
    reason=f"check does not grade the answer fields {', '.join(UNKNOWN_TO_CHECK)} yet (issue 25)",
)


def known_to_check(text: str) -> str:
    """A record without the answer fields `check` does not know yet (UNKNOWN_TO_CHECK), every other line as written:
    what `check` can grade of it until issue 25 lands (then this drops nothing)."""
    out: list[str] = []
    skipping: int | None = None  # the indent of a dropped field's contents
    dash: int | None = None  # a dropped field began a list item: the next field kept begins it
    for line in text.splitlines():
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if skipping is not None and indent > skipping:
            continue
        skipping = None
        item = stripped.startswith("- ")
        body = stripped[2:] if item else stripped
        if body.endswith(":") and body[:-1] in UNKNOWN_TO_CHECK:
            skipping = indent + (2 if item else 0)
            dash = indent if item else dash
            continue
        if dash is not None:
            if indent == dash + 2 and not item:
                line = " " * dash + "- " + stripped
            else:
                out.append(" " * dash + "- {}")
            dash = None
        out.append(line)
    return "\n".join(out) + "\n"


def homework_of(text: str, tutor: session.Session, name: str = "problem.yaml") -> str:
    """The record of `tutor`'s session on the problem `text`, as much of it as `check` grades today."""
    return known_to_check(record.homework(yamldoc.load(text, name), tutor, SAMPLES))


def verdicts(stdout: str) -> list[str]:
    """The ✓ and ✗ the student saw, in order."""
    return [line[0] for line in stdout.splitlines() if line[:1] in ("✓", "✗")]


# The article, in a pipe


@pytest.mark.parametrize("level", [1, 2, 3])
def test_the_article_s_numbers_end_with_every_step_right(level: int) -> None:
    lines = article(level)
    assert lines[:5] == ["2.8284", "1.4142", "0", "0.7071", "2"] or level == 3
    assert lines[-5:-2] == ["0.6652", "0.2447", "0.0900"] or level != 2
    result = practise([BANK, "--level", str(level)], lines)
    assert result.returncode == 0, result.stdout + result.stderr
    assert verdicts(result.stdout) == ["✓"] * len(lines)
    assert f"{len(lines)} of {len(lines)} steps right." in result.stdout
    assert result.stderr == ""


def test_expressions_are_answers_too() -> None:
    lines = ["2*sqrt(2)", "sqrt(2)", "0", "1/sqrt(2)", "2", "1", "0", "e^2", "e", "1", "e^2+e+1"]
    lines += ["e^2/(e^2+e+1)", "e/(e^2+e+1)", "1/(e^2+e+1)", "1.4205", "0.5795"]
    result = practise([BANK], lines)
    assert result.returncode == 0, result.stdout
    assert verdicts(result.stdout) == ["✓"] * 16


def test_a_session_with_a_mistake_hints_show_and_skip_in_a_pipe() -> None:
    lines = ["2.8284", "1.4142", "0", "0.7071", "2.8284", "2", "hint", "hint", "1", "show", "", "bogus"]
    result = practise([BANK], lines)
    out = result.stdout
    assert result.returncode == 1  # not every step was right, and the input ended early
    assert "✗ not right: forgot to scale by 1/√d_k" in out
    assert "Try again (or: hint, show, skip)." in out
    assert "💡 q·k" not in out
    assert "💡 s = q·k × 1/√d_k." in out  # the first hint: the formula
    assert "💡 Combine: 1.4142 × 0.7071" in out  # the second: the numbers to combine, the student's own
    assert "→ The answer: 0 × 0.7071 = 0. Carry on with it." in out  # show
    assert "→ skipped; the answer is 7.3891" in out  # a blank line
    assert "? unknown name 'bogus'" in out
    assert verdicts(out) == ["✓", "✓", "✓", "✓", "✗", "✓", "✓"]
    summary = out[out.index("Summary") :]
    assert _row(summary, "scores s") == [1, 1, 1, 0, 0]
    assert _row(summary, "e^s") == [0, 0, 0, 1, 2]
    assert "missing_scale ×1: forgot to scale by 1/√d_k" in summary
    assert "attncli practice samples/bank.yaml" in summary.replace(str(SAMPLES) + "/", "samples/")
    assert "attncli practice" in summary and "--level 3" in summary


def _row(summary: str, step: str) -> list[int]:
    """The counts of one row of the summary table: first, second, shown, skipped, not reached."""
    line = next(line for line in summary.splitlines() if line.startswith(step + " "))
    return [int(cell) for cell in line[len(step) :].split()]


def test_a_second_miss_shows_the_answer_worked_out_and_carries_on() -> None:
    result = practise([BANK], ["3", "4", "1.4142"])
    assert "✗ not right" in result.stdout
    assert "The answer: 1.4142×2 + 0×0 = 2.8284. Carry on with it." in result.stdout
    assert "[2/16] q·k for the query 'bank' and the key 'net'" in result.stdout


def test_back_returns_to_the_previous_step_and_quit_ends_with_the_summary() -> None:
    result = practise([BANK], ["back", "2.8284", "back", "2.8284", "1.4142", "quit", "0"])
    out = result.stdout
    assert "This is the first step." in out
    assert out.count("[1/16]") == 3 and "Back one step." in out
    assert "[3/16]" in out and "2 of 16 steps right." in out
    assert result.returncode == 1


def test_help_lists_the_commands() -> None:
    result = practise([BANK], ["help"])
    assert "Commands: hint (the formula, then the numbers to combine), show (the answer)" in " ".join(
        result.stdout.split()
    )


def test_spanish_throughout_with_the_article_s_terms() -> None:
    lines = [line.replace(".", ",") for line in article()]
    lines[4] = "2,8284"  # the score without the scale, once
    lines.insert(5, "2")
    result = practise([BANK, "--lang", "es"], lines)
    out = result.stdout
    assert result.returncode == 0, out
    for words in ("consulta 'bank' con la clave 'fisherman'", "la puntuación s", "el peso de la clave", "salida"):
        assert words in out
    assert "✗ no es correcto: falta escalar por 1/√d_k" in out
    assert "Inténtalo otra vez (o: pista, mostrar, saltar)." in out
    assert "Resumen" in out and "16 de 16 pasos bien." in out
    assert "a la primera" in out and "al segundo" in out
    assert "--lang es" in out


def unbiased_scores(sample: str, head: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """q·k, and the scaled scores of `head` as a student who forgets the bias writes them (4 decimals),
    replayed in numpy from the problem's vectors; and the scale."""
    spec = pipeline.load(str(SAMPLES / sample)).heads[head]
    dots = np.asarray(spec.queries) @ np.asarray(spec.keys).T
    return dots, np.round(dots * spec.score.scale, 4), spec.score.scale


@pytest.mark.parametrize(("lang", "said"), [("en", "✗ not right: "), ("es", "✗ no es correcto: ")])
def test_the_tutor_names_a_forgotten_bias(lang: str, said: str) -> None:
    """samples/bias.yaml: the right q·k, scale and scaled scores, then at the step s + b the scores again, without
    b = [−1, 0, 1]."""
    dots, scores, scale = unbiased_scores("bias.yaml")
    unbiased = ", ".join(four(x) for x in scores[0])
    lines = [", ".join(four(x) for x in dots[0]), four(scale), unbiased, unbiased]
    result = practise([str(SAMPLES / "bias.yaml"), "--level", "3", "--lang", lang], lines)
    catalogue = {"en": en.MESSAGES, "es": es.MESSAGES}[lang]
    assert said + catalogue["check.diagnosis.bias_forgotten"] in result.stdout
    assert f"bias_forgotten ×1: {catalogue['check.diagnosis.bias_forgotten']}" in result.stdout  # the summary
    assert verdicts(result.stdout) == ["✓", "✓", "✓", "✗"]


def test_the_tutor_names_a_forgotten_alibi_in_each_head() -> None:
    """samples/alibi.yaml, causal, two heads with slopes 1/16 and 1/256: each head's scores without −m_h·|i − j|."""
    steps = pipeline.solve(pipeline.load(str(SAMPLES / "alibi.yaml")))
    tutor = session.Session(steps, level=3)
    for head in (0, 1):
        dots, scores, scale = unbiased_scores("alibi.yaml", head)
        unbiased = ", ".join(four(x) for x in scores[0])
        for line in (", ".join(four(x) for x in dots[0]), four(scale), unbiased):
            assert tutor.respond(line).kind == session.RIGHT
        assert tutor.current is not None and tutor.current.step == "biased_scores"
        forgot = tutor.respond(unbiased)
        assert (forgot.kind, forgot.codes) == (session.WRONG, ("bias_forgotten",))
        while tutor.current is not None and tutor.current.head == head:
            tutor.respond("skip")


def test_the_tutor_writes_negative_factors_in_parentheses_and_subtracts_a_negative_term() -> None:
    """Its workings printed `-1.5×-1.5` and `+ -2×1`; they are written as by hand now, by the terminal's function:
    q = [−1.5, −2] against k = [−1.5, 0.5] and [1, −2]; the weighted sums of values with negative values too."""
    text = (
        "tokens: [a, b]\nqueries: [[-1.5, -2], [1, 1]]\nkeys: [[-1.5, 0.5], [1, -2]]\n"
        "values: [[-1, 2], [3, -4]]\nscore: dot\n"
    )
    steps = pipeline.solve(pipeline.load(text=text))
    tutor = session.Session(steps, level=3)
    shown = [p for p in tutor.prompts if p.step in ("dot", "output")]
    workings = {(p.step, p.row, c): tutor.working(replace(p, columns=(c,))) for p in shown for c in p.columns}
    assert workings["dot", 0, 0] == "−1.5000×(−1.5000) − 2×0.5000"  # q(a)·k(a) = 2.25 − 1
    assert workings["dot", 0, 1] == "−1.5000×1 − 2×(−2)"  # q(a)·k(b) = −1.5 + 4
    assert workings["dot", 1, 0] == "1×(−1.5000) + 1×0.5000"
    q, k = np.array([[-1.5, -2], [1, 1]]), np.array([[-1.5, 0.5], [1, -2]])
    for (step, row, column), working in workings.items():
        assert "×-" not in working and "+ -" not in working and "×−" not in working, working
        if step == "dot":  # read back, each says q·k
            assert eval(working.replace("−", "-").replace("×", "*")) == pytest.approx(q[row] @ k[column])


def test_a_decimal_comma_is_refused_in_english_with_the_point_to_write() -> None:
    result = practise([BANK], ["2,8284"])
    assert "? '2,8284': decimal comma? write 2.8284" in result.stdout


def test_the_end_of_the_input_ends_with_the_summary() -> None:
    result = practise([BANK], ["2.8284"])
    assert result.returncode == 1
    assert _row(result.stdout[result.stdout.index("Summary") :], "q·k") == [1, 0, 0, 0, 2]
    assert "1 of 16 steps right." in result.stdout


def test_ctrl_c_in_a_pipe_ends_with_the_summary_so_far_and_130(tmp_path: Path) -> None:
    homework = tmp_path / "homework.yaml"
    with as_in_the_background():
        process = subprocess.Popen(
            [sys.executable, "-m", "attncli", "practice", BANK, "--record", str(homework)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENVIRONMENT,
            preexec_fn=sigint_by_default,
        )
    process.stdin.write("2.8284\n")
    process.stdin.flush()
    deadline = time.monotonic() + 60
    output = ""
    while "[2/16]" not in output and time.monotonic() < deadline:  # the second prompt: the first answer is in
        output += os.read(process.stdout.fileno(), 4096).decode()
    process.send_signal(signal.SIGINT)
    rest, errors = process.communicate(timeout=60)
    output += rest
    assert process.returncode == 130
    assert "Interrupted: the summary so far." in output
    assert "1 of 16 steps right." in output
    assert errors.strip() == "attncli: interrupted"
    assert 'dot:\n    bank: [2.8284, "?", "?"]' in homework.read_text()


# In a real terminal: Rich, colour, Ctrl-C


class Terminal:
    """attncli practice on a pseudo-terminal (`pty.fork`: the terminal is the child's controlling terminal,
    so Ctrl-C typed there is SIGINT, as for a student at a keyboard)."""

    def __init__(self, args: list[str], columns: int = 100) -> None:
        environment = {**ENVIRONMENT, "TERM": "xterm-256color"}
        environment.pop("COLUMNS")
        with as_in_the_background():
            self.pid, self.fd = pty.fork()
            if self.pid == 0:  # the child: nothing of pytest may run here
                sigint_by_default()
                os.execve(sys.executable, [sys.executable, "-m", "attncli", "practice", *args], environment)
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
        self.seen = b""

    def wait_for(self, text: str, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.seen and time.monotonic() < deadline and self.read(1):
            pass
        assert text in self.screen, (text, self.screen[-1500:])

    def read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if not ready:
            return True
        try:
            data = os.read(self.fd, 65536)
        except OSError:  # EIO: the child closed the terminal
            return False
        self.seen += data
        return bool(data)

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def interrupt(self) -> None:
        """Ctrl-C once the prompt waits for a line: readline's input() checks for a signal before it blocks in select(),
        so one that arrives while it still draws the prompt is heard only at the next key (CPython's race)."""
        time.sleep(0.5)
        self.type("\x03")

    def end(self, timeout: float = 60) -> int:
        """The child's exit code once it has said it was interrupted and ended; killed, and the test failed,
        if it has not within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.read(1) and not self.seen.endswith(b"interrupted\r\n"):
            pass
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                os.close(self.fd)
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.05)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.fd)
        raise AssertionError(f"attncli practice did not end within {timeout} s", self.screen[-1500:])

    @property
    def screen(self) -> str:
        return ANSI.sub("", self.seen.decode("utf-8", errors="replace")).replace("\r\n", "\n")


def test_a_whole_session_in_a_terminal_right_a_mistake_hint_show_and_ctrl_c() -> None:
    terminal = Terminal([BANK])
    for number, answer in enumerate(["2*sqrt(2)", "1.4142", "0", "0.7071"], start=1):
        terminal.wait_for(f"[{number}/16]")
        terminal.type(answer + "\r")
    terminal.wait_for("[5/16] the score s = q·k × 1/√d_k of the key 'fisherman': ")
    terminal.type("2.8284\r")  # the scale forgotten
    terminal.wait_for("Try again")
    terminal.type("2\r")
    terminal.wait_for("[6/16]")
    terminal.type("\r")  # an Enter by accident: asked again, not skipped
    terminal.type("hint\r")
    terminal.wait_for("💡")
    terminal.type("hint\r")
    terminal.wait_for("Combine")
    terminal.type("show\r")
    terminal.wait_for("[7/16]")
    terminal.interrupt()  # Ctrl-C
    code = terminal.end()
    screen = terminal.screen
    assert code == 130
    assert "\x1b[" in terminal.seen.decode()  # in colour
    assert screen.count("✓ right") == 5 and "→ skipped" not in screen
    assert "✗ not right: forgot to scale by 1/√d_k" in screen
    assert "These are the raw dot products q·k." in screen
    assert "💡 s = q·k × 1/√d_k." in screen and "💡 Combine: 1.4142 × 0.7071" in screen
    assert "→ The answer: 1.4142 × 0.7071 = 1.0000. Carry on with it." in screen  # from the student's own numbers
    assert "Interrupted: the summary so far." in screen
    summary = screen[screen.index("Summary") :]
    assert _row(summary, "q·k") == [3, 0, 0, 0, 0]
    assert _row(summary, "scores s") == [0, 1, 1, 0, 1]
    assert _row(summary, "weights") == [0, 0, 0, 0, 3]
    assert "5 of 16 steps right." in summary and "missing_scale ×1" in summary
    assert screen.rstrip().endswith("attncli: interrupted")


def test_ctrl_d_in_a_terminal_ends_with_the_summary() -> None:
    terminal = Terminal([BANK, "--lang", "es", "--level", "3"])
    terminal.wait_for("[1/7]")
    terminal.type("2,8284; 1,4142; 0\r")
    terminal.wait_for("[2/7]")
    terminal.type("\x04")  # Ctrl-D: the end of the input
    terminal.wait_for("Uno más difícil")
    assert terminal.end() == 1
    assert "✓ bien" in terminal.screen and "1 de 7 pasos bien." in terminal.screen


# Bad input: one line, exit 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([BANK, "--tokens", "4"], "--tokens: --tokens makes a new exercise: give it without a problem file"),
        (["-"], "the answers come on standard input: give the problem as a file"),
        (["--mask", "diagonal"], "--mask"),
        (["--tokens", "99"], "--tokens"),
        (["missing.yaml"], "missing.yaml"),
        ([BANK, "--level", "4"], "--level"),
        (["--resume"], "--resume: --resume continues a session from its record: name it with --record FILE"),
        ([BANK, "--resume", "--record", "r.yaml"], "--resume continues the problem the record holds"),
        (["--record", BANK, "--resume"], "holds no practice session"),
        (["--record", BANK], "already exists: continue that session with --resume, or overwrite it with --force"),
        (["--record", "/no/such/folder/r.yaml"], "--record: cannot write /no/such/folder/r.yaml"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str) -> None:
    result = practise(args, [])
    assert result.returncode == 2, result.stdout + result.stderr
    assert len(result.stderr.splitlines()) == 1 and message in result.stderr, result.stderr
    assert len(result.stderr) <= 200 and result.stdout == ""


def test_a_problem_too_large_to_work_by_hand_is_refused_before_any_prompt(tmp_path: Path) -> None:
    """120 tokens: 72,000 steps (its prompts were all made up front before: 2,000 tokens took 1.8 GB)."""
    count = 120
    rows = ", ".join(f"t{i}: [{i % 3}]" for i in range(count))
    problem = tmp_path / "large.yaml"
    problem.write_text(f"tokens: [{', '.join(f't{i}' for i in range(count))}]\n")
    problem.write_text(problem.read_text() + f"queries: {{{rows}}}\nkeys: {{{rows}}}\nvalues: {{{rows}}}\n")
    started = time.monotonic()
    result = practise([str(problem), "--record", str(tmp_path / "r.yaml")], ["1"])
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert "more than 10000 steps to work by hand" in result.stderr and len(result.stderr.splitlines()) == 1
    assert not (tmp_path / "r.yaml").exists() and time.monotonic() - started < 60


# Generated exercises: the same seed rules as generate, several heads, a mask


def prompts_of(text: str, level: int) -> list[str]:
    """The lines a careful student types for a generated exercise, from tests/reference.py, in the tutor's order:
    each head query by query (q·k, the scale once, s, e^s, the sum, the weights, [w × v], the output), then W_O."""
    problem = pipeline.load(text=text, name="x")
    mask = problem.mask.tolist()
    results = []
    lines: list[list[float]] = []
    whole = level == 3
    for head in problem.heads:
        q, k, v = head.queries.tolist(), head.keys.tolist(), head.values.tolist()
        result = reference.head(q, k, v, mask=mask)
        results.append(result.output)
        for i in range(len(q)):
            allowed = [j for j in range(len(k)) if mask[i][j]]
            exps = [math.exp(result.scores[i][j]) for j in allowed]
            cells = [
                [result.raw[i][j] for j in allowed],
                [1 / math.sqrt(len(k[0]))] if i == 0 else [],
                [result.scores[i][j] for j in allowed],
                exps,
                [math.fsum(exps)],
                [result.weights[i][j] for j in allowed],
            ]
            for row in cells:
                lines += [row] if whole and row else [[x] for x in row]
            if level == 1:
                lines += [[float(four(result.weights[i][j])) * x for x in v[j]] for j in allowed]
            lines += [result.output[i]] if whole else [[x] for x in result.output[i]]
    if len(problem.heads) > 1:
        concat, final = reference.multi_head(results, problem.w_o.tolist())
        for i in range(len(concat)):
            lines.append(concat[i])
            lines += [final[i]] if whole else [[x] for x in final[i]]
    return [", ".join(four(x) for x in row) for row in lines]


@pytest.mark.parametrize(
    ("options", "level"),
    [
        (["--tokens", "4", "--mask", "causal", "--seed", "7"], 2),
        (["--heads", "2", "--seed", "11"], 3),
        (["--tokens", "2", "--dk", "3", "--heads", "2", "--seed", "3"], 1),
    ],
)
def test_a_generated_exercise_answered_carefully_is_all_right(options: list[str], level: int) -> None:
    flags = dict(zip(options[::2], options[1::2]))
    made = exercises.Options(
        tokens=int(flags.get("--tokens", 3)),
        d_k=int(flags.get("--dk", 2)),
        heads=int(flags.get("--heads", 1)),
        mask=flags.get("--mask", "none"),
    )
    text = exercises.exercise(made, int(flags["--seed"]))
    lines = prompts_of(text, level)
    result = practise([*options, "--level", str(level)], lines)
    assert result.returncode == 0, result.stdout[-3000:]
    assert verdicts(result.stdout) == ["✓"] * len(lines)
    again = f"attncli practice {' '.join(options)}"
    assert again.replace("--seed", "").split()[0] in result.stdout
    assert f"--seed {flags['--seed']}" in result.stdout


def test_the_same_seed_practises_the_same_exercise_as_generate() -> None:
    generated = CliRunner().invoke(app, ["generate", "--seed", "5", "--tokens", "2"])
    problem = pipeline.load(text=generated.stdout, name="g")
    first = next(line for line in practise(["--seed", "5", "--tokens", "2"], []).stdout.splitlines() if "k(" in line)
    token = problem.tokens[0]
    keys = "[" + ", ".join(four(x) for x in problem.heads[0].keys[0]) + "]"
    assert first.strip() == f"k({token}) = {keys}"


# The record: check grades it as the tutor did


def answer_as_a_student(index: int, prompt: session.Prompt, truth: tuple[float, ...], dots: dict) -> str:
    """A first try that is right, wrong, a classic mistake, rounded early, or right from the student's own wrong
    q·k (which check calls carried), chosen by the prompt's number."""
    if prompt.step == "scores" and all((prompt.row, j) in dots for j in prompt.columns):
        return ", ".join(four(dots[(prompt.row, j)] / math.sqrt(2)) for j in prompt.columns)  # from their q·k
    kind = index % 5
    if kind == 1:
        if prompt.step == "dot":
            dots.update({(prompt.row, j): x + 0.5 for j, x in zip(prompt.columns, truth)})
        return ", ".join(four(x + 0.5) for x in truth)
    if kind == 2 and prompt.step == "scores":
        return ", ".join(four(x * math.sqrt(2)) for x in truth)  # the scale forgotten (d_k = 2)
    if kind == 3:
        return ", ".join(f"{x:.2f}" for x in truth)  # rounded early
    return ", ".join(four(x) for x in truth)


@pytest.mark.parametrize("seed", [1, 2])
def test_check_grades_the_record_as_the_tutor_did_on_the_first_try(seed: int, tmp_path: Path) -> None:
    text = exercises.exercise(exercises.Options(tokens=3, mask="causal"), seed)
    steps = pipeline.solve(pipeline.load(text=text, name="x"))
    tutor = session.Session(steps)
    first: dict[tuple[str, int, int], str] = {}
    dots: dict[tuple[int, int], float] = {}
    index = 0
    while (prompt := tutor.current) is not None:
        line = answer_as_a_student(index, prompt, tutor.truth(prompt), dots)
        index += 1
        is_first = tutor.states[tutor.index].first is None
        feedback = tutor.respond(line)
        if is_first and prompt.step in ANSWERED:
            for k, column in enumerate(prompt.columns):
                first[(prompt.step, prompt.row, column)] = "wrong" if k in feedback.wrong else feedback.kind
        if feedback.kind == session.WRONG and feedback.retry:
            tutor.respond(", ".join(four(x) for x in tutor.truth(prompt)))
    homework = tmp_path / "homework.yaml"
    homework.write_text(homework_of(text, tutor))
    graded = CliRunner().invoke(app, ["check", str(homework), "--format", "json"])
    assert graded.exit_code in (0, 1), graded.output
    report = json.loads(graded.stdout)
    cells = {(s["step"], c["row"], c["column"]): c["status"] for s in report["steps"] for c in s["cells"]}
    assert {key: cells[key] for key in first} == first
    assert "carried" in first.values() and "wrong" in first.values() and "right" in first.values()


def test_record_from_the_command_line_is_graded_the_same_by_check(tmp_path: Path) -> None:
    homework = tmp_path / "homework.yaml"
    lines = ["3", "2.8284", "1.4142", "0", "0.7071", "2.1213", "1", "0", "7.3891", "2.7183", "1", "11.1073"]
    lines += ["0.6652", "0.2447", "0.0900", "1.4205", "0.5795"]
    result = practise([BANK, "--record", str(homework)], lines)
    assert result.returncode == 0, result.stdout  # every step eventually right
    assert "✓ right from your own earlier numbers (the exact value: 2)" in result.stdout
    homework.write_text(known_to_check(homework.read_text()))
    graded = CliRunner().invoke(app, ["check", str(homework), "--format", "json"])
    report = json.loads(graded.stdout)
    statuses = [c["status"] for s in report["steps"] for c in s["cells"]]
    # dot, scores, then e^s, their sum, weights and output
    assert statuses == ["wrong", "right", "right", "carried", "right", "right", *["right"] * 9]
    assert verdicts(result.stdout) == ["✗", *["✓"] * 16]
    assert "sqrt(2)" in homework.read_text()  # the problem as written


def test_practising_a_recorded_file_records_it_afresh(tmp_path: Path) -> None:
    first, second = tmp_path / "first.yaml", tmp_path / "second.yaml"
    practise([BANK, "--record", str(first)], ["3"])
    practise([str(first), "--record", str(second)], ["2.8284", "1.4142"])
    text = second.read_text()
    assert text.count("answers:") == 1 and 'bank: [2.8284, 1.4142, "?"]' in text


def test_a_spanish_record_is_graded_in_english(tmp_path: Path) -> None:
    homework = tmp_path / "homework.yaml"
    practise([BANK, "--lang", "es", "--record", str(homework)], ["2,8284", "1,4142; 0"])
    homework.write_text(known_to_check(homework.read_text()))
    graded = CliRunner().invoke(app, ["check", str(homework), "--format", "json"])
    assert json.loads(graded.stdout)["steps"][0]["cells"][0]["given"] == "2.8284"


@pytest.mark.parametrize("sample", sorted(path.name for path in SAMPLES.glob("*.yaml")))
def test_every_sample_answered_to_4_decimals_is_all_right_for_the_tutor_and_for_check(sample: str) -> None:
    """Scores given, biases, ALiBi, projections, several heads, cross-attention: a careful student is never told off."""
    text = (SAMPLES / sample).read_text()
    steps = pipeline.solve(pipeline.load(str(SAMPLES / sample)))
    for level in session.LEVELS:
        tutor = session.Session(steps, level)
        kinds = []
        while (prompt := tutor.current) is not None:
            kinds.append(tutor.respond(", ".join(four(x) for x in tutor.truth(prompt))).kind)
        assert set(kinds) == {session.RIGHT}, (sample, level)
    written = homework_of(text, tutor, sample)
    report = pipeline.grade(pipeline.load(text=written, name=sample), text=written)
    assert report.ok and {s.status for s in report.steps} == {"right"}


def test_skipping_every_step_of_heads_without_w_o_shows_each_answer_and_ends_with_the_summary() -> None:
    """samples/gqa.yaml: four heads and no W_O, so the concatenation is the final output: no step of its own (it
    asked 8 that did not exist, and ended in an internal error, exit 70); the concatenation is shown once a row."""
    text = (SAMPLES / "gqa.yaml").read_text()
    steps = pipeline.solve(pipeline.load(text=text, name="gqa.yaml"))
    assert steps.problem.w_o is None and len(steps.heads) > 1
    tutor = session.Session(steps, 2)
    shown = {}
    while (prompt := tutor.current) is not None:
        feedback = tutor.respond("skip")
        assert prompt.step != "final"
        if prompt.step == "concat":
            shown[prompt.row] = feedback
    concat = steps.concat  # its numbers as shown (4 decimals), each head's output once, ‖ between
    assert concat is not None and set(shown) == set(range(concat.shape[0]))
    for row, feedback in shown.items():
        answer = [float(x) for x in feedback.answer.split(", ")]  # from the shown (rounded) numbers carried on
        assert answer == pytest.approx(concat[row].tolist(), abs=2e-3)
        assert feedback.working.count("‖") == len(steps.heads) - 1
    result = practise([str(SAMPLES / "gqa.yaml")], ["show"] * len(tutor.prompts))
    assert (result.returncode, result.stderr) == (1, "")  # 1: not every step right (every one shown)
    worked = [line for line in result.stdout.splitlines() if "‖" in line]  # the concatenation worked out once a row
    assert len(worked) == len(shown) and worked[0].count("‖") == len(steps.heads) - 1, worked


# The library itself


def test_the_session_is_a_pure_state_machine() -> None:
    steps = pipeline.solve(pipeline.load(BANK))
    ticks = iter(range(0, 1000, 30))
    tutor = session.Session(steps, clock=lambda: next(ticks))
    assert [p.step for p in tutor.prompts] == ["dot"] * 3 + ["scale"] + ["scores"] * 3 + ["exp"] * 3 + [
        "sum",
        *["weights"] * 3,
        *["output"] * 2,
    ]
    assert tutor.respond("hint").hint == 1
    assert tutor.respond("hint").working == "1.4142×2 + 0×0"
    assert tutor.respond("hint").hint == 3
    assert tutor.respond("2.83").kind == session.RIGHT  # right to its 2 decimals
    assert tutor.respond("1.4142").kind == session.RIGHT
    assert tutor.respond("0").kind == session.RIGHT
    wrong = tutor.respond("1/2")
    assert (wrong.kind, wrong.codes, wrong.retry) == (session.WRONG, ("wrong_scale",), True)
    assert tutor.respond("1").codes == ("missing_scale",)
    assert tutor.current.step == "scores"
    assert tutor.respond("quit").kind == session.QUIT and tutor.done
    summary = tutor.summary()
    assert summary.seconds == 30 and summary.right == 3 and not summary.ok
    assert dict(summary.rows)["scale"] == {session.SHOWN: 1}
    assert summary.mistakes == (("missing_scale", 1), ("wrong_scale", 1))


def test_the_weights_are_diagnosed_by_check_s_replays() -> None:
    steps = pipeline.solve(pipeline.load(BANK))
    tutor = session.Session(steps, level=3)
    for line in ["2.8284, 1.4142, 0", "0.7071", "2, 1, 0", "7.3891, 2.7183, 1", "11.1073"]:
        assert tutor.respond(line).kind == session.RIGHT
    no_exp = tutor.respond("0.6667, 0.3333, 0")  # the scores divided by their sum
    assert no_exp.codes == ("no_exp",) and no_exp.wrong == (0, 1, 2)


def test_parse_reads_numbers_as_check_does() -> None:
    token = LANGUAGE.set("es")
    try:
        assert [e.value for e in session.parse("0,6652; 0,2447", 2)] == [0.6652, 0.2447]
        assert [e.decimals for e in session.parse("1,5, 2", 2)] == [1, None]
        assert [e.value for e in session.parse("1,2", 2)] == [1, 2]
    finally:
        LANGUAGE.reset(token)
    assert [(e.value, e.decimals) for e in session.parse("0.0900", 1)] == [(0.09, 4)]
    assert session.parse("2*sqrt(2)", 1)[0].decimals is None
    assert [e.value for e in session.parse("1 2", 2)] == [1, 2]


# The tutor's own words for a slip at one step (issue 26, item 3)


def test_the_scale_given_as_sqrt_d_k_is_named_without_naming_scores_that_were_not_asked() -> None:
    """√2 for 1/√2: it said "these scores look multiplied by √d_k" before, though no score was asked yet."""
    result = practise([BANK], ["2.8284", "1.4142", "0", "1.4142"])
    assert "✗ not right: that is √d_k: the scale is its inverse, 1/√d_k" in result.stdout
    assert "scores" not in result.stdout.split("[4/16]")[1].split("[4/16]")[0]


def test_the_score_typed_at_e_s_is_named_as_the_score_itself_in_both_languages() -> None:
    """2 (the score) at e^s: it said "normalised without e^s … dividing the scores by their sum" before."""
    lines = ["2.8284", "1.4142", "0", "0.7071", "2", "1", "0", "2"]
    english = practise([BANK], lines)
    assert "✗ not right: that is the score itself: raise e to it" in english.stdout
    assert "no_exp ×1: that is the score itself: raise e to it" in english.stdout
    spanish = practise([BANK, "--lang", "es"], [line.replace(".", ",") for line in lines])
    assert "✗ no es correcto: esa es la puntuación misma: eleva e a ella" in spanish.stdout


def test_q_k_of_the_unturned_vectors_is_named_rope_forgotten() -> None:
    """samples/rope.yaml: 2.8284 = q·k of the vectors as given was "not right" with no diagnosis before. The turned
    vectors, by hand: bank at π turns q = [√2, 0] to [−√2, 0]; the keys at 0, π/2, π to [2, 0], [−1, 1], [0, −1]."""
    turned = ["-1.4142, 0", "2, 0", "-1, 1", "0, -1"]
    result = practise([str(SAMPLES / "rope.yaml")], [*turned, "2.8284"])
    assert "✗ not right: RoPE forgotten: that is q·k of the unturned vectors; use the turned q̃ and k̃" in result.stdout
    assert verdicts(result.stdout) == ["✓"] * 4 + ["✗"]
    assert "rope_forgotten ×1" in result.stdout
