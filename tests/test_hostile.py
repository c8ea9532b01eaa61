"""Hostile inputs of issue 11 that the corpus (one `compute FILE` per case) cannot express.

Large problems run in a subprocess whose address space is capped, so a step that allocates
more than it should fails there instead of slowing the machine; numbers are compared with
math.hypot and hand calculations, never with attncli's own helpers.
"""

from __future__ import annotations

import csv
import errno
import io
import json
import math
import os
import re
import resource
import shlex
import signal
import stat
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from attncli import core, exercises, expr, probes, yamldoc
from attncli.cli import app, output, progress
from attncli.cli.environment import Environment
from attncli.errors import CONTROL_CODES, AttnError, Terminated, printable
from attncli.parsing import budget
from tests.children import sigint_by_default
from tests.paths import ROOT, SAMPLES
from tests.test_bad_inputs import run_limited

ROOT2 = math.sqrt(2)


def run(*args: str, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), input=stdin)


def one_line_error(result: Result, fragment: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("attncli: ") and result.stderr.count("\n") == 1, result.stderr
    assert fragment in result.stderr


# #6: norms of large and small vectors are scaled before squaring


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.floats(allow_nan=False, allow_infinity=False, width=64).filter(lambda x: abs(x) < 1e300 or x == 0),
        min_size=1,
        max_size=6,
    )
)
def test_row_norms_agree_with_math_hypot(row: list[float]) -> None:
    want = math.hypot(*row)
    got = float(core.row_norms(np.array([row]))[0])
    assert math.isclose(got, want, rel_tol=4e-16 * len(row), abs_tol=5e-324), (row, got, want)


def test_row_norms_past_the_range_are_infinite_not_wrong() -> None:
    assert core.row_norms(np.array([[1e200, 1e200], [1.5e308, 1.5e308], [0.0, 0.0]])).tolist() == [
        ROOT2 * 1e200,
        math.inf,
        0.0,
    ]
    tiny = core.row_norms(np.array([[3e-320, 4e-320]]))[0]  # squares underflow to 0 unscaled
    assert math.isclose(tiny, 5e-320, rel_tol=1e-3)


COSINE = """tokens: [a, b, c]
query_tokens: [q]
queries: [[{q}, {q}]]
keys: [[{k}, 0], [{k}, {k}], [0, {k}]]
values: [[1, 0], [0, 1], [1, 1]]
score: cosine
"""


@pytest.mark.parametrize(("q", "k"), [("1e200", "1"), ("1", "1e300"), ("1e300", "1e300"), ("1e-5", "1e300")])
def test_cosine_of_vectors_whose_products_overflow_or_underflow(q: str, k: str) -> None:
    """q = [x, x] against [y, 0], [y, y], [0, y]: cosines 1/√2, 1, 1/√2 whatever x and y are."""
    result = run("compute", "-", "--format", "json", stdin=COSINE.format(q=q, k=k))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    (head,) = json.loads(result.stdout)["heads"]
    np.testing.assert_allclose(head["dot"], [[1 / ROOT2, 1, 1 / ROOT2]], rtol=1e-15)
    exp = [math.exp(1 / ROOT2), math.e, math.exp(1 / ROOT2)]
    np.testing.assert_allclose(head["weights"], [[x / sum(exp) for x in exp]], rtol=1e-15)


def test_cosine_clamps_tiny_norms_like_torch() -> None:
    """‖q‖ = 1.41e-200 is below ε = 1e-8: cos = q·k / (ε·‖k‖), as torch.nn.functional.cosine_similarity."""
    result = run("compute", "-", "--format", "json", stdin=COSINE.format(q="1e-200", k="1"))
    assert result.exit_code == 0, result.output
    (head,) = json.loads(result.stdout)["heads"]
    np.testing.assert_allclose(head["dot"], [[1e-200 / 1e-8, 2e-200 / (1e-8 * ROOT2), 1e-200 / 1e-8]], rtol=1e-15)


BIG_VALUES = "tokens: [a, b]\nscores: [[0, 1], [1, 0]]\nvalues: [[{v}, {v}], [3, 4]]\n"


def test_norms_of_large_values_are_finite_and_right() -> None:
    result = run("compute", "-", "--norms", "--format", "json", stdin=BIG_VALUES.format(v="1e200"))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    (head,) = json.loads(result.stdout)["norms"]["heads"]
    assert head["transformed"] == pytest.approx([ROOT2 * 1e200, 5], rel=1e-15)
    alpha = [1 / (1 + math.e), math.e / (1 + math.e)]  # scores [0, 1]
    assert head["weighted"][0] == pytest.approx([alpha[0] * ROOT2 * 1e200, alpha[1] * 5], rel=1e-15)


def test_norms_past_the_range_are_an_error() -> None:
    """‖[1.5e308, 1.5e308]‖ = 2.1e308 is beyond float64, though every weighted sum of the values is not."""
    for fmt in ("json", "text"):
        result = run("compute", "-", "--norms", "--format", fmt, stdin=BIG_VALUES.format(v="1.5e308"))
        one_line_error(result, "<stdin>: norms: a result passes the range of floating-point numbers")


def test_summed_norms_through_w_o_of_large_values() -> None:
    """Two heads, W_O = identity: Σ_h α^h_ij·f_h(x_j) is α^1·v (first columns) and α^2·v (last columns)."""
    text = (
        "tokens: [a, b]\nquery_tokens: [q]\nheads:\n  - {scores: [[0, 0]]}\n  - {scores: [[0, 9]]}\n"
        "values: [[1e200, 1e200], [3, 4]]\nw_o: [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]\n"
    )
    result = run("compute", "-", "--norms", "--format", "json", stdin=text)
    assert result.exit_code == 0, result.output
    second = [1 / (1 + math.exp(9)), math.exp(9) / (1 + math.exp(9))]
    want = [math.hypot(0.5, second[0]) * ROOT2 * 1e200, math.hypot(0.5, second[1]) * 5]
    assert json.loads(result.stdout)["norms"]["summed"][0] == pytest.approx(want, rel=1e-15)


# #4: the budget counts every vector the calculation makes (projections, outputs, concat, W_O), not only (L, S) cells


@pytest.mark.parametrize(
    ("fields", "gib"),
    [
        ("w_q: {file: wide.npy}\nw_k: {file: wide.npy}\nw_v: [[1]]\n", 2 * 2000 * 500_000 * 8 / 2**30),
        ("w_q: [[1]]\nw_k: [[1]]\nw_v: [[1]]\nw_o: {file: wide.npy}\n", 2000 * 500_000 * 8 / 2**30),
    ],
)
def test_wide_projections_are_refused_from_their_shapes_in_a_capped_process(
    tmp_path: Path, fields: str, gib: float
) -> None:
    """4 MB of input, x of 2,000 rows and a matrix 500,000 wide: before, MemoryError (exit 70) for 7.45 GiB."""
    np.save(tmp_path / "x.npy", np.ones((2000, 1)))
    np.save(tmp_path / "wide.npy", np.ones((1, 500_000)))
    (tmp_path / "p.yaml").write_text("x: {file: x.npy}\n" + fields)
    for flags in ([], ["-q"], ["--format", "npy", "-o", "out.npy"]):
        result = run_limited(["p.yaml", *flags], tmp_path, memory=2 * 2**30)
        assert result.returncode == 2, result.stderr
        assert "p.yaml: too large to calculate step by step" in result.stderr
        size = float(result.stderr.split("need about ")[1].split(" GiB")[0])
        # the vectors themselves, shown to 0.1 GiB, and but for -q and -f npy (the blocked kernel) the (L, S) matrices
        assert gib - 0.05 <= size < gib + 0.2
    assert not (tmp_path / "out.npy").exists()


# #5: --norms never builds an (L, S, S) array, and stays inside the memory budget


def test_norms_of_1500_tokens_in_a_capped_process(tmp_path: Path) -> None:
    """Before: an (L, S, S) ranking of 3.14 GiB, exit 70. The calculation itself needs about 110 MiB."""
    np.save(tmp_path / "x.npy", np.random.default_rng(1).standard_normal((1500, 2)))
    (tmp_path / "p.yaml").write_text("x: {file: x.npy}\nw_q: [[1], [0]]\nw_k: [[1], [1]]\nw_v: [[1], [2]]\n")
    start = time.monotonic()
    result = run_limited(["p.yaml", "--norms", "--format", "json", "-q"], tmp_path, memory=512 * 2**20)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert time.monotonic() - start < 30


def test_norms_of_one_query_and_20000_keys_in_a_capped_process(tmp_path: Path) -> None:
    """Before: 12 s and 820 MB for two (1, 20000, 20000) boolean arrays."""
    rng = np.random.default_rng(2)
    np.save(tmp_path / "k.npy", rng.standard_normal((20_000, 2)))
    (tmp_path / "p.yaml").write_text("queries: [[1, 0.5]]\nkeys: {file: k.npy}\nvalues: {file: k.npy}\n")
    result = run_limited(["p.yaml", "--norms", "--format", "json", "-o", "out.json"], tmp_path, memory=512 * 2**20)
    assert result.returncode == 0, result.stderr
    doc = json.loads((tmp_path / "out.json").read_text())
    weights = np.array(doc["heads"][0]["weights"][0])
    lengths = np.hypot(*np.load(tmp_path / "k.npy").T)
    (head,) = doc["norms"]["heads"]
    np.testing.assert_allclose(head["weighted"][0], weights * lengths, rtol=1e-14)
    assert head["transformed"] == pytest.approx(lengths.tolist(), rel=1e-15)


def test_ranks_share_places_and_skip_masked_keys() -> None:
    values = np.array([[0.5, 0.2, 0.5, 0.9, 0.1], [1.0, 1.0, 1.0, 1.0, 1.0]])
    mask = np.array([[True, True, True, False, True], [True, False, True, True, True]])
    ranks = probes._ranks(values, mask)
    # Row 1 without the masked 0.9: 0.5 and 0.5 share place 1, then 0.2 is third and 0.1 fourth.
    assert ranks.tolist() == [[1, 3, 1, 0, 4], [1, 0, 1, 1, 1]]


def test_norms_beyond_the_memory_budget_are_refused(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """1000 × 1000 cells: the calculation (about 49 MB) fits a 64 MiB budget, its norms on top do not."""
    monkeypatch.setattr(budget, "MEMORY_BUDGET", 64 * 2**20)
    monkeypatch.chdir(tmp_path)
    np.save("x.npy", np.random.default_rng(3).standard_normal((1000, 2)))
    Path("p.yaml").write_text("x: {file: x.npy}\nw_q: [[1], [0]]\nw_k: [[1], [0]]\nw_v: [[0], [1]]\n")
    assert run("compute", "p.yaml", "--format", "json", "-q").exit_code == 0
    result = run("compute", "p.yaml", "--norms", "--format", "json", "-q")
    one_line_error(result, "p.yaml: too large to calculate step by step: 1 head × 1000 queries × 1000 keys")
    many = [arg for _ in range(40) for arg in ("--weights", "uniform")]  # 40 kept copies of the weights
    one_line_error(run("compute", "p.yaml", "--format", "json", "-q", *many), "(limit 64.0 MiB)")


# #17: scaling has a budget, and a progress bar on a terminal


@pytest.mark.parametrize(
    "args",
    [
        ["--dk", "4096", "--keys", "4096"],  # before: about 9 minutes
        ["--samples", "10000000"],
        ["--dk", ",".join(["4096"] * 100)],
        ["--dk", ",".join(["1"] * 40_000), "--keys", "1", "--samples", "2"],  # a generator each: 40 000 rows
    ],
    ids=["dk-keys", "samples", "many-dk", "many-rows"],
)
def test_scaling_beyond_its_budget_is_refused_at_once(args: list[str]) -> None:
    start = time.monotonic()
    result = run("scaling", *args)
    one_line_error(result, "the Monte Carlo would take")
    assert "more than the 268,435,456 allowed" in result.stderr
    assert time.monotonic() - start < 1


def test_scaling_work_is_what_progress_is_told() -> None:
    told: list[int] = []
    probes.scaling([3, 5], keys=4, samples=7, progress=told.append)
    assert sum(told) == probes.scaling_work([3, 5], 4, 7) == 7 * (4 * 5 + 3) + 7 * (4 * 7 + 5) + 2 * 8192


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_shows_only_for_long_runs_on_a_terminal() -> None:
    process = Environment.of_process(None, plain=True)
    for stream, total, shown in ((Terminal(), 10**9, True), (Terminal(), 10, False), (io.StringIO(), 10**9, False)):
        env = process._replace(stderr=stream, stderr_is_terminal=stream.isatty())
        with progress.bar(total, "Drawing", env) as advance:
            advance(total // 2)
            advance(total - total // 2)
        assert ("Drawing" in stream.getvalue()) is shown, stream.getvalue()


def test_scaling_in_a_pipe_prints_no_bar() -> None:
    result = run("scaling", "--dk", "64", "--keys", "64", "--samples", "9000", "--format", "json")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert json.loads(result.stdout)["rows"][0]["d_k"] == 64


# #1, #2: every integer read from text goes through expr.whole_number


@pytest.mark.parametrize(
    ("text", "value"),
    [("7", 7), (" 12 ", 12), ("٤", 4), ("１", 1), ("²", None), ("-1", None), ("+1", None), ("1.0", None), ("", None)],
)
def test_whole_numbers_as_int_reads_them_and_never_past_18_digits(text: str, value: int | None) -> None:
    assert expr.whole_number(text) == value
    assert expr.whole_number("9" * 18) == int("9" * 18)
    assert expr.whole_number("9" * 19) is None
    assert expr.whole_number("9" * 5000) is None  # int() would raise past 4,300 digits


def test_an_answer_with_a_5000_digit_exponent_is_just_wrong(tmp_path: Path) -> None:
    """Before: exit 70 while counting its decimals. 1e-99…9 is 0, not the output 1.4205."""
    text = (SAMPLES / "bank.yaml").read_text()
    (tmp_path / "homework.yaml").write_text(text + f"answers:\n  output: [1e-{'9' * 5000}, 0.5795]\n")
    result = run("check", str(tmp_path / "homework.yaml"), "--format", "json")
    assert result.exit_code == 1, result.output
    assert result.stderr == ""


# #7, #13, #20: array files that are no regular file, that link to a secret, or hold no real numbers


def test_a_fifo_named_as_an_array_file_is_refused_without_reading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    os.mkfifo("pipe.npy")  # opening it for reading would wait for a writer forever
    Path("p.yaml").write_text("queries: [[1]]\nkeys: [[1]]\nvalues: {file: pipe.npy}\n")
    start = time.monotonic()
    result = run("compute", "p.yaml")
    one_line_error(result, "values: pipe.npy is not a regular file (a folder, a pipe or a device)")
    assert time.monotonic() - start < 5


def test_a_table_linked_to_a_secret_does_not_print_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("secret.txt").write_text("root:x:0:0:root:/root:/bin/bash\n1,2\n")
    Path("link.csv").symlink_to(tmp_path / "secret.txt")
    Path("p.yaml").write_text("queries: [[1, 0]]\nkeys: [[1, 0]]\nvalues: {file: link.csv}\n")
    result = run("compute", "p.yaml")
    one_line_error(result, "values: link.csv, row 1, column 1: not a number")
    assert "root" not in result.stderr


def test_boolean_arrays_are_read_as_0_and_1(tmp_path: Path) -> None:
    np.save(tmp_path / "v.npy", np.array([[True, False], [False, True]]))
    (tmp_path / "p.yaml").write_text("tokens: [a, b]\nquery_tokens: [q]\nscores: [[0, 0]]\nvalues: {file: v.npy}\n")
    result = run("compute", str(tmp_path / "p.yaml"), "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["output"] == [[0.5, 0.5]]  # equal weights over [1, 0] and [0, 1]


# #12: one short line whatever the input's size


def test_every_error_line_is_cut_to_200_characters_with_the_cut_marked() -> None:
    result = run("scaling", "--keys", "9" * 5000)  # Typer's own message quotes the value in full
    one_line_error(result, "Invalid value for '--keys': '999")
    line = result.stderr.rstrip("\n")
    assert len(line) <= 200  # the value quoted at most 80 characters, as in every error of attncli
    assert "..." in line and line.endswith("(see 'attncli scaling -h')")


# #15: no numpy warning reaches stderr


def test_an_npy_header_claiming_2_to_the_124_numbers_is_one_line_in_a_real_process() -> None:
    """Before: numpy's memmap warned of an overflow (two more lines) before the error."""
    result = subprocess.run(
        [sys.executable, "-m", "attncli", "compute", "--keys", "@huge_shape.npy", "--queries", "1,0", "--values", "1"],
        cwd=ROOT / "tests" / "corpus",
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "huge_shape.npy is too large" in result.stderr


def test_a_cosine_written_out_for_huge_vectors_warns_of_nothing() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = run("compute", "-", "--format", "text", stdin=COSINE.format(q="1e200", k="1e200"))
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert "2.0000e+400" not in result.stdout and "/ (1.4142e+200×1.4142e+200) = 1.0000" in result.stdout


# #7: a pipe or a device as -o is written directly, never replaced by a renamed file


def attncli_process(*args: str, cwd: Path, **kwargs: object) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "attncli", *args], cwd=cwd, env=environment, **kwargs)


def test_output_to_dev_stdout_and_to_a_fifo(tmp_path: Path) -> None:
    """Before: /dev/stdout into a pipe resolved to `pipe:[n]`, which has no path: exit 2 and nothing written."""
    bank = str(SAMPLES / "bank.yaml")
    piped = attncli_process(
        "compute", bank, "--format", "json", "-o", "/dev/stdout", cwd=tmp_path, stdout=subprocess.PIPE
    )
    out, _ = piped.communicate(timeout=60)
    assert piped.returncode == 0
    assert json.loads(out)["output"][0] == pytest.approx([1.4205, 0.5795], abs=5e-5)
    os.mkfifo(tmp_path / "fifo")
    writer = attncli_process("compute", bank, "--format", "json", "-o", "fifo", cwd=tmp_path)
    with open(tmp_path / "fifo", "rb") as reader:  # attncli waits for a reader, as `> fifo` would
        received = reader.read()
    assert writer.wait(timeout=60) == 0
    assert json.loads(received)["tokens"] == ["fisherman", "net", "bank"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["fifo"]  # still a FIFO, no temporary beside it
    assert stat.S_ISFIFO((tmp_path / "fifo").stat().st_mode)


# #8: the outputs of a run are written only once all of it has succeeded


def test_pictures_are_not_left_behind_by_a_run_that_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    bank = str(SAMPLES / "bank.yaml")
    failed = run("compute", bank, "--svg", "pic.svg", "--html", "pic.html", "-o", "nodir/out.json", "--format", "json")
    one_line_error(failed, "cannot write nodir/out.json")
    assert list(tmp_path.iterdir()) == []
    done = run("compute", bank, "--svg", "pic.svg", "--html", "pic.html", "-o", "out.json", "--format", "json")
    assert done.exit_code == 0, done.output
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out.json", "pic.html", "pic.svg"]


# #18: SIGTERM ends a run like Ctrl-C: temporary files removed, one line, 143


def test_sigterm_while_the_output_is_written_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal arrives while the temporary file is flushed: attncli's handler raises Terminated there."""
    monkeypatch.chdir(tmp_path)

    def terminated(descriptor: int) -> None:
        raise Terminated

    monkeypatch.setattr(os, "fsync", terminated)
    result = run("compute", str(SAMPLES / "bank.yaml"), "--format", "json", "-o", "out.json", "--svg", "pic.svg")
    assert result.exit_code == 143
    assert result.stderr == "attncli: terminated (SIGTERM); no output was left behind\n"
    assert list(tmp_path.iterdir()) == []


def test_sigterm_to_a_real_process(tmp_path: Path) -> None:
    process = attncli_process(
        "scaling", "--dk", "512", "--keys", "512", "--samples", "600", "--format", "json", "-o", "out.json",
        cwd=tmp_path, stderr=subprocess.PIPE, text=True, preexec_fn=sigint_by_default,
    )  # fmt: skip
    time.sleep(1.5)  # started, and computing
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 143
    assert err == "attncli: terminated (SIGTERM); no output was left behind\n"
    assert list(tmp_path.iterdir()) == []


# #16: only a plain << merges; a quoted '<<' is a name like any other


def test_a_quoted_merge_key_is_a_field_and_a_plain_one_merges() -> None:
    quoted = "tokens: ['<<', b]\nquery_tokens: [b]\nqueries: [[1]]\nkeys: {'<<': [1], b: [2]}\nvalues: [[1], [3]]\n"
    result = run("compute", "-", "--format", "json", stdin=quoted)
    assert result.exit_code == 0, result.output
    weights = json.loads(result.stdout)["heads"][0]["weights"][0]  # scores 1 and 2: softmax by hand
    assert weights == pytest.approx([1 / (1 + math.e), math.e / (1 + math.e)], rel=1e-15)
    plain = "x-row: &row {b: [2]}\ntokens: [a, b]\nqueries: [[1]]\nkeys: {<<: *row, a: [1]}\nvalues: [[1], [3]]\n"
    merged = run("compute", "-", "--format", "json", "--query-tokens", "b", stdin=plain)
    assert merged.exit_code == 0, merged.output
    assert json.loads(merged.stdout)["heads"][0]["weights"][0] == pytest.approx(weights, rel=1e-15)


def test_generated_tokens_named_like_a_merge_key_read_back() -> None:
    made = run("generate", "--tokens", "<<,b", "--seed", "3", "--answers")
    assert made.exit_code == 0, made.output
    checked = run("check", "-", "--format", "json", stdin=made.stdout)
    assert checked.exit_code == 0, checked.output
    assert json.loads(checked.stdout)["status"] == "right"


# #10: file names and token names as they are shown: escaped on a terminal, inert in a spreadsheet


def test_file_names_are_escaped_in_check_and_compare(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    evil = "\x1b[31mevil\u202e.yaml"
    Path(evil).write_text((ROOT / "tests" / "check_cases" / "bank_right.yaml").read_text())
    Path("=cmd.yaml").write_text(Path(evil).read_text())
    for args in (["check", evil, "=cmd.yaml"], ["check", evil, "--format", "text"], ["compare", evil, evil]):
        result = run(*args)
        assert result.exit_code == 0, result.output
        assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
        assert "\\x1b[31mevil\\u202e.yaml" in result.stdout
    rows = run("check", "=cmd.yaml", evil, "--format", "csv").stdout.splitlines()
    assert rows[1].startswith("'=cmd.yaml,") and rows[2].startswith("\\x1b[31mevil\\u202e.yaml,")


def test_token_names_a_spreadsheet_would_evaluate_are_prefixed_in_csv_only() -> None:
    flags = ["--tokens", "=1+1,@x", "--query-tokens", "@x", "--queries", "1", "--keys", "1; 1", "--values", "1; 1"]
    table = run("compute", *flags, "--format", "csv").stdout
    assert "'=1+1" in table and "'@x" in table and ",=1+1" not in table
    assert json.loads(run("compute", *flags, "--format", "json").stdout)["tokens"] == ["=1+1", "@x"]


# #19: a large YAML document is refused while it is read, before building the problem


BIG = "tokens: [a]\nqueries: [[1]]\nkeys: [[1]]\nvalues:\n" + "  - [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n" * 110_000


def test_a_document_past_the_value_limit_is_refused_as_it_is_read() -> None:
    """1.1 M values: before, 2.65 s and 217 MB to reach the limit of 1 M; now the limit is 250,000."""
    result = run("compute", "-", stdin=BIG)
    one_line_error(result, "<stdin>:22731: the document holds more than 250000 values")


def test_a_document_past_the_value_limit_is_never_built(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counting alone refuses it: building the first 250,000 values cost 1.7 s of CPU, counting them 0.3 s."""
    monkeypatch.setattr(yamldoc._Builder, "build", lambda self, text: pytest.fail("built before it was counted"))
    with pytest.raises(AttnError) as caught:
        yamldoc.load(BIG, "big.yaml")
    assert caught.value.key == "yaml.too_large"
    started = time.process_time()
    with pytest.raises(AttnError):
        yamldoc.load(BIG, "big.yaml")
    assert time.process_time() - started < 1.0  # CPU time, so that a loaded machine does not count


def test_an_alias_bomb_past_a_large_document_is_counted_before_building(monkeypatch: pytest.MonkeyPatch) -> None:
    """Aliases cost what they repeat in the counting pass too, also an anchor defined inside a collection."""
    monkeypatch.setattr(yamldoc._Builder, "build", lambda self, text: pytest.fail("built before it was counted"))
    rows = "".join(f"x-{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n" for i in range(1, 12))
    with pytest.raises(AttnError) as caught:
        yamldoc.load(f"x-0: &a0 [1]\n{rows}", "bomb.yaml")
    # line 10's four *a8 (152,917 values each) take the count from 203,895 past 250,000
    assert (caught.value.key, caught.value.where.line) == ("yaml.too_large", 10)


# #9: generate reads --tokens as compute does, and writes all YAML through yamldoc's one writer

TRICKY_NAMES = [
    *("<<", "yes", "1e3", "~", "&a", "*a", "!x", "%y", "@z", "`q`", "[l]", "{m}", "- d", "? k", "a: b", "#c"),
    *('say "hi"', "back\\slash", "it's", "a b", "ñandú", "日本", "🙂", "=1+1", "| b", "> f", "\u00a0nbsp"),
]


@pytest.mark.parametrize(
    ("tokens", "fragment"),
    [
        ("a\nw_o: {file: /etc/passwd}\n#,b", "--tokens: tokens[1]: holds the control character \\n"),
        ("a\x1b[31m,b", "--tokens: tokens[1]: holds the control character \\x1b"),
        ("a,b\u202e", "--tokens: tokens[2]: holds the control character \\u202e"),
        ("a" * 10_000 + ",b", "--tokens: tokens[1]: a name of 10000 characters; token names are at most 200"),
        ("a,\udc80", "--tokens: tokens[2]: holds \\udc80, a byte that is not UTF-8 text"),
        (",,", "--tokens: tokens: expected a list of token names"),
    ],
)
def test_generate_refuses_names_that_compute_refuses(tokens: str, fragment: str) -> None:
    one_line_error(run("generate", "--tokens", tokens, "--seed", "1"), fragment)
    flags = ["--query-tokens", "b", "--queries", "1", "--keys", "1; 1", "--values", "1; 1"]
    assert fragment.removeprefix("--tokens: ") in run("compute", "--tokens", tokens, *flags).stderr


def test_compute_refuses_the_same_long_name_in_a_file() -> None:
    text = "tokens: [" + "a" * 201 + ", b]\nqueries: [[1], [1]]\nkeys: [[1], [1]]\nvalues: [[1], [1]]\n"
    one_line_error(run("compute", "-", stdin=text), "<stdin>:1: tokens[1]: a name of 201 characters")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40))
@example("\ufffe")  # a noncharacter: PyYAML refused the comment that held it
def test_a_written_scalar_reads_back_as_its_text_on_one_line(text: str) -> None:
    written = yamldoc.scalar(text)
    assert "\n" not in written and not any(ord(c) in CONTROL_CODES for c in written)
    assert yamldoc.load(f"k: {written}\n", "w.yaml").data == {"k": text}
    note = yamldoc.comment(text)
    assert "\n" not in note and not any(ord(c) in CONTROL_CODES for c in note)
    assert yamldoc.load(f"k: 1  {note}\n{note}\n", "w.yaml").data == {"k": 1}


@pytest.mark.parametrize("names", [TRICKY_NAMES[i : i + 12] for i in range(0, len(TRICKY_NAMES), 12)])
@pytest.mark.parametrize("projections", [False, True])
def test_every_generated_file_reads_back_with_the_names_given(names: list[str], projections: bool) -> None:
    """The sheet and its key read back as the names given; the remake command in the comment makes the same bytes."""
    args = ["generate", "--tokens", ",".join(names), "--seed", "4", "--answers", "--heads", "2"]
    made = run(*args, *(["--projections"] if projections else []))
    assert made.exit_code == 0, made.output
    data = yamldoc.load(made.stdout, "made.yaml").data
    stripped = [name.strip() for name in names]
    assert data["tokens"] == stripped
    assert set(data) <= {"title", "notes", "tokens", "x", "heads", "w_o", "answers", "require"}  # a key's settings
    if not projections:
        assert all(list(head["queries"]) == stripped for head in data["heads"])
    remake = made.stdout.splitlines()[1].removeprefix("#   ")
    again = run(*shlex.split(remake)[1:])
    assert again.stdout == made.stdout
    checked = run("check", "-", stdin=made.stdout)  # the key is right by its own rule
    assert checked.exit_code == 0, checked.output


def test_a_worksheet_folder_cannot_add_a_line_to_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    folder = "x\nw_o: {file: /etc/passwd}\n#"
    made = run("generate", "--tokens", "<<,#c,yes", "--count", "2", "--seed", "9", "-o", folder)
    assert made.exit_code == 0, made.output
    files = sorted((tmp_path / folder).iterdir())
    assert len(files) == 6
    for file in files:
        text = file.read_text()
        assert "\nw_o: {file" not in text and "\x1b" not in text
        data = yamldoc.load(text, file.name).data
        assert data["exercise"] == file.name.split("-key")[0].split("-answers")[0].removesuffix(".yaml")
        assert "w_o" not in data and data.get("tokens", ["<<", "#c", "yes"]) == ["<<", "#c", "yes"]


# #14: a graded file's array files must lie in its own folder; compute and the teacher's key may name any path

HOMEWORK = """tokens: [a, b]
query_tokens: [a]
queries: [[1, 0]]
keys: {{file: {file}}}
values: [[1, 0], [0, 1]]
answers:
  weights: [[{w1:.4f}, {w2:.4f}]]
"""
W1 = math.exp(1 / ROOT2) / (math.exp(1 / ROOT2) + 1)  # scores [1, 0]·I / √2 = [0.7071, 0], weights by hand


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    """hw/ (the homework's folder) and other/, each with an identity k.npy; hw/ also has links out and in."""
    for name in ("hw", "other"):
        (tmp_path / name).mkdir()
        np.save(tmp_path / name / "k.npy", np.eye(2))
    (tmp_path / "hw" / "out.npy").symlink_to(tmp_path / "other" / "k.npy")
    (tmp_path / "hw" / "secret.csv").symlink_to("/etc/passwd")
    (tmp_path / "hw" / "sub").mkdir()
    (tmp_path / "hw" / "sub" / "in.npy").symlink_to(tmp_path / "hw" / "k.npy")
    return tmp_path


def homework(folder: Path, file: str) -> str:
    path = folder / "hw" / "t.yaml"
    path.write_text(HOMEWORK.format(file=json.dumps(file), w1=W1, w2=1 - W1))
    return str(path)


OUTSIDE = ["../other/k.npy", "out.npy", "secret.csv", "{tmp}/other/k.npy", "sub/../../other/k.npy"]


@pytest.mark.parametrize("file", OUTSIDE)
def test_a_graded_file_cannot_name_an_array_outside_its_folder(folders: Path, file: str) -> None:
    graded = homework(folders, file.format(tmp=folders))
    result = run("check", graded)
    one_line_error(result, f"{graded}:4: keys: ")
    assert "is outside the homework's folder" in result.stderr and "root:" not in result.stderr
    assert "está fuera de la carpeta de la tarea" in run("check", graded, "--lang", "es").stderr
    if file != "secret.csv":
        assert run("compute", graded, "--format", "json").exit_code == 0  # compute reads what its user names


@pytest.mark.parametrize("file", ["k.npy", "sub/in.npy", "sub/../k.npy", "{tmp}/hw/k.npy"])
def test_a_graded_file_may_name_arrays_inside_its_folder(folders: Path, file: str) -> None:
    result = run("check", homework(folders, file.format(tmp=folders)))
    assert result.exit_code == 0, result.output
    assert "2/2 — all right" in result.stdout


def test_a_key_may_name_arrays_anywhere_but_the_homework_checked_against_it_may_not(folders: Path) -> None:
    key = folders / "key.yaml"
    key.write_text(HOMEWORK.format(file=json.dumps("other/k.npy"), w1=W1, w2=1 - W1))
    answers_only = folders / "hw" / "answers.yaml"
    answers_only.write_text(f"answers:\n  weights: [[{W1:.4f}, {1 - W1:.4f}]]\n")
    outside = homework(folders, "../other/k.npy")
    result = run("check", "--key", str(key), str(answers_only), outside, "--format", "csv")
    assert result.exit_code == 2
    status = {row["file"]: row["status"] for row in csv.DictReader(io.StringIO(result.stdout))}
    assert status == {str(answers_only): "right", outside: "not_graded"}
    assert "is outside the homework's folder" in result.stderr


# Issue 23 #1: check in bounded memory and time on any homework within generate's limits


def measured(arguments: list[str], cwd: Path, memory: int = 2**30) -> tuple[subprocess.CompletedProcess, float, float]:
    """attncli ARGUMENTS in a process capped at `memory` bytes of address space: its result, the peak resident
    memory it reports of itself (MB; VmHWM, which starts again at exec, unlike ru_maxrss, which keeps the forked
    test process's) and the CPU seconds it took."""
    script = (
        "import re, runpy, sys\n"
        "sys.argv = ['attncli', *sys.argv[1:]]\n"
        "try:\n"
        "    runpy.run_module('attncli', run_name='__main__')\n"
        "finally:\n"
        "    status = open('/proc/self/status').read()\n"
        "    print('peak', re.search(r'VmHWM:\\s*(\\d+)', status).group(1), file=sys.stderr)\n"
    )

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = run_limited(arguments, cwd, memory, program=("-c", script), timeout=120)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    *lines, peak = result.stderr.splitlines()
    result.stderr = "".join(line + "\n" for line in lines)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return result, int(peak.split()[1]) / 1024, cpu


def every_answer_wrong(text: str) -> str:
    """A generated key with every number of its answers replaced by 1.1·n + 0.37 (4 decimals)."""
    problem, answers = text.split("\nanswers:\n")
    moved = re.sub(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])", lambda m: f"{1.1 * float(m.group()) + 0.37:.4f}", answers)
    return problem + "\nanswers:\n" + moved


def test_a_homework_wrong_everywhere_is_graded_in_bounded_memory_and_time(tmp_path: Path) -> None:
    """6 tokens, 4 heads, d_k 8, projections, every answer 1.1·n + 0.37: before, 3.6 GB and 15 s (the issue
    measured 21 GB and 56 s), the carried roundings of every replay kept; exit 70 under this 1 GiB cap."""
    key = exercises.exercise(exercises.Options(tokens=6, heads=4, d_k=8, projections=True, answers=True), 1)
    (tmp_path / "homework.yaml").write_text(every_answer_wrong(key))
    result, peak, cpu = measured(["check", "homework.yaml", "--format", "json"], tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    report = json.loads(result.stdout)
    assert report["status"] == "wrong" and report["first_mistake"] == "queries[1]"
    assert {step["status"] for step in report["steps"]} <= {"wrong", "carried", "rounded"}
    assert peak < 300, f"{peak:.0f} MB"
    assert cpu < 3, f"{cpu:.1f} s of CPU"


# Issue 23 #2: an output never names an input of the run; every output written (or refused) before anything prints


def test_an_output_linked_to_an_input_is_refused_and_the_input_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    homework = (ROOT / "tests" / "corpus" / "answered.yaml").read_bytes()
    Path("h.yaml").write_bytes(homework)
    Path("link.yaml").symlink_to("h.yaml")
    os.link("h.yaml", "hard.yaml")
    for target in ("link.yaml", "hard.yaml"):
        result = run("check", "h.yaml", "--format", "json", "-o", target)
        one_line_error(result, f"-o: cannot write {target}: it is h.yaml, which this run reads")
    key = run("check", "--key", "link.yaml", "h.yaml", "--format", "csv", "-o", "h.yaml")
    one_line_error(key, "-o: cannot write h.yaml: it is link.yaml, which this run reads")  # the key, read first
    assert Path("h.yaml").read_bytes() == homework and Path("link.yaml").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["h.yaml", "hard.yaml", "link.yaml"]


def test_a_side_output_that_cannot_be_written_prints_nothing(tmp_path: Path) -> None:
    """Before: the whole step-by-step on stdout, then the error (a full device, a folder)."""
    bank = str(SAMPLES / "bank.yaml")
    for option, target in (("--html", "/dev/full"), ("--svg", "/dev/full"), ("--svg", str(tmp_path))):
        result = run("compute", bank, "--format", "text", option, target)
        assert result.exit_code == 2, result.output
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1 and f"cannot write {target}: " in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_generate_writes_the_whole_set_or_none_of_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--force over a set one of whose files is a folder: before, half the set written and "wrote 3 exercises"
    said before the error."""
    monkeypatch.chdir(tmp_path)
    old = {f"exercise-0{n}.yaml": f"old {n}\n" for n in (1, 2, 3)}
    Path("g").mkdir()
    for name, text in old.items():
        Path("g", name).write_text(text)
    Path("g", "exercise-02-key.yaml").mkdir()
    result = run("generate", "--count", "3", "--seed", "5", "-o", "g", "--force")
    one_line_error(result, "cannot write g/exercise-02-key.yaml: Is a directory")
    assert "wrote" not in result.stderr
    assert {p.name: p.read_text() for p in Path("g").iterdir() if p.is_file()} == old
    made = run("generate", "--count", "3", "--seed", "5", "-o", "new/set")
    assert made.exit_code == 0, made.output
    assert made.stderr.startswith("attncli: wrote 3 exercises") and len(list(Path("new/set").iterdir())) == 9

    def full(descriptor: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    failed = run("generate", "--count", "3", "--seed", "5", "-o", "other/set")
    one_line_error(failed, "cannot write other/set/exercise-01.yaml: No space left on device")
    assert not Path("other").exists()  # the folders it made are gone again


def test_a_signal_as_the_temporary_is_made_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM handled just after `open` made the temporary, before the cleanup knew of it: before, a
    .out.json.PID.attncli-tmp stayed behind."""
    monkeypatch.chdir(tmp_path)
    real_open = open

    def opened_then_terminated(path: object, *args: object, **kwargs: object) -> object:
        handle = real_open(path, *args, **kwargs)  # type: ignore[call-overload]
        if str(path).endswith(".attncli-tmp"):
            handle.close()
            raise Terminated
        return handle

    monkeypatch.setattr(output, "open", opened_then_terminated, raising=False)
    result = run("compute", str(SAMPLES / "bank.yaml"), "--format", "json", "-o", "out.json")
    assert result.exit_code == 143
    assert list(tmp_path.iterdir()) == []


# Issue 23 #3: students' text never raw: answer cells and exercise ids escaped in every report and gradebook

STUDENT = """exercise: "ex\\e[31m1\\x9b"
tokens: [fisherman, net, bank]
query_tokens: [bank]
queries: {bank: [sqrt(2), 0]}
keys: [[2, 0], [1, 1], [0, 1]]
values: [[2, 0], [0, 2], [1, 1]]
answers:
  weights: ["0.6652\\r", "0.2447\\x85", "0.0900\\u2028"]
  output: ["1.4205\\x1c", "\\v0.5795\\f"]
"""
RAW = [chr(code) for code in CONTROL_CODES if chr(code) != "\n"]


def test_answer_cells_and_exercise_ids_reach_no_report_raw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: "0.6652\\r" (and NEL, U+2028, FS, VT, FF) raw in check's table; the id's ESC and C1 raw in the CSV,
    JSON and Markdown gradebooks. Every number still counts: the file is right."""
    monkeypatch.chdir(tmp_path)
    Path("s.yaml").write_text(STUDENT)
    shown = {fmt: run("check", "s.yaml", "--format", fmt) for fmt in ("text", "json", "csv", "markdown")}
    for fmt, result in shown.items():
        assert result.exit_code == 0, (fmt, result.output)
        assert not [c for c in result.stdout if c in RAW], (fmt, result.stdout)
    table = shown["text"].stdout
    assert "0.6652\\r ✓" in table and "0.2447\\x85 ✓" in table and "\\x0b0.5795\\x0c ✓" in table
    report = json.loads(shown["json"].stdout)
    assert report["exercise"] == "ex\x1b[31m1\x9b"  # the text itself, escaped only as JSON writes it
    assert [c["given"] for s in report["steps"] for c in s["cells"]][:3] == ["0.6652\r", "0.2447\x85", "0.0900\u2028"]
    assert "\\u009b" in shown["json"].stdout and "\\u2028" in shown["json"].stdout
    assert next(csv.DictReader(io.StringIO(shown["csv"].stdout)))["exercise"] == "ex\\x1b[31m1\\x9b"


def test_an_error_quoting_a_students_text_is_escaped_in_every_gradebook(tmp_path: Path) -> None:
    """Before: a CSI (U+009B) quoted in the not-graded error went raw into JSON and the Markdown note."""
    homework = tmp_path / "h.yaml"
    homework.write_text(STUDENT.replace('"1.4205\\x1c"', '"1.42\\x9b[2J"'))
    for fmt in ("json", "csv", "markdown"):
        result = run("check", str(homework), "--format", fmt)
        assert result.exit_code == 2 and "is not an arithmetic expression" in result.stdout
        assert not [c for c in result.stdout if c in RAW], (fmt, result.stdout)
    error = json.loads(run("check", str(homework), "--format", "json").stdout)["error"]
    assert "'1.42\x9b[2J' is not an arithmetic expression" in error


def test_each_mediums_one_escaping_function_lets_no_control_character_through() -> None:
    """The terminal's (printable), CSV's (text_cell), JSON's (json_doc.dumps), Markdown's (cell, and escape for
    titles and notes, line breaks kept) and LaTeX's (latex.text, line breaks kept)."""
    from attncli.render import json_doc, latex, long_table, markdown

    hostile = "a" + "".join(chr(code) for code in CONTROL_CODES) + "=z|`"
    kept_lines = {"\n", "\t"}
    for escape, kept in (
        (printable, set()),
        (long_table.text_cell, set()),
        (markdown.cell, set()),
        (markdown.escape, kept_lines),
        (latex.text, kept_lines),
    ):
        shown = escape(hostile)
        assert {c for c in shown if ord(c) in CONTROL_CODES} <= kept, escape
    written = json_doc.dumps({"text": hostile})
    assert written.endswith("\n") and not [c for c in written[:-1] if ord(c) in CONTROL_CODES]
    lone = "".join(c for c in hostile if not 0xD800 <= ord(c) <= 0xDFFF) + "\udc80"  # JSON pairs \ud800\udc00
    assert json.loads(json_doc.dumps({"text": lone})) == {"text": lone}


# Issue 23 #4: a cost budget beside the value budget; out of memory is one line and 2


def test_the_step_by_step_view_of_more_cells_than_its_budget_is_refused_at_once(tmp_path: Path) -> None:
    """65 heads of 64 queries × 16 keys over one kv head: 66,560 cells laid out one by one (as text: seconds; as
    SVG: half a minute); JSON, within its own 2,000,000, still writes them."""
    queries = "[" + ", ".join(f"[{i % 3 - 1}, {i % 2}]" for i in range(64)) + "]"
    keys = "[" + ", ".join(f"[{i % 2}, {i % 3 - 1}]" for i in range(16)) + "]"
    heads = "".join(f"  - {{queries: {queries}}}\n" for _ in range(65))
    (tmp_path / "many.yaml").write_text(f"kv_heads:\n  - {{keys: {keys}, values: {keys}}}\nheads:\n{heads}")
    many = str(tmp_path / "many.yaml")
    for args, fragment in (
        (["--format", "text"], "--format: text would print 66560 (query, key) cells and their steps (limit 65536)"),
        (["--format", "markdown"], "--format: markdown would print 66560"),
        (["--format", "json", "-q", "--svg", str(tmp_path / "p.svg")], "--svg: svg would print 66560"),
    ):
        started = time.process_time()
        one_line_error(run("compute", many, *args), fragment)
        assert time.process_time() - started < 2
    written = run("compute", many, "--format", "json")
    assert written.exit_code == 0 and len(json.loads(written.stdout)["heads"]) == 65
    assert sorted(p.name for p in tmp_path.iterdir()) == ["many.yaml"]


def test_a_stack_is_within_the_memory_budget_over_all_its_layers(tmp_path: Path) -> None:
    """Ten layers over 4,000 tokens, each within 4 GiB alone: before, every layer checked alone, then
    MemoryError (exit 70) in a process capped at 3 GiB; now refused from the shapes, at the sixth layer."""
    np.save(tmp_path / "x.npy", np.random.default_rng(4).standard_normal((4000, 2)))
    layer = "  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1, 0], [0, 1]]}\n"
    (tmp_path / "stack.yaml").write_text("x: {file: x.npy}\nlayers:\n" + layer * 10)
    result = run_limited(["stack.yaml", "--format", "json", "-q"], tmp_path, memory=3 * 2**30)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1
    assert (
        "stack.yaml: too large to calculate step by step: 6 layers (1 head × 4000 × 4000 in the last)" in result.stderr
    )


def test_running_out_of_memory_below_the_budget_is_one_line_and_2(tmp_path: Path) -> None:
    """7,000 tokens need about 2.3 GiB, within attncli's 4 GiB, in a process capped at 1 GB: before, "internal
    error: MemoryError ... please report it" and 70. Nothing is left behind."""
    np.save(tmp_path / "x.npy", np.random.default_rng(5).standard_normal((7000, 2)))
    (tmp_path / "p.yaml").write_text(
        "x: {file: x.npy}\nw_q: [[1, 0], [0, 1]]\nw_k: [[1, 0], [0, 1]]\nw_v: [[1, 0], [0, 1]]\n"
    )
    result = run_limited(["p.yaml", "--format", "npz", "-o", "out.npz"], tmp_path, memory=10**9)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (
        "attncli: out of memory: this run needs more than the machine (or its memory limit) gives; a smaller problem,"
        " -q or --format npy need less\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.yaml", "x.npy"]


@pytest.mark.parametrize(
    "options",
    [
        exercises.Options(tokens=12, d_k=8, d_v=8, heads=4, answers=True),
        exercises.Options(tokens=12, d_k=8, d_v=8, heads=4, projections=True, answers=True, mask="causal"),
        exercises.Options(tokens=12, d_k=8, heads=4, gqa=True, projections=True, answers=True),
        exercises.Options(tokens=12, d_k=8, heads=4, layers=4, norm="layer", answers=True),
    ],
    ids=["tokens-dk-heads", "projections", "gqa", "layers"],
)
def test_generate_draws_within_its_maxima_in_under_a_second(options: exercises.Options) -> None:
    """Before: --tokens 12 --dk 8 --heads 4 took 7 to 10 s, every draw listing the 4^8 rows it samples from."""
    for seed in (1, 2, 3):
        started = time.process_time()
        exercises.exercise(options, seed)
        assert time.process_time() - started < 1


# Issue 23 #5: round two's leftovers


@pytest.mark.parametrize("window", ["99999999999999999999", "9" * 300])
def test_a_window_past_int64_is_every_distance(window: str) -> None:
    """Before: OverflowError, exit 70. A window wider than any two positions are apart masks nothing more."""
    text = "tokens: [a, b, c]\nqueries: [[1, 0], [0, 1], [1, 1]]\nkeys: [[1, 0], [0, 1], [1, 1]]\n"
    text += "values: [[1, 0], [0, 1], [1, 1]]\nmask: causal\n"
    wide, plain = (run("compute", "-", "--format", "json", stdin=text + extra) for extra in (f"window: {window}\n", ""))
    assert wide.exit_code == 0, wide.output
    document = json.loads(wide.stdout)
    assert document["mask_rule"]["window"] == int(window)
    assert document["heads"] == json.loads(plain.stdout)["heads"]
    assert document["mask"] == [[True, False, False], [True, True, False], [True, True, True]]
