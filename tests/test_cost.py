"""`attncli cost`: parameters against the `numel` of equivalent PyTorch modules, FLOPs of each product against
`torch.utils.flop_counter.FlopCounterMode` (explicit matmuls, on meta tensors for the large shapes), KV bytes against
the `nbytes` of cache tensors; pairs and the issue's example by hand; the command line and its bad inputs.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from attncli import cost, pipeline
from attncli.cli import app
from attncli.cli import cost as command
from attncli.errors import AttnError
from tests.paths import SAMPLES
from tests.refusals import refused
from tests.test_spanish import english

SCREEN = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "LANGUAGE": None, "NO_COLOR": "1", "COLUMNS": "200"}
ISSUE = ["--d-model", "4096", "--heads", "32", "--kv-heads", "8", "--d-head", "128", "--layers", "32"]
ISSUE += ["--tokens", "16384", "--batch", "1", "--dtype", "bf16"]


def run(*args: str, lang: str = "en") -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["cost", *args, "--lang", lang], env=SCREEN)
    return result.exit_code, result.stdout, result.stderr


def terms(section: cost.Section) -> dict[str, int]:
    return {term.name: term.value for term in section.terms}


# By hand


def test_the_issues_example_by_hand() -> None:
    """d_model 4096, 32 heads over 8 kv heads of 128, 32 layers, 16,384 tokens, bf16."""
    counted = cost.count(cost.shape(4096, 32, 16384, kv_heads=8, d_head=128, layers=32), "bf16")
    assert terms(counted.parameters) == {"W_Q": 4096 * 4096, "W_K": 4096 * 1024, "W_V": 4096 * 1024, "W_O": 4096 * 4096}
    assert counted.parameters.total.value == 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024) == 1_342_177_280
    assert counted.pairs.value == 16384**2
    flops = terms(counted.flops)
    assert flops["Q·Kᵀ"] == flops["P·V"] == 2 * 32 * 16384 * 16384 * 128
    assert flops["X·W_Q"] == flops["Z·W_O"] == 2 * 16384 * 4096 * 4096
    assert counted.kv_cache.total.value == 2 * 32 * 8 * 128 * 16384 * 1 * 2 == 2 * 2**30  # 2 GiB
    assert counted.kv_cache.terms[0].numbers == "1·8·16384·128·2"


@pytest.mark.parametrize(("tokens", "window"), [(1, None), (4, None), (5, 2), (5, 1), (5, 5), (5, 9), (7, 3)])
def test_pairs_are_the_cells_the_mask_keeps(tokens: int, window: int | None) -> None:
    """Counted in plain Python: query i meets key j when j ≤ i and, with a window W, i − j < W."""
    kept = sum(1 for i in range(tokens) for j in range(tokens) if j <= i and (window is None or i - j < window))
    assert cost.pairs(tokens, True, window).value == kept
    assert cost.pairs(tokens, False, None).value == tokens * tokens
    if window is not None:
        assert cost.pairs(tokens, False, window).value == kept  # a sliding window is causal


def test_compare_counts_mha_gqa_and_mqa() -> None:
    shape = cost.shape(64, 8, 10, kv_heads=2)
    compared = dict(cost.compare(shape, "fp16"))
    assert list(compared) == ["MHA", "GQA", "MQA"]
    assert [each.shape.kv_heads for each in compared.values()] == [8, 2, 1]
    assert [each.kv_cache.per_layer.value for each in compared.values()] == [2 * g * 8 * 10 * 2 for g in (8, 2, 1)]
    assert [kind for kind, _ in cost.compare(cost.shape(64, 8, 10), "fp16")] == ["MHA", "MQA"]


def test_a_problem_files_own_matrices_and_products() -> None:
    """bank.yaml: no weights; Q·Kᵀ and P·V 2·3·2 = 12 each; K and V cached, 3·2 float64 each."""
    counted = cost.of_problem(pipeline.load(SAMPLES / "bank.yaml"), "float64")
    assert counted.parameters.per_layer.value == 0
    assert terms(counted.flops) == {"Q·Kᵀ": 12, "P·V": 12}
    assert terms(counted.kv_cache) == {"K cache": 48, "V cache": 48}
    masked = cost.of_problem(pipeline.load(SAMPLES / "storm_causal.yaml"), "fp32")
    assert masked.pairs == cost.Term("pairs", "Σ mask", "8", 8)  # bank sees 2 keys (The, bank), storm 6


def test_a_shape_is_checked() -> None:
    for arguments, key in (
        ((0, 8, 10), "cost.not_positive"),
        ((64, 8, 10, 3), "problem.gqa_divisible"),
        ((60, 8, 10), "cost.d_head"),
        ((64, 8, True), "cost.not_positive"),
    ):
        with pytest.raises(AttnError) as caught:
            cost.shape(*arguments)
        assert caught.value.key == key, arguments
    assert cost.shape(60, 8, 10, d_head=7).d_head == 7


def test_the_dtypes_offered_are_the_ones_counted() -> None:
    assert tuple(cost.BYTES) == command.DTYPES


# PyTorch


class _Grouped:
    """A grouped-query attention layer written here: W_Q, W_K, W_V, W_O as Linear layers, the products explicit."""

    def __init__(self, torch, d_model: int, heads: int, kv_heads: int, d_head: int, bias: bool, device: str) -> None:
        linear = torch.nn.Linear
        self.torch, self.heads, self.kv_heads, self.d_head = torch, heads, kv_heads, d_head
        self.q = linear(d_model, heads * d_head, bias=bias, device=device)
        self.k = linear(d_model, kv_heads * d_head, bias=bias, device=device)
        self.v = linear(d_model, kv_heads * d_head, bias=bias, device=device)
        self.o = linear(heads * d_head, d_model, bias=bias, device=device)
        self.modules = torch.nn.ModuleList([self.q, self.k, self.v, self.o])

    def products(self, x) -> dict[str, int]:
        """Each product of a forward pass and the FLOPs FlopCounterMode counts for it."""
        from torch.utils.flop_counter import FlopCounterMode

        torch, counted = self.torch, {}

        def measured(name: str, step):
            with FlopCounterMode(display=False) as counter:
                out = step()
            counted[name] = counter.get_total_flops()
            return out

        b, t, _ = x.shape
        q = measured("X·W_Q", lambda: self.q(x)).view(b, t, self.heads, self.d_head).transpose(1, 2)
        k = measured("X·W_K", lambda: self.k(x)).view(b, t, self.kv_heads, self.d_head).transpose(1, 2)
        v = measured("X·W_V", lambda: self.v(x)).view(b, t, self.kv_heads, self.d_head).transpose(1, 2)
        k, v = (a.repeat_interleave(self.heads // self.kv_heads, dim=1) for a in (k, v))
        scores = measured("Q·Kᵀ", lambda: q @ k.transpose(-1, -2))
        z = measured("P·V", lambda: torch.softmax(scores, dim=-1) @ v)
        measured("Z·W_O", lambda: self.o(z.transpose(1, 2).reshape(b, t, self.heads * self.d_head)))
        return counted


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize(("d_model", "heads"), [(64, 8), (48, 6), (96, 12), (16, 1)])
def test_parameters_are_multihead_attentions_numel(d_model: int, heads: int, bias: bool) -> None:
    torch = pytest.importorskip("torch")
    module = torch.nn.MultiheadAttention(d_model, heads, bias=bias)
    counted = cost.count(cost.shape(d_model, heads, 5, bias=bias), "fp32")
    assert counted.parameters.per_layer.value == sum(p.numel() for p in module.parameters())


@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize(
    ("d_model", "heads", "kv_heads", "d_head", "layers"), [(64, 8, 2, 8, 1), (48, 6, 3, 10, 3), (32, 4, 1, 5, 2)]
)
def test_parameters_are_a_grouped_query_modules_numel(
    d_model: int, heads: int, kv_heads: int, d_head: int, layers: int, bias: bool
) -> None:
    torch = pytest.importorskip("torch")
    stack = [_Grouped(torch, d_model, heads, kv_heads, d_head, bias, "cpu") for _ in range(layers)]
    numel = sum(p.numel() for layer in stack for p in layer.modules.parameters())
    shape = cost.shape(d_model, heads, 5, kv_heads=kv_heads, d_head=d_head, layers=layers, bias=bias)
    counted = cost.count(shape, "fp32")
    assert counted.parameters.total.value == numel
    assert counted.parameters.per_layer.value == sum(p.numel() for p in stack[0].modules.parameters())


@pytest.mark.parametrize(
    ("d_model", "heads", "kv_heads", "d_head", "tokens", "batch", "device"),
    [
        (64, 8, 2, 8, 10, 3, "cpu"),
        (48, 6, 6, 10, 7, 1, "cpu"),
        (32, 4, 1, 5, 9, 2, "cpu"),
        (4096, 32, 8, 128, 16384, 1, "meta"),
    ],
)
def test_flops_of_each_product_are_flop_counter_modes(
    d_model: int, heads: int, kv_heads: int, d_head: int, tokens: int, batch: int, device: str
) -> None:
    """Dense attention, each product counted by FlopCounterMode; the issue's shape on meta tensors."""
    torch = pytest.importorskip("torch")
    layer = _Grouped(torch, d_model, heads, kv_heads, d_head, False, device)
    counted = layer.products(torch.zeros(batch, tokens, d_model, device=device))
    shape = cost.shape(d_model, heads, tokens, kv_heads=kv_heads, d_head=d_head, batch=batch)
    assert terms(cost.count(shape, "fp32").flops) == counted


@pytest.mark.parametrize(("tokens", "window"), [(9, None), (9, 3), (9, 12)])
def test_causal_and_windowed_products_count_the_pairs_a_mask_keeps(tokens: int, window: int | None) -> None:
    """FlopCounterMode counts a masked product whole; a kernel that skips masked pairs does 2·E FLOPs per kept pair
    per head: the mask torch builds, summed, times that."""
    torch = pytest.importorskip("torch")
    i, j = torch.arange(tokens)[:, None], torch.arange(tokens)[None, :]
    mask = (j <= i) & ((i - j < window) if window is not None else True)
    shape = cost.shape(32, 4, tokens, d_head=8, batch=2, causal=True, window=window)
    flops = terms(cost.count(shape, "fp32").flops)
    assert flops["Q·Kᵀ"] == flops["P·V"] == 2 * 2 * 4 * int(mask.sum()) * 8


@pytest.mark.parametrize("dtype", sorted(cost.BYTES))
@pytest.mark.parametrize("window", [None, 4096, 100_000])
def test_kv_bytes_are_the_cache_tensors_nbytes(dtype: str, window: int | None) -> None:
    torch = pytest.importorskip("torch")
    types = {"fp32": torch.float32, "float32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
    types |= {"fp8": torch.float8_e4m3fn, "float64": torch.float64}
    layers, batch, kv_heads, tokens, d_head = 32, 2, 8, 16384, 128
    cached = tokens if window is None else min(tokens, window)
    cache = torch.empty((layers, 2, batch, kv_heads, cached, d_head), dtype=types[dtype], device="meta")
    shape = cost.shape(4096, 32, tokens, kv_heads=kv_heads, layers=layers, batch=batch, window=window)
    counted = cost.count(shape, dtype)
    assert counted.kv_cache.total.value == cache.nbytes
    assert counted.kv_cache.per_layer.value == cache[0].nbytes


def test_a_problem_files_products_against_torch() -> None:
    """projections.yaml: X·W_Q, X·W_K, X·W_V, Q·Kᵀ and P·V of its own arrays, counted by FlopCounterMode; its
    weights' sizes; its K and V's nbytes in float64. gqa.yaml: each kv head's keys and values cached once."""
    torch = pytest.importorskip("torch")
    from torch.utils.flop_counter import FlopCounterMode

    problem = pipeline.load(SAMPLES / "projections.yaml")
    (head,) = problem.heads
    counted = cost.of_problem(problem, "float64")
    arrays = {
        name: torch.from_numpy(np.asarray(op.w)) for name, op in zip("QKV", (head.queries, head.keys, head.values))
    }
    x = torch.from_numpy(head.queries.x)
    got = {}
    for name, weight in arrays.items():
        with FlopCounterMode(display=False) as counter:
            product = x @ weight
        got[f"X·W_{name}"] = counter.get_total_flops()
        arrays[name] = product
    with FlopCounterMode(display=False) as counter:
        scores = arrays["Q"] @ arrays["K"].T
    got["Q·Kᵀ"] = counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        torch.softmax(scores, -1) @ arrays["V"]
    got["P·V"] = counter.get_total_flops()
    assert terms(counted.flops) == got
    assert counted.parameters.per_layer.value == sum(op.w.size for op in (head.queries, head.keys, head.values))
    assert counted.kv_cache.per_layer.value == arrays["K"].nbytes + arrays["V"].nbytes
    grouped = pipeline.load(SAMPLES / "gqa.yaml")
    shared = {id(h.keys): h for h in grouped.heads}.values()
    want = sum(h.keys.nbytes + h.values.nbytes for h in shared)
    assert len(shared) == 2 and cost.of_problem(grouped, "float64").kv_cache.per_layer.value == want


# The command line


def test_human_output_is_a_table_of_formulas_with_their_numbers() -> None:
    code, text, stderr = run(*ISSUE)
    assert (code, stderr) == (0, "")
    rows = [" ".join(row.split()) for row in text.splitlines()]
    assert "W_Q d_model·H·d_head 4096·32·128 16777216 16.8 M" in rows
    assert "all 32 layers layers·Σ 32·41943040 1342177280 1.34 G" in rows
    assert "Q·Kᵀ 2·b·H·pairs·d_head 2·1·32·268435456·128 2199023255552 2.2 T" in rows
    assert "K cache b·G·T·d_head·bytes 1·8·16384·128·2 33554432 32 MiB" in rows
    assert "all 32 layers layers·Σ 32·67108864 2147483648 2 GiB" in rows


def test_sizes_past_floats_range_are_counted_exactly() -> None:
    """T = 10^200 tokens: T·T = 10^400 pairs, beyond any float; the values stay exact integers, the rough size is
    left out where it cannot be computed, and the JSON holds every digit."""
    tokens = 10**200
    code, text, stderr = run("--d-model", "8", "--heads", "2", "--tokens", str(tokens))
    assert (code, stderr) == (0, "") and str(tokens**2)[:150] in text  # a terminal folds what its lines cannot hold
    doc = json.loads(run("--d-model", "8", "--heads", "2", "--tokens", str(tokens), "-f", "json")[1])
    assert doc["pairs"]["value"] == tokens**2 and doc["flops"]["terms"][3]["value"] == 2 * 2 * tokens**2 * 4


def test_json_holds_every_term() -> None:
    code, stdout, _ = run(*ISSUE, "--causal", "--window", "4096", "--compare", "-f", "json")
    assert code == 0
    doc = json.loads(stdout)
    assert list(doc) == ["attncli", "source", "dtype", "bytes_per_number", "shape", "pairs", "parameters", "flops",
                         "kv_cache", "compare"]  # fmt: skip
    assert doc["shape"]["window"] == 4096 and doc["shape"]["causal"] is True
    kept = 4096 * 4097 // 2 + 12288 * 4096
    assert doc["pairs"] == {"name": "pairs", "head": None, "formula": "W(W + 1)/2 + (T − W)·W",
                            "numbers": "4096·4097/2 + 12288·4096", "value": kept}  # fmt: skip
    assert [term["name"] for term in doc["flops"]["terms"]] == ["X·W_Q", "X·W_K", "X·W_V", "Q·Kᵀ", "P·V", "Z·W_O"]
    assert doc["kv_cache"]["total"]["value"] == 2 * 32 * 8 * 128 * 4096 * 2
    assert [each["kind"] for each in doc["compare"]] == ["MHA", "GQA", "MQA"]
    assert [each["shape"]["kv_heads"] for each in doc["compare"]] == [32, 8, 1]


def test_a_problem_file() -> None:
    code, stdout, _ = run(str(SAMPLES / "gqa.yaml"), "-f", "json")
    assert code == 0
    doc = json.loads(stdout)
    assert doc["shape"] is None and doc["dtype"] == "float64"
    assert [(term["head"], term["name"]) for term in doc["kv_cache"]["terms"]] == [
        ("kv 1", "K cache"), ("kv 1", "V cache"), ("kv 2", "K cache"), ("kv 2", "V cache")
    ]  # fmt: skip
    code, text, _ = run(str(SAMPLES / "two_heads.yaml"), "--dtype", "fp16")
    assert code == 0 and "W_O" in text and "fp16, 2 bytes a number" in text


def test_spanish_says_it_all_in_spanish() -> None:
    for args in ([*ISSUE, "--compare", "--bias"], [str(SAMPLES / "projections.yaml")]):
        code, text, _ = run(*args, lang="es")
        assert code == 0 and "Parámetros" in text
        assert english(text.replace("Projections from the inputs X", "")) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--d-model", "0", "--heads", "2", "--tokens", "3"], "Invalid value for '--d-model': 0 is not in the range"),
        (["--d-model", "x"], "'x' is not a whole number"),
        (["--d-model", "8", "--heads", "x", "--tokens", "3"], "Invalid value for '--heads': 'x' is not a whole number"),
        (["--d-model", "8", "--heads", "2", "--tokens", "0"], "Invalid value for '--tokens': 0 is not in the range"),
        (["--d-model", "8", "--heads", "2", "--tokens", "3", "--kv-heads", "0"], "Invalid value for '--kv-heads'"),
        (["--d-model", "8", "--heads", "2", "--tokens", "3", "--d-head", "0"], "Invalid value for '--d-head'"),
        (["--d-model", "8", "--heads", "2", "--tokens", "3", "--layers", "0"], "Invalid value for '--layers'"),
        (["--d-model", "8", "--heads", "2", "--tokens", "3", "--batch", "-1"], "Invalid value for '--batch'"),
        (["--d-model", "8", "--heads", "2", "--tokens", "3", "--causal=yes"], "--causal"),
        (["--heads", "4", "--d-model", "8"], "attncli: give a problem file, or a model's shape: --tokens missing"),
        ([], "give a problem file, or a model's shape: --d-model, --heads, --tokens missing"),
        (
            ["--d-model", "64", "--heads", "8", "--kv-heads", "3", "--tokens", "5"],
            "--kv-heads: 8 query heads cannot share 3 kv heads evenly",
        ),
        (
            ["--d-model", "60", "--heads", "8", "--tokens", "5"],
            "--d-head: d_model = 60 is not a multiple of the 8 heads: give --d-head",
        ),
        (
            ["--d-model", "64", "--heads", "8", "--tokens", "5", "--dtype", "fp64"],
            "--dtype: unknown number type 'fp64'",
        ),
        (["--d-model", "64", "--heads", "8", "--tokens", "5", "--window", "0"], "Invalid value for '--window'"),
        (
            [str(SAMPLES / "bank.yaml"), "--heads", "2"],
            "--heads: a problem file gives its own shape and mask: leave out --heads",
        ),
        ([str(SAMPLES / "bank.yaml"), "--causal"], "--causal: a problem file gives its own shape and mask"),
        ([str(SAMPLES / "bank.yaml"), "--compare"], "leave out --compare"),
        ([str(SAMPLES / "bank.yaml"), "--bias"], "leave out --bias"),
        ([str(SAMPLES / "bank.yaml"), "--tokens", "4"], "leave out --tokens"),
        ([str(SAMPLES / "layers.yaml")], "cost takes one attention layer, not stacked layers yet"),
        (["missing.yaml"], "missing.yaml: cannot read the file"),
        ([str(SAMPLES / "bank.yaml"), "-f", "csv"], "unknown format 'csv'"),
    ],
)
def test_bad_input(args: list[str], message: str) -> None:
    refused(run, args, message)
