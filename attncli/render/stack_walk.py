"""The walk through stacked layers: each layer's attention walked as `walk.items` walks one problem, between the
stream it reads and the one it leaves, then the attention rollout. Every human format shows these records."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attncli.i18n import t
from attncli.problem import Norm
from attncli.render.walk import (
    Facts,
    View,
    items,
)
from attncli.render.walk import Item as AttentionItem
from attncli.written import Expr, Vec, rows

if TYPE_CHECKING:
    from attncli.layers import LayerSteps, StackSteps


class StackFacts(NamedTuple):
    """A stack in a few lines: title, tokens, the stream's width d, each layer's name and norm in words."""

    title: str | None
    notes: str | None
    tokens: tuple[str, ...]
    d: int
    layers: tuple[tuple[str, str], ...]


class LayerTitle(NamedTuple):
    """The start of one layer's steps: number `number` of `of`, its name, its norm in words, its facts."""

    number: int
    of: int
    name: str
    norm: str
    facts: Facts  # its heads' scores and its mask; the tokens are the stack's


class Stream(NamedTuple):
    """A matrix of the residual stream (S, d), one row per token: what a layer reads, normalises or leaves.

    `kind` is input, normed, residual or output; `formula` says how it was made (X₂ = X₁ + Attn(LN(X₁))),
    `name` is its left side (X₂), `latex` the formula in math mode.
    """

    kind: str
    formula: str
    name: str
    latex: str
    tokens: tuple[str, ...]
    rows: tuple[Vec, ...]


class Rollout(NamedTuple):
    """Attention rollout over the layers shown, beside the last one's raw weights (mean over its heads), (S, S) each."""

    tokens: tuple[str, ...]
    last: int  # the number of the last layer the rollout multiplies: Ã_last···Ã_1
    raw: np.ndarray | None  # (S, S); None for a layer of one head, whose own weights are shown already
    rollout: np.ndarray  # (S, S)


Item = AttentionItem | StackFacts | LayerTitle | Stream | Rollout

NORM_SHORT = {"layer": "LN", "rms": "RMS"}


def stack_items(
    steps: StackSteps, view: View, layer: int | None = None, rollout: np.ndarray | None = None
) -> list[Item]:
    """Everything a human format shows of a stack: its facts; per layer (only number `layer` when given)
    its title, the stream it reads, its attention as `items` shows it, the residual sum; then `rollout`
    (through the last layer shown) beside that layer's raw weights."""
    from attncli.render.formats import every_number

    stack = steps.stack
    count = len(steps.layers)
    names = tuple((record.layer.label, norm_words(record.layer.norm)) for record in steps.layers)
    out: list[Item] = [StackFacts(stack.title, stack.notes, stack.tokens, int(stack.x.shape[1]), names)]
    for number in [layer] if layer is not None else range(1, count + 1):
        record = steps.layers[number - 1]
        norm = record.layer.norm
        facts, *shown = items(record.attention, view, every_number(stack))
        assert isinstance(facts, Facts)  # items starts with the facts
        out.append(LayerTitle(number, count, record.layer.label, norm_words(norm), facts))
        out += _streams(record, number, stack.tokens, shown)
    if rollout is not None:
        last = layer or count
        from attncli.layers import mean_weights

        attention = steps.layers[last - 1].attention
        raw = mean_weights(attention) if len(attention.heads) > 1 else None
        out.append(Rollout(stack.tokens, last, raw, rollout))
    return out


def _streams(record: LayerSteps, number: int, tokens: tuple[str, ...], shown: Sequence[Item]) -> list[Item]:
    """A layer's input (normalised with a norm placed pre), its attention's records `shown`, what it leaves."""
    norm = record.layer.norm

    def stream(kind: str, name: Expr, value: Expr, matrix: np.ndarray) -> Stream:
        same = name == value
        formula = name.text if same else f"{name.text} = {value.text}"
        latex = name.latex if same else f"{name.latex} = {value.latex}"
        return Stream(kind, formula, name.text, latex, tokens, rows(matrix))

    x_l = _stream_name(number)
    out: list[Item] = [stream("input", x_l, Expr("x", r"\mathbf{x}") if number == 1 else x_l, record.input)]
    fed = x_l
    if norm is not None and record.normed is not None:  # a norm placed pre: the attention reads N(x_l)
        fed = _normed(norm, x_l)
        out.append(stream("normed", fed, fed, record.normed))
    out += shown
    residual = Expr(f"{x_l.text} + Attn({fed.text})", rf"{x_l.latex} + \mathrm{{Attn}}({fed.latex})")
    if norm is not None and norm.place == "post":
        out.append(stream("residual", residual, residual, record.residual))
        residual = _normed(norm, residual)
    out.append(stream("output", _stream_name(number + 1), residual, record.output))
    return out


def _normed(norm: Norm, inner: Expr) -> Expr:
    short = NORM_SHORT[norm.kind]
    return Expr(f"{short}({inner.text})", rf"\mathrm{{{short}}}({inner.latex})")


def norm_words(norm: Norm | None) -> str:
    """A layer's norm in words: which one, where, its ε, and whether it learns a gain or a bias."""
    if norm is None:
        return t("render.norm_none")
    words = t(f"render.norm_{norm.kind}", eps=f"{norm.eps:g}")
    learned = [name for name, given in (("gain", norm.gain), ("bias", norm.shift)) if given is not None]
    if learned:
        words += t("render.norm_learned", names=", ".join(learned))
    return t(f"render.norm_{norm.place}", norm=words, short=NORM_SHORT[norm.kind])


def _stream_name(number: int) -> Expr:
    """X₁, X₂, …: the stream layer `number` reads."""
    return Expr("X" + str(number).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")), f"X_{{{number}}}")
