"""The exercises of the replayed-mistake suite that are not `attncli generate`'s: problems of our own, from fixed seeds.

Additive scores, given scores beside a head of its own, decoding against a cache (with and without RoPE),
biases and ALiBi, sinusoidal positions, and stacks whose norms learn a gain and a bias: each written as
the sheet a student gets (and, with no answers in it, its own key).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from tests.replays.student import Problem, read


@dataclass(frozen=True)
class ExerciseSet:
    """One `attncli generate --count` call."""

    name: str
    options: tuple[str, ...]
    count: int
    seed: int


# problems of our own (generate has none)
OWN = {"additive": 5, "given": 3, "decoding": 4, "bias": 3, "alibi": 3, "sinusoidal": 4, "rope-decoding": 3}
# Stacks of our own whose norms learn a gain (and LayerNorm a bias), which generate does not write
AFFINE = ExerciseSet("layers-affine", (), 2, 0)


@dataclass(frozen=True, repr=False)
class Exercise:
    id: str  # set/NN
    text: str  # the problem as the student gets it (the sheet)
    problem: Problem | None  # None for a stack of layers (its students are tests/replays/layers.py)
    key: Path  # a key file for `check --key`: the problem, with or without answers


def affine_stacks(directory: Path) -> Path:
    """Two stacks of two layers whose norms learn a gain (LayerNorm placed pre, also a bias; RMSNorm placed post),
    each written as its sheet and, no answers in it, its own key."""
    rng = np.random.default_rng(13)
    out = directory / "sets" / AFFINE.name
    out.mkdir(parents=True)
    for number in range(1, AFFINE.count + 1):
        layer = {"norm": {"type": "layer", "place": "pre", "gain": ints(rng, (3,), 1, 2), "bias": ints(rng, (3,))}}
        other = {"norm": {"type": "rms", "place": "post", "gain": ints(rng, (3,), 1, 2)}}
        stack = [{**norm, "w_q": ints(rng, (3, 2)), "w_k": ints(rng, (3, 2)), "w_v": ints(rng, (3, 3))}
                 for norm in (layer, other)[:: 1 if number == 1 else -1]]  # fmt: skip
        data = {"exercise": f"{AFFINE.name}-{number:02d}", "tokens": ["the", "bank", "flooded"]}
        text = yaml.safe_dump(data | {"x": ints(rng, (3, 3)), "layers": stack}, sort_keys=False)
        for name in (f"exercise-{number:02d}.yaml", f"exercise-{number:02d}-key.yaml"):
            (out / name).write_text(text, encoding="utf-8")
    return out


def ints(rng: np.random.Generator, shape: tuple[int, ...], low: int = -1, high: int = 2) -> list:
    return rng.integers(low, high + 1, size=shape).tolist()


def biased_problems() -> list[tuple[str, dict]]:
    """A bias matrix (one head; the last causal, with two heads sharing it) and ALiBi (two heads, each with its own
    queries and keys, and W_O; causal, the last without a mask: |i − j| both ways), from a fixed seed."""
    rng = np.random.default_rng(12)
    tokens = ["the", "bank", "flooded"]
    texts = []
    for i in range(OWN["bias"]):
        data = {"tokens": tokens, "queries": ints(rng, (3, 2)), "keys": ints(rng, (3, 2))}
        data |= {"values": ints(rng, (3, 2)), "bias": ints(rng, (3, 3))}
        if i == OWN["bias"] - 1:
            data |= {"heads": [{"name": "head 1"}, {"name": "head 2", "keys": ints(rng, (3, 2))}], "mask": "causal"}
        texts.append(("bias", data))
    tokens = ["fisherman", "net", "bank", "river"]
    for i in range(OWN["alibi"]):
        heads = [{"queries": ints(rng, (4, 2), -2, 2), "keys": ints(rng, (4, 2), -2, 2)} for _ in range(2)]
        data = {"tokens": tokens, "values": ints(rng, (4, 2)), "heads": heads, "w_o": ints(rng, (4, 2), 0, 1)}
        texts.append(("alibi", data | {"bias": "alibi"} | ({"mask": "causal"} if i < OWN["alibi"] - 1 else {})))
    return texts


def decoding_and_positions() -> list[tuple[str, dict]]:
    """Decoding against a cache (one new token, or two; with and without RoPE), biases and ALiBi
    (`biased_problems`), and sinusoidal positions added to x (causal every other one), from a fixed seed."""
    rng = np.random.default_rng(11)
    texts = []
    for i in range(OWN["decoding"]):
        asking = 1 + i % 2  # one new token, or two
        data = {"tokens": ["fisherman", "net", "bank", "river"], "query_tokens": ["bank", "river"][2 - asking :]}
        data |= {"queries": ints(rng, (asking, 2)), "keys": ints(rng, (4, 2)), "values": ints(rng, (4, 2))}
        texts.append(("decoding", data | {"mask": "causal_lower_right"}))
    for i in range(OWN["rope-decoding"]):  # RoPE turning each token at its position
        asking = 1 + i % 2
        data = {"tokens": ["fisherman", "net", "bank", "river"], "query_tokens": ["bank", "river"][2 - asking :]}
        data |= {"queries": ints(rng, (asking, 4)), "keys": ints(rng, (4, 4)), "values": ints(rng, (4, 2))}
        data |= {"mask": "causal_lower_right", "positions": {"type": "rope", "base": 100, "style": "half"}}
        texts.append(("rope-decoding", data))
    texts += biased_problems()
    for i in range(OWN["sinusoidal"]):  # x + PE through W_Q, W_K, W_V
        data = {"tokens": ["the", "bank", "flooded"], "x": ints(rng, (3, 4), -1, 1)}  # scores a person can exp
        data |= {name: ints(rng, (4, 2), -1, 1) for name in ("w_q", "w_k", "w_v")}
        texts.append(("sinusoidal", data | {"positions": "sinusoidal"} | ({"mask": "causal"} if i % 2 else {})))
    return texts


def own_problems(directory: Path) -> list[Exercise]:
    """Additive problems, two-head problems with given scores, decoding, and biases (`_biased_problems`),
    from fixed seeds."""
    rng = np.random.default_rng(10)
    tokens = ["the", "bank", "flooded"]
    out = directory / "sets" / "own"
    out.mkdir(parents=True)
    texts = []
    for _ in range(OWN["additive"]):
        score = {
            "type": "additive",
            "w_query": ints(rng, (2, 2)),
            "w_key": ints(rng, (2, 2)),
            "v": ints(rng, (2,), 1, 2),
        }
        data = {
            "tokens": tokens,
            "queries": ints(rng, (3, 2)),
            "keys": ints(rng, (3, 2)),
            "values": ints(rng, (3, 2)),
        }
        texts.append(("additive", {**data, "score": score}))
    for _ in range(OWN["given"]):
        queries = [[f"{a}*sqrt(2)" for a in row] for row in ints(rng, (3, 2))]
        heads = [
            {"name": "head 1", "queries": queries, "keys": ints(rng, (3, 2))},
            {"name": "head 2", "scores": ints(rng, (3, 3), -2, 2)},
        ]
        texts.append(
            ("given", {"tokens": tokens, "values": ints(rng, (3, 2)), "heads": heads, "w_o": ints(rng, (4, 2), 0, 1)})
        )
    texts += decoding_and_positions()
    exercises = []
    for i, (name, data) in enumerate(texts, start=1):
        ident = {"exercise": f"{name}-{i:02d}"}  # = exercise_id of the Exercise below
        text = yaml.safe_dump(ident | data, sort_keys=False, default_flow_style=None)
        path = out / f"{name}-{i:02d}.yaml"
        path.write_text(text, encoding="utf-8")
        exercises.append(Exercise(f"{name}/{i:02d}", text, read(text), path))
    return exercises
