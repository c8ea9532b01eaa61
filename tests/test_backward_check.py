"""Issue 28 item 5: the backward pass answered, templated, generated and checked (`answers: backward:`).

Right numbers come from hand calculations on the article's example (samples/bank_backward.yaml: P =
[0.6652, 0.2447, 0.0900], dO = [1, 0], v's first coordinates 2, 0, 1) or from a plain-numpy backward
pass written here; `check` runs in-process (CliRunner) and as a subprocess. The replayed students are
tests/test_backward_replays.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner, Result

from attncli.cli import app
from tests import backward_cases
from tests.paths import ROOT, SAMPLES
from tests.replays import backward as backward_replays

ENV = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "COLUMNS": "100", "NO_COLOR": None, "FORCE_COLOR": None}
BANK = (SAMPLES / "bank_backward.yaml").read_text(encoding="utf-8")
P = np.exp([2.0, 1.0, 0.0]) / np.exp([2.0, 1.0, 0.0]).sum()  # the article's weights: scores 2, 1, 0
GRAD_WEIGHTS = np.array([2.0, 0.0, 1.0])  # dP = dO·v = each value's first coordinate
ROW_TERM = float(P @ GRAD_WEIGHTS)  # D = Σ P·dP = 1.4205
GRAD_SCORES = P * (GRAD_WEIGHTS - ROW_TERM)  # 0.3855, −0.3476, −0.0379


def run(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(app, list(args), env=ENV, input=input)


def not_right_in_own_keys(tmp_path: Path, kinds: list[tuple[str, ...]], seeds: range) -> list[str]:
    """`generate --backward --answers` of each kind and seed checked against itself: every step not `right`."""
    found = []
    for kind in kinds:
        for seed in seeds:
            key = tmp_path / "key.yaml"
            made = run("generate", "--backward", *kind, "--seed", str(seed), "--answers", "-o", str(key), "--force")
            assert made.exit_code == 0, made.output
            checked = run("check", str(key), "--format", "json")
            steps = json.loads(checked.stdout)["steps"] if checked.stdout else []
            found += [f"{' '.join(kind)} seed {seed}: {s['step']} {s['head']} {s.get('layer')} {s['status']}"
                      for s in steps if s["status"] != "right"]  # fmt: skip
            found += [f"{' '.join(kind)} seed {seed}: exit {checked.exit_code}"] if checked.exit_code != 0 else []
    return found


ONE_LAYER_KINDS = [options for _, options in backward_replays.SETS]  # the replayed students' kinds


def test_generated_keys_of_every_kind_pass_their_own_check_every_step_right(tmp_path: Path) -> None:
    """A key is a careful student: every step right, none carried (↷), over the kinds of tests/replays/backward.py."""
    assert not_right_in_own_keys(tmp_path, ONE_LAYER_KINDS, range(1, 9)) == []


def homework(tmp_path: Path, answers: str, problem: str = BANK, name: str = "hw.yaml") -> str:
    path = tmp_path / name
    path.write_text(problem + answers, encoding="utf-8")
    return str(path)


def steps_of(result: Result) -> dict[tuple[str, int | None], dict]:
    return {(step["step"], step["head"]): step for step in json.loads(result.stdout)["steps"]}


def fmt(row: np.ndarray) -> str:
    return "[" + ", ".join(f"{x:.4f}" for x in row) + "]"


def test_the_hand_numbers_are_the_articles() -> None:
    assert np.round(P, 4).tolist() == [0.6652, 0.2447, 0.09]
    assert round(ROW_TERM, 4) == 1.4205
    assert np.round(GRAD_SCORES, 4).tolist() == [0.3855, -0.3476, -0.0379]


def test_right_gradients_are_right_and_labelled_backward_name(tmp_path: Path) -> None:
    answers = (
        "answers:\n  backward:\n"
        f"    grad_values:\n      fisherman: [{P[0]:.4f}, 0]\n      net: [{P[1]:.4f}, 0]\n      bank: [{P[2]:.4f}, 0]\n"
        f"    grad_weights:\n      bank: [2, 0, 1]\n"
        f"    row_term:\n      bank: [{ROW_TERM:.4f}]\n"
        f"    grad_scores:\n      bank: {fmt(GRAD_SCORES)}\n"
        f"    grad_dot:\n      bank: {fmt(GRAD_SCORES / np.sqrt(2))}\n"
    )
    result = run("check", homework(tmp_path, answers), "--format", "json")
    assert result.exit_code == 0, result.output
    found = steps_of(result)
    names = ["grad_values", "grad_weights", "row_term", "grad_scores", "grad_dot"]
    assert list(found) == [(f"backward.{name}", 0) for name in names]
    assert all(step["status"] == "right" for step in found.values())


def test_p_times_dp_is_named_jacobian_diagonal_only(tmp_path: Path) -> None:
    answers = f"answers:\n  backward:\n    grad_scores:\n      bank: {fmt(P * GRAD_WEIGHTS)}\n"
    result = run("check", homework(tmp_path, answers), "--format", "json")
    assert result.exit_code == 1
    step = steps_of(result)[("backward.grad_scores", 0)]
    assert step["status"] == "wrong" and step["diagnosis"] == ["jacobian_diagonal_only"]


def test_dq_without_the_scale_is_named_and_a_right_dk_from_a_wrong_ds_is_carried(tmp_path: Path) -> None:
    """dq = Σ dS·k (no 1/√2) is backward_scale_forgotten; dK from the student's own wrong dS is carried (↷)."""
    keys = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    unscaled = GRAD_SCORES @ keys
    wrong_scores = np.round(P * GRAD_WEIGHTS, 4)  # their own slip, carried on: dK = d(q·k)ᵀ·q, q = [√2, 0]
    grad_keys = np.outer(np.round(wrong_scores / np.sqrt(2), 4), [np.sqrt(2), 0.0])
    answers = (
        "answers:\n  backward:\n"
        f"    grad_scores:\n      bank: {fmt(wrong_scores)}\n"
        f"    grad_dot:\n      bank: {fmt(wrong_scores / np.sqrt(2))}\n"
        f"    grad_queries:\n      bank: {fmt(unscaled)}\n"
        "    grad_keys:\n"
        + "".join(f"      {t}: {fmt(row)}\n" for t, row in zip(("fisherman", "net", "bank"), grad_keys))
    )
    result = run("check", homework(tmp_path, answers), "--format", "json")
    found = steps_of(result)
    assert found[("backward.grad_dot", 0)]["status"] == "carried"
    assert found[("backward.grad_keys", 0)]["status"] == "carried"
    assert found[("backward.grad_queries", 0)]["status"] == "wrong"  # the right dS times K, unscaled: named
    assert found[("backward.grad_queries", 0)]["diagnosis"] == ["backward_scale_forgotten"]


def test_dq_without_the_scale_from_the_right_ds_is_named(tmp_path: Path) -> None:
    keys = np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    answers = f"answers:\n  backward:\n    grad_queries:\n      bank: {fmt(GRAD_SCORES @ keys)}\n"
    step = steps_of(run("check", homework(tmp_path, answers), "--format", "json"))[("backward.grad_queries", 0)]
    assert step["diagnosis"] == ["backward_scale_forgotten"]


def test_the_row_term_summed_over_the_queries_is_named(tmp_path: Path) -> None:
    """Two queries, three keys: D per key (Σ_i P·dP down a column) is a row of 3 where 2 are asked."""
    problem = BANK.replace("query_tokens: [bank]", "query_tokens: [net, bank]").replace(
        "  bank: [sqrt(2), 0]\nkeys", "  net: [0, 1]\n  bank: [sqrt(2), 0]\nkeys"
    )
    problem = problem.replace("    bank: [1, 0]\n", "    net: [1, 1]\n    bank: [1, 0]\n")
    queries, keys = np.array([[0.0, 1.0], [np.sqrt(2), 0.0]]), np.array([[2.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    values, grad = np.array([[2.0, 0.0], [0.0, 2.0], [1.0, 1.0]]), np.array([[1.0, 1.0], [1.0, 0.0]])
    scores = queries @ keys.T / np.sqrt(2)
    weights = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    by_key = (weights * (grad @ values.T)).sum(axis=0)  # (3,)
    answers = f"answers:\n  backward:\n    row_term: {fmt(by_key)}\n"
    result = run("check", homework(tmp_path, answers, problem), "--format", "json")
    step = steps_of(result)[("backward.row_term", 0)]
    assert step["status"] == "wrong" and step["diagnosis"] == ["row_term_wrong_axis"]


def test_check_json_labels_each_heads_gradients_with_its_head(tmp_path: Path) -> None:
    problem = (SAMPLES / "two_heads_backward.yaml").read_text(encoding="utf-8")
    template = run("template", str(SAMPLES / "two_heads_backward.yaml"))
    assert template.exit_code == 0
    section = yaml.safe_load(template.stdout)["answers"]["backward"]
    assert list(section["heads"][1])[:3] == ["grad_values", "grad_weights", "row_term"]
    answers = "answers:\n  backward:\n    heads:\n      - {}\n      - grad_weights: [[1, 2, 3], [1, 2, 3], [1, 2, 3]]\n"
    result = run("check", homework(tmp_path, answers, problem), "--format", "json")
    assert [(s["step"], s["head"]) for s in json.loads(result.stdout)["steps"]] == [("backward.grad_weights", 1)]


def test_template_prints_the_backward_steps_blank_only_when_asked() -> None:
    with_gradients = yaml.safe_load(run("template", str(SAMPLES / "bank_backward.yaml")).stdout)["answers"]
    backward = with_gradients["backward"]
    assert list(backward) == [
        "grad_values", "grad_weights", "row_term", "grad_scores", "grad_dot", "grad_queries", "grad_keys"
    ]  # fmt: skip
    assert backward["grad_values"] == {"fisherman": ["?", "?"], "net": ["?", "?"], "bank": ["?", "?"]}
    assert backward["row_term"] == {"bank": ["?"]}
    assert "backward" not in yaml.safe_load(run("template", str(SAMPLES / "bank.yaml")).stdout)["answers"]


COMBOS = [
    ("--mask", "causal", "--tokens", "4"),
    ("--heads", "2", "--projections"),
    ("--score", "dot"),
    ("--rope", "half", "--dk", "4"),
    ("--heads", "4", "--gqa"),
]


@pytest.mark.parametrize("options", COMBOS, ids=" ".join)
def test_generate_backward_keys_pass_their_own_check(tmp_path: Path, options: tuple[str, ...]) -> None:
    made = run("generate", "--backward", "--answers", "--seed", "5", *options)
    assert made.exit_code == 0, made.output
    data = yaml.safe_load(made.stdout)
    grad = np.array(list(data["backward"]["grad_output"].values()))
    assert set(np.unique(grad)) <= {0, 1} and grad.any(axis=1).all()  # small: a 0/1 dO with a 1 in every row
    assert data["answers"]["backward"]
    key = tmp_path / "key.yaml"
    key.write_text(made.stdout, encoding="utf-8")
    checked = subprocess.run(
        [sys.executable, "-m", "attncli", "check", str(key), "--format", "json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert checked.returncode == 0, checked.stdout[-2000:]
    statuses = {(s["step"], s["status"]) for s in json.loads(checked.stdout)["steps"]}
    assert ("backward.grad_scores", "right") in statuses


def test_generate_count_templates_include_the_backward_steps(tmp_path: Path) -> None:
    made = run("generate", "--backward", "--seed", "9", "--count", "2", "-o", str(tmp_path / "sheet"))
    assert made.exit_code == 0, made.output
    blank = yaml.safe_load((tmp_path / "sheet" / "exercise-01-answers.yaml").read_text(encoding="utf-8"))
    assert blank["answers"]["backward"]["grad_scores"]
    sheet = (tmp_path / "sheet" / "exercise-01.yaml").read_text(encoding="utf-8")
    assert "backward:\n  grad_output:" in sheet and "--backward" in sheet


@pytest.mark.parametrize(
    ("options", "words"),
    [
        (("--score", "cosine"), "scaled_dot and dot"),
        (("--sheet", "markdown"), "does not write the backward pass yet"),
    ],
)
def test_generate_backward_refuses_what_it_cannot_grade(options: tuple[str, ...], words: str) -> None:
    result = run("generate", "--backward", *options)
    assert result.exit_code == 2 and result.stdout == ""
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1


BAD = [
    ("answers:\n  backward: 3\n", "got the number 3"),
    ("answers:\n  backward:\n    grad_valuez: [[1, 2]]\n", "grad_values"),
    ("answers:\n  backward:\n    grad_w_o: [[1]]\n", "grad_w_o"),
    ("answers:\n  backward:\n    heads: [{}, {}]\n", "2 heads answered"),
    ("answers:\n  backward:\n    heads: [{}]\n    grad_dot: [[1, 2, 3]]\n", "not both"),
    ("answers:\n  backward:\n    row_term: [[1, nope]]\n", "nope"),
    ("answers:\n  backward:\n    loss: sum\n", "loss"),
]


@pytest.mark.parametrize(("answers", "words"), BAD, ids=[b[1] for b in BAD])
def test_bad_backward_answers_get_one_line_and_exit_2(tmp_path: Path, answers: str, words: str) -> None:
    path = homework(tmp_path, answers)
    result = subprocess.run(
        [sys.executable, "-m", "attncli", "check", path], capture_output=True, text=True, cwd=ROOT, env={"PATH": ""}
    )
    assert result.returncode == 2 and result.stdout == "", result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 200 and words in lines[0], result.stderr


def test_gradients_answered_for_a_problem_without_backward_get_one_line(tmp_path: Path) -> None:
    problem = (SAMPLES / "bank.yaml").read_text(encoding="utf-8")
    result = run("check", homework(tmp_path, "answers:\n  backward:\n    grad_values: [[1, 0]]\n", problem))
    assert result.exit_code == 2 and result.stdout == ""
    assert "asks for no gradi" in result.stderr


def test_gradients_of_the_wrong_shape_are_graded_as_the_forwards_are(tmp_path: Path) -> None:
    """A shape that fits neither way is the student's mistake (wrong shape, exit 1), as for the forward steps."""
    result = run("check", homework(tmp_path, "answers:\n  backward:\n    grad_values: [[1, 2]]\n"), "--format", "json")
    assert result.exit_code == 1
    assert steps_of(result)[("backward.grad_values", 0)]["status"] == "wrong"


ONE_LAYER = [name for name in backward_cases.CASES if not name.startswith("stack_")]


@pytest.mark.parametrize("name", ONE_LAYER)
def test_every_kind_of_problems_key_asks_every_gradient_and_passes_its_own_check(name: str) -> None:
    """Masks, bias and ALiBi, RoPE, GQA, projections (self and cross), W_O, given scores, each loss: the key
    (every gradient at 4 decimals, as generate writes one) answers each gradient of JSON's backward object
    and is all right; a digit changed in one gradient makes it wrong."""
    fields = backward_cases.with_grad_output(backward_cases.CASES[name])
    text = yaml.safe_dump(json.loads(json.dumps(fields, default=lambda array: array.tolist())), sort_keys=False)
    key = text_of_key(text)
    data = yaml.safe_load(key)
    document = json.loads(run("compute", "-", "--format", "json", input=text).stdout)["backward"]
    alone = len(document["heads"]) == 1
    assert _names(data["answers"]["backward"], alone) == _names(document) - _unasked(document, fields)
    checked = run("check", "-", "--format", "json", input=key)
    assert checked.exit_code == 0, checked.stdout[-1500:]
    assert any(step["step"].startswith("backward.") for step in json.loads(checked.stdout)["steps"])
    head, tail = key.split("  backward:\n", 1)
    before, after = tail.split("[", 1)
    nudged = head + "  backward:\n" + before + "[" + _nudged(after)
    assert run("check", "-", "-q", input=nudged).exit_code == 1


TOP = ("loss", "grad_output", "grad_concat", "grad_w_o", "grad_x", "grad_x_query", "grad_bias")


def _names(section: dict, alone: bool = False) -> set[tuple[str, int | None, str]]:
    """(group, index, gradient) of each gradient of a backward section; `alone`: one head's at the top."""
    found = {("", None, name) for name in section if name in TOP or name not in ("heads", "kv_heads")}
    if alone:
        found = {("heads", 0, name) if name not in TOP else ("", None, name) for _, _, name in found}
    for group in ("heads", "kv_heads"):
        found |= {(group, index, name) for index, item in enumerate(section.get(group, ())) for name in item}
    return found


def _unasked(document: dict, fields: dict) -> set[tuple[str, int | None, str]]:
    """What JSON holds but no student works out: the loss, a given dO, each head's dO and bias gradient (copies of
    d(concat)'s columns and of dS), d(q·k) where the scale is 1 (d(q·k) = dS)."""
    target = "loss" in fields["backward"] and fields["backward"]["loss"] != "sum"
    found = {("", None, "loss")} | (set() if target else {("", None, "grad_output")})
    found |= set() if "w_o" in fields else {("", None, "grad_concat")}  # d(concat) = dO without W_O
    for index, head in enumerate(document["heads"]):
        found |= {("heads", index, "grad_output"), ("heads", index, "grad_bias")}
        if "grad_dot" in head and head["grad_dot"] == head["grad_scores"]:
            found.add(("heads", index, "grad_dot"))
    return found


def text_of_key(text: str) -> str:
    from attncli import exercises

    return text + "\n" + exercises._answers(text)


def _nudged(cells: str) -> str:
    """The first number of a row written with its first digit moved by 3 (a clearly wrong number)."""
    for index, char in enumerate(cells):
        if char.isdigit():
            return cells[:index] + str((int(char) + 3) % 10) + cells[index + 1 :]
    raise AssertionError(cells)


def test_masked_cells_of_the_gradients_may_be_written_masked_or_0() -> None:
    """Two heads under a causal mask: the key writes dS and d(q·k)'s masked cells `masked`; 0 is right too."""
    key = text_of_key((SAMPLES / "two_heads_backward.yaml").read_text(encoding="utf-8"))
    head, tail = key.split("  backward:\n", 1)
    assert tail.count("masked") == 12  # 3 masked cells of dS and of d(q·k), in each of the two heads
    assert run("check", "-", "-q", input=key).exit_code == 0
    assert run("check", "-", "-q", input=head + "  backward:\n" + tail.replace("masked", "0")).exit_code == 0
    assert run("check", "-", "-q", input=head + "  backward:\n" + tail.replace("masked", "0.5", 1)).exit_code == 1


def test_require_names_a_gradient_left_out_as_missing(tmp_path: Path) -> None:
    answers = f"answers:\n  backward:\n    grad_weights:\n      bank: [2, 0, 1]\n    row_term: [[{ROW_TERM:.4f}]]\n"
    result = run("check", homework(tmp_path, answers), "--require", "backward.grad_scores", "--format", "json")
    assert result.exit_code == 1
    assert steps_of(result)[("backward.grad_scores", 0)]["status"] == "missing"
    typo = run("check", homework(tmp_path, answers), "--require", "backward.grad_scorez")
    assert typo.exit_code == 2 and "backward.grad_scorez" in typo.stderr


JUNK = ["nope", "[]", "[[1, 2, 3]]", "[[inf, 1, 2]]", "{bank: nope}", "[[1,2],[3]]", "[[1e400, 0]]"]
WHERE = [
    "backward: {J}", "backward: {{grad_values: {J}}}", "backward: {{row_term: {J}}}", "backward: {{heads: {J}}}",
    "backward: {{heads: [{J}]}}", "backward: {{heads: [{{}}, {{grad_dot: {J}}}]}}", "backward: {{kv_heads: {J}}}",
    "backward: {{grad_w_o: {J}}}", "backward: {{grad_x: {J}}}", "backward: {{grad_output: {J}}}",
]  # fmt: skip


@pytest.mark.parametrize("sample", ["bank_backward", "two_heads_backward"])
def test_junk_anywhere_in_backward_is_graded_or_one_line_never_an_internal_error(sample: str) -> None:
    junk_is_graded_or_one_line((SAMPLES / f"{sample}.yaml").read_text(encoding="utf-8"), WHERE, JUNK)


def junk_is_graded_or_one_line(problem: str, places: list[str], junk: list[str]) -> None:
    """Each of `junk` at each of `places` under `answers:`: graded (exit 1), or one line of at most 200 characters
    with nothing on stdout (exit 2); never an internal error."""
    for where in places:
        for thing in junk:
            result = run("check", "-", input=problem + "answers:\n  " + where.format(J=thing) + "\n")
            lines = result.stderr.strip().splitlines()
            assert result.exit_code in (1, 2), (where, thing, result.stderr)
            assert result.exit_code == 1 or (len(lines) == 1 and len(lines[0]) <= 200 and not result.stdout)


@pytest.mark.parametrize(
    "options",
    [("--heads", "2", "--seed", "4"), ("--layers", "2", "--norm", "layer:post", "--heads", "2", "--seed", "5")],
    ids=["two-heads", "stack-post-norm"],
)
def test_a_worksheet_template_filled_with_the_keys_numbers_passes_check_keys(
    tmp_path: Path, options: tuple[str, ...]
) -> None:
    """generate --backward --count: the blank template, each ? replaced by the key's number, passes --keys DIR
    (a stack's too: its gradients under backward: layers:)."""
    folder = tmp_path / "sheet"
    assert run("generate", "--backward", *options, "--count", "1", "-o", str(folder)).exit_code == 0
    key = (folder / "exercise-01-key.yaml").read_text(encoding="utf-8").split("\nanswers:\n")[1]
    cells = [cell.strip() for row in re.findall(r"\[([^\]]*)\]", key) for cell in row.split(",")]
    pieces = (folder / "exercise-01-answers.yaml").read_text(encoding="utf-8").split('"?"')
    assert len(pieces) == len(cells) + 1 and "  backward:" in "".join(pieces)
    homework = tmp_path / "homework.yaml"
    homework.write_text("".join(p + c for p, c in zip(pieces, cells)) + pieces[-1], encoding="utf-8")
    result = run("check", "--keys", str(folder), str(homework), "--format", "json")
    assert result.exit_code == 0, result.stdout[-1500:]
    assert sum(s["step"].startswith("backward.") for s in json.loads(result.stdout)["steps"]) >= 10
