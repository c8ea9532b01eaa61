"""Issue 28 item 5: `attncli practice` asks the backward pass after the forward one when the problem has `backward:`.

The article's example (samples/bank_backward.yaml) worked in a pipe with the hand numbers of
tests/test_backward_check.py; every one-layer backward case of tests/backward_cases.py worked through
in-process (each prompt asked, hinted and answered with the right numbers at 4 decimals).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from attncli import pipeline
from attncli.practice import session as tutor
from attncli.render import practice as words
from tests import backward_cases
from tests.paths import ROOT, SAMPLES
from tests.test_backward_check import GRAD_SCORES, GRAD_WEIGHTS, ROW_TERM, P

ENVIRONMENT = {**os.environ, "PYTHONPATH": str(ROOT), "LANG": "C.UTF-8", "COLUMNS": "100", "NO_COLOR": "1"}
FORWARD_PROMPTS = 16  # samples/bank_backward.yaml at level 2: 3 q·k, the scale, 3 scores, 3 e^s, the sum, 3 weights, 2


def practise(args: list[str], lines: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "attncli", "practice", *args],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        env=ENVIRONMENT,
        timeout=120,
    )


def row(values: np.ndarray) -> str:
    return ", ".join(f"{v:.4f}" for v in values)


def test_the_gradients_come_after_the_forward_steps_right_and_a_slip_named(tmp_path: Path) -> None:
    homework = tmp_path / "homework.yaml"
    backward = [f"{P[0]:.4f}, 0", f"{P[1]:.4f}, 0", f"{P[2]:.4f}, 0", "2, 0, 1", f"{ROW_TERM:.4f}"]
    slip = row(P * GRAD_WEIGHTS)  # dS = P ∘ dP: the −D left out
    lines = ["show"] * FORWARD_PROMPTS + backward + [slip, row(GRAD_SCORES)] + ["show"] * 5
    result = practise([str(SAMPLES / "bank_backward.yaml"), "--record", str(homework)], lines)
    assert result.stderr == ""
    out = result.stdout
    assert "[17/27] dV, the values' gradient, row 'fisherman' (dV = Pᵀ·dO) (2 numbers)" in out
    assert "[22/27] dS, the scores' gradient, row 'bank' (dS = P ∘ (dP − D)) (3 numbers)" in out
    verdicts = [line[0] for line in out.splitlines() if line[:1] in ("✓", "✗")]
    assert verdicts == ["✓"] * 5 + ["✗", "✓"]
    assert "left out the −D of the softmax's Jacobian" in out
    assert "0.6652 × (2 − 1.4205)" not in out  # the working is shown only when asked
    recorded = yaml.safe_load(homework.read_text(encoding="utf-8"))["answers"]["backward"]
    assert recorded["grad_scores"] == {"bank": [float(f"{x:.4f}") for x in P * GRAD_WEIGHTS]}  # the first try
    checked = subprocess.run(
        [sys.executable, "-m", "attncli", "check", str(homework), "--format", "json"],
        capture_output=True, text=True, cwd=ROOT, env=ENVIRONMENT,
    )  # fmt: skip
    steps = {s["step"]: s for s in json.loads(checked.stdout)["steps"]}
    assert steps["backward.grad_scores"]["diagnosis"] == ["jacobian_diagonal_only"]
    assert steps["backward.row_term"]["status"] == "right"


def test_a_hint_writes_the_products_from_the_numbers_carried() -> None:
    lines = ["show"] * (FORWARD_PROMPTS + 5) + ["hint", "hint", "show"]
    out = practise([str(SAMPLES / "bank_backward.yaml")], lines).stdout
    assert "dS = P ∘ (dP − D), worked from the numbers you carry" in out
    assert "0.6652 × (2 − 1.4205); 0.2447 × (0 − 1.4205); 0.0900 × (1 − 1.4205)" in out


ONE_LAYER = [name for name in backward_cases.CASES if not name.startswith("stack_")]


@pytest.mark.parametrize("name", ONE_LAYER)
def test_every_kind_of_problem_can_be_practised_backwards_to_the_end(name: str) -> None:
    """Each prompt asked in words, hinted twice and answered right at 4 decimals; every gradient asked."""
    fields = backward_cases.with_grad_output(backward_cases.CASES[name])
    text = yaml.safe_dump(json.loads(json.dumps(fields, default=lambda array: array.tolist())), sort_keys=False)
    steps = pipeline.solve(pipeline.load(text=text, name=f"{name}.yaml"))
    session = tutor.Session(steps)
    gradients = [p for p in session.prompts if p.step.startswith("backward.")]
    assert gradients and session.prompts[-len(gradients) :] == tuple(gradients)
    while session.current is not None:
        prompt = session.current
        assert words.ask(session, prompt)
        assert session.respond("hint").kind == tutor.HINT and session.respond("hint").working
        answer = ", ".join(f"{v:.4f}" for v in session.truth(prompt))
        assert session.respond(answer).kind in (tutor.RIGHT, tutor.CARRIED), (prompt, answer)
    summary = session.summary()
    assert summary.ok and {step for step, _ in summary.rows} >= {p.step for p in gradients}
