"""The numbers to combine for a prompt's cells, written from the student's own numbers: the second hint, and the
left-hand side of every answer shown worked out (`2.8284 × 0.7 = 1.9799`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from attncli.practice.own import Own, Ref, part_of
from attncli.practice.plan import Prompt, owner, scaled
from attncli.problem import Projection
from attncli.written import entry, sum_of_products

DECIMALS = 4  # how the student's numbers are written in a working: as a careful student carries them


def num(value: float) -> str:
    return entry(value, DECIMALS)


def vector(values: Iterable[float]) -> str:
    """A row as the tutor writes it: [1.4142, 0]."""
    return "[" + ", ".join(num(float(v)) for v in values) + "]"


def working(own: Own, prompt: Prompt, refs: list[Ref]) -> str:
    """The numbers to combine for each of the prompt's cells, "; " between; a concatenation's once."""
    write = WORKINGS[prompt.step]
    if prompt.step == "concat":
        return write(own, refs[0])
    return "; ".join(write(own, ref) for ref in refs)


def _as(ref: Ref, step: str, head: int | str | None = "same", row: int | None = None, column: int | None = None) -> Ref:
    layer, _, h, r, c = ref
    return (layer, step, h if head == "same" else head, r if row is None else row, c if column is None else column)  # type: ignore[return-value]


def _v(own: Own, ref: Ref, step: str, **where: int | None) -> str:
    return num(own.value(_as(ref, step, **where)))  # type: ignore[arg-type]


def _positioned(own: Own, ref: Ref) -> str:
    layer, _, _, row, column = ref
    encoding = part_of(own.solved, layer).problem.positions
    assert encoding is not None and encoding.x is not None and encoding.encoding is not None, "x + PE needs PE"
    x = float(encoding.x[row, column]) if layer is None else own.attention_input(layer, row, column)
    return f"{num(x)} + {_paren(float(encoding.encoding[row, column]))}"


def _projected(own: Own, ref: Ref) -> str:
    layer, step, h, _row, column = ref
    assert h is not None, step
    operand = getattr(part_of(own.solved, layer).heads[h].spec, step)
    assert isinstance(operand, Projection), step
    inputs = [own.projection_input(ref, a) for a in range(operand.w.shape[0])]
    return sum_of_products((num(x), num(float(w))) for x, w in zip(inputs, operand.w[:, column]))


def _angles(own: Own, ref: Ref) -> str:
    layer, _, h, row, column = ref
    encoding = part_of(own.solved, layer).problem.rope
    assert encoding is not None, "angles need RoPE"
    rotation = part_of(own.solved, layer).heads[h or 0].rotation
    assert rotation is not None, "angles need RoPE"
    return f"{num(float(encoding.key_at[row]))} × {num(float(rotation.frequencies[column]))}"


def _turned(own: Own, ref: Ref) -> str:
    layer, step, h, row, column = ref
    rotation = part_of(own.solved, layer).heads[h or 0].rotation
    assert rotation is not None, "turns need RoPE"
    from attncli.positions import pairs

    width = rotation.queries.shape[1]
    first, second = (list(side) for side in pairs(width, rotation.style))
    pair = first.index(column) if column in first else second.index(column)
    name = "queries" if step == "turned_queries" else "keys"
    a = own.value((layer, name, h, row, first[pair]))
    b = own.value((layer, name, h, row, second[pair]))
    angles = rotation.query_angles if name == "queries" else rotation.key_angles
    angle = num(float(angles[row, pair]))
    if column in first:
        return f"{num(a)}×cos({angle}) − {_paren(b)}×sin({angle})"
    return f"{num(b)}×cos({angle}) + {_paren(a)}×sin({angle})"


def _paren(value: float) -> str:
    text = num(value)
    return f"({text})" if text.startswith("-") else text


def _dot(own: Own, ref: Ref) -> str:
    layer, _, h, row, column = ref
    head = part_of(own.solved, layer).heads[h or 0]
    width = head.q.shape[1]
    q = [own.value((layer, "turned_queries", h, row, c)) for c in range(width)]
    k = [own.value((layer, "turned_keys", h, column, c)) for c in range(head.k.shape[1])]
    if head.spec.score.kind in ("scaled_dot", "dot"):
        return sum_of_products((num(a), num(b)) for a, b in zip(q, k))
    return f"q = {vector(q)}, k = {vector(k)}"


def _scale(own: Own, ref: Ref) -> str:
    layer, _, h, _, _ = ref
    head = part_of(own.solved, layer).heads[h or 0]
    return f"1/√{head.k.shape[1]}" if head.spec.score.kind == "scaled_dot" else num(head.spec.score.scale)


def _scores(own: Own, ref: Ref) -> str:
    layer, _, h, _, _ = ref
    head = part_of(own.solved, layer).heads[h or 0]
    dot = _v(own, ref, "dot")
    return f"{dot} × {_v(own, ref, 'scale', row=0, column=0)}" if scaled(head) else dot


def _biased(own: Own, ref: Ref) -> str:
    layer, _, h, row, column = ref
    head = part_of(own.solved, layer).heads[h or 0]
    bias = 0.0 if head.bias is None else float(head.bias[row, column])
    return f"{_v(own, ref, 'scores')} + {_paren(bias)}"


def _exp(own: Own, ref: Ref) -> str:
    layer, _, h, row, _ = ref
    shift = float(part_of(own.solved, layer).heads[h or 0].shift[row])
    score = _v(own, ref, "biased_scores")
    return f"e^{score}" if shift == 0 else f"e^({score} − {num(shift)})"


def _keys(own: Own, ref: Ref) -> list[int]:
    mask = part_of(own.solved, ref[0]).problem.mask[ref[3]]
    return [j for j, allowed in enumerate(mask) if allowed]


def _sum(own: Own, ref: Ref) -> str:
    return " + ".join(_v(own, ref, "exp", column=j) for j in _keys(own, ref))


def _weights(own: Own, ref: Ref) -> str:
    return f"{_v(own, ref, 'exp')} / {_v(own, ref, 'sum', column=0)}"


def _product(own: Own, ref: Ref) -> str:
    layer, _, h, _row, column = ref
    width = part_of(own.solved, layer).heads[h or 0].values.shape[1]
    key, c = divmod(column, width)
    return f"{_v(own, ref, 'weights', column=key)} × {_v(own, ref, 'values', row=key, column=c)}"


def _output(own: Own, ref: Ref) -> str:
    layer, _, h, row, column = ref
    width = part_of(own.solved, layer).heads[h or 0].values.shape[1]
    keys = _keys(own, ref)
    products = [(layer, "product", h, row, j * width + column) for j in keys]
    if all(p in own.kept for p in products):  # level 1: the student's own products, added up
        return " + ".join(num(own.value(p)) for p in products)
    pairs = [(_v(own, ref, "weights", column=j), _v(own, ref, "values", row=j)) for j in keys]
    return sum_of_products(pairs)


def _concat(own: Own, ref: Ref) -> str:
    layer, _, _, row, _ = ref
    heads = part_of(own.solved, layer).heads
    parts = [
        vector(own.value((layer, "output", h, row, c)) for c in range(head.output.shape[1]))
        for h, head in enumerate(heads)
    ]
    return " ‖ ".join(parts)


def _final(own: Own, ref: Ref) -> str:
    layer, _, _, row, column = ref
    w_o = part_of(own.solved, layer).problem.w_o
    if w_o is None:  # several heads without W_O: the final output is the concatenation, its numbers copied
        return _v(own, ref, "concat", head=None)
    concat = [own.value((layer, "concat", None, row, a)) for a in range(w_o.shape[0])]
    return sum_of_products((num(a), num(float(b))) for a, b in zip(concat, w_o[:, column]))


def _norm_row(own: Own, ref: Ref) -> list[float]:
    layer, _, _, row, _ = ref
    width = own.width(layer, "normed", None)
    return [own.norm_input(layer, row, c) for c in range(width)]


def _mean(own: Own, ref: Ref) -> str:
    values = _norm_row(own, ref)
    return f"({' + '.join(_paren(v) for v in values)}) / {len(values)}"


def _root(own: Own, ref: Ref) -> str:
    layer, _, _, row, _ = ref
    norm = own.solved.layers[layer].layer.norm  # type: ignore[union-attr, index]
    assert norm is not None, "a root needs a norm"
    values = _norm_row(own, ref)
    centre = own.value((layer, "mean", None, row, 0)) if norm.kind == "layer" else 0.0
    squares = " + ".join(f"({num(v)} − {_paren(centre)})²" if norm.kind == "layer" else f"{_paren(v)}²" for v in values)
    return f"√(({squares}) / {len(values)} + {norm.eps:g})"


def _normalised(own: Own, ref: Ref) -> str:
    layer, _, _, row, column = ref
    norm = own.solved.layers[layer].layer.norm  # type: ignore[union-attr, index]
    assert norm is not None, "a normed row needs a norm"
    x = _norm_row(own, ref)[column]
    root = num(own.value((layer, "root", None, row, 0)))
    text = f"({num(x)} − {_paren(own.value((layer, 'mean', None, row, 0)))}) / {root}"
    if norm.kind != "layer":
        text = f"{num(x)} / {root}"
    if norm.gain is not None:
        text += f" × {_paren(float(norm.gain[column]))}"
    return text + (f" + {_paren(float(norm.shift[column]))}" if norm.shift is not None else "")


def _residual(own: Own, ref: Ref) -> str:
    layer, _, _, row, column = ref
    attention = num(own.value((layer, "final", None, row, column)))
    return f"{num(own.stream_in(layer, row, column))} + {attention}"


def _stream(own: Own, ref: Ref) -> str:
    norm = own.solved.layers[ref[0]].layer.norm  # type: ignore[union-attr, index]
    if norm is not None and norm.place == "post":
        return _normalised(own, ref)
    return _residual(own, ref)


def _owner_projected(own: Own, ref: Ref) -> str:
    layer, step, h, row, column = ref
    steps = part_of(own.solved, layer)
    source = h if step == "queries" or h is None else owner(steps, h)
    return _projected(own, (layer, step, source, row, column))


WORKINGS: dict[str, Callable[[Own, Ref], str]] = {
    "positioned": _positioned,
    "queries": _owner_projected,
    "keys": _owner_projected,
    "values": _owner_projected,
    "angles": _angles,
    "turned_queries": _turned,
    "turned_keys": _turned,
    "dot": _dot,
    "scale": _scale,
    "scores": _scores,
    "biased_scores": _biased,
    "exp": _exp,
    "sum": _sum,
    "weights": _weights,
    "product": _product,
    "output": _output,
    "concat": _concat,
    "final": _final,
    "mean": _mean,
    "root": _root,
    "normed": _normalised,
    "residual": _residual,
    "stream": _stream,
}
