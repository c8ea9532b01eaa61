"""Output formats for scripts (csv, tsv, npy, -o, -q), arrays from files, and the large-problem summary."""

from __future__ import annotations

import csv
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from attncli.cli import app
from attncli.errors import AttnError
from tests.paths import ROOT, SAMPLES

BANK = str(SAMPLES / "bank.yaml")
runner = CliRunner()


def run(*args: str) -> str:
    result = runner.invoke(app, ["compute", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def as_json(*args: str) -> dict:
    return json.loads(run(*args, "--format", "json"))


@pytest.mark.parametrize(("fmt", "delimiter"), [("csv", ","), ("tsv", "\t")])
def test_long_format_round_trips_every_number_of_the_json(fmt: str, delimiter: str) -> None:
    for sample in ("bank.yaml", "two_heads.yaml", "storm_causal.yaml"):
        path = str(SAMPLES / sample)
        doc = as_json(path)
        rows = list(csv.DictReader(io.StringIO(run(path, "--format", fmt)), delimiter=delimiter))
        assert list(rows[0]) == ["step", "head", "query", "key", "index", "value"]
        tokens, queries = doc["tokens"], doc["query_tokens"]
        for number, head in enumerate(doc["heads"]):
            weights = [r for r in rows if r["step"] == "weights" and r["head"] == str(number)]
            assert len(weights) == len(queries) * len(tokens)
            for r in weights:
                i, j = queries.index(r["query"]), tokens.index(r["key"])
                assert float(r["value"]) == head["weights"][i][j]
            for r in (r for r in rows if r["step"] == "scores" and r["head"] == str(number)):
                i, j = queries.index(r["query"]), tokens.index(r["key"])
                expected = head["scores"][i][j]
                assert float(r["value"]) == (-math.inf if expected is None else expected)
        final = [r for r in rows if r["step"] == "output" and r["head"] == ""]
        for r in final:
            assert float(r["value"]) == doc["output"][queries.index(r["query"])][int(r["index"])]
        assert len(final) == len(queries) * len(doc["output"][0])


def test_csv_quotes_tokens_that_contain_commas() -> None:
    problem = 'tokens: ["a,b", c]\nqueries: [[1, 0], [0, 1]]\nkeys: [[1, 0], [0, 1]]\nvalues: [[1], [2]]\n'
    result = runner.invoke(app, ["compute", "-", "--format", "csv"], input=problem)
    assert result.exit_code == 0, result.output
    assert any(row[3] == "a,b" for row in csv.reader(io.StringIO(result.stdout)))


def test_npy_output_to_a_file_is_the_final_output(tmp_path: Path) -> None:
    target = tmp_path / "out.npy"
    run(str(SAMPLES / "two_heads.yaml"), "--format", "npy", "-o", str(target))
    expected = np.array(as_json(str(SAMPLES / "two_heads.yaml"))["output"])
    assert np.abs(np.load(target) - expected).max() <= 1e-12  # the blocked kernel's rounding, not core's


@pytest.mark.parametrize("fmt", ["text", "json", "csv", "tsv"])
def test_every_format_writes_to_a_file_and_nothing_to_stdout(tmp_path: Path, fmt: str) -> None:
    target = tmp_path / f"out.{fmt}"
    assert run(BANK, "--format", fmt, "-o", str(target)) == ""
    assert "1.4205" in target.read_text(encoding="utf-8")
    assert [p.name for p in tmp_path.iterdir()] == [target.name]


def test_quiet_prints_nothing_but_still_validates(tmp_path: Path) -> None:
    assert run(BANK, "-q") == ""
    bad = tmp_path / "bad.yaml"
    bad.write_text("keys: [[1, 0]]\nvalues: [[1, 0]]\nqueries: [[1, 0, 0]]\n", encoding="utf-8")
    result = runner.invoke(app, ["compute", str(bad), "-q"])
    assert result.exit_code == 2 and "bad.yaml" in result.stderr


def test_arrays_from_files_in_yaml_and_flags(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    keys = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    np.save(tmp_path / "k.npy", keys)
    np.savez(tmp_path / "arrays.npz", v=np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]]))
    (tmp_path / "q.csv").write_text(f"{math.sqrt(2)},0\n", encoding="utf-8")
    problem = tmp_path / "bank.yaml"
    problem.write_text(
        "tokens: [fisherman, net, bank]\nquery_tokens: [bank]\nqueries: {file: q.csv}\n"
        "keys: {file: k.npy}\nvalues: {file: arrays.npz, key: v}\n",
        encoding="utf-8",
    )
    expected = as_json(BANK)["output"]
    np.testing.assert_allclose(as_json(str(problem))["output"], expected, rtol=1e-15)
    monkeypatch.chdir(tmp_path)
    flags = ["--tokens", "fisherman,net,bank", "--query-tokens", "bank", "--queries", "@q.csv"]
    flags += ["--keys", "@k.npy", "--values", "@arrays.npz:v"]
    np.testing.assert_allclose(as_json(*flags)["output"], expected, rtol=1e-15)


def test_unnamed_arrays_of_different_lengths_are_cross_attention(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    for name, rows in (("q", 2), ("k", 5), ("v", 5)):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((rows, 3)))
    doc = as_json(*(f"--{n}=@{tmp_path / (n[0] + '.npy')}" for n in ("queries", "keys", "values")))
    assert doc["query_tokens"] == ["q1", "q2"] and doc["tokens"] == ["t1", "t2", "t3", "t4", "t5"]
    assert doc["cross"] is True


def test_float32_keeps_its_dtype_and_agrees_with_float64() -> None:
    single, double = as_json(BANK, "--dtype", "float32"), as_json(BANK)
    np.testing.assert_allclose(single["output"], double["output"], rtol=1e-6)
    assert single["output"] != double["output"]  # computed in float32, not rounded afterwards


def test_large_problems_get_a_summary_with_every_digit(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    for name in ("q", "k", "v"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((300, 8)))
    args = [f"--{n}=@{tmp_path / (n[0] + '.npy')}" for n in ("queries", "keys", "values")]
    text = run(*args, "--follow", "t7", "--format", "text")
    doc = as_json(*args)
    assert "300 queries × 300 keys" in text and "…" not in text
    weights = np.array(doc["heads"][0]["weights"][6])
    top = int(np.argmax(weights))
    assert f"t{top + 1}" in text and f"{weights[top]:.4f}" in text
    output = "[" + ", ".join(f"{x:.4f}".replace("-0.0000", "0.0000") for x in doc["output"][6]) + "]"
    assert output in " ".join(text.split())  # a long vector may wrap between numbers, never inside one


def test_help_documents_exit_codes_and_does_not_import_numpy() -> None:
    code = "import sys; from attncli.cli import main; sys.argv = ['attncli', 'compute', '--help']\n"
    code += "try:\n    main()\nexcept SystemExit:\n    pass\nprint('numpy' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert result.stdout.strip().endswith("False")
    assert "130" in result.stdout and "70" in result.stdout


def test_text_formats_refuse_more_cells_than_they_can_print(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    for name in ("q", "k", "v"):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((1500, 2)))
    args = ["compute", *(f"--{n}=@{tmp_path / (n[0] + '.npy')}" for n in ("queries", "keys", "values"))]
    refused = runner.invoke(app, [*args, "--format", "json"])
    assert refused.exit_code == 2 and "2250000" in refused.stderr and "npy" in refused.stderr
    target = tmp_path / "out.npy"
    assert runner.invoke(app, [*args, "--format", "npy", "-o", str(target)]).exit_code == 0
    assert np.load(target).shape == (1500, 2)


def test_each_command_runs_as_a_program_and_help_lists_them_all() -> None:
    """main() builds only the command being run; every command must still work that way."""

    def attncli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "attncli", *args], capture_output=True, text=True, cwd=ROOT)

    listing = attncli("--help").stdout
    for name in ("compute", "check", "generate", "compare", "scaling"):
        assert name in listing
    assert json.loads(attncli("scaling", "--dk", "4", "--samples", "20", "-f", "json").stdout)["rows"][0]["d_k"] == 4
    assert attncli("check", str(ROOT / "tests" / "check_cases" / "bank_right.yaml"), "-f", "csv").returncode == 0
    assert attncli("generate", "--seed", "1").stdout.startswith("#")
    assert attncli("compare", BANK, str(SAMPLES / "bank_cashier.yaml"), "-f", "json").returncode == 0
    assert attncli("nonsense").returncode == 2


def test_shell_completion_offers_commands_and_options() -> None:
    code = "import sys; sys.argv[0] = 'attncli'; from attncli.launch import main; main()"

    def complete(words: str) -> list[str]:
        env = {**os.environ, "_ATTNCLI_COMPLETE": "complete_bash", "COMP_WORDS": words}
        env["COMP_CWORD"] = str(len(words.split()) - 1)
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
        return result.stdout.split()

    assert complete("attncli comp") == ["compare", "compute"]
    assert "--format" in complete("attncli compute --for")


@pytest.mark.parametrize("seed", range(4))
def test_npy_through_the_fast_path_is_the_step_by_step_output(tmp_path: Path, seed: int) -> None:
    """-f npy takes the blocked kernel; its array matches core's every-step output on random problems."""
    from attncli import core, pipeline

    rng = np.random.default_rng(seed)
    queries, keys = int(rng.integers(20, 90)), int(rng.integers(20, 90))
    width = int(rng.integers(1, 9))
    for name, rows in (("q", queries), ("k", keys), ("v", keys)):
        np.save(tmp_path / f"{name}.npy", rng.standard_normal((rows, width)) * 3)
    args = [f"--{n}=@{tmp_path / (n[0] + '.npy')}" for n in ("queries", "keys", "values")]
    score = ("scaled_dot", "dot")[seed % 2]
    args += ["--score", score] + (["--mask", "causal"] if seed >= 2 else [])
    target = tmp_path / "out.npy"
    run(*args, "--format", "npy", "-o", str(target))
    flags = {"queries": f"@{tmp_path / 'q.npy'}", "keys": f"@{tmp_path / 'k.npy'}", "values": f"@{tmp_path / 'v.npy'}"}
    flags |= {"score": score} | ({"mask": "causal"} if seed >= 2 else {})
    expected = core.compute(pipeline.load(None, flags)).output
    got = np.load(target)
    assert got.shape == expected.shape and np.abs(got - expected).max() <= 1e-12


def test_results_only_takes_the_kernel_for_dot_products_and_core_for_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """pipeline.result calls the kernel only where every head's scores are q·kᵀ and cannot overflow."""
    from attncli import kernel, pipeline

    calls: list[str] = []
    original = kernel.attention

    def counting(*arrays: np.ndarray, **options: object) -> np.ndarray:
        calls.append("kernel")
        return original(*arrays, **options)

    monkeypatch.setattr(kernel, "attention", counting)
    samples = {"bank.yaml": True, "two_heads.yaml": False, "additive.yaml": False}  # head 2's scores are given
    samples |= {"alibi.yaml": False, "bias.yaml": False}
    for sample, uses_kernel in samples.items():
        calls.clear()
        problem = pipeline.load(SAMPLES / sample)
        assert np.abs(pipeline.result(problem) - pipeline.solve(problem).output).max() <= 1e-12
        assert bool(calls) == uses_kernel, sample
    calls.clear()
    huge = pipeline.load(None, {"queries": "1e200, 1e200", "keys": "1e200, 0; 0, 1", "values": "1, 2; 3, 4"})
    with pytest.raises(AttnError):
        pipeline.result(huge)
    assert not calls
