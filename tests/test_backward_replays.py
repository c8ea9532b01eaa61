"""The replayed-student suite of the backward pass (issue 28, "Done when"): `check` judged by students it does not know.

Students come from tests/replays/backward.py (numpy, no attncli import) over the exercises of
`attncli generate --backward --count` (one head, causal and not, dot scores, two heads with W_O,
projections, RoPE both styles, grouped-query heads; some again with a target loss, a bias matrix and
ALiBi), each slip made in the first head and, with several, in the second; `check` runs once over every file.
`python -m tests.replays.backward 3` prints the same figures over more exercises.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.replays import backward as replays

COUNT = 2  # exercises of each set


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> list[replays.Case]:
    cases, _ = replays.build(Path(tmp_path_factory.mktemp("backward-replays")), COUNT)
    return cases


def _assert_all_good(suite: list[replays.Case], row: str | None) -> None:
    cases = [case for case in suite if case.slip == row]
    assert cases, f"no case of {row}"
    failures = [f"{c.exercise.id}: {v[0]} {v[1]}" for c in cases for v in [replays.verdict(c)] if v[0] != replays.GOOD]
    assert not failures, f"{len(failures)} of {len(cases)}:\n" + "\n".join(failures[:8])


def test_the_suite_has_every_case(suite: list[replays.Case]) -> None:
    variants = COUNT * len(replays.VARIED) * 3  # each with a target loss, a bias matrix, ALiBi
    assert len({case.exercise.id for case in suite if case.slip is None}) == COUNT * len(replays.SETS) + variants
    assert {case.slip for case in suite} == {None, *replays.SLIPS}
    assert sum(case.slip is not None for case in suite) >= 150
    assert any(case.where is not None and case.where[1] == 1 for case in suite)  # slips in a second head too


def test_careful_students_carrying_4_decimals_pass(suite: list[replays.Case]) -> None:
    """Their own rounded numbers carried through dP, D, dS, d(q·k), dQ/dK, the dW and dX: every step right."""
    _assert_all_good(suite, None)
    for case in suite:
        if case.slip is None:
            assert case.result["ok"] and {s["status"] for s in case.result["steps"]} == {"right"}, case.exercise.id
            assert any(s["step"] == "backward.grad_scores" for s in case.result["steps"])


@pytest.mark.parametrize("slip", list(replays.SLIPS))
def test_each_slip_is_named_at_its_step_and_carried_after(suite: list[replays.Case], slip: str) -> None:
    """Wrong at the step where it is made, with its code; every other step right or carried (↷)."""
    _assert_all_good(suite, slip)


def test_the_figures_no_false_alarm_no_missed_no_unnamed(suite: list[replays.Case]) -> None:
    table = replays.figures(suite)
    bad = {row: counts for row, counts in table.items() if set(counts) != {replays.GOOD}}
    assert bad == {}
