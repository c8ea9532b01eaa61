"""Generated problem documents, valid and broken, through the command line.

Every run must end with 0 (an answer) or 2 (one line saying what is wrong): never 1, 70,
a traceback or a hang. A valid document's answer must agree with the plain-Python
reference (tests/reference.py) computed from the numbers the generator chose; a broken
document that still runs must at least be self-consistent: its weights are the softmax of
its scores, and its output is the weighted sum of its values.
"""

from __future__ import annotations

import json
import math
import warnings

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from attncli.cli import app
from tests import reference

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
KINDS = ("scaled_dot", "dot", "cosine", "general", "additive")
# A number as it may be written, and its value.
WRITTEN = st.one_of(
    st.integers(-5, 5).map(lambda n: (n, float(n))),
    st.floats(-4, 4, allow_nan=False).map(lambda x: (x, x)),
    st.sampled_from(
        [
            ("sqrt(2)", math.sqrt(2)),
            ("1/3", 1 / 3),
            ("-e", -math.e),
            ("2^0.5", 2**0.5),
            ("√3", math.sqrt(3)),
            ("pi/4", math.pi / 4),
        ]
    ),
)


def run(text: str | bytes) -> tuple[int, str, str]:
    """attncli compute - --format json on `text`; a warning counts as a failure."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = CliRunner().invoke(app, ["compute", "-", "--format", "json"], input=text)
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    assert result.exit_code in (0, 2), result.stderr
    if result.exit_code == 2:
        assert result.stdout == ""
        assert result.stderr.startswith("attncli: ")
        assert result.stderr.count("\n") == 1, result.stderr
    return result.exit_code, result.stdout, result.stderr


@st.composite
def written_matrix(draw: st.DrawFn, rows: int, columns: int) -> tuple[list, list[list[float]]]:
    cells = draw(st.lists(st.lists(WRITTEN, min_size=columns, max_size=columns), min_size=rows, max_size=rows))
    return [[text for text, _ in row] for row in cells], [[value for _, value in row] for row in cells]


@st.composite
def problems(draw: st.DrawFn) -> tuple[dict, dict]:
    """A valid problem document, and what the reference needs to solve it (None when every key of a query is masked)."""
    keys_count, d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
    cross = draw(st.booleans())
    tokens = [f"k{i}" for i in range(keys_count)]
    query_tokens = [f"q{i}" for i in range(draw(st.integers(1, 3)))] if cross else tokens
    doc: dict = {"tokens": tokens}
    if cross:
        doc["query_tokens"] = query_tokens
    length = len(query_tokens)
    heads, solved = [], []
    for _ in range(draw(st.integers(1, 2))):
        head: dict = {}
        values_text, values = draw(written_matrix(keys_count, d_v))
        head["values"] = dict(zip(tokens, values_text)) if draw(st.booleans()) else values_text
        if draw(st.booleans()):
            scores_text, scores = draw(written_matrix(length, keys_count))
            head["scores"] = scores_text
            solved.append({"scores": scores, "values": values})
        else:
            kind = draw(st.sampled_from(KINDS))
            d_q = d_k if kind in ("scaled_dot", "dot", "cosine", "general") else draw(st.integers(1, 3))
            queries_text, queries = draw(written_matrix(length, d_q))
            keys_text, keys = draw(written_matrix(keys_count, d_k))
            head["queries"], head["keys"] = queries_text, keys_text
            spec: dict = {"type": kind}
            extra: dict = {}
            if kind == "general":
                spec["w"], extra["w"] = draw(written_matrix(d_q, d_k))
            if kind == "additive":
                d_a = draw(st.integers(1, 3))
                spec["w_query"], extra["w_query"] = draw(written_matrix(d_q, d_a))
                spec["w_key"], extra["w_key"] = draw(written_matrix(d_k, d_a))
                v_text, v = draw(written_matrix(1, d_a))
                spec["v"], extra["v"] = v_text[0], v[0]
            scale = None
            if draw(st.booleans()):
                scale_text, scale = draw(WRITTEN)
                spec["scale"] = scale_text
            head["score"] = spec if len(spec) > 1 or draw(st.booleans()) else kind
            solved.append({"queries": queries, "keys": keys, "values": values, "kind": kind, "scale": scale, **extra})
        heads.append(head)
    if len(heads) == 1:
        doc.update(heads[0])
    else:
        doc["heads"] = heads
    d_concat = d_v * len(heads)
    w_o = None
    if draw(st.booleans()):
        doc["w_o"], w_o = draw(written_matrix(d_concat, draw(st.integers(1, 2))))
    mask = [[True] * keys_count for _ in range(length)]
    rule = draw(st.sampled_from(["none", "causal", "matrix"]))
    if rule == "causal":
        doc["mask"] = "causal"
        mask = reference.causal(length, keys_count)
    elif rule == "matrix":
        mask = draw(
            st.lists(
                st.lists(st.booleans(), min_size=keys_count, max_size=keys_count), min_size=length, max_size=length
            )
        )
        doc["mask"] = [[int(cell) for cell in row] for row in mask]
    if draw(st.booleans()):
        padded = draw(st.sets(st.sampled_from(tokens), max_size=keys_count))
        if padded:
            doc["padding"] = sorted(padded)
            mask = [[ok and token not in padded for ok, token in zip(row, tokens)] for row in mask]
    answerable = all(any(row) for row in mask)
    return doc, {"heads": solved, "w_o": w_o, "mask": mask} if answerable else None


def solve(plan: dict) -> list[list[float]]:
    """The reference's answer for the plan `problems` drew."""
    outputs = []
    for head in plan["heads"]:
        if "scores" in head:
            result = reference.head(None, None, head["values"], scores=head["scores"], mask=plan["mask"])
        else:
            extra = {name: head[name] for name in ("w", "w_query", "w_key", "v") if name in head}
            result = reference.head(
                head["queries"],
                head["keys"],
                head["values"],
                kind=head["kind"],
                scale=head["scale"],
                mask=plan["mask"],
                **extra,
            )
        outputs.append(result.output)
    if len(outputs) == 1 and plan["w_o"] is None:
        return outputs[0]
    return reference.multi_head(outputs, plan["w_o"])[1]


def close(got: list[list[float]], want: list[list[float]]) -> bool:
    return all(
        math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)
        for row, other in zip(got, want, strict=True)
        for a, b in zip(row, other, strict=True)
    )


@SETTINGS
@given(problems())
def test_valid_documents_agree_with_the_reference(case: tuple[dict, dict | None]) -> None:
    doc, plan = case
    code, out, err = run(json.dumps(doc))
    if plan is None:
        assert code == 2 and "no key to attend to" in err
        return
    assert code == 0, err
    assert close(json.loads(out)["output"], solve(plan))


GARBAGE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**400), 10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    st.sampled_from(
        [
            "9**9**9",
            "__import__('os').system('true')",
            "(1).real",
            "1e999",
            "sqrt(-1)",
            "causal",
            "t1",
            "{file: x.npy}",
            "",
            "-",
        ]
    ),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.sampled_from(["a", "file", "type", "k0"]), st.integers(0, 2), max_size=2),
)


def paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every place in a document: keys of mappings and indexes of lists."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def parent(doc: object, path: tuple) -> object:
    for part in path[:-1]:
        doc = doc[part]
    return doc


@st.composite
def mutants(draw: st.DrawFn) -> str | bytes:
    """A valid document broken once: a field deleted, renamed or replaced, a row lost or added, or its text cut."""
    doc, _ = draw(problems())
    where = draw(st.sampled_from(paths(doc)[1:]))
    holder, last = parent(doc, where), where[-1]
    how = draw(st.sampled_from(["delete", "replace", "rename", "shorten", "lengthen", "text"]))
    if how == "delete":
        del holder[last]
    elif how == "replace":
        holder[last] = draw(GARBAGE)
    elif how == "rename" and isinstance(holder, dict):
        holder[draw(st.sampled_from(["keyz", "querys", "valeus", "x", "w_q", "scores", "name", "x-note"]))] = (
            holder.pop(last)
        )
    elif how == "shorten" and isinstance(holder[last], list) and holder[last]:
        holder[last].pop()
    elif how == "lengthen" and isinstance(holder[last], list):
        holder[last].append(holder[last][-1] if holder[last] else 1)
    text = json.dumps(doc)
    if how == "text":
        cut = draw(st.integers(0, len(text)))
        text = text[:cut] + draw(st.text(max_size=5)) + text[cut + draw(st.integers(0, 5)) :]
    return text.encode("utf-8", "surrogatepass") if draw(st.booleans()) else text


def consistent(doc: dict) -> None:
    """What a successful run prints hangs together, whatever the input was."""
    mask = doc["mask"]
    for head in doc["heads"]:
        scores = head["scores"]
        for row, allowed in zip(scores, mask, strict=True):
            assert [s is not None for s in row] == allowed
        if head["dot"] is not None and head["score"] in ("scaled_dot", "dot", "cosine"):
            raw = [[reference.compatibility(head["score"], q, k) for k in head["keys"]] for q in head["queries"]]
            assert close(head["dot"], raw)
        weights = [
            reference.softmax([s if s is not None else 0.0 for s in row], allowed) for row, allowed in zip(scores, mask)
        ]
        assert close(head["weights"], weights)
        output = [reference.weighted_sum(w, head["values"]) for w in weights]
        assert close(head["output"], output)
    if "concat" not in doc:
        assert close(doc["output"], doc["heads"][0]["output"])


@settings(SETTINGS, max_examples=300)
@given(mutants())
def test_broken_documents_answer_0_or_2(text: str | bytes) -> None:
    code, out, _ = run(text)
    if code == 0:
        consistent(json.loads(out))


@SETTINGS
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_noise_answers_0_or_2(text: str | bytes) -> None:
    code, out, _ = run(text)
    if code == 0:
        consistent(json.loads(out))
