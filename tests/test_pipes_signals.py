"""Closed pipes, Ctrl-C, and output files that are written whole or not at all.

Documented behaviour (README, "Errors and exit codes"): a reader that stops early (`| head`)
ends attncli quietly with status 0; Ctrl-C ends it with one line, "attncli: interrupted", and
status 130; `-o FILE` replaces FILE in one step, so it holds the old or the new content,
never half of one, and no temporary file is left behind.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import signal
import stat
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attncli.cli import app
from tests.children import as_in_the_background, sigint_by_default
from tests.paths import ROOT, SAMPLES

BANK = str(SAMPLES / "bank.yaml")
ENVIRONMENT = {**os.environ, "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8"}
READ_SYSCALLS = {"0", "63"}  # read(2) on x86-64 and on arm64


def attncli(*args: str, **kwargs: object) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "attncli", *args], env=ENVIRONMENT, **kwargs)


@pytest.fixture(scope="module")
def big_problem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 tokens: several MB of JSON, so a reader that stops early closes the pipe mid-stream."""
    folder = tmp_path_factory.mktemp("big")
    np.save(folder / "x.npy", np.random.default_rng(7).normal(size=(300, 4)))
    (folder / "big.yaml").write_text(
        "x: {file: x.npy}\nw_q: [[1], [2], [3], [4]]\nw_k: [[4], [3], [2], [1]]\nw_v: [[1], [1], [1], [1]]\n"
    )
    return folder / "big.yaml"


# Closed pipes


@pytest.mark.parametrize("format", ["text", "json", "csv"])
def test_head_c_10_ends_quietly(format: str, big_problem: Path) -> None:
    """The shell pipeline itself: `attncli compute ... | head -c 10`."""
    script = (
        f'"{sys.executable}" -m attncli compute "{big_problem}" --format {format} | head -c 10; exit ${{PIPESTATUS[0]}}'
    )
    result = subprocess.run(["bash", "-c", script], env=ENVIRONMENT, capture_output=True, timeout=60)
    assert len(result.stdout) == 10
    assert result.stderr == b""
    assert result.returncode == 0


@pytest.mark.parametrize("args", [[BANK], [BANK, "--format", "json"], ["--help"], ["compute", "--help"]])
def test_a_pipe_closed_before_the_first_byte(args: list[str]) -> None:
    """The reader is gone before attncli writes anything: still no message, still a documented status."""
    reading, writing = os.pipe()
    os.close(reading)
    process = attncli(*(["compute", *args] if args[0] == BANK else args), stdout=writing, stderr=subprocess.PIPE)
    os.close(writing)
    _, stderr = process.communicate(timeout=30)
    assert stderr == b""
    assert process.returncode == 0


def shell(command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", command], env=ENVIRONMENT, capture_output=True, text=True, timeout=30)


CLOSED = (">&-", "attncli: cannot write <stdout>: Bad file descriptor\n")
FULL = ("> /dev/full", "attncli: cannot write <stdout>: No space left on device\n")


@pytest.mark.parametrize(
    ("format", "redirect", "message"),
    [
        *[(format, *CLOSED) for format in ("text", "json", "csv", "npy")],
        *[(format, *FULL) for format in ("text", "json", "csv", "npy")],
    ],
)
def test_an_unwritable_stdout_is_one_line(redirect: str, message: str, format: str) -> None:
    if redirect.endswith("/dev/full") and not Path("/dev/full").exists():
        pytest.skip("no /dev/full")
    result = shell(f'"{sys.executable}" -m attncli compute "{BANK}" --format {format} {redirect}')
    assert (result.returncode, result.stderr) == (2, message)


def test_a_closed_stdin_is_one_line() -> None:
    result = shell(f'"{sys.executable}" -m attncli compute - <&-')
    assert (result.returncode, result.stderr) == (2, "attncli: <stdin>: cannot read the file: Bad file descriptor\n")


# Ctrl-C


def wait_until_reading_stdin(pid: int) -> None:
    """Block until process `pid` sits in read(0, ...), so the signal arrives while attncli waits for input."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            fields = Path(f"/proc/{pid}/syscall").read_text().split()
        except OSError:
            pytest.skip("needs Linux's /proc/PID/syscall")
        if fields[:2] in ([number, "0x0"] for number in READ_SYSCALLS):
            return
        time.sleep(0.02)
    raise AssertionError("attncli never read its standard input")


def test_sigint_while_reading_a_pipe_that_stays_open() -> None:
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with as_in_the_background():
        process = attncli("compute", "-", preexec_fn=sigint_by_default, **pipes)
    wait_until_reading_stdin(process.pid)
    process.send_signal(signal.SIGINT)
    stdout, stderr = process.communicate(timeout=20)
    assert process.stdin is not None
    assert (process.returncode, stdout, stderr) == (130, b"", b"attncli: interrupted\n")


def test_ctrl_c_typed_on_a_terminal() -> None:
    """^C typed on attncli's controlling terminal: the terminal sends SIGINT, as for a person."""
    leader, follower = os.openpty()

    def take_the_terminal() -> None:
        sigint_by_default()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    with as_in_the_background():
        process = attncli(
            "compute",
            "-",
            stdin=follower,
            stdout=follower,
            stderr=follower,
            start_new_session=True,
            preexec_fn=take_the_terminal,
        )
    os.close(follower)
    try:
        wait_until_reading_stdin(process.pid)
        os.write(leader, b"\x03")
        assert process.wait(timeout=20) == 130
        output = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            output += chunk
    finally:
        os.close(leader)
    assert output.decode().replace("\r\n", "\n").endswith("attncli: interrupted\n")
    assert output.count(b"attncli:") == 1


# Output files: whole or not at all


def temporaries(folder: Path) -> list[str]:
    return [path.name for path in folder.iterdir() if "attncli-tmp" in path.name]


@pytest.mark.parametrize("format", ["json", "text"])
def test_an_output_file_holds_what_stdout_would(format: str, tmp_path: Path) -> None:
    target = tmp_path / f"out.{format}"
    written = CliRunner().invoke(app, ["compute", BANK, "--format", format, "-o", str(target)])
    printed = CliRunner().invoke(app, ["compute", BANK, "--format", format])
    assert written.exit_code == 0, written.stderr
    assert written.stdout == ""
    if format == "json":
        assert json.loads(target.read_text()) == json.loads(printed.stdout)
    else:
        assert "Output for 'bank': [1.4205, 0.5795]" in target.read_text()
    assert temporaries(tmp_path) == []
    assert stat.S_IMODE(target.stat().st_mode) == 0o666 & ~current_umask()


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_bad_input_leaves_the_old_file_alone(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")
    result = CliRunner().invoke(app, ["compute", "--keys", "1,2; 3", "--values", "1; 2", "-o", str(target)])
    assert result.exit_code == 2
    assert target.read_text() == "old"
    assert temporaries(tmp_path) == []


@pytest.mark.parametrize(
    ("failure", "code", "message"),
    [
        (OSError(errno.ENOSPC, "No space left on device"), 2, "cannot write {target}: No space left on device"),
        (KeyboardInterrupt(), 130, "interrupted"),
    ],
    ids=["disk full", "ctrl-c"],
)
def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    failure: BaseException, code: int, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "out.json"
    target.write_text("old")

    def fail(descriptor: int) -> None:
        raise failure

    monkeypatch.setattr(os, "fsync", fail)  # after the data went to the temporary file, before the rename
    result = CliRunner().invoke(app, ["compute", BANK, "--format", "json", "-o", str(target)])
    assert result.exit_code == code
    assert result.stderr == f"attncli: {message.format(target=target)}\n"
    assert target.read_text() == "old"
    assert temporaries(tmp_path) == []


def test_a_symbolic_link_keeps_pointing_at_its_file(tmp_path: Path) -> None:
    real, link = tmp_path / "real.json", tmp_path / "link.json"
    real.write_text("old")
    link.symlink_to(real)
    result = CliRunner().invoke(app, ["compute", BANK, "--format", "json", "-o", str(link)])
    assert result.exit_code == 0, result.stderr
    assert link.is_symlink()
    assert json.loads(real.read_text())["output"][0][0] == pytest.approx(1.4205, abs=1e-4)


def test_a_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = CliRunner().invoke(app, ["compute", BANK, "--format", "json", "-o", str(fifo)])
    reader.join(timeout=20)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert json.loads(received[0])["tokens"] == ["fisherman", "net", "bank"]


@pytest.mark.parametrize("where", ["folder", "missing/out.json"])
def test_an_output_that_cannot_be_a_file_is_one_line(where: str, tmp_path: Path) -> None:
    target = tmp_path / where if where != "folder" else tmp_path
    result = CliRunner().invoke(app, ["compute", BANK, "-o", str(target)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"attncli: -o: cannot write {target}: ")  # found before anything is computed
    assert result.stderr.count("\n") == 1


def test_ctrl_c_while_the_command_line_loads_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The program's entry point catches an interrupt that comes before Typer runs (while imports load)."""
    import types

    from attncli import launch

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setitem(sys.modules, "attncli.cli", types.SimpleNamespace(main=interrupted))
    monkeypatch.setenv("LANG", "C")
    with pytest.raises(SystemExit) as stop:
        launch.main()
    assert stop.value.code == 130
    assert capsys.readouterr().err == "attncli: interrupted\n"
