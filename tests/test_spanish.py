"""Spanish all the way through: no English word from a fixed list in any `--lang es` output of any
command, in any --help, in any usage error, or in the error of any case of the bad-input corpus.

What is not prose is left out before looking: quoted text and code (a name, a value the user
gave, a field written as `answers:`), file names and paths, options, and identifiers with an
underscore (scaled_dot, query_tokens). The words listed are English and not Spanish, and none
is a field name of the problem file, so a hit is always English prose that escaped the catalogue.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from attncli.cli import app
from tests.paths import ROOT
from tests.test_bad_inputs import CASES, CORPUS, case_id

ENGLISH = frozenset(
    re.findall(
        r"\w+",
        """the of and is are not with for such option options usage argument arguments show message exit try did
    mean got unexpected extra requires possible invalid range file files directory row rows number
    numbers wrote exercises head found expected cannot must allowed permission denied too large
    command commands help default print write every each right wrong done interrupted terminated query
    weight step steps sheet seed shown decimals cells value column columns there this that these
    which would should could have has been than then more most only also into onto out without between""",
    )
)
NOT_PROSE = re.compile(
    r"'[^']*'|\"[^\"]*\"|`[^`]*`"  # quoted: names, values, code
    r"|\S*(?:/|\.\w)\S*"  # paths and file names
    r"|(?<![\w-])--?[a-zA-Z][\w-]*"  # options
    r"|\w*(?:\\?_\w*)+"  # identifiers (Markdown escapes their underscores: not\_normalized)
    r"|\\[a-zA-Z]+"  # LaTeX commands (\the, \begin)
    r"|\(from attncli import attention\)"  # Python code in the advice to use the API
    r"|^ *(?:cat \S+ \| )?attncli .*$"  # an example command line
    r"|\w+(?:,\w+)+",  # a list written as an option value (the,cat,sat)
    re.MULTILINE,
)
COMMANDS = sorted(typer.main.get_command(app).commands)  # type: ignore[attr-defined]
SPANISH = {"LANG": "C", "LC_ALL": None, "LC_MESSAGES": None, "LANGUAGE": None, "COLUMNS": "80", "NO_COLOR": "1"}
PROBLEM = """title: El banco del río
tokens: [pescador, red, banco]
query_tokens: [banco]
queries: [[sqrt(2), 0]]
keys: [[2, 0], [1, 1], [0, 1]]
values: [[2, 0], [0, 2], [1, 1]]
"""
OTHER = PROBLEM.replace("[[2, 0], [1, 1], [0, 1]]", "[[0, 1], [1, 1], [2, 0]]").replace("El banco del río", "Otro")


def english(text: str) -> list[str]:
    """The words of ENGLISH in `text`, once the parts that are not prose are left out."""
    prose = NOT_PROSE.sub(" ", text)
    return sorted({word for word in re.findall(r"[A-Za-z]+", prose) if word.lower() in ENGLISH})


def test_the_check_finds_english() -> None:
    """The detector itself: English prose is caught, Spanish prose and what is not prose are not."""
    assert english("Usage: attncli check [OPTIONS] FILE...") == ["FILE", "OPTIONS", "Usage"]
    assert english("attncli: No such option: --bogus") == ["option", "such"]
    assert english("1 rows, expected 2") == ["expected", "rows"]
    assert english("keys: 2 filas; se esperaban 3 (una por cada elemento de query_tokens)") == []
    assert english("'the keys' en samples/the.yaml con --show-every y scaled_dot") == []


def es(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """`attncli NAME --lang es ARGS` in this process."""
    result = CliRunner().invoke(app, [*args[:1], "--lang", "es", *args[1:]], env=SPANISH, input=stdin)
    return result.exit_code, result.stdout, result.stderr


def es_process(*args: str) -> tuple[int, str, str]:
    """The same as a program: the help texts (a metavar in an error) are built in Spanish only there."""
    clean = {key: value for key, value in os.environ.items() if key not in SPANISH}
    environ = {**clean, **{key: value for key, value in SPANISH.items() if value is not None}}
    command = [sys.executable, "-m", "attncli", *args[:1], "--lang", "es", *args[1:]]
    result = subprocess.run(command, capture_output=True, text=True, env=environ, cwd=ROOT, check=False)
    return result.returncode, result.stdout, result.stderr


@pytest.fixture(scope="module")
def problems(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("es")
    paths = {name: folder / f"{name}.yaml" for name in ("problem", "other", "right", "wrong", "key")}
    paths["problem"].write_text(PROBLEM, encoding="utf-8")
    paths["other"].write_text(OTHER, encoding="utf-8")
    answers = "answers:\n  scores: [2, 1, 0]\n  weights: [0.6652, 0.2447, 0.0900]\n  output: [1.4205, 0.5795]\n"
    paths["right"].write_text(PROBLEM + answers, encoding="utf-8")
    paths["wrong"].write_text(PROBLEM + answers.replace("0.6652", "0.5000"), encoding="utf-8")
    return paths


def outputs(problems: dict[str, Path], folder: Path) -> list[tuple[str, list[str]]]:
    p, o, right, wrong = (str(problems[name]) for name in ("problem", "other", "right", "wrong"))
    return [
        ("compute", ["compute", p]),
        ("compute", ["compute", p, "--format", "text", "--heatmap"]),
        ("compute", ["compute", p, "--format", "markdown"]),
        ("compute", ["compute", p, "--format", "latex"]),
        ("compute", ["compute", p, "--norms", "--ablate", "red", "--weights", "uniform", "--ablate-head", "1"]),
        ("compute", ["compute", "--tokens", "a,b", "--queries", "1,0; 0,1", "--keys", "1,0; 0,1", "--values", "1;2"]),
        ("check", ["check", right]),
        ("check", ["check", wrong]),
        ("check", ["check", right, wrong]),
        ("check", ["check", right, wrong, "--format", "markdown"]),
        ("check", ["check", "--key", right, wrong]),
        ("generate", ["generate", "--seed", "3"]),
        ("generate", ["generate", "--seed", "3", "--heads", "2", "--sheet", "markdown"]),
        ("generate", ["generate", "--seed", "3", "--sheet", "latex"]),
        ("generate", ["generate", "--seed", "5", "--tokens", "6", "--heads", "2", "--projections", "--answers"]),
        ("generate", ["generate", "--seed", "7", "--mask", "causal", "--answers", "--count", "2", "-o", str(folder)]),
        ("compare", ["compare", p, o]),
        ("scaling", ["scaling", "--dk", "2,8", "--samples", "50", "--keys", "4"]),
        ("template", ["template", p]),
        (
            "softmax",
            [
                "softmax",
                "2, 1, 0.1; 0, 1, 1",
                "--tokens",
                "pescador,red,banco",
                "--target",
                "red",
                "--target",
                "1",
                "--temperature",
                "2",
                "--top-k",
                "2",
                "--top-p",
                "0.9",
            ],
        ),
        ("softmax", ["softmax", "2, 1, 0.1", "--format", "markdown"]),
        (
            "cost",
            [
                "cost",
                "--d-model",
                "64",
                "--heads",
                "8",
                "--kv-heads",
                "2",
                "--layers",
                "2",
                "--tokens",
                "16",
                "--window",
                "4",
                "--bias",
                "--compare",
            ],
        ),
        ("cost", ["cost", p]),
        ("softmax", ["softmax", "2, 1, 0.1", "--format", "latex"]),
        ("practice", ["practice", p]),
    ]


def test_every_command_speaks_spanish(problems: dict[str, Path], tmp_path: Path) -> None:
    shown = set()
    for name, args in outputs(problems, tmp_path / "sheets"):
        code, stdout, stderr = es(*args, stdin="2*sqrt(2)\n1\n0\n" if name == "practice" else None)
        assert code in (0, 1), (args, stderr)
        assert (args, english(stdout), english(stderr)) == (args, [], [])
        shown.add(name)
    for sheet in sorted((tmp_path / "sheets").iterdir()):
        assert (sheet.name, english(sheet.read_text(encoding="utf-8"))) == (sheet.name, [])
    assert shown == set(COMMANDS)


@pytest.mark.parametrize("name", ["", *COMMANDS])
def test_every_help_speaks_spanish(name: str) -> None:
    clean = {key: value for key, value in os.environ.items() if key not in ("LANG", "LC_ALL", "LC_MESSAGES")}
    args = [name, "--help"] if name else ["--help"]
    result = subprocess.run(
        [sys.executable, "-m", "attncli", *args],
        capture_output=True,
        text=True,
        env={**clean, "LANG": "es_ES.UTF-8", "COLUMNS": "100"},
        cwd=ROOT,
        check=True,
    )
    assert english(result.stdout) == []


UNNAMED = """title: Dos cabezas sin nombre
tokens: [pescador, red, banco]
query_tokens: [banco]
values: [[2, 0], [0, 2], [1, 1]]
heads:
  - queries: [[sqrt(2), 0]]
    keys: [[2, 0], [1, 1], [0, 1]]
  - scores: [[1, 2, 0]]
"""
GROUPED = """title: Cabezas que comparten claves y valores
tokens: [pescador, red, banco]
query_tokens: [banco]
kv_heads:
  - keys: [[2, 0], [1, 1], [0, 1]]
    values: [[2, 0], [0, 2], [1, 1]]
heads:
  - queries: [[sqrt(2), 0]]
  - queries: [[0, sqrt(2)]]
"""
ANSWERS = "answers:\n  heads:\n    - weights: [0.5, 0.2447, 0.0900]\n    - weights: [0.2447, 0.6652, 0.0900]\n"


@pytest.mark.parametrize(
    "args",
    [
        ["compute", "{problem}"],
        ["compute", "{problem}", "--format", "markdown"],
        ["compute", "{problem}", "--format", "latex"],
        ["compute", "{problem}", "--format", "text", "--norms", "--ablate-head", "2"],
        ["compute", "{grouped}"],
        ["compare", "{problem}", "{problem}"],
        ["check", "{answered}"],
        ["practice", "{problem}"],
    ],
)
def test_a_head_without_a_name_is_a_cabeza(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What README.es.md calls a head (cabeza), numbered as the English "head 1", "head 2"."""
    monkeypatch.chdir(tmp_path)  # the files named without the test's folder, whose name says "head"
    Path("problem.yaml").write_text(UNNAMED, encoding="utf-8")
    Path("answered.yaml").write_text(UNNAMED + ANSWERS, encoding="utf-8")
    Path("grouped.yaml").write_text(GROUPED, encoding="utf-8")
    paths = [arg.format(problem="problem.yaml", answered="answered.yaml", grouped="grouped.yaml") for arg in args]
    code, stdout, stderr = es(*paths, stdin="2*sqrt(2)\n" if args[0] == "practice" else None)
    assert code in (0, 1), stderr
    assert english(stdout) == [] and "head" not in stdout
    assert "cabeza 2" in stdout or "Cabeza 2" in stdout
    assert "cabeza kv 1" in stdout or "grouped" not in args[1]


STACK = """title: Dos capas sin nombre
tokens: [pescador, red, banco]
x: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
layers:
  - w_q: [[0, 0], [0, 0], [sqrt(2), 0]]
    w_k: [[2, 0], [1, 1], [0, 1]]
    w_v: [[2, 0], [0, 2], [1, 1]]
    w_o: [[1, 0, 0], [0, 1, 0]]
  - norm: rms
    w_q: [[1, 0], [0, 1], [0, 0]]
    w_k: [[1, 0], [0, 1], [0, 0]]
    w_v: [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
"""
STACK_ANSWERS = "answers:\n  layers:\n" + "    - weights: [[0.5, 0.25, 0.25], [0.5, 0.25, 0.25], [1, 0, 0]]\n" * 2


@pytest.mark.parametrize(
    "args",
    [
        ["compute", "stack.yaml"],
        ["compute", "stack.yaml", "--format", "markdown"],
        ["compute", "stack.yaml", "--format", "latex"],
        ["compute", "stack.yaml", "--format", "text", "--layer", "2", "--rollout"],
        ["check", "answered.yaml"],
    ],
)
def test_a_layer_without_a_name_is_a_capa(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stacked layers numbered as the English "layer 1", "layer 2": "capa 1", "capa 2" in Spanish."""
    monkeypatch.chdir(tmp_path)  # the files named without the test's folder
    Path("stack.yaml").write_text(STACK, encoding="utf-8")
    Path("answered.yaml").write_text(STACK + STACK_ANSWERS, encoding="utf-8")
    code, stdout, stderr = es(*args)
    assert code in (0, 1), stderr
    assert english(stdout) == [] and "layer" not in stdout
    assert "capa 2" in stdout


@pytest.mark.parametrize(("text", "part", "names"), [(UNNAMED, "heads", "head"), (STACK, "layers", "layer")])
def test_json_names_heads_and_layers_without_a_name_in_english_in_every_language(
    text: str, part: str, names: str, tmp_path: Path
) -> None:
    """JSON is for scripts: "head 1", "head 2" (or "layer 1", "layer 2") whatever the language of the run."""
    path = tmp_path / "problem.yaml"
    path.write_text(text, encoding="utf-8")
    spanish = es("compute", str(path), "--format", "json")
    english_run = CliRunner().invoke(app, ["compute", str(path), "--format", "json", "--lang", "en"], env=SPANISH)
    assert spanish[0] == english_run.exit_code == 0
    assert spanish[1] == english_run.stdout
    assert [item["name"] for item in json.loads(spanish[1])[part]] == [f"{names} 1", f"{names} 2"]


@pytest.mark.parametrize(
    "args",
    [
        ["check"],
        ["compute", "--bogus"],
        ["compute", "--kyes", "1"],
        ["compute", "--precision", "many"],
        ["compute", "--precision", "99"],
        ["compute", "--tolerance", "1"],
        ["compute", "a.yaml", "b.yaml", "c.yaml"],
        ["compute", "--keys"],
        ["compute", "--heatmap=yes"],
        ["check", "--tolerance", "x", "a.yaml"],
        ["comput"],
        ["compute", "--lang", "xx"],
        ["compute", "missing.yaml"],
        ["compute", "--format", "svg"],
    ],
)
def test_every_usage_error_speaks_spanish(args: list[str]) -> None:
    code, stdout, stderr = es_process(*args)
    assert code == 2 and stdout == ""
    assert stderr.count("\n") == 1 and english(stderr) == [], stderr


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_every_bad_input_speaks_spanish(case: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CORPUS)
    name = case.get("command", "compute")
    args = [*([case["file"]] if case["file"] else []), *case.get("args", [])]
    code, _, stderr = es(name, *args)
    if code == 0:  # a case that is only refused under --format json
        return
    assert english(stderr) == [], stderr
