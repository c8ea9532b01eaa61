"""A careful student: reads a problem file and works every step at 4 decimals, carrying their own numbers.

The problem is read with PyYAML and a tiny expression evaluator of our own (never attncli's), so
the student's arithmetic is independent of the program it judges. `Work` computes the steps in the
order a person does; a `Slip` replaces one step's computation (a classic mistake) and every later
step is computed correctly from the slipped numbers. With `digits=None` nothing is rounded: the truth.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import yaml

from tests.reference import press_get_slopes

MASKED = np.nan  # a masked cell in a student's matrix

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_BINARY[ast.Pow] = operator.pow
_FUNCTIONS = {"sqrt": math.sqrt}
_CONSTANTS = {"pi": math.pi}


def number(text: object) -> float:
    """A problem number: an int, a float, or an expression such as `-sqrt(2)` or `1/2`."""
    if isinstance(text, (int, float)):
        return float(text)

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return _BINARY[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
            return _FUNCTIONS[node.func.id](*(value(a) for a in node.args))
        if isinstance(node, ast.Name) and node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise ValueError(f"not a number the student can read: {text!r}")

    return value(ast.parse(str(text).replace("^", "**"), mode="eval").body)


def matrix(data: object, tokens: Sequence[str]) -> np.ndarray:
    """A matrix written as a list of rows, one flat row, or a mapping token: row (in token order)."""
    if isinstance(data, Mapping):
        rows = [data[t] for t in tokens]
    elif isinstance(data, list) and data and not isinstance(data[0], list):
        rows = [data]
    else:
        rows = data
    return np.array([[number(x) for x in row] for row in rows], dtype=float)


@dataclass(frozen=True)
class Head:
    """One head as the problem gives it: exact inputs (None where not given)."""

    score: str  # scaled_dot, dot, cosine, additive, given
    queries: np.ndarray | None = None
    keys: np.ndarray | None = None
    values: np.ndarray | None = None
    x: np.ndarray | None = None
    w_q: np.ndarray | None = None
    w_k: np.ndarray | None = None
    w_v: np.ndarray | None = None
    given: np.ndarray | None = None  # scores given directly
    additive: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # w_query, w_key, v
    bias: np.ndarray | None = None  # (queries, tokens), added to the scaled scores: `bias:` or this head's ALiBi

    @property
    def projected(self) -> bool:
        return self.x is not None


@dataclass(frozen=True)
class Rope:
    """RoPE as the problem states it: each pair of coordinates turned by position × base^(−2i/d)."""

    base: float
    style: str  # half: pairs (i, i + d/2); interleaved: pairs (2i, 2i + 1)
    at: np.ndarray  # each token's position


@dataclass(frozen=True)
class Problem:
    """Attention over `tokens` with an optional causal mask, one or more heads and an optional W_O; when decoding,
    only the last tokens ask (`query_tokens`) and the causal mask is aligned to the last key."""

    tokens: tuple[str, ...]
    causal: bool
    heads: tuple[Head, ...]
    w_o: np.ndarray | None
    several: bool  # answers go under `heads:` (the problem lists heads)
    query_tokens: tuple[str, ...] = ()  # decoding: the tokens that ask, the last ones (empty: every token)
    lower_right: bool = False  # mask: causal_lower_right, query i sees keys j ≤ i + n − L
    rope: Rope | None = None
    kv: tuple[tuple[np.ndarray, np.ndarray], ...] = ()  # grouped-query heads: each kv head's keys and values
    slopes: tuple[float, ...] = ()  # ALiBi: each head's slope m_h (its bias is −m_h·|i − j|)
    x: np.ndarray | None = None  # sinusoidal positions: the token vectors PE is added to (every head's x)

    @property
    def n(self) -> int:
        return len(self.tokens)

    @property
    def queries(self) -> tuple[str, ...]:
        return self.query_tokens or self.tokens

    @property
    def allowed(self) -> np.ndarray:
        """Which keys each query may attend to."""
        asking = len(self.queries)
        if self.lower_right:
            return np.tri(asking, self.n, k=self.n - asking, dtype=bool)
        full = np.ones((asking, self.n), dtype=bool)
        return np.tril(full) if self.causal else full


def _score_of(data: Mapping[str, Any], inherited: object) -> tuple[str, tuple[np.ndarray, ...] | None]:
    score = data.get("score", inherited)
    if isinstance(score, Mapping):
        params = tuple(np.atleast_2d(matrix(score[name], ())) for name in ("w_query", "w_key", "v"))
        return str(score["type"]), (params[0], params[1], params[2].ravel())
    return str(score or "scaled_dot"), None


def read(text: str) -> Problem:
    """The problem in a YAML text (the subset that `attncli generate` and this suite write)."""
    data = yaml.safe_load(text)
    tokens = tuple(str(t) for t in data["tokens"])
    mask = data.get("mask", "none")
    if mask not in ("none", "causal", "causal_lower_right"):
        raise ValueError(f"mask {mask!r} is not one the student knows")
    asking = tuple(str(t) for t in data.get("query_tokens", ()))
    rows = asking or tokens

    def head(part: Mapping[str, Any]) -> Head:
        merged = {**{k: v for k, v in data.items() if k != "heads"}, **part}
        score, additive = _score_of(part, data.get("score"))
        given = {
            name: matrix(merged[name], rows if name == "queries" else tokens)
            for name in ("queries", "keys", "values", "x")
            if name in merged
        }
        weights = {name: matrix(merged[name], ()) for name in ("w_q", "w_k", "w_v") if name in merged}
        scores = matrix(part["scores"], tokens) if "scores" in part else None
        return Head(
            score="given" if scores is not None else score,
            given=scores,
            additive=additive,
            **given,
            **weights,
        )

    heads = tuple(head(h) for h in data["heads"]) if "heads" in data else (head({}),)
    kv = tuple((matrix(k["keys"], tokens), matrix(k["values"], tokens)) for k in data.get("kv_heads", ()))
    if kv:  # query head h reads kv head h // (H/G): each kv head's queries side by side
        group = len(heads) // len(kv)
        heads = tuple(replace(h, keys=kv[i // group][0], values=kv[i // group][1]) for i, h in enumerate(heads))
    slopes: tuple[float, ...] = ()
    if data.get("bias") is not None:
        heads = tuple(replace(h, bias=b) for h, b in zip(heads, _biases(data["bias"], tokens, rows, len(heads))))
        slopes = tuple(press_get_slopes(len(heads))) if data["bias"] == "alibi" else ()
    w_o = matrix(data["w_o"], ()) if "w_o" in data else None
    rope = None
    positions = data.get("positions")
    if positions == "sinusoidal":
        assert heads[0].x is not None, "sinusoidal positions are added to x"
        return Problem(tokens, mask == "causal", heads, w_o, "heads" in data, asking, x=heads[0].x)
    if positions is not None:
        if not isinstance(positions, Mapping) or positions.get("type") != "rope":
            raise ValueError(f"positions {positions!r} are not ones the student knows")
        at = np.array([number(x) for x in data.get("position_ids", range(len(tokens)))], dtype=float)
        rope = Rope(number(positions.get("base", 10000)), str(positions.get("style", "half")), at)
    lower_right = mask == "causal_lower_right"
    return Problem(tokens, mask == "causal", heads, w_o, "heads" in data, asking, lower_right, rope, kv, slopes)


def encoding(at: np.ndarray, width: int, first: float = 0.0, swapped: bool = False) -> np.ndarray:
    """Vaswani et al. §3.5: PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i + 1) = cos(...), positions counted
    from `first` (0 right), sin and cos in each other's place when `swapped`."""
    angles = (at + first)[:, None] / 10000.0 ** (np.arange(0, width, 2) / width)[None, :]
    sin, cos = np.sin(angles), np.cos(angles)
    out = np.empty((len(at), width))
    out[:, 0::2], out[:, 1::2] = (cos, sin[:, : width // 2]) if swapped else (sin, cos[:, : width // 2])
    return out


def _biases(written: object, tokens: tuple[str, ...], rows: tuple[str, ...], heads: int) -> list[np.ndarray]:
    """Each head's bias: the matrix written (every head adds it), or ALiBi's −m_h·|i − j| with the slopes of
    Press et al.'s code, i the query's place among the tokens (|i − j| = i − j under a causal mask)."""
    if written != "alibi":
        return [matrix(written, rows)] * heads
    distance = np.abs(np.array([tokens.index(t) for t in rows])[:, None] - np.arange(len(tokens))[None, :])
    return [-slope * distance for slope in press_get_slopes(heads)]


def rotate(vectors: np.ndarray, at: np.ndarray, base: float, style: str, looked_up: int | None = None) -> np.ndarray:
    """Each row turned pair by pair by its position × θ_i, θ_i = base^(−2i/d):
    (a, b) → (a·cos − b·sin, b·cos + a·sin), as RoFormer writes it; cos and sin to `looked_up` decimals, as a
    person reads them off a table or the tool's explanation (None: exact)."""
    d = vectors.shape[1]
    turns = at[:, None] * base ** (-np.arange(0, d, 2) / d)[None, :]
    cos, sin = np.cos(turns), np.sin(turns)
    if looked_up is not None:
        cos, sin = np.round(cos, looked_up), np.round(sin, looked_up)
    first = np.arange(d // 2) if style == "half" else np.arange(0, d, 2)
    second = first + d // 2 if style == "half" else first + 1
    out = np.empty_like(vectors, dtype=float)
    a, b = vectors[:, first], vectors[:, second]
    out[:, first] = a * cos - b * sin
    out[:, second] = b * cos + a * sin
    return out


# --- the work -------------------------------------------------------------------------------------

Key = tuple[int | None, str]  # (head index, step); None for concat and final
HEAD_ORDER = ("queries", "keys", "values", "turned_queries", "turned_keys", "dot", "scores", "biased_scores", "exp")
HEAD_ORDER += ("sums", "weights", "output")
SHARED = ("positioned", "concat", "final")  # x + PE comes before every head's steps
MASKABLE = ("dot", "scores", "biased_scores", "exp", "weights")


@dataclass
class Written:
    """One step as the student writes it: the numbers carried on, and optionally the text written."""

    values: np.ndarray  # NaN = masked
    text: list[list[str]] | None = None  # rows as written, when not the plain 4-decimal form of `values`


@dataclass
class Context:
    """What the student has at hand when making a step: the head, their own earlier numbers, the default."""

    work: Work
    head: int | None
    step: str
    own: dict[str, np.ndarray]  # the student's own numbers so far in this head (and `outputs` for concat)
    careful: Callable[[], np.ndarray]  # the correct computation from `own`


Slip = Callable[[Context], "np.ndarray | Written"]


@dataclass(repr=False)
class Work:
    """A student's whole calculation of one problem; `slips` replace single steps."""

    problem: Problem
    digits: int | None = 4
    slips: Mapping[Key, Slip] = field(default_factory=dict)
    every: bool = False  # also write RoPE's turned vectors, s + b apart from s, e^s and Σ e^s (issue 25's fields)
    steps: dict[Key, Written] = field(default_factory=dict)
    careful_alternative: dict[Key, np.ndarray] = field(default_factory=dict)  # slipped step, done right

    def __post_init__(self) -> None:
        self._run()

    def r(self, x: np.ndarray) -> np.ndarray:
        """Round as the student does (to `digits` decimals), or not at all for the truth."""
        return np.asarray(x, dtype=float) if self.digits is None else np.round(x, self.digits) + 0.0

    # the single operations, reused by the slips
    def turned(
        self,
        q: np.ndarray,
        k: np.ndarray,
        sign: float = 1.0,
        style: str | None = None,
        keys_from: float = 0.0,
        new_at_zero: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """RoPE's turn of the queries and keys, each kept to `digits` (the queries are the last tokens); as they
        are without RoPE. `sign` −1 turns them the wrong way round; `style` another pairing; `keys_from` 1 counts
        the keys' positions from 1; `new_at_zero` puts the new queries of a decoding step at positions 0, 1, ..."""
        rope = self.problem.rope
        if rope is None:
            return q, k
        used = style or rope.style
        query_at = np.arange(len(q), dtype=float) if new_at_zero else rope.at[len(rope.at) - len(q) :]
        table = self.digits if self.every else None  # who writes the turned vectors looks cos and sin up
        return (
            self.r(rotate(q, sign * query_at, rope.base, used, table)),
            self.r(rotate(k, sign * (rope.at + keys_from), rope.base, used, table)),
        )

    def compatibility(self, head: Head, q: np.ndarray, k: np.ndarray) -> np.ndarray:
        """q·k for every query and key (all cells: the mask comes at the scores)."""
        if head.score == "cosine":
            norms = np.linalg.norm(q, axis=1)[:, None] * np.linalg.norm(k, axis=1)[None, :]
            return self.r((q @ k.T) / norms)
        if head.score == "additive":
            assert head.additive is not None
            w_query, w_key, v = head.additive
            hidden = (q @ w_query)[:, None, :] + (k @ w_key)[None, :, :]
            return self.r(np.tanh(hidden) @ v)
        return self.r(q @ k.T)

    def scale(self, head: Head, dot: np.ndarray, d_k: int) -> np.ndarray:
        """Scores before masking: dot/√d_k for scaled_dot, the dot itself otherwise."""
        return self.r(dot / math.sqrt(d_k)) if head.score == "scaled_dot" else dot.copy()

    def biased(self, head: Head, scaled: np.ndarray) -> np.ndarray:
        """The scaled scores plus the head's bias, rounded once; as they are without a bias."""
        return scaled if head.bias is None else self.r(scaled + head.bias)

    def masked(self, scores: np.ndarray, allowed: np.ndarray) -> np.ndarray:
        return np.where(allowed, scores, MASKED)

    def exp(self, scores: np.ndarray, shift: bool = False) -> np.ndarray:
        """e^s of every unmasked score, rounded; 0 where masked. With `shift` (for the softmax), a row whose e^s
        all round to 0 (one key seen, its score −12) is taken as e^(s − m), m its largest score, as a person does
        to get any weight at all."""
        shown = ~np.isnan(scores)
        s = np.nan_to_num(scores, nan=0.0)
        e = np.where(shown, self.r(np.exp(s)), 0.0)
        vanished = shift & shown.any(axis=1, keepdims=True) & (e.sum(axis=1, keepdims=True) == 0)
        top = np.where(shown, s, -np.inf).max(axis=1, keepdims=True, initial=-np.inf)
        shifted = np.where(shown, self.r(np.exp(s - np.where(np.isfinite(top), top, 0.0))), 0.0)
        return np.where(vanished, shifted, e)

    def normalize(self, e: np.ndarray, mask_like: np.ndarray, axis: int = 1) -> np.ndarray:
        """Each e^s over the (exact) sum of the rounded e^s along `axis`; masked where `mask_like` is."""
        total = np.round(e.sum(axis=axis, keepdims=True), 12)
        with np.errstate(invalid="ignore"):  # a query that sees no key: 0/0, masked like its scores
            return np.where(np.isnan(mask_like), MASKED, self.r(e / total))

    def softmax(self, scores: np.ndarray, axis: int = 1) -> np.ndarray:
        return self.normalize(self.exp(scores, shift=axis == 1), scores, axis)

    def weighted(self, weights: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Σ α·v per query; unknown (NaN) for a query whose weights are all masked (it saw no key)."""
        out = self.r(np.nan_to_num(weights, nan=0.0) @ values)
        return np.where(np.all(np.isnan(weights), axis=1, keepdims=True), np.nan, out)

    # the calculation
    def _step(self, key: Key, own: dict[str, np.ndarray], careful: Callable[[], np.ndarray]) -> np.ndarray:
        slip = self.slips.get(key)
        if slip is None:
            written = Written(careful())
        else:
            self.careful_alternative[key] = careful()
            result = slip(Context(self, key[0], key[1], own, careful))
            written = result if isinstance(result, Written) else Written(np.asarray(result, dtype=float))
        self.steps[key] = written
        own[key[1]] = written.values
        return written.values

    def _run(self) -> None:
        p = self.problem
        outputs: list[np.ndarray] = []
        fed = None  # x + PE as the student wrote it (sinusoidal positions)
        if p.x is not None:
            x = p.x
            pe = lambda: self.r(x + self.r(encoding(np.arange(p.n, dtype=float), x.shape[1])))  # noqa: E731
            fed = self._step((None, "positioned"), {}, pe)
        for h, head in enumerate(p.heads):
            own: dict[str, np.ndarray] = {}
            exact = {"queries": head.queries, "keys": head.keys, "values": head.values}
            if head.projected:
                for name, w in (("queries", head.w_q), ("keys", head.w_k), ("values", head.w_v)):
                    if exact[name] is None:
                        assert head.x is not None and w is not None
                        x = head.x if fed is None else fed
                        self._step((h, name), own, lambda w=w, x=x: self.r(x @ w))
            for name, given in exact.items():
                own.setdefault(name, given)  # type: ignore[arg-type]
            if head.given is not None:
                self._step((h, "scores"), own, lambda head=head: self.masked(head.given, p.allowed))
            else:
                self._scores(h, head, own)
            read = own["scores"]
            if self.every and head.bias is not None:
                bias = self.r(head.bias)  # b as the tool shows it, to 4 decimals
                read = self._step((h, "biased_scores"), own, lambda own=own, b=bias: self.r(own["scores"] + b))
            if self.every:
                e = self._step((h, "exp"), own, lambda s=read: np.where(np.isnan(s), MASKED, self.exp(s, shift=True)))
                self._step((h, "sums"), own, lambda e=e: np.nansum(e, axis=1, keepdims=True))
                self._step((h, "weights"), own, lambda e=e, s=read: self.normalize(np.nan_to_num(e), s))
            else:
                self._step((h, "weights"), own, lambda own=own: self.softmax(own["scores"]))
            outputs.append(self._step((h, "output"), own, lambda own=own: self.weighted(own["weights"], own["values"])))
        if p.several or p.w_o is not None:
            shared: dict[str, np.ndarray] = {"outputs": outputs}  # type: ignore[dict-item]
            concat = self._step((None, "concat"), shared, lambda: np.hstack(outputs))
            if p.w_o is not None:
                self._step((None, "final"), shared, lambda: self.r(concat @ p.w_o))

    def _scores(self, h: int, head: Head, own: dict[str, np.ndarray]) -> None:
        """q·k (from RoPE's turned vectors, written when the student writes every field), then the scores: with a
        bias s + b (s alone when the student writes s + b apart)."""
        p = self.problem
        q_k = lambda own=own: self.turned(own["queries"], own["keys"])  # noqa: E731
        if self.every and p.rope is not None:
            self._step((h, "turned_queries"), own, lambda: q_k()[0])
            self._step((h, "turned_keys"), own, lambda: q_k()[1])
            turned = lambda own=own: (own["turned_queries"], own["turned_keys"])  # noqa: E731
        else:
            turned = q_k
        self._step((h, "dot"), own, lambda head=head: self.compatibility(head, *turned()))
        d_k = own["queries"].shape[1]
        plain = replace(head, bias=None) if self.every else head  # s + b then comes as its own step
        self._step(
            (h, "scores"),
            own,
            lambda: self.masked(self.biased(plain, self.scale(head, own["dot"], d_k)), p.allowed),
        )


# --- writing the answers -------------------------------------------------------------------------


def text_of(x: float, digits: int = 4, unknown: str = "masked") -> str:
    """A number as the student writes it: with `digits` decimals (never `-0.0000`), or `unknown` for NaN."""
    if math.isnan(x):
        return unknown
    written = f"{x:.{digits}f}"
    return written[1:] if written.startswith("-") and float(written) == 0 else written


def _rows(problem: Problem, key: Key, written: Written, digits: int) -> str:
    """Rows as `token: [...]`, or as a plain list of rows when the student wrote another number of rows.

    NaN is `masked` in dot, scores and weights, and `?` (not answered) after them: a query that saw no key.
    """
    unknown = "masked" if key[1] in MASKABLE else '"?"'
    text = written.text or [[text_of(x, digits, unknown) for x in row] for row in written.values]
    names = problem.tokens if key[1] in ("keys", "values", "turned_keys", "positioned") else problem.queries
    if len(text) != len(names):
        return "\n".join(f"  - [{', '.join(row)}]" for row in text)
    return "\n".join(f"  {_name(token)}: [{', '.join(row)}]" for token, row in zip(names, text))


def _name(token: str) -> str:
    """A token as a YAML key: quoted when it is not a plain word ("." say)."""
    return token if token.isidentifier() else '"' + token + '"'


def answers_yaml(work: Work, steps: Sequence[Key] | None = None) -> str:
    """The `answers:` section of everything the student wrote (or only `steps`)."""
    p = work.problem
    chosen = [k for k in work.steps if steps is None or k in steps]

    def block(key: Key, indent: str) -> str:
        body = _rows(p, key, work.steps[key], work.digits or 17)
        return f"{indent}{key[1]}:\n" + "\n".join(indent + "  " + line[2:] for line in body.splitlines())

    lines = ["answers:"]
    if p.several:
        lines.append("  heads:")
        for h in range(len(p.heads)):
            mine = [k for k in chosen if k[0] == h]
            if not mine:
                lines.append("    - {}")
                continue
            for i, key in enumerate(mine):
                text = block(key, "      ")
                lines.append(("    - " + text[6:]) if i == 0 else text)
    else:
        lines.extend(block(k, "  ") for k in chosen if k[0] is not None)
    lines.extend(block(k, "  ") for k in chosen if k[0] is None)
    return "\n".join(lines) + "\n"
