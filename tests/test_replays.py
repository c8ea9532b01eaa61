"""The replayed-mistake suite of issue 10: `attncli check` judged by students it does not know.

Every expectation comes from tests/replays (numpy, no attncli import); `check` is only run as a
command, and each file judged from its JSON object. A row that check does not pass yet is a strict
xfail naming why (KNOWN). `python benchmarks/grading_figures.py` prints the same figures over about
three times as many cases.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.replays import suite as replays
from tests.replays.mistakes import CATALOGUE
from tests.replays.student import MASKED, Work, matrix

# Fewer wrong files than benchmarks/grading_figures.py grades: each costs check a diagnosis search.
PER_MISTAKE, ROUNDINGS, MIN_DECIMALS_CASES = 2, 6, 3
CODES = sorted({"+".join(m.codes) for m in CATALOGUE} | set(replays.STACK_CODES))
# Rows check does not pass yet (the figures list their cases); strict, so each fails the day it is fixed.
KNOWN: dict[str, str] = {}


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> replays.Suite:
    return replays.build(tmp_path_factory.mktemp("replays"), PER_MISTAKE, ROUNDINGS, MIN_DECIMALS_CASES)


def _assert_all_good(suite: replays.Suite, row: str) -> None:
    """Every case of `row` ended as it should (the message lists the first that did not)."""
    cases = [c for c in suite.cases if replays.label(c) == row]
    assert cases, f"no case of {row}: every exercise skipped it"
    failures = [f"{c.id}: {v[0]} {v[1]}" for c in cases for v in [replays.verdict(c)] if v[0] != replays.GOOD]
    assert not failures, f"{len(failures)} of {len(cases)}:\n" + "\n".join(failures[:8])


def _key_answers(path: Path, tokens: tuple[str, ...]) -> dict[tuple[int | None, str], np.ndarray]:
    """The answers of a key that `attncli generate --answers` wrote, `masked` as NaN."""
    answers = yaml.safe_load(path.read_text(encoding="utf-8"))["answers"]

    def read(data: object) -> np.ndarray:
        rows = [data[t] for t in tokens] if isinstance(data, dict) else data
        return matrix([[MASKED if x == "masked" else x for x in row] for row in rows], ())

    heads = answers.pop("heads", [{k: v for k, v in answers.items() if k not in ("concat", "final")}])
    steps = {(h, step): read(rows) for h, head in enumerate(heads) for step, rows in head.items()}
    return steps | {(None, step): read(answers[step]) for step in ("concat", "final") if step in answers}


def test_students_read_every_exercise_as_generate_means_it(suite: replays.Suite) -> None:
    """The simulator's exact numbers round to the key that `generate --answers` printed (the judge is sound)."""
    compared = 0
    for exercise in suite.exercises:
        if not exercise.key.name.endswith("-key.yaml"):
            continue
        truth = Work(exercise.problem, digits=None)
        for key, given in _key_answers(exercise.key, exercise.problem.tokens).items():
            if key not in truth.steps:  # a step the simulator works inside another (e^s and their sums: weights)
                assert key[1] in ("turned_queries", "turned_keys", "biased_scores", "exp", "sums"), (exercise.id, key)
                continue
            mine = truth.steps[key].values
            shown = ~np.isnan(given)
            assert np.array_equal(np.isnan(mine), np.isnan(given) & (key[1] != "dot")), (exercise.id, key)
            assert np.all(np.abs(mine[shown] - given[shown]) <= 0.5e-4 + 1e-9), (exercise.id, key)
            compared += 1
    assert compared >= 200


def test_the_suite_has_every_case_the_issue_asks_for(suite: replays.Suite) -> None:
    careful = [c for c in suite.cases if replays.label(c) == "careful"]
    assert len({c.exercise.id for c in careful}) >= 40
    shown = {replays.label(c) for c in suite.cases}
    assert set(CODES) | {"rounding:truncated", "rounding:off_by_one"} <= shown


def test_careful_students_carrying_4_decimals_pass(suite: replays.Suite) -> None:
    _assert_all_good(suite, "careful")
    assert suite.returncodes["careful"] == 0


def test_careful_students_pass_against_the_key(suite: replays.Suite) -> None:
    _assert_all_good(suite, "careful --key")
    assert suite.returncodes["key"] == 0


def test_students_carrying_3_decimals_pass_with_carry_3(suite: replays.Suite) -> None:
    _assert_all_good(suite, "careful --carry 3")
    assert suite.returncodes["carry3"] == 0


def test_two_decimals_are_too_few_for_min_decimals_3(suite: replays.Suite) -> None:
    _assert_all_good(suite, "too_few_decimals")
    assert suite.returncodes["min_decimals"] == 1


@pytest.mark.parametrize(
    "row",
    [pytest.param(r, marks=[pytest.mark.xfail(reason=KNOWN[r], strict=True)] if r in KNOWN else []) for r in CODES],
)
def test_each_mistake_is_named_where_it_is_made(suite: replays.Suite, row: str) -> None:
    """Caught at its step with its code, later steps carried, nothing else failed."""
    _assert_all_good(suite, row)


@pytest.mark.parametrize("row", ["rounding:truncated", "rounding:off_by_one"])
def test_wrong_roundings_fail(suite: replays.Suite, row: str) -> None:
    _assert_all_good(suite, row)
    assert all(code == 1 for name, code in suite.returncodes.items() if name.startswith("mistakes:"))


def test_no_code_is_named_where_no_slip_with_it_writes_the_numbers(suite: replays.Suite) -> None:
    """The misleading-cause property over the whole suite: every code named at a slipped step beside the slip's
    own is one that some slip of the catalogue carrying it, made at that step of that exercise, writes (a cause
    that is not what happened is worse than none); a wrong rounding is given no method code."""
    misleading = [f"{c.id}: {v[1]}" for c in suite.cases for v in [replays.verdict(c)] if v[0] == replays.MISLEADING]
    assert not misleading, "\n".join(misleading[:8])
