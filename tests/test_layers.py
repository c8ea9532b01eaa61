"""Stacked layers (`layers:`) and attention rollout: against PyTorch, against plain Python, and at the edges.

PyTorch is a development tool only (never a dependency): without it the agreement tests are skipped.
Each stack is written as YAML from random numbers and solved by attncli; PyTorch computes every layer on
its own, each layer's attention with nn.MultiheadAttention or F.scaled_dot_product_attention given the
same weights, the norms with F.layer_norm (no affine) and F.rms_norm.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
from typer.testing import CliRunner

from attncli import layers, pipeline
from attncli.cli import app
from attncli.errors import AttnError
from attncli.layers import StackSteps
from attncli.problem import Stack
from attncli.render import latex
from attncli.steps import BY_NAME
from tests.paths import SAMPLES, STACK_SAMPLES
from tests.test_positions import REFERENCES
from tests.test_writeups import compile_log

TOLERANCE = 1e-12
EPS = 1e-5


@pytest.fixture(scope="module")
def torch() -> ModuleType:
    return pytest.importorskip("torch")


def solve(fields: dict) -> StackSteps:
    """The stack `fields` (numpy arrays become nested lists of exact floats), solved by attncli."""
    text = json.dumps(fields, default=lambda array: array.tolist())
    stack = pipeline.load(text=text, name="layers.yaml")
    assert isinstance(stack, Stack)
    return pipeline.solve(stack)


def refused(text: str) -> str:
    """The one line an AttnError prints for the problem `text`."""
    from attncli.i18n import describe

    with pytest.raises(AttnError) as caught:
        pipeline.solve(pipeline.load(text=text, name="stack.yaml"))
    return describe(caught.value)


def names(count: int) -> list[str]:
    return [f"t{i + 1}" for i in range(count)]


def random_layer(rng: np.random.Generator, d: int, heads: int, d_k: int, d_v: int, norm: dict | None) -> dict:
    layer: dict = {
        "heads": [
            {"w_q": rng.normal(size=(d, d_k)), "w_k": rng.normal(size=(d, d_k)), "w_v": rng.normal(size=(d, d_v))}
            for _ in range(heads)
        ],
        "w_o": rng.normal(size=(heads * d_v, d)),
    }
    return layer if norm is None else {**layer, "norm": norm}


def torch_norm(torch: ModuleType, x: object, norm: dict | None) -> object:
    F = torch.nn.functional
    eps = norm.get("eps", EPS)
    gain = torch.tensor(norm["gain"], dtype=torch.float64) if "gain" in norm else None
    if norm["type"] == "layer":
        bias = torch.tensor(norm["bias"], dtype=torch.float64) if "bias" in norm else None
        return F.layer_norm(x, (x.shape[-1],), weight=gain, bias=bias, eps=eps)
    return F.rms_norm(x, (x.shape[-1],), weight=gain, eps=eps)


def torch_attention(torch: ModuleType, x: object, layer: dict, causal: bool) -> object:
    """One layer's attention by SDPA: per head softmax(q·kᵀ/√d_k)·v, the heads side by side, then W_O.

    A layer with `positions: rope` has q and k turned first, by the published conventions (HF's rotate_half
    for half, RoFormer's complex form for interleaved), token m by m·θ_i.
    """
    F = torch.nn.functional
    outputs = []
    rope = layer.get("positions") if layer.get("positions", {}).get("type") == "rope" else None
    for head in layer["heads"]:
        q, k, v = (x @ torch.from_numpy(head[name]) for name in ("w_q", "w_k", "w_v"))
        if rope is not None:
            turn = REFERENCES[rope["style"]]
            at = np.arange(q.shape[0], dtype=float)
            q, k = (torch.from_numpy(turn(a.numpy(), at, rope["base"])) for a in (q, k))
        outputs.append(F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    return torch.cat(outputs, dim=-1) @ torch.from_numpy(layer["w_o"])


def torch_stack(torch: ModuleType, x: np.ndarray, stack: list[dict], causal: bool = False) -> list[np.ndarray]:
    """Each layer's output, X_{l+1} = X_l + Attn(N(X_l)) (pre), N(X_l + Attn(X_l)) (post) or X_l + Attn(X_l)."""
    stream, out = torch.from_numpy(x), []
    for layer in stack:
        norm = layer.get("norm")
        place = None if norm is None else norm.get("place", "pre")
        fed = torch_norm(torch, stream, norm) if place == "pre" else stream
        stream = stream + torch_attention(torch, fed, layer, causal)
        if place == "post":
            stream = torch_norm(torch, stream, norm)
        out.append(stream.numpy())
    return out


NORMS = {
    "none": None,
    "layer_pre": {"type": "layer", "place": "pre"},
    "layer_post": {"type": "layer", "place": "post", "eps": 1e-6},
    "rms_pre": {"type": "rms", "place": "pre"},
    "rms_post_gain": {"type": "rms", "place": "post", "gain": [0.5, 2.0, -1.0, 1.5]},
    "layer_affine": {"type": "layer", "gain": [1.5, 0.5, 2.0, -1.0], "bias": [0.1, -0.2, 0.3, 0.0]},
}


@pytest.mark.parametrize("norm", list(NORMS))
@pytest.mark.parametrize("causal", [False, True])
def test_stack_against_torch(torch: ModuleType, norm: str, causal: bool) -> None:
    """Three layers, two heads each (d_k = 3 ≠ d/H), residual and norm: every layer's stream as torch's."""
    rng = np.random.default_rng(len(norm) * 7 + causal)
    x = rng.normal(size=(5, 4))
    stack = [random_layer(rng, 4, 2, 3, 2, NORMS[norm]) for _ in range(3)]
    for layer in stack:
        if causal:
            layer["mask"] = "causal"
    steps = solve({"tokens": names(5), "x": x, "layers": stack})
    want = torch_stack(torch, x, stack, causal)
    errors = [float(np.abs(got.output - expected).max()) for got, expected in zip(steps.layers, want)]
    assert max(errors) <= TOLERANCE, errors
    assert np.abs(steps.output - want[-1]).max() <= TOLERANCE


@pytest.mark.parametrize("style", ["half", "interleaved"])
def test_rope_inside_every_layer_against_torch(torch: ModuleType, style: str) -> None:
    """Two layers, each turning its own projected q and k by RoPE, causal, with a pre-norm: as torch's."""
    rng = np.random.default_rng(31 if style == "half" else 32)
    x = rng.normal(size=(6, 4))
    stack = [random_layer(rng, 4, 2, 4, 2, NORMS["rms_pre"]) for _ in range(2)]
    for layer, base in zip(stack, (10000.0, 50.0)):
        layer["mask"] = "causal"
        layer["positions"] = {"type": "rope", "style": style, "base": base}
    steps = solve({"tokens": names(6), "x": x, "layers": stack})
    want = torch_stack(torch, x, stack, causal=True)
    errors = [float(np.abs(got.output - expected).max()) for got, expected in zip(steps.layers, want)]
    assert max(errors) <= TOLERANCE, errors
    unturned = solve({"tokens": names(6), "x": x, "layers": [{**layer, "positions": None} for layer in stack]})
    assert np.abs(unturned.output - want[-1]).max() > 100 * TOLERANCE  # the turn is really applied


def test_stack_by_multihead_attention(torch: ModuleType) -> None:
    """Two layers of nn.MultiheadAttention (d = 4, 2 heads of 2, no biases) with pre LayerNorm: the same streams."""
    rng = np.random.default_rng(3)
    x = rng.normal(size=(3, 4))
    stack = [random_layer(rng, 4, 2, 2, 2, {"type": "layer", "place": "pre"}) for _ in range(2)]
    steps = solve({"tokens": names(3), "x": x, "layers": stack})
    stream = torch.from_numpy(x)[None]  # (1, S, d): batch first
    for layer, got in zip(stack, steps.layers):
        mha = torch.nn.MultiheadAttention(4, 2, bias=False, batch_first=True, dtype=torch.float64)
        joined = {name: np.hstack([head[name] for head in layer["heads"]]) for name in ("w_q", "w_k", "w_v")}
        with torch.no_grad():
            mha.in_proj_weight.copy_(torch.from_numpy(np.vstack([joined[n].T for n in ("w_q", "w_k", "w_v")])))
            mha.out_proj.weight.copy_(torch.from_numpy(layer["w_o"].T))
            fed = torch.nn.functional.layer_norm(stream, (4,), eps=EPS)
            attended, weights = mha(fed, fed, fed, average_attn_weights=True)
            stream = stream + attended
        assert np.abs(got.output - stream[0].numpy()).max() <= TOLERANCE
        assert np.abs(layers.mean_weights(got.attention) - weights[0].numpy()).max() <= TOLERANCE


def plain_rollout(per_layer: list[list[list[list[float]]]]) -> list[list[float]]:
    """Abnar & Zuidema's rollout in plain Python: per layer Ã = ½·mean_h A + ½·I, rows renormalised; Ã_L···Ã_1."""
    size = len(per_layer[0][0])
    result = [[float(i == j) for j in range(size)] for i in range(size)]
    for heads in per_layer:
        mixed = [
            [0.5 * sum(head[i][j] for head in heads) / len(heads) + 0.5 * (i == j) for j in range(size)]
            for i in range(size)
        ]
        mixed = [[cell / sum(row) for cell in row] for row in mixed]
        result = [[sum(mixed[i][m] * result[m][j] for m in range(size)) for j in range(size)] for i in range(size)]
    return result


@pytest.mark.parametrize("count", [1, 2, 4])
def test_rollout_is_the_papers_formula(count: int) -> None:
    rng = np.random.default_rng(count)
    x = rng.normal(size=(4, 3))
    stack = [random_layer(rng, 3, 3, 2, 1, None) for _ in range(count)]
    stack[0]["mask"] = "causal"
    steps = solve({"tokens": names(4), "x": x, "layers": stack})
    want = plain_rollout([[head.weights.tolist() for head in layer.attention.heads] for layer in steps.layers])
    got = layers.rollout(steps.layers)
    assert np.abs(got - np.array(want)).max() <= TOLERANCE
    assert np.allclose(got.sum(axis=1), 1.0, rtol=0, atol=1e-12)  # each row still a distribution


def test_json_has_every_layer_and_the_rollout() -> None:
    result = CliRunner().invoke(app, ["compute", str(SAMPLES / "layers.yaml"), "-f", "json", "--rollout"])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    steps = pipeline.solve(pipeline.load(SAMPLES / "layers.yaml"))
    assert [layer["name"] for layer in doc["layers"]] == ["article", "normalised"]
    assert doc["layers"][0]["norm"] is None and doc["layers"][0]["normed"] is None
    assert doc["layers"][1]["norm"] == {"type": "layer", "place": "pre", "eps": 1e-5, "gain": None, "bias": None}
    assert doc["layers"][1]["normed"] == steps.layers[1].normed.tolist()  # every digit
    assert doc["layers"][1]["attention"]["heads"][0]["weights"] == steps.layers[1].attention.heads[0].weights.tolist()
    assert doc["output"] == steps.output.tolist()
    assert doc["rollout"] == layers.rollout(steps.layers).tolist()


@pytest.mark.parametrize("sample", sorted(STACK_SAMPLES))
def test_every_stack_sample_in_every_format_carries_the_numbers(sample: str) -> None:
    """JSON and npy hold the last bit; text, rich, Markdown and LaTeX show each layer's streams and weights rounded."""
    path = str(SAMPLES / sample)
    steps = pipeline.solve(pipeline.load(path))
    runner = CliRunner()
    doc = json.loads(runner.invoke(app, ["compute", path, "-f", "json"]).stdout)
    assert doc["output"] == steps.output.tolist()
    npy = runner.invoke(app, ["compute", path, "-f", "npy", "-o", "/dev/stdout"])
    assert npy.exit_code == 0
    rounded = [f"{x:.4f}".replace("-0.0000", "0.0000") for layer in steps.layers for x in layer.output.ravel()]
    rounded += [f"{w:.4f}" for layer in steps.layers for head in layer.attention.heads for w in head.weights.ravel()]
    for fmt in ("text", "rich", "markdown", "latex"):
        shown = runner.invoke(app, ["compute", path, "-f", fmt, "--rollout"], env={"COLUMNS": "100"})
        assert shown.exit_code == 0, shown.stderr
        assert [number for number in rounded if number not in shown.stdout] == [], fmt
        spanish = runner.invoke(app, ["compute", path, "-f", fmt, "--lang", "es"], env={"COLUMNS": "100"})
        assert "Capa 1 de" in spanish.stdout, fmt


@pytest.mark.parametrize("sample", sorted(STACK_SAMPLES))
def test_a_stack_in_csv_holds_every_layers_numbers_as_json_does(sample: str) -> None:
    """Long CSV and wide TSV of a stack: each layer's streams and weights to the last bit, as JSON gives them."""
    path = str(SAMPLES / sample)
    runner = CliRunner()
    doc = json.loads(runner.invoke(app, ["compute", path, "-f", "json"]).stdout)
    table = list(csv.DictReader(io.StringIO(runner.invoke(app, ["compute", path, "-f", "csv"]).stdout)))
    assert list(table[0]) == ["layer", "step", "head", "query", "key", "index", "value"]
    tokens = doc["tokens"]
    for number, layer in enumerate(doc["layers"]):
        mine = [row for row in table if row["layer"] == str(number)]
        for step, name in (("input", "input"), ("normed", "normed"), ("residual", "residual"), ("stream", "output")):
            cells = {(row["query"], int(row["index"])): float(row["value"]) for row in mine if row["step"] == step}
            expected = (
                {}
                if layer[name] is None
                else {(tokens[i], j): x for i, r in enumerate(layer[name]) for j, x in enumerate(r)}
            )
            assert cells == expected, (number, step)
        for h, head in enumerate(layer["attention"]["heads"]):
            weights = [row for row in mine if row["step"] == "weights" and row["head"] == str(h)]
            assert [float(row["value"]) for row in weights] == [w for r in head["weights"] for w in r]
    last = [row for row in table if row["layer"] == str(len(doc["layers"]) - 1) and row["step"] == "stream"]
    assert [float(row["value"]) for row in last] == [x for r in doc["output"] for x in r]
    wide = runner.invoke(app, ["compute", path, "-f", "tsv", "--csv-layout", "wide"]).stdout
    first = wide.split("\n\n", 1)[0].splitlines()
    assert first[0] == "layer\t0\tinput" and first[1].split("\t")[0] == "query"
    assert [[float(x) for x in line.split("\t")[1:]] for line in first[2:]] == doc["layers"][0]["input"]
    blocks = wide.split("\n\n")
    assert sum(block.startswith("layer\t") for block in blocks) == len(blocks)


@pytest.mark.skipif(__import__("shutil").which("pdflatex") is None, reason="pdflatex is not installed")
def test_the_stack_latex_compiles(tmp_path: Path) -> None:
    """The LaTeX of a stack, with the rollout, compiles with pdflatex (only Latin-1, math where it is math)."""
    steps = pipeline.solve(pipeline.load(SAMPLES / "layers.yaml"))
    source = latex.render_stack(steps, 4, None, None, layers.rollout(steps.layers))
    assert all(ord(char) < 256 for char in source)
    compile_log(tmp_path, source)


def test_layer_focus_and_rollout_in_the_view() -> None:
    """--layer 2 shows layer 2 alone (fed by layer 1), --rollout adds the map and its caution."""
    args = ["compute", str(SAMPLES / "layers.yaml"), "-f", "text"]
    whole = CliRunner().invoke(app, args, env={"COLUMNS": "100"})
    focus = CliRunner().invoke(app, [*args, "--layer", "2", "--rollout"], env={"COLUMNS": "100"})
    assert whole.exit_code == focus.exit_code == 0, focus.stderr
    assert "Layer 1 of 2: article" in whole.stdout and "Layer 2 of 2" in whole.stdout
    assert "Layer 1 of 2" not in focus.stdout and "Layer 2 of 2: normalised" in focus.stdout
    assert "[1.4205, 0.5795, 1.0000]" in focus.stdout  # the stream layer 2 reads, from layer 1
    assert "Attention rollout through layer 2" in focus.stdout and "heuristic" in focus.stdout


def sample_by_hand() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """samples/layers.yaml in plain numpy: the stream layer 1 leaves (X₂), layer 2's weights and its output (X₃)."""

    def attend(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = q @ k.T / np.sqrt(k.shape[1])
        w = np.exp(s - s.max(axis=1, keepdims=True))
        w /= w.sum(axis=1, keepdims=True)
        return w, w @ v

    x = np.eye(3)
    _, z = attend(x @ [[0, 0], [0, 0], [np.sqrt(2), 0]], x @ [[2, 0], [1, 1], [0, 1]], x @ [[2, 0], [0, 2], [1, 1]])
    x2 = x + z @ [[1, 0, 0], [0, 1, 0]]
    normed = (x2 - x2.mean(axis=1, keepdims=True)) / np.sqrt(x2.var(axis=1, keepdims=True) + 1e-5)
    projection = [[1, 0], [0, 1], [0, 0]]
    w2, z2 = attend(normed @ projection, normed @ projection, normed)
    return x2, w2, x2 + z2


def test_layer_selects_that_layer_in_json_csv_and_npy(tmp_path: Path) -> None:
    """--layer N was honoured by the human formats alone: JSON and CSV still held both layers, npy the last stream."""
    x2, w2, x3 = sample_by_hand()
    args = ["compute", str(SAMPLES / "layers.yaml")]
    runner = CliRunner()
    doc = json.loads(runner.invoke(app, [*args, "--layer", "2", "-f", "json"]).stdout)
    assert doc["layer"] == 2 and [layer["name"] for layer in doc["layers"]] == ["normalised"]
    np.testing.assert_allclose(doc["layers"][0]["attention"]["heads"][0]["weights"], w2, rtol=0, atol=TOLERANCE)
    np.testing.assert_allclose(doc["output"], x3, rtol=0, atol=TOLERANCE)
    first = json.loads(runner.invoke(app, [*args, "--layer", "1", "-f", "json"]).stdout)
    assert [layer["name"] for layer in first["layers"]] == ["article"]
    np.testing.assert_allclose(first["output"], x2, rtol=0, atol=TOLERANCE)  # the stream layer 1 leaves
    assert "layer" not in json.loads(runner.invoke(app, [*args, "-f", "json"]).stdout)
    table = list(csv.DictReader(io.StringIO(runner.invoke(app, [*args, "--layer", "1", "-f", "csv"]).stdout)))
    assert {row["layer"] for row in table} == {"0"}  # its place in the stack, from 0 as in the whole stack's CSV
    stream = [float(row["value"]) for row in table if row["step"] == "stream"]
    np.testing.assert_allclose(stream, x2.ravel(), rtol=0, atol=TOLERANCE)
    wide = runner.invoke(app, [*args, "--layer", "2", "-f", "tsv", "--csv-layout", "wide"]).stdout
    assert {block.split("\t")[1] for block in wide.split("\n\n")} == {"1"}
    out = tmp_path / "one.npy"
    assert runner.invoke(app, [*args, "--layer", "1", "-f", "npy", "-o", str(out)]).exit_code == 0
    np.testing.assert_allclose(np.load(out), x2, rtol=0, atol=TOLERANCE)


def test_rollout_is_in_the_csv_too() -> None:
    """--rollout was left out of CSV: now its rows `rollout` (query, key) sit under the last layer it multiplies."""
    steps = pipeline.solve(pipeline.load(SAMPLES / "layers.yaml"))
    want = plain_rollout([[head.weights.tolist() for head in layer.attention.heads] for layer in steps.layers[:1]])
    args = ["compute", str(SAMPLES / "layers.yaml"), "--layer", "1", "--rollout", "-f", "csv"]
    table = list(csv.DictReader(io.StringIO(CliRunner().invoke(app, args).stdout)))
    rows = [row for row in table if row["step"] == "rollout"]
    first = [(row["layer"], row["query"], row["key"]) for row in rows[:2]]
    assert first == [("0", "fisherman", "fisherman"), ("0", "fisherman", "net")]
    np.testing.assert_allclose([float(row["value"]) for row in rows], np.ravel(want), rtol=0, atol=TOLERANCE)


def test_layer_and_rollout_figure_draws_that_layer(tmp_path: Path) -> None:
    """`--layer 2 --figure` was refused as if no layer were picked: now it draws layer 2's weights (and the
    rollout through it); without --layer a stack's figure is refused, naming --layer."""
    pytest.importorskip("matplotlib")
    from tests.test_figures import svg_texts

    _, w2, _ = sample_by_hand()
    out = tmp_path / "layer.svg"
    args = ["compute", str(SAMPLES / "layers.yaml"), "--layer", "2", "--rollout", "--figure", str(out), "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.stderr
    texts = svg_texts(out)
    assert "Layer 2 of 2: normalised" in texts and "attention rollout through layer 2" in texts
    assert [f"{w:.2f}" for w in w2.ravel() if f"{w:.2f}" not in texts] == []
    assert "0.56" in texts  # the rollout's fisherman row starts 0.5586 (README)


def test_rollout_shows_each_table_once_and_says_what_its_bars_scale() -> None:
    """Layer 2 of layers.yaml has one head: its weight table was printed twice (as "the mean over its heads"),
    and the rollout's legend spoke of "this head's largest weight". A layer of two heads keeps its mean table."""
    args = ["compute", str(SAMPLES / "layers.yaml"), "--layer", "2", "--rollout", "-f", "text"]
    text = CliRunner().invoke(app, args, env={"COLUMNS": "100"}).stdout
    assert text.count("fisherman    0.4262") == 1 and "the mean over its heads" not in text
    assert text.count("this head's largest weight") == 1 and text.count("of the largest rollout weight") == 1
    rng = np.random.default_rng(3)
    stack = [random_layer(rng, 3, 2, 2, 2, None) for _ in range(2)]
    steps = solve({"tokens": names(3), "x": rng.normal(size=(3, 3)), "layers": stack})
    from attncli import render
    from attncli.render.layout import to_text

    lines = render.stack_lines(steps, layer=2, rollout=layers.rollout(steps.layers))(100)
    shown = to_text(lines)
    assert "Layer 2's weights, the mean over its heads" in shown
    assert shown.count("of the largest of these mean weights") == 1 and shown.count("of this head's") == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--layer", "3"], "--layer 3: the problem has layers 1 to 2"),
        (["--layer", "0"], "--layer 0: the problem has layers 1 to 2"),
        (["-f", "npz"], "npz does not show stacked layers yet"),
        (["--figure", "f.svg"], "--figure: a figure draws one layer of a stack: add --layer N (1 to 2)"),
        (["--norms"], "not computed for stacked layers yet"),
        (["--mask", "causal"], "--mask: mask: belongs to each layer under layers:"),
        (["--follow", "boat"], "--follow boat: not a query token"),
    ],
)
def test_options_refused_with_layers(args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["compute", str(SAMPLES / "layers.yaml"), *args])
    assert result.exit_code == 2
    assert message in result.stderr


@pytest.mark.parametrize("option", ["--layer", "--rollout"])
def test_layer_options_need_layers(option: str) -> None:
    extra = ["1"] if option == "--layer" else []
    result = CliRunner().invoke(app, ["compute", str(SAMPLES / "bank.yaml"), option, *extra])
    assert result.exit_code == 2
    assert f"{option} needs a problem with layers:" in result.stderr


STACK = """tokens: [a, b]
x: [[1, 0], [0, 1]]
layers:
  - w_q: [[1, 0], [0, 1]]
    w_k: [[1, 0], [0, 1]]
    w_v: [[1, 0], [0, 1]]
  - name: second
"""  # a stack whose second layer (line 7) gets the fields of each case, from line 8 on
PROJECTIONS = {"w_q": "[[1, 0], [0, 1]]", "w_k": "[[1, 0], [0, 1]]", "w_v": "[[1, 0], [0, 1]]"}


def vaswani(count: int, d: int, base: float) -> np.ndarray:
    """Vaswani et al. §3.5 in plain Python, token m at m: PE(m, 2i) = sin(m/base^(2i/d)), PE(m, 2i + 1) = cos(…)."""
    return np.array(
        [
            [(math.sin if c % 2 == 0 else math.cos)(m / base ** ((c - c % 2) / d)) for c in range(d)]
            for m in range(count)
        ]
    )


SINUSOIDAL_STACK = STACK.replace("  - name: second\n", "    positions: sinusoidal\n")  # issue 22's repro


def test_sinusoidal_positions_in_a_layer_are_added_to_what_its_projections_read() -> None:
    """The issue's repro by hand: q = k = v = x + PE, s = [2, 1 + sin 1 + cos 1]/√2 for token a, so its
    attention is [0.91010, 1.30640] (the one-layer problem's number); the stream gains that, not PE."""
    steps = pipeline.solve(pipeline.load(text=SINUSOIDAL_STACK, name="stack.yaml"))
    scores = np.array([2, 1 + math.sin(1) + math.cos(1)]) / math.sqrt(2)
    weights = np.exp(scores) / np.exp(scores).sum()
    by_hand = weights @ np.array([[1, 1], [math.sin(1), 1 + math.cos(1)]])
    (layer,) = steps.layers
    assert np.abs(layer.attention.output[0] - by_hand).max() <= TOLERANCE
    assert np.abs(by_hand - [0.91010, 1.30640]).max() < 5e-6
    one_layer = pipeline.solve(pipeline.load(text=SINUSOIDAL_STACK.replace("layers:\n  - ", "").replace("    ", "")))
    assert np.abs(layer.attention.output - one_layer.output).max() <= TOLERANCE
    assert np.abs(layer.output - (np.eye(2) + one_layer.output)).max() <= TOLERANCE  # x itself is the stream


@pytest.mark.parametrize("norm", ["none", "layer_pre", "rms_post_gain"])
def test_sinusoidal_inside_every_layer_against_torch(torch: ModuleType, norm: str) -> None:
    """Two layers each adding PE (bases 10000 and 30) to what its projections read, N(X_l) or X_l, through
    SDPA in torch: every stream as torch's, and far from the stack without positions."""
    rng = np.random.default_rng(41 + len(norm))
    x = rng.normal(size=(5, 4))
    stack = [random_layer(rng, 4, 2, 3, 2, NORMS[norm]) for _ in range(2)]
    for layer, base in zip(stack, (10000.0, 30.0)):
        layer["positions"] = {"type": "sinusoidal", "base": base}
    steps = solve({"tokens": names(5), "x": x, "layers": stack})
    stream = torch.from_numpy(x)
    for layer, got in zip(stack, steps.layers):
        place = None if layer.get("norm") is None else layer["norm"].get("place", "pre")
        fed = torch_norm(torch, stream, layer["norm"]) if place == "pre" else stream
        pe = torch.from_numpy(vaswani(5, 4, layer["positions"]["base"]))
        stream = stream + torch_attention(torch, fed + pe, layer, causal=False)
        if place == "post":
            stream = torch_norm(torch, stream, layer["norm"])
        assert np.abs(got.output - stream.numpy()).max() <= TOLERANCE
        assert np.abs(got.attention.problem.positions.x - fed.numpy()).max() <= TOLERANCE  # what the tables show
    plain = solve({"tokens": names(5), "x": x, "layers": [{**layer, "positions": None} for layer in stack]})
    assert np.abs(plain.output - steps.output).max() > 1e-3


def test_every_format_shows_the_stream_a_layer_adds_its_positions_to() -> None:
    """Layer 2 of a stack: its table of x, PE(m), x + PE(m) starts from X₂ (not the stack's x) in text,
    Markdown and LaTeX; JSON's queries are (X₂ + PE)·W_Q to the last bit."""
    second = "w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[2, 0], [0, 2]]"
    text = f"{SINUSOIDAL_STACK}  - {{{second}, positions: {{type: sinusoidal, base: 100}}}}\n"
    steps = pipeline.solve(pipeline.load(text=text))
    layer = steps.layers[1]
    total = layer.input + vaswani(2, 2, 100)  # (S, d) X₂ + PE
    shown = [f"[{a:.4f}, {b:.4f}]" for a, b in total] + [f"[{a:.4f}, {b:.4f}]" for a, b in layer.input]
    runner = CliRunner()
    for fmt in ("text", "markdown", "latex"):
        result = runner.invoke(app, ["compute", "-", "-f", fmt], input=text, env={"COLUMNS": "120"})
        assert result.exit_code == 0, result.stderr
        written = result.stdout.split("Layer 2 of 2")[-1] if fmt != "latex" else result.stdout
        assert [row for row in shown if row.replace("-", "−" if fmt == "latex" else "-") not in written] == [], fmt
    doc = json.loads(runner.invoke(app, ["compute", "-", "-f", "json"], input=text).stdout)
    queries = doc["layers"][1]["attention"]["heads"][0]["queries"]
    assert queries == layer.attention.heads[0].queries.tolist()
    assert np.abs(np.array(queries) - total).max() <= TOLERANCE


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"w_q": "[[1, 0], [0, 1], [1, 1]]"}, "stack.yaml:8: layers[2].w_q: 3 rows, expected 2 (the width of x)"),
        ({"w_v": "[[1], [0]]"}, "stack.yaml:7: layers[2]: the heads' values give 1 number per token, expected 2"),
        ({"w_o": "[[1, 0, 0], [0, 1, 0]]"}, "stack.yaml:11: layers[2].w_o: 3 columns, expected 2"),
        ({"norm": "batch"}, "stack.yaml:11: layers[2].norm: expected one of layer, rms, got the text 'batch'"),
        ({"norm": "{type: layr}"}, "layers[2].norm.type: expected one of layer, rms, got the text 'layr'; did you"),
        ({"norm": "{type: rms, place: middle}"}, "layers[2].norm.place: expected one of pre, post, got the text"),
        ({"norm": "{type: layer, eps: 0}"}, "stack.yaml:11: layers[2].norm.eps: eps must be a number above 0"),
        ({"norm": "{type: layer, eps: -1e-5}"}, "layers[2].norm.eps: eps must be a number above 0"),
        ({"norm": "{type: layer, eps: tiny}"}, "layers[2].norm.eps: "),
        ({"norm": "{type: rms, bias: [0, 0]}"}, "layers[2].norm.bias: RMSNorm has no bias"),
        ({"norm": "{type: layer, gain: [1, 2, 3]}"}, "layers[2].norm.gain: 3 numbers, expected 2 (the width of x)"),
        ({"norm": "{place: pre}"}, "layers[2].norm: a norm needs type: (layer, rms)"),
        ({"norm": "[layer]"}, "layers[2].norm: expected layer, rms or a mapping with type:, got a list of 1"),
        ({"norm": "{type: layer, scale: 2}"}, "layers[2].norm.scale: unknown field 'scale'"),
        ({"values": "[[1, 0], [0, 1]]"}, "layers[2].values: a layer computes its values from the residual stream"),
        ({"heads": "[{scores: [[1, 0], [0, 1]]}]"}, "stack.yaml:11: layers[2].heads[1].scores: a layer computes"),
        ({"query_tokens": "[a]"}, "stack.yaml:11: layers[2].query_tokens: unknown field"),
        ({"mask": "sideways"}, "stack.yaml:11: layers[2].mask: expected none, causal"),
    ],
)
def test_bad_layer_named_by_file_line_and_field(fields: dict, message: str) -> None:
    """Each bad field of layer 2 is named with its line and its whole path."""
    written = {**PROJECTIONS, **fields}
    text = STACK + "".join(f"    {name}: {value}\n" for name, value in written.items())
    assert message in refused(text)


def test_top_level_fields_of_a_stack() -> None:
    assert "stack.yaml:3: heads: belongs to each layer under layers:" in refused(
        "tokens: [a]\nx: [[1]]\nheads: []\nlayers: [{w_q: [[1]], w_k: [[1]], w_v: [[1]]}]\n"
    )
    assert "layers: layers need the inputs x" in refused(
        "tokens: [a]\nlayers: [{w_q: [[1]], w_k: [[1]], w_v: [[1]]}]\n"
    )
    assert "layers: layers must be a list of mappings, one per layer, got a list of 0" in refused(
        "tokens: [a]\nx: [[1]]\nlayers: []\n"
    )


def test_overflow_names_the_layer() -> None:
    """Finite inputs that multiply past float64's range in layer 2 are an error naming layer 2, not inf."""
    text = (
        "tokens: [a, b]\nx: [[1e300, 0], [0, 1]]\nlayers:\n"
        + "  - {w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1e10, 0], [0, 1]]}\n"
    )
    assert "layers[1]." in refused(text)
    projections = "w_q: [[1, 0], [0, 1]], w_k: [[1, 0], [0, 1]], w_v: [[1, 0], [0, 1]]"
    norm = f"tokens: [a, b]\nx: [[1e200, 0], [0, 1]]\nlayers:\n  - {{norm: rms, {projections}}}\n"
    assert "layers[1].norm" in refused(norm)


def test_python_api() -> None:
    """load gives a Stack, solve its steps; `result` (npy) is the last layer's stream."""
    stack = pipeline.load(SAMPLES / "layers.yaml")
    steps = pipeline.solve(stack)
    assert isinstance(steps, StackSteps) and len(steps.layers) == 2
    assert pipeline.result(stack).tolist() == steps.output.tolist()
    fed = layers.feed(stack.layers[1].attention, steps.layers[1].normed)
    assert pipeline.solve(fed).output.tolist() == steps.layers[1].attention.output.tolist()


# Exercises and checking: generate --layers, templates and keys with answers per layer, the stack's slips

GENERATED = [
    ("--layers", "2"),
    ("--layers", "2", "--norm", "layer"),
    ("--layers", "3", "--norm", "rms:post", "--heads", "2"),
    ("--layers", "2", "--norm", "layer:post", "--mask", "causal", "--tokens", "4"),
]


def generated(tmp_path: Path, options: tuple[str, ...], seed: int) -> Path:
    result = CliRunner().invoke(app, ["generate", *options, "--seed", str(seed), "--answers"])
    assert result.exit_code == 0, result.stderr
    key = tmp_path / f"key-{'_'.join(options).replace(':', '-')}-{seed}.yaml"
    key.write_text(result.stdout, encoding="utf-8")
    return key


def check_json(files: list[Path], key: Path) -> list[dict]:
    """`check --format json` over `files` against `key`: one object per file, in order."""
    result = CliRunner().invoke(app, ["check", *map(str, files), "--key", str(key), "--format", "json"])
    assert result.exit_code in (0, 1), result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


@pytest.mark.parametrize("options", GENERATED, ids=" ".join)
def test_a_generated_stack_key_grades_itself_right_and_its_template_blank(tmp_path: Path, options: tuple) -> None:
    key = generated(tmp_path, options, 11)
    stack = pipeline.load(key)
    assert isinstance(stack, Stack) and len(stack.layers) == int(options[1])
    (doc,) = check_json([key], key)
    assert doc["status"] == "right"
    assert {step["layer"] for step in doc["steps"]} == set(range(len(stack.layers)))
    assert [step["step"] for step in doc["steps"] if step["layer"] == 0][-1] == "stream"
    blank = CliRunner().invoke(app, ["template", str(key)])
    template = tmp_path / "blank.yaml"
    template.write_text(blank.stdout, encoding="utf-8")
    (empty,) = check_json([template], key)
    # the key requires every step (require: all, issue 27): an untouched template is incomplete, every step missing
    required = [step for step in empty["steps"] if not BY_NAME[step["step"]].aside]  # a norm's mean and root: optional
    assert empty["status"] == "incomplete" and all(step["status"] == "missing" for step in required)


def test_the_stack_students_are_graded_as_they_worked(tmp_path: Path) -> None:
    """The replayed students of tests/replays/layers.py: the careful one right; a slip named at its layer's stream
    (or, for the norm placed wrong, where the layer first reads it), every layer before it right, after it carried."""
    from tests.replays.layers import students

    failures = []
    for options in GENERATED:
        for seed in (1, 2):
            key = generated(tmp_path, options, seed)
            cases = students(str(key))
            files = []
            for name, _, text in cases:
                files.append(tmp_path / f"{key.stem}-{name.replace('@', '-at-')}.yaml")
                files[-1].write_text(text, encoding="utf-8")
            for (name, work, _), doc in zip(cases, check_json(files, key)):
                wrong = [step for step in doc["steps"] if step["status"] == "wrong"]
                if work.slip is None:
                    fine = doc["status"] == "right"
                else:
                    named = all(step["layer"] == work.at and work.slip in step["diagnosis"] for step in wrong)
                    before = all(step["status"] == "right" for step in doc["steps"] if step["layer"] < work.at)
                    fine = bool(wrong) and named and before
                if not fine:
                    failures.append((key.name, name, [(s["layer"], s["step"], s["diagnosis"]) for s in wrong]))
    assert failures == []


def test_a_class_report_of_stacks_gives_each_layer_s_steps_a_column(tmp_path: Path) -> None:
    """`check --format markdown` over stacked students (tests/replays/layers.py): a column per step of each layer in
    the order of the JSON report, each file's marks as JSON grades it (it exited 70 on a layer's steps)."""
    from tests.replays.layers import students

    key = generated(tmp_path, ("--layers", "2", "--norm", "layer"), 11)
    files = []
    chosen = ("careful-every", "residual_forgotten@0", "norm_misplaced@0")  # every step, and a slip at layer 1
    for name, _, text in (student for student in students(str(key)) if student[0] in chosen):
        files.append(tmp_path / f"{name.replace('@', '-at-')}.yaml")
        files[-1].write_text(text, encoding="utf-8")
    docs = check_json(files, key)
    result = CliRunner().invoke(app, ["check", *map(str, files), "--key", str(key), "--format", "markdown"])
    assert result.exit_code == 1, result.stderr
    lines = result.stdout.splitlines()[2 : 4 + len(files)]
    header, _, *rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]
    order = [(step["layer"], step["step"], step["head"]) for step in docs[0]["steps"]]  # the careful file: every step
    steps = slice(2, -3)  # after file and status; before cells right, points and note
    assert [column.rsplit("(layer ", 1)[1] for column in header[steps]] == [f"{layer + 1})" for layer, _, _ in order]
    marks = {"right": "✓", "carried": "↷", "rounded": "≈", "wrong": "✗", "not_answered": "?", "missing": "—"}
    for row, doc in zip(rows, docs):
        graded = {(step["layer"], step["step"], step["head"]): marks[step["status"]] for step in doc["steps"]}
        assert [cell[:1] for cell in row[steps]] == [graded.get(key, "") for key in order]
    assert [doc["status"] for doc in docs] == ["right", "wrong", "incomplete"]  # norm_misplaced: no layer-1 normed


def test_stack_answers_refused_where_they_cannot_be_read(tmp_path: Path) -> None:
    key = generated(tmp_path, ("--layers", "2"), 3)
    for answers, message in (
        ("answers:\n  layers: 2\n", "answers.layers: layers must be a list of mappings, one per layer answered"),
        ("answers:\n  layers: [{}, {}, {}]\n", "answers.layers: 3 layers answered, but the problem has 2"),
        ("answers:\n  layers:\n    - normed: [[1, 2, 3]]\n", "answers.layers[1].normed: this layer has no normed step"),
        ("answers:\n  weights: [[1]]\n", "answers.weights: unknown field 'weights'"),
    ):
        homework = tmp_path / "homework.yaml"
        homework.write_text(answers, encoding="utf-8")
        result = CliRunner().invoke(app, ["check", str(homework), "--key", str(key), "--format", "json"])
        assert message in result.stdout + result.stderr, (answers, result.stdout, result.stderr)


def test_every_stack_code_has_a_diagnosis_and_a_hint_in_both_languages() -> None:
    from attncli import grading
    from attncli.grading import layers as layer_grading
    from attncli.i18n import en, es

    assert not set(layer_grading.CODES) & set(grading.CODES)
    for code in layer_grading.CODES:
        for catalogue in (en.MESSAGES, es.MESSAGES):
            assert catalogue[f"check.diagnosis.{code}"] and catalogue[f"check.hint.{code}"]


def test_a_true_number_is_right_even_where_the_students_inputs_were_wrong(tmp_path: Path) -> None:
    """Layer 1's attention output written wrong for fisherman ([1, 1, 0.5]; truth [1, 1, 0]), then its stream
    written true ([2, 1, 0]): every cell equal to the truth is right; the two that also follow from the student's
    own wrong output were carried (↷) before, as if the true number were a consequence of the mistake."""
    text = (SAMPLES / "layers.yaml").read_text(encoding="utf-8")
    final = "{fisherman: [1, 1, 0.5], net: [1, 1, 0], bank: [1.4205, 0.5795, 0]}"
    answers = f"answers:\n  layers:\n    - final: {final}\n      stream: {{fisherman: [2, 1, 0]}}\n"
    homework = tmp_path / "homework.yaml"
    homework.write_text(text + answers, encoding="utf-8")
    result = CliRunner().invoke(app, ["check", str(homework), "--format", "json"])
    stream = next(step for step in json.loads(result.stdout)["steps"] if step["step"] == "stream")
    assert [cell["status"] for cell in stream["cells"] if cell["given"] is not None] == ["right", "right", "right"]
