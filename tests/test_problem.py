"""The problem parser's own rules: which field a head uses when several could give it, and the memory budget."""

from __future__ import annotations

import itertools
import math
import tracemalloc

import numpy as np
import pytest

from attncli import core, yamldoc
from attncli.errors import AttnError
from attncli.parsing import parse
from attncli.parsing.heads import Level, Pick, pick
from attncli.problem import GIVEN, KINDS, SCORE_KINDS, Bias, Head, Problem, Projection, Score
from tests.reference import press_get_slopes

PLACES = ("absent", "head", "top")
VALUES = [[1, 2], [3, 4]]  # given directly
X = [[1, 0], [0, 1]]
W_V = [[5, 6], [7, 8]]  # projected: x·W_V
SCORES = [[0.5, 0.25], [0.0, 1.0]]


def document(fields: dict[str, tuple[str, object]], top: dict[str, object]) -> yamldoc.Document:
    """A one-head problem over tokens a, b with each of `fields` placed in the head, at the top level, or left out."""
    head = {name: value for name, (place, value) in fields.items() if place == "head"}
    data = {"tokens": ["a", "b"], **top, "heads": [{"name": "h", **head}]}
    data.update({name: value for name, (place, value) in fields.items() if place == "top"})
    return yamldoc.Document(data=data, name="p.yaml")


@pytest.mark.parametrize(("first", "second", "expected"), [
    ("absent", "absent", Pick.NEITHER),
    ("absent", "head", Pick.SECOND),
    ("absent", "top", Pick.SECOND),
    ("head", "absent", Pick.FIRST),
    ("head", "head", Pick.BOTH),
    ("head", "top", Pick.FIRST),
    ("top", "absent", Pick.FIRST),
    ("top", "head", Pick.SECOND),
    ("top", "top", Pick.BOTH),
])  # fmt: skip
def test_the_nearer_field_wins(first: str, second: str, expected: Pick) -> None:
    levels = {"absent": Level.ABSENT, "head": Level.HEAD, "top": Level.TOP}
    assert pick(levels[first], levels[second]) is expected


@pytest.mark.parametrize(("values_at", "w_v_at"), list(itertools.product(PLACES, PLACES)))
def test_values_or_their_projection(values_at: str, w_v_at: str) -> None:
    """`values` and `w_v` in every placement: the head's own beats the top level; the same level is an error."""
    fields = {"values": (values_at, VALUES), "w_v": (w_v_at, W_V)}
    given = document(fields, {"x": X, "scores": SCORES})
    if values_at == w_v_at:
        with pytest.raises(AttnError) as caught:
            parse(given)
        assert caught.value.key == "problem.missing" if values_at == "absent" else "problem.given_and_projected"
        return
    values = parse(given).heads[0].values
    uses_values = w_v_at == "absent" or (values_at == "head" and w_v_at == "top")
    if uses_values:
        np.testing.assert_array_equal(values, VALUES)
    else:
        assert isinstance(values, Projection)
        np.testing.assert_array_equal(values.x, X)
        np.testing.assert_array_equal(values.w, W_V)


@pytest.mark.parametrize(("scores_at", "vectors_at"), list(itertools.product(PLACES, PLACES)))
def test_given_scores_or_the_vectors(scores_at: str, vectors_at: str) -> None:
    """`scores` against queries and keys in every placement: the nearer wins, and given scores win a tie."""
    vectors = [[1, 0], [0, 1]]
    fields = {"scores": (scores_at, SCORES), "queries": (vectors_at, vectors), "keys": (vectors_at, vectors)}
    given = document(fields, {"values": VALUES})
    if scores_at == vectors_at == "absent":
        with pytest.raises(AttnError) as caught:
            parse(given)
        assert caught.value.key == "problem.missing"
        return
    head = parse(given).heads[0]
    uses_scores = vectors_at == "absent" or scores_at == vectors_at or (scores_at == "head" and vectors_at == "top")
    if uses_scores:
        assert head.score.kind == GIVEN and head.queries is None
        np.testing.assert_array_equal(head.scores, SCORES)
    else:
        assert head.score.kind == "scaled_dot" and head.scores is None
        np.testing.assert_array_equal(head.queries, vectors)


def test_given_is_a_declared_kind_that_no_file_can_ask_for() -> None:
    """Scores are given by giving them; `score: given` is refused like any unknown kind, and so is a typo in code."""
    assert GIVEN in KINDS and GIVEN not in SCORE_KINDS
    text = "tokens: [a]\nqueries: [[1]]\nkeys: [[1]]\nvalues: [[1]]\nscore: given\n"
    with pytest.raises(AttnError) as caught:
        parse(yamldoc.load(text, "p.yaml"))
    assert (caught.value.key, caught.value.where.line) == ("problem.unknown_score", 5)
    with pytest.raises(ValueError, match="dott"):
        Score("dott", 1.0)


def _peak(problem: Problem) -> int:
    """The most numpy memory `compute` holds at once while solving `problem`, by tracemalloc."""
    tracemalloc.start()
    try:
        core.compute(problem)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("kind", SCORE_KINDS)
def test_the_memory_budget_covers_what_the_core_allocates(kind: str) -> None:
    """bytes_needed against the peak numpy allocation of `compute` (by tracemalloc) and the mask, give or take
    the few vectors of L or S numbers that it leaves out."""
    rng = np.random.default_rng(7)
    n, d, d_a = 256, 4, 3
    learned = {
        "general": {"w": rng.standard_normal((d, d))},
        "additive": {
            "w_query": rng.standard_normal((d, d_a)),
            "w_key": rng.standard_normal((d, d_a)),
            "v": np.ones(d_a),
        },
    }.get(kind, {})
    score = Score(kind, 0.5, **learned)
    head = Head("h", score, rng.standard_normal((n, d)), rng.standard_normal((n, d)), rng.standard_normal((n, 2)))
    tokens = tuple(f"t{i}" for i in range(n))
    problem = Problem(tokens, tokens, False, (head,), np.ones((n, n), dtype=bool))
    peak = _peak(problem)
    needed = core.bytes_needed([score], n, n, np.dtype(np.float64))
    assert problem.mask.nbytes + peak <= 1.05 * needed
    assert needed < 2 * (problem.mask.nbytes + peak)  # and not wildly more


@pytest.mark.parametrize("kind", ["matrix", "alibi"])
@pytest.mark.parametrize("heads", [1, 3])
def test_the_memory_budget_covers_a_bias(kind: str, heads: int) -> None:
    """With a bias each head keeps one (L, S) matrix more (ALiBi's −m_h·|i − j|) and adds it to the scores;
    the problem holds the bias (or the distances) once: the budget counts all of it."""
    rng = np.random.default_rng(8)
    n, d = 256, 4
    tokens = tuple(f"t{i}" for i in range(n))
    listed = tuple(
        Head(f"h{h}", Score("scaled_dot", 0.5), *(rng.standard_normal((n, d)) for _ in range(3))) for h in range(heads)
    )
    bias = Bias(kind, rng.standard_normal((n, n)), tuple(0.5**h for h in range(1, heads + 1)))
    problem = Problem(tokens, tokens, False, listed, np.ones((n, n), dtype=bool), bias=bias)
    peak = _peak(problem)
    needed = core.bytes_needed([head.score for head in listed], n, n, np.dtype(np.float64), bias=True)
    held = problem.mask.nbytes + bias.matrix.nbytes + peak
    assert held <= 1.05 * needed
    assert needed < 2 * held


def test_too_large_a_problem_is_refused_before_its_heads_are_read() -> None:
    n = 20_000  # 6 matrices of 8 bytes and a mask byte: 20000² × 49 bytes ≈ 18.3 GiB
    given = yamldoc.Document(data={"tokens": ",".join(f"t{i}" for i in range(n)), "values": "not read"}, name="p.yaml")
    with pytest.raises(AttnError) as caught:
        parse(given)
    assert caught.value.key == "problem.too_large"
    assert caught.value.params["size"] == f"{n * n * 49 / 2**30:.1f} GiB"


def bloom_slopes(num_heads: int) -> np.ndarray:
    """Hugging Face's `build_alibi_tensor` for BLOOM (modeling_bloom.py): its slopes, numpy for torch, float32."""
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = np.float32(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))))
    powers = np.arange(1, 1 + closest_power_of_2, dtype=np.int32)
    slopes = np.power(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = np.float32(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))))
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = np.arange(1, 1 + 2 * num_remaining_heads, 2, dtype=np.int32)
        slopes = np.concatenate([slopes, np.power(extra_base, extra_powers)], axis=0)
    return slopes


def alibi_slopes(heads: int) -> tuple[float, ...]:
    """The slopes attncli gives `bias: alibi` over `heads` heads of the worked example's vectors."""
    head = "{queries: [[1, 0]], keys: [[1, 0], [0, 1]], values: [[1], [2]]}"
    text = f"tokens: [a, b]\nquery_tokens: [b]\nbias: alibi\nheads: [{', '.join([head] * heads)}]\n"
    problem = parse(yamldoc.load(text, "alibi.yaml"))
    assert problem.bias is not None
    return problem.bias.slopes


@pytest.mark.parametrize("heads", [*range(1, 17), 24, 32, 40])
def test_alibi_slopes_are_press_et_al_and_blooms_for_any_number_of_heads(heads: int) -> None:
    """For H not a power of two, the closest lower power of two's slopes, then every other slope of twice as
    many (issue 22: H = 3 gave 2^(−8h/3) = 0.1575, 0.0248, 0.0039); powers of two as before. attncli takes
    each slope as 2^(−8h/n), correctly rounded; the paper's start·ratio^i rounds up to 7 ulps off it (H = 32)."""
    found = alibi_slopes(heads)
    np.testing.assert_allclose(found, press_get_slopes(heads), rtol=2e-15, atol=0)
    np.testing.assert_allclose(found, bloom_slopes(heads), rtol=4e-6, atol=0)  # a float32 base to the 32nd power
    if heads & (heads - 1) == 0:
        assert found == tuple(2.0 ** (-8 * h / heads) for h in range(1, heads + 1))  # as before, to the bit


def test_alibi_slopes_pinned_by_hand() -> None:
    assert alibi_slopes(3) == (1 / 16, 1 / 256, 1 / 4)
    assert alibi_slopes(5) == (1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2)
    assert alibi_slopes(6) == (1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8)
    twelve = alibi_slopes(12)
    assert twelve[:8] == tuple(1 / 2**h for h in range(1, 9))
    np.testing.assert_allclose(twelve[8:], [2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5], rtol=2e-16, atol=0)
