"""The replayed students of a stack's backward pass (issue 28): a careful student's gradients layer by layer, each slip.

A student works the stack forward at 4 decimals (tests/replays/layers.py: their own streams, norms
and attention steps), then backwards from the last layer in plain numpy, every number they write
kept to 4 decimals and carried: post-norm, the norm's backward of dO at their residual sum (σ, x̂
and the two row means written, kept); the attention's gradients from their own forward numbers
(d(concat), dW_O, dV, dP, D, dS, d(q·k), dQ, dK, the dW, dX); pre-norm, the norm's backward of dX
at the stream they read; then grad_input, the residual's path plus the branch's, the dO of the
layer before. A slip (one of the four a stack's heads can show: no grouped kv heads in a stack) is
made in the first head of one layer, and every later gradient, into the layers before it, follows
correctly from it. `check --format json` runs once over every file.

`python -m tests.replays.backward_layers 2` prints the figures (false alarms, missed, unnamed).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from attncli import exercises as keys
from attncli import pipeline
from attncli.problem import Layer, Stack
from tests.replays import backward as one_layer
from tests.replays import layers as forward

ROOT = Path(__file__).resolve().parents[2]
B = "backward."
CLEAR = 3e-3  # a slip that moves no cell of its step by more than this is no slip on this exercise
SETS = (  # name: generate's options for a stack (the dO is added here: generate --backward refuses --layers)
    ("pre-layer", ("--layers", "2", "--norm", "layer")),
    ("post-layer", ("--layers", "2", "--norm", "layer:post")),
    ("pre-rms", ("--layers", "2", "--norm", "rms", "--tokens", "2")),
    ("post-rms", ("--layers", "2", "--norm", "rms:post")),
    ("heads-pre", ("--layers", "2", "--norm", "layer", "--heads", "2")),
    ("causal-post", ("--layers", "2", "--norm", "layer:post", "--mask", "causal")),
    ("three", ("--layers", "3", "--norm", "layer", "--tokens", "2")),
    ("heads-plain", ("--layers", "2", "--heads", "2")),
)
SLIPS = {  # each slip: the step of head 0 it is made at, and the code check names there
    "jacobian_diagonal_only": B + "grad_scores",
    "backward_scale_forgotten": B + "grad_queries",
    "grad_values_not_transposed": B + "grad_values",
    "row_term_wrong_axis": B + "row_term",
}
Key = tuple[str, "int | None", int]  # (step, head, layer) as check's JSON labels it


def r(x: np.ndarray) -> np.ndarray:
    return np.round(np.asarray(x, dtype=float), forward.CARRY) + 0.0


def norm_backward(rows: np.ndarray, grad: np.ndarray, layer: Layer) -> np.ndarray:
    """dx = (1/σ)·(dx̂ − mean(dx̂) − x̂·mean(dx̂ ∘ x̂)), RMSNorm without mean(dx̂): σ, x̂ and the means written, kept."""
    norm = layer.norm
    assert norm is not None
    centred = rows - r(rows.mean(axis=1, keepdims=True)) if norm.kind == "layer" else rows
    sigma = r(np.sqrt((centred**2).mean(axis=1, keepdims=True) + norm.eps))
    hat = r(centred / sigma)
    grad_hat = grad * norm.gain if norm.gain is not None else grad
    inner = grad_hat - hat * r((grad_hat * hat).mean(axis=1, keepdims=True))
    if norm.kind == "layer":
        inner = inner - r(grad_hat.mean(axis=1, keepdims=True))
    return r(inner / sigma)


@dataclass
class Student:
    """A student's whole backward pass over a stack: every gradient by (step, head, layer), kept to 4 decimals."""

    stack: Stack
    work: forward.Work
    grad_output: np.ndarray
    slip: str | None = None
    at: int = 0  # the layer the slip is made in (head 0)
    found: dict[Key, np.ndarray] = field(default_factory=dict)

    def put(self, name: str, head: int | None, layer: int, value: np.ndarray) -> np.ndarray:
        self.found[(name, head, layer)] = r(value)
        return self.found[(name, head, layer)]

    def run(self) -> Student:
        grad = self.grad_output
        for index in reversed(range(len(self.stack.layers))):
            grad = self.layer(index, grad)
        return self

    def layer(self, index: int, grad: np.ndarray) -> np.ndarray:
        layer, answers = self.stack.layers[index], self.work.layers[index]
        place = None if layer.norm is None else layer.norm.place
        read = self.stack.x if index == 0 else self.work.layers[index - 1]["stream"]
        if place == "post":
            grad = self.put(B + "grad_residual", None, index, norm_backward(answers["residual"], grad, layer))
        fed = answers["normed"] if place == "pre" else read
        through = self.attention(index, grad, fed)
        if place == "pre":
            self.put(B + "grad_normed", None, index, through)
            through = norm_backward(read, through, layer)
        return self.put(B + "grad_input", None, index, grad + through)

    def attention(self, index: int, grad: np.ndarray, fed: np.ndarray) -> np.ndarray:
        """The layer's attention backwards from dO (S, d) over its input `fed`: its grad_x."""
        problem = self.stack.layers[index].attention
        steps = self.work.layers[index]["steps"]
        parts = [grad]
        if problem.w_o is not None:
            self.put(B + "grad_w_o", None, index, steps["concat"].T @ grad)
            concat = self.put(B + "grad_concat", None, index, grad @ problem.w_o.T)
            edges = np.cumsum([0, *(head["values"].shape[1] for head in steps["heads"])])
            parts = [concat[:, edges[h] : edges[h + 1]] for h in range(len(steps["heads"]))]
        total = 0.0
        for h, (spec, head) in enumerate(zip(problem.heads, steps["heads"])):
            dq, dk, dv = self.head(index, h, head, parts[h], spec.score.scale, problem.mask)
            for name, gradient in (("grad_w_q", dq), ("grad_w_k", dk), ("grad_w_v", dv)):
                self.put(B + name, h, index, fed.T @ gradient)
            total = total + dq @ spec.queries.w.T + dk @ spec.keys.w.T + dv @ spec.values.w.T
        return self.put(B + "grad_x", None, index, np.asarray(total))

    def head(
        self, index: int, h: int, head: dict, grad: np.ndarray, scale: float, allowed: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        slip = self.slip if (index, h) == (self.at, 0) else None
        weights, values = head["weights"], head["values"]
        put = lambda name, value: self.put(B + name, h, index, value)  # noqa: E731
        grad_values = put("grad_values", weights @ grad if slip == "grad_values_not_transposed" else weights.T @ grad)
        grad_weights = put("grad_weights", grad @ values.T)
        axis = 0 if slip == "row_term_wrong_axis" else 1
        row = put("row_term", (weights * grad_weights).sum(axis=axis)[:, None])
        inner = grad_weights if slip == "jacobian_diagonal_only" else grad_weights - row
        grad_scores = put("grad_scores", np.where(allowed, weights * inner, 0.0))
        grad_dot = put("grad_dot", grad_scores * scale)
        unscaled = grad_scores if slip == "backward_scale_forgotten" else grad_dot
        return put("grad_queries", unscaled @ head["keys"]), put("grad_keys", grad_dot.T @ head["queries"]), grad_values


def backward_yaml(stack: Stack, found: dict[Key, np.ndarray]) -> str:
    """`backward: layers:` as attncli template lays it out, every cell at 4 decimals."""
    lines = ["  backward:", "    layers:"]
    for index, layer in enumerate(stack.layers):
        several = len(layer.attention.heads) > 1 or layer.attention.w_o is not None
        mine = [(name, head) for name, head, at in found if at == index]

        def block(name: str, head: int | None, indent: int, index: int = index) -> list[str]:
            pad = " " * indent  # rows as a list: a weight's gradient has a row per coordinate, not per token
            rows = [
                f"{pad}  - [{', '.join(forward.text(float(v)) for v in row)}]" for row in found[(name, head, index)]
            ]
            return [f"{pad}{name[len(B) :]}:", *rows]

        body = [line for name in (B + "grad_residual",) if (name, None) in mine for line in block(name, None, 8)]
        body.append("        attention:")
        body += [line for name in (B + "grad_concat", B + "grad_w_o") if (name, None) in mine
                 for line in block(name, None, 10)]  # fmt: skip
        heads = sorted({head for _, head in mine if head is not None})
        if several:
            body.append("          heads:")
        for h in heads:
            one = [line for name, head in mine if head == h for line in block(name, h, 14 if several else 10)]
            body += [f"            - {one[0].lstrip()}", *one[1:]] if several else one
        body += block(B + "grad_x", None, 10)
        body += [line for name in (B + "grad_normed", B + "grad_input") if (name, None) in mine
                 for line in block(name, None, 8)]  # fmt: skip
        lines += [f"      - {body[0].lstrip()}", *body[1:]]
    return "\n".join(lines) + "\n"


@dataclass(repr=False)
class Case:
    exercise: str
    slip: str | None
    path: Path
    where: Key | None = None
    result: dict = field(default_factory=dict)


def exercises(directory: Path, count: int) -> list[tuple[str, Path]]:
    """`count` stacks of every set, each given a 0/1 dO (a 1 in each row) under `backward:`."""
    found = []
    for seed, (name, options) in enumerate(SETS):
        out = directory / name
        command = [sys.executable, "-m", "attncli", "generate", *options, "--seed", str(700 + 10 * seed)]
        subprocess.run([*command, "--count", str(count), "-o", str(out)], cwd=ROOT, check=True, capture_output=True)
        for number, sheet in enumerate(sorted(out.glob("exercise-??.yaml"))):
            stack = pipeline.load(str(sheet))
            assert isinstance(stack, Stack)
            n, d = len(stack.tokens), stack.x.shape[1]
            rows = [[int(j == (i + number) % d) for j in range(d)] for i in range(n)]
            loss = "  loss: sum\n" if number % 2 else f"  grad_output: {json.dumps(rows)}\n"
            sheet.write_text(sheet.read_text(encoding="utf-8") + "backward:\n" + loss, encoding="utf-8")
            found.append((f"{name}/{sheet.stem}", sheet))
    return found


def cases(exercise: str, sheet: Path, directory: Path) -> list[Case]:
    """The careful students of a stack (their own numbers, and the key) and each slip in each layer (one that moves
    some number of its step clearly)."""
    stack = pipeline.load(str(sheet))
    assert isinstance(stack, Stack)
    work = forward.work(stack)
    solved = pipeline.solve(stack)
    assert solved.backward is not None
    grad = solved.backward.grad_output
    careful = Student(stack, work, grad).run().found
    stem = exercise.replace("/", "-")
    made = [(Case(exercise, None, directory / f"{stem}-careful.yaml"), careful)]
    for slip, step in SLIPS.items():
        for at in range(len(stack.layers)):
            where = (step, 0, at)
            slipped = Student(stack, work, grad, slip, at).run().found
            if slipped[where].shape != careful[where].shape or np.abs(slipped[where] - careful[where]).max() > CLEAR:
                made.append((Case(exercise, slip, directory / f"{stem}-{slip}-{at}.yaml", where), slipped))
    head = sheet.read_text(encoding="utf-8") + forward.answers_yaml(stack, work)
    for case, found in made:
        case.path.write_text(head + backward_yaml(stack, found), encoding="utf-8")
    return [_key(exercise, sheet, directory / f"{stem}-key.yaml"), *(case for case, _ in made)]


def _key(exercise: str, sheet: Path, path: Path) -> Case:
    """The other careful student: the truth rounded to 4 decimals, every number from the unrounded ones before it
    (`generate --answers`'s key), so their stream is 4 decimals but the layer after is worked from the true one."""
    problem = sheet.read_text(encoding="utf-8")
    path.write_text(problem + "\n" + keys._answers(problem), encoding="utf-8")
    return Case(exercise, None, path)


def verdict(case: Case) -> tuple[str, str]:
    """GOOD, or what went wrong and where: a careful student's every step right; a slip's step wrong and named,
    every other step right or carried (↷), the layers before it included."""
    return one_layer.verdict(case, lambda step: (step["step"], step["head"], step["layer"]))  # type: ignore[arg-type]


def figures(all_cases: Sequence[Case]) -> dict[str, Counter]:
    return one_layer.figures(all_cases, verdict)  # type: ignore[arg-type]


GOOD = one_layer.GOOD
grade = one_layer.grade  # one `check --format json` over every file, each case given its file's object


def build(directory: Path, count: int) -> tuple[list[Case], int]:
    made = [c for name, sheet in exercises(directory / "sets", count) for c in cases(name, sheet, directory)]
    return made, grade(made)


if __name__ == "__main__":
    one_layer.main(build, verdict, lambda case: case.exercise)
