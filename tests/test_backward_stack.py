"""Issue 28 item 5 for stacked layers: a stack's gradients answered (`answers: backward: layers:`), templated, graded.

Keys come from attncli's own calculation (checked against torch autograd in tests/test_backward_torch.py)
rounded to 4 decimals; the norm's backward bound is checked against a careful student's numbers worked
here in plain numpy (tests/replays/backward_layers.norm_backward); the replayed students of whole stacks
are tests/test_backward_replays.py.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from attncli import exercises
from attncli.grading import interval
from attncli.grading.backward_stack import norm_backward
from attncli.problem import Layer, Norm
from tests.paths import SAMPLES
from tests.replays import backward_layers
from tests.test_backward_check import junk_is_graded_or_one_line, not_right_in_own_keys, run

STACK = (SAMPLES / "layers.yaml").read_text(
    encoding="utf-8"
) + "backward:\n  grad_output: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]\n"
POST = STACK.replace("norm: {type: layer, place: pre, eps: 1e-5}", "norm: {type: rms, place: post, gain: [1, 2, 0.5]}")


def key_of(problem: str) -> str:
    return problem + "\n" + exercises._answers(problem)


def graded(text: str) -> tuple[int, dict[tuple[str, int | None, int | None], dict]]:
    result = run("check", "-", "--format", "json", input=text)
    steps = json.loads(result.stdout)["steps"] if result.stdout else []
    return result.exit_code, {(s["step"], s["head"], s["layer"]): s for s in steps}


@pytest.mark.parametrize("problem", [STACK, POST], ids=["pre-layernorm", "post-rmsnorm-gain"])
def test_a_stacks_key_passes_its_own_check_each_gradient_labelled_with_its_layer(problem: str) -> None:
    code, steps = graded(key_of(problem))
    assert code == 0
    backward = {key: step for key, step in steps.items() if key[0].startswith("backward.")}
    assert {step["status"] for step in backward.values()} == {"right"}
    assert {key[2] for key in backward} == {0, 1}
    assert ("backward.grad_input", None, 0) in backward and ("backward.grad_input", None, 1) in backward
    assert ("backward.grad_scores", 0, 0) in backward and ("backward.grad_w_o", None, 0) in backward
    post = "place: post" in problem
    assert (("backward.grad_residual", None, 1) in backward) is post
    assert (("backward.grad_normed", None, 1) in backward) is not post
    first = [key[2] for key in backward]
    assert first == sorted(first)  # the first layer's first, as JSON's backward.layers


STACK_KINDS = [
    ("--layers", "2"),
    ("--layers", "2", "--norm", "rms:post"),
    ("--layers", "2", "--heads", "2"),
    ("--layers", "2", "--norm", "layer"),
    ("--layers", "3", "--norm", "layer"),
    ("--layers", "2", "--norm", "layer", "--mask", "causal"),
]


def test_generated_stack_keys_of_every_kind_pass_their_own_check_every_step_right(tmp_path: Path) -> None:
    """A key is a careful student: never carried (↷). Seen before: a top layer's dP = dO·Vᵀ carried in the last
    layer, its truth worked from the key's own 4-decimal stream as if exact (V ±1e-4 off, no bound for it)."""
    assert not_right_in_own_keys(tmp_path, STACK_KINDS, range(1, 9)) == []


def test_the_template_prints_a_stacks_gradients_blank_under_layers() -> None:
    result = run("template", "-", input=STACK)
    assert result.exit_code == 0
    answers = yaml.safe_load(result.stdout)["answers"]
    layers = answers["backward"]["layers"]
    assert [sorted(layer) for layer in layers] == [
        ["attention", "grad_input"],
        ["attention", "grad_input", "grad_normed"],
    ]
    assert {"grad_concat", "grad_w_o", "grad_scores", "grad_x"} <= set(layers[0]["attention"])
    assert layers[1]["grad_normed"]["bank"] == ["?", "?", "?"]
    post = yaml.safe_load(run("template", "-", input=POST).stdout)["answers"]["backward"]["layers"]
    assert sorted(post[1]) == ["attention", "grad_input", "grad_residual"]


def test_the_template_filled_with_the_keys_numbers_passes() -> None:
    """Each ? of the blank template replaced by the key's number, in order: the same file check reads back."""
    key = key_of(STACK).split("\nanswers:\n")[1]
    cells = [cell.strip() for row in re.findall(r"\[([^\]]*)\]", key) for cell in row.split(",")]
    pieces = run("template", "-", input=STACK).stdout.split('"?"')
    assert len(pieces) == len(cells) + 1
    filled = "".join(p + c for p, c in zip(pieces, cells)) + pieces[-1]
    code, steps = graded(STACK + filled)
    assert code == 0 and sum(key[0].startswith("backward.") for key in steps) == 27


def _moved(text: str, after: str, nth: int = 0) -> str:
    """The first digit after the `nth` occurrence of `after` moved by 3 (a clearly wrong number)."""
    start = -1
    for _ in range(nth + 1):
        start = text.index(after, start + 1)
    index = next(i for i in range(start + len(after), len(text)) if text[i].isdigit())
    return text[:index] + str((int(text[index]) + 3) % 10) + text[index + 1 :]


def test_one_digit_moved_in_a_layers_gradient_is_wrong_there_and_nowhere_else() -> None:
    key = key_of(STACK)
    backward = key.index("  backward:\n")
    for nth, layer in ((0, 0), (1, 1)):
        text = key[:backward] + _moved(key[backward:], "grad_input:\n", nth)
        code, steps = graded(text)
        assert code == 1
        wrong = [key for key, step in steps.items() if step["status"] == "wrong"]
        assert wrong == [("backward.grad_input", None, layer)]


def test_a_layer_worked_from_a_wrong_gradient_of_the_layer_after_is_carried() -> None:
    """The careful student of samples/layers.yaml, their last layer's grad_input off by 0.3 in one cell, the first
    layer's gradients worked on from it: wrong at the last layer, carried (↷) in the first, not wrong."""
    from tests.replays import layers as forward

    loaded = _stack()
    work = forward.work(loaded)
    student = backward_layers.Student(loaded, work, np.eye(3))
    student.layer(1, np.eye(3))
    student.found[("backward.grad_input", None, 1)][2, 0] += 0.3
    student.layer(0, student.found[("backward.grad_input", None, 1)])
    text = STACK + forward.answers_yaml(loaded, work) + backward_layers.backward_yaml(loaded, student.found)
    code, steps = graded(text)
    assert code == 1
    statuses = {key: step["status"] for key, step in steps.items() if key[0].startswith("backward.")}
    assert statuses[("backward.grad_input", None, 1)] == "wrong"
    assert [key for key, status in statuses.items() if status == "wrong"] == [("backward.grad_input", None, 1)]
    first = {status for key, status in statuses.items() if key[2] == 0}
    assert "carried" in first and "wrong" not in first


def _stack() -> object:
    import tempfile
    from pathlib import Path

    from attncli import pipeline

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "stack.yaml"
        path.write_text(STACK, encoding="utf-8")
        return pipeline.load(str(path))


@pytest.mark.parametrize(("kind", "gain"), [("layer", None), ("layer", [1.5, -0.5, 2.0, 1.0]), ("rms", None)])
def test_the_norms_backward_bound_holds_a_careful_students_numbers(kind: str, gain: list[float] | None) -> None:
    """200 random rows and gradients, kept to 4 decimals as a student has them: the student's own backward of the
    norm (σ, x̂, the means written and kept) and the exact one both lie in the bound, and the bound is not vacuous."""
    rng = np.random.default_rng(7)
    norm = Norm(kind, "pre", 1e-5, None if gain is None else np.array(gain), None)
    layer = Layer("l", None, norm)  # type: ignore[arg-type]  # the student reads only the norm
    widest = 0.0
    for _ in range(200):
        rows, grad = np.round(rng.normal(0, 2, (3, 4)), 4), np.round(rng.normal(0, 1.5, (3, 4)), 4)
        bound = norm_backward(interval.known(rows, np.full(rows.shape, 5e-5)), interval.exact(grad), norm, 4)
        student = backward_layers.norm_backward(rows, grad, layer)
        assert np.all(np.abs(student - bound.t) <= bound.radius + 5e-5 + 1e-12)
        widest = max(widest, float(np.max(bound.radius / (np.abs(bound.t) + 1))))
    assert widest < 0.05  # a bound, not "anything goes"


BAD = [
    ("answers:\n  backward:\n    layers: 5\n", "backward.layers must be a list"),
    ("answers:\n  backward:\n    layers: [{}, {}, {}]\n", "3 layers answered, but the problem has 2"),
    ("answers:\n  backward:\n    layers: [{grad_residual: [[1]]}]\n", "grad_residual"),
    ("answers:\n  backward:\n    grad_input: [[1]]\n", "grad_input"),
    ("answers:\n  backward:\n    layers: [{attention: 3}]\n", "backward must be a mapping"),
    ("answers:\n  backward:\n    layers: [{}]\n", "answers"),
    ("answers:\n  layers:\n    - backward: {grad_input: [[1]]}\n", "answered under answers: backward: layers:"),
    ("answers:\n  backward: [1, 2]\n", "backward must be a mapping"),
]


@pytest.mark.parametrize(("answers", "words"), BAD)
def test_bad_stack_gradients_get_one_line_and_exit_2(answers: str, words: str) -> None:
    result = run("check", "-", input=STACK + answers)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and result.stdout == "", result.output
    assert len(lines) == 1 and len(lines[0]) <= 200 and words in lines[0], lines


def test_a_stack_without_backward_refuses_gradients_in_one_line() -> None:
    problem = (SAMPLES / "layers.yaml").read_text(encoding="utf-8")
    result = run("check", "-", input=problem + "answers:\n  backward:\n    layers: [{grad_input: [[1, 0, 0]]}]\n")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1


JUNK = ["x", "[]", "{}", "[[1, 2]]", "[[nan, 1, 2]]", "{bank: [1, 2, 3, 4]}", "[[1e999, 0, 0]]"]
WHERE = [
    "backward: {{layers: [{{grad_input: {J}}}]}}", "backward: {{layers: [{{attention: {{grad_x: {J}}}}}]}}",
    "backward: {{layers: [{{}}, {{grad_normed: {J}}}]}}", "backward: {{layers: [{{attention: {{heads: {J}}}}}]}}",
    "backward: {{layers: [{{}}, {{attention: {{grad_scores: {J}}}}}]}}", "backward: {{layers: {J}}}",
]  # fmt: skip


def test_junk_anywhere_in_a_stacks_gradients_is_graded_or_one_line_never_an_internal_error() -> None:
    junk_is_graded_or_one_line(STACK, WHERE, JUNK)


def test_a_target_loss_stacks_key_passes_and_the_sum_loss_too() -> None:
    target = STACK.replace(
        "grad_output: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]", "loss: {target: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]}"
    )
    summed = STACK.replace("grad_output: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]", "loss: sum")
    for problem in (target, summed):
        code, steps = graded(key_of(problem))
        assert code == 0 and sum(key[0].startswith("backward.") for key in steps) == 27
