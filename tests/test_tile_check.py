"""`check` on FlashAttention's online softmax (issue 29): `answers: tiles:`, their templates, keys and refusals.

The replayed students come from tests/replays/tiles.py (numpy, no attncli import); `check` runs as a
command over all their files once. The hand-worked file is samples/tiles.yaml's numbers, from its
closed forms (ℓ after tile 1 = 1 + e^−1, after tile 2 = 1 + e^−1 + e^−2 + e^−3, ...).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from attncli.cli import app
from tests.paths import ROOT
from tests.refusals import refused
from tests.replays import checked
from tests.replays import tiles as replays

SCREEN = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "LANGUAGE": None, "NO_COLOR": "1", "COLUMNS": "200"}
SEEDS = range(40)  # about 100 files, each checked once
E = math.e
SAMPLE = (ROOT / "samples" / "tiles.yaml").read_text(encoding="utf-8")


def run(*args: str, lang: str = "en") -> tuple[int, str, str]:
    result = CliRunner().invoke(app, [*args, "--lang", lang], env=SCREEN)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> list[replays.Case]:
    found = replays.cases(tmp_path_factory.mktemp("tiles"), SEEDS)
    checked.run(found)
    return found


def test_careful_students_carrying_4_decimals_pass(suite: list[replays.Case]) -> None:
    assert not checked.failures(suite, "careful"), "false alarms (python -m tests.replays.tiles)"


@pytest.mark.parametrize("slip", replays.SLIPS)
def test_each_slip_carried_is_named_at_its_step(suite: list[replays.Case], slip: str) -> None:
    assert not checked.failures(suite, slip), "missed or unnamed (python -m tests.replays.tiles)"


def test_an_arithmetic_slip_is_carried_through_the_later_tiles(suite: list[replays.Case]) -> None:
    assert not checked.failures(suite, "arithmetic", replays.verdict)
    carried = [
        cell
        for case in suite
        if case.kind == "arithmetic"
        for step in case.result["steps"]
        if step["step"] == "running_sum"
        for cell in step["cells"]
        if cell["status"] == "carried"
    ]
    assert len(carried) >= 20  # the later tiles of the slipped query follow from the student's own ℓ


def _answers(rows: list[str]) -> str:
    return SAMPLE + "answers:\n  tiles:\n    his:\n" + "".join(f"      - {{{row}}}\n" for row in rows)


RIGHT = [
    f"running_max: 1, rescale: 0, running_sum: {1 + 1 / E:.4f}, accumulator: [{1 / E:.4f}, 1]",
    f"running_max: 3, rescale: {E**-2:.4f}, running_sum: {1 + E**-1 + E**-2 + E**-3:.4f}, "
    f"accumulator: [{1 + 2 * E**-1 + E**-3:.4f}, {1 + E**-2:.4f}]",
]


def test_the_samples_tiles_worked_by_hand(tmp_path: Path) -> None:
    """Right from the closed forms; tile 2 unrescaled (ℓ = ℓ₁ + e⁰ + e^−1, o = o₁ + v_mended + e^−1·v_his) named."""
    path = tmp_path / "hand.yaml"
    path.write_text(_answers(RIGHT), encoding="utf-8")
    code, stdout, _ = run("check", str(path), "--format", "json")
    assert code == 0 and json.loads(stdout)["ok"], stdout
    unrescaled = f"running_max: 3, running_sum: {2 + 2 / E:.4f}, accumulator: [{1 / E + 1 + 2 / E:.4f}, 2]"
    path.write_text(_answers([RIGHT[0], unrescaled]), encoding="utf-8")
    code, stdout, _ = run("check", str(path), "--format", "json")
    steps = {s["step"]: s for s in json.loads(stdout)["steps"]}
    assert code == 1
    assert steps["running_max"]["status"] == "right"
    assert steps["running_sum"]["diagnosis"] == steps["accumulator"]["diagnosis"] == ["not_rescaled"]
    code, stdout, _ = run("check", str(path), lang="es")
    assert "falta reescalar por α" in stdout


def test_the_template_and_the_generated_key_pass_their_own_check(tmp_path: Path) -> None:
    code, template, _ = run("template", str(ROOT / "samples" / "tiles.yaml"))
    assert code == 0 and "  tiles:" in template and template.count("running_max: ") == 3
    blank = tmp_path / "blank.yaml"
    blank.write_text(SAMPLE + template, encoding="utf-8")
    code, stdout, _ = run("check", str(blank), "--format", "json")
    steps = {s["step"]: s["status"] for s in json.loads(stdout)["steps"]}
    assert code == 1 and set(steps) >= set(replays.TILE_STEPS), stdout  # nothing answered is not a pass
    assert set(steps.values()) == {"not_answered"}
    for seed, mask in ((3, "none"), (8, "causal")):
        key = tmp_path / f"key{seed}.yaml"
        args = ("--tokens", "4", "--tiles", "3", "--mask", mask, "--seed", str(seed), "--answers", "-o", str(key))
        assert run("generate", *args)[0] == 0
        assert "tiles: 3" in key.read_text(encoding="utf-8")
        code, stdout, _ = run("check", str(key), "--format", "json")
        report = json.loads(stdout)
        assert code == 0 and report["ok"], stdout
        assert {s["step"] for s in report["steps"]} >= set(replays.TILE_STEPS)


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ("  tiles:\n    his: [{running_max: 1, alpha: 0}]\n", "unknown field"),
        ("  tiles:\n    his: [{running_max: 1}, {}, {}, {}]\n", "4 tiles written, but a query's keys make 3 tiles"),
        ("  tiles:\n    his: [{accumulator: [1, 2, 3]}]\n", "per coordinate of the values), got a list of 3 items"),
        ("  tiles:\n    his: 3\n", "accumulator: [...]}), got the number 3"),
        ("  tiles:\n    cat: [{rescale: 0}]\n", "'cat'"),
        ("  tiles:\n    his: [{rescale: masked}]\n", "masked"),
    ],
)
def test_bad_tile_answers_are_refused_in_one_line(tmp_path: Path, answers: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(SAMPLE + "answers:\n" + answers, encoding="utf-8")
    refused(lambda *args, lang: run(*args, lang=lang), ["check", str(path)], message)


def test_tiles_answered_without_tiles_in_the_problem_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "untiled.yaml"
    path.write_text(SAMPLE.replace("tiles: 2\n", "") + "answers:\n  tiles:\n    his: [{rescale: 0}]\n", "utf-8")
    refused(lambda *args, lang: run(*args, lang=lang), ["check", str(path)], "add tiles: B")


def test_generate_refuses_tiles_with_layers() -> None:
    refused(lambda *args, lang: run(*args, lang=lang), ["generate", "--tiles", "2", "--layers", "2"], "--layers")


def _practise(*args: str, lines: list[str], lang: str = "en") -> str:
    result = CliRunner().invoke(app, ["practice", *args, "--lang", lang], env=SCREEN, input="\n".join(lines) + "\n")
    return result.stdout


def test_practice_asks_the_tiles_after_the_output_and_names_the_slip() -> None:
    """samples/tiles.yaml at level 3: e^s, Σ, weights and output shown, then 3 tiles × (m', α, ℓ', o')."""
    tile1 = ["1", "0", f"{1 + 1 / E:.4f}", f"{1 / E:.4f}, 1"]
    tile2 = ["3", f"{E**-2:.4f}", f"{1 + E**-1 + E**-2 + E**-3:.4f}", f"{1 + 2 / E + E**-3:.4f}, {1 + E**-2:.4f}"]
    tile3 = ["3", "1", tile2[2], tile2[3]]
    sample = str(ROOT / "samples" / "tiles.yaml")
    stdout = _practise(sample, "--level", "3", lines=["show"] * 4 + tile1 + tile2 + tile3)
    asked = [line for line in stdout.splitlines() if "tile" in line and line.startswith("[")]
    assert len(asked) == 12 and "[16/16] the accumulator o' of 'his' after tile 3 (2 numbers)" in stdout
    assert stdout.count("✓ right") == 12 and "12 of 16 steps right" in stdout
    unrescaled = [*tile1, tile2[0], tile2[1], f"{2 + 2 / E:.4f}"]
    stdout = _practise(sample, "--level", "3", lines=["show"] * 4 + unrescaled + ["quit"], lang="es")
    assert "falta reescalar por α" in stdout


def test_practice_makes_an_exercise_with_tiles() -> None:
    stdout = _practise("--tokens", "3", "--tiles", "2", "--seed", "4", "--level", "3", lines=["quit"])
    assert "running max m'" in stdout and "accumulator o'" in stdout  # in the summary's rows, not reached yet
    assert "attncli practice --tokens 3 --tiles 2 --seed 4 --level 3" in stdout  # the same exercise again
