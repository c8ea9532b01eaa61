"""Spanish and English output: complete catalogues, the language choice, and golden text of the article's example.

The golden files are the whole `--format text` output of samples/bank.yaml at 80
columns; after a deliberate change to the layout, rewrite them with
`ATTNCLI_UPDATE_GOLDEN=1 pytest tests/test_i18n.py` and read the diff.
"""

from __future__ import annotations

import ast
import os
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner, Result

from attncli import pipeline
from attncli.cli import app
from attncli.errors import AttnError
from attncli.i18n import LANGUAGE, current_language, describe, en, es, language_from_environment, language_in_arguments
from attncli.steps import BY_NAME
from tests.paths import ROOT, SAMPLES

GOLDEN = Path(__file__).parent / "golden"
ARTICLE_NUMBERS = ("2.8284", "0.7071", "11.1073", "0.6652", "0.2447", "0.0900", "[1.4205, 0.5795]")
# Every locale variable cleared, so the tests do not depend on the machine's locale.
NO_LOCALE = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "LANGUAGE": None}
FIXED_SCREEN = {**NO_LOCALE, "COLUMNS": "80", "NO_COLOR": None, "FORCE_COLOR": None}


def run(args: list[str], **env: str | None) -> Result:
    return CliRunner().invoke(app, args, env={**FIXED_SCREEN, **env})


def placeholders(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}


# The catalogues


def test_both_catalogues_have_the_same_keys() -> None:
    assert sorted(set(en.MESSAGES) - set(es.MESSAGES)) == [], "keys to translate in es.py"
    assert sorted(set(es.MESSAGES) - set(en.MESSAGES)) == [], "keys in es.py that en.py no longer has"


@pytest.mark.parametrize("key", sorted(en.MESSAGES))
def test_translations_keep_the_placeholders(key: str) -> None:
    assert placeholders(es.MESSAGES.get(key, en.MESSAGES[key])) == placeholders(en.MESSAGES[key])


def _key_uses() -> list[tuple[str, str, bool]]:
    """(where, text, is_prefix) for every catalogue key named in the package's source.

    Literal first arguments of t() and fail(), any other string literal that starts
    with a catalogue namespace (such as `reader.error(path, "problem.missing")`), and
    the constant start of f-strings such as f"render.score_{kind}" (a prefix).
    """
    namespaces = {key.split(".")[0] for key in en.MESSAGES}
    shaped = re.compile(r"([a-z]+)\.[a-z0-9_]*")
    uses = []
    for path in sorted((ROOT / "attncli").rglob("*.py")):
        if path.parent.name == "i18n":
            continue
        where = str(path.relative_to(ROOT))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        in_f_strings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr) for part in node.values}
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("t", "fail") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    uses.append((where, first.value, False))
            elif isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
                match = shaped.fullmatch(str(node.values[0].value))
                if match and match.group(1) in namespaces:
                    uses.append((where, str(node.values[0].value), True))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in in_f_strings:
                match = shaped.fullmatch(node.value)
                if match and match.group(1) in namespaces:
                    uses.append((where, node.value, False))
    return uses


def test_every_key_the_source_names_is_in_the_catalogue() -> None:
    uses = _key_uses()
    assert len(uses) > 50, "the scan found too few keys; has the way messages are named changed?"
    steps = {*BY_NAME, "backward."}  # a backward step's name (backward.<JSON key>) and its prefix are no message keys
    missing = [
        f"{where}: {text}"
        for where, text, is_prefix in uses
        if text not in steps
        and not (any(key.startswith(text) for key in en.MESSAGES) if is_prefix else text in en.MESSAGES)
    ]
    assert missing == []


# Choosing the language


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"LANG": "es"}, "es"),
        ({"LANG": "es_ES.UTF-8"}, "es"),
        ({"LANG": "es_MX"}, "es"),
        ({"LANG": "es_ES@euro"}, "es"),
        ({"LANG": "es_ES.ISO-8859-15@euro"}, "es"),
        ({"LANG": "ES_es.utf8"}, "es"),
        ({"LANG": "en_GB.UTF-8"}, "en"),
        ({"LANG": "fr_FR.UTF-8"}, "en"),
        ({"LANG": "C"}, "en"),
        ({"LANG": "POSIX"}, "en"),
        ({"LANG": "C.UTF-8"}, "en"),
        ({"LANG": ""}, "en"),
        ({}, "en"),
        ({"LC_ALL": "", "LC_MESSAGES": "", "LANG": "es_AR.UTF-8"}, "es"),
        ({"LC_MESSAGES": "es_ES.UTF-8", "LANG": "en_US.UTF-8"}, "es"),
        ({"LC_ALL": "es_CL.UTF-8", "LC_MESSAGES": "en_US.UTF-8"}, "es"),
        ({"LC_ALL": "C", "LANG": "es_ES.UTF-8"}, "en"),  # a set LC_ALL decides, even when it is C
        ({"LC_ALL": "C.UTF-8", "LANG": "es_ES.UTF-8"}, "en"),
    ],
)
def test_language_from_environment(environ: dict[str, str], expected: str) -> None:
    assert language_from_environment(environ) == expected


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["compute", "a.yaml", "--lang", "es"], "es"),
        (["compute", "--lang=es", "--help"], "es"),
        (["--lang", "en"], "en"),
        (["compute", "--lang=ES", "--help"], "es"),  # as checked_language reads it
        (["compute", "--lang", "xx"], None),  # unknown: checked_language reports it when the command runs
        (["compute", "--lang"], None),
        (["compute", "--tokens", "es"], None),
    ],
)
def test_language_in_arguments(arguments: list[str], expected: str | None) -> None:
    assert language_in_arguments(arguments) == expected


def test_every_command_takes_lang() -> None:
    commands = typer.main.get_command(app).commands
    assert commands
    for name, command in commands.items():
        assert "--lang" in [option for param in command.params for option in param.opts], name


# Golden output of the article's worked example


@pytest.mark.parametrize("lang", ["en", "es"])
def test_bank_text_matches_golden(lang: str) -> None:
    result = run(["compute", str(SAMPLES / "bank.yaml"), "--format", "text", "--lang", lang])
    assert result.exit_code == 0, result.output
    golden = GOLDEN / f"bank.{lang}.txt"
    if os.environ.get("ATTNCLI_UPDATE_GOLDEN"):
        golden.write_text(result.stdout, encoding="utf-8")
    expected = golden.read_text(encoding="utf-8")
    for number in ARTICLE_NUMBERS:
        assert number in expected, f"{golden.name} has lost the article's {number}"
    assert result.stdout == expected


def test_spanish_golden_speaks_the_article_terms() -> None:
    text = (GOLDEN / "bank.es.txt").read_text(encoding="utf-8")
    for term in ("Consultas", "autoatención", "producto escalar escalado", "Puntuaciones", "Mezcla ponderada"):
        assert term in text
    for english in ("Query", "Scores", "weight", "Output"):
        assert english not in text


def test_language_comes_from_the_environment_without_lang() -> None:
    result = run(["compute", str(SAMPLES / "bank.yaml"), "--format", "text"], LANG="es_ES.UTF-8")
    assert result.exit_code == 0, result.output
    assert result.stdout == (GOLDEN / "bank.es.txt").read_text(encoding="utf-8")


def test_lang_overrides_the_environment() -> None:
    result = run(["compute", str(SAMPLES / "bank.yaml"), "--format", "text", "--lang", "en"], LC_ALL="es_ES.UTF-8")
    assert result.stdout == (GOLDEN / "bank.en.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("sample", sorted(path.name for path in SAMPLES.glob("*.yaml")))
def test_every_sample_renders_in_spanish(sample: str) -> None:
    result = run(["compute", str(SAMPLES / sample), "--format", "text", "--lang", "es"])
    assert result.exit_code == 0, result.output
    assert "Máscara:" in result.stdout


def test_json_is_the_same_in_every_language() -> None:
    """JSON is read by programs: its keys and numbers must not follow the reader's language."""
    english, spanish = (
        run(["compute", str(SAMPLES / "bank.yaml"), "--format", "json", "--lang", lang]) for lang in ("en", "es")
    )
    assert english.exit_code == spanish.exit_code == 0
    assert spanish.stdout == english.stdout


# Errors


@pytest.mark.parametrize(
    ("lang", "message"),
    [
        ("en", "kyes: unknown field 'kyes'; did you mean 'keys'?"),
        ("es", "kyes: campo desconocido 'kyes'; ¿quisiste decir 'keys'?"),
    ],
)
def test_error_in_both_languages(tmp_path: Path, lang: str, message: str) -> None:
    problem = tmp_path / "typo.yaml"
    problem.write_text("tokens: [a, b]\nqueries: [[1], [0]]\nkyes: [[1], [2]]\nvalues: [[1], [2]]\n", encoding="utf-8")
    result = run(["compute", str(problem), "--lang", lang])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == f"attncli: {problem}:3: {message}\n"


@pytest.mark.parametrize(
    ("text", "english", "spanish"),
    [
        (
            "tokens: [a, b]\nqueries: [[1], [0]]\nkyes: [[1], [2]]\nvalues: [[1], [2]]\n",
            "<text>:3: kyes: unknown field 'kyes'; did you mean 'keys'?",
            "<text>:3: kyes: campo desconocido 'kyes'; ¿quisiste decir 'keys'?",
        ),
        (
            "tokens: [a]\nqueries: [[1]]\nkeys: [[1]]\nvalues: [[1, x]]\n",
            "<text>:4: values, row 1 (a): unknown name 'x' (only the constants pi and e are known)",
            "<text>:4: values, fila 1 (a): nombre desconocido 'x' (solo se conocen las constantes pi y e)",
        ),
        (
            "tokens: [a]\nqueries: yes\nkeys: [[1]]\nvalues: [[1]]\n",
            "<text>:2: queries: expected a matrix (a list of rows, or a mapping token: row), got the text 'yes'",
            "<text>:2: queries: se esperaba una matriz (una lista de filas, o un mapeo token: fila), "
            "pero hay el texto 'yes'",
        ),
        (
            "tokens: [a, b]\nqueries: {c: [1]}\nkeys: [[1], [2]]\nvalues: [[1], [2]]\n",
            "<text>:2: queries.c: 'c' is not a token; for cross-attention, list the query tokens in query_tokens",
            "<text>:2: queries.c: 'c' no es un token; para la atención cruzada, "
            "enumera los tokens de consulta en query_tokens",
        ),
    ],
)
def test_an_error_is_translated_when_printed_hint_row_and_all(text: str, english: str, spanish: str) -> None:
    """Raised while English is spoken, printed in either language: no part was translated in advance."""
    with pytest.raises(AttnError) as caught:
        pipeline.load(text=text)
    assert describe(caught.value) == english
    spoken = LANGUAGE.set("es")
    try:
        assert describe(caught.value) == spanish
    finally:
        LANGUAGE.reset(spoken)


def test_a_run_leaves_no_language_behind() -> None:
    """The language is the run's: a Spanish run, then English without --lang or locale."""
    assert run(["compute", str(SAMPLES / "bank.yaml"), "--format", "text", "--lang", "es"]).exit_code == 0
    assert current_language() == "en"
    assert run(["compute", str(SAMPLES / "bank.yaml"), "--format", "text"]).stdout == (
        GOLDEN / "bank.en.txt"
    ).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "attncli: --lang: unknown language 'xx' (known: en, es)\n"),
        ({"LANG": "es_ES.UTF-8"}, "attncli: --lang: idioma desconocido 'xx' (se conocen: en, es)\n"),
    ],
)
def test_unknown_lang_is_one_line_of_usage_error(env: dict[str, str], message: str) -> None:
    result = run(["compute", str(SAMPLES / "bank.yaml"), "--lang", "xx"], **env)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == message


def test_spanish_from_a_real_process() -> None:
    """The console entry point, with only the locale to go on, as a shell user would run it."""
    env = {key: value for key, value in os.environ.items() if key not in NO_LOCALE}
    result = subprocess.run(
        [sys.executable, "-m", "attncli", "compute", "-", "--format", "text"],
        input="tokens: [a]\nqueries: [[1]]\nkeys: [[1]]\nvalues: [[1, x]]\n",
        capture_output=True,
        text=True,
        env={**env, "LANG": "es_MX.UTF-8"},
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "attncli: <stdin>:4: values, fila 1 (a): nombre desconocido 'x' (solo se conocen las constantes pi y e)\n"
    )


def test_a_usage_error_follows_the_lang_option_too() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "attncli", "compute", "--bogus", "--lang", "es"],
        capture_output=True,
        text=True,
        env={**os.environ, "LANG": "C", "LC_ALL": ""},
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "consulta" in result.stderr


# --help, whose texts are built when the commands are imported: only a real process shows the language


def help_of(*args: str, **env: str) -> str:
    """The help `python -m attncli ARGS` prints, its lines joined: a phrase may be wrapped, an example broken."""
    clean = {key: value for key, value in os.environ.items() if key not in NO_LOCALE}
    result = subprocess.run(
        [sys.executable, "-m", "attncli", *args],
        capture_output=True,
        text=True,
        env={**clean, "COLUMNS": "200", **env},
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return " ".join(result.stdout.replace(" \\\n", " ").split())


def test_command_help_follows_lang() -> None:
    text = help_of("compute", "--help", "--lang", "es", LANG="C")
    for spanish in ("Filas de las claves", "la máscara causal", "proyección de salida W_O", "Ejemplos:"):
        assert spanish in text
    assert "Códigos de salida: 0 hecho; 2 entrada o uso incorrectos" in text
    assert '--queries "sqrt(2), 0" --keys "2,0; 1,1; 0,1"' in text  # the examples stay verbatim
    assert "Key rows" not in text and "Exit codes" not in text


def test_help_follows_the_environment_without_lang() -> None:
    text = help_of("--help", LANG="es_ES.UTF-8")
    assert "La atención, calculada paso a paso" in text and "Códigos de salida" in text
    assert "Corrige la atención calculada a mano" in text  # the summary of `check`


@pytest.mark.parametrize("env", [{}, {"LANG": "C"}, {"LANG": "fr_FR.UTF-8"}, {"LANG": "es_ES.UTF-8", "LC_ALL": "C"}])
def test_help_is_english_by_default(env: dict[str, str]) -> None:
    text = help_of("compute", "--help", **env)
    assert "Key rows, one per token." in text and "Exit codes: 0 done" in text
    assert "Filas" not in text


def test_lang_en_overrides_a_spanish_environment_in_help() -> None:
    text = help_of("scaling", "--help", "--lang", "en", LANG="es_ES.UTF-8")
    assert "Keys each query is compared with (1 to 4096; default: 16)." in text and "Exit codes" in text


# Placeholders before a plural noun that are never 1: limits, names (a dtype); then messages said only of many.
NEVER_ONE = {"limit", "max_keys", "max_queries", "edge", "length", "dtype"}
MANY_BY_CONSTRUCTION = {
    "check.top_with_heads",  # said only when the problem has several heads
    "check.too_many_heads",  # more heads answered than the problem has (≥ 1)
    "check.too_many_layers",
    "check.total",  # {correct}/{cells} cells: a fraction
    "analysis.scaling_budget",  # more than the limit
    "writeup.condensed",  # a problem too large to show cell by cell
    "render.too_many_cells",  # more cells than the limit
    "check.decimal_comma_list",  # a row read as several whole numbers
}
NOUNS = (
    "rows|numbers|entries|columns|keys|queries|heads|files|cells|values|decimals|layers|exercises|steps|"
    "filas|números|entradas|columnas|claves|consultas|cabezas|archivos|celdas|valores|decimales|capas|ejercicios|pasos"
)


@pytest.mark.parametrize("messages", [en.MESSAGES, es.MESSAGES], ids=["en", "es"])
def test_a_count_that_can_be_one_takes_the_plural_form(messages: dict[str, str]) -> None:
    """'{count} numbers' reads "1 numbers" when count is 1: such a count is written {count} {count:number|numbers}."""
    bare = re.compile(r"\{(\w+)\} (?:" + NOUNS + r")\b")
    found = [
        (key, name)
        for key, message in messages.items()
        if key not in MANY_BY_CONSTRUCTION
        for name in bare.findall(message)
        if name not in NEVER_ONE
    ]
    assert found == []
