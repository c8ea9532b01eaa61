"""The replayed students of the backward pass (issue 28): a careful student's gradients, and each classic slip.

A student (tests/replays/student.py) works the forward pass at 4 decimals; here they go on backwards from
their own rounded numbers (P, V, O, Q, K, the concatenation), every gradient rounded to 4 decimals and
carried: dO's columns through W_O, dV, dP, D, dS, d(q·k), dq̃ and dk̃ (RoPE), dQ, dK, the dW, each kv head's
sums, dX. A slip replaces one gradient by the classic mistake and every later one follows correctly from it.
Plain numpy, no attncli import: `check` is only run as a command (`python -m attncli check --format json`),
over the exercises `attncli generate --backward --count` writes, and each file judged from its JSON object.

`python -m tests.replays.backward` prints the figures (false alarms, missed, unnamed) over the sets below.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from tests.replays.student import Problem, Work, answers_yaml, matrix, read, rotate, text_of

ROOT = Path(__file__).resolve().parents[2]
B = "backward."
KV = "backward.kv_heads."
CLEAR = 3e-3  # a slip that moves no cell by more than this is no slip on this exercise (not a case)
SETS = (  # name: generate's options (each with --backward)
    ("plain", ()),
    ("causal4", ("--tokens", "4", "--mask", "causal")),
    ("dot-causal", ("--score", "dot", "--mask", "causal")),
    ("five", ("--tokens", "5", "--dk", "3", "--dv", "2")),
    ("heads", ("--heads", "2")),
    ("projections", ("--projections",)),
    ("heads-proj-causal", ("--heads", "2", "--projections", "--mask", "causal")),
    ("rope-half", ("--rope", "half", "--dk", "4")),
    ("rope-interleaved", ("--rope", "interleaved", "--dk", "4", "--tokens", "4", "--mask", "causal")),
    ("gqa", ("--heads", "4", "--gqa")),
    ("gqa-proj", ("--heads", "2", "--gqa", "--projections", "--mask", "causal")),
)
# Each slip: where it is made (its step; head 0, or kv head 0) and the code check should name there
SLIPS = {
    "jacobian_diagonal_only": (B + "grad_scores", 0),
    "backward_scale_forgotten": (B + "grad_queries", 0),  # with RoPE made at dq̃ (grad_turned_queries)
    "grad_values_not_transposed": (B + "grad_values", 0),
    "row_term_wrong_axis": (B + "row_term", 0),
    "gqa_not_summed": (KV + "grad_keys", 0),
}
Key = tuple[str, "int | None"]  # (step, head) as check's JSON labels it


def _gqa_problem(data: dict) -> Problem:
    """A grouped-query problem as the student reads it: each query head with the keys and values (or W_K, W_V)
    of the kv head it reads, ⌊h·G/H⌋."""
    shared = data.pop("kv_heads")
    heads = data["heads"]
    for h, head in enumerate(heads):
        kv = shared[h * len(shared) // len(heads)]
        head.update({name: kv[name] for name in ("keys", "values", "w_k", "w_v") if name in kv})
    return read(yaml.safe_dump(data))


@dataclass
class Gradients:
    """A student's whole backward pass: every gradient by (step, head), rounded to 4 decimals, NaN = masked."""

    work: Work
    grad_output: np.ndarray | None  # None: a target's loss, dO = O − T from the student's own output
    groups: list[list[int]]  # each kv head's query heads (none without kv_heads)
    target: np.ndarray | None = None
    slip: str | None = None
    slipped_head: int = 0  # the head the slip is made in (a kv slip: kv head 0)
    found: dict[Key, np.ndarray] = field(default_factory=dict)

    def r(self, x: np.ndarray) -> np.ndarray:
        return np.round(np.asarray(x, dtype=float), 4) + 0.0

    def own(self, h: int, name: str) -> np.ndarray:
        """A forward number of head h as the student has it: their own rounded one, else the problem's."""
        written = self.work.steps.get((h, name))
        if written is not None:
            return np.nan_to_num(written.values)
        return np.asarray(getattr(self.work.problem.heads[h], name), dtype=float)

    def run(self) -> Gradients:
        problem = self.work.problem
        if self.target is not None:  # the student's own final output (or one head's output) minus T
            final = self.work.steps.get((None, "final")) or self.work.steps[(0, "output")]
            grad = self.put(B + "grad_output", None, final.values - self.target)
        else:
            assert self.grad_output is not None
            grad = self.grad_output
        parts = [grad]
        if problem.w_o is not None:
            concat = self.work.steps[(None, "concat")].values
            self.found[(B + "grad_w_o", None)] = self.r(concat.T @ grad)
            d_concat = self.found[(B + "grad_concat", None)] = self.r(grad @ problem.w_o.T)
            edges = np.cumsum([0, *(self.own(h, "values").shape[1] for h in range(len(problem.heads)))])
            parts = [d_concat[:, edges[h] : edges[h + 1]] for h in range(len(problem.heads))]
        for h in range(len(problem.heads)):
            self.head(h, parts[h])
        self.kv_sums()
        if any(head.bias is not None for head in problem.heads):  # a bias matrix every head adds: Σ_h dS_h
            self.put(B + "grad_bias", None, sum(self.found[(B + "grad_scores", h)] for h in range(len(problem.heads))))
        self.inputs()
        return self

    def head(self, h: int, grad: np.ndarray) -> None:
        """dV, dP, D, dS, d(q·k), dQ, dK and the dW of head h from its dO, the slip made where it is made."""
        problem, spec, first = self.work.problem, self.work.problem.heads[h], h == self.slipped_head
        weights, values = self.own(h, "weights"), self.own(h, "values")  # (L, S), (S, d_v)
        untransposed = first and self.slip == "grad_values_not_transposed"
        grad_values = self.put(B + "grad_values", h, weights @ grad if untransposed else weights.T @ grad)
        grad_weights = self.put(B + "grad_weights", h, grad @ values.T)  # (L, S)
        if first and self.slip == "row_term_wrong_axis":
            row = self.put(B + "row_term", h, (weights * grad_weights).sum(axis=0)[:, None])  # per key, as rows
        else:
            row = self.put(B + "row_term", h, (weights * grad_weights).sum(axis=1)[:, None])  # (L, 1)
        inner = grad_weights if first and self.slip == "jacobian_diagonal_only" else grad_weights - row
        grad_scores = self.put(B + "grad_scores", h, np.where(problem.allowed, weights * inner, np.nan))
        queries, keys = self.own(h, "queries"), self.own(h, "keys")
        grad_dot = np.nan_to_num(grad_scores)
        if spec.score == "scaled_dot":
            scaled = grad_scores / math.sqrt(queries.shape[1])
            grad_dot = np.nan_to_num(self.put(B + "grad_dot", h, scaled))
        unscaled = first and self.slip == "backward_scale_forgotten" and spec.score == "scaled_dot"
        rope = problem.rope
        if rope is None:  # under the slip dQ comes from dS, the scale left out; dK is done right
            grad_queries = self.put(
                B + "grad_queries", h, (np.nan_to_num(grad_scores) if unscaled else grad_dot) @ keys
            )
            grad_keys = self.put(B + "grad_keys", h, grad_dot.T @ queries)
        else:
            turned_q, turned_k = self.work.turned(queries, keys)
            dq = self.put(
                B + "grad_turned_queries", h, (np.nan_to_num(grad_scores) if unscaled else grad_dot) @ turned_k
            )
            dk = self.put(B + "grad_turned_keys", h, grad_dot.T @ turned_q)
            at = rope.at
            grad_queries = self.put(B + "grad_queries", h, rotate(dq, -at[len(at) - len(dq) :], rope.base, rope.style))
            grad_keys = self.put(B + "grad_keys", h, rotate(dk, -at, rope.base, rope.style))
        if spec.projected:
            assert spec.x is not None
            for name, gradient in (("grad_w_q", grad_queries), ("grad_w_k", grad_keys), ("grad_w_v", grad_values)):
                self.put(B + name, h, spec.x.T @ gradient)

    def put(self, name: str, head: int | None, value: np.ndarray) -> np.ndarray:
        self.found[(name, head)] = self.r(value)
        return self.found[(name, head)]

    def kv_sums(self) -> None:
        """Each kv head's gradients: the sum of its query heads' (the first one's alone under gqa_not_summed)."""
        for g, readers in enumerate(self.groups):
            for name in ("grad_keys", "grad_values", "grad_w_k", "grad_w_v"):
                if (B + name, readers[0]) in self.found:
                    used = readers[:1] if g == 0 and name == "grad_keys" and self.slip == "gqa_not_summed" else readers
                    self.put(KV + name, g, sum(self.found[(B + name, h)] for h in used))

    def inputs(self) -> None:
        """dX = Σ over the heads of dQ·W_Qᵀ + dK·W_Kᵀ + dV·W_Vᵀ, rounded once."""
        heads = self.work.problem.heads
        if not any(head.projected for head in heads):
            return
        total = sum(
            self.found[(B + name, h)] @ getattr(head, w).T
            for h, head in enumerate(heads)
            for name, w in (("grad_queries", "w_q"), ("grad_keys", "w_k"), ("grad_values", "w_v"))
        )
        self.put(B + "grad_x", None, np.asarray(total))


@dataclass(frozen=True, repr=False)
class Exercise:
    id: str
    sheet: str  # the problem's text
    template: dict  # the blank answers: section generate wrote beside it
    problem: Problem
    grad_output: np.ndarray | None
    groups: list[list[int]]  # each kv head's query heads, ⌊h·G/H⌋ (none without kv_heads)
    target: np.ndarray | None = None  # loss: {target: T}


@dataclass(repr=False)
class Case:
    exercise: Exercise
    slip: str | None
    path: Path
    where: Key | None = None  # the step the slip is made at
    result: dict = field(default_factory=dict)


def exercises(directory: Path, count: int) -> list[Exercise]:
    """`count` exercises of every set, each with its sheet, its blank template and the student's reading of it."""
    running = []
    for seed, (name, options) in enumerate(SETS):
        out = directory / name
        command = [sys.executable, "-m", "attncli", "generate", "--backward", *options, "--seed", str(100 * seed)]
        process = subprocess.Popen([*command, "--count", str(count), "-o", str(out)], cwd=ROOT, stderr=subprocess.PIPE)
        running.append((name, out, process))
    found = []
    for name, out, process in running:
        assert process.wait() == 0, process.stderr.read() if process.stderr else name
        for sheet in sorted(out.glob("exercise-??.yaml")):
            text = sheet.read_text(encoding="utf-8")
            data = yaml.safe_load(text)
            problem = _gqa_problem(yaml.safe_load(text)) if "kv_heads" in data else read(text)
            blank = yaml.safe_load(sheet.with_name(sheet.stem + "-answers.yaml").read_text(encoding="utf-8"))
            grad = matrix(yaml.safe_load(text)["backward"]["grad_output"], problem.tokens)
            kv, heads = len(data.get("kv_heads", ())), len(problem.heads)
            groups = [[h for h in range(heads) if h * kv // heads == g] for g in range(kv)]
            found.append(Exercise(f"{name}/{sheet.stem}", text, blank["answers"]["backward"], problem, grad, groups))
    return found + _variants([e for e in found if e.id.split("/")[0] in VARIED], directory / "variants")


VARIED = ("causal4", "heads")  # sets whose exercises are also asked with a target loss, a bias matrix, ALiBi


def _variants(originals: Sequence[Exercise], directory: Path) -> list[Exercise]:
    """Each exercise again with `loss: {target: T}` instead of its dO (T its dO's 0s and 1s), with a bias matrix
    added to its scores, and with ALiBi; their templates as `attncli template` writes them."""
    directory.mkdir(parents=True)
    made = []
    for exercise in originals:
        sheet, _, _ = exercise.sheet.partition("\nbackward:\n")
        assert exercise.grad_output is not None
        rows = [f"      - [{', '.join(str(int(x)) for x in row)}]" for row in exercise.grad_output]
        n = exercise.problem.n
        bias = [f"  - [{', '.join(str((i + 2 * j) % 3 - 1) for j in range(n))}]" for i in range(n)]
        given = "\nbackward:\n  grad_output:\n" + exercise.sheet.partition("\nbackward:\n  grad_output:\n")[2]
        texts = {
            "target": sheet + "\nbackward:\n  loss:\n    target:\n" + "\n".join(rows) + "\n",
            "bias": sheet + "\nbias:\n" + "\n".join(bias) + given,
            "alibi": sheet + "\nbias: alibi" + given,
        }
        for kind, text in texts.items():
            path = directory / f"{exercise.id.replace('/', '-')}-{kind}.yaml"
            path.write_text(text, encoding="utf-8")
            made.append((exercise, kind, path, subprocess.Popen(_template(path), cwd=ROOT, stdout=subprocess.PIPE)))
    found = []
    for exercise, kind, path, process in made:
        stdout, _ = process.communicate()
        assert process.returncode == 0, path
        text = path.read_text(encoding="utf-8")
        target = exercise.grad_output if kind == "target" else None
        grad = None if kind == "target" else exercise.grad_output
        template = yaml.safe_load(stdout)["answers"]["backward"]
        found.append(Exercise(f"{exercise.id}+{kind}", text, template, read(text), grad, exercise.groups, target))
    return found


def _template(path: Path) -> list[str]:
    return [sys.executable, "-m", "attncli", "template", str(path)]


def asked(template: dict) -> list[Key]:
    """The gradients the blank template asks for, as (step, head)."""
    found: list[Key] = []
    for name, value in template.items():
        if name in ("heads", "kv_heads"):
            prefix = B if name == "heads" else KV
            found += [(prefix + step, index) for index, head in enumerate(value) for step in head]
        else:
            found.append((B + name, 0 if name not in TOP else None))
    return found


TOP = ("grad_output", "grad_concat", "grad_w_o", "grad_x", "grad_x_query", "grad_bias")


def backward_yaml(template: dict, found: dict[Key, np.ndarray]) -> str:
    """The `backward:` part of `answers:`, laid out as the template lays it out, every cell at 4 decimals."""

    def block(name: str, value: np.ndarray, pad: str) -> list[str]:
        rows = [f"{pad}  - [{', '.join(text_of(x) for x in row)}]" for row in value]
        return [f"{pad}{name}:", *rows]

    lines = ["  backward:"]
    for name, value in template.items():
        if name in ("heads", "kv_heads"):
            prefix = B if name == "heads" else KV
            lines.append(f"    {name}:")
            for index, head in enumerate(value):
                body = [line for step in head for line in block(step, found[(prefix + step, index)], "      ")]
                lines += [f"    - {body[0].lstrip()}", *body[1:]]
        else:
            lines += block(name, found[(B + name, 0 if name not in TOP else None)], "    ")
    return "\n".join(lines) + "\n"


def cases(exercise: Exercise, directory: Path) -> list[Case]:
    """The careful student of `exercise` and each slip it can show (one that moves some number clearly)."""
    work = Work(exercise.problem)
    careful = Gradients(work, exercise.grad_output, exercise.groups, exercise.target).run().found
    wanted = asked(exercise.template)
    stem = exercise.id.replace("/", "-").replace("+", "-")
    made = [Case(exercise, None, directory / f"{stem}-careful.yaml")]
    texts: dict[Path, dict[Key, np.ndarray]] = {made[0].path: careful}
    heads = (0, 1) if len(exercise.problem.heads) > 1 else (0,)  # with several heads, the slip in either
    for (slip, (step, _)), head in itertools.product(SLIPS.items(), heads):
        if slip == "backward_scale_forgotten" and exercise.problem.rope is not None:
            step = B + "grad_turned_queries"
        where = (step, 0 if step.startswith(KV) else head)
        if where not in wanted or (head and step.startswith(KV)):
            continue
        slipped = Gradients(work, exercise.grad_output, exercise.groups, exercise.target, slip, head).run().found
        moved = np.nan_to_num(np.abs(slipped[where] - careful[where]))
        if slipped[where].shape != careful[where].shape or moved.max() > CLEAR:
            path = directory / f"{stem}-{slip}-{head}.yaml"
            texts[path] = slipped
            made.append(Case(exercise, slip, path, where))
    for case in made:
        found = texts[case.path]
        case.path.write_text(exercise.sheet + answers_yaml(work) + backward_yaml(exercise.template, found), "utf-8")
    return made


def grade(all_cases: Sequence[Case]) -> int:
    """One `check --format json` over every file; each case gets its file's object. Returns check's exit code."""
    command = [sys.executable, "-m", "attncli", "check", "--format", "json", *(str(c.path) for c in all_cases)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    results = {obj["file"]: obj for obj in map(json.loads, done.stdout.splitlines()) if "file" in obj}
    for case in all_cases:
        case.result = results.get(str(case.path), {"error": done.stderr[-300:], "steps": []})
    return done.returncode


GOOD, FALSE_ALARM, MISSED, UNNAMED, MISNAMED = "good", "false_alarm", "missed", "unnamed", "misnamed"


def verdict(case: Case, key: Callable[[dict], tuple] = lambda s: (s["step"], s["head"])) -> tuple[str, str]:
    """How check did on the case: GOOD, or what went wrong and where (`key`: a step's label, as `case.where`).
    A careful student's step not right (carried too) is a false alarm; a slip's later steps may be carried."""
    steps = {key(s): s for s in case.result.get("steps", [])}
    if not steps:
        return FALSE_ALARM, case.result.get("error", "nothing graded")
    wrong = [key for key, s in steps.items() if s["status"] not in ("right", "carried") and key != case.where]
    if wrong:
        return FALSE_ALARM, f"{wrong[0]}: {steps[wrong[0]]['status']} {steps[wrong[0]]['diagnosis']}"
    if case.where is None:  # a careful student: carried (↷) too is a wrong verdict (half the points, say)
        carried = [key for key, s in steps.items() if s["status"] != "right"]
        return (FALSE_ALARM, f"{carried[0]}: {steps[carried[0]]['status']}") if carried else (GOOD, "")
    made = steps.get(case.where)
    if made is None or made["status"] != "wrong":
        return MISSED, f"{case.where}: {made and made['status']}"
    if case.slip not in made["diagnosis"]:
        return (MISNAMED if made["diagnosis"] else UNNAMED), f"{case.where}: {made['diagnosis']}"
    return GOOD, ""


def figures(all_cases: Sequence[Case], judge: Callable[[Case], tuple[str, str]] = verdict) -> dict[str, Counter]:
    """Per row (careful, each slip): how many cases ended each way."""
    table: dict[str, Counter] = {}
    for case in all_cases:
        table.setdefault(case.slip or "careful", Counter())[judge(case)[0]] += 1
    return table


def build(directory: Path, count: int) -> tuple[list[Case], int]:
    made = [c for e in exercises(directory / "sets", count) for c in cases(e, directory)]
    return made, grade(made)


def main(build: Callable[[Path, int], tuple[list, int]], judge: Callable = verdict, name: Callable = str) -> None:
    """Prints the figures of `build` over `python -m ... N` exercises of each set, and each case not GOOD."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        built, _ = build(Path(folder), int(sys.argv[1]) if len(sys.argv) > 1 else 3)
        for row, counts in figures(built, judge).items():
            print(
                f"{row:28} {sum(counts.values()):4} cases  " + "  ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            )
        for case in built:
            if judge(case)[0] != GOOD or "-v" in sys.argv:
                print(name(case), case.slip, *judge(case), sorted({s["status"] for s in case.result["steps"]}))


if __name__ == "__main__":
    main(build, name=lambda case: case.exercise.id)
