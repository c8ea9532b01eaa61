"""`--tiles B` and `--stable` on compute: the online softmax (attncli.tiles) and the log-sum-exp, in every format.

Hand numbers come from closed forms written here (e^−1, ln(e² + e + 1), ...); PyTorch, where
installed, is the oracle for every tile size and every kind of mask (float64, 1e-12).
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from attncli import pipeline, tiles
from attncli.cli import app
from attncli.errors import AttnError
from tests.paths import ROOT, SAMPLES
from tests.refusals import refused
from tests.test_spanish import english

E = math.e
TOLERANCE = 1e-12
BANK = str(SAMPLES / "bank.yaml")
BANK_TEXT = (SAMPLES / "bank.yaml").read_text(encoding="utf-8")
SCREEN = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "LANGUAGE": None, "NO_COLOR": "1", "COLUMNS": "200"}


def run(*args: str, lang: str = "en") -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["compute", *args, "--lang", lang], env=SCREEN)
    return result.exit_code, result.stdout, result.stderr


def close(got: object, want: object) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=float), np.asarray(want, dtype=float), rtol=0, atol=TOLERANCE)


def bank_tiles(size: int) -> tiles.Tiles:
    return pipeline.solve(pipeline.load(BANK, {"tiles": size})).heads[0].tiles


# The article's example by hand: scores 2, 1, 0; values [2, 0], [0, 2], [1, 1]


def test_the_article_example_one_key_a_tile() -> None:
    """After fisherman m = 2, ℓ = 1, o = [2, 0]; after net ℓ = 1 + e^−1, o = [2, 2e^−1]; after bank
    ℓ = 1 + e^−1 + e^−2, o = [2 + e^−2, 2e^−1 + e^−2]; o/ℓ the output, L = ln(e² + e + 1)."""
    trace = bank_tiles(1)
    close(trace.maxima, [[2, 1, 0]])
    close(trace.running_max, [[2, 2, 2]])
    close(trace.rescale, [[0, 1, 1]])  # the first tile has nothing to rescale
    close(trace.running_sum, [[1, 1 + 1 / E, 1 + 1 / E + E**-2]])
    close(trace.accumulator, [[[2, 0], [2, 2 / E], [2 + E**-2, 2 / E + E**-2]]])
    z = E**2 + E + 1
    close(trace.output, [[(2 * E**2 + 1) / z, (2 * E + 1) / z]])
    close(trace.logsumexp, [math.log(z)])
    assert [f"{x:.4f}" for x in trace.running_sum[0]] == ["1.0000", "1.3679", "1.5032"]
    assert [f"{x:.4f}" for x in trace.accumulator[0, 2]] == ["2.1353", "0.8711"]
    assert f"{trace.logsumexp[0]:.4f} {z:.4f}" == "2.4076 11.1073"


def test_two_keys_a_tile_then_one() -> None:
    """Tile 1 (fisherman, net): m = 2, α = 0, ℓ = 1 + e^−1, o = [2, 2e^−1]; tile 2 (bank) keeps m: α = 1."""
    trace = bank_tiles(2)
    assert [span.start for span in trace.spans()] == [0, 2]
    close(trace.maxima, [[2, 0]])
    close(trace.rescale, [[0, 1]])
    close(trace.running_sum, [[1 + 1 / E, 1 + 1 / E + E**-2]])
    close(trace.exp, [[1, 1 / E, E**-2]])


def test_a_tile_that_raises_the_max_rescales_what_came_before() -> None:
    """samples/tiles.yaml: tile 2 raises m from 1 to 3, so ℓ and o are multiplied by e^−2 first; tile 3 is
    masked whole: max −∞ (JSON null), m, ℓ and o unchanged."""
    steps = pipeline.solve(pipeline.load(SAMPLES / "tiles.yaml"))
    (head,) = steps.heads
    trace = head.tiles
    close(trace.maxima[:, :2], [[1, 3]])
    assert np.isneginf(trace.maxima[0, 2])
    close(trace.running_max, [[1, 3, 3]])
    close(trace.rescale, [[0, E**-2, 1]])
    ell = 1 + 1 / E + E**-2 + E**-3
    close(trace.running_sum, [[1 + 1 / E, ell, ell]])
    o = [1 + 2 / E + E**-3, 1 + E**-2]
    close(trace.accumulator, [[[1 / E, 1], o, o]])
    close(trace.output, [[o[0] / ell, o[1] / ell]])
    close(trace.logsumexp, [math.log(1 + E + E**2 + E**3)])
    close(head.logsumexp, trace.logsumexp)


def test_a_first_tile_masked_whole_leaves_m_at_minus_infinity_and_the_next_rescale_is_0() -> None:
    problem = pipeline.load(BANK, {"tiles": 1, "mask": "0, 1, 1"})
    trace = pipeline.solve(problem).heads[0].tiles
    assert np.isneginf(trace.maxima[0, 0]) and np.isneginf(trace.running_max[0, 0])
    close(trace.rescale, [[0, 0, 1]])
    close(trace.running_sum, [[0, 1, 1 + 1 / E]])
    close(trace.accumulator[0, 0], [0, 0])
    records = json.loads(run(BANK, "--tiles", "1", "--mask", "0, 1, 1", "-f", "json")[1])["heads"][0]["tiles"]
    assert records[0][0] == {
        "keys": ["fisherman"],
        "scores": [None],
        "max": None,
        "running_max": None,
        "rescale": 0.0,
        "running_sum": 0.0,
        "accumulator": [0.0, 0.0],
    }


def test_the_tiles_replay_the_kernels_arithmetic() -> None:
    """The kernel, asked for tiles of one key, gathers the same sums: its output is the trace's o/ℓ."""
    from attncli import kernel

    steps = pipeline.solve(pipeline.load(SAMPLES / "storm_causal.yaml", {"tiles": 3}))
    head = steps.heads[0]
    options = {"mask": steps.problem.mask, "scale": head.spec.score.scale, "block_keys": 3}
    out = kernel.attention(head.queries, head.keys, head.values, **options)
    close(out, head.tiles.output)


# Every tile size and every kind of mask against PyTorch

torch_tests = pytest.mark.skipif(
    __import__("importlib").util.find_spec("torch") is None, reason="PyTorch is not installed"
)
MASKS = {
    "none": {},
    "causal": {"mask": "causal"},
    "causal_lower_right": {"mask": "causal_lower_right"},
    "window": {"window": 1},
    "causal_window": {"mask": "causal", "window": 2},
    "padding": {"padding": ["k2", "k6"]},
    "matrix": {"mask": [[1, 0, 0, 1, 0, 1, 0], [0, 0, 0, 0, 0, 0, 1], [1, 1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 0, 1, 0]]},
    "alibi": {"mask": "causal", "bias": "alibi"},
}
KEYS, QUERIES = 7, 4


def random_problem(mask: str, seed: int, size: int) -> pipeline.Steps:
    """Queries the last four of seven tokens (lower-right and windows place them there), random q, k, v."""
    rng = np.random.default_rng(seed)
    tokens = [f"k{i + 1}" for i in range(KEYS)]
    fields = {
        "tokens": tokens,
        "query_tokens": tokens[-QUERIES:],
        "queries": rng.normal(size=(QUERIES, 3)).tolist(),
        "keys": rng.normal(scale=3, size=(KEYS, 3)).tolist(),
        "values": rng.normal(size=(KEYS, 2)).tolist(),
        "tiles": size,
        **MASKS[mask],
    }
    return pipeline.solve(pipeline.load(text=json.dumps(fields), name="random.yaml"))


@pytest.mark.parametrize("mask", sorted(MASKS))
@pytest.mark.parametrize("size", range(1, KEYS + 1))
def test_every_tile_size_and_mask_against_torch(mask: str, size: int) -> None:
    torch = pytest.importorskip("torch")
    steps = random_problem(mask, size * 31 + len(mask), size)
    head = steps.heads[0]
    masked = torch.from_numpy(head.scores)  # the masked scaled scores (+ bias), −∞ where masked
    close(head.tiles.logsumexp, torch.logsumexp(masked, dim=-1).numpy())
    close(head.logsumexp, torch.logsumexp(masked, dim=-1).numpy())
    q, k, v = (torch.from_numpy(array) for array in (head.queries, head.keys, head.values))
    bias = 0.0 if head.bias is None else head.bias
    additive = torch.from_numpy(np.where(steps.problem.mask, bias, -np.inf))  # SDPA's float mask
    want = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=additive).numpy()
    close(head.tiles.output, want)
    close(head.tiles.output, head.output)
    assert len(head.tiles.spans()) == tiles.count(KEYS, size) == math.ceil(KEYS / size)


def test_the_largest_difference_from_torch_over_every_size_and_mask() -> None:
    """The figure the README quotes: the largest |o/ℓ − output| and |L − torch.logsumexp| over all cases."""
    torch = pytest.importorskip("torch")
    outputs, sums = [], []
    for mask in MASKS:
        for size in range(1, KEYS + 1):
            head = random_problem(mask, size * 31 + len(mask), size).heads[0]
            outputs.append(np.abs(head.tiles.output - head.output).max())
            sums.append(np.abs(head.tiles.logsumexp - torch.logsumexp(torch.from_numpy(head.scores), -1).numpy()).max())
    assert max(outputs) <= 1e-15 and max(sums) <= 1e-15, (max(outputs), max(sums))


def test_float32_tiles_stay_float32() -> None:
    problem = pipeline.load(BANK, {"tiles": 2}, dtype="float32")
    trace = pipeline.solve(problem).heads[0].tiles
    assert trace.accumulator.dtype == trace.running_sum.dtype == trace.output.dtype == np.float32
    np.testing.assert_allclose(trace.output, [[1.4205125, 0.5794875]], rtol=0, atol=1e-6)


# --stable


def test_stable_shifts_every_row_by_its_max_and_gives_the_log_sum_exp() -> None:
    steps = pipeline.solve(pipeline.load(BANK, {"stable": True}))
    (head,) = steps.heads
    close(head.shift, [2])
    close(head.exp, [[1, 1 / E, E**-2]])
    close(head.logsumexp, [math.log(E**2 + E + 1)])
    plain = pipeline.solve(pipeline.load(BANK)).heads[0]
    assert plain.logsumexp is None and plain.tiles is None and plain.shift[0] == 0
    np.testing.assert_allclose(head.weights, plain.weights, rtol=0, atol=1e-15)  # the same weights to a last bit


@pytest.mark.parametrize(
    ("scores", "logsumexp"),
    [
        ("102, 101, 100", 100 + math.log(E**2 + E + 1)),
        ("2000, 1000, 0", 2000.0),
        ("-1000, -1001, -1002", -1002 + math.log(E**2 + E + 1)),
    ],
)
def test_stable_rows_far_from_zero_stay_finite(scores: str, logsumexp: float) -> None:
    """The article's scores 2, 1, 0 moved by 100 and by −1002, and multiplied by 1000: L = m + ln Σ e^(s − m)."""
    flags = {"tokens": "a,b,c", "query_tokens": "c", "scores": scores, "values": "2,0; 0,2; 1,1", "stable": True}
    flags["tiles"] = 1
    head = pipeline.solve(pipeline.load(None, flags)).heads[0]
    close(head.logsumexp, [logsumexp])
    close(head.tiles.logsumexp, [logsumexp])
    assert np.isfinite(head.tiles.accumulator).all() and np.isfinite(head.weights).all()
    close(head.tiles.output, head.output)


def test_stable_in_the_human_formats() -> None:
    code, text, _ = run(BANK, "--stable", "-f", "text")
    assert code == 0
    assert "e^(s − 2.0000)" in text
    assert "ln Σ e^s = m + ln Σ e^(s − m) = 2.0000 + ln 1.5032 = 2.4076" in text
    for fmt in ("markdown", "latex"):
        code, shown, _ = run(BANK, "--stable", "-f", fmt)
        assert code == 0 and "1.5032" in shown and "2.4076" in shown, fmt


# The formats


def test_every_format_shows_the_article_example_with_one_key_a_tile() -> None:
    """The README's numbers, in the terminal, Markdown and LaTeX alike."""
    numbers = ("[2.0000, 0.0000]", "1.3679", "[2.0000, 0.7358]", "1.5032", "[2.1353, 0.8711]", "[1.4205, 0.5795]")
    for fmt in ("text", "markdown"):
        code, shown, stderr = run(BANK, "--tiles", "1", "-f", fmt)
        assert (code, stderr) == (0, "")
        assert all(number in shown for number in numbers), fmt
        assert "L = m + ln ℓ = 2.0000 + ln 1.5032 = 2.4076" in shown
    code, shown, _ = run(BANK, "--tiles", "1", "-f", "latex")
    assert r"L = m + \ln \ell = 2.0000 + \ln 1.5032 = 2.4076" in shown
    assert all(number.replace("[", "").replace("]", "").split(", ")[0] in shown for number in numbers)


def test_the_human_output_shows_the_followed_queries_only() -> None:
    code, text, _ = run(str(SAMPLES / "storm_causal.yaml"), "--tiles", "2", "--follow", "storm", "-f", "text")
    assert code == 0
    assert "Online softmax of 'storm'" in text and "Online softmax of 'bank'" not in text


def test_json_holds_every_query_tile_by_tile_at_full_precision() -> None:
    path = str(SAMPLES / "storm_causal.yaml")
    code, stdout, _ = run(path, "--tiles", "3", "-f", "json")
    assert code == 0
    doc = json.loads(stdout)
    head = pipeline.solve(pipeline.load(path, {"tiles": 3})).heads[0]
    (record,) = doc["heads"]
    assert record["logsumexp"] == head.logsumexp.tolist()
    assert len(record["tiles"]) == len(doc["query_tokens"])
    for row, tiles_of_row in enumerate(record["tiles"]):
        assert [tile["keys"] for tile in tiles_of_row] == [doc["tokens"][0:3], doc["tokens"][3:6], doc["tokens"][6:]]
        for t, tile in enumerate(tiles_of_row):
            assert list(tile) == ["keys", "scores", "max", "running_max", "rescale", "running_sum", "accumulator"]
            assert tile["running_sum"] == head.tiles.running_sum[row, t]
            assert tile["accumulator"] == head.tiles.accumulator[row, t].tolist()
            assert tile["rescale"] == head.tiles.rescale[row, t]
            scores = head.scores[row, 3 * t : 3 * t + 3]
            assert tile["scores"] == [None if np.isneginf(s) else s for s in scores.tolist()]
            assert tile["max"] == (None if np.isneginf(scores).all() else scores.max())
    plain = json.loads(run(path, "-f", "json")[1])
    assert "tiles" not in plain["heads"][0] and "logsumexp" not in plain["heads"][0]
    stable = json.loads(run(path, "--stable", "-f", "json")[1])
    assert "tiles" not in stable["heads"][0] and stable["heads"][0]["logsumexp"] == record["logsumexp"]


def test_npz_holds_the_trace(tmp_path) -> None:
    out = tmp_path / "steps.npz"
    assert run(str(SAMPLES / "tiles.yaml"), "-o", str(out))[0] == 0
    head = pipeline.solve(pipeline.load(SAMPLES / "tiles.yaml")).heads[0]
    with np.load(out) as saved:
        assert saved["heads/0/tiles/start"].tolist() == [0, 2, 4]
        for name in ("running_max", "rescale", "running_sum", "accumulator", "exp"):
            assert np.array_equal(saved[f"heads/0/tiles/{name}"], getattr(head.tiles, name)), name
        assert np.array_equal(saved["heads/0/tiles/max"], head.tiles.maxima)
        assert np.array_equal(saved["heads/0/logsumexp"], head.logsumexp)


def test_a_layer_may_ask_for_tiles() -> None:
    text = (SAMPLES / "layers.yaml").read_text(encoding="utf-8")
    first = text.index("layers:") + len("layers:\n")
    indent = text[first:].index("- ") + 2
    layered = text[: first + indent] + "tiles: 2\n" + " " * indent + text[first + indent :]
    steps = pipeline.solve(pipeline.load(text=layered, name="layers.yaml"))
    first_layer = steps.layers[0].attention.heads[0]
    close(first_layer.tiles.output, first_layer.output)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_the_latex_of_tiles_compiles_without_scaling(tmp_path) -> None:
    from tests.test_writeups import compile_log

    code, source, _ = run(str(SAMPLES / "storm_causal.yaml"), "--tiles", "3", "-f", "latex", lang="es")
    assert code == 0 and all(ord(char) < 256 for char in source)
    assert "attncli: scaled down" not in compile_log(tmp_path, source)


def test_spanish_says_it_all_in_spanish(tmp_path) -> None:
    """samples/tiles.yaml with Spanish words for its title and tokens, and no notes: no English word is left."""
    problem = (SAMPLES / "tiles.yaml").read_text(encoding="utf-8")
    problem = problem.replace("title: The online softmax, two keys a tile", "title: La softmax en línea")
    problem = problem.replace("notes: The scores are given, so that every running value has a closed form.", "")
    for english_word, spanish in (("the", "el"), ("his", "su")):
        problem = problem.replace(f"[{english_word},", f"[{spanish},").replace(f" {english_word}:", f" {spanish}:")
    (tmp_path / "bloques.yaml").write_text(problem.replace(", his,", ", su,").replace("[his]", "[su]"), "utf-8")
    for fmt in ("text", "markdown"):
        code, shown, stderr = run(str(tmp_path / "bloques.yaml"), "--stable", "-f", fmt, lang="es")
        assert code == 0, stderr
        assert "bloques de 2 claves" in shown
        assert english(shown) == []


# Bad input: one line, exit 2, nothing on stdout


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("tiles: 0", "tiles: expected a whole number of keys per tile (1 or more), got the number 0"),
        ("tiles: -2", "got the number -2"),
        ("tiles: 1.5", "got the number 1.5"),
        ("tiles: two", "got the text 'two'"),
        ("tiles: true", "got true"),
        ("tiles: [1]", "got a list of 1"),
        ("tiles:", "got nothing"),
        ("stable: yes please", "stable: expected true or false, got the text 'yes please'"),
        ("stable: 1", "stable: expected true or false, got the number 1"),
    ],
)
def test_bad_fields(tmp_path, field: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BANK_TEXT + field + "\n", encoding="utf-8")
    spanish = refused(run, [str(path)], f"attncli: {path}:21: ")
    assert message in run(str(path))[2] and english(spanish.split(": ", 2)[2]) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tiles", "0"], "--tiles: tiles: expected a whole number of keys per tile (1 or more), got the number 0"),
        (["--tiles", "-1"], "--tiles"),
        (["--tiles", "x"], "'x' is not a whole number"),
        (["--tiles", "1.5"], "'1.5' is not a whole number"),
        (["--stable=yes"], "--stable"),
    ],
)
def test_bad_flags(args: list[str], message: str) -> None:
    refused(run, [BANK, *args], message)


def test_a_trace_too_large_is_refused_before_anything_is_computed(tmp_path) -> None:
    """2,000 queries × 2,000 tiles of one key: 16 million numbers, refused as the problem is read."""
    with pytest.raises(AttnError) as caught:
        tiles.within_limit(1, 2000, 2000, [2])
    assert caught.value.key == "problem.too_many_tiles"
    np.save(tmp_path / "k.npy", np.random.default_rng(0).normal(size=(2000, 2)))
    arrays = ["--keys", "@k.npy", "--values", "@k.npy", "--queries", "@k.npy"]
    done = subprocess.run(
        [sys.executable, "-m", "attncli", "compute", *arrays, "--tiles", "1", "-f", "json"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("attncli: --tiles: tiles: 2000 tiles of 1 key per query make a trace of ")
    assert done.stderr.count("\n") == 1 and len(done.stderr) <= 201


def test_tiles_at_a_stacks_top_are_every_layers_unless_a_layer_says() -> None:
    text = (SAMPLES / "layers.yaml").read_text(encoding="utf-8")
    steps = pipeline.solve(pipeline.load(text=text + "tiles: 2\nstable: true\n", name="layers.yaml"))
    for layer in steps.layers:
        head = layer.attention.heads[0]
        assert (head.tiles.size, head.tiles.running_max.shape) == (2, (3, 2))  # 3 queries, 3 keys in tiles of 2
        close(head.tiles.output, head.output)
    first = text.index("layers:") + len("layers:\n")
    indent = text[first:].index("- ") + 2
    own = text[: first + indent] + "tiles: 1\n" + " " * indent + text[first + indent :] + "tiles: 3\n"
    layered = pipeline.solve(pipeline.load(text=own, name="layers.yaml")).layers
    assert [layer.attention.heads[0].tiles.size for layer in layered] == [1, 3]


def test_tiles_on_stacked_layers_from_the_command_line() -> None:
    code, stdout, stderr = run(str(SAMPLES / "layers.yaml"), "--tiles", "2", "-f", "json")
    assert (code, stderr) == (0, "")
    for layer in json.loads(stdout)["layers"]:
        assert [len(row) for row in layer["attention"]["heads"][0]["tiles"]] == [2, 2, 2]
    code, stdout, stderr = run(str(SAMPLES / "layers.yaml"), "--tiles", "0")
    assert (code, stdout) == (2, "") and stderr.count("\n") == 1 and "--tiles" in stderr
