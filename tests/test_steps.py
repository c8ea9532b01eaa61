"""attncli.steps, the one table of the calculation's steps, against the records it names and the article's order.

What each step needs and where each problem has it are written here by hand from the article's formulas
(Q, K, V; q·k; s = q·k/√d_k (+ b); w = softmax(s); z = Σ w·v; concat; W_O), not read from the table.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attncli import backward, core, layers, pipeline, softmax, tiles
from attncli.steps import (
    ANSWERED,
    BACKWARD,
    BACKWARD_HEAD,
    BACKWARD_KV,
    BACKWARD_LAYER,
    BY_NAME,
    CALCULATION,
    HEAD,
    HEAD_STEPS,
    KEYS,
    LAYER,
    LOGITS,
    QUERIES,
    QUERY_TILES,
    SHARED,
    SHARED_STEPS,
    SOFTMAX,
    STREAM_STEPS,
    TILE_STEPS,
    TILES,
    TOKENS,
    computed,
    depends,
    labels,
    matrix,
    order,
    position,
    present,
)
from tests.paths import ONE_LAYER_SAMPLES, SAMPLES, STACK_SAMPLES

RECORD_FIELDS = {
    HEAD: set(core.HeadSteps._fields),
    SHARED: set(core.Steps._fields),
    LAYER: {field.name for field in dataclasses.fields(layers.LayerSteps)},
    BACKWARD: set(backward.Gradients._fields),
    BACKWARD_HEAD: set(backward.HeadGradients._fields),
    BACKWARD_KV: set(backward.KvGradients._fields),
    BACKWARD_LAYER: set(backward.LayerGradients._fields),
}
# What a dotted field goes through: HeadSteps.tiles is a Tiles; SoftmaxSteps holds Stable, Filtered, CrossEntropy.
PARTS = {
    "tiles": tiles.Tiles,
    "stable": softmax.Stable,
    "filtered": softmax.Filtered,
    "cross_entropy": softmax.CrossEntropy,
}
# What flows into each step a student answers, from the article's formulas (transitively)
FLOWS_INTO = {
    "queries": set(),
    "keys": set(),
    "values": set(),
    "dot": {"queries", "keys"},
    "scores": {"queries", "keys", "dot"},
    "weights": {"queries", "keys", "dot", "scores"},
    "output": {"queries", "keys", "values", "dot", "scores", "weights"},
}


def solved(name: str) -> core.Steps:
    steps = pipeline.solve(pipeline.load(str(SAMPLES / name)))
    assert isinstance(steps, core.Steps)
    return steps


def test_every_step_names_a_field_its_record_has() -> None:
    """A renamed field of HeadSteps, Steps or LayerSteps cannot leave the table pointing at nothing."""
    for step in CALCULATION:
        first, _, rest = step.field.partition(".")
        assert step.field == "" or first in RECORD_FIELDS[step.place], step
        assert not rest or hasattr(PARTS[first], rest), step
        assert set(step.needs) <= set(BY_NAME), step
        assert CALCULATION.index(step) > max((CALCULATION.index(BY_NAME[need]) for need in step.needs), default=-1)
    for step in SOFTMAX:  # the softmax homework's, in `attncli softmax`'s record
        first, _, rest = step.field.partition(".")
        assert step.place == LOGITS and first in softmax.SoftmaxSteps._fields and rest in PARTS[first]._fields, step
        assert SOFTMAX.index(step) > max((SOFTMAX.index(s) for s in SOFTMAX if s.name in step.needs), default=-1)


def test_answers_lists_the_steps_in_the_order_of_the_calculation() -> None:
    assert HEAD_STEPS == ("queries", "keys", "values", "dot", "scores", "weights", "output")
    assert SHARED_STEPS == ("concat", "final")
    assert STREAM_STEPS == ("normed", "residual", "stream")
    assert [BY_NAME[name].maskable for name in HEAD_STEPS] == [False, False, False, True, True, True, False]
    assert TILE_STEPS == ("running_max", "rescale", "running_sum", "accumulator")  # the JSON's names of a tile
    assert [BY_NAME[name].maskable for name in TILE_STEPS] == [True, False, False, False]  # m is −∞ before any key


@pytest.mark.parametrize("heads", [1, 2, 3])
def test_a_step_depends_on_what_flows_into_it(heads: int) -> None:
    for h in range(heads):
        for name, inputs in FLOWS_INTO.items():
            assert set(depends((name, h), heads)) == {(need, h) for need in inputs}, name
    every_head = {(name, h) for h in range(heads) for name in HEAD_STEPS}
    assert set(depends(("concat", None), heads)) == every_head
    assert set(depends(("final", None), heads)) == every_head | {("concat", None)}


@pytest.mark.parametrize("name", ONE_LAYER_SAMPLES)
def test_every_step_a_problem_has_is_shaped_as_its_labels_say(name: str) -> None:
    steps = solved(name)
    problem = steps.problem
    queries, keys = len(problem.query_tokens), len(problem.tokens)
    for step, head in order(steps):
        found = matrix(steps, step, head)
        if found is None:
            assert not present(steps, step, head)
            continue
        rows, columns = labels(problem, step, found.shape[1])
        assert found.shape == (len(rows), len(columns)), (step, head)
        tile_count = -(-keys // problem.tiles) if problem.tiles else 0
        assert len(rows) == {QUERIES: queries, TOKENS: keys, QUERY_TILES: queries * tile_count}[BY_NAME[step].rows]
        if BY_NAME[step].columns == KEYS:
            assert columns == problem.tokens
        else:
            assert columns == tuple(str(j) for j in range(1, found.shape[1] + 1))
        if BY_NAME[step].columns == TILES:
            assert len(columns) == tile_count


def test_given_scores_have_no_queries_keys_or_dot_and_are_not_computed() -> None:
    text = "tokens: [a, b]\nscores: [[1, 2], [3, 4]]\nvalues: [[1, 0], [0, 1]]\n"
    steps = pipeline.solve(pipeline.load(text=text, name="given.yaml"))
    assert [name for name in ANSWERED if present(steps, name, 0 if BY_NAME[name].place == HEAD else None)] == [
        "values",
        "scores",
        "weights",
        "output",
        "final",
    ]
    assert not computed(steps, "scores", 0) and not computed(steps, "values", 0)
    assert computed(steps, "weights", 0) and computed(steps, "final")


def test_a_student_computes_the_projections_only_from_x_and_w() -> None:
    given = solved("bank.yaml")  # queries, keys and values written out
    projected = solved("projections.yaml")  # x and W_Q, W_K, W_V
    for name in ("queries", "keys", "values"):
        assert present(given, name, 0) and not computed(given, name, 0)
        assert computed(projected, name, 0)


def test_concat_only_with_several_heads_or_w_o() -> None:
    assert not present(solved("bank.yaml"), "concat")
    assert present(solved("two_heads.yaml"), "concat")


@pytest.mark.parametrize("name", sorted(STACK_SAMPLES))
def test_a_layer_has_normed_when_its_norm_is_pre_and_residual_when_post(name: str) -> None:
    stack = pipeline.solve(pipeline.load(str(SAMPLES / name)))
    assert isinstance(stack, layers.StackSteps)
    for layer in stack.layers:
        place = None if layer.layer.norm is None else layer.layer.norm.place
        assert present(layer, "normed") == (place == "pre")
        assert present(layer, "residual") == (place == "post")
        assert matrix(layer, "stream") is layer.output


def test_reports_sort_layer_by_layer_normed_first_then_heads_then_the_rest() -> None:
    keys = [(1, "stream", None), (0, "final", None), (0, "dot", 1), (0, "weights", 0), (1, "normed", None)]
    keys += [(0, "queries", 1), (0, "concat", None), (1, "dot", 0)]
    ordered = sorted(keys, key=lambda key: position(key[1], key[2], key[0]))
    assert ordered == [
        (0, "weights", 0),
        (0, "queries", 1),
        (0, "dot", 1),
        (0, "concat", None),
        (0, "final", None),
        (1, "normed", None),
        (1, "dot", 0),
        (1, "stream", None),
    ]


BACKWARD_CASES = [("bank_backward.yaml", None), ("two_heads_backward.yaml", None)] + [
    (name, {"loss": "sum"}) for name in ("projections.yaml", "gqa.yaml", "rope.yaml", "bias.yaml", "alibi.yaml")
]


@pytest.mark.parametrize(("name", "flags"), BACKWARD_CASES)
def test_every_backward_step_is_its_json_key_shaped_as_its_labels_say(name: str, flags: dict | None) -> None:
    """A backward step of head h is `backward.heads[h].<key>` of the JSON, of a kv head `kv_heads[g].<key>`, of
    head None the top level's `<key>`; where the JSON has no such key, the problem does not have the step."""
    from attncli.render import backward_doc

    steps = pipeline.solve(pipeline.load(str(SAMPLES / name), flags))
    assert isinstance(steps, core.Steps) and steps.backward is not None
    tree = backward_doc.fields(steps.backward)
    problem, found = steps.problem, 0
    for step in CALCULATION:
        if step.place not in (BACKWARD, BACKWARD_HEAD, BACKWARD_KV):
            continue
        places = {BACKWARD: [(None, tree)], BACKWARD_KV: list(enumerate(tree.get("kv_heads", [])))}.get(
            step.place, [(None, tree), *enumerate(tree["heads"])]
        )
        for head, where in places:
            want = where.get(step.name.rpartition(".")[2])
            assert present(steps, step.name, head) == (want is not None), (step.name, head)
            if want is None:
                continue
            numbers = matrix(steps, step.name, head)
            assert numbers is not None and np.array_equal(numbers.ravel(), np.asarray(want).ravel())
            rows, columns = labels(problem, step.name, numbers.shape[1], numbers.shape[0])
            assert numbers.shape == (len(rows), len(columns)), (step.name, head)
            found += 1
    assert found >= 6


def test_reports_sort_the_forward_then_the_backward_each_head_then_the_kv_heads() -> None:
    keys = [("backward.grad_x", None), ("backward.kv_heads.grad_keys", 0), ("backward.grad_values", 1)]
    keys += [("final", None), ("backward.grad_concat", None), ("weights", 1), ("backward.grad_values", 0)]
    keys += [("backward.grad_keys", None), ("backward.grad_output", None), ("queries", 0)]
    ordered = sorted(keys, key=lambda key: position(*key))
    forward = [("queries", 0), ("weights", 1), ("final", None)]
    before_heads = [("backward.grad_output", None), ("backward.grad_concat", None)]
    heads = [("backward.grad_values", 0), ("backward.grad_values", 1), ("backward.kv_heads.grad_keys", 0)]
    assert ordered == [*forward, *before_heads, *heads, ("backward.grad_keys", None), ("backward.grad_x", None)]
