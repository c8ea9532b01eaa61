"""The numpy core against the plain-Python reference, and the laws of attention, on random problems.

Problems are built directly as `Problem` records (the parser has its own tests) and,
in one property, through YAML text, so both routes meet the same reference.
"""

from __future__ import annotations

import json
import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from attncli import core, pipeline
from attncli.problem import Head, MaskRule, Problem, Projection, Score
from attncli.render import human, json_doc
from attncli.render.layout import fit, to_text, width_of
from tests import reference

# Per test, not a global profile, so other test modules keep their own settings.
SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])

KINDS = ("scaled_dot", "dot", "cosine", "general", "additive")
numbers = st.floats(-4, 4, allow_nan=False, allow_infinity=False)


def matrix(draw: st.DrawFn, rows: int, columns: int, elements: st.SearchStrategy = numbers) -> np.ndarray:
    row = st.lists(elements, min_size=columns, max_size=columns)
    return np.array(draw(st.lists(row, min_size=rows, max_size=rows)))


@st.composite
def masks(draw: st.DrawFn, rows: int, columns: int) -> np.ndarray:
    """A boolean (rows, columns) mask that leaves every query at least one key, as the parser guarantees."""
    mask = matrix(draw, rows, columns, st.booleans())
    for i in range(rows):
        if not mask[i].any():
            mask[i, draw(st.integers(0, columns - 1))] = True
    return mask


@st.composite
def heads(draw: st.DrawFn, length: int, size: int, kinds: tuple[str, ...] = KINDS, plain: bool = False) -> Head:
    """One head over L queries and S keys: vectors, projections or given scores, any score function.

    `plain` keeps to what a YAML file spells as lists of numbers: no given scores, no projections.
    """
    d_v = draw(st.integers(1, 3))
    values = matrix(draw, size, d_v)
    if not plain and draw(st.booleans()) and draw(st.booleans()):
        return Head("given", Score("given", 1.0), None, None, values, scores=matrix(draw, length, size))
    kind = draw(st.sampled_from(kinds))
    d_k = draw(st.integers(1, 4))
    d_q = draw(st.integers(1, 4)) if kind in ("general", "additive") else d_k
    if not plain and draw(st.booleans()):
        d = draw(st.integers(1, 3))
        queries = Projection(matrix(draw, length, d), matrix(draw, d, d_q))
        keys = Projection(matrix(draw, size, d), matrix(draw, d, d_k))
    else:
        queries, keys = matrix(draw, length, d_q), matrix(draw, size, d_k)
    scale = reference.default_scale(kind, d_k) if draw(st.booleans()) else draw(st.floats(-2, 2))
    extra: dict[str, np.ndarray] = {}
    if kind == "general":
        extra["w"] = matrix(draw, d_q, d_k)
    if kind == "additive":
        d_a = draw(st.integers(1, 3))
        extra = {"w_query": matrix(draw, d_q, d_a), "w_key": matrix(draw, d_k, d_a), "v": matrix(draw, 1, d_a)[0]}
    return Head(kind, Score(kind, scale, **extra), queries, keys, values)


@st.composite
def problems(draw: st.DrawFn, max_heads: int = 3, kinds: tuple[str, ...] = KINDS, plain: bool = False) -> Problem:
    """Self- or cross-attention, L ≠ S allowed, any mask, one or several heads, with or without W_O."""
    size = draw(st.integers(1, 5))
    cross = draw(st.booleans())
    length = draw(st.integers(1, 4)) if cross else size
    tokens = tuple(f"k{j}" for j in range(size))
    query_tokens = tuple(f"q{i}" for i in range(length)) if cross else tokens
    head_list = tuple(draw(st.lists(heads(length, size, kinds, plain), min_size=1, max_size=max_heads)))
    with_w_o = not plain and draw(st.booleans())
    w_o = matrix(draw, sum(h.values.shape[1] for h in head_list), draw(st.integers(1, 3))) if with_w_o else None
    mask = draw(masks(length, size))
    return Problem(tokens, query_tokens, cross, head_list, mask, MaskRule("matrix"), w_o=w_o)


def as_lists(operand: np.ndarray | Projection | None) -> list[list[float]] | None:
    """A matrix as lists, projected by the reference when given as X·W."""
    if operand is None:
        return None
    if isinstance(operand, Projection):
        return reference.matmul(operand.x.tolist(), operand.w.tolist())
    return operand.tolist()


def reference_head(head: Head, mask: np.ndarray) -> reference.HeadResult:
    score = head.score
    extra = {}
    if score.kind == "general":
        extra["w"] = score.w.tolist()
    if score.kind == "additive":
        extra = {"w_query": score.w_query.tolist(), "w_key": score.w_key.tolist(), "v": score.v.tolist()}
    return reference.head(
        as_lists(head.queries),
        as_lists(head.keys),
        as_lists(head.values),
        kind=score.kind,
        scale=score.scale,
        mask=mask.tolist(),
        scores=None if head.scores is None else head.scores.tolist(),
        **extra,
    )


def assert_close(got: np.ndarray, want: list, tolerance: float = 1e-9) -> None:
    np.testing.assert_allclose(got, np.array(want, dtype=float), rtol=tolerance, atol=tolerance)


@SETTINGS
@given(problems())
def test_core_matches_the_reference(p: Problem) -> None:
    steps = core.compute(p)
    outputs = []
    for head, got in zip(p.heads, steps.heads):
        want = reference_head(head, p.mask)
        assert_close(got.dot, want.raw)
        assert_close(got.weights, want.weights)
        assert_close(got.output, want.output, 1e-8)
        outputs.append(want.output)
    concat, output = reference.multi_head(outputs, None if p.w_o is None else p.w_o.tolist())
    assert_close(steps.output, output, 1e-8)
    if len(p.heads) > 1 or p.w_o is not None:
        assert_close(steps.concat, concat, 1e-8)
    else:
        assert steps.concat is None
    assert steps.output.shape[0] == len(p.query_tokens)


@SETTINGS
@given(problems())
def test_weights_sum_to_one_and_masked_keys_get_exactly_zero(p: Problem) -> None:
    for head in core.compute(p).heads:
        np.testing.assert_allclose(head.weights.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        assert (head.weights[~p.mask] == 0.0).all()
        assert np.isneginf(head.scores[~p.mask]).all()
        assert (head.exp[~p.mask] == 0.0).all()
        assert (head.weights >= 0).all()
        # the displayed exponentials divided by their sum are the weights
        np.testing.assert_allclose(head.exp / head.exp.sum(axis=1, keepdims=True), head.weights, atol=1e-12)


def given_scores_problem(scores: np.ndarray, values: np.ndarray, mask: np.ndarray | None = None) -> Problem:
    length, size = scores.shape
    tokens = tuple(f"k{j}" for j in range(size))
    query_tokens = tuple(f"q{i}" for i in range(length))
    head = Head("given", Score("given", 1.0), None, None, values, scores=scores)
    mask = np.ones((length, size), dtype=bool) if mask is None else mask
    return Problem(tokens, query_tokens, True, (head,), mask)


@st.composite
def scored(draw: st.DrawFn, elements: st.SearchStrategy[float] = numbers) -> tuple[np.ndarray, np.ndarray]:
    length, size = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    return matrix(draw, length, size, elements), matrix(draw, size, draw(st.integers(1, 3)))


@SETTINGS
@given(scored(), st.data())
def test_adding_a_constant_to_a_row_of_scores_changes_nothing(case: tuple, data: st.DataObject) -> None:
    scores, values = case
    row = data.draw(st.integers(0, scores.shape[0] - 1))
    constant = data.draw(st.floats(-50, 50))
    moved = scores.copy()
    moved[row] += constant
    before = core.compute(given_scores_problem(scores, values))
    after = core.compute(given_scores_problem(moved, values))
    np.testing.assert_allclose(after.heads[0].weights, before.heads[0].weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(after.output, before.output, rtol=0, atol=1e-11)


@SETTINGS
@given(problems(max_heads=2), st.randoms(use_true_random=False))
def test_permuting_keys_and_values_together_leaves_the_output_unchanged(p: Problem, rng: random.Random) -> None:
    order = list(range(len(p.tokens)))
    rng.shuffle(order)

    def permuted(operand: np.ndarray | Projection | None) -> np.ndarray | Projection | None:
        if operand is None:
            return None
        if isinstance(operand, Projection):
            return Projection(operand.x[order], operand.w)
        return operand[order]

    heads = tuple(
        Head(h.name, h.score, h.queries, permuted(h.keys), permuted(h.values), permuted_columns(h.scores, order))
        for h in p.heads
    )
    shuffled = Problem(tuple(p.tokens[j] for j in order), p.query_tokens, True, heads, p.mask[:, order], w_o=p.w_o)
    before, after = core.compute(p), core.compute(shuffled)
    np.testing.assert_allclose(after.output, before.output, rtol=1e-9, atol=1e-9)
    for a, b in zip(after.heads, before.heads):
        np.testing.assert_allclose(a.weights, b.weights[:, order], rtol=1e-9, atol=1e-12)


def permuted_columns(scores: np.ndarray | None, order: list[int]) -> np.ndarray | None:
    return None if scores is None else scores[:, order]


@SETTINGS
@given(scored(st.floats(-1e4, 1e4)), st.floats(-1e4, 1e4))
def test_scores_of_ten_thousand_do_not_overflow(case: tuple, offset: float) -> None:
    scores, values = case
    scores = scores + offset  # whole rows far from zero, where e^s alone is 0 or ∞
    steps = core.compute(given_scores_problem(scores, values))
    head = steps.heads[0]
    assert np.isfinite(head.weights).all() and np.isfinite(head.exp).all() and np.isfinite(steps.output).all()
    np.testing.assert_allclose(head.weights.sum(axis=1), 1.0, atol=1e-12)
    want = [reference.softmax(row, [True] * len(row)) for row in scores.tolist()]
    np.testing.assert_allclose(head.weights, want, atol=1e-12)
    shifted = head.shift != 0
    assert (head.exp.max(axis=1)[shifted] == 1.0).all()  # a shifted row shows e^(s − max s)
    assert np.isfinite(head.exp.sum(axis=1)).all() and (head.exp.sum(axis=1) > 0).all()


def test_cosine_clamps_each_norm_like_torch() -> None:
    """Tiny vectors keep their true cosine (each norm is clamped to 1e-8, not their product); zero gives 0."""
    queries = np.array([[1e-5, 0.0], [0.0, 0.0]])
    keys = np.array([[2e-5, 0.0], [1e-5, 1e-5]])
    raw, _ = core.compatibility(Score("cosine", 1.0), queries, keys)
    want = [[reference.compatibility("cosine", q, k) for k in keys.tolist()] for q in queries.tolist()]
    np.testing.assert_allclose(raw, want, rtol=1e-12, atol=0)
    np.testing.assert_allclose(raw, [[1.0, 1 / np.sqrt(2)], [0.0, 0.0]], rtol=1e-12, atol=0)


def test_displayed_exponentials_stay_finite_in_float32() -> None:
    """e^100 overflows float32 (its largest exponent is about 88), so the display must shift sooner."""
    scores = np.array([[100.0, 0.0], [-100.0, -101.0]], dtype=np.float32)
    head = Head("given", Score("given", 1.0), None, None, np.array([[1.0], [2.0]], dtype=np.float32), scores=scores)
    steps = core.compute(Problem(("a", "b"), ("x", "y"), True, (head,), np.ones((2, 2), dtype=bool)))
    exp = steps.heads[0].exp
    assert np.isfinite(exp).all() and (exp.sum(axis=1) > 0).all()
    np.testing.assert_allclose(exp / exp.sum(axis=1, keepdims=True), steps.heads[0].weights, rtol=1e-6)


def test_a_single_huge_score_takes_all_the_weight() -> None:
    steps = core.compute(given_scores_problem(np.array([[1e4, 0.0, -1e4]]), np.array([[1.0], [2.0], [3.0]])))
    assert steps.heads[0].weights.tolist() == [[1.0, 0.0, 0.0]]
    assert steps.output.tolist() == [[1.0]]


@SETTINGS
@given(problems())
def test_the_json_document_is_strict_json_with_the_core_numbers(p: Problem) -> None:
    steps = core.compute(p)
    doc = json.loads(json_doc.render(steps))
    assert doc["output"] == steps.output.tolist()
    for got, head in zip(doc["heads"], steps.heads):
        assert got["weights"] == head.weights.tolist()
        for row, allowed in zip(got["scores"], p.mask):
            assert [s is None for s in row] == [not a for a in allowed]


def _yaml_number(value: float) -> str:
    return repr(float(value))


def _yaml_rows(array: np.ndarray) -> str:
    return "[" + ", ".join("[" + ", ".join(_yaml_number(x) for x in row) + "]" for row in array) + "]"


@SETTINGS
@given(problems(max_heads=1, kinds=("scaled_dot", "dot", "cosine"), plain=True))
def test_the_yaml_route_gives_the_same_result(p: Problem) -> None:
    (head,) = p.heads
    lines = [
        f"tokens: [{', '.join(p.tokens)}]",
        f"query_tokens: [{', '.join(p.query_tokens)}]",
        f"queries: {_yaml_rows(head.queries)}",
        f"keys: {_yaml_rows(head.keys)}",
        f"values: {_yaml_rows(head.values)}",
        f"mask: {_yaml_rows(p.mask.astype(int))}",
        f"score: {{type: {head.score.kind}, scale: {_yaml_number(head.score.scale)}}}",
    ]
    parsed = pipeline.load(text="\n".join(lines) + "\n", name="random.yaml")
    assert parsed.cross == p.cross
    direct, via_yaml = core.compute(p), core.compute(parsed)
    assert via_yaml.heads[0].weights.tolist() == direct.heads[0].weights.tolist()
    assert via_yaml.output.tolist() == direct.output.tolist()


@settings(SETTINGS, max_examples=25)
@given(problems(max_heads=2), st.integers(20, 200), st.integers(0, 8))
def test_human_output_never_cuts_a_number(p: Problem, width: int, precision: int) -> None:
    """At any width the text holds every weight in full (a narrower layout, never '0.6…'), within the width;
    only the heatmap may round its cells or show bars alone to fit, and then it says so."""
    steps = core.compute(p)
    text = to_text(fit(human.render(steps, human.View(precision=precision), width), width))
    assert "…" not in text
    assert max(width_of(row) for row in text.splitlines()) <= width
    words = set(text.split())
    flat = " ".join(words)
    said = " ".join(text.split())
    if "Bars only, to fit the screen; --format json gives every weight." in said:
        return
    rounded = "Cells rounded to 2 decimals to fit the screen" in said
    for head in steps.heads:
        for i, j in zip(*np.nonzero(p.mask)):
            shown = f"{head.weights[i, j]:.{precision}f}"
            compact = f"{head.weights[i, j]:.2f}"
            assert shown in flat or (rounded and compact in flat), (shown, text)
