"""`check` on a softmax homework (issue 29): a file with `logits:` and `answers:` by the softmax JSON's names.

The replayed students come from tests/replays/softmax.py (numpy, no attncli import); `check` runs as a
command over all their files once. The hand-worked rows: logits 2, 1, 0.1 — e^−1 = 0.3679, e^−1.9 =
0.1496, Σ = 1.5175, p = 0.6590, 0.2424, 0.0986, LSE = 2 + ln 1.5175 = 2.4170, −ln p_cat = 0.4170.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attncli.cli import app
from tests.refusals import refused
from tests.replays import checked
from tests.replays import softmax as replays

SCREEN = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "LANGUAGE": None, "NO_COLOR": "1", "COLUMNS": "200"}
SEEDS = range(50)
ROW = "logits: [2, 1, 0.1]\ntokens: [cat, dog, car]\ntargets: [cat]\n"
RIGHT = {
    "max": "2",
    "shifted": "[0, -1, -1.9]",
    "exp": "[1, 0.3679, 0.1496]",
    "sum": "1.5175",
    "logsumexp": "2.4170",
    "probabilities": "[0.6590, 0.2424, 0.0986]",
    "cross_entropy": "0.4170",
    "grad_logits": "[-0.3410, 0.2424, 0.0986]",
}


def run(*args: str, lang: str = "en") -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [*args, "--lang", lang], env=SCREEN)
    return result.exit_code, result.stdout, result.stderr


def graded(tmp_path: Path, text: str) -> tuple[int, dict[str, dict]]:
    path = tmp_path / "homework.yaml"
    path.write_text(text, encoding="utf-8")
    code, stdout, stderr = run("check", str(path), "--format", "json")
    assert stdout, stderr
    return code, {step["step"]: step for step in json.loads(stdout)["steps"]}


def answers(**steps: str) -> str:
    return "answers:\n" + "".join(f"  {name}: {value}\n" for name, value in steps.items())


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> list[replays.Case]:
    found = replays.cases(tmp_path_factory.mktemp("softmax"), SEEDS)
    checked.run(found)
    return found


@pytest.mark.parametrize("kind", ["careful", "unshifted"])
def test_careful_students_carrying_4_decimals_pass_shifted_or_not(suite: list[replays.Case], kind: str) -> None:
    assert not checked.failures(suite, kind), "false alarms (python -m tests.replays.softmax)"
    assert any(case.exercise.logits.min() > 90 for case in suite if case.kind == "careful")  # x + 100 rows too


@pytest.mark.parametrize("slip", replays.SLIPS)
def test_each_slip_carried_is_named_at_its_step(suite: list[replays.Case], slip: str) -> None:
    assert not checked.failures(suite, slip), "missed or unnamed (python -m tests.replays.softmax)"


def test_a_row_worked_by_hand(tmp_path: Path) -> None:
    code, steps = graded(tmp_path, ROW + answers(**RIGHT))
    assert code == 0 and {s["status"] for s in steps.values()} == {"right"}
    code, steps = graded(tmp_path, ROW + answers(**{**RIGHT, "probabilities": "[0.6600, 0.2424, 0.0986]"}))
    assert code == 1 and steps["probabilities"]["status"] == "wrong"  # 0.001 off is not a rounding
    assert steps["probabilities"]["cells"][0]["status"] == "wrong" and steps["max"]["status"] == "right"


def test_leaving_out_the_shift_is_not_a_mistake(tmp_path: Path) -> None:
    """e^2 = 7.3891, e^1 = 2.7183, e^0.1 = 1.1052, Σ = 11.2126: the same p."""
    unshifted = {"exp": "[7.3891, 2.7183, 1.1052]", "sum": "11.2126", "probabilities": RIGHT["probabilities"]}
    code, steps = graded(tmp_path, ROW + answers(**unshifted))
    assert code == 0 and {s["status"] for s in steps.values()} == {"right"}


def test_the_three_slips_by_hand(tmp_path: Path) -> None:
    """s − m for cat only: [0, 1, 0.1]; (onehot − p)/1; T = 2 after the softmax: max 2, p = [0.6590, ...]/2."""
    slips = {"shifted": "[0, 1, 0.1]", "exp": "[1, 2.7183, 1.1052]", "grad_logits": "[0.3410, -0.2424, -0.0986]"}
    code, steps = graded(tmp_path, ROW + answers(**slips))
    assert code == 1
    assert steps["shifted"]["diagnosis"] == ["max_not_subtracted_from_all"]
    assert steps["exp"]["status"] == "carried"  # e^(their s − m), right from their own numbers
    assert steps["grad_logits"]["diagnosis"] == ["grad_sign_flipped"]
    code, steps = graded(
        tmp_path, ROW + "temperature: 2\n" + answers(max="2", probabilities="[0.3295, 0.1212, 0.0493]")
    )
    assert steps["max"]["diagnosis"] == steps["probabilities"]["diagnosis"] == ["temperature_after_softmax"]


def test_top_k_keeps_ties_and_renormalises(tmp_path: Path) -> None:
    """logits 2, 1, 1, K = 2: both 1s tie with the 2nd, all three kept; K = 1: cat alone, p = 1."""
    row = "logits: [2, 1, 1]\ntokens: [cat, dog, car]\ntop_k: 2\n"
    code, steps = graded(tmp_path, row + answers(kept="[true, true, true]", filtered="[0.5761, 0.2119, 0.2119]"))
    assert code == 0, steps
    code, steps = graded(tmp_path, row + answers(kept="[true, true, false]"))
    assert code == 1 and steps["kept"]["status"] == "wrong"


def test_the_template_of_a_softmax_homework_reads_back(tmp_path: Path) -> None:
    problem = tmp_path / "rows.yaml"
    problem.write_text("logits:\n  - [2, 1, 0.1]\n  - [0, 0, 1]\ntargets: [1, 3]\ntop_p: 0.9\n", encoding="utf-8")
    code, template, _ = run("template", str(problem))
    assert code == 0
    for name in replays.ORDER:
        assert f"  {name}:" in template
    code, steps = graded(tmp_path, problem.read_text(encoding="utf-8") + template)
    assert code == 1 and set(steps) == set(replays.ORDER) and {s["status"] for s in steps.values()} == {"not_answered"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (answers(maximum="2"), "unknown field 'maximum'"),
        (answers(shifted="[0, -1]"), "expected 3 numbers here, got a list of 2 items"),
        (answers(max="[2, 3]"), "2 rows written, but the logits have 1 row"),
        (answers(max="{cat: 2}"), "expected 1 number here, got a mapping"),
        (answers(kept="[true, false, true]"), "no kept to compute: add top_k: or top_p:"),
        (answers(probabilities="[0.6590, masked, 0.0986]"), "answers.probabilities[2]: 'masked'"),
        ("require: [weights]\n" + answers(**RIGHT), "require: 'weights' is not a step"),
    ],
)
def test_bad_homework_is_refused_in_one_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(ROW + text, encoding="utf-8")
    refused(lambda *args, lang: run(*args, lang=lang), ["check", str(path)], message)


def test_cross_entropy_without_targets_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "untargeted.yaml"
    path.write_text("logits: [2, 1, 0.1]\n" + answers(cross_entropy="0.4170"), encoding="utf-8")
    refused(
        lambda *args, lang: run(*args, lang=lang), ["check", str(path)], "no cross_entropy to compute: add targets:"
    )
