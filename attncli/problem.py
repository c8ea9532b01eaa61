"""The validated problem: tokens, heads, mask, bias, positions. Pure data; attncli.parsing builds it from YAML, flags.

Everything that receives a `Problem` (the numpy core, the renderers, the grader) can
trust that matrices line up, that the mask leaves every query at least one key, and
that every number is finite.

The records are NamedTuples (`._replace` makes a changed copy): every run creates these
classes as it starts, and a frozen dataclass costs about ten times as much to create.
Score stays a dataclass for the check of its kind, which a NamedTuple cannot run.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from attncli.i18n import t

SCORE_KINDS = ("scaled_dot", "dot", "cosine", "general", "additive")  # what a problem file may ask for
GIVEN = "given"  # the scores themselves are in the input: no queries, no keys
KINDS = (*SCORE_KINDS, GIVEN)


class Projection(NamedTuple):
    """A matrix given as inputs times a learned projection, as in Q = X·W_Q."""

    x: np.ndarray  # (n, d)
    w: np.ndarray  # (d, d_out)


Operand = np.ndarray | Projection


def width(operand: Operand) -> int:
    """How many numbers each row of `operand` has once projected: d_q, d_k or d_v."""
    return operand.w.shape[1] if isinstance(operand, Projection) else operand.shape[1]


@dataclass(frozen=True)
class Score:
    """How a query and a key become one number, and the factor applied to it."""

    kind: str  # one of KINDS
    scale: float
    w: np.ndarray | None = None  # general: (d_q, d_k)
    w_query: np.ndarray | None = None  # additive: (d_q, d_a)
    w_key: np.ndarray | None = None  # additive: (d_k, d_a)
    v: np.ndarray | None = None  # additive: (d_a,)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"score kind {self.kind!r} is not one of {', '.join(KINDS)}")


class Head(NamedTuple):
    name: str  # its `name:`, else "head h" ("head" when it is the only one): what JSON calls it, in every language
    score: Score
    queries: Operand | None  # (L, d_q); None when scores are given
    keys: Operand | None  # (S, d_k); None when scores are given
    values: Operand  # (S, d_v)
    scores: np.ndarray | None = None  # (L, S), given directly
    kv_head: int | None = None  # grouped-query attention: which of `kv_heads` gives keys and values
    unnamed: int | None = None  # without `name:`, its number h (0 when it is the only head)

    @property
    def label(self) -> str:
        """What a person reads for the head: its `name:`, else "head h" in the run's language (JSON keeps `name`)."""
        if self.unnamed is None:
            return self.name
        return t("render.head_unnamed", number=self.unnamed) if self.unnamed else t("render.head_only")


class MaskRule(NamedTuple):
    """The mask as the user said it, kept for display; `Problem.mask` is what is applied."""

    kind: str = "none"  # none | causal | matrix
    window: int | None = None
    padding: tuple[str, ...] = ()


class Bias(NamedTuple):
    """An additive term between the scaled scores and softmax, like SDPA's float attn_mask."""

    kind: str  # matrix | alibi
    matrix: np.ndarray  # (L, S): the bias itself, or ALiBi's distances |i − j|
    slopes: tuple[float, ...] = ()  # alibi: m_h of each head

    def of(self, head: int) -> np.ndarray:
        """The (L, S) bias head `head` adds: the matrix, or −m_h·|i − j|."""
        return -self.slopes[head] * self.matrix if self.kind == "alibi" else self.matrix


class PositionEncoding(NamedTuple):
    """`positions:` where each query and key stands, and how that enters the calculation (attncli.positions).

    rope: queries and keys are turned after projection, in `core.attend`; sinusoidal: the encodings
    are already added to x in every head's projections, and `x`, `encoding` keep both parts for display.
    """

    kind: str  # rope | sinusoidal
    base: float
    query_at: np.ndarray  # (L,) the position m of each query
    key_at: np.ndarray  # (S,) the position of each key
    style: str = "half"  # rope: half | interleaved
    x: np.ndarray | None = None  # sinusoidal: x as given (S, d)
    encoding: np.ndarray | None = None  # sinusoidal: PE of the key positions (S, d), added to x
    x_query: np.ndarray | None = None  # sinusoidal, cross-attention: x_query as given (L, d)
    query_encoding: np.ndarray | None = None  # sinusoidal: PE of the query positions (L, d)


class Backward(NamedTuple):
    """What `backward:` (or --grad-output, --loss) asks: the upstream gradient dO of the final output, and its loss.

    `sum` is L = Σ O (dO all ones); `target` is L = ½·Σ (O − T)² (dO = O − T); `grad_output` gives dO itself.
    """

    loss: str  # grad_output | sum | target
    grad_output: np.ndarray | None = None  # (L, d_out) dO as given; rows = the output's rows
    target: np.ndarray | None = None  # (L, d_out) T of the `target` loss
    carried: np.ndarray | None = None  # (L, d_out) how far a careful student's dO may be from grad_output: a stacked
    # layer's attention reads the gradient the layers after it hand on (attncli.grading.backward_stack); None: exact


class Problem(NamedTuple):
    tokens: tuple[str, ...]  # S key/value positions
    query_tokens: tuple[str, ...]  # L query positions
    cross: bool  # queries come from another sequence
    heads: tuple[Head, ...]
    mask: np.ndarray  # (L, S) bool, True = may attend
    mask_rule: MaskRule = MaskRule()
    w_o: np.ndarray | None = None  # (Σ d_v, d_out)
    bias: Bias | None = None
    positions: PositionEncoding | None = None
    kv_names: tuple[str, ...] = ()  # the shared key/value heads' names, when `kv_heads:` is given ("kv head g": JSON's)
    kv_unnamed: tuple[int, ...] = ()  # the kv heads without `name:`, by index
    title: str | None = None
    notes: str | None = None
    source: str = "-"
    tiles: int | None = None  # `tiles:` B, keys per tile of the online softmax shown (attncli.tiles)
    stable: bool = False  # `stable:` the softmax shifted by each row's max, with its log-sum-exp
    backward: Backward | None = None  # the gradients asked for, when `backward:` is given
    # Fields given once at the top level and read by several heads, and those heads: their gradients add up there
    shared: tuple[tuple[str, tuple[int, ...]], ...] = ()
    query_rows: tuple[int, ...] | None = None  # the rows of x the queries' inputs are, when they are not x_query

    def kv_label(self, group: int) -> str:
        """What a person reads for kv head `group`: its `name:`, else "kv head g" in the run's language."""
        return t("render.kv_head_unnamed", number=group + 1) if group in self.kv_unnamed else self.kv_names[group]

    @property
    def rope(self) -> PositionEncoding | None:
        """The RoPE encoding `core.attend` applies to every head; None without (sinusoidal is already in x)."""
        return self.positions if self.positions is not None and self.positions.kind == "rope" else None


NORM_KINDS = ("layer", "rms")
NORM_PLACES = ("pre", "post")


class Norm(NamedTuple):
    """How a layer normalises each token's row: LayerNorm or RMSNorm, before attention or after the residual sum.

    Without `gain` and `shift` nothing is learned, as torch's layer_norm without weight and bias.
    """

    kind: str  # layer: (x − mean) / √(var + eps); rms: x / √(mean(x²) + eps)
    place: str  # pre: x + Attn(N(x)); post: N(x + Attn(x))
    eps: float
    gain: np.ndarray | None = None  # (d,) multiplies the normalised row
    shift: np.ndarray | None = None  # (d,) then added (LayerNorm only); `bias:` in a problem file


class Layer(NamedTuple):
    """One attention layer of a stack: its attention as a problem of its own, and its normalisation.

    The heads' projections in `attention` multiply the stack's `x`; `attncli.layers.compute` feeds
    each layer the residual stream that reaches it instead.
    """

    name: str  # its `name:`, else "layer l": what JSON calls it, in every language
    attention: Problem
    norm: Norm | None = None
    unnamed: int | None = None  # without `name:`, its number l

    @property
    def label(self) -> str:
        """What a person reads for the layer: its `name:`, else "layer l" in the run's language (JSON keeps `name`)."""
        return self.name if self.unnamed is None else t("render.layer_unnamed", number=self.unnamed)


class Stack(NamedTuple):
    """Layers stacked with residual connections: layer 1 reads `x`, each next one x + the attention before it."""

    tokens: tuple[str, ...]  # S positions: self-attention throughout
    x: np.ndarray  # (S, d)
    layers: tuple[Layer, ...]
    title: str | None = None
    notes: str | None = None
    source: str = "-"
    backward: Backward | None = None  # the gradients asked for, dO a row per token of the last layer's stream
