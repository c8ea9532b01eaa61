"""`attncli compute` from the outside: through Typer's CliRunner and as a real subprocess.

The golden file tests/golden/bank.en.txt is the whole `--format text` output of
samples/bank.yaml at 80 columns, checked by hand against the article (q·k = 2.8284,
e^s sum 11.1073, weights 0.6652/0.2447/0.0900, output [1.4205, 0.5795]). After a
deliberate change to the layout, regenerate it (with bank.es.txt) and read the diff
before keeping it:

    ATTNCLI_UPDATE_GOLDEN=1 pytest tests/test_i18n.py
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from attncli import pipeline
from attncli.cli import app
from tests.paths import ONE_LAYER_SAMPLES, ROOT, SAMPLES

GOLDEN = Path(__file__).parent / "golden" / "bank.en.txt"
BANK = str(SAMPLES / "bank.yaml")
BANK_FLAGS = [
    "--tokens", "fisherman,net,bank",
    "--query-tokens", "bank",
    "--queries", "sqrt(2), 0",
    "--keys", "2,0; 1,1; 0,1",
    "--values", "2,0; 0,2; 1,1",
]  # fmt: skip
# Every number of the article's worked example, as the human output rounds it.
BANK_NUMBERS = ("1.4142", "0.7071", "2.8284", "2.0000", "1.0000", "7.3891", "2.7183", "11.1073",
                "0.6652", "0.2447", "0.0900", "1.3305", "0.4895", "1.4205", "0.5795")  # fmt: skip
# The same screen for every test: English, no colour, a known width.
SCREEN = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "LANGUAGE": None, "NO_COLOR": None, "FORCE_COLOR": None}
E = math.e
ANSI = re.compile(r"\x1b\[[0-9;]*m")
BANK_WEIGHTS = [E**2 / (E**2 + E + 1), E / (E**2 + E + 1), 1 / (E**2 + E + 1)]


def run(*args: str, columns: int = 80, stdin: str | None = None) -> Result:
    return CliRunner().invoke(app, ["compute", *args], input=stdin, env={**SCREEN, "COLUMNS": str(columns)})


def run_json(*args: str, stdin: str | None = None) -> dict:
    result = run(*args, "--format", "json", stdin=stdin)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def assert_bad_input(result: Result, *words: str) -> str:
    """Exit 2 with exactly one line on stderr, no traceback, nothing on stdout."""
    assert result.exit_code == 2, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("attncli: "), result.stderr
    assert "Traceback" not in result.output
    assert result.stdout == ""
    for word in words:
        assert word in lines[0], (word, lines[0])
    return lines[0]


# Exit codes


def mixed(numbers: list[str]) -> bool:
    """A row written two ways: a whole number beside a number with decimals ([0.5000, 0])."""
    return any(re.fullmatch(r"-?\d+", n) for n in numbers) and any(re.fullmatch(r"-?\d+\.\d+", n) for n in numbers)


@pytest.mark.parametrize("sample", ONE_LAYER_SAMPLES)
def test_every_sample_in_every_format_carries_the_numbers_of_the_core(sample: str) -> None:
    """JSON and CSV hold the core's numbers to the last bit; text, rich, Markdown and LaTeX show them rounded."""
    path = str(SAMPLES / sample)
    steps = pipeline.solve(pipeline.load(path))
    doc = run_json(path)
    assert doc["output"] == steps.output.tolist()
    assert [head["weights"] for head in doc["heads"]] == [head.weights.tolist() for head in steps.heads]
    outputs = [
        row for row in csv.DictReader(io.StringIO(run(path, "--format", "csv").stdout)) if row["step"] == "output"
    ]
    final = {(row["query"], int(row["index"])): float(row["value"]) for row in outputs if row["head"] == ""}
    tokens = steps.problem.query_tokens
    assert final == {(tokens[i], j): x for (i, j), x in np.ndenumerate(steps.output)}
    shown = {fmt: run(path, "--format", fmt).stdout for fmt in ("text", "markdown", "latex")}
    coloured = CliRunner().invoke(app, ["compute", path], env={**SCREEN, "COLUMNS": "80", "FORCE_COLOR": "1"})
    assert coloured.stdout != shown["text"]
    # The same lines; only a heading's padding, which frames its reverse video, is left out of plain text.
    assert [line.strip() for line in ANSI.sub("", coloured.stdout).splitlines()] == [
        line.strip() for line in shown["text"].splitlines()
    ]
    assert not [line for line in shown["text"].splitlines() if re.match(r" \w", line)]  # no stray space before words
    assert not [row for row in re.findall(r"\[([^][]*)\]", shown["text"]) if mixed(row.split(", "))]
    rounded = [f"{x:.4f}".replace("-0.0000", "0.0000") for x in steps.output.ravel()]
    weights = [f"{w:.4f}" for head in steps.heads for w in head.weights[steps.problem.mask]]
    for fmt, text in shown.items():
        assert [number for number in rounded + weights if number not in text] == [], fmt


def test_a_bad_row_exits_2_naming_file_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(Path(BANK).read_text().replace("bank: [0, 1]", "bank: [0, 1, 5]"), encoding="utf-8")
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if "[0, 1, 5]" in text)
    assert_bad_input(run(str(path)), f"bad.yaml:{line}:", "keys", "bank", "3", "2")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), ("no problem given",)),
        (("missing.yaml",), ("missing.yaml",)),
        ((BANK, "--format", "xml"), ("--format", "xml")),
        ((BANK, "--follow", "nobody"), ("--follow", "nobody")),
        ((BANK, "--keys", "1,0; 1,0"), ("--keys",)),
        ((BANK, "--queries", "sqrt(-1), 0"), ("--queries", "sqrt(-1)")),
        ((BANK, "--queries", "9**9**9, 0"), ("--queries",)),
        ((BANK, "--mask", "0,0,0"), ("bank",)),
        ((BANK, "--score", "cosinus"), ("cosine",)),
        ((*BANK_FLAGS[:-2],), ("values",)),
    ],
)
def test_bad_input_exits_2_with_one_line(args: tuple[str, ...], words: tuple[str, ...]) -> None:
    assert_bad_input(run(*args), *words)


def test_an_overflowing_product_is_bad_input_not_a_crash() -> None:
    """Finite inputs whose q·k passes float64's range: exit 2 with a reason, never 70 or a NaN."""
    result = run(*BANK_FLAGS[:4], "--queries", "1e200, 0", "--keys", "1e200,0; 1,1; 0,1", "--values", "1;2;3")
    assert_bad_input(result, "scores", "range")


def test_a_duplicate_field_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "twice.yaml"
    path.write_text("tokens: [a]\nvalues: [[1]]\ntokens: [b]\n", encoding="utf-8")
    assert_bad_input(run(str(path)), "twice.yaml:3:", "tokens")


# Where the problem comes from


def test_stdin_gives_the_same_result_as_the_file() -> None:
    from_stdin = run_json("-", stdin=Path(BANK).read_text(encoding="utf-8"))
    from_file = run_json(BANK)
    assert from_stdin["heads"] == from_file["heads"]
    assert from_stdin["output"] == from_file["output"]


def test_stdin_errors_are_named_stdin() -> None:
    assert_bad_input(run("-", stdin="tokens: [a]\nvalues: [[1]]\nkeyz: 1\n"), "<stdin>:3:", "keyz")


def test_the_readme_flags_alone_give_the_worked_example() -> None:
    flags, sample = run_json(*BANK_FLAGS), run_json(BANK)
    assert flags["tokens"] == sample["tokens"] == ["fisherman", "net", "bank"]
    assert flags["query_tokens"] == ["bank"]
    for name in ("queries", "keys", "values", "dot", "scores", "weights", "output"):
        np.testing.assert_allclose(flags["heads"][0][name], sample["heads"][0][name], rtol=0, atol=1e-15)
    np.testing.assert_allclose(flags["heads"][0]["weights"], [BANK_WEIGHTS], rtol=1e-12)


def test_the_readme_flags_alone_print_the_article_numbers() -> None:
    result = run(*BANK_FLAGS, "--format", "text")
    assert result.exit_code == 0, result.output
    for number in BANK_NUMBERS:
        assert number in result.stdout


def test_flags_override_the_fields_of_the_file() -> None:
    same_keys = run_json(BANK, "--keys", "1,0; 1,0; 1,0")
    np.testing.assert_allclose(same_keys["heads"][0]["weights"], [[1 / 3, 1 / 3, 1 / 3]], rtol=1e-12)
    np.testing.assert_allclose(same_keys["output"], [[1, 1]], rtol=1e-12)  # the mean of the values
    new_values = run_json(BANK, "--values", "1;0;0")
    np.testing.assert_allclose(new_values["output"], [[BANK_WEIGHTS[0]]], rtol=1e-12)
    assert new_values["title"] == "The fisherman repaired his net beside the bank"  # the rest of the file stays


def test_a_mask_flag_turns_the_bidirectional_sample_into_the_causal_one() -> None:
    flagged = run_json(str(SAMPLES / "storm_bidirectional.yaml"), "--mask", "causal")
    causal = run_json(str(SAMPLES / "storm_causal.yaml"))
    assert flagged["mask"] == causal["mask"]
    assert flagged["heads"][0]["weights"] == causal["heads"][0]["weights"]


def test_a_score_flag_replaces_the_score_function() -> None:
    doc = run_json(BANK, "--score", "dot")
    assert doc["heads"][0]["score"] == "dot"
    np.testing.assert_allclose(doc["heads"][0]["scores"], [[2 * math.sqrt(2), math.sqrt(2), 0]], rtol=1e-12)


def test_a_scale_flag_replaces_the_scale() -> None:
    doc = run_json(BANK, "--scale", "1")
    assert doc["heads"][0]["scale"] == 1.0
    np.testing.assert_allclose(doc["heads"][0]["scores"], [[2 * math.sqrt(2), math.sqrt(2), 0]], rtol=1e-12)


# JSON


@pytest.mark.parametrize("sample", ONE_LAYER_SAMPLES)
def test_json_equals_the_core_to_the_last_bit(sample: str) -> None:
    doc = run_json(str(SAMPLES / sample))
    path = SAMPLES / sample
    steps = pipeline.solve(pipeline.load(path))
    assert doc["tokens"] == list(steps.problem.tokens)
    assert doc["query_tokens"] == list(steps.problem.query_tokens)
    assert doc["mask"] == steps.problem.mask.tolist()
    assert doc["output"] == steps.output.tolist()
    assert len(doc["heads"]) == len(steps.heads)
    for got, head in zip(doc["heads"], steps.heads):
        assert got["weights"] == head.weights.tolist()
        assert got["output"] == head.output.tolist()
        assert got["values"] == head.values.tolist()
        assert got["scale"] == head.spec.score.scale
        assert got["scores"] == [[float(s) if ok else None for s, ok in zip(row, allowed)]
                                 for row, allowed in zip(head.scores, steps.problem.mask)]  # fmt: skip
    if steps.concat is None:
        assert "concat" not in doc
    else:
        assert doc["concat"] == steps.concat.tolist()


def test_json_has_null_scores_and_zero_weights_where_masked() -> None:
    doc = run_json(str(SAMPLES / "storm_causal.yaml"))
    head = doc["heads"][0]
    assert head["scores"][0][2:] == [None] * 5
    assert head["weights"][0][2:] == [0.0] * 5
    assert doc["mask"][0] == [True, True, False, False, False, False, False]


def test_json_is_one_strict_document() -> None:
    result = run(BANK, "--format", "json")
    assert result.stdout.endswith("}\n") and result.stdout.count("\n") == 1
    json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"non-standard JSON constant {name}"))


# Output options


def test_output_file_gets_the_result_and_stdout_stays_empty(tmp_path: Path) -> None:
    target = tmp_path / "bank.json"
    result = run(BANK, "--format", "json", "-o", str(target))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert json.loads(target.read_text(encoding="utf-8"))["output"] == run_json(BANK)["output"]
    text_target = tmp_path / "bank.txt"
    assert run(BANK, "--format", "text", "--output", str(text_target)).exit_code == 0
    written = text_target.read_text(encoding="utf-8")
    assert all(number in written for number in BANK_NUMBERS)
    assert "\x1b[" not in written
    assert not list(tmp_path.glob(".*attncli-tmp"))


def test_an_unwritable_output_is_bad_input(tmp_path: Path) -> None:
    assert_bad_input(run(BANK, "-o", str(tmp_path / "no" / "such" / "dir.txt")), "dir.txt")


def test_follow_shows_only_the_chosen_query_step_by_step() -> None:
    result = run(str(SAMPLES / "translation_cross.yaml"), "--follow", "orilla", "--format", "text")
    assert result.exit_code == 0, result.output
    assert "Query 'orilla'" in result.stdout
    assert "Query 'La'" not in result.stdout and "Query 'inundó'" not in result.stdout
    assert "inundó" in result.stdout  # still in the matrix of weights


def test_without_follow_many_queries_get_the_matrix_and_a_hint() -> None:
    result = run(str(SAMPLES / "translation_cross.yaml"), "--format", "text")
    assert "Query '" not in result.stdout
    assert "--follow" in result.stdout
    for weight in ("0.6134", "0.1933", "0.3904", "0.2192"):  # e^(2/√3)/(e^(2/√3)+2) and friends
        assert weight in result.stdout


def test_follow_can_repeat() -> None:
    result = run(str(SAMPLES / "storm_causal.yaml"), "--follow", "bank", "--follow", "storm", "--format", "text")
    assert result.stdout.count("Query '") == 2


def test_an_unknown_follow_names_a_few_query_tokens_once() -> None:
    """Forty tokens t1..t40: the message lists the first ten and the count, and says --follow once."""
    rows = "; ".join(["1"] * 40)
    result = run("--queries", rows, "--keys", rows, "--values", rows, "--follow", "nope")
    line = assert_bad_input(result, "nope")
    names = ", ".join(f"t{i}" for i in range(1, 11))
    assert line == f"attncli: --follow nope: not a query token (query tokens: {names}, ... (40))"


@pytest.mark.parametrize("precision", [0, 2, 6, 12])
def test_precision_sets_the_decimals(precision: int) -> None:
    result = run(BANK, "--precision", str(precision), "--format", "text")
    assert result.exit_code == 0
    w = BANK_WEIGHTS
    for number in (*w, 2 * w[0] + w[2], 2 * w[1] + w[2], E**2 + E + 1, math.sqrt(2)):
        assert f"{number:.{precision}f}" in result.stdout, number
    if precision != 4:
        assert "0.6652 " not in result.stdout
    assert f"rounded to {precision} decimals" in result.stdout


@pytest.mark.parametrize(
    ("option", "fmt"),
    [
        (["--precision", "1"], "json"),  # json, csv, npy and npz carry every digit whatever --precision says
        (["--precision", "4"], "csv"),  # given, even at its default
        (["--precision", "6"], "npy"),
        (["--follow", "bank"], "json"),  # they hold every query
        (["--follow", "bank"], "tsv"),
        (["--heatmap"], "json"),
        (["--heatmap"], "npz"),
    ],
)
def test_an_option_a_format_would_ignore_is_refused_in_one_line(option: list[str], fmt: str, tmp_path: Path) -> None:
    """They were silently ignored: `--precision 1 -f json` printed every digit as if it had not been given."""
    out = tmp_path / "out"
    result = run(BANK, *option, "--format", fmt, "-o", str(out))
    line = assert_bad_input(result, option[0])
    assert line == f"attncli: {option[0]} has no effect on --format {fmt}; it shapes rich, text, markdown, latex"
    assert list(tmp_path.iterdir()) == []


def test_heatmap_is_honoured_by_the_write_ups() -> None:
    """--heatmap shows the weight matrix even of one query: in the terminal, and now in Markdown and LaTeX too
    (they left it out). bank.yaml has one query: its weights are e²/Z, e/Z, 1/Z."""
    for fmt, row in (("markdown", "| bank | 0.6652 | 0.2447 | 0.0900 |"), ("latex", r"bank & $0.6652$ & $0.2447$")):
        assert row not in run(BANK, "--format", fmt).stdout
        assert row in run(BANK, "--format", fmt, "--heatmap").stdout
    assert f"{BANK_WEIGHTS[0]:.4f}" == "0.6652"


# Human output


@pytest.mark.parametrize("columns", [40, 80])
def test_bank_text_has_every_number_and_no_ellipsis(columns: int) -> None:
    result = run(BANK, "--format", "text", columns=columns)
    assert result.exit_code == 0, result.output
    for number in BANK_NUMBERS:
        assert number in result.stdout, number
    assert "…" not in result.stdout and "..." not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= columns
    assert "rounded" in result.stdout
    assert not [line for line in result.stdout.splitlines() if line.strip().startswith(":")]  # no empty labels


@pytest.mark.parametrize("columns", [20, 40, 80, 200])
@pytest.mark.parametrize("sample", sorted(path.name for path in SAMPLES.glob("*.yaml")))
def test_no_sample_is_ever_cut(sample: str, columns: int) -> None:
    result = run(str(SAMPLES / sample), "--format", "text", columns=columns)
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout
    assert "\x1b[" not in result.stdout
    assert "\n\n\n" not in result.stdout  # one blank line between steps, never two


def test_huge_numbers_are_written_in_scientific_notation() -> None:
    """1e300 in fixed notation has 301 digits, which no screen holds whole."""
    result = run(*BANK_FLAGS[:-2], "--values", "1e300, 0; 0, 1; 1, 1", "--format", "text", columns=40)
    assert result.exit_code == 0, result.output
    assert "1.0000e+300" in result.stdout
    assert f"{BANK_WEIGHTS[0] * 1e300:.4e}" in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) <= 40
    assert "0" * 20 not in result.stdout


def test_a_terminal_gets_colour_and_the_same_numbers() -> None:
    result = CliRunner().invoke(app, ["compute", BANK], env={**SCREEN, "COLUMNS": "80", "FORCE_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert "\x1b[" in result.stdout
    for number in BANK_NUMBERS:
        assert number in result.stdout


def test_masked_keys_are_shown_as_excluded() -> None:
    result = run(str(SAMPLES / "storm_causal.yaml"), "--follow", "bank", "--format", "text")
    lines = result.stdout.splitlines()
    storm_rows = [line for line in lines if line.startswith("storm ")]
    assert storm_rows, result.stdout
    assert any("masked" in line for line in storm_rows)  # the score
    assert any("excluded" in line for line in storm_rows)  # the weight and the contribution
    assert "0.6698" in result.stdout  # bank's weight on itself, e^(1/√2)/(1 + e^(1/√2))


def test_bank_text_at_80_columns_matches_the_golden_file() -> None:
    result = run(BANK, "--format", "text", "--lang", "en", columns=80)
    assert result.exit_code == 0, result.output
    assert result.stdout == GOLDEN.read_text(encoding="utf-8")


def test_the_golden_file_holds_the_article_numbers() -> None:
    """The golden file itself, read as the article: a wrong golden file must not pass quietly."""
    golden = GOLDEN.read_text(encoding="utf-8")
    assert "1.4142×2 + 0×0 = 2.8284" in golden
    assert "e^s / 11.1073" in golden
    for line, weight in zip(("fisherman   2.0000", "net         1.0000", "bank        0.0000"), BANK_WEIGHTS):
        row = next(text for text in golden.splitlines() if text.startswith(line))
        assert f"{weight:.4f}" in row
    assert "Output for 'bank': [1.4205, 0.5795]" in golden


# As a real program


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {name: value for name, value in os.environ.items() if name not in SCREEN}
    return {**env, "COLUMNS": "80", "PYTHONPATH": str(ROOT), **extra}


def attncli(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "attncli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=subprocess_env(**env),
        cwd=ROOT,
        timeout=60,
    )


def test_subprocess_prints_the_worked_example() -> None:
    done = attncli("compute", "samples/bank.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "\x1b[" not in done.stdout  # a pipe gets plain text
    for number in BANK_NUMBERS:
        assert number in done.stdout


def test_subprocess_text_is_the_golden_file() -> None:
    done = attncli("compute", "samples/bank.yaml", "--format", "text", "--lang", "en")
    assert done.stdout == GOLDEN.read_text(encoding="utf-8")


def test_subprocess_flags_and_stdin() -> None:
    flags = attncli("compute", *BANK_FLAGS, "--format", "json")
    piped = attncli("compute", "-", "--format", "json", stdin=Path(BANK).read_text(encoding="utf-8"))
    assert flags.returncode == piped.returncode == 0, flags.stderr + piped.stderr
    assert json.loads(flags.stdout)["output"] == json.loads(piped.stdout)["output"]


def test_subprocess_bad_input_exits_2_with_one_line() -> None:
    done = attncli("compute", "-", stdin="tokens: [a, b]\nvalues: [[1], [2]]\nscores: [[1, nan]]\n")
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith("attncli: <stdin>:3:")


def test_subprocess_no_color_is_plain_even_when_colour_is_forced() -> None:
    done = attncli("compute", "samples/bank.yaml", "--no-color", FORCE_COLOR="1")
    assert done.returncode == 0
    assert "\x1b[" not in done.stdout
    assert "0.6652" in done.stdout


@pytest.mark.parametrize("flags", [(), ("--format", "text")])
def test_plain_text_does_not_import_rich(flags: tuple[str, ...]) -> None:
    """Importing Rich costs a noticeable part of the start-up; a pipe gets the same lines without it."""
    program = (
        "import sys\n"
        "from attncli.cli import main\n"
        f"sys.argv = ['attncli', 'compute', 'samples/bank.yaml', *{flags!r}]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(any(name == 'rich' or name.startswith('rich.') for name in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=subprocess_env(),
        cwd=ROOT,
        timeout=60,
    )
    assert done.stderr == "False\n", done.stderr
    assert "Output for 'bank': [1.4205, 0.5795]" in done.stdout


def test_forced_colour_in_a_pipe_is_the_golden_text_in_colour() -> None:
    done = attncli("compute", "samples/bank.yaml", "--lang", "en", FORCE_COLOR="1")
    assert done.returncode == 0, done.stderr
    assert "\x1b[" in done.stdout
    assert re.sub(r"\x1b\[[0-9;]*m", "", done.stdout) == GOLDEN.read_text(encoding="utf-8")


def test_subprocess_version() -> None:
    done = attncli("--version")
    assert done.returncode == 0
    assert done.stdout.startswith("attncli ")


def test_the_cross_attention_hint_is_for_query_rows_only() -> None:
    keys = run(
        "-", stdin="tokens: [a, b]\nqueries: [[1, 0], [0, 1]]\nkeys: {a: [1, 0], c: [0, 1]}\nvalues: [[1], [2]]\n"
    )
    queries = run("-", stdin="tokens: [a, b]\nqueries: {z: [1, 0]}\nkeys: [[1, 0], [0, 1]]\nvalues: [[1], [2]]\n")
    assert keys.exit_code == queries.exit_code == 2
    assert "'c' is not one of the row names (a, b)" in keys.stderr and "cross-attention" not in keys.stderr
    assert "cross-attention" in queries.stderr


@pytest.mark.parametrize(
    ("args", "formula"),
    [
        ([str(SAMPLES / "additive.yaml")], "s = v·tanh(q·W_query + k·W_key)"),
        ([BANK, "--score", "dot"], "s = q·k"),
        ([BANK, "--score", "cosine"], "s = cos(q, k)"),
        ([BANK], "s = q·k × 1/√2 = 0.7071"),
        ([BANK, "--scale", "0.5"], "s = q·k × 0.5000"),
    ],
)
def test_the_score_line_names_a_scale_only_where_there_is_one(args: list[str], formula: str) -> None:
    """dot, cosine and additive scores are not scaled: their formula ends without × 1.0000."""
    score_line = next(line for line in run(*args, "--format", "text").stdout.splitlines() if line.startswith("Score"))
    assert score_line.split(", ", 1)[1].rsplit(" (d_k", 1)[0] == formula
