"""The heads of a problem: where each finds its fields, and its queries, keys and values.

Every field a head needs may be given by the head itself (under `heads:`) or once at the
top level for every head; `pick` is the one rule that decides between rival fields.
"""

from __future__ import annotations

from enum import Enum, IntEnum
from typing import NamedTuple

import numpy as np

from attncli.parsing import scores
from attncli.parsing.fields import FieldReader
from attncli.problem import GIVEN, Head, Operand, Projection, Score, width
from attncli.yamldoc import FieldPath, kind_of

HEAD_FIELDS = ("name", "queries", "keys", "values", "w_q", "w_k", "w_v", "scores", "score")
VECTORS = ("queries", "keys", "w_q", "w_k")  # the fields scores are computed from
KV_FIELDS = ("name", "keys", "values", "w_k", "w_v")  # a shared key/value head under `kv_heads:`
SHARED = ("keys", "values", "w_k", "w_v", "scores")  # what only kv_heads may give once they are used


class Level(IntEnum):
    """Where a field a head needs is given; a nearer level is a larger number."""

    ABSENT = 0
    TOP = 1  # at the top level of the problem, shared by every head
    HEAD = 2  # in the head's own mapping under `heads:`


class Pick(Enum):
    FIRST = "first"
    SECOND = "second"
    BOTH = "both"  # given at the same level: a conflict for the caller to settle
    NEITHER = "neither"


def pick(first: Level, second: Level) -> Pick:
    """Which of two rival fields a head uses (`values` or `w_v`; `scores` or the vectors).

    The nearer one wins: a head's own field beats a top-level one, which only fills in
    what the head leaves out, and any given field beats an absent one. Two at the same
    level are BOTH: `values` with `w_v` is an error, while given scores beat the vectors.
    """
    if first == second:
        return Pick.NEITHER if first == Level.ABSENT else Pick.BOTH
    return Pick.FIRST if first > second else Pick.SECOND


class Inputs(NamedTuple):
    """The inputs X that projections multiply, for keys and values (`x`) and for queries (`x_query`)."""

    x: np.ndarray | None  # (S, d)
    x_query: np.ndarray | None  # (L, d)
    query_field: str = "x_query"  # what errors call the queries' inputs: a layer's queries read x itself
    query_rows: tuple[int, ...] | None = None  # the rows of x that x_query is, when it is taken from x


# Query heads one run calculates step by step, every layer's together: the cost budget beside the value budget
# (yamldoc.MAX_VALUES) and the memory one (problem_file.MEMORY_BUDGET). A head costs about a millisecond to read,
# calculate and show however small it is (ALiBi over 100,000 empty heads: 20 s), and models have at most a few
# hundred a layer.
MAX_HEADS = 1024


def check_heads(reader: FieldReader, path: FieldPath, count: int) -> None:
    """Refuse more than MAX_HEADS query heads (at `path`) before any of them is read."""
    if count > MAX_HEADS:
        raise reader.error(path, "problem.too_many_heads", count=count, limit=MAX_HEADS)


class Heads:
    """The heads' own fields and the top-level fields they fall back to."""

    def __init__(self, reader: FieldReader, data: dict) -> None:
        self.reader = reader
        self.data = data
        listed = data.get("heads")
        if listed is None:
            self.fields: list[tuple[FieldPath, dict]] = [((), {})]
        elif isinstance(listed, list) and listed and all(isinstance(head, dict) for head in listed):
            check_heads(reader, ("heads",), len(listed))
            self.fields = [(("heads", i), head) for i, head in enumerate(listed)]
            for path, head in self.fields:
                reader.check_fields(head, path, HEAD_FIELDS)
        else:
            raise reader.error(("heads",), "problem.bad_heads", got=kind_of(listed))
        self.kv = self._kv_heads()
        self.kv_read: dict[int, tuple[tuple[FieldPath, Operand], tuple[FieldPath, Operand]]] = {}

    def _kv_heads(self) -> list[tuple[FieldPath, dict]]:
        """The shared key/value heads of grouped-query attention; none without `kv_heads:`."""
        if "kv_heads" not in self.data:
            return []
        listed = self.data["kv_heads"]
        if not (isinstance(listed, list) and listed and all(isinstance(head, dict) for head in listed)):
            raise self.reader.error(("kv_heads",), "problem.bad_kv_heads", got=kind_of(listed))
        kv = [(("kv_heads", g), head) for g, head in enumerate(listed)]
        for path, head in kv:
            self.reader.check_fields(head, path, KV_FIELDS)
        for path, fields in [((), self.data), *self.fields]:
            stray = next((name for name in SHARED if name in fields), None)
            if stray is not None:
                raise self.reader.error((*path, stray), "problem.shared_by_kv_heads", name=stray)
        if len(self.fields) % len(kv):
            raise self.reader.error(("kv_heads",), "problem.gqa_divisible", heads=len(self.fields), groups=len(kv))
        return kv

    def kv_head(self, index: int) -> int | None:
        """The key/value head query head `index` reads: ⌊h·G/H⌋, as SDPA's enable_gqa; None without kv_heads."""
        return index * len(self.kv) // len(self.fields) if self.kv else None

    def __len__(self) -> int:
        return len(self.fields)

    def level(self, head: int, name: str, kv: bool = False) -> Level:
        if name in (self.kv if kv else self.fields)[head][1]:
            return Level.HEAD
        return Level.TOP if name in self.data else Level.ABSENT

    def lookup(self, head: int, name: str, kv: bool = False) -> tuple[FieldPath, object] | None:
        """A head's own field (of kv head `head` with `kv`), else the top-level one; None when neither gives it."""
        path, fields = (self.kv if kv else self.fields)[head]
        if name in fields:
            return (*path, name), fields[name]
        if name in self.data:
            return (name,), self.data[name]
        return None

    def head(self, index: int, tokens: tuple[str, ...], query_tokens: tuple[str, ...], inputs: Inputs) -> Head:
        """Head `index`: its values, and its given scores or the queries and keys they come from."""
        path, fields = self.fields[index]
        given = self.reader.optional_text(fields, "name", path)
        unnamed = None if given else (index + 1 if len(self) > 1 else 0)
        name = given or (f"head {index + 1}" if len(self) > 1 else "head")  # English in every language: JSON's
        group = self.kv_head(index)
        if group is None:
            values = self.operand(index, "values", "w_v", tokens, inputs.x, "x")
        else:
            keys, values = self.shared(group, tokens, inputs)
        if values is None:
            raise self.reader.error(path, "problem.missing", name="values", alternative="w_v")
        vectors = max(self.level(index, field) for field in VECTORS)
        if pick(self.level(index, "scores"), vectors) in (Pick.FIRST, Pick.BOTH):
            given_scores = self.given_scores(index, tokens, query_tokens)
            return Head(name, Score(GIVEN, 1.0), None, None, values[1], scores=given_scores, unnamed=unnamed)
        queries = self.operand(index, "queries", "w_q", query_tokens, inputs.x_query, inputs.query_field)
        if group is None:
            keys = self.operand(index, "keys", "w_k", tokens, inputs.x, "x")
        if queries is None or keys is None:
            missing = ("queries", "w_q") if queries is None else ("keys", "w_k")
            raise self.reader.error(path, "problem.missing", name=missing[0], alternative=f"{missing[1]}, scores")
        top_scale = (("scale",), self.data["scale"]) if "scale" in self.data else None
        score = scores.read(
            self.reader, self.lookup(index, "score"), top_scale, width(queries[1]), width(keys[1]), keys[0]
        )
        return Head(name, score, queries[1], keys[1], values[1], kv_head=group, unnamed=unnamed)

    def shared(
        self, group: int, tokens: tuple[str, ...], inputs: Inputs
    ) -> tuple[tuple[FieldPath, Operand], tuple[FieldPath, Operand]]:
        """The keys and values of kv head `group`, read once for all the query heads that share them."""
        if group not in self.kv_read:
            path = self.kv[group][0]
            keys = self.operand(group, "keys", "w_k", tokens, inputs.x, "x", kv=True)
            values = self.operand(group, "values", "w_v", tokens, inputs.x, "x", kv=True)
            for operand, given, weight in ((keys, "keys", "w_k"), (values, "values", "w_v")):
                if operand is None:
                    raise self.reader.error(path, "problem.missing", name=given, alternative=weight)
            self.kv_read[group] = keys, values
        return self.kv_read[group]

    def kv_name(self, group: int) -> str:
        """What the view calls kv head `group`: its `name:`, else "kv head g"."""
        path, fields = self.kv[group]
        return self.reader.optional_text(fields, "name", path) or f"kv head {group + 1}"

    def kv_unnamed(self) -> tuple[int, ...]:
        """The kv heads without `name:`: a person reads them in the run's language (`Problem.kv_label`)."""
        return tuple(
            g for g, (path, fields) in enumerate(self.kv) if not self.reader.optional_text(fields, "name", path)
        )

    def given_scores(self, index: int, tokens: tuple[str, ...], query_tokens: tuple[str, ...]) -> np.ndarray:
        """The (L, S) scores a head gives instead of vectors."""
        path, value = self.lookup(index, "scores")
        matrix = self.reader.matrix(path, value, query_tokens, "query_tokens")
        if matrix.shape[1] != len(tokens):
            raise self.reader.error(path, "problem.scores_width", count=matrix.shape[1], expected=len(tokens))
        return matrix

    def operand(
        self,
        head: int,
        given: str,
        weight: str,
        rows: tuple[str, ...],
        x: np.ndarray | None,
        x_name: str,
        kv: bool = False,
    ) -> tuple[FieldPath, Operand] | None:
        """Q, K or V of one head (of kv head `head` with `kv`), with where it was given: as rows, or x·`weight`."""
        chosen = pick(self.level(head, given, kv), self.level(head, weight, kv))
        if chosen == Pick.NEITHER:
            return None
        if chosen == Pick.BOTH:
            raise self.reader.error(
                self.lookup(head, given, kv)[0], "problem.given_and_projected", given=given, weight=weight
            )
        if chosen == Pick.FIRST:
            path, value = self.lookup(head, given, kv)
            return path, self.reader.matrix(path, value, rows, "query_tokens" if given == "queries" else "tokens")
        path, value = self.lookup(head, weight, kv)
        if x is None:
            raise self.reader.error(path, "problem.projection_without_x", weight=weight, x=x_name)
        w = self.reader.matrix(path, value)
        if w.shape[0] != x.shape[1]:
            raise self.reader.error(path, "problem.projection_rows", count=w.shape[0], expected=x.shape[1], x=x_name)
        return path, Projection(x=x, w=w)
