"""The library's front door: the README's Python example as written, and what load, solve and grade accept."""

from __future__ import annotations

import contextlib
import io
import math
import re
from pathlib import Path

import numpy as np
import pytest

from attncli import pipeline, yamldoc
from attncli.errors import AttnError

ROOT = Path(__file__).parent.parent
CASES = Path(__file__).parent / "check_cases"


def readme_example() -> str:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("## Python API\n", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_the_readme_example_runs_and_prints_what_its_comments_say(monkeypatch: pytest.MonkeyPatch) -> None:
    code = readme_example()
    expected = [line.split("  # ", 1)[1] for line in code.splitlines() if line.startswith("print(")]
    monkeypatch.chdir(ROOT)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {})
    assert printed.getvalue().splitlines() == expected
    total = math.e**2 + math.e + 1  # the article's example by hand: scores 2, 1, 0 → weights e^s / Σ
    assert expected[0] == str([f"{w:.4f}" for w in (math.e**2 / total, math.e / total, 1 / total)])


def test_a_path_the_same_file_as_text_and_flags_give_the_same_problem(tmp_path: Path) -> None:
    text = "tokens: [a, b]\nquery_tokens: [a]\nqueries: [[1, 0]]\nkeys: [[1, 0], [0, 1]]\nvalues: [[2], [4]]\n"
    (tmp_path / "p.yaml").write_text(text, encoding="utf-8")
    flags = {"tokens": "a,b", "query_tokens": "a", "queries": "1,0", "keys": "1,0; 0,1", "values": "2; 4"}
    loaded = [pipeline.load(tmp_path / "p.yaml"), pipeline.load(text=text), pipeline.load(flags=flags)]
    weight = math.exp(1 / math.sqrt(2)) / (math.exp(1 / math.sqrt(2)) + 1)  # scores 1/√2 and 0
    for problem in loaded:
        np.testing.assert_allclose(pipeline.solve(problem).output, [[2 * weight + 4 * (1 - weight)]], rtol=1e-15)
    assert [p.source for p in loaded] == [str(tmp_path / "p.yaml"), "<text>", "flags"]


def test_float32_is_kept_and_an_unknown_dtype_is_an_attn_error() -> None:
    assert pipeline.load("samples/bank.yaml", dtype="float32").heads[0].keys.dtype == np.float32
    with pytest.raises(AttnError) as caught:
        pipeline.load("samples/bank.yaml", dtype="float16")
    assert caught.value.key == "cli.bad_dtype"


def test_grade_reads_a_homework_file_once_or_answers_against_a_key() -> None:
    own = pipeline.grade(CASES / "no_exp.yaml")
    assert (own.file, own.ok, own.first_mistake.diagnosis) == (str(CASES / "no_exp.yaml"), False, ("no_exp",))
    answers = yamldoc.load("answers: {weights: [0.6652, 0.2447, 0.0900]}", "student.yaml")
    against_key = pipeline.grade(CASES / "bank_right.yaml", answers)
    assert (against_key.file, against_key.ok) == ("student.yaml", True)
    solved = pipeline.solve(pipeline.load("samples/bank.yaml"))
    assert pipeline.grade(solved, text="answers: {output: [1.4205, 0.5795]}").ok


def test_a_keys_tolerance_counts_not_the_students(tmp_path: Path) -> None:
    bank = (ROOT / "samples" / "bank.yaml").read_text(encoding="utf-8")
    (tmp_path / "key.yaml").write_text(bank + "tolerance: 0.001\n", encoding="utf-8")
    (tmp_path / "plain.yaml").write_text(bank, encoding="utf-8")
    student = "tolerance: 0.00001\nanswers: {weights: [0.6660, 0.2440, 0.0900]}\n"  # 8e-4 off: 4 decimals allow 1.5e-4
    assert pipeline.grade(tmp_path / "key.yaml", text=student).ok
    assert not pipeline.grade(tmp_path / "plain.yaml", text=student).ok


def test_every_failure_is_an_attn_error() -> None:
    calls = [
        lambda: pipeline.load("no/such/file.yaml"),
        lambda: pipeline.load(text="tokens: [a]\nvalues: [[1], [2]]\n"),
        lambda: pipeline.grade(pipeline.load("samples/bank.yaml")),  # a problem alone has no answers
        lambda: pipeline.attention(np.ones((1, 2)), np.ones((2, 3)), np.ones((2, 1))),
        lambda: pipeline.attention(np.ones((1, 2)), np.ones((1, 2)), np.ones((1, 1)), mask=np.array([[False]])),
    ]
    keys = []
    for call in calls:
        with pytest.raises(AttnError) as caught:
            call()
        keys.append(caught.value.key)
    assert keys == ["input.unreadable", "problem.row_count", "check.no_answers", "api.attention", "api.attention"]
