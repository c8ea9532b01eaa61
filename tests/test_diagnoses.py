"""Every classic mistake is named at the step where it is made, and never one that was not made.

Each mistake is replayed here in plain numpy, independently of the grader: a student works a
generated exercise carrying 4 decimals, makes the slip at one step, and carries their own rounded
numbers on from there. Nothing is taken from expected output.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from attncli import core, exercises, grading, yamldoc
from attncli.i18n import en, es
from attncli.parsing import parse
from attncli.parsing.answers import Answer, Answers, Entry
from attncli.problem import Projection
from tests.paths import SAMPLES

Key = tuple[str, int | None]
Matrix = np.ndarray


def r4(a: Matrix) -> Matrix:
    return np.round(a, 4)


@dataclass(frozen=True)
class Slip:
    """Where a student goes wrong: each field replaces one piece of the right calculation."""

    code: str
    step: str  # the step where the mistake shows first
    options: exercises.Options = field(default_factory=exercises.Options)
    compat: Callable[[Matrix, Matrix, Matrix], Matrix] | None = None  # (q, k, v) → dot
    scale: Callable[[float, int], float] | None = None  # (true scale, d_k) → the factor used
    mask: Callable[[Matrix], Matrix] | None = None
    softmax: Callable[[Matrix], Matrix] | None = None  # scores (−inf masked) → weights
    mix: Callable[[Matrix, Matrix, Matrix], Matrix] | None = None  # (weights, values, keys) → output
    weights_of: int | None = None  # head 2 mixes with this head's weights
    concat: Callable[[list[Matrix]], Matrix] | None = None
    final: Callable[[Matrix, Matrix], Matrix] | None = None  # (concat, w_o) → final
    answered: tuple[str, ...] | None = None  # the steps the student writes (None: every one)
    decimals: dict[str, int] = field(default_factory=dict)  # steps the student rounds to fewer decimals


def softmax(scores: Matrix) -> Matrix:
    e = r4(np.exp(scores))
    return e / e.sum(axis=1, keepdims=True)


def work(steps: core.Steps, slip: Slip | None) -> dict[Key, Matrix]:
    """Every step as the student writes it, each from their own rounded numbers of the step before."""
    s = slip or Slip("", "")
    problem = steps.problem

    def keep(step: str, a: Matrix) -> Matrix:
        return np.round(a, s.decimals.get(step, 4))

    written: dict[Key, Matrix] = {}
    weights, vectors = [], []
    mask = s.mask(problem.mask) if s.mask else problem.mask
    for h, head in enumerate(problem.heads):
        v = {}
        for name, operand in (("queries", head.queries), ("keys", head.keys), ("values", head.values)):
            if isinstance(operand, Projection):
                v[name] = written[(name, h)] = keep(name, operand.x @ operand.w)
            elif operand is not None:
                v[name] = r4(operand)
        vectors.append(v)
        if head.scores is not None:
            dot = head.scores
        else:
            q, k = v["queries"], v["keys"]
            if s.compat:
                dot = s.compat(q, k, v["values"])
            elif head.score.kind == "cosine":
                dot = (q @ k.T) / np.outer(r4(np.linalg.norm(q, axis=1)), r4(np.linalg.norm(k, axis=1)))
            else:
                dot = q @ k.T
            dot = written[("dot", h)] = keep("dot", dot)
        d_k = steps.heads[h].keys.shape[1] if steps.heads[h].keys is not None else 1
        factor = s.scale(head.score.scale, d_k) if s.scale else head.score.scale
        scores = written[("scores", h)] = np.where(mask, keep("scores", dot * r4(np.array(factor))), -np.inf)
        with np.errstate(invalid="ignore", divide="ignore"):
            w = written[("weights", h)] = keep("weights", s.softmax(scores) if s.softmax else softmax(scores))
        weights.append(w)
    outputs = []
    for h, v in enumerate(vectors):
        w = weights[s.weights_of] if s.weights_of is not None and h == len(vectors) - 1 else weights[h]
        out = s.mix(w, v["values"], v.get("keys")) if s.mix else w @ v["values"]
        outputs.append(keep("output", out))
        written[("output", h)] = outputs[-1]
    if problem.w_o is not None or len(outputs) > 1:
        concat = written[("concat", None)] = s.concat(outputs) if s.concat else np.concatenate(outputs, axis=1)
        if s.final:
            written[("final", None)] = r4(s.final(concat, problem.w_o))
        elif problem.w_o is not None:
            written[("final", None)] = r4(concat @ problem.w_o)
    if s.answered is not None:
        written = {key: m for key, m in written.items() if key[0] in s.answered}
    return written


def entry(value: float, masked: bool, decimals: int = 4) -> Entry:
    if masked or value == -math.inf or math.isnan(value):
        return Entry("masked", None, None)
    return Entry(f"{value:.{decimals}f}", float(f"{value:.{decimals}f}"), decimals)


def as_answers(
    steps: core.Steps, written: dict[Key, Matrix], carry: int | None = None, decimals: dict[str, int] | None = None
) -> Answers:
    """What the parser would read from a file with these numbers (a shape that fits neither way kept as written)."""
    problem = steps.problem
    found = []
    for (step, head), matrix in written.items():
        truth = true_values(steps)[(step, head)]
        rows = problem.tokens if step in ("keys", "values") else problem.query_tokens
        columns = (
            problem.tokens if step in ("dot", "scores", "weights") else tuple(str(j + 1) for j in range(truth.shape[1]))
        )
        maskable = step in ("dot", "scores", "weights")
        cells = tuple(
            tuple(
                entry(matrix[i, j], maskable and math.isinf(matrix[i, j]), (decimals or {}).get(step, 4))
                for j in range(matrix.shape[1])
            )
            for i in range(matrix.shape[0])
        )
        if matrix.shape == truth.shape:
            found.append(Answer(step, head, rows, columns, cells))
        else:
            empty = tuple(tuple(None for _ in columns) for _ in rows)
            found.append(Answer(step, head, rows, columns, empty, written=cells))
    return Answers(tuple(found), None, carry)


def true_values(steps: core.Steps) -> dict[Key, Matrix]:
    values: dict[Key, Matrix] = {}
    for h, head in enumerate(steps.heads):
        if head.queries is not None:
            values.update({("queries", h): head.queries, ("keys", h): head.keys, ("dot", h): head.dot})
        values.update({("values", h): head.values, ("scores", h): head.scores, ("weights", h): head.weights})
        values[("output", h)] = head.output
    if steps.concat is not None:
        values[("concat", None)] = steps.concat
        values[("final", None)] = steps.output
    return values


def exercise(options: exercises.Options, seed: int) -> core.Steps:
    return core.compute(parse(yamldoc.load(exercises.exercise(options, seed), "exercise.yaml")))


def differs(steps: core.Steps, slip: Slip, written: dict[Key, Matrix]) -> bool:
    """Whether the slip changes the step where it is made by more than rounding (else there is nothing to name)."""
    careful = work(steps, replace(slip, compat=None, scale=None, mask=None, softmax=None, mix=None, weights_of=None,
                                  concat=None, final=None, decimals={}))  # fmt: skip
    keys = [key for key in written if key[0] == slip.step]
    for key in keys:
        a, b = written[key], careful.get(key, true_values(steps)[key])
        if a.shape != b.shape:
            return True
        a, b = np.where(np.isfinite(a), a, 99.0), np.where(np.isfinite(b), b, 99.0)
        if np.nanmax(np.abs(a - b)) > 2e-3:
            return True
    return False


def causal(tokens: int = 3) -> exercises.Options:
    return exercises.Options(tokens=tokens, mask="causal")


def swap_columns(a: int, b: int) -> Callable[[Matrix, Matrix, Matrix], Matrix]:
    def compat(q: Matrix, k: Matrix, v: Matrix) -> Matrix:
        order = list(range(k.shape[0]))
        order[a], order[b] = b, a
        return q @ k[order].T  # key a's column computed with key b, and the other way round

    return compat


def no_exp(scores: Matrix) -> Matrix:
    """s/Σs. A row whose scores add up to nearly 0 (as in tests/replays/mistakes.py: below 0.5) is left out: there
    the scores' own rounding may move the sum to 0, and no bound can tell what s/Σs was meant to be."""
    kept = np.where(np.isinf(scores), 0.0, scores)
    total = kept.sum(axis=1, keepdims=True)
    assume(bool(np.all(np.abs(total) >= 0.5)))
    return kept / total


def wrong_sum(scores: Matrix) -> Matrix:
    e = r4(np.exp(scores))
    return e / (e.sum(axis=1, keepdims=True) + 1)  # a slip in adding up the e^s


TWO_HEADS = exercises.Options(heads=2)
SLIPS = [
    Slip("missing_scale", "scores", scale=lambda s, d: 1.0),
    Slip("wrong_scale", "scores", exercises.Options(d_k=3), scale=lambda s, d: 1 / d),
    Slip("wrong_scale", "scores", scale=lambda s, d: math.sqrt(d)),
    Slip("scale_not_applicable", "scores", exercises.Options(score="dot"), scale=lambda s, d: 1 / math.sqrt(d)),
    Slip("no_exp", "weights", softmax=no_exp),
    Slip("unnormalized", "weights", softmax=lambda s: np.exp(s)),
    Slip("not_normalized", "weights", softmax=wrong_sum),
    Slip("wrong_axis", "weights", exercises.Options(tokens=3), softmax=lambda s: softmax(s.T).T),
    Slip("mask_ignored", "scores", causal(), mask=lambda m: np.ones_like(m)),
    Slip("mask_inverted", "scores", causal(), mask=lambda m: m.T),
    Slip("causal_shifted", "scores", causal(4), mask=lambda m: np.tri(len(m), k=1, dtype=bool)),
    Slip("causal_shifted", "scores", causal(4), mask=lambda m: np.tri(len(m), k=-1, dtype=bool), answered=("scores",)),
    Slip("not_transposed", "dot", exercises.Options(tokens=2), compat=lambda q, k, v: q @ k),
    Slip("values_as_keys", "dot", compat=lambda q, k, v: q @ v.T),
    Slip("keys_as_values", "output", mix=lambda w, v, k: w @ k),
    Slip("wrong_row", "dot", compat=swap_columns(0, 1)),
    Slip("wrong_row", "output", mix=lambda w, v, k: w @ v[[1, 0, *range(2, len(v))]]),
    Slip("cosine_no_norm", "dot", exercises.Options(score="cosine"), compat=lambda q, k, v: q @ k.T),
    Slip("other_head", "output", TWO_HEADS, weights_of=0),
    Slip("concat_order", "concat", TWO_HEADS, concat=lambda outputs: np.concatenate(outputs[::-1], axis=1)),
    Slip("forgot_w_o", "final", TWO_HEADS, final=lambda concat, w_o: concat),
    Slip("rounded_early", "output", decimals={"weights": 2}),
    Slip("rounded_early", "output", exercises.Options(projections=True), decimals={"weights": 1}),
    Slip("transposed", "dot", exercises.Options(tokens=3, d_k=2), compat=lambda q, k, v: (q @ k.T).T),
]
PAIRS = [
    Slip(
        "missing_scale+unnormalized", "weights", scale=lambda s, d: 1.0, softmax=np.exp, answered=("weights", "output")
    ),
    Slip("missing_scale+mask_ignored", "scores", causal(), scale=lambda s, d: 1.0, mask=lambda m: np.ones_like(m)),
    Slip(
        "mask_ignored+wrong_axis",
        "weights",
        causal(),
        mask=lambda m: np.ones_like(m),
        softmax=lambda s: softmax(s.T).T,
        answered=("weights",),
    ),
]


def grade(
    steps: core.Steps, written: dict[Key, Matrix], decimals: dict[str, int] | None = None, **options: object
) -> grading.Report:
    return grading.grade(steps, as_answers(steps, written, decimals=decimals), **options)  # type: ignore[arg-type]


def check_slip(slip: Slip, seed: int) -> None:
    steps = exercise(slip.options, seed)
    written = work(steps, slip)
    assume(differs(steps, slip, written))
    made = [m for key, m in written.items() if key[0] == slip.step]
    assume(not any(np.isnan(m).any() or np.isposinf(m).any() or (np.abs(m[np.isfinite(m)]) > 1e6).any() for m in made))
    report = grade(steps, written, slip.decimals)
    first = report.first_mistake
    assert first is not None and first.step == slip.step, [(s.step, s.status, s.diagnosis) for s in report.steps]
    for code in slip.code.split("+"):
        assert code in first.diagnosis, (slip.code, first.diagnosis)


@pytest.mark.parametrize("slip", [*SLIPS, *PAIRS], ids=lambda slip: f"{slip.code}-{slip.step}")
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(seed=st.integers(0, 10**6))
def test_a_replayed_mistake_is_named_where_it_is_made(slip: Slip, seed: int) -> None:
    check_slip(slip, seed)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), options=st.sampled_from([s.options for s in SLIPS]))
def test_a_careful_student_gets_no_diagnosis(seed: int, options: exercises.Options) -> None:
    steps = exercise(options, seed)
    report = grade(steps, work(steps, None))
    assert report.ok and all(step.diagnosis == () for step in report.steps)


def test_additive_without_tanh_is_named() -> None:
    """samples/additive.yaml worked without tanh: v·(q·W_query + k·W_key)."""
    document = yamldoc.read(str(SAMPLES / "additive.yaml"))
    steps = core.compute(parse(document))
    head = steps.problem.heads[0]
    score = head.score
    q, k = head.queries, head.keys
    hidden = r4(q @ score.w_query)[:, None, :] + r4(k @ score.w_key)[None, :, :]
    dot = r4(hidden @ score.v)
    report = grade(steps, {("dot", 0): dot, ("scores", 0): dot})
    assert report.steps[0].diagnosis == ("additive_no_tanh",)
    assert report.steps[1].status == grading.CARRIED


@pytest.mark.parametrize("sample", ["bias.yaml", "alibi.yaml"])
def test_a_forgotten_bias_is_named(sample: str) -> None:
    """samples/bias.yaml (b = [−1, 0, 1]) and samples/alibi.yaml (−m_h·|i − j|, each head) worked without the
    bias: q·kᵀ/√d_k written to 4 decimals, and the weights carried on from those scores."""
    steps = core.compute(parse(yamldoc.read(str(SAMPLES / sample))))
    written: dict[Key, Matrix] = {}
    for h, head in enumerate(steps.problem.heads):
        dot = written[("dot", h)] = r4(head.queries @ head.keys.T)
        scores = written[("scores", h)] = np.where(
            steps.problem.mask, r4(dot * r4(np.array(head.score.scale))), -np.inf
        )
        written[("weights", h)] = r4(softmax(scores))
    report = grade(steps, written)
    assert [(s.step, s.head, s.diagnosis) for s in report.wrong_steps] == [
        ("scores", h, ("bias_forgotten",)) for h in range(len(steps.heads))
    ]
    assert {s.status for s in report.steps if s.step == "weights"} == {grading.CARRIED}


def test_forgot_w_o_is_named_from_a_final_as_wide_as_the_concatenation() -> None:
    steps = exercise(TWO_HEADS, 3)
    written = work(steps, None)
    written[("final", None)] = written[("concat", None)]
    report = grade(steps, written)
    assert [(s.step, s.status, s.diagnosis) for s in report.wrong_steps] == [("final", "wrong", ("forgot_w_o",))]
    assert all(s.status == grading.RIGHT for s in report.steps if s.step != "final")


def test_a_step_that_fits_no_shape_is_wrong_and_the_others_are_graded() -> None:
    steps = exercise(exercises.Options(), 1)
    written = work(steps, None)
    written[("weights", 0)] = written[("weights", 0)][:, :2]  # a column left out
    report = grade(steps, written)
    assert [s.step for s in report.wrong_steps] == ["weights"] and report.wrong_steps[0].diagnosis == ()
    assert {s.step: s.status for s in report.steps} == {
        "dot": "right", "scores": "right", "weights": "wrong", "output": "right"
    }  # fmt: skip


def test_too_few_decimals() -> None:
    steps = exercise(exercises.Options(), 2)
    written = {key: m for key, m in work(steps, None).items() if key[0] == "weights"}
    answer = as_answers(steps, written).steps[0]
    short = tuple(
        tuple(Entry(f"{e.value:.2f}", round(e.value, 2), 2) if e.value else e for e in row) for row in answer.cells
    )
    report = grading.grade(steps, Answers((replace(answer, cells=short),), None), min_decimals=3)
    step = report.steps[0]
    assert step.status == grading.WRONG and "too_few_decimals" in step.diagnosis
    assert {c.status for c in step.cells if c.entry and c.entry.value} == {grading.TOO_FEW_DECIMALS}
    assert grading.grade(steps, Answers((replace(answer, cells=short),), None)).ok  # without min_decimals: right


def test_a_replay_that_changes_nothing_is_not_named() -> None:
    """Without a mask, ignoring it changes nothing: wrong scores are not called mask_ignored."""
    steps = exercise(exercises.Options(), 4)
    written = work(steps, None)
    written[("scores", 0)] = written[("scores", 0)] + 0.5
    report = grade(steps, {("scores", 0): written[("scores", 0)]})
    assert report.steps[0].status == grading.WRONG and report.steps[0].diagnosis == ()


def test_every_code_has_a_diagnosis_and_a_hint_in_both_languages() -> None:
    for code in grading.CODES:
        for catalogue in (en.MESSAGES, es.MESSAGES):
            assert catalogue[f"check.diagnosis.{code}"] and catalogue[f"check.hint.{code}"]
    assert (
        "√d_k" in en.MESSAGES["check.hint.wrong_scale"]
        and "multiplied by √d_k" in en.MESSAGES["check.hint.wrong_scale"]
    )
    assert "multiplicadas por √d_k" in es.MESSAGES["check.hint.wrong_scale"]


def test_every_code_is_named_by_a_replayed_mistake() -> None:
    named = {code for slip in [*SLIPS, *PAIRS] for code in slip.code.split("+")}
    replayed_in_positions = {"causal_upper_left", "rope_reversed", "rope_pairing"}  # tests/test_positions.py
    alone = {"additive_no_tanh", "bias_forgotten", "too_few_decimals"}  # each replayed by a test of its own here
    in_depth = {"bias_after_softmax", "alibi_sign_flipped", "alibi_wrong_slope", "rope_forgotten"}  # test_depth.py
    in_depth |= {"rope_positions_shifted", "sinusoidal_from_one", "sinusoidal_sin_cos_swapped", "gqa_kv_tiled"}
    assert named | alone | replayed_in_positions | in_depth == set(grading.CODES)
