"""A softmax over rows of logits, every step kept: the stable softmax, sampling filters, cross-entropy.

Pure numpy, no I/O: `attncli softmax` is its client, and `attncli compute --stable` takes its
log-sum-exp. Shapes: N rows (examples, positions), V logits a row (a vocabulary, keys).

References:
- the stable softmax and the log-sum-exp with b = max: d2l.ai §4.1 (softmax regression), "Softmax
  Revisited"; ln Σ e^s = m + ln Σ e^(s − m) for any m, finite for m = max s.
- temperature: logits divided by T before the softmax (Hinton et al. 2015, "Distilling the Knowledge");
- top-k: Fan, Lewis & Dauphin 2018, "Hierarchical Neural Story Generation": keep the K most likely, and, as
  Hugging Face's TopKLogitsWarper does, every token tied with the K-th (so more than K may stay);
- top-p (nucleus): Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration": the smallest
  set, most likely first, whose probability is at least P;
- Hugging Face's samplers apply temperature, then top-k, then top-p, each on what the one before left,
  renormalised (TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper): the order here.
- cross-entropy of a target t: −ln p_t = LSE − s_t, its gradient p − onehot(t) (Karpathy, "backprop ninja").
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Logits(NamedTuple):
    """The validated input of `attncli softmax`: rows of logits, their tokens' names, and what to do with them."""

    tokens: tuple[str, ...]  # V names, one per logit
    rows: np.ndarray  # (N, V) the logits as given
    temperature: float = 1.0  # the logits are divided by it first
    top_k: int | None = None  # keep the K most likely (after temperature), and any tied with the K-th
    top_p: float | None = None  # then the smallest most-likely-first set of probability ≥ P
    targets: tuple[int, ...] | None = None  # (N,) the index of each row's target, for cross-entropy
    title: str | None = None
    notes: str | None = None
    source: str = "-"


class Stable(NamedTuple):
    """Softmax with the row maximum subtracted first: each row's m, s − m, e^(s − m), their sum, ln Σ e^s, p.

    −∞ cells (masked keys) stay −∞ in `shifted` and give exactly 0 in `exp` and `probabilities`.
    """

    max: np.ndarray  # (N,) m = max s
    shifted: np.ndarray  # (N, V) s − m, ≤ 0
    exp: np.ndarray  # (N, V) e^(s − m), in (0, 1]
    sum: np.ndarray  # (N,) Σ e^(s − m), in [1, V]
    logsumexp: np.ndarray  # (N,) ln Σ e^s = m + ln Σ e^(s − m)
    probabilities: np.ndarray  # (N, V) e^(s − m) / Σ e^(s − m)


class Filtered(NamedTuple):
    """What top-k and top-p leave of each row's distribution, every intermediate kept, renormalised at the end."""

    order: np.ndarray  # (N, V) each row's tokens, most likely first (ties: the earlier token first)
    top_k: np.ndarray | None  # (N, V) bool: kept by top-k (ties with the K-th too); None without it
    renormalised: np.ndarray | None  # (N, V) with top-k and top-p: p over top-k's tokens / their sum, what top-p reads
    cumulative: np.ndarray | None  # (N, V) with top-p: what it reads summed down `order`, up to each token
    kept: np.ndarray  # (N, V) bool: the tokens kept in the end
    probabilities: np.ndarray  # (N, V) p over the kept tokens / their sum; 0 elsewhere


class CrossEntropy(NamedTuple):
    """Each row's −ln p_t, their mean, and the mean's gradient with respect to the logits as given."""

    per_row: np.ndarray  # (N,) −ln p_t = LSE − s_t (s after temperature)
    mean: float
    gradient: np.ndarray  # (N, V) (p − onehot(t)) / (N·T)


class SoftmaxSteps(NamedTuple):
    """Every step of `attncli softmax`: the record each of its output formats renders."""

    logits: Logits
    scaled: np.ndarray  # (N, V) logits / T: what the softmax is taken of
    stable: Stable
    filtered: Filtered | None  # with top-k or top-p
    cross_entropy: CrossEntropy | None  # with targets


def log_sum_exp(maxima: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """ln Σ e^s = m + ln Σ e^(s − m) (N,), from each row's m and Σ e^(s − m): finite wherever m is."""
    return maxima + np.log(sums)  # (N,)


def stable(scores: np.ndarray) -> Stable:
    """The stable softmax of each row of `scores` (N, V), −∞ where a cell is masked; every row has a finite cell."""
    maxima = scores.max(axis=1)  # (N,)
    shifted = scores - maxima[:, None]  # (N, V)
    exp = np.exp(shifted)  # (N, V)
    sums = exp.sum(axis=1)  # (N,)
    return Stable(maxima, shifted, exp, sums, log_sum_exp(maxima, sums), exp / sums[:, None])


def most_likely_first(scaled: np.ndarray) -> np.ndarray:
    """Each row's indices (N, V), largest logit first; tied logits keep their order (the earlier token first)."""
    return np.argsort(-scaled, axis=1, kind="stable")  # (N, V)


def top_k(scaled: np.ndarray, order: np.ndarray, k: int) -> np.ndarray:
    """Which tokens (N, V) top-k keeps: each at least as large as the `k`-th of its row's `order` (all when k ≥ V).

    Hugging Face's TopKLogitsWarper removes `scores < topk(scores, k)[..., -1]`, so a token tied with the K-th stays
    and more than K may be kept; the issue's tie rule (the earlier token first) orders the tokens for top-p.
    """
    kth = np.take_along_axis(scaled, order[:, min(k, scaled.shape[1]) - 1, None], axis=1)  # (N, 1)
    kept: np.ndarray = scaled >= kth  # (N, V)
    return kept


def top_p(probabilities: np.ndarray, order: np.ndarray, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Which tokens (N, V) make the shortest prefix of `order` whose probabilities add up to at least `p`, and
    those sums (N, V), each token's in its place.

    The sums are float64's, in that order; a row that never reaches `p` (rounding, with p = 1) keeps every token.
    """
    in_order = np.cumsum(np.take_along_axis(probabilities, order, axis=1), axis=1)  # (N, V)
    reached = in_order >= p  # (N, V)
    count = np.where(reached.any(axis=1), reached.argmax(axis=1) + 1, probabilities.shape[1])  # (N,)
    kept = np.zeros(probabilities.shape, dtype=bool)  # (N, V)
    np.put_along_axis(kept, order, np.arange(probabilities.shape[1])[None, :] < count[:, None], axis=1)
    cumulative = np.empty_like(probabilities)  # (N, V)
    np.put_along_axis(cumulative, order, in_order, axis=1)
    return kept, cumulative


def renormalised(probabilities: np.ndarray, kept: np.ndarray) -> np.ndarray:
    """`probabilities` (N, V) over the `kept` tokens of each row, divided by their sum; 0 elsewhere."""
    mass = np.where(kept, probabilities, 0.0)  # (N, V)
    return mass / mass.sum(axis=1, keepdims=True)  # (N, V)


def filtered(probabilities: np.ndarray, scaled: np.ndarray, k: int | None, p: float | None) -> Filtered:
    """Top-k, then top-p on the distribution top-k leaves (renormalised), as Hugging Face's samplers chain them."""
    order = most_likely_first(scaled)  # (N, V)
    by_k = None if k is None else top_k(scaled, order, k)  # (N, V)
    read = probabilities if by_k is None else renormalised(probabilities, by_k)  # (N, V) what top-p reads
    by_p, cumulative = (None, None) if p is None else top_p(read, order, p)
    kept = by_k if by_p is None else by_p if by_k is None else by_k & by_p  # (N, V)
    again = None if by_k is None or p is None else read
    return Filtered(order, by_k, again, cumulative, kept, renormalised(probabilities, kept))


def cross_entropy(steps: Stable, scaled: np.ndarray, targets: tuple[int, ...], temperature: float) -> CrossEntropy:
    """−ln p_t = LSE − s_t per row, the mean over the N rows, and its gradient (p − onehot(t)) / (N·T).

    The gradient is taken with respect to the logits as given: the softmax sees them divided by T.
    """
    rows = np.arange(len(targets))
    picked = np.asarray(targets)
    per_row = steps.logsumexp - scaled[rows, picked]  # (N,)
    onehot = np.zeros(scaled.shape)  # (N, V)
    onehot[rows, picked] = 1.0
    gradient = (steps.probabilities - onehot) / (len(targets) * temperature)  # (N, V)
    return CrossEntropy(per_row, float(per_row.mean()), gradient)


def compute(logits: Logits) -> SoftmaxSteps:
    """Every step for `logits`: s/T, the stable softmax, then the filters and the cross-entropy when asked for.

    The parser (attncli.parsing.logits) has seen to it that every s/T is finite.
    """
    scaled = logits.rows / logits.temperature  # (N, V)
    steps = stable(scaled)
    wanted = logits.top_k is not None or logits.top_p is not None
    kept = filtered(steps.probabilities, scaled, logits.top_k, logits.top_p) if wanted else None
    loss = None
    if logits.targets is not None:
        loss = cross_entropy(steps, scaled, logits.targets, logits.temperature)
    return SoftmaxSteps(logits, scaled, steps, kept, loss)
