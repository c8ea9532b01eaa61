"""The backward pass: every gradient of the attention calculation, from dO back to the inputs. Pure numpy, no I/O.

Shapes as in attncli.core: L queries, S keys, d_k, d_v, d the width of the inputs x. Row vectors
throughout, as the article writes Z = softmax(Q·Kᵀ/√d_k)·V. Per head, with P its weights and dO
the gradient of its output:

    dV = Pᵀ·dO    dP = dO·Vᵀ    D_i = Σ_j P_ij·dP_ij = dO_i·O_i    dS = P ∘ (dP − D)
    d(q·k) = dS·scale    dQ = d(q·k)·K    dK = d(q·k)ᵀ·Q

References, each for what it gives here:
- The softmax Jacobian: ∂p_j/∂s_k = p_j·(δ_jk − p_k), that is diag(p) − p·pᵀ, so that
  ds = p ∘ (dp − p·dp) (Bishop, "Pattern Recognition and Machine Learning", 2006, §4.3.4, the
  softmax's derivatives); D_i = Σ_j P_ij·dP_ij equals dO_i·O_i, as dP = dO·Vᵀ and P·V = O (the form
  FlashAttention-2's backward pass computes: Dao, "FlashAttention-2", 2023, Algorithm 2).
- LayerNorm's backward: dx = (1/σ)·(dy − mean(dy) − x̂·mean(dy ∘ x̂)), dy taken after the gain: the
  derivative of LayerNorm as Ba, Kiros and Hinton ("Layer Normalization", 2016) define it; RMSNorm's
  the same without the mean (Zhang and Sennrich, "Root Mean Square Layer Normalization", 2019).
- RoPE turns q by R(m·θ), a rotation: dq = R(m·θ)ᵀ·dq̃ = R(−m·θ)·dq̃ (Su et al., "RoFormer", 2021).

Every gradient is checked against PyTorch's autograd in tests/test_backward_torch.py and against
central differences in tests/test_backward.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from attncli import positions
from attncli.core import HeadSteps, Steps
from attncli.errors import AttnError, fail
from attncli.problem import Backward, Norm, Problem, Projection

if TYPE_CHECKING:
    from attncli.layers import LayerSteps, StackSteps

LOSSES = ("grad_output", "sum", "target")


class HeadGradients(NamedTuple):
    """Every gradient of one head, from its output back to its queries, keys, values and weights.

    None where a step does not apply: given scores stop at dS; grad_w_* only for projected operands;
    grad_turned_* only with RoPE; grad_bias only with a bias matrix or ALiBi. With grouped-query
    heads grad_keys, grad_values, grad_w_k and grad_w_v are this head's share of its kv head's.
    """

    grad_output: np.ndarray  # (L, d_v) dO_h: the gradient of the head's output
    grad_values: np.ndarray  # (S, d_v) Pᵀ·dO_h
    grad_weights: np.ndarray  # (L, S) dP = dO_h·Vᵀ, every cell (masked ones too)
    row_term: np.ndarray  # (L,) D_i = Σ_j P_ij·dP_ij
    grad_scores: np.ndarray  # (L, S) dS = P ∘ (dP − D): the gradient of the scores softmax reads; 0 where masked
    grad_dot: np.ndarray | None  # (L, S) dS·scale: the gradient of q·k; None with given scores
    grad_queries: np.ndarray | None  # (L, d_k) of the unturned queries
    grad_keys: np.ndarray | None  # (S, d_k) of the unturned keys
    grad_turned_queries: np.ndarray | None = None  # (L, d_k) RoPE: of the turned queries q̃
    grad_turned_keys: np.ndarray | None = None  # (S, d_k) RoPE: of the turned keys k̃
    grad_w_q: np.ndarray | None = None  # (d, d_k) Xᵀ·dQ
    grad_w_k: np.ndarray | None = None  # (d, d_k) Xᵀ·dK
    grad_w_v: np.ndarray | None = None  # (d, d_v) Xᵀ·dV
    grad_bias: np.ndarray | None = None  # (L, S) dS again: the bias is added to the scaled scores


class KvGradients(NamedTuple):
    """A shared key/value head's gradients: the sums over the query heads that read it."""

    heads: tuple[int, ...]  # those query heads
    grad_keys: np.ndarray | None  # (S, d_k)
    grad_values: np.ndarray  # (S, d_v)
    grad_w_k: np.ndarray | None  # (d, d_k)
    grad_w_v: np.ndarray | None  # (d, d_v)


class Gradients(NamedTuple):
    """The backward pass of one attention problem: the record every output format renders after the forward."""

    loss: float | None  # Σ O, or ½·Σ (O − T)²; None for a given dO
    grad_output: np.ndarray  # (L, d_out) dO
    heads: tuple[HeadGradients, ...]
    kv_heads: tuple[KvGradients, ...] = ()
    grad_w_o: np.ndarray | None = None  # (Σ d_v, d_out) concatᵀ·dO
    grad_concat: np.ndarray | None = None  # (L, Σ d_v) dO·W_Oᵀ, or dO itself with several heads and no W_O
    grad_x: np.ndarray | None = None  # (S, d) through every projection of x (the queries' too when they are x's rows)
    grad_x_query: np.ndarray | None = None  # (L, d) through W_Q, when the queries have inputs x_query of their own
    grad_bias: np.ndarray | None = None  # (L, S) Σ_h dS_h: a `bias:` matrix every head adds
    shared: tuple[tuple[str, np.ndarray], ...] = ()  # grad_<field> summed over the heads that share a top-level field


class LayerGradients(NamedTuple):
    """One layer of a stack, backwards: from the gradient of the stream it leaves to that of the stream it reads."""

    grad_output: np.ndarray  # (S, d) the gradient of the layer's output stream
    grad_residual: np.ndarray | None  # (S, d) post-norm: of X + Attn(X), through the norm
    attention: Gradients  # its grad_output is the gradient of Attn(·), its grad_x that of the attention's input
    grad_normed: np.ndarray | None  # (S, d) pre-norm: of N(X), the attention's input
    grad_branch: np.ndarray  # (S, d) the attention branch's part of grad_input: its grad_x, through the norm (pre)
    grad_input: np.ndarray  # (S, d) of the stream X the layer reads: the residual's path plus the branch
    grad_gain: np.ndarray | None = None  # (d,) the norm's gain
    grad_shift: np.ndarray | None = None  # (d,) the norm's bias


class StackGradients(NamedTuple):
    """The backward pass of stacked layers, the layers first to last (computed last to first)."""

    loss: float | None
    grad_output: np.ndarray  # (S, d) dO of the last layer's stream
    layers: tuple[LayerGradients, ...]

    @property
    def grad_x(self) -> np.ndarray:
        """(S, d) the gradient of the stack's inputs x: what reaches the first layer's stream."""
        return self.layers[0].grad_input


def upstream(asked: Backward, output: np.ndarray) -> tuple[np.ndarray, float | None]:
    """dO for the final `output` (L, d_out), and the loss's value (None for a given dO)."""
    if asked.loss == "sum":
        return np.ones_like(output), float(output.sum())  # (L, d_out)
    if asked.loss == "target":
        difference = output - asked.target  # (L, d_out)
        return difference, float(0.5 * (difference * difference).sum())
    assert asked.grad_output is not None, "a given dO"
    return asked.grad_output.astype(output.dtype, copy=False), None


@np.errstate(over="ignore", invalid="ignore")  # an overflow is reported as an error, not as a warning
def compute(steps: Steps, asked: Backward) -> Gradients:
    """The backward pass `asked` for of a solved problem; an AttnError if a gradient passes float's range."""
    grad_output, loss = upstream(asked, steps.output)
    try:
        return _finite(gradients(steps, grad_output, loss))
    except AttnError as error:
        raise error.at(source=steps.problem.source, field="backward") from None


def gradients(steps: Steps, grad_output: np.ndarray, loss: float | None = None) -> Gradients:
    """Every gradient of `steps` given dO (L, d_out), the gradient of its final output."""
    problem = steps.problem
    grad_w_o = grad_concat = None
    if problem.w_o is not None:
        assert steps.concat is not None, "W_O multiplies the concatenation"
        grad_w_o = steps.concat.T @ grad_output  # (Σ d_v, d_out)
        grad_concat = grad_output @ problem.w_o.T  # (L, Σ d_v)
    elif steps.concat is not None:
        grad_concat = grad_output  # (L, Σ d_v) the concatenation is the output
    widths = np.cumsum([head.values.shape[1] for head in steps.heads])[:-1]
    parts = [grad_output] if grad_concat is None else np.split(grad_concat, widths, axis=1)  # dO_h (L, d_v) each
    heads = tuple(head_gradients(head, part, problem.mask) for head, part in zip(steps.heads, parts))
    grad_x, grad_x_query = _inputs(problem, heads)
    grad_bias = None
    if problem.bias is not None and problem.bias.kind == "matrix":
        grad_bias = np.sum([head.grad_scores for head in heads], axis=0)  # (L, S)
    shared = tuple(
        (f"grad_{name}", np.sum([_field(heads[h], name) for h in readers], axis=0)) for name, readers in problem.shared
    )
    kv = _kv_heads(problem, heads)
    return Gradients(loss, grad_output, heads, kv, grad_w_o, grad_concat, grad_x, grad_x_query, grad_bias, shared)


def head_gradients(head: HeadSteps, grad_output: np.ndarray, mask: np.ndarray) -> HeadGradients:
    """One head backwards from dO_h (L, d_v): values, weights, the softmax's Jacobian, scores, queries, keys."""
    weights = head.weights  # (L, S)
    grad_values = weights.T @ grad_output  # (S, d_v)
    grad_weights = grad_output @ head.values.T  # (L, S)
    row_term = (weights * grad_weights).sum(axis=1)  # (L,)
    grad_scores = np.where(mask, weights * (grad_weights - row_term[:, None]), 0)  # (L, S) exactly 0 where masked
    spec = head.spec
    bias = grad_scores if head.bias is not None else None
    if spec.scores is not None:  # given scores: nothing before them to differentiate
        grad_w_v = _weight(spec.values, grad_values)
        nothing = {"grad_dot": None, "grad_queries": None, "grad_keys": None}
        return HeadGradients(grad_output, grad_values, grad_weights, row_term, grad_scores, **nothing,
                             grad_w_v=grad_w_v, grad_bias=bias)  # fmt: skip
    grad_dot = grad_scores * spec.score.scale  # (L, S)
    rotation = head.rotation
    queries, keys = (head.queries, head.keys) if rotation is None else (rotation.queries, rotation.keys)
    assert queries is not None and keys is not None, "scores computed from q and k"
    grad_used_queries = grad_dot @ keys  # (L, d_k)
    grad_used_keys = grad_dot.T @ queries  # (S, d_k)
    turned_queries = turned_keys = None
    grad_queries, grad_keys = grad_used_queries, grad_used_keys
    if rotation is not None:  # back through the turn: R(m·θ)ᵀ = R(−m·θ)
        turned_queries, turned_keys = grad_used_queries, grad_used_keys
        grad_queries = positions.rotate(grad_used_queries, -rotation.query_angles, rotation.style)  # (L, d_k)
        grad_keys = positions.rotate(grad_used_keys, -rotation.key_angles, rotation.style)  # (S, d_k)
    return HeadGradients(
        grad_output,
        grad_values,
        grad_weights,
        row_term,
        grad_scores,
        grad_dot,
        grad_queries,
        grad_keys,
        turned_queries,
        turned_keys,
        _weight(spec.queries, grad_queries),
        _weight(spec.keys, grad_keys),
        _weight(spec.values, grad_values),
        bias,
    )


def _weight(operand: object, grad: np.ndarray) -> np.ndarray | None:
    """dW = Xᵀ·d(X·W) (d, d_out) for a projected operand; None for one given as it is."""
    return operand.x.T @ grad if isinstance(operand, Projection) else None


def _field(head: HeadGradients, name: str) -> np.ndarray:
    """A head's gradient of the field `name` (queries, w_k, ...)."""
    return getattr(head, f"grad_{name}")


def _inputs(problem: Problem, heads: Sequence[HeadGradients]) -> tuple[np.ndarray | None, np.ndarray | None]:
    """dX (S, d) and dX_query (L, d): each projection's d(X·W)·Wᵀ, summed over the heads and the three paths.

    The queries' path goes to x_query when the queries have inputs of their own, else into x's rows they are.
    """
    grad_x = grad_x_query = None
    for spec, grads in zip(problem.heads, heads):
        for operand, grad in ((spec.keys, grads.grad_keys), (spec.values, grads.grad_values)):
            if isinstance(operand, Projection):
                part = grad @ operand.w.T  # (S, d)
                grad_x = part if grad_x is None else grad_x + part
        if isinstance(spec.queries, Projection):
            part = grads.grad_queries @ spec.queries.w.T  # (L, d)
            grad_x_query = part if grad_x_query is None else grad_x_query + part
    if grad_x_query is not None and problem.query_rows is not None:
        if grad_x is None:
            grad_x = np.zeros((len(problem.tokens), grad_x_query.shape[1]), dtype=grad_x_query.dtype)  # (S, d)
        np.add.at(grad_x, list(problem.query_rows), grad_x_query)  # a query's row of x, once per query reading it
        grad_x_query = None
    return grad_x, grad_x_query


def _kv_heads(problem: Problem, heads: Sequence[HeadGradients]) -> tuple[KvGradients, ...]:
    """Each shared key/value head's gradients: the sums of its query heads' shares."""
    out = []
    for group in range(len(problem.kv_names)):
        readers = tuple(h for h, spec in enumerate(problem.heads) if spec.kv_head == group)

        def total(name: str, readers: tuple[int, ...] = readers) -> np.ndarray | None:
            parts = [getattr(heads[h], name) for h in readers]
            return None if parts[0] is None else np.sum(parts, axis=0)

        keys, values, w_k, w_v = (total(name) for name in ("grad_keys", "grad_values", "grad_w_k", "grad_w_v"))
        assert values is not None, "every head has values"
        out.append(KvGradients(readers, keys, values, w_k, w_v))
    return tuple(out)


def _finite(record: Gradients) -> Gradients:
    """`record` unchanged, or an error: finite inputs can still multiply past float64's range."""
    arrays = [record.grad_output, record.grad_w_o, record.grad_concat, record.grad_x, record.grad_x_query]
    arrays += [array for head in record.heads for array in head if isinstance(array, np.ndarray)]
    arrays += [array for head in record.kv_heads for array in head[1:] if array is not None]
    if record.loss is not None and not np.isfinite(record.loss):
        raise fail("backward.overflow")
    if not all(np.isfinite(array).all() for array in arrays if array is not None):
        raise fail("backward.overflow")
    return record


# Stacked layers


@np.errstate(over="ignore", invalid="ignore")
def compute_stack(steps: StackSteps, asked: Backward) -> StackGradients:
    """The backward pass of a stack: through each layer from the last, its residual's two paths and its norm."""
    grad_output, loss = upstream(asked, steps.output)
    done: list[LayerGradients] = []
    grad = grad_output  # (S, d)
    try:
        for layer in reversed(steps.layers):
            done.append(layer_gradients(layer, grad))
            grad = done[-1].grad_input
        if not np.isfinite(grad).all() or (loss is not None and not np.isfinite(loss)):
            raise fail("backward.overflow")
    except AttnError as error:
        raise error.at(source=steps.stack.source, field="backward") from None
    return StackGradients(loss, grad_output, tuple(reversed(done)))


def layer_gradients(layer: LayerSteps, grad_output: np.ndarray) -> LayerGradients:
    """Layer `layer` backwards from the gradient of its output stream (S, d)."""
    norm = layer.layer.norm
    place = None if norm is None else norm.place
    grad_residual = gain = shift = None
    grad_sum = grad_output  # (S, d) of X + Attn(·)
    if norm is not None and place == "post":
        grad_residual, gain, shift = normalise_backward(layer.residual, grad_output, norm)
        grad_sum = grad_residual
    attention = _finite(gradients(layer.attention, grad_sum))
    grad_normed = None
    through = attention.grad_x  # (S, d) of the attention's input
    assert through is not None, "a layer's attention projects the stream it reads"
    if norm is not None and place == "pre":
        grad_normed = through
        through, gain, shift = normalise_backward(layer.input, grad_normed, norm)
    grad_input = grad_sum + through  # (S, d) the residual's two paths
    return LayerGradients(grad_output, grad_residual, attention, grad_normed, through, grad_input, gain, shift)


def layer_attention(layer: LayerSteps, grads: LayerGradients, grad_output: np.ndarray | None = None,
                    carried: np.ndarray | None = None) -> Steps:  # fmt: skip
    """A stacked layer's attention as the one-layer problem asking for its gradients that it is: dO the gradient
    reaching Attn(·) (the layer's, or `grad_output` as a student has it, `carried`: how far off it may be)."""
    attention = layer.attention
    given = grads.attention.grad_output if grad_output is None else grad_output  # (S, d)
    asked = Backward("grad_output", given, carried=carried)
    steps = attention._replace(problem=attention.problem._replace(backward=asked))
    return steps._replace(backward=grads.attention if grad_output is None else gradients(steps, given))


def normalise_backward(
    rows: np.ndarray, grad: np.ndarray, norm: Norm
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """LayerNorm's or RMSNorm's backward: dx (S, d) for dy = `grad`, and the gain's and shift's gradients (d,).

    LayerNorm: dx = (1/σ)·(dx̂ − mean(dx̂) − x̂·mean(dx̂ ∘ x̂)); RMSNorm: dx = (1/r)·(dx̂ − x̂·mean(dx̂ ∘ x̂));
    dx̂ = dy ∘ gain, the gradient of the normalised row x̂.
    """
    from attncli.layers import norm_parts  # stacks only: attncli.layers is not imported for one layer

    centred, root = norm_parts(rows, norm)  # (S, d), (S, 1)
    hat = centred / root  # (S, d) x̂
    grad_hat = grad * norm.gain if norm.gain is not None else grad  # (S, d)
    inner = grad_hat - hat * (grad_hat * hat).mean(axis=1, keepdims=True)  # (S, d)
    if norm.kind == "layer":
        inner = inner - grad_hat.mean(axis=1, keepdims=True)  # (S, d)
    gain = (grad * hat).sum(axis=0) if norm.gain is not None else None  # (d,)
    shift = grad.sum(axis=0) if norm.shift is not None else None  # (d,)
    return inner / root, gain, shift
