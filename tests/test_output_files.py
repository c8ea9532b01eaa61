"""Output files read back: -o's extension names the format, npz holds every step, wide CSV and compare's CSV.

Every number is checked against numpy computed here from the problem's own inputs (the
article's formulas written out, nothing of attncli's), or against the same run with an
explicit --format; files are read back with numpy, csv and json, never with attncli.
"""

from __future__ import annotations

import csv
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from attncli.cli import app
from tests.paths import ROOT, SAMPLES

RNG = np.random.default_rng(12)
TOKENS = ["the", "=cat", "sat", "down"]
X = RNG.normal(size=(4, 3))
W = {name: RNG.normal(size=(3, 2)) for name in ("q1", "k1", "v1", "q2", "k2", "v2")}
W_O = RNG.normal(size=(4, 3))


def rows(matrix: np.ndarray) -> str:
    return "[" + ", ".join("[" + ", ".join(repr(float(v)) for v in row) + "]" for row in matrix) + "]"


PROBLEM = f"""title: two causal heads
tokens: [the, "=cat", sat, down]
mask: causal
x: {rows(X)}
heads:
  - {{name: one, w_q: {rows(W["q1"])}, w_k: {rows(W["k1"])}, w_v: {rows(W["v1"])}}}
  - {{name: two, w_q: {rows(W["q2"])}, w_k: {rows(W["k2"])}, w_v: {rows(W["v2"])}}}
w_o: {rows(W_O)}
"""


def expected() -> dict[str, np.ndarray]:
    """Every step by hand: Q = X·W_Q, s = Q·Kᵀ/√2 with the future masked, softmax, weights·V, concat, ·W_O."""
    steps: dict[str, np.ndarray] = {}
    future = np.triu(np.ones((4, 4), dtype=bool), 1)
    outputs = []
    for h, number in enumerate(("1", "2")):
        q, k, v = (X @ W[name + number] for name in "qkv")
        dot = q @ k.T
        scores = np.where(future, -np.inf, dot / math.sqrt(2))
        e = np.exp(scores - scores.max(axis=1, keepdims=True))
        weights = e / e.sum(axis=1, keepdims=True)
        outputs.append(weights @ v)
        named = {"queries": q, "keys": k, "values": v, "dot": dot, "scores": scores, "weights": weights}
        steps |= {f"heads/{h}/{name}": array for name, array in {**named, "output": outputs[-1]}.items()}
    steps["concat"] = np.concatenate(outputs, axis=1)
    steps["output"] = steps["concat"] @ W_O
    return steps


def run(*args: str) -> Result:
    return CliRunner().invoke(app, list(args))


@pytest.fixture
def problem(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "p.yaml"
    path.write_text(PROBLEM)
    return path


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape
    assert np.array_equal(np.isinf(got), np.isinf(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-12, atol=1e-14)


# npz: every step of every head, by its JSON name


def test_npz_holds_every_step_of_every_head(problem: Path) -> None:
    assert run("compute", "p.yaml", "-o", "all.npz").exit_code == 0
    want = expected()
    with np.load("all.npz", allow_pickle=False) as archive:
        assert set(archive.files) == {*want, "tokens", "query_tokens", "mask"}
        for name, array in want.items():
            assert_close(archive[name], array)
        assert archive["tokens"].tolist() == TOKENS
        assert archive["mask"].tolist() == (~np.triu(np.ones((4, 4), dtype=bool), 1)).tolist()


def test_npz_names_are_the_json_names(problem: Path) -> None:
    document = json.loads(run("compute", "p.yaml", "--format", "json").stdout)
    assert run("compute", "p.yaml", "-f", "npz", "-o", "all.npz").exit_code == 0
    with np.load("all.npz") as archive:
        for h, head in enumerate(document["heads"]):
            for name in ("queries", "keys", "values", "dot", "weights", "output"):
                np.testing.assert_array_equal(archive[f"heads/{h}/{name}"], np.array(head[name]))
        np.testing.assert_array_equal(archive["concat"], np.array(document["concat"]))
        np.testing.assert_array_equal(archive["output"], np.array(document["output"]))


def test_npz_of_given_scores_has_no_queries_keys_or_dot(tmp_path: Path) -> None:
    out = tmp_path / "two.npz"
    assert run("compute", str(SAMPLES / "two_heads.yaml"), "-o", str(out)).exit_code == 0
    with np.load(out) as archive:
        assert "heads/1/dot" not in archive.files and "heads/1/queries" not in archive.files
        e = np.exp([1.0, 2.0, 0.0])  # head 2's given scores [1, 2, 0], scale 1
        np.testing.assert_allclose(archive["heads/1/weights"], [e / e.sum()], rtol=1e-15)
        assert "heads/0/dot" in archive.files


def test_npz_at_4096_tokens_within_the_memory_budget(tmp_path: Path) -> None:
    """4,096 queries × 4,096 keys (16.8 M cells, refused by json and csv): every step, under 4 GiB of memory."""
    rng = np.random.default_rng(4096)
    q, k, v = (rng.normal(size=(4096, 8)) for _ in range(3))
    for name, array in (("q", q), ("k", k), ("v", v)):
        np.save(tmp_path / f"{name}.npy", array)
    (tmp_path / "big.yaml").write_text("queries: {file: q.npy}\nkeys: {file: k.npy}\nvalues: {file: v.npy}\n")
    code = (
        "import resource, sys; from attncli.launch import main; "
        "sys.argv = ['attncli', 'compute', 'big.yaml', '-o', 'big.npz']; "
        "exec('try:\\n main()\\nexcept SystemExit as end:\\n code = end.code'); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert int(done.stdout) * 1024 < 4 * 2**30  # the peak resident memory, in KiB on Linux
    with np.load(tmp_path / "big.npz") as archive:
        weights = archive["heads/0/weights"]
        assert weights.shape == (4096, 4096)
        for i in (0, 1234, 4095):  # a few rows by hand
            s = q[i] @ k.T / math.sqrt(8)
            e = np.exp(s - s.max())
            np.testing.assert_allclose(weights[i], e / e.sum(), rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(archive["heads/0/scores"][i], s, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(archive["output"][1234], weights[1234] @ v, rtol=1e-10)


def test_the_summary_says_what_holds_every_number_at_its_size(tmp_path: Path) -> None:
    """The large-problem hint names the format that works at the problem's size: json (or csv) up to their cell
    limit, past it npz (as long as every step fits in memory), past that the Python API; npy always the output."""
    flags = ["--queries", "1, 0", "--keys", "; ".join(["1, 0"] * 20), "--values", "; ".join(["1"] * 20)]
    text = " ".join(run("compute", *flags, "--format", "text").stdout.split())  # as one line, unwrapped
    assert "Every number: --format json (or csv); npy holds the output alone" in text
    es = " ".join(run("compute", *flags, "--format", "text", "--lang", "es").stdout.split())
    assert "Todas las cifras: --format json (o csv); npy guarda solo la salida" in es
    rng = np.random.default_rng(0)
    for tokens, every in ((1500, "--format npz -o FILE"), (16_384, "the Python API")):
        arrays = []
        for name in ("queries", "keys", "values"):
            np.save(tmp_path / f"{name}.npy", rng.standard_normal((tokens, 2)))
            arrays += [f"--{name}", f"@{tmp_path / f'{name}.npy'}"]
        text = " ".join(run("compute", *arrays, "--format", "text").stdout.split())
        assert f"Every number: {every}" in text, tokens  # json refuses 1500² > 2,000,000 cells


# -o FILE: the extension names the format unless --format is given


COMMANDS = {
    "compute": (["p.yaml"], {".json", ".csv", ".tsv", ".npy", ".npz", ".md", ".tex", ".txt"}),
    "check": ([str(SAMPLES.parent / "tests" / "corpus" / "answered.yaml")], {".json", ".csv", ".md", ".txt", ".html"}),
    "compare": ([str(SAMPLES / "bank.yaml"), str(SAMPLES / "bank_cashier.yaml")], {".json", ".csv", ".tsv", ".txt"}),
    "scaling": (["--dk", "2,8", "--samples", "200", "--seed", "1"], {".json", ".txt"}),
}
FORMAT_OF = {".json": "json", ".csv": "csv", ".tsv": "tsv", ".npy": "npy", ".npz": "npz", ".md": "markdown"}
FORMAT_OF |= {".tex": "latex", ".txt": "text", ".html": "html"}
CASES = [(command, suffix) for command, (_, suffixes) in COMMANDS.items() for suffix in sorted(suffixes)]


@pytest.mark.parametrize(("command", "suffix"), CASES)
def test_the_extension_of_o_names_the_format(problem: Path, command: str, suffix: str) -> None:
    args = COMMANDS[command][0]
    inferred = run(command, *args, "-o", f"out{suffix.upper() if suffix == '.csv' else suffix}")
    explicit = run(command, *args, "--format", FORMAT_OF[suffix], "-o", f"explicit{suffix}")
    assert inferred.exit_code == explicit.exit_code and inferred.exit_code in (0, 1), inferred.output
    got = Path(f"out{suffix.upper() if suffix == '.csv' else suffix}").read_bytes()
    want = Path(f"explicit{suffix}").read_bytes()
    if suffix == ".npz":  # zip entries carry their time
        with np.load(io.BytesIO(got)) as a, np.load(io.BytesIO(want)) as b:
            assert a.files == b.files and all(np.array_equal(a[n], b[n]) for n in a.files)
    else:
        assert got == want
    if suffix == ".json":
        json.loads(got.splitlines()[0])
    if suffix == ".npy":
        assert_close(np.load(io.BytesIO(got)), expected()["output"])


def test_an_explicit_format_wins_over_the_extension(problem: Path) -> None:
    assert run("compute", "p.yaml", "--format", "csv", "-o", "out.json").exit_code == 0
    assert Path("out.json").read_text().startswith("step,head,query,key,index,value\n")
    assert run("compute", "p.yaml", "--format", "text", "-o", "out.npy").exit_code == 0
    assert "two causal heads" in Path("out.npy").read_text()


@pytest.mark.parametrize("name", ["out.yaml", "out", "out.json.bak", "out.svg"])
def test_an_unknown_extension_keeps_the_default(problem: Path, name: str) -> None:
    assert run("compute", "p.yaml", "-o", name).exit_code == 0
    assert run("compute", "p.yaml", "--format", "text", "-o", "text.out").exit_code == 0
    assert Path(name).read_bytes() == Path("text.out").read_bytes()


@pytest.mark.parametrize(
    ("command", "name"),
    [("check", "grades.npy"), ("scaling", "table.csv"), ("compare", "c.tex"), ("compute", "view.html")],
)
def test_an_extension_the_command_does_not_write_is_refused(problem: Path, command: str, name: str) -> None:
    result = run(command, *COMMANDS[command][0], "-o", name)
    assert result.exit_code == 2 and result.stdout == "" and result.stderr.count("\n") == 1
    assert f"attncli: -o: {name} means --format {FORMAT_OF[Path(name).suffix]}, which this command" in result.stderr
    assert not Path(name).exists()


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_help_of_o_names_only_the_extensions_the_command_writes(command: str) -> None:
    """Before (issue 22): check and compare promised .npy, .npz, .tex ... and refused them."""
    help_text = " ".join(run(command, "--help").stdout.split())
    promised = help_text.split("its extension (")[1].split(")")[0].split()
    assert set(promised) == COMMANDS[command][1]


def test_template_writes_yaml_and_refuses_a_name_of_another_format(tmp_path: Path) -> None:
    """Before (issue 22): `template -o t.json` wrote YAML into t.json."""
    bank = str(SAMPLES / "bank.yaml")
    assert run("template", bank, "-o", str(tmp_path / "t.yaml")).exit_code == 0
    assert (tmp_path / "t.yaml").read_text() == run("template", bank).stdout
    for name in ("t.json", "t.CSV", "t.md"):
        refused = run("template", bank, "-o", str(tmp_path / name))
        assert refused.exit_code == 2 and refused.stdout == "" and "but a template is YAML" in refused.stderr
    assert "--output FILE Write the template to this YAML file (.yaml, .yml)" in " ".join(
        run("template", "--help").stdout.split()
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.yaml"]


# generate -o FILE.yaml: one exercise in that file


@pytest.mark.parametrize("name", ["one.yaml", "one.YML"])
def test_generate_writes_one_exercise_to_a_yaml_file(tmp_path: Path, name: str) -> None:
    target = tmp_path / name
    args = ["generate", "--tokens", "4", "--seed", "8", "--answers"]
    assert run(*args, "-o", str(target)).exit_code == 0
    assert target.is_file() and target.read_text() == run(*args).stdout
    again = run(*args, "-o", str(target))
    assert again.exit_code == 2 and "exists: choose another name, or add --force" in again.stderr
    assert run(*args[:-1], "-o", str(target), "--force").exit_code == 0
    assert "\nanswers:" not in target.read_text()
    assert run("check", str(tmp_path / name)).exit_code == 2  # a sheet without answers: nothing to grade


def test_generate_writes_one_sheet_to_a_file_of_its_kind(tmp_path: Path) -> None:
    args = ["generate", "--tokens", "3", "--seed", "7", "--sheet", "latex"]
    assert run(*args, "-o", str(tmp_path / "sheet.tex")).exit_code == 0
    assert (tmp_path / "sheet.tex").read_text() == run(*args).stdout
    assert "\\begin{document}" in (tmp_path / "sheet.tex").read_text()


def test_generate_with_count_still_writes_a_folder(tmp_path: Path) -> None:
    assert run("generate", "--count", "2", "--seed", "1", "-o", str(tmp_path / "set.yaml")).exit_code == 0
    assert sorted(path.name for path in (tmp_path / "set.yaml").iterdir())[:2] == [
        "exercise-01-answers.yaml",
        "exercise-01-key.yaml",
    ]


# CSV: the wide layout for spreadsheets, and compare's table


def wide_blocks(text: str) -> dict[tuple[str, ...], tuple[list[str], list[str], np.ndarray]]:
    """Each block of a wide CSV by its title row: (row names, column names, numbers)."""
    found = {}
    for block in text.strip("\n").split("\n\n"):
        table = list(csv.reader(io.StringIO(block)))
        title, header, body = tuple(table[0]), table[1], table[2:]
        found[title] = ([row[0] for row in body], header, np.array([[float(v) for v in row[1:]] for row in body]))
    return found


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_the_wide_csv_holds_each_step_as_a_matrix(problem: Path, fmt: str) -> None:
    result = run("compute", "p.yaml", "--format", fmt, "--csv-layout", "wide")
    assert result.exit_code == 0, result.output
    text = result.stdout.replace("\t", ",") if fmt == "tsv" else result.stdout
    blocks = wide_blocks(text)
    want = expected()
    cells = ["the", "'=cat", "sat", "down"]  # a spreadsheet shows '=cat, it does not evaluate it
    for h in ("0", "1"):
        for step in ("dot", "scores", "weights"):
            names, header, matrix = blocks[(step, "head", h)]
            assert names == cells and header == ["query\\key", *cells]
            assert_close(matrix, want[f"heads/{h}/{step}"])
        for step, role in (("queries", "query"), ("keys", "key"), ("values", "key"), ("output", "query")):
            names, header, matrix = blocks[(step, "head", h)]
            assert header == [role, "0", "1"]
            assert_close(matrix, want[f"heads/{h}/{step}"])
    assert_close(blocks[("concat",)][2], want["concat"])
    assert_close(blocks[("output",)][2], want["output"])
    assert len(blocks) == 2 * 7 + 2


def test_the_long_csv_stays_the_default_and_csv_layout_needs_csv(problem: Path) -> None:
    long = run("compute", "p.yaml", "-f", "csv", "--csv-layout", "long").stdout
    assert run("compute", "p.yaml", "-f", "csv").stdout == long
    refused = run("compute", "p.yaml", "--format", "json", "--csv-layout", "wide")
    assert refused.exit_code == 2
    assert "--csv-layout: --csv-layout shapes --format csv and tsv, not json" in refused.stderr
    typo = run("compute", "p.yaml", "-f", "csv", "--csv-layout", "tall")
    assert typo.exit_code == 2 and "unknown CSV layout 'tall' (known: long, wide)" in typo.stderr


def test_compare_as_csv(tmp_path: Path) -> None:
    """bank.yaml vs bank_cashier.yaml by hand: q = [√2, 0] and scale 1/√2 make the keys' first column the scores."""
    result = run("compare", str(SAMPLES / "bank.yaml"), str(SAMPLES / "bank_cashier.yaml"), "--format", "csv")
    assert result.exit_code == 0, result.output
    table = list(csv.DictReader(io.StringIO(result.stdout)))
    a_keys, b_keys = np.array([[2, 0], [1, 1], [0, 1]]), np.array([[1, 2], [3, 1], [0, 1]])
    a_values, b_values = np.array([[2, 0], [0, 2], [1, 1]]), np.array([[0, 1], [0, 3], [1, 1]])
    wa, wb = (np.exp(k[:, 0]) / np.exp(k[:, 0]).sum() for k in (a_keys, b_keys))
    weights = [row for row in table if row["step"] == "weights"]
    pairs = [("fisherman", "cashier"), ("net", "money"), ("bank", "bank")]
    assert [(row["key_a"], row["key_b"]) for row in weights] == pairs
    np.testing.assert_allclose([float(row["a"]) for row in weights], wa, rtol=1e-14)
    np.testing.assert_allclose([float(row["b"]) for row in weights], wb, rtol=1e-14)
    np.testing.assert_allclose([float(row["difference"]) for row in weights], wb - wa, rtol=1e-13)
    outputs = [row for row in table if row["step"] == "output"]
    oa, ob = wa @ a_values, wb @ b_values
    np.testing.assert_allclose([float(row["a"]) for row in outputs], oa, rtol=1e-14)
    np.testing.assert_allclose([float(row["b"]) for row in outputs], ob, rtol=1e-14)
    (distance,) = [row for row in table if row["step"] == "distance"]
    assert math.isclose(float(distance["difference"]), float(np.linalg.norm(ob - oa)), rel_tol=1e-14)
    assert {row["query"] for row in table} == {"bank"}
