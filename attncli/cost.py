"""What attention costs: its parameters, the FLOPs of each matrix product and the KV cache's bytes, every term
a product written out with its numbers. Pure Python integers: exact at any size.

From a shape (`Shape`: a model's d_model, heads, kv heads, d_head, layers, tokens, batch) or from a
problem file's own matrices and products (`of_problem`). References: Kaplan et al. 2020 and Stanford
CS336's "transformer accounting" (a multiply-add is 2 FLOPs; an (m × n)·(n × p) product is 2·m·n·p);
Ainslie et al. 2023 (GQA: G key/value heads shared by H query heads; G = 1 is MQA, G = H is MHA);
Mistral's sliding window (each query sees itself and the W − 1 keys before it; the cache keeps W tokens).
Only matrix products are counted: the scale, the mask, the softmax, RoPE and the biases' additions are not.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

from attncli.errors import fail
from attncli.problem import Head, Operand, Problem, Projection, width
from attncli.yamldoc import kind_of

BYTES = {"fp32": 4, "float32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "float64": 8}  # --dtype: bytes per number
MULTIPLY_ADD = 2  # FLOPs of one multiply-add


class Term(NamedTuple):
    """One counted quantity: what it is, its formula in symbols and in numbers, and its value."""

    name: str  # W_Q, Q·Kᵀ, pairs, K cache ...
    formula: str  # d_model·H·d_head
    numbers: str  # 4096·32·128
    value: int
    owner: str | None = None  # a problem's head or kv head (its JSON name) the term belongs to, when it has several


class Section(NamedTuple):
    """A section of the count: its terms (one layer's), their sum, and the sum over the layers."""

    terms: tuple[Term, ...]
    per_layer: Term
    total: Term


class Shape(NamedTuple):
    """A model's attention as the flags give it. `window`: Mistral's sliding window (implies causal)."""

    d_model: int
    heads: int
    kv_heads: int
    d_head: int
    layers: int = 1
    tokens: int = 1
    batch: int = 1
    causal: bool = False
    window: int | None = None
    bias: bool = False


class Cost(NamedTuple):
    """Everything `attncli cost` counts for one model or problem, in one record."""

    dtype: str
    bytes: int  # per number
    pairs: Term  # the (query, key) pairs the mask keeps, which Q·Kᵀ and P·V compute
    parameters: Section
    flops: Section
    kv_cache: Section
    counted: Shape | Problem  # what was counted: a shape from flags, or a problem file

    @property
    def shape(self) -> Shape | None:
        """The shape counted; None for a problem file's count."""
        return self.counted if isinstance(self.counted, Shape) else None


def shape(
    d_model: int,
    heads: int,
    tokens: int,
    kv_heads: int | None = None,
    d_head: int | None = None,
    layers: int = 1,
    batch: int = 1,
    causal: bool = False,
    window: int | None = None,
    bias: bool = False,
) -> Shape:
    """A validated `Shape`: every size a whole number from 1; G kv heads (default H) dividing the H heads;
    d_head by default d_model/H, which must then be whole. An AttnError names the field (as its flag is spelt)."""
    sizes = {"d-model": d_model, "heads": heads, "tokens": tokens, "kv-heads": kv_heads, "d-head": d_head}
    sizes |= {"layers": layers, "batch": batch, "window": window}
    for name, size in sizes.items():
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise fail("cost.not_positive", got=kind_of(size)).at(field=name)
    groups = heads if kv_heads is None else kv_heads
    if heads % groups:
        raise fail("problem.gqa_divisible", heads=heads, groups=groups).at(field="kv-heads")
    if d_head is None and d_model % heads:
        raise fail("cost.d_head", d_model=d_model, heads=heads).at(field="d-head")
    head_width = d_model // heads if d_head is None else d_head
    return Shape(d_model, heads, groups, head_width, layers, tokens, batch, causal or window is not None, window, bias)


def product(name: str, factors: Sequence[tuple[str, int]], owner: str | None = None) -> Term:
    """A term that is a product: `name` = symbol·symbol·... = number·number·... = value."""
    symbols = "·".join(symbol for symbol, _ in factors)
    numbers = "·".join(str(value) for _, value in factors)
    return Term(name, symbols, numbers, math.prod(value for _, value in factors), owner)


def summed(name: str, terms: Sequence[Term]) -> Term:
    """The sum of `terms`, written as the sum of their names and of their values."""
    return Term(
        name,
        " + ".join(term.name for term in terms),
        " + ".join(str(term.value) for term in terms),
        sum(t.value for t in terms),
    )


def section(terms: Sequence[Term], layers: int) -> Section:
    """`terms`, their sum (one layer), and that sum times the layers."""
    per_layer = summed("per layer", terms)
    return Section(tuple(terms), per_layer, product("all layers", (("layers", layers), ("Σ", per_layer.value))))


def pairs(tokens: int, causal: bool, window: int | None) -> Term:
    """The (query, key) pairs a mask keeps over T tokens: T·T; causal T(T + 1)/2; a sliding window of W
    (each query itself and the W − 1 keys before it) W(W + 1)/2 + (T − W)·W once T passes W."""
    t = tokens
    if window is not None and window < t:
        w = window
        return Term("pairs", "W(W + 1)/2 + (T − W)·W", f"{w}·{w + 1}/2 + {t - w}·{w}", w * (w + 1) // 2 + (t - w) * w)
    if causal or window is not None:
        return Term("pairs", "T(T + 1)/2", f"{t}·{t + 1}/2", t * (t + 1) // 2)
    return product("pairs", (("T", t), ("T", t)))


def count(shape: Shape, dtype: str) -> Cost:
    """Parameters, FLOPs and KV-cache bytes of `shape`'s attention, `dtype` numbers in the cache."""
    d, h, g, e = (("d_model", shape.d_model), ("H", shape.heads), ("G", shape.kv_heads), ("d_head", shape.d_head))
    two, b, t = ("2", MULTIPLY_ADD), ("b", shape.batch), ("T", shape.tokens)
    parameters = [
        product("W_Q", (d, h, e)),
        product("W_K", (d, g, e)),
        product("W_V", (d, g, e)),
        product("W_O", (h, e, d)),
    ]
    if shape.bias:
        parameters += [product("b_Q", (h, e)), product("b_K", (g, e)), product("b_V", (g, e)), product("b_O", (d,))]
    kept = pairs(shape.tokens, shape.causal, shape.window)
    p = ("pairs", kept.value)
    flops = [
        product("X·W_Q", (two, b, t, d, h, e)),
        product("X·W_K", (two, b, t, d, g, e)),
        product("X·W_V", (two, b, t, d, g, e)),
        product("Q·Kᵀ", (two, b, h, p, e)),
        product("P·V", (two, b, h, p, e)),
        product("Z·W_O", (two, b, t, h, e, d)),
    ]
    cached = ("T", shape.tokens) if shape.window is None else ("min(T, W)", min(shape.tokens, shape.window))
    size = ("bytes", BYTES[dtype])
    cache = [product("K cache", (b, g, cached, e, size)), product("V cache", (b, g, cached, e, size))]
    return Cost(
        dtype=dtype,
        bytes=BYTES[dtype],
        pairs=kept,
        parameters=section(parameters, shape.layers),
        flops=section(flops, shape.layers),
        kv_cache=section(cache, shape.layers),
        counted=shape,
    )


VARIANTS = ("MHA", "GQA", "MQA")


def compare(shape: Shape, dtype: str) -> list[tuple[str, Cost]]:
    """`shape` as multi-head (G = H), grouped-query (its own G, when 1 < G < H) and multi-query (G = 1) attention."""
    groups = {"MHA": shape.heads, "GQA": shape.kv_heads, "MQA": 1}
    return [
        (kind, count(shape._replace(kv_heads=groups[kind]), dtype))
        for kind in VARIANTS
        if kind != "GQA" or 1 < shape.kv_heads < shape.heads
    ]


def of_problem(problem: Problem, dtype: str) -> Cost:
    """What `problem` itself computes: its weight matrices (each once), each product of its heads (pairs being
    the (query, key) cells its mask keeps), and the keys and values a cache would hold (each kv head once)."""
    queries, keys = problem.mask.shape
    kept = int(problem.mask.sum())
    if kept == problem.mask.size:
        cells = product("pairs", (("L", queries), ("S", keys)))
    else:
        cells = Term("pairs", "Σ mask", str(kept), kept)
    several = len(problem.heads) > 1
    parameters: dict[int, Term] = {}
    flops: list[Term] = []
    cache: dict[int, Term] = {}
    two, size = ("2", MULTIPLY_ADD), ("bytes", BYTES[dtype])
    for head in problem.heads:
        owner = head.name if several else None
        shared = owner if head.kv_head is None else problem.kv_names[head.kv_head]  # whose keys and values
        for name, operand in _operands(head):
            if isinstance(operand, Projection):
                n, d, out = (
                    ("n", operand.x.shape[0]),
                    ("d", operand.w.shape[0]),
                    (f"d_{name.lower()}", operand.w.shape[1]),
                )
                holder = owner if name == "Q" else shared
                parameters.setdefault(id(operand.w), product(f"W_{name}", (d, out), holder))
                flops.append(product(f"X·W_{name}", (two, n, d, out), owner))
        flops += _score_flops(head, owner, queries, keys, ("pairs", kept), parameters)
        flops.append(product("P·V", (two, ("pairs", kept), ("d_v", width(head.values))), owner))
        for name, operand in _cached(head):
            symbols = (("S", keys), (f"d_{name.lower()}", width(operand)), size)
            cache.setdefault(id(operand), product(f"{name} cache", symbols, shared))
    if problem.w_o is not None:
        rows, columns = ("Σd_v", problem.w_o.shape[0]), ("d_out", problem.w_o.shape[1])
        parameters[id(problem.w_o)] = product("W_O", (rows, columns))
        flops.append(product("concat·W_O", (two, ("L", queries), rows, columns)))
    return Cost(
        dtype=dtype,
        bytes=BYTES[dtype],
        pairs=cells,
        parameters=section(list(parameters.values()), 1),
        flops=section(flops, 1),
        kv_cache=section(list(cache.values()), 1),
        counted=problem,
    )


def _operands(head: Head) -> list[tuple[str, Operand]]:
    return [
        (name, operand) for name, operand in zip("QKV", (head.queries, head.keys, head.values)) if operand is not None
    ]


def _cached(head: Head) -> list[tuple[str, Operand]]:
    """What a KV cache holds for `head`: its keys (none when its scores are given) and its values."""
    return [(name, operand) for name, operand in (("K", head.keys), ("V", head.values)) if operand is not None]


def _score_flops(
    head: Head, owner: str | None, queries: int, keys: int, kept: tuple[str, int], parameters: dict[int, Term]
) -> list[Term]:
    """The products that make a head's scores, and the score's own weights (general, additive) as parameters."""
    score, two = head.score, ("2", MULTIPLY_ADD)
    if head.queries is None or head.keys is None:  # the scores are given
        return []
    d_q, d_k = ("d_q", width(head.queries)), ("d_k", width(head.keys))
    if score.kind == "general":
        parameters.setdefault(id(score.w), product("W", (d_q, d_k), owner))
        return [product("Q·W", (two, ("L", queries), d_q, d_k), owner), product("(Q·W)·Kᵀ", (two, kept, d_k), owner)]
    if score.kind == "additive" and score.v is not None:  # additive scores always have their v
        d_a = ("d_a", score.v.shape[0])
        parameters.setdefault(id(score.w_query), product("W_query", (d_q, d_a), owner))
        parameters.setdefault(id(score.w_key), product("W_key", (d_k, d_a), owner))
        parameters.setdefault(id(score.v), product("v", (d_a,), owner))
        return [
            product("Q·W_query", (two, ("L", queries), d_q, d_a), owner),
            product("K·W_key", (two, ("S", keys), d_k, d_a), owner),
            product("v·tanh(...)", (two, kept, d_a), owner),
        ]
    return [product("Q·Kᵀ", (two, kept, d_k), owner)]
