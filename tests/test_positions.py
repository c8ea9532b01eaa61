"""RoPE and sinusoidal positions against the published conventions, each written here independently.

half: Hugging Face's Llama (cos and sin of the frequencies repeated twice, q·cos + rotate_half(q)·sin);
interleaved: RoFormer's complex multiplication, the pair (q_2i, q_2i+1) as q_2i + i·q_2i+1 times e^(i·m·θ_i);
sinusoidal: Vaswani et al. §3.5's formula. Plus the property RoPE exists for: the score of q at m and k at n
depends on m and n only through m − n.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attncli import pipeline
from attncli.core import Steps

TOLERANCE = 1e-12


def solve(fields: dict) -> Steps:
    text = json.dumps(fields, default=lambda array: array.tolist())
    return pipeline.solve(pipeline.load(text=text, name="rope.yaml"))


def hf_rope(x: np.ndarray, at: np.ndarray, base: float) -> np.ndarray:
    """Hugging Face's LlamaRotaryEmbedding + apply_rotary_pos_emb, in numpy: emb = cat(freqs, freqs)."""
    d = x.shape[1]
    inv_freq = 1.0 / base ** (np.arange(0, d, 2) / d)
    emb = np.concatenate([np.outer(at, inv_freq)] * 2, axis=1)  # (n, d)
    x1, x2 = x[:, : d // 2], x[:, d // 2 :]
    rotate_half = np.concatenate([-x2, x1], axis=1)
    return x * np.cos(emb) + rotate_half * np.sin(emb)


def roformer_rope(x: np.ndarray, at: np.ndarray, base: float) -> np.ndarray:
    """RoFormer (Su et al., eq. 34) as complex numbers: (x_2i + i·x_2i+1)·e^(i·m·θ_i), θ_i = base^(−2i/d)."""
    d = x.shape[1]
    theta = base ** (-2 * np.arange(d // 2) / d)
    z = (x[:, 0::2] + 1j * x[:, 1::2]) * np.exp(1j * np.outer(at, theta))
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = z.real, z.imag
    return out


REFERENCES = {"half": hf_rope, "interleaved": roformer_rope}


@pytest.mark.parametrize("style", ["half", "interleaved"])
@pytest.mark.parametrize(("d", "base"), [(2, 10000.0), (4, 10000.0), (8, 500.0)])
def test_rope_matches_the_published_convention(style: str, d: int, base: float) -> None:
    rng = np.random.default_rng(d)
    q, k, v = rng.normal(size=(3, d)), rng.normal(size=(5, d)), rng.normal(size=(5, 2))
    at = np.array([0, 3, 1, 7, 2])
    steps = solve({
        "tokens": [f"t{i}" for i in range(5)], "query_tokens": ["t1", "t3", "t4"],
        "queries": q, "keys": k, "values": v, "position_ids": at,
        "positions": {"type": "rope", "base": base, "style": style},
    })  # fmt: skip
    (head,) = steps.heads
    reference = REFERENCES[style]
    q_rot, k_rot = reference(q, at[[1, 3, 4]], base), reference(k, at, base)
    assert np.abs(head.rotation.queries - q_rot).max() <= TOLERANCE
    assert np.abs(head.rotation.keys - k_rot).max() <= TOLERANCE
    assert np.abs(head.dot - q_rot @ k_rot.T).max() <= TOLERANCE * d
    assert np.array_equal(head.queries, q)  # the record keeps them unturned too
    scores = q_rot @ k_rot.T / math.sqrt(d)
    weights = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    assert np.abs(steps.output - weights @ v).max() <= TOLERANCE


def test_half_and_interleaved_differ_beyond_two_coordinates() -> None:
    """The two pairings are the same rotation for d = 2 and different ones for d = 4."""
    rng = np.random.default_rng(1)
    x, at = rng.normal(size=(3, 4)), np.arange(3.0)
    assert np.abs(hf_rope(x, at, 10.0) - roformer_rope(x, at, 10.0)).max() > 0.1
    assert np.abs(hf_rope(x[:, :2], at, 10.0) - roformer_rope(x[:, :2], at, 10.0)).max() <= TOLERANCE


@settings(max_examples=40, deadline=None)
@given(
    style=st.sampled_from(["half", "interleaved"]),
    seed=st.integers(0, 2**16),
    at=st.lists(st.integers(0, 60), min_size=2, max_size=4),
    shift=st.integers(-30, 30),
)
def test_rope_score_depends_only_on_the_distance(style: str, seed: int, at: list[int], shift: int) -> None:
    """Moving every token by the same offset changes every q and k but not one score: q̃_m·k̃_n = f(m − n)."""
    rng = np.random.default_rng(seed)
    count = len(at)
    fields = {
        "tokens": [f"t{i}" for i in range(count)],
        "queries": rng.normal(size=(count, 4)),
        "keys": rng.normal(size=(count, 4)),
        "values": rng.normal(size=(count, 2)),
        "positions": {"type": "rope", "style": style, "base": 100},
    }
    here = solve({**fields, "position_ids": np.array(at)}).heads[0]
    there = solve({**fields, "position_ids": np.array(at) + shift + 30}).heads[0]
    assert np.abs(here.dot - there.dot).max() <= 1e-9
    # and for one pair it is q·R(n − m)·k, whatever m and n are on their own
    m, n = at[0], at[-1]
    q, k = fields["queries"][0], fields["keys"][-1]
    relative = REFERENCES[style](k[None, :], np.array([n - m]), 100.0)[0]
    assert abs(here.dot[0, -1] - q @ relative) <= 1e-9


def test_positions_default_to_the_token_order_and_the_lower_right_corner() -> None:
    """Keys stand at 0..S−1; a self-attention query at its token; a KV-cache query (lower right) at the end."""
    keys = [[1, 0], [0, 1], [1, 1], [1, -1]]
    base = {"keys": keys, "values": keys, "positions": "rope"}
    steps = solve({**base, "tokens": list("abcd"), "query_tokens": ["c"], "queries": [[1, 2]]})
    assert steps.problem.positions.key_at.tolist() == [0, 1, 2, 3]
    assert steps.problem.positions.query_at.tolist() == [2]
    cache = {"tokens": list("abcd"), "query_tokens": ["new"], "queries": [[1, 2]], "mask": "causal_lower_right"}
    assert solve({**base, **cache}).problem.positions.query_at.tolist() == [3]
    placed = solve({**base, **cache, "query_position_ids": [7]})
    assert placed.problem.positions.query_at.tolist() == [7]
    angles = placed.heads[0].rotation.query_angles
    assert angles.tolist() == [[7.0]]  # θ_0 = 1 for d = 2: the angle is the position


def test_json_carries_the_turned_vectors_and_the_angles() -> None:
    text = "tokens: [a, b]\nqueries: [[1, 0], [0, 1]]\nkeys: [[1, 0], [0, 1]]\nvalues: [[1], [2]]\npositions: rope\n"
    steps = pipeline.solve(pipeline.load(text=text))
    from attncli.render import json_doc

    doc = json.loads(json_doc.render(steps))
    assert doc["positions"] == {
        "kind": "rope", "base": 10000.0, "style": "half", "query_positions": [0, 1], "key_positions": [0, 1]
    }  # fmt: skip
    rope = doc["heads"][0]["rope"]
    assert rope["frequencies"] == [1.0]
    assert rope["key_angles"] == [[0.0], [1.0]]
    c, s = math.cos(1), math.sin(1)
    np.testing.assert_allclose(rope["keys"], [[1, 0], [-s, c]], atol=TOLERANCE, rtol=0)
    np.testing.assert_allclose(doc["heads"][0]["dot"], [[1, -s], [-s, 1]], atol=TOLERANCE, rtol=0)


def test_sinusoidal_is_vaswanis_formula_added_to_x() -> None:
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(3, 4)), rng.normal(size=(4, 4))
    steps = solve({"x": x, "w_q": w, "w_k": w.T, "w_v": w, "positions": {"type": "sinusoidal"}})
    pe = np.zeros((3, 4))
    for pos in range(3):
        for i in range(0, 4, 2):
            pe[pos, i] = math.sin(pos / 10000 ** (i / 4))
            pe[pos, i + 1] = math.cos(pos / 10000 ** (i / 4))
    encoding = steps.problem.positions
    assert np.abs(encoding.encoding - pe).max() <= TOLERANCE
    assert np.array_equal(encoding.x, x)
    (head,) = steps.heads
    assert np.abs(head.queries - (x + pe) @ w).max() <= TOLERANCE
    assert np.abs(head.keys - (x + pe) @ w.T).max() <= TOLERANCE
    assert head.rotation is None


def test_result_agrees_with_solve_under_rope() -> None:
    """-q and -f npy (pipeline.result) do not take the kernel, which turns nothing."""
    rng = np.random.default_rng(2)
    fields = {"queries": rng.normal(size=(3, 2)), "keys": rng.normal(size=(3, 2)), "values": rng.normal(size=(3, 2))}
    text = json.dumps({**fields, "positions": "rope"}, default=lambda array: array.tolist())
    problem = pipeline.load(text=text)
    assert np.array_equal(pipeline.result(problem), pipeline.solve(problem).output)
    unturned = pipeline.solve(pipeline.load(text=json.dumps(fields, default=lambda array: array.tolist())))
    assert np.abs(unturned.output - pipeline.result(problem)).max() > 1e-3


def test_every_write_up_shows_the_turn_and_the_distance() -> None:
    """Frequencies, angles and turned vectors, then q·R((n − m)·θ)·k beside q̃·k̃, in the terminal, Markdown, LaTeX."""
    from attncli.render import human, latex, markdown, walk
    from attncli.render.layout import fit, to_text
    from tests.paths import SAMPLES

    steps = pipeline.solve(pipeline.load(SAMPLES / "rope.yaml"))
    items = walk.items(steps, walk.View())
    (rotary,) = [item for item in items if isinstance(item, walk.Rotary)]
    assert rotary.pairs == ((1, 2),) and [row.angles.values for row in rotary.keys] == [
        (0,),
        (math.pi / 2,),
        (math.pi,),
    ]
    (query,) = [item for item in items if isinstance(item, walk.Query)]
    relative = [key.relative.value.value for key in query.keys]
    want = [-2 * math.sqrt(2), math.sqrt(2), 0]  # q·R(n − m)·k by hand: R(−π)[2, 0], R(−π/2)[1, 1], [0, 1]
    np.testing.assert_allclose(relative, want, atol=TOLERANCE, rtol=0)
    assert [key.relative.distance.value for key in query.keys] == [-math.pi, -math.pi / 2, 0]
    texts = {
        "terminal": to_text(fit(human.render(steps, walk.View(), 200), 200)),
        "markdown": markdown.render(steps),
        "latex": latex.render(steps),
    }
    for name, text in texts.items():
        for shown in ("[-1.0000, 1.0000]", "[0.0000, -1.0000]", "1.5708", "-2.8284", "1.4142"):
            assert shown in text, (name, shown)
    assert "q·R((n − m)·θ)·k" in texts["terminal"] and "q·R((n − m)·θ)·k" in texts["markdown"]
    assert r"$q \cdot R((n - m) \cdot \theta) \cdot k$" in texts["latex"]  # in math, not text with $\cdot$ bits


def test_the_exponent_is_labelled_with_the_bias() -> None:
    """With a bias softmax takes e^(s + b): every write-up says so."""
    from attncli.render import human, latex, markdown, walk
    from attncli.render.layout import fit, to_text
    from tests.paths import SAMPLES

    steps = pipeline.solve(pipeline.load(SAMPLES / "bias.yaml"))
    assert "e^(s + b)" in to_text(fit(human.render(steps, walk.View(), 200), 200))
    assert "e^(s + b)" in markdown.render(steps)
    tex = latex.render(steps)
    assert r"\sum_j e^{s_j + b_j}" in tex and "$e^{s + b}$" in tex
    plain = pipeline.solve(pipeline.load(SAMPLES / "bank.yaml"))
    assert "e^(s + b)" not in markdown.render(plain) and r"\sum_j e^{s_j}" in latex.render(plain)


def answers_text(steps_text: str, dot: np.ndarray, scale: float, allowed: np.ndarray, values: np.ndarray) -> str:
    """A student's answers (4 decimals, masked cells written so) carried on correctly from their own `dot`."""
    scores = np.where(allowed, dot * scale, -np.inf)
    weights = np.exp(scores - scores.max(axis=1, keepdims=True))
    weights /= weights.sum(axis=1, keepdims=True)

    def rows(matrix: np.ndarray, masked: np.ndarray | None = None) -> str:
        cells = [
            "["
            + ", ".join("masked" if masked is not None and masked[i, j] else f"{v:.4f}" for j, v in enumerate(row))
            + "]"
            for i, row in enumerate(matrix)
        ]
        return "\n".join(f"    - {row}" for row in cells)

    hidden = ~allowed
    return (
        f"{steps_text}answers:\n  dot:\n{rows(dot)}\n  scores:\n{rows(scores, hidden)}\n"
        f"  weights:\n{rows(weights, hidden)}\n  output:\n{rows(weights @ values)}\n"
    )


ROPE_PROBLEM = """tokens: [a, b, c]
queries: [[1, 0, 2, -1], [0, 1, 1, 1], [2, 1, 0, 0]]
keys: [[1, 1, 0, 2], [0, 2, 1, 0], [1, 0, -1, 1]]
values: [[1, 0], [0, 1], [1, 1]]
score: dot
positions: {{type: rope, base: 4, style: {style}}}
"""


@pytest.mark.parametrize("style", ["half", "interleaved"])
@pytest.mark.parametrize(("slip", "code"), [("reversed", "rope_reversed"), ("pairing", "rope_pairing"), (None, None)])
def test_check_names_the_rope_slips(style: str, slip: str | None, code: str | None) -> None:
    """The turn replayed here with numpy's published conventions, the wrong way round or the other pairing:
    check finds the mistake at `dot` and names it; done right, every step is right."""
    problem = ROPE_PROBLEM.format(style=style)
    q = np.array([[1, 0, 2, -1], [0, 1, 1, 1], [2, 1, 0, 0]], dtype=float)
    k = np.array([[1, 1, 0, 2], [0, 2, 1, 0], [1, 0, -1, 1]], dtype=float)
    at = np.arange(3.0)
    used = {"half": "interleaved", "interleaved": "half"}[style] if slip == "pairing" else style
    sign = -1.0 if slip == "reversed" else 1.0
    turn = REFERENCES[used]
    dot = turn(q, sign * at, 4.0) @ turn(k, sign * at, 4.0).T
    text = answers_text(problem, dot, 1.0, np.ones((3, 3), dtype=bool), np.array([[1, 0], [0, 1], [1, 1]], float))
    report = pipeline.grade(pipeline.load(text=problem), text=text)
    if code is None:
        assert report.ok
        return
    first = report.first_mistake
    assert first.step == "dot" and code in first.diagnosis, (first.step, first.diagnosis)


def test_check_names_the_upper_left_mask_when_decoding() -> None:
    """kv_cache.yaml's one new query under the top-left causal mask sees only the first key: weight 1 on it."""
    from tests.paths import SAMPLES

    sample = (SAMPLES / "kv_cache.yaml").read_text(encoding="utf-8")
    steps = pipeline.solve(pipeline.load(SAMPLES / "kv_cache.yaml"))
    q, k = np.array([[math.sqrt(2), 0]]), np.array([[2, 0], [1, 1], [0, 1], [1, 0]], dtype=float)
    upper_left = np.array([[True, False, False, False]])
    values = np.array([[2, 0], [0, 2], [1, 1], [1, 0]], dtype=float)
    text = answers_text(sample, q @ k.T, 1 / math.sqrt(2), upper_left, values)
    report = pipeline.grade(steps, text=text)
    first = report.first_mistake
    assert first.step == "scores" and "causal_upper_left" in first.diagnosis, (first.step, first.diagnosis)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    style=st.sampled_from(["half", "interleaved"]),
    d_k=st.sampled_from([2, 4]),
    shape=st.sampled_from([{}, {"heads": 2, "gqa": True}, {"projections": True, "mask": "causal"}]),
)
def test_generated_rope_and_gqa_exercises_are_hand_doable_and_their_keys_check(
    seed: int, style: str, d_k: int, shape: dict
) -> None:
    """Quarter turns keep the turned vectors whole numbers (times √d_k), so every score is a whole number or a half;
    grouped heads share their kv head's keys and values; the key passes check."""
    from attncli import exercises

    options = exercises.Options(tokens=3, d_k=d_k, rope=style, answers=True, **shape)
    text = exercises.exercise(options, seed)
    steps = pipeline.solve(pipeline.load(text=text))
    for head in steps.heads:
        turned = (
            head.rotation.queries * math.sqrt(d_k) if head.spec.score.kind == "scaled_dot" else head.rotation.queries
        )
        assert np.abs(head.rotation.keys - np.round(head.rotation.keys)).max() <= 1e-9
        assert np.abs(2 * turned - np.round(2 * turned)).max() <= 1e-9
        allowed = steps.problem.mask
        assert np.abs(2 * head.scores[allowed] - np.round(2 * head.scores[allowed])).max() <= 1e-9
    if shape.get("gqa"):
        assert [head.spec.kv_head for head in steps.heads] == [0, 0]
    assert pipeline.grade(pipeline.load(text=text), text=text).ok


def test_generate_refuses_what_it_cannot_make_by_hand() -> None:
    from typer.testing import CliRunner

    from attncli.cli import app

    for args, words in (
        (["--rope", "halves"], "--rope: expected half (Llama"),
        (["--rope", "half", "--dk", "3"], "quarter turns, which needs --dk 2 or 4"),
        (["--gqa", "--heads", "3"], "give an even --heads, not 3"),
    ):
        result = CliRunner().invoke(app, ["generate", *args], env={"LC_ALL": None, "LANG": None})
        assert result.exit_code == 2 and words in result.stderr, (args, result.stderr)


def test_a_rope_sheet_gives_the_positions_as_multiples_of_pi() -> None:
    """A handed-out RoPE exercise must say where the tokens stand: 0, π, 2π for --dk 4 (base 4)."""
    from attncli import exercises
    from attncli.render import sheets

    text = exercises.exercise(exercises.Options(tokens=3, d_k=4, rope="half"), 3)
    sheet = sheets.sheet(pipeline.solve(pipeline.load(text=text)))
    (placed,) = [given for given in sheet.shared if given.name == "m"]
    assert placed.rows == (("0",), ("π",), ("2π",))
    assert [sheets._quarter_turns(k * math.pi / 2) for k in (-1, 1, 3, -4)] == ["-π/2", "π/2", "3π/2", "-2π"]
    assert sheets._quarter_turns(0.25) == "0.25"
