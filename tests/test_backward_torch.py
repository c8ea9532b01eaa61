"""The backward pass against PyTorch's autograd, float64, every gradient within 1e-12 of its array's largest entry.

Each case of tests/backward_cases.py is written again as a torch forward pass here, from the same
fields: projections, RoPE (Hugging Face's rotate_half, Meta's complex pairs), ALiBi and masks as
the problem file says, F.layer_norm and F.rms_norm between layers. torch.autograd.grad then gives
the gradient of every input and of every intermediate the record keeps (a head's dO, its share of
shared keys and values, P, the scores, q·k, the turned vectors), each compared with attncli's.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from attncli.backward import Gradients, StackGradients
from attncli.problem import Problem, Stack
from tests import backward_cases as cases

torch = pytest.importorskip("torch")
F = torch.nn.functional
from tests.test_torch_agreement import torch_rope_half, torch_rope_interleaved  # noqa: E402

RELATIVE = 1e-12
ROPE: dict[str, Callable] = {"half": torch_rope_half, "interleaved": torch_rope_interleaved}
PAIRS = (("queries", "w_q"), ("keys", "w_k"), ("values", "w_v"))


class Graph:
    """A torch forward pass of one case: its leaves (the inputs, by path) and the intermediates it keeps."""

    def __init__(self, fields: dict) -> None:
        self.fields = fields
        self.leaves: dict[tuple, torch.Tensor] = {
            path: torch.tensor(array, dtype=torch.float64, requires_grad=True) for path, array in cases.inputs(fields)
        }
        self.kept: dict[tuple, torch.Tensor] = {}

    def keep(self, where: tuple, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` through a node of its own, so that its gradient is this use's alone."""
        alias = tensor.clone()
        self.kept[where] = alias
        return alias

    def stack(self, stack: Stack) -> torch.Tensor:
        stream = self.leaves[("x",)]
        for index, layer in enumerate(stack.layers):
            where = ("layers", index)
            fields = self.fields["layers"][index]
            norm = layer.norm
            place = None if norm is None else norm.place
            stream = self.keep((*where, "input"), stream)
            fed = self.keep((*where, "normed"), self.norm(where, norm, stream)) if place == "pre" else stream
            attention = self.attention(fields, layer.attention, self.keep((*where, "attention_input"), fed), where)
            residual = self.keep((*where, "residual"), stream + attention)
            stream = self.norm(where, norm, residual) if place == "post" else residual
        return stream

    def norm(self, where: tuple, norm: object, rows: torch.Tensor) -> torch.Tensor:
        gain, shift = (self.leaves.get((*where, "norm", name)) for name in ("gain", "bias"))
        if norm.kind == "layer":
            return F.layer_norm(rows, (rows.shape[1],), gain, shift, norm.eps)
        return F.rms_norm(rows, (rows.shape[1],), gain, norm.eps)

    def attention(self, fields: dict, problem: Problem, x: torch.Tensor | None, where: tuple = ()) -> torch.Tensor:
        """One attention problem's output from the leaves under `where` (x: the layer's input, else the leaf)."""
        if x is None:
            x = self.leaves.get((*where, "x"))
        x_query = self.leaves.get((*where, "x_query"))
        if x_query is None and x is not None and problem.query_rows is not None:
            x_query = x[list(problem.query_rows)]
        outputs = []
        for h, spec in enumerate(problem.heads):
            operands = []
            for (given, weight), rows in zip(PAIRS, (x_query, x, x)):
                source = self.operand(
                    fields, h, spec.kv_head if given != "queries" else None, where, given, weight, rows
                )
                operands.append(None if source is None else self.keep((*where, h, given), source))
            outputs.append(self.head(problem, h, operands, where))
        concat = self.keep((*where, "concat"), torch.cat(outputs, dim=1)) if len(outputs) > 1 else outputs[0]
        w_o = self.leaves.get((*where, "w_o"))
        return concat if w_o is None else concat @ w_o

    def operand(
        self, fields: dict, h: int, group: int | None, where: tuple, given: str, weight: str, rows: object
    ) -> torch.Tensor | None:
        """A head's q, k or v: its kv head's, else its own field, else the top level's; given, or rows·W."""
        if group is not None:
            places = [((*where, "kv_heads", group), fields["kv_heads"][group])]
        else:
            places = [((*where, "heads", h), fields["heads"][h])] if "heads" in fields else []
            places.append((where, fields))
        for place, mapping in places:
            for name in (given, weight):
                if name in mapping:
                    leaf = self.leaves[(*place, name)]
                    return leaf if name == given else rows @ leaf
        return None

    def head(self, problem: Problem, h: int, operands: list, where: tuple) -> torch.Tensor:
        spec = problem.heads[h]
        queries, keys, values = operands
        if spec.scores is not None:
            scores = self.keep((*where, h, "scores"), self.leaves[(*where, "scores")])
        else:
            rope = problem.rope
            if rope is not None:
                turn = ROPE[rope.style]
                queries = self.keep(
                    (*where, h, "turned_queries"), turn(queries, torch.tensor(rope.query_at), rope.base)
                )
                keys = self.keep((*where, h, "turned_keys"), turn(keys, torch.tensor(rope.key_at), rope.base))
            dot = self.keep((*where, h, "dot"), queries @ keys.T)
            scores = dot * spec.score.scale
            if problem.bias is not None:
                leaf = self.leaves.get((*where, "bias"))
                bias = leaf if leaf is not None else torch.tensor(problem.bias.of(h), requires_grad=True)
                scores = scores + self.keep((*where, h, "bias"), bias)
            scores = self.keep((*where, h, "scores"), scores)
        allowed = torch.from_numpy(np.ascontiguousarray(problem.mask))
        weights = self.keep((*where, h, "weights"), torch.softmax(scores.masked_fill(~allowed, -torch.inf), dim=1))
        return self.keep((*where, h, "output"), weights @ values)


def close(got: np.ndarray | None, want: torch.Tensor | None, what: object) -> None:
    assert want is not None, what
    assert got is not None, what
    want = want.detach().numpy()
    assert got.shape == want.shape, what
    assert np.abs(got - want).max() <= RELATIVE * max(np.abs(want).max(), np.finfo(float).tiny), what


def compare_attention(record: Gradients, problem: Problem, grads: dict, weights: dict, where: tuple) -> None:
    """Every head's gradients, the concatenation's and the attention's input's."""
    for h, head in enumerate(record.heads):
        at = (*where, h)
        close(head.grad_output, grads[(*at, "output")], (at, "output"))
        close(head.grad_weights, grads[(*at, "weights")], (at, "weights"))
        close(head.grad_scores, grads[(*at, "scores")], (at, "scores"))
        close(head.grad_values, grads[(*at, "values")], (at, "values"))
        row_term = (weights[at].detach() * grads[(*at, "weights")]).sum(dim=1)
        close(head.row_term, row_term, (at, "row_term"))
        if problem.heads[h].scores is None:
            close(head.grad_dot, grads[(*at, "dot")], (at, "dot"))
            close(head.grad_queries, grads[(*at, "queries")], (at, "queries"))
            close(head.grad_keys, grads[(*at, "keys")], (at, "keys"))
        if problem.rope is not None:
            close(head.grad_turned_queries, grads[(*at, "turned_queries")], (at, "turned_queries"))
            close(head.grad_turned_keys, grads[(*at, "turned_keys")], (at, "turned_keys"))
        if problem.bias is not None:
            close(head.grad_bias, grads[(*at, "bias")], (at, "bias"))
    if (*where, "concat") in grads:
        close(record.grad_concat, grads[(*where, "concat")], (where, "concat"))


def check(name: str) -> None:
    fields = cases.with_grad_output(cases.CASES[name], seed=1)
    problem = cases.load(fields)
    steps = cases.solve(fields)
    graph = Graph(fields)
    output = graph.stack(problem) if isinstance(problem, Stack) else graph.attention(fields, problem, None)
    asked = fields["backward"]
    if "grad_output" in asked:
        grad_output = torch.tensor(np.asarray(asked["grad_output"]))
        loss = (output * grad_output).sum()
    elif asked["loss"] == "sum":
        loss = output.sum()
    else:
        loss = 0.5 * ((output - torch.tensor(np.asarray(asked["loss"]["target"]))) ** 2).sum()
    record = steps.backward
    assert (record.loss is None) == ("grad_output" in asked)
    if record.loss is not None:
        assert abs(record.loss - loss.item()) <= RELATIVE * abs(loss.item())
    targets = {**graph.leaves, **graph.kept}
    found = torch.autograd.grad(loss, list(targets.values()), allow_unused=True, retain_graph=True)
    grads = dict(zip(targets, found))
    weights = {key[:-1]: tensor for key, tensor in graph.kept.items() if key[-1] == "weights"}
    close(record.grad_output, torch.autograd.grad(loss, output, retain_graph=True)[0], "grad_output")
    for path in graph.leaves:
        close(cases.recorded(record, fields, path), grads[path], path)
    if isinstance(record, StackGradients):
        for index, (layer, layer_record) in enumerate(zip(problem.layers, record.layers)):
            where = ("layers", index)
            compare_attention(layer_record.attention, layer.attention, grads, weights, where)
            close(layer_record.grad_input, grads[(*where, "input")], (where, "input"))
            close(layer_record.attention.grad_x, grads[(*where, "attention_input")], (where, "attention_input"))
            if layer.norm.place == "pre":
                close(layer_record.grad_normed, grads[(*where, "normed")], (where, "normed"))
            else:
                close(layer_record.grad_residual, grads[(*where, "residual")], (where, "residual"))
    else:
        compare_attention(record, problem, grads, weights, ())


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_every_gradient_is_autograds(name: str) -> None:
    check(name)
