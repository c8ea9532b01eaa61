"""The backward pass from the outside: the file and the flags, JSON's "backward" object, npz, the human formats.

The numbers are attncli.backward's (checked against autograd and central differences elsewhere);
here every format must carry them whole (JSON, npz: to the last bit) or show them rounded (text,
Markdown, LaTeX), the keys JSON promises must be there where they apply and nowhere else, and a
flag must win over the file.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from attncli import pipeline
from attncli.cli import app
from tests.paths import SAMPLES
from tests.test_writeups import assert_well_formed

ENV = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "NO_COLOR": None, "COLUMNS": "100"}
BANK, BANK_BACKWARD = str(SAMPLES / "bank.yaml"), str(SAMPLES / "bank_backward.yaml")
TWO_HEADS = str(SAMPLES / "two_heads_backward.yaml")
E = math.e
HEAD = {
    "grad_output",
    "grad_values",
    "grad_weights",
    "row_term",
    "grad_scores",
    "grad_dot",
    "grad_queries",
    "grad_keys",
}


def run(*args: str) -> Result:
    return CliRunner().invoke(app, ["compute", *args], env=ENV)


def backward_of(*args: str) -> dict:
    result = run(*args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["backward"]


def record(path: str, flags: dict | None = None) -> object:
    return pipeline.solve(pipeline.load(path, flags)).backward


@pytest.mark.parametrize("path", [BANK_BACKWARD, TWO_HEADS])
def test_json_carries_every_gradient_to_the_last_bit(path: str) -> None:
    doc, want = backward_of(path), record(path)
    assert doc["loss"] is None and doc["grad_output"] == want.grad_output.tolist()
    assert len(doc["heads"]) == len(want.heads)
    for got, head in zip(doc["heads"], want.heads):
        assert set(got) == HEAD
        for key in HEAD:
            assert got[key] == getattr(head, key).tolist(), key


def test_json_keys_are_where_they_apply() -> None:
    """The issue's names: a key only where it applies, and the shared sums at the top level."""
    assert set(backward_of(BANK_BACKWARD)) == {"loss", "grad_output", "heads"}
    two = backward_of(TWO_HEADS)
    assert set(two) == {"loss", "grad_output", "grad_w_o", "grad_concat", "grad_keys", "grad_values", "heads"}
    keys = np.sum([head["grad_keys"] for head in two["heads"]], axis=0)
    assert np.abs(np.array(two["grad_keys"]) - keys).max() <= 1e-15  # keys given once: the heads' sum
    rope = backward_of(str(SAMPLES / "rope.yaml"), "--loss", "sum")
    assert set(rope["heads"][0]) == HEAD | {"grad_turned_queries", "grad_turned_keys"}
    gqa = backward_of(str(SAMPLES / "gqa.yaml"), "--loss", "sum")
    assert [set(kv) for kv in gqa["kv_heads"]] == [{"grad_keys", "grad_values"}] * 2
    first_kv = np.array(gqa["heads"][0]["grad_keys"]) + np.array(gqa["heads"][1]["grad_keys"])
    assert np.abs(np.array(gqa["kv_heads"][0]["grad_keys"]) - first_kv).max() <= 1e-15
    alibi = backward_of(str(SAMPLES / "alibi.yaml"), "--loss", "sum")
    assert "grad_bias" not in alibi and all("grad_bias" in head for head in alibi["heads"])  # ALiBi: no parameters
    bias = backward_of(str(SAMPLES / "bias.yaml"), "--loss", "sum")
    assert bias["grad_bias"] == bias["heads"][0]["grad_bias"]  # one head: the sum is its dS
    projections = backward_of(str(SAMPLES / "projections.yaml"), "--loss", "sum")
    assert {"grad_w_q", "grad_w_k", "grad_w_v"} <= set(projections["heads"][0]) and "grad_x" in projections
    given = backward_of(str(SAMPLES / "two_heads.yaml"), "--loss", "sum")["heads"][1]  # scores given: down to dS
    assert set(given) == HEAD - {"grad_dot", "grad_queries", "grad_keys"}


def test_a_stack_gives_its_layers_first_to_last() -> None:
    doc = backward_of(str(SAMPLES / "layers.yaml"), "--loss", "sum")
    assert set(doc) == {"loss", "grad_output", "grad_x", "layers"}
    first, second = doc["layers"]
    assert set(first) == {"grad_input", "attention"}  # no norm
    assert set(second) == {"grad_input", "grad_normed", "attention"}  # LayerNorm placed pre
    assert doc["grad_x"] == first["grad_input"]
    assert set(second["attention"]) == {"loss", "grad_output", "grad_x", "heads"}
    assert second["attention"]["grad_output"] == doc["grad_output"]  # the last layer's attention gets dO itself
    assert doc["loss"] == float(pipeline.solve(pipeline.load(str(SAMPLES / "layers.yaml"))).output.sum())


def test_the_grad_output_flag_is_the_files_section() -> None:
    assert backward_of(BANK, "--grad-output", "1, 0") == backward_of(BANK_BACKWARD)


def test_a_flag_wins_over_the_file() -> None:
    summed = backward_of(BANK_BACKWARD, "--loss", "sum")
    z = E**2 + E + 1
    assert summed["grad_output"] == [[1.0, 1.0]]
    assert summed["loss"] == pytest.approx((2 * E**2 + 1) / z + (2 * E + 1) / z, abs=1e-15)  # Σ O
    assert backward_of(BANK_BACKWARD, "--grad-output", "0, 1")["grad_output"] == [[0.0, 1.0]]


def test_a_target_loss_is_half_the_squared_distance() -> None:
    text = Path(BANK).read_text() + "backward: {loss: {target: [[1, 1]]}}\n"
    result = CliRunner().invoke(app, ["compute", "-", "--format", "json"], input=text, env=ENV)
    doc = json.loads(result.stdout)["backward"]
    z = E**2 + E + 1
    output = [(2 * E**2 + 1) / z, (2 * E + 1) / z]
    assert doc["loss"] == pytest.approx(0.5 * sum((o - 1) ** 2 for o in output), abs=1e-15)
    assert doc["grad_output"][0] == pytest.approx([o - 1 for o in output], abs=1e-15)


def test_npz_holds_every_gradient_under_its_json_path(tmp_path: Path) -> None:
    out = tmp_path / "steps.npz"
    assert run(TWO_HEADS, "-o", str(out)).exit_code == 0
    want = record(TWO_HEADS)
    with np.load(out) as saved:
        names = {name for name in saved.files if name.startswith("backward/")}
        assert "output" in saved.files and "heads/1/weights" in saved.files  # the forward steps stay
        top = {f"backward/{key}" for key in ("grad_output", "grad_w_o", "grad_concat", "grad_keys", "grad_values")}
        assert names == top | {f"backward/heads/{h}/{key}" for h in (0, 1) for key in HEAD}
        assert np.array_equal(saved["backward/heads/1/grad_scores"], want.heads[1].grad_scores)
        assert np.array_equal(saved["backward/grad_w_o"], want.grad_w_o)


# The human formats


BANK_GRADIENTS = ("2.0000", "D = 1.4205", "0.3855", "-0.3476", "-0.0379", "0.2726", "[0.2994, -0.2726]",
                  "0.6652×[1, 0] = [0.6652, 0.0000]", "1×2 + 0×0 = 2.0000", "1×1.4205 + 0×0.5795 = 1.4205")  # fmt: skip


@pytest.mark.parametrize("fmt", ["text", "markdown"])
def test_the_worked_example_backwards_is_written_out(fmt: str) -> None:
    result = run(BANK_BACKWARD, "--format", fmt)
    assert result.exit_code == 0, result.output
    backward = result.stdout.split("Backward pass")[1]
    assert [number for number in BANK_GRADIENTS if number not in backward] == []
    assert backward.count("·") >= 3 and "…" not in backward


def test_latex_writes_the_backward_steps_and_stays_well_formed() -> None:
    source = run(TWO_HEADS, "--format", "latex").stdout
    assert_well_formed(source)
    assert all(ord(char) < 256 for char in source)  # pdflatex with inputenc utf8 reads Latin-1
    assert r"\section*{Backward pass" in source and r"d(concat) = dO$\cdot$W\_O$^{\top}$" in source


def test_masked_cells_get_the_masks_dot_and_spanish_speaks_of_the_backward_pass() -> None:
    text = run(TWO_HEADS, "--format", "text", "--lang", "es").stdout
    assert "Paso hacia atrás" in text and "head 1, hacia atrás" in text  # the heads are named in the file
    # net cannot see bank: its row of dS in the matrix ends with the mask's ·
    assert re.search(r"^net\s+-?\d\.\d{4}\s+-?\d\.\d{4}\s+·$", text, flags=re.MULTILINE)


def test_a_stack_goes_back_from_its_last_layer() -> None:
    text = run(str(SAMPLES / "layers.yaml"), "--loss", "sum", "--format", "text").stdout.split("Backward pass")[1]
    assert text.index("Layer 2 of 2") < text.index("Layer 1 of 2")
    assert "LayerNorm backwards, token by token" in text and "dX₃: the gradient of what the layer leaves" in text


LAYERS = str(SAMPLES / "layers.yaml")


@pytest.mark.parametrize("fmt", ["text", "markdown", "latex"])
@pytest.mark.parametrize("layer", [1, 2])
def test_layer_n_shows_that_layers_backward_alone(fmt: str, layer: int) -> None:
    """--layer N picks layer N's backward as it picks its forward steps (the whole stack's was shown before)."""
    whole = run(LAYERS, "--loss", "sum", "--format", fmt).stdout.split("Backward pass")[1]
    chosen = run(LAYERS, "--loss", "sum", "--format", fmt, "--layer", str(layer)).stdout.split("Backward pass")[1]
    other = 3 - layer
    assert f"Layer {layer} of 2" in chosen and f"Layer {other} of 2" not in chosen
    assert f"Layer {other} of 2" in whole
    assert "the gradient of the stack" not in chosen and "the gradient of the stack" in whole


@pytest.mark.parametrize("layer", [1, 2])
def test_layer_n_in_json_holds_that_layers_gradients(layer: int) -> None:
    """JSON with --layer N: `layers` holds layer N alone, grad_output the gradient of the stream it leaves and
    grad_x of the stream it reads, as its forward document's `output` is the stream it leaves."""
    whole = backward_of(LAYERS, "--loss", "sum")
    chosen = backward_of(LAYERS, "--loss", "sum", "--layer", str(layer))
    assert chosen["layers"] == [whole["layers"][layer - 1]] and chosen["loss"] == whole["loss"]
    assert chosen["grad_x"] == whole["layers"][layer - 1]["grad_input"]
    leaving = whole["grad_output"] if layer == 2 else whole["layers"][1]["grad_input"]
    assert chosen["grad_output"] == leaving


def test_backward_products_of_negatives_are_written_as_the_forwards() -> None:
    """layers.yaml's second layer: v(bank) = [1.2247, −1.2247] with dO all ones. The backward wrote
    `1×-1.2247` and, in LaTeX, `1$\\times$-1.2247` in text mode; now as the forward's q·k in every format."""
    args = (LAYERS, "--loss", "sum", "--layer", "2", "--format")
    for fmt in ("text", "markdown"):
        backward = run(*args, fmt).stdout.split("Backward pass")[1]
        assert "1×1.2247 + 1×(−1.2247) + 1×0.0000 = 0.0000" in backward
        assert "×-" not in backward and "+ -" not in backward
    tex = run(*args, "latex").stdout.split("Backward pass")[1]
    assert r"$1 \times 1.2247 + 1 \times (-1.2247) + 1 \times 0.0000 = 0.0000$" in tex
    rows = [row for row in tex.splitlines() if " & " in row]  # the tables; their products were in text mode
    assert not [row for row in rows if r"$\times$" in row or r"\times -" in row or "+ -" in row]


def test_a_large_problem_shows_its_gradients_condensed() -> None:
    rng = np.random.default_rng(0)
    flags = ["--queries", "; ".join(", ".join(f"{x:.3f}" for x in row) for row in rng.normal(size=(20, 2)))]
    flags += ["--keys", "; ".join(", ".join(f"{x:.3f}" for x in row) for row in rng.normal(size=(20, 2)))]
    flags += ["--values", "; ".join(", ".join(f"{x:.3f}" for x in row) for row in rng.normal(size=(20, 2)))]
    result = run(*flags, "--loss", "sum", "--format", "text")
    assert result.exit_code == 0, result.output
    backward = result.stdout.split("Backward pass")[1]
    assert "⋮" in backward and "⋯" in backward and "…" not in backward


def test_npy_and_quiet_compute_no_gradients() -> None:
    assert run(BANK_BACKWARD, "-q").exit_code == 0
    assert run(BANK_BACKWARD, "--format", "npy", "-o", "/dev/null").exit_code == 0


# Any backward: section at all


LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["sum", "target", "grad_output", "loss", "1e999", "sqrt(2)", "@q.npy"]),
)
SECTIONS = st.recursive(
    LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["grad_output", "loss", "target", "bank", "x-note", "weight"]), inner, max_size=3
        ),
    ),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(section=SECTIONS)
def test_any_backward_section_is_an_answer_or_one_line(section: object) -> None:
    """Whatever `backward:` holds, compute answers (exit 0, a "backward" object) or says in one line why not."""
    text = Path(BANK).read_text() + yaml.safe_dump({"backward": section})
    result = CliRunner().invoke(app, ["compute", "-", "--format", "json"], input=text, env=ENV)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 0:
        assert "backward" in json.loads(result.stdout) or section is None
    else:
        assert len(result.output.splitlines()) == 1 and "Traceback" not in result.output


GAINED = "samples/layers.yaml, its second layer's LayerNorm placed post, learning a gain and a bias"


def _gained(folder: Path) -> str:
    text = (
        Path(LAYERS)
        .read_text(encoding="utf-8")
        .replace(
            "norm: {type: layer, place: pre, eps: 1e-5}",
            "norm: {type: layer, place: post, gain: [1, 2, 3], bias: [0, 1, 0]}",
        )
    )
    path = folder / "gained.yaml"
    path.write_text(text + "backward: {loss: sum}\n", encoding="utf-8")
    return str(path)


def _csv_gradients(text: str, stacked: bool) -> dict[tuple, list[float]]:
    """The gradients' numbers in a long CSV, in the order written, by (layer, step, head)."""
    import csv
    import io

    found: dict[tuple, list[float]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        if row["step"].startswith("backward.") and row["step"] != "backward.loss":
            key = (row.get("layer") if stacked else None, row["step"], row["head"])
            found.setdefault(key, []).append(float(row["value"]))
    return found


def _json_gradient(doc: dict, layer: str | None, step: str, head: str, first: int = 0) -> object:
    """The JSON array CSV's (layer, step, head) names: a layer's own or its attention's, a head's, a kv head's
    (`first`: the number of JSON's first layer, with --layer N)."""
    name = step.removeprefix("backward.")
    if layer is not None:
        own = doc["layers"][int(layer) - first]
        if name.startswith("grad_norm."):
            return own["grad_norm"][name.removeprefix("grad_norm.")]
        if name in own:
            return own[name]
        doc = own["attention"]
    if name.startswith("kv_heads."):
        return doc["kv_heads"][int(head)][name.removeprefix("kv_heads.")]
    return doc["heads"][int(head)][name] if head else doc[name]


@pytest.mark.parametrize(
    ("path", "flags"),
    [(BANK_BACKWARD, ()), (TWO_HEADS, ()), (LAYERS, ("--loss", "sum")), (LAYERS, ("--layer", "2")), (GAINED, ())],
)
def test_csv_holds_every_gradient_of_json_number_for_number(path: str, flags: tuple[str, ...], tmp_path: Path) -> None:
    """-f csv: after the forward's rows, one row per number of each gradient (backward.<JSON key>, with its head
    and, in a stack, its layer), equal to JSON's to the last bit; every array of JSON's backward object is there;
    the wide layout holds the same numbers, a block per gradient."""
    stacked = path in (LAYERS, GAINED)
    path = _gained(tmp_path) if path == GAINED else path
    extra = ("--loss", "sum", *flags) if "--layer" in flags else flags
    doc = backward_of(path, *extra)
    result = run(path, *extra, "--format", "csv")
    assert result.exit_code == 0
    found = _csv_gradients(result.stdout, stacked)
    for (layer, step, head), numbers in found.items():
        first = int(flags[-1]) - 1 if "--layer" in flags else 0
        assert numbers == np.ravel(_json_gradient(doc, layer, step, head, first)).tolist(), (layer, step, head)

    def arrays(node: object, path: tuple = ()) -> set[tuple]:
        if isinstance(node, dict):
            return {found for key, value in node.items() for found in arrays(value, (*path, key))}
        if isinstance(node, list) and node and isinstance(node[0], dict):
            return {found for index, item in enumerate(node) for found in arrays(item, (*path, index))}
        return {path} if isinstance(node, list) else set()

    layers = doc.get("layers", [None])
    wanted = {
        p for index, part in enumerate(layers) for p in arrays(part if stacked else doc, (index,) if stacked else ())
    }
    assert len(found) == len(wanted) and found
    wide = run(path, *extra, "--format", "csv", "--csv-layout", "wide").stdout
    blocks = [block for block in wide.split("\n\n") if "backward." in block.splitlines()[0]]
    assert len(blocks) == len(found)
    assert (doc["loss"] is not None) == ("backward.loss" in result.stdout)
