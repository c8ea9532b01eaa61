"""Issue 25: today's attention graded as deeply as the article's: every new answer field carried, every new slip named.

Each student here works in plain numpy (never attncli's arithmetic), writes every number to 4 decimals and
carries their own rounded numbers on, as a person does: e^s, Σ e^s, RoPE's turned vectors, x + PE, s + b,
a norm's mean and root are written down like any other step. A careful student must pass; a student who makes
one of the new slips must be wrong at the step where it shows, with its code named there, and every later step
they work right from their own numbers carried (↷), never wrong.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from attncli.grading import CARRIED, RIGHT, WRONG, Report
from attncli.grading.submissions import Options, grade_file

Matrix = np.ndarray
Head = dict[str, Matrix]  # one head's steps as written, by field


def r4(a: Matrix | float) -> Matrix:
    return np.round(np.asarray(a, dtype=float), 4) + 0.0


def text(a: Matrix) -> str:
    rows = np.atleast_2d(a)
    return "[" + ", ".join("[" + ", ".join(f"{x:.4f}" for x in row) + "]" for row in rows) + "]"


def graded(tmp_path: Path, problem: str, answers: str) -> Report:
    """The file of `problem` and `answers` checked as `attncli check` does (its own problem, default options)."""
    path = tmp_path / "homework.yaml"
    path.write_text(problem + answers, encoding="utf-8")
    result = grade_file(str(path), None, Options(), str)
    assert result.report is not None, result.error
    return result.report


def answers_of(heads: list[Head], shared: dict[str, Matrix] | None = None) -> str:
    """`answers:` with each head's steps (under `heads:` when there are several) and the shared ones."""
    lines = ["answers:"]
    if len(heads) == 1:
        lines += [f"  {name}: {text(m)}" for name, m in heads[0].items()]
    else:
        lines.append("  heads:")
        for head in heads:
            items = [f"{name}: {text(m)}" for name, m in head.items()]
            lines += [f"    - {items[0]}", *(f"      {item}" for item in items[1:])]
    lines += [f"  {name}: {text(m)}" for name, m in (shared or {}).items()]
    return "\n".join(lines) + "\n"


def softmax_steps(biased: Matrix, values: Matrix) -> Head:
    """e^s, Σ e^s, the weights and the output as a student writes them, each from the numbers written before."""
    e = r4(np.exp(biased))
    sums = e.sum(axis=1, keepdims=True)  # a sum of 4-decimal numbers: on their grid
    weights = r4(e / sums)
    return {"exp": e, "sums": sums, "weights": weights, "output": r4(weights @ values)}


def statuses(report: Report) -> dict[tuple[str, int | None], tuple[str, tuple[str, ...]]]:
    return {(s.step, s.head): (s.status, s.diagnosis) for s in report.steps}


def assert_named_then_carried(report: Report, code: str, at: list[tuple[str, int | None]]) -> None:
    """Wrong exactly at `at`, each naming `code`; every other step right or carried."""
    found = statuses(report)
    wrong = [key for key, (status, _) in found.items() if status == WRONG]
    assert wrong == at, found
    for key in at:
        assert code in found[key][1], (key, found[key])
    assert {status for key, (status, _) in found.items() if key not in at} <= {RIGHT, CARRIED}, found


# --- ALiBi and biases --------------------------------------------------------------------------------

ALIBI = """tokens: [a, b, c, d]
heads:
  - queries: [[1, 0], [0, 1], [1, 1], [2, -1]]
    keys: [[1, 1], [2, 0], [0, 1], [1, -1]]
  - queries: [[0, 2], [1, -1], [2, 1], [1, 0]]
    keys: [[1, 0], [1, 2], [-1, 1], [0, 1]]
values: [[1, 0], [0, 1], [1, 1], [2, 0]]
w_o: [[1, 0], [0, 1], [1, 0], [0, 1]]
bias: alibi
"""
ALIBI_HEADS = [
    (np.array([[1, 0], [0, 1], [1, 1], [2, -1]]), np.array([[1, 1], [2, 0], [0, 1], [1, -1]])),
    (np.array([[0, 2], [1, -1], [2, 1], [1, 0]]), np.array([[1, 0], [1, 2], [-1, 1], [0, 1]])),
]
ALIBI_VALUES = np.array([[1, 0], [0, 1], [1, 1], [2, 0]], dtype=float)
ALIBI_W_O = np.array([[1, 0], [0, 1], [1, 0], [0, 1]], dtype=float)
SLOPES = (1 / 16, 1 / 256)  # Press et al., two heads: 2^(−8h/2), h = 1, 2
DISTANCE = np.abs(np.arange(4)[:, None] - np.arange(4)[None, :])


def alibi_student(bias_of: Callable[[int], Matrix], after_softmax: bool = False) -> str:
    """Each head: q·k, s = q·k·(1/√2 to 4 decimals), b, s + b, e^s, Σ, w, z; then concat and W_O."""
    heads, outputs = [], []
    for h, (q, k) in enumerate(ALIBI_HEADS):
        dot = r4(q @ k.T)
        scores = r4(dot * r4(1 / math.sqrt(2)))
        b = r4(bias_of(h))
        if after_softmax:  # b added to the weights: the student never writes s + b
            head = {"dot": dot, "scores": scores} | softmax_steps(scores, ALIBI_VALUES)
            head["weights"] = r4(head["weights"] + b)
            head["output"] = r4(head["weights"] @ ALIBI_VALUES)
            head = {name: head[name] for name in ("dot", "scores", "weights", "output")}
        else:
            biased = r4(scores + b)
            head = {"dot": dot, "scores": scores, "biased_scores": biased} | softmax_steps(biased, ALIBI_VALUES)
        heads.append(head)
        outputs.append(head["output"])
    concat = np.hstack(outputs)
    return answers_of(heads, {"concat": concat, "final": r4(concat @ ALIBI_W_O)})


def test_a_careful_alibi_student_who_writes_every_number_passes(tmp_path: Path) -> None:
    """b = −m_h·|i − j| written to 4 decimals (−0.0039 for 1/256), s + b, e^s and Σ e^s: all right."""
    report = graded(tmp_path, ALIBI, alibi_student(lambda h: -SLOPES[h] * DISTANCE))
    assert report.ok and {s.status for s in report.steps} == {RIGHT}, statuses(report)
    assert {s.step for s in report.steps} >= {"biased_scores", "exp", "sums"}


def test_alibi_with_its_sign_flipped_is_named_at_the_biased_scores(tmp_path: Path) -> None:
    report = graded(tmp_path, ALIBI, alibi_student(lambda h: SLOPES[h] * DISTANCE))
    assert_named_then_carried(report, "alibi_sign_flipped", [("biased_scores", 0), ("biased_scores", 1)])


def test_alibi_with_another_heads_slope_is_named_at_that_head(tmp_path: Path) -> None:
    report = graded(tmp_path, ALIBI, alibi_student(lambda h: -SLOPES[1] * DISTANCE))  # head 1 takes head 2's
    assert_named_then_carried(report, "alibi_wrong_slope", [("biased_scores", 0)])


def test_alibi_slopes_counted_from_zero_are_a_wrong_slope(tmp_path: Path) -> None:
    from_zero = (1.0, 1 / 16)  # 2^(−8h/2) for h = 0, 1
    report = graded(tmp_path, ALIBI, alibi_student(lambda h: -from_zero[h] * DISTANCE))
    assert_named_then_carried(report, "alibi_wrong_slope", [("biased_scores", 0), ("biased_scores", 1)])


def test_a_bias_added_after_the_softmax_is_named_at_the_weights(tmp_path: Path) -> None:
    """The scores written without b (read as s + b, as files did before biased_scores): bias_forgotten there,
    its single act; b added to the weights: bias_after_softmax, named where it shows, never at the scores."""
    report = graded(tmp_path, ALIBI, alibi_student(lambda h: -SLOPES[h] * DISTANCE, after_softmax=True))
    found = statuses(report)
    for h in range(2):
        assert found[("scores", h)] == (WRONG, ("bias_forgotten",)), found
        assert found[("weights", h)][0] == WRONG and "bias_after_softmax" in found[("weights", h)][1], found


# --- RoPE ----------------------------------------------------------------------------------------------

ROPE = """tokens: [a, b, c]
queries: [[1, 0, 1, 0], [0, 1, 1, 1], [1, 1, 0, -1]]
keys: [[1, 0, 0, 1], [0, 1, 1, 0], [1, -1, 1, 1]]
values: [[1, 0], [0, 1], [1, 1]]
positions: {type: rope, base: 100, style: half}
"""
ROPE_Q = np.array([[1, 0, 1, 0], [0, 1, 1, 1], [1, 1, 0, -1]], dtype=float)
ROPE_K = np.array([[1, 0, 0, 1], [0, 1, 1, 0], [1, -1, 1, 1]], dtype=float)
ROPE_V = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)


def turn(vectors: Matrix, at: Matrix) -> Matrix:
    """RoFormer's turn, half style: coordinate i with i + d/2, by position × 100^(−2i/d); cos and sin looked up to
    4 decimals, as a person does."""
    d = vectors.shape[1]
    angles = at[:, None] * 100.0 ** (-np.arange(0, d, 2) / d)[None, :]
    cos, sin = r4(np.cos(angles)), r4(np.sin(angles))
    a, b = vectors[:, : d // 2], vectors[:, d // 2 :]
    return r4(np.hstack([a * cos - b * sin, b * cos + a * sin]))


def rope_student(query_at: Matrix, key_at: Matrix, turned: bool = True) -> str:
    tq, tk = (turn(ROPE_Q, query_at), turn(ROPE_K, key_at)) if turned else (ROPE_Q, ROPE_K)
    dot = r4(tq @ tk.T)
    scores = r4(dot * 0.5)
    head = ({"turned_queries": tq, "turned_keys": tk} if turned else {}) | {"dot": dot, "scores": scores}
    return answers_of([head | softmax_steps(scores, ROPE_V)])


def test_a_careful_rope_student_who_writes_the_turned_vectors_passes(tmp_path: Path) -> None:
    report = graded(tmp_path, ROPE, rope_student(np.arange(3.0), np.arange(3.0)))
    assert report.ok and {s.status for s in report.steps} == {RIGHT}, statuses(report)


def test_rope_forgotten_is_named_at_the_dot_products(tmp_path: Path) -> None:
    report = graded(tmp_path, ROPE, rope_student(np.arange(3.0), np.arange(3.0), turned=False))
    assert_named_then_carried(report, "rope_forgotten", [("dot", 0)])


def test_rope_keys_counted_from_one_is_named_at_the_turned_keys(tmp_path: Path) -> None:
    report = graded(tmp_path, ROPE, rope_student(np.arange(3.0), np.arange(3.0) + 1))
    assert_named_then_carried(report, "rope_positions_shifted", [("turned_keys", 0)])


def test_rope_every_position_plus_one_is_named_where_the_turned_vectors_show_it(tmp_path: Path) -> None:
    """q_m·k_n depends on m − n only: the dot products are right from the student's turned vectors (carried)."""
    report = graded(tmp_path, ROPE, rope_student(np.arange(3.0) + 1, np.arange(3.0) + 1))
    assert_named_then_carried(report, "rope_positions_shifted", [("turned_queries", 0), ("turned_keys", 0)])


# --- Sinusoidal positions -------------------------------------------------------------------------------

SINUSOIDAL = """tokens: [a, b, c]
x: [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]]
w_q: [[1, 0], [0, 1], [1, 0], [0, 1]]
w_k: [[0, 1], [1, 0], [1, 1], [0, 0]]
w_v: [[1, 0], [0, 1], [0, 0], [1, 1]]
positions: sinusoidal
"""
SIN_X = np.array([[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0]], dtype=float)
SIN_W = [
    np.array([[1, 0], [0, 1], [1, 0], [0, 1]], dtype=float),
    np.array([[0, 1], [1, 0], [1, 1], [0, 0]], dtype=float),
    np.array([[1, 0], [0, 1], [0, 0], [1, 1]], dtype=float),
]


def encoding(at: Matrix, swapped: bool = False) -> Matrix:
    """Vaswani et al.'s PE, base 10000: sin in the even coordinates, cos in the odd (or the other way round)."""
    angles = at[:, None] / 10000.0 ** (np.arange(0, 4, 2) / 4)[None, :]
    first, second = (np.cos(angles), np.sin(angles)) if swapped else (np.sin(angles), np.cos(angles))
    pe = np.empty((len(at), 4))
    pe[:, 0::2], pe[:, 1::2] = first, second
    return r4(pe)


def sinusoidal_student(pe: Matrix) -> str:
    positioned = r4(SIN_X + pe)
    q, k, v = (r4(positioned @ w) for w in SIN_W)
    dot = r4(q @ k.T)
    scores = r4(dot * r4(1 / math.sqrt(2)))
    head = {"queries": q, "keys": k, "values": v, "dot": dot, "scores": scores} | softmax_steps(scores, v)
    return answers_of([head], {"positioned": positioned})


def test_a_careful_sinusoidal_student_who_writes_x_plus_pe_passes(tmp_path: Path) -> None:
    report = graded(tmp_path, SINUSOIDAL, sinusoidal_student(encoding(np.arange(3.0))))
    assert report.ok and {s.status for s in report.steps} == {RIGHT}, statuses(report)


@pytest.mark.parametrize(
    ("code", "pe"),
    [
        ("sinusoidal_from_one", encoding(np.arange(3.0) + 1)),
        ("sinusoidal_sin_cos_swapped", encoding(np.arange(3.0), swapped=True)),
    ],
)
def test_a_sinusoidal_slip_is_named_at_x_plus_pe(tmp_path: Path, code: str, pe: Matrix) -> None:
    report = graded(tmp_path, SINUSOIDAL, sinusoidal_student(pe))
    assert_named_then_carried(report, code, [("positioned", None)])


# --- Grouped-query attention ------------------------------------------------------------------------------

GQA = """tokens: [a, b, c]
kv_heads:
  - keys: [[2, 0], [1, 1], [0, 1]]
    values: [[2, 0], [0, 2], [1, 1]]
  - keys: [[1, 0], [0, -1], [1, 1]]
    values: [[1, 0], [0, 1], [1, 1]]
heads:
  - queries: [[1, 0], [0, 1], [1, 1]]
  - queries: [[0, 1], [1, -1], [2, 0]]
  - queries: [[1, 2], [-1, 0], [0, 1]]
  - queries: [[2, 1], [1, 1], [0, -1]]
"""
GQA_KV = [
    (np.array([[2, 0], [1, 1], [0, 1]], dtype=float), np.array([[2, 0], [0, 2], [1, 1]], dtype=float)),
    (np.array([[1, 0], [0, -1], [1, 1]], dtype=float), np.array([[1, 0], [0, 1], [1, 1]], dtype=float)),
]
GQA_Q = [np.array(q, dtype=float) for q in ([[1, 0], [0, 1], [1, 1]], [[0, 1], [1, -1], [2, 0]])]
GQA_Q += [np.array(q, dtype=float) for q in ([[1, 2], [-1, 0], [0, 1]], [[2, 1], [1, 1], [0, -1]])]


def gqa_student(kv_of: Callable[[int], int]) -> str:
    heads = []
    for h, q in enumerate(GQA_Q):
        k, v = GQA_KV[kv_of(h)]
        dot = r4(q @ k.T)
        scores = r4(dot * r4(1 / math.sqrt(2)))
        heads.append({"dot": dot, "scores": scores} | softmax_steps(scores, v))
    return answers_of(heads, {"concat": np.hstack([head["output"] for head in heads])})


def test_a_careful_gqa_student_passes(tmp_path: Path) -> None:
    report = graded(tmp_path, GQA, gqa_student(lambda h: h // 2))
    assert report.ok and {s.status for s in report.steps} == {RIGHT}, statuses(report)


def test_kv_heads_tiled_instead_of_repeated_is_named_at_each_head_it_changes(tmp_path: Path) -> None:
    """Head h reads kv head h mod 2: heads 2 and 3 (counting from 1) read the other kv head."""
    report = graded(tmp_path, GQA, gqa_student(lambda h: h % 2))
    found = statuses(report)
    wrong = [key for key, (status, _) in found.items() if status == WRONG]
    assert {key[1] for key in wrong} == {1, 2} and ("dot", 1) in wrong and ("dot", 2) in wrong, found
    assert all("gqa_kv_tiled" in found[key][1] for key in wrong), found
    assert all(found[key][0] == RIGHT for key in found if key[1] in (0, 3)), found


# --- A layer's norm -----------------------------------------------------------------------------------------

NORMED = """tokens: [a, b, c]
x: [[1, 0, 2], [0, 1, 1], [2, 1, 0]]
layers:
  - norm: {type: layer, place: pre, eps: 1e-5, gain: [1, 2, 1], bias: [0, 1, 0]}
    w_q: [[1, 0], [0, 1], [1, 1]]
    w_k: [[0, 1], [1, 0], [1, 0]]
    w_v: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
"""
NORM_X = np.array([[1, 0, 2], [0, 1, 1], [2, 1, 0]], dtype=float)
NORM_W = [
    np.array([[1, 0], [0, 1], [1, 1]], dtype=float),
    np.array([[0, 1], [1, 0], [1, 0]], dtype=float),
    np.eye(3),
]
GAIN, SHIFT = np.array([1.0, 2.0, 1.0]), np.array([0.0, 1.0, 0.0])


def norm_student(kind: str = "layer", count: int = 3, gain: bool = True, shift: bool = True) -> str:
    """mean and root (√(var + ε), or RMSNorm's √(mean(x²) + ε)) to 4 decimals, normed from them, then the
    attention from the student's own normed rows, and the stream x + z."""
    streams: dict[str, Matrix] = {}
    centred = NORM_X
    if kind == "layer":
        mean = streams["mean"] = r4(NORM_X.mean(axis=1, keepdims=True))
        centred = NORM_X - mean
    root = streams["root"] = r4(np.sqrt((centred**2).sum(axis=1, keepdims=True) / count + 1e-5))
    normed = centred / root * (GAIN if gain else 1.0) + (SHIFT if shift and kind == "layer" else 0.0)
    normed = streams["normed"] = r4(normed)
    q, k, v = (r4(normed @ w) for w in NORM_W)
    dot = r4(q @ k.T)
    scores = r4(dot * r4(1 / math.sqrt(2)))
    head = {"queries": q, "keys": k, "values": v, "dot": dot, "scores": scores} | softmax_steps(scores, v)
    stream = r4(NORM_X + head["output"])
    lines = ["answers:", "  layers:"]
    items = [f"{name}: {text(m)}" for name, m in (*streams.items(), *head.items(), ("stream", stream))]
    lines += [f"    - {items[0]}", *(f"      {item}" for item in items[1:])]
    return "\n".join(lines) + "\n"


def test_a_careful_student_who_writes_the_norms_mean_and_root_passes_every_step(tmp_path: Path) -> None:
    """The issue's careful student: mean and √(var + ε) to 4 decimals, normed from them, Q = normed·W_Q copied
    on: right at normed and right one step later at queries."""
    report = graded(tmp_path, NORMED, norm_student())
    assert report.ok and {s.status for s in report.steps} == {RIGHT}, statuses(report)
    assert [s.step for s in report.steps][:4] == ["mean", "root", "normed", "queries"]


@pytest.mark.parametrize(
    ("code", "slip", "at"),
    [
        ("layernorm_unbiased", {"count": 2}, ("root",)),
        ("norm_swapped", {"kind": "rms"}, ("root", "normed")),  # normed: no mean subtracted, no bias added
        ("norm_affine_forgotten", {"gain": False}, ("normed",)),
        ("norm_affine_forgotten", {"shift": False}, ("normed",)),
    ],
)
def test_a_slip_of_the_norm_is_named_where_it_shows_and_q_k_v_are_carried(
    tmp_path: Path, code: str, slip: dict, at: tuple[str, ...]
) -> None:
    report = graded(tmp_path, NORMED, norm_student(**slip))
    assert_named_then_carried(report, code, [(step, None) for step in at])


# --- Explanations that agree with verdicts ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("problem", "student"),
    [
        (NORMED, lambda: norm_student()),
        (NORMED, lambda: norm_student(count=2)),
        (ALIBI, lambda: alibi_student(lambda h: SLOPES[h] * DISTANCE)),
        (ROPE, lambda: rope_student(np.arange(3.0) + 1, np.arange(3.0) + 1)),
    ],
)
def test_each_rule_line_shows_the_bound_that_decided_and_the_verdicts_sign(
    tmp_path: Path, problem: str, student: Callable[[], str]
) -> None:
    """|written − compared| recomputed from the line's own numbers: ≤ own + carried beside ✓ and ↷, > beside ✗."""
    from attncli.render.grading import _arithmetic

    report = graded(tmp_path, problem, student())
    shown = 0
    for step in report.steps:
        by_name = {f"{step.rows[c.row]}, {step.columns[c.column]}": c for c in step.cells}
        for line in _arithmetic(step)[1:]:
            name, rest = line.split(": |", 1)
            cell = by_name[name]
            relation = "≤" if " ≤ " in rest else ">"
            assert relation == (">" if cell.status == WRONG else "≤"), (step.step, line, cell.status)
            compared = cell.expected if cell.against is None else cell.against
            assert cell.entry is not None and cell.entry.value is not None
            within = abs(cell.entry.value - compared) <= (cell.own + cell.carried_in) * (1 + 1e-9) + 1e-12
            assert within == (relation == "≤"), (step.step, line)
            shown += 1
    assert shown or report.ok
