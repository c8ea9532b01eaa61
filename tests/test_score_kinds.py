"""Every score kind a problem file may ask for is known wherever a score is computed, written or graded.

A new kind added to attncli.problem.SCORE_KINDS must come with its numbers (attncli.core), its grading
replay (attncli.grading.stages.compatibility), its formula in the write-ups, its name in both catalogues
and a plain-Python reference case here; grading refuses a kind it has no replay for, rather than grade it
as a dot product.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from attncli import core
from attncli.grading import interval, stages
from attncli.i18n import en, es
from attncli.problem import SCORE_KINDS, Score
from attncli.render.walk import FORMULAS
from tests import reference

RNG = np.random.default_rng(24)
Q, K, V = RNG.normal(size=(2, 3)), RNG.normal(size=(4, 3)), RNG.normal(size=(4, 2))  # (L, d_q), (S, d_k), (S, d_v)
LEARNED = {"w": RNG.normal(size=(3, 3)), "w_query": RNG.normal(size=(3, 5)), "w_key": RNG.normal(size=(3, 5))}
LEARNED["v"] = RNG.normal(size=5)
NEEDS = {"general": ("w",), "additive": ("w_query", "w_key", "v")}  # the learned matrices each kind reads


def score(kind: str) -> Score:
    return Score(kind, 1.0, **{name: LEARNED[name] for name in NEEDS.get(kind, ())})


def replayed(kind_or_score: Score | types.SimpleNamespace) -> np.ndarray:
    """The grader's replay of q·k (or the kind's compatibility) from exactly known q, k, v, nothing carried."""
    exact = [interval.exact(m) for m in (Q, K, V)]
    return stages.compatibility(kind_or_score, "true", *exact, keep=lambda step, num: num).t  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", SCORE_KINDS)
def test_every_score_kind_has_a_replay_a_formula_a_catalogue_name_and_a_reference_case(kind: str) -> None:
    learned = {name: LEARNED[name].tolist() for name in NEEDS.get(kind, ())}
    expected = [[reference.compatibility(kind, q, k, **learned) for k in K.tolist()] for q in Q.tolist()]
    assert np.abs(replayed(score(kind)) - np.array(expected)).max() <= 1e-12
    assert np.abs(core.compatibility(score(kind), Q, K)[0] - np.array(expected)).max() <= 1e-12
    assert kind in FORMULAS
    assert f"writeup.score_{kind}" in en.MESSAGES and f"writeup.score_{kind}" in es.MESSAGES


def test_an_unknown_score_kind_is_refused_not_graded_as_a_dot_product() -> None:
    unknown = types.SimpleNamespace(kind="bilinear", scale=1.0, **LEARNED)  # Score itself refuses the kind
    with pytest.raises(ValueError, match="bilinear"):
        replayed(unknown)
