"""compute --format markdown and latex: the article's numbers, sound tables, LaTeX that is well-formed and compiles.

The terminal, Markdown and LaTeX are three backends of one walk (attncli/render/walk.py); the
tests at the end read all three outputs and fail if they show different sections or numbers.
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from attncli import core, pipeline
from attncli.cli import app
from attncli.exercises import Options, exercise
from attncli.i18n import t
from attncli.problem import Projection
from attncli.render import human, latex, latex_page, markdown, walk
from attncli.render.layout import fit, to_text
from attncli.render.walk import View
from attncli.written import sum_of_products
from tests.paths import ONE_LAYER_SAMPLES, SAMPLES

ENV = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None}
ARTICLE = ("2.8284", "11.1073", "0.6652", "0.2447", "0.0900", "[1.4205, 0.5795]")
SAMPLE_NAMES = ONE_LAYER_SAMPLES
AWKWARD = """\
title: "50% of R&D_{x} #1 ~ ^ $ \\\\ — naïve «bank» 銀行"
notes: "a|b *c* _d_"
tokens: ["a_b", "c&d", "e|f", "{g}"]
query_tokens: ["a_b", "c&d", "e|f", "{g}"]
queries: [[1, 0], [0, 1], [1, 1], [2, 0]]
keys: [[1, 0], [0, 1], [1, 1], [0, 2]]
values: [[1], [2], [3], [4]]
mask: causal
"""


def run(*args: str) -> Result:
    return CliRunner().invoke(app, ["compute", *args], env=ENV)


def steps_of(text: str) -> core.Steps:
    return pipeline.solve(pipeline.load(text=text, name="problem.yaml"))


def sample(name: str) -> core.Steps:
    return pipeline.solve(pipeline.load(str(SAMPLES / name)))


def documents() -> list[tuple[str, str]]:
    """(name, LaTeX) for every sample, a generated worksheet of shapes, and awkward characters."""
    out = [(name, latex.render(sample(name))) for name in SAMPLE_NAMES]
    shapes = [
        Options(tokens=5, mask="causal", heads=2, projections=True, d_k=3, d_v=2),
        Options(tokens=2, score="cosine"),
    ]
    out += [(f"generated-{i}", latex.render(steps_of(exercise(options, i)))) for i, options in enumerate(shapes)]
    out.append(("awkward", latex.render(steps_of(AWKWARD), follow=("c&d", "{g}"))))
    return out


def assert_well_formed(source: str) -> None:
    """Braces balance (escaped ones aside), environments nest, and math delimiters pair."""
    body = re.sub(r"\\[{}$%&#_]", "", source.replace("\\\\", ""))
    body = "\n".join(line.split("%")[0] for line in body.splitlines())
    depth = 0
    for char in body:
        depth += {"{": 1, "}": -1}.get(char, 0)
        assert depth >= 0
    assert depth == 0
    stack: list[str] = []
    for kind, name in re.findall(r"\\(begin|end)\{([^}]*)\}", body):
        if kind == "begin":
            stack.append(name)
        else:
            assert stack.pop() == name
    assert stack == []
    assert body.count(r"\[") == body.count(r"\]")
    assert body.count("$") % 2 == 0


def test_markdown_of_the_article_example() -> None:
    result = run(str(SAMPLES / "bank.yaml"), "--format", "markdown")
    assert result.exit_code == 0, result.output
    for number in ARTICLE:
        assert number in result.stdout
    assert "| fisherman | [2, 0] | 1.4142×2 + 0×0 = 2.8284 | 2.0000 |" in result.stdout
    assert "**Output for 'bank':** [1.4205, 0.5795]" in result.stdout


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_markdown_tables_have_one_cell_per_column(name: str) -> None:
    text = markdown.render(sample(name))
    for block in re.findall(r"(?:^\|.*\|\n)+", text, re.MULTILINE):
        widths = {len(re.findall(r"(?<!\\)\|", line)) for line in block.splitlines()}
        assert len(widths) == 1, block


def test_markdown_escapes_user_text() -> None:
    text = markdown.render(steps_of(AWKWARD))
    assert "| e\\|f |" in text and "a\\_b" in text and "a|b \\*c\\* \\_d\\_" in text


def test_latex_writes_out_the_dot_products_and_the_softmax() -> None:
    result = run(str(SAMPLES / "bank.yaml"), "--format", "latex")
    assert result.exit_code == 0, result.output
    tex = result.stdout
    assert r"\usepackage{amsmath}" in tex and tex.rstrip().endswith(r"\end{document}")
    assert r"\frac{1.4142 \times 2 + 0 \times 0}{\sqrt{2}} = \frac{2.8284}{\sqrt{2}} = 2.0000" in tex
    assert r"\sum_j e^{s_j} &= e^{2.0000} + e^{1.0000} + e^{0.0000}" in tex
    assert r"\frac{7.3891}{11.1073} = 0.6652" in tex
    assert r"\begin{bmatrix} 1.4205 & 0.5795 \end{bmatrix}" in tex


def compile_log(tmp_path: Path, source: str) -> str:
    (tmp_path / "writeup.tex").write_text(source, encoding="utf-8")
    done = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "writeup.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    return (tmp_path / "writeup.log").read_text(encoding="latin-1")


DOCUMENTS = documents()
COMPILED = DOCUMENTS[::3] + DOCUMENTS[-1:]  # a spread of shapes; pdflatex takes about a second each


@pytest.mark.parametrize(("name", "source"), DOCUMENTS, ids=[name for name, _ in DOCUMENTS])
def test_latex_is_well_formed(name: str, source: str) -> None:
    assert_well_formed(source)
    assert all(ord(char) < 256 for char in source)  # pdflatex with inputenc utf8 knows Latin-1


def test_latex_masked_keys_get_no_weight() -> None:
    tex = latex.render(sample("storm_causal.yaml"))
    assert r"s_{\text{storm}} &= -\infty \quad \text{(masked)}" in tex
    assert r"\alpha_{\text{storm}} &= 0 \quad \text{(masked)}" in tex


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
@pytest.mark.parametrize(("name", "source"), COMPILED, ids=[name for name, _ in COMPILED])
def test_latex_compiles(tmp_path: Path, name: str, source: str) -> None:
    compile_log(tmp_path, source)
    assert (tmp_path / "writeup.pdf").stat().st_size > 0


def test_writeups_follow_and_precision_and_file(tmp_path: Path) -> None:
    out = tmp_path / "storm.md"
    result = run(str(SAMPLES / "storm_causal.yaml"), "--format", "markdown", "--follow", "storm", "-o", str(out))
    assert result.exit_code == 0 and result.stdout == ""
    text = out.read_text(encoding="utf-8")
    assert "### Query 'storm'" in text and "### Query 'bank'" not in text
    assert "0.66524" in run(str(SAMPLES / "bank.yaml"), "--format", "latex", "--precision", "5").stdout


def test_writeups_in_spanish() -> None:
    md = run(str(SAMPLES / "bank.yaml"), "--format", "markdown", "--lang", "es").stdout
    assert "### Consulta de 'bank'" in md and "Mezcla ponderada de los valores" in md
    tex = run(str(SAMPLES / "bank.yaml"), "--format", "latex", "--lang", "es").stdout
    assert r"\paragraph{2. Softmax}" in tex and "autoatenci" in tex


def test_every_human_format_tells_the_usual_scale_alike() -> None:
    """1/√d_k written as sqrt(2)/2 differs from 1/√2 in the last bit; the terminal and the write-ups both see 1/√2."""
    given = "tokens: [a, b]\nqueries: [[1, 2], [0, 1]]\nkeys: [[2, 0], [1, 1]]\nvalues: [[2, 0], [0, 2]]\n"
    text = given + "scale: sqrt(2)/2\n"
    assert "s = q·k / √2" in markdown.render(steps_of(text))
    screen = CliRunner().invoke(app, ["compute", "-", "--format", "text"], input=text, env=ENV).stdout
    default = CliRunner().invoke(app, ["compute", "-", "--format", "text"], input=given, env=ENV).stdout
    assert "s = q·k × 1/√2 = 0.7071" in default
    assert screen == default


# The three backends of one walk


FORMATS = ("terminal", "markdown", "latex")
SCORE_KINDS = """\
tokens: [time, flies, fast]
queries: [[1, 2, 0], [0, 1, -1], [2, 0.5, 1]]
keys: [[2, 0, 1], [1, 1, 1], [0, -3, 2]]
values: [[1, 0], [0, 1], [1, 1]]
mask: causal
"""
ADDITIVE_ONE_QUERY = """\
tokens: [a, b, c]
query_tokens: [a]
queries: [[1, 0]]
keys: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
values: [[1, 0], [0, 1], [1, 1]]
score: {type: additive, w_query: [[1, -1], [0, 1]], w_key: [[0, 1], [1, 0], [-1, 1]], v: [1, 2]}
"""
SCORES = {  # a score function → what the document adds to SCORE_KINDS, each kind's arithmetic different
    "scaled_dot": "",
    "halved": "scale: 0.5\n",
    "dot": "score: dot\n",
    "cosine": "score: cosine\n",
    "cosine_scaled": "score: {type: cosine, scale: 3}\n",
    "general": "score: {type: general, w: [[1, 0, 0], [0.5, 1, 0], [0, 0, 2]]}\n",
    "long_dot": None,  # d_k = 5: q·k not written term by term
}
LONG_DOT = """\
tokens: [a, b]
queries: [[1, 2, 0, 1, 1], [0, 1, -1, 2, 0]]
keys: [[2, 0, 1, 1, 1], [1, 1, 1, 0, -1]]
values: [[1, 0], [0, 1]]
"""


def score_kind(name: str) -> core.Steps:
    return steps_of(LONG_DOT if SCORES[name] is None else SCORE_KINDS + SCORES[name])


def outputs(steps: core.Steps, follow: tuple[str, ...] | None, precision: int = 4) -> dict[str, str]:
    """The same steps as the terminal (wide enough for every table), Markdown and LaTeX write them."""
    screen = to_text(fit(human.render(steps, View(precision, follow), 400), 400))
    return {
        "terminal": screen,
        "markdown": markdown.render(steps, precision, follow),
        "latex": latex.render(steps, precision, follow),
    }


def sections(fmt: str, source: str, steps: core.Steps) -> list[tuple[str, ...]]:
    """The sections of one output in order, each told by its heading in that format's own syntax."""
    in_format = {
        "terminal": {"title": "{}", "head": "{}", "query": "{}", "part": "{}", "subsection": "{}"},
        "markdown": {"title": "**{}**", "head": "## {}", "query": "### {}", "part": "**{}**", "subsection": "**{}**"},
        "latex": {
            "title": r"\paragraph{{{}}}",
            "head": r"\subsection*{{{}}}",
            "query": r"\subsubsection*{{{}}}",
            "part": "{}",
            "subsection": r"\subsection*{{{}}}",
        },
    }[fmt]
    text = latex_page.prose if fmt == "latex" else str
    names = " ‖ ".join(head.spec.name for head in steps.heads)
    concat = {"terminal": t("render.concat_title", names=names), "markdown": f"{t('writeup.concat_title')}: {names}"}
    headings = {
        in_format["title"].format(text(t("render.weight_matrix_title"))): ("matrix",),
        t("render.weight_matrix_title_keys"): ("matrix",),  # the terminal's map, keys as rows
        in_format["title"].format(text(t("render.outputs_title"))): ("outputs",),
        in_format["subsection"].format(text(concat.get(fmt, t("writeup.concat_title")))): ("concat",),
        in_format["subsection"].format(text(t("render.final_title"))): ("final",),
    }
    for head in steps.heads:  # a grouped-query head's title also names the kv head it reads
        headings[in_format["head"].format(walk.head_title(head, steps.problem))] = ("head", head.spec.name)
    for name in "QKV":
        projection = rf"{name} = X\,W_{{{name}}}" if fmt == "latex" else f"{name} = X·W_{name}"
        headings[in_format["part"].format(projection)] = ("projection", name)
    for query in steps.problem.query_tokens:
        headings[in_format["query"].format(t("render.query_heading", name=query))] = ("query", query)
    found = []
    for line in source.splitlines():
        line = line.split("  q = ")[0] if fmt == "terminal" else re.split(r" &?= \\begin\{bmatrix\}", line)[0]
        if line in headings:
            found.append(headings[line])
    return found


def expected_sections(steps: core.Steps, follow: tuple[str, ...] | None) -> list[tuple[str, ...]]:
    """The walk's rule said plainly: the weight matrix with every head of several queries, followed or not."""
    problem = steps.problem
    queries = problem.query_tokens
    shown = follow or (queries if len(queries) <= 3 else ())
    out: list[tuple[str, ...]] = []
    for head in steps.heads:
        out += [("head", head.spec.name)] if len(steps.heads) > 1 else []
        operands = zip("QKV", (head.spec.queries, head.spec.keys, head.spec.values))
        out += [("projection", name) for name, operand in operands if isinstance(operand, Projection)]
        out += [("query", name) for name in shown]
        out += [("matrix",), ("outputs",)] if len(queries) > 1 else []
    out += [("concat",)] if steps.concat is not None else []
    return out + ([("final",)] if problem.w_o is not None else [])


def follow_options(steps: core.Steps) -> list[tuple[str, ...] | None]:
    queries = steps.problem.query_tokens
    return [None, queries[:1], queries[-1:], tuple(reversed(queries))]


CASES = [(name, sample(name)) for name in SAMPLE_NAMES] + [(kind, score_kind(kind)) for kind in SCORES]
CASES.append(("additive_one_query", steps_of(ADDITIVE_ONE_QUERY)))


@pytest.mark.parametrize(("name", "steps"), CASES, ids=[name for name, _ in CASES])
def test_every_format_shows_the_same_sections_in_the_same_order(name: str, steps: core.Steps) -> None:
    for follow in follow_options(steps):
        expected = expected_sections(steps, follow)
        for fmt, source in outputs(steps, follow).items():
            assert sections(fmt, source, steps) == expected, (fmt, follow)


NUMBER = r"[-−]?\d+(?:\.\d+)?"
FACTOR = rf"(?:{NUMBER}|\({NUMBER}\))"  # a negative second factor is written in parentheses: ×(−1.2247)
_TERMS = rf"{FACTOR}×{FACTOR}(?: [+−] {FACTOR}×{FACTOR})*"  # a negative term after the first is subtracted
TEXT_ARITHMETIC = {  # terminal and Markdown: `a×b − c×(−d) = v`, `dot / (‖q‖×‖k‖) = v`, `v·[h, ...] = v`
    "terms": rf"(?<![\d.])({_TERMS}) = ({NUMBER})",
    "cosine": rf"({NUMBER}) / \(({NUMBER})×({NUMBER})\) = ({NUMBER})",
    "additive": rf"v·\[({NUMBER}(?:, {NUMBER})*)\] = ({NUMBER})",
}
_SCALED = rf"(?:\}}\{{\\sqrt\{{\d+\}}\}}|\\right\) \\times {NUMBER})? = (?:\\frac\{{|\\left\()?({NUMBER})"
LATEX_ARITHMETIC = {  # the same in math: a \times b + ..., \frac{dot}{‖q‖ \times ‖k‖}, \mathbf{v}\cdot[h ...]
    "terms": rf"(?<![\d.])({FACTOR} \\times {FACTOR}(?: [+-] {FACTOR} \\times {FACTOR})*){_SCALED}",
    "cosine": rf"\\frac\{{({NUMBER})\}}\{{({NUMBER}) \\times ({NUMBER})\}}{_SCALED}",
    "additive": rf"\\mathbf\{{v\}}\\cdot\\begin\{{bmatrix\}} ({NUMBER}(?: & {NUMBER})*) \\end\{{bmatrix\}}{_SCALED}",
}


def numbers(text: str) -> list[float]:
    """The numbers of written arithmetic, each with its sign: a term subtracted (`− 1.2247×0`) has a negative
    first factor, as it had before it was written so."""
    text = re.sub(r" [−-] ", " + -", text.replace(r" \times ", "×")).replace("−", "-")
    return [float(number) for number in re.findall(NUMBER, text)]


def written_out(fmt: str, source: str) -> list[tuple[str, list[float]]]:
    """Every written-out compatibility in an output, in order: its kind and its numbers as written."""
    patterns = LATEX_ARITHMETIC if fmt == "latex" else TEXT_ARITHMETIC
    found = []
    for kind, pattern in patterns.items():
        for match in re.finditer(pattern, source):
            found.append((match.start(), kind, [x for group in match.groups() for x in numbers(group)]))
    return [(kind, values) for _, kind, values in sorted(found)]


def replayed(steps: core.Steps, follow: tuple[str, ...] | None, fmt: str) -> list[tuple[str, list[float]]]:
    """What each followed query's arithmetic must say, recomputed with numpy from q, k and the score's weights.

    The terminal and Markdown write out every key (a masked one too: its score is what the mask removes);
    LaTeX only the keys a query may use.
    """
    problem = steps.problem
    queries = problem.query_tokens
    rows = [queries.index(name) for name in follow or (queries if len(queries) <= 3 else ())]
    out = []
    for head in steps.heads:
        score = head.spec.score
        if score.kind == "given":
            continue
        for row in rows:
            for j in range(len(problem.tokens)):
                if fmt == "latex" and not problem.mask[row, j]:
                    continue
                turned = head.rotation or head  # with RoPE the scores come from the turned q and k
                q, k = np.asarray(turned.queries[row], float), np.asarray(turned.keys[j], float)
                if score.kind in ("scaled_dot", "dot") and len(k) <= 4:
                    out.append(("terms", [x for pair in zip(q, k) for x in pair] + [float(np.dot(q, k))]))
                elif score.kind == "cosine":
                    norms = [float(np.sqrt(np.sum(q * q))), float(np.sqrt(np.sum(k * k)))]
                    out.append(("cosine", [float(np.dot(q, k)), *norms, float(np.dot(q, k)) / (norms[0] * norms[1])]))
                elif score.kind == "additive":
                    hidden = np.tanh(q @ np.asarray(score.w_query) + k @ np.asarray(score.w_key))
                    out.append(("additive", [*hidden, float(np.dot(np.asarray(score.v), hidden))]))
    return out + replayed_backward(steps, rows, fmt)


def replayed_backward(steps: core.Steps, rows: list[int], fmt: str) -> list[tuple[str, list[float]]]:
    """The backward pass's arithmetic: for each followed query, dP = dO·v key by key, then D = dO·O, each term
    by term up to four coordinates, in every format as the forward's q·k (LaTeX: in math, with real minus signs)."""
    if steps.backward is None or len(steps.problem.tokens) > 16:
        return []
    out = []
    for head, grads in zip(steps.heads, steps.backward.heads):
        for row in rows:
            grad_output = np.asarray(grads.grad_output[row], float)
            for other in [*head.values, head.output[row]]:
                if len(other) <= 4:
                    pairs = [x for pair in zip(grad_output, other) for x in pair]
                    out.append(("terms", [*pairs, float(np.dot(grad_output, other))]))
    return out


@pytest.mark.parametrize(("name", "steps"), CASES, ids=[name for name, _ in CASES])
@pytest.mark.parametrize("precision", [4, 2])
def test_written_out_arithmetic_is_the_steps_recomputed(name: str, steps: core.Steps, precision: int) -> None:
    for follow in follow_options(steps):
        for fmt, source in outputs(steps, follow, precision).items():
            shown, expected = written_out(fmt, source), replayed(steps, follow, fmt)
            assert [kind for kind, _ in shown] == [kind for kind, _ in expected], (fmt, follow)
            for (_, written), (_, exact) in zip(shown, expected):
                assert np.allclose(written, exact, rtol=0, atol=0.5 * 10.0**-precision + 1e-12), (fmt, written, exact)


VALUES = "values: [[1], [2], [3]]\nscore: dot\n"


def test_a_tiny_exponential_is_not_written_as_zero_in_any_format() -> None:
    """e^−20 shows as 2.0612e-09 (not 0.0000) and e^30 as 1.0686e+13 in every format alike."""
    steps = steps_of("tokens: [a, b, c]\nquery_tokens: [a]\nqueries: [[1]]\nkeys: [[-20], [0], [30]]\n" + VALUES)
    tiny, large = f"{math.exp(-20):.4e}", f"{math.exp(30):.4e}"
    for fmt, source in outputs(steps, None).items():
        assert tiny in source and large in source, fmt


def test_latex_writes_d_k_in_math_mode() -> None:
    (score,) = [row for row in latex.render(sample("bank.yaml"), 4, None).splitlines() if "Score:" in row]
    assert "($d_k = 2$, $d_v = 2$)" in score and r"d\_k" not in score


# Write-ups that print: nothing wider than the page


def keys_problem(count: int, d: int = 2, seed: int = 0) -> str:
    """A self-attention problem with `count` tokens and small random integers (as the issue's 8 and 20 keys)."""
    rng = np.random.default_rng(seed)
    names = [f"t{i}" for i in range(count)]

    def matrix(rows: int, columns: int) -> str:
        return str(rng.integers(-3, 4, size=(rows, columns)).tolist())

    return (
        f"tokens: [{', '.join(names)}]\nqueries: {matrix(count, d)}\nkeys: {matrix(count, d)}\n"
        f"values: {matrix(count, d)}\n"
    )


def generated(seed: int, **options: object) -> str:
    return exercise(Options(**options), seed)


PRINTED = {  # the three (10, 487 and 33 pt too wide before), 16 keys (the widest shown whole; 20 keys are
    # condensed now) and the widest shapes `generate` makes
    "8 keys": lambda: keys_problem(8),
    "16 keys": lambda: keys_problem(16),
    "20 keys": lambda: keys_problem(20),
    "two_heads.yaml": lambda: (SAMPLES / "two_heads.yaml").read_text(encoding="utf-8"),
    "12 tokens, 4 heads, d_k = d_v = 8": lambda: generated(
        3, tokens=12, d_k=8, d_v=8, heads=4, projections=True, mask="causal"
    ),
    "3 tokens, d_k = d_v = 8": lambda: generated(3, tokens=3, d_k=8, d_v=8, projections=True),
    "3 tokens, d_k = 4, 2 heads": lambda: generated(3, tokens=3, d_k=4, d_v=4, heads=2, projections=True),
    "alibi.yaml": lambda: (SAMPLES / "alibi.yaml").read_text(encoding="utf-8"),
}


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
@pytest.mark.parametrize("case", PRINTED)
def test_latex_fits_the_text_width(tmp_path: Path, case: str) -> None:
    """pdflatex's own measure: no Overfull box, and no box that only fits because \\attnfit shrank it."""
    log = compile_log(tmp_path, latex.render(steps_of(PRINTED[case]())))
    assert "Overfull \\hbox" not in log and "Overfull \\vbox" not in log
    assert "attncli: scaled" not in log


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_what_no_split_can_narrow_is_scaled_to_the_line(tmp_path: Path) -> None:
    """A token name longer than the page: the tables cannot be split narrower, so \\attnfit scales them."""
    long = " ".join(["word"] * 30)  # a paragraph breaks it at its spaces, a table's column cannot
    text = f"tokens: [a, {long}]\nqueries: [[1], [0]]\nkeys: [[1], [2]]\nvalues: [[1], [2]]\n"
    log = compile_log(tmp_path, latex.render(steps_of(text)))
    assert "attncli: scaled" in log and "Overfull \\hbox" not in log


def tabulars(source: str) -> list[list[list[str]]]:
    """Every tabular of a document as rows of cells."""
    found = re.findall(r"\\begin\{tabular\}\{[lr]+\}\n(.*?)\\end\{tabular\}", source, re.DOTALL)
    return [
        [row.removesuffix(r" \\").split(" & ") for row in block.splitlines() if row != r"\hline"] for block in found
    ]


def test_a_wide_weight_matrix_becomes_tables_with_the_row_labels_repeated() -> None:
    """Without TeX: 16 keys (the most a write-up shows whole) of 0.xxxx at 5 pt a digit and 12 pt between
    columns need 16 × 40 pt > 345 pt."""
    steps = steps_of(keys_problem(16))
    tables = tabulars(latex.render(steps))
    start = next(i for i, table in enumerate(tables) if table[0][:2] == ["query", "t0"])
    parts = [table for table in tables[start:] if table[0][0] == "query" and "$z_{1}$" not in table[0]]
    assert len(parts) > 1 and [cell for part in parts for cell in part[0][1:]] == [f"t{j}" for j in range(16)]
    for part in parts:
        assert [row[0] for row in part] == ["query", *(f"t{i}" for i in range(16))]
        # Computer Modern at 10 pt: a digit 5 pt, the point 2.78 pt, a lowercase letter at most 5.3 pt
        label = max(len(row[0]) for row in part) * 5.3 + 12
        cells = max(len(cell.strip("$")) - 1 for row in part[1:] for cell in row[1:]) * 5 + 2.78  # in math
        assert label + (len(part[0]) - 1) * (cells + 12) <= latex_page.PAGE
    rows = zip(*(part[1:] for part in parts))  # each query's row, a piece from every table
    shown = np.array([[float(cell.strip("$")) for piece in pieces for cell in piece[1:]] for pieces in rows])
    assert np.allclose(shown, steps.heads[0].weights, atol=0.5e-4)


def test_a_long_sum_is_broken_into_rows_that_fit() -> None:
    """Twelve terms of a weighted sum, each `0.xxxx [v]`, go on as `+ ...` rows, each within the page."""
    steps = steps_of(keys_problem(12, d=3))
    source = latex.render(steps, follow=("t0",))
    block = source.split(r"\mathbf{z}_{\text{t0}} &= ")[1].split(r"\end{aligned}")[0]
    rows = block.split(" \\\\\n")
    assert len(rows) > 2 and all(row.startswith(r"&\quad + ") for row in rows[1:-1])
    assert rows[-1].startswith("&= ")
    terms = re.findall(r"(\d\.\d{4})\\,\\begin\{bmatrix\} ([^\\]*) \\end\{bmatrix\}", block)
    assert len(terms) == 12 and max(len(re.findall(r"\+", row)) for row in rows) < 12
    z = sum(float(w) * np.array([float(x) for x in v.split(" & ")]) for w, v in terms)
    assert np.allclose(z, steps.heads[0].output[0], atol=12 * 0.5e-4 * 3)


# Exercise sheets: the givens as a student writes them, empty grids, no number of the solution


SHEET_SHAPES = [
    Options(tokens=3, mask="causal"),
    Options(tokens=4, heads=2, projections=True, d_k=3, d_v=2),
    Options(tokens=2, score="cosine"),
]


def replay_exact(written: str) -> float:
    """sheets.exact's √2/2, -3√2/2, 1/3 read back as a number, by hand: [sign][a]√n[/d]."""
    match = re.fullmatch(r"(-?)(\d*)(?:√(\d+))?(?:/(\d+))?", written)
    if match is None:
        return float(written)
    sign, whole, root, below = match.groups()
    value = (float(whole) if whole else 1.0) * (math.sqrt(int(root)) if root else 1.0) / int(below or 1)
    return -value if sign else value


@pytest.mark.parametrize("shape", range(len(SHEET_SHAPES)))
def test_a_sheet_gives_the_inputs_and_no_number_of_the_solution(shape: int) -> None:
    steps = steps_of(exercise(SHEET_SHAPES[shape], 11))
    text = markdown.sheet(steps)
    given = {}
    for title, body in re.findall(r"\| (?:token|row) \| (\w+) \|\n\| --- \| --- \|\n((?:\|.*\|\n)+)", text):
        cells = [re.search(r"\[(.*)\]", row).group(1).split(", ") for row in body.splitlines()]
        given.setdefault(title, np.array([[replay_exact(x) for x in row] for row in cells]))  # head 1 comes first
    head = steps.problem.heads[0]
    if isinstance(head.queries, Projection):
        assert np.allclose(given["X"], head.queries.x) and np.allclose(given["W_Q"], head.queries.w)
        assert np.allclose(given["W_V"], head.values.w)
    else:
        assert np.allclose(given["Q"], head.queries) and np.allclose(given["K"], head.keys)
        assert np.allclose(given["V"], head.values)
    solution = {f"{x:.4f}" for h in steps.heads for m in (h.scores, h.weights, h.output) for x in m.ravel()}
    solution -= {f"{x:.4f}" for m in given.values() for x in m.ravel()} | {"0.0000", "1.0000", "-0.0000"}
    assert not [number for number in solution if number in text]
    grids = re.findall(r"\| query \|((?: [^|]+ \|)+)\n\| --- (?:\| --- )+\|\n((?:\|.*\|\n)+)", text)
    headers = [[key.strip() for key in keys.split("|")[:-1]] for keys, _ in grids]
    final = steps.problem.w_o is not None
    assert headers == ([list(steps.problem.tokens)] * 2 + [["output"]]) * len(steps.heads) + [["output"]] * final
    for _, body in grids:
        rows = [row.split("|")[1:-1] for row in body.splitlines()]
        assert [row[0].strip() for row in rows] == list(steps.problem.query_tokens)
        assert all(cell.strip() == "" for row in rows for cell in row[1:])


def test_generate_prints_the_sheet_in_either_language(tmp_path: Path) -> None:
    def generate(*args: str) -> Result:
        return CliRunner().invoke(app, ["generate", "--tokens", "3", "--seed", "5", *args], env=ENV)

    yaml_text = generate().stdout
    assert generate("--sheet", "markdown").stdout == markdown.sheet(steps_of(yaml_text))
    spanish = generate("--sheet", "markdown", "--lang", "es").stdout
    assert "## Tus respuestas" in spanish and "Your answers" not in spanish and "Nombre:" in spanish
    tex = generate("--sheet", "latex").stdout
    assert_well_formed(tex) and tex.rstrip().endswith(r"\end{document}")
    refused = generate("--sheet", "html")
    assert refused.exit_code == 2 and refused.stderr.count("\n") == 1 and "markdown or latex" in refused.stderr
    result = generate("--count", "2", "-o", str(tmp_path / "set"), "--sheet", "latex")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "set").glob("*.tex")) == ["exercise-01.tex", "exercise-02.tex"]


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
@pytest.mark.parametrize("lang", ["en", "es"])
def test_a_latex_sheet_compiles_and_fits(tmp_path: Path, lang: str) -> None:
    result = CliRunner().invoke(
        app,
        ["generate", "--tokens", "12", "--heads", "2", "--projections", "--sheet", "latex", "--lang", lang],
        env=ENV,
    )
    log = compile_log(tmp_path, result.stdout)
    assert "Overfull \\hbox" not in log and "attncli: scaled" not in log


# Condensed write-ups: a large problem shows the corners of its matrices, and says where every number is


def large_problem(queries: int, keys: int, d: int = 4) -> str:
    rng = np.random.default_rng(queries + keys)

    def matrix(rows: int) -> str:
        return str(rng.integers(-3, 4, size=(rows, d)).tolist())

    names = ", ".join(f"k{j}" for j in range(keys))
    asked = ", ".join(f"q{i}" for i in range(queries))
    return (
        f"tokens: [{names}]\nquery_tokens: [{asked}]\nqueries: {matrix(queries)}\nkeys: {matrix(keys)}\n"
        f"values: {matrix(keys)}\n"
    )


def softmax_replay(text: str) -> np.ndarray:
    """The weights recomputed from the problem's own numbers with numpy: softmax(Q·Kᵀ/√d_k) by rows."""
    fields = {line.split(":")[0]: line.split(": ", 1)[1] for line in text.splitlines()}
    q, k = (np.array(eval(fields[name]), dtype=float) for name in ("queries", "keys"))  # lists of ints only
    s = q @ k.T / math.sqrt(k.shape[1])
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_a_500_by_1500_problem_makes_a_short_markdown_writeup() -> None:
    """It made 6.8 MB of Markdown; now the first and last 4 rows and columns, with ⋮ and ⋯ between."""
    text = large_problem(500, 1500)
    source = markdown.render(steps_of(text))
    assert len(source.encode()) < 10_000
    assert "500 queries × 1500 keys" in source and "--format json" in source
    header, _, *body = [
        row.strip("| ").split(" | ")
        for row in re.search(r"\| query \|.*\|\n(?:\|.*\|\n)+", source).group(0).splitlines()
    ]
    keys, queries = [0, 1, 2, 3, 1496, 1497, 1498, 1499], [0, 1, 2, 3, 496, 497, 498, 499]
    assert header == ["query", *(f"k{j}" for j in keys[:4]), "⋯", *(f"k{j}" for j in keys[4:])]
    assert [row[0] for row in body] == [*(f"q{i}" for i in queries[:4]), "⋮", *(f"q{i}" for i in queries[4:])]
    weights = softmax_replay(text)
    for i, row in zip(queries, [row for row in body if row[0] != "⋮"]):
        assert row[5] == "⋯"
        assert np.allclose([float(cell) for cell in row[1:5] + row[6:]], weights[i, keys], atol=0.5e-4)


@pytest.mark.parametrize(
    ("queries", "keys", "condensed"), [(16, 16, False), (3, 17, True), (64, 3, False), (65, 3, True)]
)
def test_the_walk_condenses_past_16_keys_or_64_queries(queries: int, keys: int, condensed: bool) -> None:
    """The one decision, in walk.condensed: the terminal's summary and both write-ups change at the same size."""
    steps = steps_of(large_problem(queries, keys))
    note = f"{queries} queries × {keys} keys"
    screen = to_text(fit(human.render(steps, View(), 120), 120))
    assert ("Too many cells" in screen) is condensed and (note in screen) is condensed
    assert (note in markdown.render(steps)) is condensed and (latex_page.text(note) in latex.render(steps)) is condensed
    table = re.search(r"\| query \|.*\|\n(?:\|.*\|\n)+", markdown.render(steps)).group(0).splitlines()
    shown = [n if not condensed or n <= 9 else 9 for n in (queries, keys)]  # 4, a gap, 4
    assert (len(table) - 2, table[0].count(" | ")) == tuple(shown)


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_a_condensed_latex_writeup_compiles_and_fits(tmp_path: Path) -> None:
    steps = steps_of(large_problem(200, 300))
    log = compile_log(tmp_path, latex.render(steps))
    assert "Overfull \\hbox" not in log and "attncli: scaled" not in log


def test_latex_sets_the_math_in_titles_notes_and_tasks_in_math_mode() -> None:
    """bank.yaml's notes say `d_k = 2, so the scale is 1/√2`: $d_{k} = 2$ and $1/\\sqrt{2}$, not d\\_k and $\\surd$2."""
    tex = latex.render(sample("bank.yaml"))
    assert r"$d_{k} = 2$, so the scale is $1/\sqrt{2}$" in tex
    assert r"d\_k" not in tex and r"\surd" not in tex
    sheet = latex.sheet(steps_of(exercise(Options(tokens=2, heads=2), 3)))
    assert r"multiply by $W_{O}$." in sheet and r"W\_O" not in sheet
    assert latex_page.prose("a_b_c and R&D_{x}") == r"a\_b\_c and R\&D\_\{x\}"  # names that are not math stay text


def test_the_condensed_note_recommends_the_format_that_works_at_its_size() -> None:
    """The note said "Every number: --format json (or csv)" even past json's 2,000,000 cells, where json is
    refused: 1500 × 1500 now says npz; 500 × 1500 (750,000 cells) still json."""
    for queries, every in ((500, "--format json (or csv)"), (1500, "--format npz -o FILE")):
        steps = steps_of(large_problem(queries, 1500))
        assert f"Every number: {every}." in markdown.render(steps), queries
        assert latex_page.text(f"Every number: {every}.") in latex.render(steps), queries


@pytest.mark.parametrize(
    ("pairs", "written"),
    [
        ([("1.2247", "1.2247"), ("0", "0")], "1.2247×1.2247 + 0×0"),
        ([("-1.2247", "-1.2247"), ("1.2247", "0")], "−1.2247×(−1.2247) + 1.2247×0"),
        ([("1.2247", "1.2247"), ("-1.2247", "-1.2247")], "1.2247×1.2247 − 1.2247×(−1.2247)"),
        ([("2", "0.5"), ("-1.2247", "0"), ("3", "−2")], "2×0.5 − 1.2247×0 + 3×(−2)"),
    ],
)
def test_a_sum_of_products_is_written_as_by_hand(pairs: list[tuple[str, str]], written: str) -> None:
    """Negative factors in parentheses, a negative term subtracted: never -1.2247×-1.2247 nor + -1.2247×0."""
    assert sum_of_products(pairs) == written
    value = sum(float(a.replace("−", "-")) * float(b.replace("−", "-")) for a, b in pairs)
    assert eval(written.replace("−", "-").replace("×", "*")) == pytest.approx(value, abs=1e-12)  # the same sum


def test_products_of_negatives_in_the_terminal_markdown_and_latex() -> None:
    """layers.yaml's layer 2: q(bank) = k(bank) = [1.2247, −1.2247], so q·k = 1.2247² + (−1.2247)²."""
    stack = pipeline.solve(pipeline.load(SAMPLES / "layers.yaml"))
    from attncli import render

    terminal = to_text(render.stack_lines(stack, layer=2)(120))
    assert "1.2247×1.2247 − 1.2247×(−1.2247) = 2.9997" in terminal
    assert "0×1.2247 + 1.2247×(−1.2247) = -1.4999" in terminal  # query net, key bank: + a negative factor
    for bad in ("×-", "+ -"):
        assert bad not in terminal
    assert "1.2247×1.2247 − 1.2247×(−1.2247) = 2.9997" in markdown.render_stack(stack, layer=2)
    tex = latex.render_stack(stack, layer=2)
    assert r"1.2247 \times 1.2247 - 1.2247 \times (-1.2247)" in tex
    assert r"\times -" not in tex and "+ -" not in tex


def test_rope_latex_sets_its_formulas_in_math_and_real_minus_signs() -> None:
    """rope.yaml's LaTeX typeset `$\\theta$\\_i = base\\textasciicircum{}(-2i/d)` (a literal underscore and caret)
    and vectors with a hyphen for the minus: now θ_i = base^{−2i/d} in math mode, and every number in math."""
    tex = latex.render(sample("rope.yaml"))
    assert r"$\theta_{i} = \mathrm{base}^{-2i/d}$" in tex
    assert r"\textasciicircum" not in tex and r"\_i" not in tex and r"$\theta$" not in tex
    assert r"$m \cdot \theta_{i}$" in tex and r"$(a \cdot \cos{} - b \cdot \sin, b \cdot \cos{} + a \cdot \sin)$" in tex
    assert r"bank & $3.1416$ & $[3.1416]$ & $[0, 1]$ & $[0.0000, -1.0000]$ \\" in tex
    rows = re.findall(r"^(.* & .*) \\\\$", tex, re.MULTILINE)
    negative = [cell for row in rows for cell in row.split(" & ") if re.search(r"-\d", cell)]
    assert len(negative) >= 4 and all(cell.startswith("$") and cell.endswith("$") for cell in negative)  # in math


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
@pytest.mark.parametrize("name", ["rope.yaml", "sinusoidal.yaml", "alibi.yaml"])
def test_the_formulas_in_the_facts_compile(tmp_path: Path, name: str) -> None:
    log = compile_log(tmp_path, latex.render(sample(name)))
    assert "Overfull \\hbox" not in log
