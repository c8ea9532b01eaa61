"""Every sample against values worked out by hand from the article's formulas, in float64, to 1e-12.

Each expected value below is a closed form written from the sample's numbers
(for instance fisherman's weight in bank.yaml is e²/(e² + e + 1)); none comes from
running the program.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from attncli import core, pipeline
from tests.paths import SAMPLES

E = math.e
R2 = 1 / math.sqrt(2)  # the scale 1/√d_k for d_k = 2
TOLERANCE = 1e-12


def solve(name: str) -> core.Steps:
    path = SAMPLES / name
    return pipeline.solve(pipeline.load(path))


def close(got: np.ndarray | list, want: list) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=0, atol=TOLERANCE)


def softmax(*scores: float) -> list[float]:
    total = sum(math.exp(s) for s in scores)
    return [math.exp(s) / total for s in scores]


def test_every_sample_is_tested_here() -> None:
    tested = {name for name in globals() if name.startswith("test_")}
    for path in SAMPLES.glob("*.yaml"):
        assert f"test_{path.stem}" in tested, f"{path.name} has no test in this file"


def test_bank() -> None:
    """q = [√2, 0]; q·k = 2√2, √2, 0; × 1/√2 gives 2, 1, 0; weights e^s / (e² + e + 1)."""
    steps = solve("bank.yaml")
    (head,) = steps.heads
    z = E**2 + E + 1
    weights = [E**2 / z, E / z, 1 / z]
    assert steps.problem.tokens == ("fisherman", "net", "bank")
    assert steps.problem.query_tokens == ("bank",)
    assert not steps.problem.cross
    assert head.spec.score.kind == "scaled_dot"
    assert head.spec.score.scale == pytest.approx(R2, abs=TOLERANCE)
    close(head.dot, [[2 * math.sqrt(2), math.sqrt(2), 0]])
    close(head.scores, [[2, 1, 0]])
    close(head.weights, [weights])
    # values [2, 0], [0, 2], [1, 1]
    close(steps.output, [[2 * weights[0] + weights[2], 2 * weights[1] + weights[2]]])
    assert steps.concat is None
    # the article's rounded figures
    assert [round(w, 4) for w in head.weights[0]] == [0.6652, 0.2447, 0.0900]
    assert [round(x, 4) for x in steps.output[0]] == [1.4205, 0.5795]


def test_bank_cashier() -> None:
    """Same query [√2, 0]; keys [1, 2], [3, 1], [0, 1] give scores 1, 3, 0: money now dominates."""
    steps = solve("bank_cashier.yaml")
    (head,) = steps.heads
    z = E + E**3 + 1
    close(head.scores, [[1, 3, 0]])
    close(head.weights, [[E / z, E**3 / z, 1 / z]])
    # values [0, 1], [0, 3], [1, 1]
    close(steps.output, [[1 / z, (E + 3 * E**3 + 1) / z]])
    assert int(np.argmax(head.weights[0])) == steps.problem.tokens.index("money")


def test_two_heads() -> None:
    """Head 2's given scores [1, 2, 0] swap fisherman's and net's weights; concat·W_O mixes both heads."""
    steps = solve("two_heads.yaml")
    first, second = steps.heads
    z = E**2 + E + 1
    a, b = (2 * E**2 + 1) / z, (2 * E + 1) / z  # head 1's output [a, b]
    close(first.weights, [[E**2 / z, E / z, 1 / z]])
    close(first.output, [[a, b]])
    assert second.spec.score.kind == "given"
    assert second.queries is None and second.keys is None
    close(second.scores, [[1, 2, 0]])
    close(second.weights, [[E / z, E**2 / z, 1 / z]])
    assert [round(w, 4) for w in second.weights[0]] == [0.2447, 0.6652, 0.0900]
    close(second.output, [[b, a]])
    close(steps.concat, [[a, b, b, a]])
    # W_O = [[1, 0], [0, 1], [0.5, 0], [0, 0.5]]
    close(steps.output, [[a + 0.5 * b, b + 0.5 * a]])


STORM_TOKENS = ("The", "bank", "flooded", "after", "the", "storm", ".")


def _storm_expected() -> tuple[list[float], list[float], list[float], list[float]]:
    """Bidirectional: bank's scores 0, r, r, 0, 0, 2r, 0 and storm's r, r, 2r, 0, r, 3r, 0 with r = 1/√2."""
    r = R2
    bank = softmax(0, r, r, 0, 0, 2 * r, 0)
    storm = softmax(r, r, 2 * r, 0, r, 3 * r, 0)
    # values: bank [1, 0], flooded [0, 1], storm [0, 2]; the rest [0, 0]
    return bank, [bank[1], bank[2] + 2 * bank[5]], storm, [storm[1], storm[2] + 2 * storm[5]]


def test_storm_bidirectional() -> None:
    steps = solve("storm_bidirectional.yaml")
    (head,) = steps.heads
    bank, bank_out, storm, storm_out = _storm_expected()
    assert steps.problem.tokens == STORM_TOKENS
    assert steps.problem.mask.all()
    close(head.weights, [bank, storm])
    close(steps.output, [bank_out, storm_out])
    assert head.weights[0, STORM_TOKENS.index("storm")] > 0.3  # bank uses the later clue


def test_storm_causal() -> None:
    """bank (position 2) sees The and bank only; storm (position 6) sees everything but the final '.'."""
    steps = solve("storm_causal.yaml")
    (head,) = steps.heads
    r = R2
    bank = [*softmax(0, r), 0, 0, 0, 0, 0]
    storm = [*softmax(r, r, 2 * r, 0, r, 3 * r), 0]
    close(head.weights, [bank, storm])
    close(steps.output, [[bank[1], 0], [storm[1], storm[2] + 2 * storm[5]]])
    assert steps.problem.mask.tolist() == [[j <= 1 for j in range(7)], [j <= 5 for j in range(7)]]
    # masked keys get exactly zero, not merely a small number
    assert head.weights[0, STORM_TOKENS.index("storm")] == 0.0
    assert head.weights[1, STORM_TOKENS.index(".")] == 0.0
    assert np.isneginf(head.scores[0, 2:]).all()
    assert head.weights[1, STORM_TOKENS.index("bank")] > 0  # storm still sees bank


def test_translation_cross() -> None:
    """Spanish queries against English keys 2·I; the scale is 1/√3."""
    steps = solve("translation_cross.yaml")
    (head,) = steps.heads
    assert steps.problem.cross
    assert steps.problem.query_tokens == ("La", "orilla", "se", "inundó")
    assert steps.problem.tokens == ("The", "bank", "flooded")
    a, b = math.exp(2 / math.sqrt(3)), math.exp(1 / math.sqrt(3))
    weights = [
        [a / (a + 2), 1 / (a + 2), 1 / (a + 2)],
        [1 / (a + 2), a / (a + 2), 1 / (a + 2)],
        [1 / (1 + 2 * b), b / (1 + 2 * b), b / (1 + 2 * b)],
        [1 / (a + 2), 1 / (a + 2), a / (a + 2)],
    ]
    close(head.scores[0], [2 / math.sqrt(3), 0, 0])
    close(head.weights, weights)
    # values The [1, 0], bank [0, 1], flooded [1, 1]: output = [w_The + w_flooded, w_bank + w_flooded]
    close(steps.output, [[w[0] + w[2], w[1] + w[2]] for w in weights])
    close(steps.output[0], [(a + 1) / (a + 2), 2 / (a + 2)])


def test_projections() -> None:
    """Q = X·W_Q, K = X·W_K, V = X·W_V worked out row by row; d_k = 2, d_v = 3."""
    steps = solve("projections.yaml")
    (head,) = steps.heads
    close(head.queries, [[1, 0], [0, 1], [1, 1]])
    close(head.keys, [[2, 1], [1, 1], [1, 2]])
    close(head.values, [[1, 0, 1], [0, 1, 1], [1, 1, 0]])  # W_V is the identity
    r = R2
    weights = [softmax(2 * r, r, r), softmax(r, r, 2 * r), softmax(3 * r, 2 * r, 3 * r)]
    close(head.scores, [[2 * r, r, r], [r, r, 2 * r], [3 * r, 2 * r, 3 * r]])
    close(head.weights, weights)
    close(steps.output, [[w[0] + w[2], w[1] + w[2], w[0] + w[1]] for w in weights])
    assert steps.output.shape == (3, 3)


def test_additive() -> None:
    """q·W_query = [1, -1]; k·W_key = [0, 1], [1, 0], [-1, 1]; s = v·tanh(sum) with v = [1, 1], scale 1."""
    steps = solve("additive.yaml")
    (head,) = steps.heads
    t1, t2 = math.tanh(1), math.tanh(2)
    assert head.spec.score.kind == "additive"
    assert head.spec.score.scale == 1.0
    close(head.hidden[0], [[t1, 0], [t2, -t1], [0, 0]])
    close(head.scores, [[t1, t2 - t1, 0]])
    weights = softmax(t1, t2 - t1, 0)
    close(head.weights, [weights])
    # values the [1, 0], bank [0, 1], flooded [1, 1]
    close(steps.output, [[weights[0] + weights[2], weights[1] + weights[2]]])


def test_kv_cache() -> None:
    """One new query against four cached keys: scores 2, 1, 0, 1, so Σ e^s = e² + 2e + 1 = (e + 1)²."""
    steps = solve("kv_cache.yaml")
    (head,) = steps.heads
    z = (E + 1) ** 2
    weights = [E**2 / z, E / z, 1 / z, E / z]
    assert steps.problem.mask_rule.kind == "causal_lower_right"
    assert steps.problem.mask.tolist() == [[True] * 4]  # j ≤ 0 + 4 − 1
    close(head.scores, [[2, 1, 0, 1]])
    close(head.weights, [weights])
    # values [2, 0], [0, 2], [1, 1], [1, 0]
    close(steps.output, [[2 * weights[0] + weights[2] + weights[3], 2 * weights[1] + weights[2]]])
    assert [round(w, 4) for w in weights] == [0.5344, 0.1966, 0.0723, 0.1966]


def test_layers() -> None:
    """Layer 1 is the worked example in a 3-wide stream (one-hot x, W_O = [I | 0]); layer 2 reads LN(X₂), by hand."""
    steps = solve("layers.yaml")
    first, second = steps.layers
    z = E**2 + E + 1
    bank = [E**2 / z, E / z, 1 / z]
    close(first.attention.heads[0].weights, [[1 / 3] * 3, [1 / 3] * 3, bank])  # fisherman's and net's q are 0
    out = [2 * bank[0] + bank[2], 2 * bank[1] + bank[2]]  # [1.4205, 0.5795]
    stream = [[2, 1, 0], [1, 2, 0], [out[0], out[1], 1]]  # X₂ = x + Z·W_O, Z's rows [1, 1], [1, 1], out
    close(first.output, stream)
    # LayerNorm without affine: (x − mean)/√(var + ε); each row of X₂ has mean 1
    normed = []
    for row in stream:
        centred = [value - sum(row) / 3 for value in row]
        normed.append([value / math.sqrt(sum(c * c for c in centred) / 3 + 1e-5) for value in centred])
    close(second.normed, normed)
    assert [round(v, 4) for v in second.normed[2]] == [1.2247, -1.2247, 0]
    # W_Q = W_K = the first two coordinates, W_V = I: s = q·k/√2, softmax, Σ weight × v
    leaves = []
    for i, q in enumerate(normed):
        weights = softmax(*((q[0] * k[0] + q[1] * k[1]) * R2 for k in normed))
        mixed = [sum(w * v[c] for w, v in zip(weights, normed)) for c in range(3)]
        leaves.append([stream[i][c] + mixed[c] for c in range(3)])  # X₃ = X₂ + Attn(LN(X₂))
    close(steps.output, leaves)
    assert [round(v, 4) for v in steps.output[0]] == [3.0440, 0.6588, -0.7027]


def test_gqa() -> None:
    """Four query heads over two kv heads: head h reads kv head ⌊h·2/4⌋; each head's scores by hand."""
    steps = solve("gqa.yaml")
    assert [head.spec.kv_head for head in steps.heads] == [0, 0, 1, 1]
    assert steps.problem.kv_names == ("kv 1", "kv 2")
    first = [[2, 0], [0, 2], [1, 1]]  # kv 1's values; kv 2's are [1, 0], [0, 1], [1, 1]
    second = [[1, 0], [0, 1], [1, 1]]
    cases = [([2, 1, 0], first), ([0, 1, 1], first), ([1, 0, 1], second), ([0, 1, 1], second)]
    for head, (scores, values) in zip(steps.heads, cases):
        weights = softmax(*scores)
        close(head.scores, [scores])
        close(head.output, [[sum(w * v[c] for w, v in zip(weights, values)) for c in range(2)]])
    close(steps.heads[0].output, [[1.4205124847200243, 0.5794875152799758]])  # the worked example
    z = 1 + 2 * E
    close(steps.heads[1].weights, [[1 / z, E / z, E / z]])


def test_alibi() -> None:
    """Two heads, slopes 2^(−8h/2) = 1/16, 1/256, over distances 2, 1, 0 from bank's own position."""
    steps = solve("alibi.yaml")
    assert steps.problem.bias.slopes == (1 / 16, 1 / 256)
    for head, m in zip(steps.heads, (1 / 16, 1 / 256)):
        scores = [2 - 2 * m, 1 - m, 0]
        close(head.bias, [[-2 * m, -m, 0]])
        close(head.scaled, [[2, 1, 0]])
        close(head.scores, [scores])
        close(head.weights, [softmax(*scores)])


def test_bias() -> None:
    """b = [−1, 0, 1] evens the scores 2, 1, 0 out: weights 1/3, output the mean of the values."""
    steps = solve("bias.yaml")
    (head,) = steps.heads
    close(head.scores, [[1, 1, 1]])
    close(head.weights, [[1 / 3] * 3])
    close(steps.output, [[1, 1]])


def test_rope() -> None:
    """Quarter turns: q̃ = [−√2, 0], k̃ = [2, 0], [−1, 1], [0, −1]; the scores 2, 1, 0 of bank.yaml become −2, 1, 0."""
    steps = solve("rope.yaml")
    (head,) = steps.heads
    close(head.queries, [[math.sqrt(2), 0]])  # Q as given: the turn is a step of its own
    close(head.rotation.queries, [[-math.sqrt(2), 0]])
    close(head.rotation.keys, [[2, 0], [-1, 1], [0, -1]])
    close(head.rotation.key_angles, [[0], [math.pi / 2], [math.pi]])
    close(head.scores, [[-2, 1, 0]])
    weights = softmax(-2, 1, 0)
    close(head.weights, [weights])
    close(steps.output, [[2 * weights[0] + weights[2], 2 * weights[1] + weights[2]]])


def test_sinusoidal() -> None:
    """PE(m) = [sin m, cos m] for d = 2, added to x; identity projections, so q = k = v = x + PE."""
    steps = solve("sinusoidal.yaml")
    s1, c1, s2, c2 = math.sin(1), math.cos(1), math.sin(2), math.cos(2)
    x = [[2, 1], [1 + s1, 1 + c1], [s2, 1 + c2]]
    close(steps.problem.positions.encoding, [[0, 1], [s1, c1], [s2, c2]])
    (head,) = steps.heads
    close(head.keys, x)
    dots = [2 * s2 + 1 + c2, s2 * (1 + s1) + (1 + c2) * (1 + c1), s2**2 + (1 + c2) ** 2]
    close(head.dot, [dots])
    weights = softmax(*(d * R2 for d in dots))
    close(head.weights, [weights])
    close(steps.output, [[sum(w * row[c] for w, row in zip(weights, x)) for c in range(2)]])


def test_tiles() -> None:
    """Given scores 0, 1, 3, 2 (net and . masked), two keys a tile: tile 2 raises m from 1 to 3, so ℓ and o
    are multiplied by e^−2 before it adds e^0·v_mended + e^−1·v_his; tile 3 is masked whole."""
    steps = solve("tiles.yaml")
    (head,) = steps.heads
    trace = head.tiles
    assert steps.problem.tiles == 2 and trace.size == 2
    close(trace.running_max, [[1, 3, 3]])
    close(trace.rescale, [[0, E**-2, 1]])
    ell = 1 + 1 / E + E**-2 + E**-3
    close(trace.running_sum, [[1 + 1 / E, ell, ell]])
    o = [1 + 2 / E + E**-3, 1 + E**-2]  # e^−1·[1, 0] + [0, 1], rescaled by e^−2, + [1, 1] + e^−1·[2, 0]
    close(trace.accumulator, [[[1 / E, 1], o, o]])
    weights = softmax(0, 1, 3, 2)
    close(head.weights, [[*weights, 0, 0]])
    close(steps.output, [[weights[0] + weights[2] + 2 * weights[3], weights[1] + weights[2]]])
    close(trace.output, steps.output)
    close(head.logsumexp, [math.log(1 + E + E**2 + E**3)])


def test_bank_backward() -> None:
    """dO = [1, 0]: dV = [P_j, 0]; dP = 2, 0, 1 (the values' first coordinates); D = (2e² + 1)/z, the output's
    first coordinate; dS_j = P_j·(dP_j − D); dk_j = d(q·k)_j·[√2, 0] = [dS_j, 0]; dq = (1/√2)·Σ dS_j·k_j."""
    steps = solve("bank_backward.yaml")
    z = E**2 + E + 1
    p = [E**2 / z, E / z, 1 / z]
    d = (2 * E**2 + 1) / z
    ds = [p[0] * (2 - d), p[1] * (0 - d), p[2] * (1 - d)]
    record = steps.backward
    (head,) = record.heads
    assert record.loss is None
    close(record.grad_output, [[1, 0]])
    close(head.grad_values, [[p[0], 0], [p[1], 0], [p[2], 0]])
    close(head.grad_weights, [[2, 0, 1]])
    close(head.row_term, [d])
    close(steps.output[:, 0], [d])  # D = dO·O
    close(head.grad_scores, [ds])
    assert sum(ds) == pytest.approx(0, abs=TOLERANCE)  # every row of softmax's Jacobian sums to 0
    close(head.grad_dot, [[R2 * x for x in ds]])
    close(head.grad_keys, [[x, 0] for x in ds])
    close(head.grad_queries, [[R2 * (2 * ds[0] + ds[1]), R2 * (ds[1] + ds[2])]])
    # the and the README's rounded figures
    assert [round(x, 4) for x in head.grad_values[:, 0]] == [0.6652, 0.2447, 0.0900]
    assert [round(x, 4) for x in ds] == [0.3855, -0.3476, -0.0379]
    assert [round(x, 4) for x in head.grad_queries[0]] == [0.2994, -0.2726]


def _softmax_backward(weights: list[float], grad_weights: list[float]) -> list[float]:
    """dS_j = P_j·(dP_j − Σ_k P_k·dP_k), in plain Python."""
    row_term = sum(p * g for p, g in zip(weights, grad_weights))
    return [p * (g - row_term) for p, g in zip(weights, grad_weights)]


def test_two_heads_backward() -> None:
    """Causal; head 1 scores fisherman 2 (alone: weight 1), net 0, 1, bank 2, 1, 0; head 2 fisherman 0, net 2, 1,
    bank 0, 1, 1. d(concat) = dO·W_Oᵀ: head 1's dO is dO, head 2's dO/2; dK and dV add the heads' shares."""
    steps = solve("two_heads_backward.yaml")
    record = steps.backward
    keys, values = [[2, 0], [1, 1], [0, 1]], [[2, 0], [0, 2], [1, 1]]
    grad_output = [[1, 0], [0, 1], [1, 1]]
    z, y = E**2 + E + 1, 1 + 2 * E
    weights = [
        [[1, 0, 0], [1 / (1 + E), E / (1 + E), 0], [E**2 / z, E / z, 1 / z]],
        [[1, 0, 0], [E / (1 + E), 1 / (1 + E), 0], [1 / y, E / y, E / y]],
    ]
    queries = [[[math.sqrt(2), 0], [0, math.sqrt(2)], [math.sqrt(2), 0]],
               [[0, math.sqrt(2)], [math.sqrt(2), 0], [0, math.sqrt(2)]]]  # fmt: skip
    close(record.grad_concat, [[1, 0, 0.5, 0], [0, 1, 0, 0.5], [1, 1, 0.5, 0.5]])
    summed_keys, summed_values = np.zeros((3, 2)), np.zeros((3, 2))
    for h, (head, factor) in enumerate(zip(record.heads, (1.0, 0.5))):
        d_o = [[factor * x for x in row] for row in grad_output]
        close(head.grad_output, d_o)
        d_p = [[sum(a * b for a, b in zip(row, v)) for v in values] for row in d_o]
        close(head.grad_weights, d_p)
        d_s = [_softmax_backward(p, g) for p, g in zip(weights[h], d_p)]
        close(head.grad_scores, d_s)
        assert head.grad_scores[0].tolist() == [0, 0, 0]  # fisherman sees only itself: nothing to share out
        assert head.grad_scores[1, 2] == 0  # masked: net cannot see bank
        d_v = [[sum(weights[h][i][j] * d_o[i][c] for i in range(3)) for c in range(2)] for j in range(3)]
        close(head.grad_values, d_v)
        d_k = [[R2 * sum(d_s[i][j] * queries[h][i][c] for i in range(3)) for c in range(2)] for j in range(3)]
        close(head.grad_keys, d_k)
        d_q = [[R2 * sum(d_s[i][j] * keys[j][c] for j in range(3)) for c in range(2)] for i in range(3)]
        close(head.grad_queries, d_q)
        summed_keys += d_k
        summed_values += d_v
    shared = dict(record.shared)
    close(shared["grad_keys"], summed_keys)
    close(shared["grad_values"], summed_values)
    close(record.grad_w_o, steps.concat.T @ np.array(grad_output))
