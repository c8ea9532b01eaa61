"""compute --format markdown and latex: the article's numbers, sound tables, LaTeX that is well-formed and compiles."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from attncli import core, pipeline
from attncli.cli import app
from attncli.exercises import Options, exercise
from attncli.render import latex, markdown
from tests.conftest import SAMPLES

ENV = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None}
ARTICLE = ("2.8284", "11.1073", "0.6652", "0.2447", "0.0900", "[1.4205, 0.5795]")
SAMPLE_NAMES = sorted(path.name for path in SAMPLES.glob("*.yaml"))
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
    (tmp_path / "writeup.tex").write_text(source, encoding="utf-8")
    done = subprocess.run(
        ["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "writeup.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout[-2000:]
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
