"""Generated problem documents, valid and broken, through the command line.

Every run must end with 0 (an answer) or 2 (one line saying what is wrong): never 1, 70,
a traceback or a hang. A valid document's answer must agree with the plain-Python
reference (tests/reference.py) computed from the numbers the generator chose; a broken
document that still runs must at least be self-consistent: its weights are the softmax of
its scores, and its output is the weighted sum of its values. Every sample, mutated, and every
command's options, given random and hostile values, must end the same way (0, 1 for wrong answers
in check, or 2), without a traceback or a numpy warning. Issue 23's families close the file:
students' control characters, inputs as outputs, and cost budgets.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import typer
import yaml
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from typer.testing import CliRunner, Result

from attncli.cli import app
from attncli.errors import CONTROL_CODES
from tests import reference
from tests.paths import ROOT, SAMPLES

# CI runs every test here with a fixed seed and a fixed number of examples, about 30 s of CPU in all.
# Before a release, run longer and with other seeds:
#   ATTNCLI_FUZZ_EXAMPLES=5000 ATTNCLI_FUZZ_SEED=$RANDOM pytest tests/test_fuzz.py
FUZZ_SEED = int(os.environ.get("ATTNCLI_FUZZ_SEED", "11"))
FUZZ_EXAMPLES = int(os.environ.get("ATTNCLI_FUZZ_EXAMPLES", "0"))  # 0: each test's CI budget
SAMPLE_FILES = sorted(SAMPLES.glob("*.yaml")) + sorted((ROOT / "tests" / "check_cases").glob("*.yaml"))
EXIT = {"compute": {0, 2}, "check": {0, 1, 2}, "compare": {0, 2}, "scaling": {0, 2}, "generate": {0, 2}}
EXIT["template"] = {0, 2}
EXIT["practice"] = {0, 1, 2}  # 1: the session ended with a step not right (stdin is empty here)
EXIT["softmax"] = EXIT["cost"] = {0, 2}


def budget(examples: int) -> Callable[[Callable], Callable]:
    """A fuzz test's settings: `examples` in CI (or ATTNCLI_FUZZ_EXAMPLES), the fixed seed, no example database."""

    def decorate(test: Callable) -> Callable:
        runs = FUZZ_EXAMPLES or examples
        tuned = settings(max_examples=runs, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        return seed(FUZZ_SEED)(tuned(test))

    return decorate


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


@budget(60)
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
    # array files a graded file may not name (outside its folder) and ones it may (the samples beside it)
    st.sampled_from(["../k.npy", "/etc/passwd", "/dev/zero", "bank.yaml", "."]).map(lambda name: {"file": name}),
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


@budget(120)
@given(mutants())
def test_broken_documents_answer_0_or_2(text: str | bytes) -> None:
    code, out, _ = run(text)
    if code == 0:
        consistent(json.loads(out))


@budget(60)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_noise_answers_0_or_2(text: str | bytes) -> None:
    code, out, _ = run(text)
    if code == 0:
        consistent(json.loads(out))


# Wider (issue 11): every sample and check case mutated through compute with random flags, through
# check and through compare; and random option values, hostile ones included, for every command.


def invoke(args: list[str], stdin: str | bytes | None = None) -> Result:
    """One run in-process: 0, 1 or 2 as the command allows, never a traceback, every stderr line attncli's."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy warning would reach the user's stderr
        result = CliRunner().invoke(app, args, input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert "Traceback" not in result.output, args
    assert result.exit_code in EXIT[args[0]], (args, result.exit_code, result.stderr[-500:])
    assert all(line.startswith("attncli: ") for line in result.stderr.splitlines()), (args, result.stderr[-500:])
    if result.exit_code == 2 and args[0] != "check":  # check still reports the files it could grade
        assert result.stderr.count("\n") == 1, (args, result.stderr[-500:])
    return result


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding copies of the samples, where the fuzzed runs may write their -o, --svg and --html files."""
    folder = tmp_path_factory.mktemp("fuzz")
    for path in SAMPLE_FILES:
        shutil.copy(path, folder / path.name)
    return folder


@pytest.fixture
def inside(workdir: Path) -> Iterator[Path]:
    previous = Path.cwd()
    os.chdir(workdir)
    try:
        yield workdir
    finally:
        os.chdir(previous)


# Values an option may be given: valid ones, the edges, and what issue 11 found (² passes isdigit, 5,000 digits
# pass Python's int conversion limit, nan and inf pass float()).
INTEGERS = st.one_of(
    st.integers(-3, 20).map(str),
    st.sampled_from(["4096", "4097", "10000000", "1" + "0" * 30, "9" * 5000, "-0", "+3", " 3", "3 ", "1.5", "1e3"]),
    st.sampled_from(["0x10", "", "²", "٤", "三", "１"]),
)
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "1e-400", "-0", "0.05", "1,5", "²", "", "9" * 5000]),
)
TEXTS = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "",
            " ",
            "-",
            "--",
            "\x1b[31mred",
            "a\nb",
            "\u202eevil",
            "x" * 10_000,
            "'<<'",
            "<<",
            "=HYPERLINK(1)",
            "@missing.npy",
            "@/dev/null",
            "{file: /etc/passwd}",
            "9**9**9",
            "sqrt(-1)",
            "a,\udc80",  # a byte of the command line that is not UTF-8
            "a\nw_o: {file: /etc/passwd}\n#,b",
            "n" * 201 + ",b",
        ]
    ),
)
CHOICES = {
    "format": ["rich", "text", "json", "csv", "tsv", "npy", "npz", "markdown", "latex", "xml"],
    "csv_layout": ["long", "wide", "tall", ""],
    "dtype": ["float64", "float32", "float16", "int8"],
    "lang": ["en", "es", "fr", "ES", ""],
    "mask": ["none", "causal", "1,0,1", "0,0,0", "1,1,1; 0,1,1; 0,0,1", "casual"],
    "score": ["scaled_dot", "dot", "cosine", "general", "additive", "dott", "{type: dot}"],
    "scale": ["0.5", "-1", "0", "1/0", "1e308", "nan", "pi"],
    "weights": ["uniform", "permute", "permute:3", "permute:-1", "permute:", "permute:²", "permute:" + "9" * 5000],
    "dk": ["1,4", "2", "0", "4097", "1,,2", "64", ",", "-1"],
    "tokens": ["a,b,c", "4", "0", "1", "fisherman,net,bank", "a,a", "a,,b"],
    "query_tokens": ["bank", "a", "q1,q2", "bank,bank"],
    "queries": ["sqrt(2), 0", "1,0; 0,1", "1", "@missing.npy"],
    "keys": ["2,0; 1,1; 0,1", "1,0", "1"],
    "values": ["2,0; 0,2; 1,1", "1; 2; 3", "1"],
    "scores": ["1, 2, 0", "1e308, -1e308, 0", "1"],
    "follow": ["bank", "net", "q1", "nobody"],
    "ablate": ["net", "bank", "fisherman+net", "fisherman+net+bank", "C++", "+"],
}
OUT = ["out.txt", "out.json", "out.csv", "out.npz", "out.npy", "out.md", "out.tex", "out.TSV", "one.yaml"]
PATHS = st.sampled_from([*OUT, "sub/none/out.json", "/dev/null", "", ".", "y" * 300, "bank.yaml.out"])
FILES = st.sampled_from([path.name for path in SAMPLE_FILES] + ["-", "missing.yaml", ".", "/dev/null", "z" * 300])


def option_values(command: typer.core.TyperCommand) -> st.SearchStrategy[list[str]]:
    """Some of `command`'s options with values drawn for their type; its arguments drawn from the samples."""
    strategies = []
    for param in command.params:
        if param.name == "debug":
            continue
        if param.param_type_name == "argument":
            many = param.nargs == -1
            strategies.append(st.lists(FILES, min_size=1, max_size=3) if many else FILES.map(lambda name: [name]))
            continue
        flag = param.opts[0]
        if param.is_flag:
            value = st.just([flag])
        else:
            kind = param.type.name
            pool = INTEGERS if kind in ("integer", "integer range") else FLOATS if "float" in kind else None
            if kind == "path":
                pool = PATHS
            if pool is None:
                pool = st.one_of(st.sampled_from(CHOICES[param.name]), TEXTS) if param.name in CHOICES else TEXTS
            value = st.lists(pool, min_size=1, max_size=2 if param.multiple else 1).map(
                lambda values, flag=flag: [part for v in values for part in (flag, v)]
            )
        strategies.append(st.one_of(st.just([]), value))
    return st.tuples(*strategies).map(lambda parts: [word for part in parts for word in part])


COMMANDS = typer.main.get_command(app).commands


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_random_option_values_for_every_command(name: str, inside: Path) -> None:
    @budget(40)
    @given(option_values(COMMANDS[name]))
    def one(args: list[str]) -> None:
        invoke([name, *args], stdin="")

    one()


def mutated_yaml(text: str, draw: st.DrawFn) -> str:
    """`text` broken at the YAML level: a structural change of its document, or an edit of its characters."""
    how = draw(st.sampled_from(["structure", "line", "number", "characters"]))
    if how == "structure":
        doc = yaml.safe_load(text)
        where = draw(st.sampled_from(paths(doc)[1:]))
        holder, last = parent(doc, where), where[-1]
        change = draw(st.sampled_from(["delete", "replace", "lengthen"]))
        if change == "delete":
            del holder[last]
        elif change == "replace":
            holder[last] = draw(GARBAGE)
        elif isinstance(holder[last], list):
            holder[last].append(holder[last][-1] if holder[last] else 1)
        return yaml.safe_dump(doc, allow_unicode=True)
    lines = text.splitlines(keepends=True)
    if how == "line":
        i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
        edit = draw(st.sampled_from(["drop", "duplicate", "swap"]))
        if edit == "drop":
            del lines[i]
        elif edit == "duplicate":
            lines.insert(j, lines[i])
        else:
            lines[i], lines[j] = lines[j], lines[i]
        return "".join(lines)
    if how == "number":
        numbers = list(re.finditer(r"-?\d+(\.\d+)?", text))
        if numbers:
            match = draw(st.sampled_from(numbers))
            hostile = draw(st.sampled_from(["1e308", "-1e308", "1e200", "1e-320", "²", "9" * 5000, "nan", "0"]))
            return text[: match.start()] + hostile + text[match.end() :]
    cut = draw(st.integers(0, len(text)))
    return text[:cut] + draw(st.text(max_size=4)) + text[cut + draw(st.integers(0, 4)) :]


COMPUTE_FLAGS = st.lists(
    st.one_of(
        st.sampled_from([["--norms"], ["--heatmap"], ["-q"], ["--no-color"], ["--dtype", "float32"]]),
        st.sampled_from(CHOICES["format"][:-1]).map(lambda f: ["--format", f]),
        st.sampled_from(CHOICES["csv_layout"]).map(lambda how: ["--csv-layout", how]),
        st.sampled_from(CHOICES["follow"]).map(lambda name: ["--follow", name]),
        st.sampled_from(CHOICES["ablate"]).map(lambda name: ["--ablate", name]),
        st.sampled_from(CHOICES["weights"][:3]).map(lambda how: ["--weights", how]),
        st.integers(0, 3).map(lambda n: ["--ablate-head", str(n)]),
        st.integers(0, 17).map(lambda n: ["--precision", str(n)]),
        st.sampled_from(CHOICES["scale"]).map(lambda s: ["--scale", s]),
        st.sampled_from(CHOICES["score"][:5]).map(lambda s: ["--score", s]),
    ),
    max_size=4,
).map(lambda groups: [word for group in groups for word in group])


@st.composite
def mutated_samples(draw: st.DrawFn) -> tuple[str, str]:
    path = draw(st.sampled_from(SAMPLE_FILES))
    return path.name, mutated_yaml(path.read_text(encoding="utf-8"), draw)


@budget(100)
@given(mutated_samples(), COMPUTE_FLAGS)
def test_mutated_samples_through_compute_with_random_flags(case: tuple[str, str], flags: list[str]) -> None:
    _, text = case
    invoke(["compute", "-", *flags], stdin=text)


@budget(50)
@given(mutated_samples())
def test_mutated_samples_through_check(inside: Path, case: tuple[str, str]) -> None:
    name, text = case
    (inside / f"mutant-{name}").write_text(text, encoding="utf-8", errors="surrogatepass")
    invoke(["check", f"mutant-{name}", "--format", "json"])


@budget(30)
@given(mutated_samples(), st.sampled_from([path.name for path in SAMPLE_FILES]))
def test_mutated_samples_through_compare(inside: Path, case: tuple[str, str], other: str) -> None:
    name, text = case
    (inside / f"mutant-{name}").write_text(text, encoding="utf-8", errors="surrogatepass")
    invoke(["compare", f"mutant-{name}", other])
    invoke(["compare", other, f"mutant-{name}", "--format", "json"])


# Issue 23: three families of hostile input, fuzzed. Students' control characters: no report or gradebook shows one
# raw, and the numbers around them still count. Inputs as outputs: no -o, --svg, --html, --figure or --record
# writes over a file the run reads, under its own name, a link or a hard link. Cost budgets: however many heads or
# cells a valid document asks for, the answer (or the refusal) comes in seconds.

SHOWN_RAW = [chr(code) for code in CONTROL_CODES if chr(code) != "\n"]
BANK_WEIGHTS = ("0.6652", "0.2447", "0.0900")  # the worked example, right to 4 decimals
# What Python's float() strips around a number, so that the number still reads (the rest make it not a number).
AROUND = [c for c in SHOWN_RAW if c.isspace()]


@st.composite
def students_with_control_characters(draw: st.DrawFn) -> str:
    """The worked example answered right, each cell and the exercise id carrying control characters: around a
    number (where it still reads), inside it (where it does not), or alone."""
    cells = []
    for number in BANK_WEIGHTS:
        where = draw(st.sampled_from(["around", "inside", "none"]))
        if where == "around":
            number = (
                draw(st.text(st.sampled_from(AROUND), max_size=2))
                + number
                + draw(st.text(st.sampled_from(AROUND), min_size=1, max_size=2))
            )
        elif where == "inside":
            cut = draw(st.integers(0, len(number)))
            number = number[:cut] + draw(st.text(st.sampled_from(SHOWN_RAW), min_size=1, max_size=2)) + number[cut:]
        cells.append(json.dumps(number))
    ident = draw(st.text(st.sampled_from(SHOWN_RAW) | st.characters(codec="utf-8"), min_size=1, max_size=8))
    problem = (ROOT / "tests" / "corpus" / "answered.yaml").read_text().split("answers:")[0]
    exercise = f"exercise: {json.dumps(ident)}\n" if draw(st.booleans()) else ""
    return exercise + problem + f"answers:\n  weights: [{', '.join(cells)}]\n"


@budget(40)
@given(students_with_control_characters(), st.sampled_from(["text", "json", "csv", "markdown"]))
def test_students_control_characters_never_reach_a_report_raw(inside: Path, text: str, fmt: str) -> None:
    (inside / "student.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
    result = invoke(["check", "student.yaml", "--format", fmt])
    assert not [c for c in result.stdout if c in SHOWN_RAW], result.stdout
    if fmt == "json":
        graded = json.loads(result.stdout)
        assert graded["status"] in ("right", "not_graded")
        given = [cell["given"] for step in graded["steps"] for cell in step["cells"]]
        assert given in ([], [json.loads(c) for c in text.split("weights: [")[1].rstrip("]\n").split(", ")])


INPUTS_AS_OUTPUTS = [
    ("compute", ["bank.yaml"], ["-o", "--svg", "--html", "--figure"], "bank.yaml"),
    ("check", ["answered.yaml"], ["-o"], "answered.yaml"),
    ("check", ["--key", "bank.yaml", "answered.yaml", "--format", "csv"], ["-o"], "bank.yaml"),
    ("compare", ["bank.yaml", "answered.yaml"], ["-o", "--figure"], "answered.yaml"),
    ("template", ["bank.yaml"], ["-o"], "bank.yaml"),
    ("practice", ["bank.yaml"], ["--record"], "bank.yaml"),
    ("compute", ["reads_array.yaml", "--format", "npz"], ["-o"], "two.npz"),
]


@budget(40)
@given(st.sampled_from(INPUTS_AS_OUTPUTS), st.data())
def test_no_output_writes_over_an_input(workdir: Path, case: tuple, data: st.DataObject) -> None:
    command, args, options, target = case
    option = data.draw(st.sampled_from(options))
    how = data.draw(st.sampled_from(["same", "link", "hard"]))
    with tempfile.TemporaryDirectory(dir=workdir) as folder:
        here = Path(folder)
        for name in ("bank.yaml", "answered.yaml", "reads_array.yaml", "two.npz"):
            shutil.copy(ROOT / "tests" / "corpus" / name, here / name)
        named = {"same": target, "link": "link-" + target, "hard": "hard-" + target}[how]
        if option == "--figure" and how != "same":  # a figure's name ends as a figure does: a link to an input
            named += ".png"
        if how == "link":
            (here / named).symlink_to(target)
        elif how == "hard":
            os.link(here / target, here / named)
        before = {p.name: p.read_bytes() for p in here.iterdir()}
        previous = Path.cwd()
        os.chdir(here)
        try:
            result = invoke([command, *args, option, named], stdin="")
        finally:
            os.chdir(previous)
        assert result.exit_code == 2 and result.stdout == "", (command, option, named, result.output)
        if option == "--figure" and how == "same":  # refused by its suffix before anything is read
            assert f"--figure {named}: expected a file ending in" in result.stderr, result.stderr
            assert {p.name: p.read_bytes() for p in here.iterdir()} == before
            return
        assert f"{option}: cannot write {named}: " in result.stderr, result.stderr
        assert "which this run reads" in result.stderr or "this run reads it" in result.stderr
        assert {p.name: p.read_bytes() for p in here.iterdir()} == before


@st.composite
def costly_documents(draw: st.DrawFn) -> tuple[str, int, int]:
    """A valid document of many heads (ALiBi's, sharing one kv head, or over layers): its text, its query heads
    and the (query, key) cells the step-by-step view would lay out."""
    heads = draw(st.sampled_from([1, 64, 1023, 1024, 1025, 1500, 5000]))
    tokens = draw(st.integers(1, 6))
    names = "[" + ", ".join(f"t{i}" for i in range(tokens)) + "]"
    rows = "[" + ", ".join(f"[{i % 2}, {(i + 1) % 2}]" for i in range(tokens)) + "]"
    kind = draw(st.sampled_from(["alibi", "gqa", "layers"]))
    if kind == "alibi":
        text = f"tokens: {names}\nqueries: {rows}\nkeys: {rows}\nvalues: {rows}\nbias: alibi\nmask: causal\n"
        text += "heads: [" + ", ".join("{}" for _ in range(heads)) + "]\n"
    elif kind == "gqa":
        text = f"tokens: {names}\nkv_heads:\n  - {{keys: {rows}, values: {rows}}}\nheads:\n"
        text += "".join(f"  - {{queries: {rows}}}\n" for _ in range(heads))
    else:
        layers = draw(st.integers(1, 3))
        identity = "[[1, 0], [0, 1]]"
        wide = "[" + ", ".join(["[1, 0]", "[0, 1]"] * heads) + "]"  # W_O from every head's 2 columns back to 2
        per = (
            f"{{w_q: {identity}, w_k: {identity}, w_v: {identity}, w_o: {wide}, heads: [{', '.join(['{}'] * heads)}]}}"
        )
        text = f"x: {rows}\nlayers:\n" + "".join(f"  - {per}\n" for _ in range(layers))
        heads *= layers
    return text, heads, heads * tokens * tokens


@budget(25)
@given(costly_documents(), st.sampled_from([["--format", "text"], ["--format", "json"], ["-q"]]))
def test_many_heads_are_answered_or_refused_in_seconds(case: tuple[str, int, int], flags: list[str]) -> None:
    text, heads, cells = case
    started = time.process_time()
    result = invoke(["compute", "-", *flags], stdin=text)
    assert time.process_time() - started < 10
    if heads > 1024:
        assert result.exit_code == 2 and f"{heads} query heads: at most 1024" in result.stderr
    elif flags == ["--format", "text"] and cells > 65536:
        assert result.exit_code == 2 and "(limit 65536)" in result.stderr
    else:
        assert result.exit_code == 0, result.stderr
