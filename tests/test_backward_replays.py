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
from tests.replays import backward_layers as stack_replays

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


# Stacked layers (tests/replays/backward_layers.py): pre and post, LayerNorm and RMSNorm, two heads, a causal
# mask, three layers; each slip made in head 0 of each layer, the layers before it worked on from it.
STACK_COUNT = 1  # stacks of each set


@pytest.fixture(scope="module")
def stack_suite(tmp_path_factory: pytest.TempPathFactory) -> list[stack_replays.Case]:
    cases, _ = stack_replays.build(Path(tmp_path_factory.mktemp("backward-stack-replays")), STACK_COUNT)
    return cases


def test_the_stack_suite_has_every_case(stack_suite: list[stack_replays.Case]) -> None:
    careful = [case for case in stack_suite if case.slip is None]
    assert len(careful) == 2 * STACK_COUNT * len(stack_replays.SETS)  # their own numbers, and the key
    assert {case.slip for case in stack_suite} == {None, *stack_replays.SLIPS}
    assert {case.where[2] for case in stack_suite if case.where is not None} == {0, 1, 2}  # every layer of three


@pytest.mark.parametrize("row", [None, *stack_replays.SLIPS])
def test_stack_students_careful_pass_and_each_slip_is_named_in_its_layer(
    stack_suite: list[stack_replays.Case], row: str | None
) -> None:
    """Careful: every step right, forward and backward, through the residual's two paths and the norms' backward.
    A slip: wrong with its code at its step and layer; every other step right or carried (↷)."""
    cases = [case for case in stack_suite if case.slip == row]
    failures = [f"{c.exercise}: {v}" for c in cases for v in [stack_replays.verdict(c)] if v[0] != stack_replays.GOOD]
    assert cases and not failures, "\n".join(failures[:8])
    if row is None:
        assert all({s["status"] for s in case.result["steps"]} == {"right"} for case in cases)


def test_a_slip_in_the_last_layer_leaves_the_layers_before_carried(stack_suite: list[stack_replays.Case]) -> None:
    """Worked on from the student's own wrong gradient, the first layer's gradients are carried (or, where the slip
    moves them less than a careful student's rounding may, right), never wrong."""
    late = [
        case for case in stack_suite if case.where is not None and case.where[2] == 1 and "three" not in case.exercise
    ]
    found = [{s["status"] for s in case.result["steps"] if s["layer"] == 0 and s["step"].startswith("backward.")}
             for case in late]  # fmt: skip
    assert late and not [statuses for statuses in found if "wrong" in statuses]
    assert sum("carried" in statuses for statuses in found) >= len(late) // 2
