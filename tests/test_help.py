"""--help at every width: nothing cut, examples first and whole, exit codes where they can happen,
metavars as the README writes them, and the README's synopsis the same as the help's."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from attncli.cli import app
from attncli.cli.help import OWN_HELP
from attncli.i18n import t
from tests.paths import ROOT
from tests.test_docs import every_synopsis

COMMANDS = typer.main.get_command(app).commands  # type: ignore[attr-defined]
WIDTHS = (40, 80, 200)
NO_LOCALE = {"LC_ALL": None, "LC_MESSAGES": None, "LANG": None, "LANGUAGE": None}


def help_text(*args: str, columns: int = 80) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={**NO_LOCALE, "COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    return result.stdout


def joined(text: str) -> str:
    """The help with each broken example back on one line."""
    return re.sub(r" \\\n +", " ", text)


def section(text: str, title: str) -> list[str]:
    """The lines of the help's section `title` (up to the next blank line followed by an unindented line)."""
    lines = text.split(f"\n{title}\n", 1)[1].split("\n")
    end = next(i for i, line in enumerate(lines) if line == "" and not lines[i + 1].startswith(" "))
    return lines[:end]


def source_examples(name: str) -> list[str]:
    """The example command lines as the command's module writes them."""
    lines = (COMMANDS[name].epilog or "").splitlines()
    return [line.strip() for line in lines if line.startswith("  ") and "attncli" in line]


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("name", ["", *sorted(COMMANDS)])
def test_help_fits_the_width_and_cuts_nothing(name: str, columns: int) -> None:
    text = help_text(*([name] if name else []), columns=columns)
    assert "…" not in text
    without_metavars = text.replace("[ARGS]...", "").replace("FILE...", "")
    assert "..." not in without_metavars
    for line in text.splitlines():
        assert len(line) <= max(columns, 20) or " " not in line.strip(), line  # only a single long word overflows
    flat = " ".join(text.split())
    params = COMMANDS[name].params if name else typer.main.get_command(app).params
    for param in params:
        for option in param.opts if param.param_type_name == "option" else ():
            assert re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text), option
        said = t(OWN_HELP[param.name]) if param.name in OWN_HELP else getattr(param, "help", None)
        if said:
            assert " ".join(said.rstrip(".)").split()) in flat, param.name


@pytest.mark.parametrize("columns", WIDTHS)
@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_examples_come_first_and_are_never_broken_inside_a_word(name: str, columns: int) -> None:
    text = help_text(name, columns=columns)
    assert text.index(t("help.examples")) < text.index(
        t("help.arguments") if COMMANDS[name].params[0].param_type_name == "argument" else t("help.options")
    )
    shown = [line.strip() for line in section(joined(text), t("help.examples")) if "attncli" in line]
    assert shown == source_examples(name)
    for line in text.splitlines():
        if line.endswith(" \\"):  # a broken example: the break falls between two arguments
            assert not line[:-2].endswith((" -o", " --format", "|")), line


def test_a_long_example_breaks_between_arguments_with_a_backslash() -> None:
    text = help_text("compute", columns=40)
    assert "  attncli compute \\\n      --tokens fisherman,net,bank \\\n" in text
    assert '--queries "sqrt(2), 0" \\\n' in text  # a quoted argument stays whole


def test_the_top_level_help_has_examples_and_every_command() -> None:
    text = help_text(columns=80)
    examples = section(text, t("help.examples"))
    assert len(examples) >= 4 and all(line.startswith("  attncli ") for line in examples)
    assert [line.split()[0] for line in section(text, t("help.commands")) if not line.startswith("   ")] == sorted(
        COMMANDS
    )


def exit_codes(text: str) -> set[int]:
    paragraph = " ".join(text.split(t("help.exit_codes").split(":")[0] + ":", 1)[1].split())
    return {int(code) for code in re.findall(r"(?:^|; )(\d+) ", paragraph)}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_exit_codes_are_listed_only_where_they_can_happen(name: str) -> None:
    expected = {0, 2, 70, 130, 143} | ({1} if name == "check" else set())
    assert exit_codes(help_text(name, columns=200)) == expected


def test_the_top_level_help_says_which_command_exits_1() -> None:
    text = " ".join(help_text(columns=200).split())
    assert exit_codes(text) == {0, 1, 2, 70, 130, 143}
    assert "1 `check` found" in text


@pytest.mark.parametrize(
    ("name", "usage"),
    [
        ("check", "attncli check [OPTIONS] FILE..."),
        ("compare", "attncli compare [OPTIONS] A B"),
        ("compute", "attncli compute [OPTIONS] [FILE]"),
        ("template", "attncli template [OPTIONS] FILE"),
        ("generate", "attncli generate [OPTIONS]"),
        ("softmax", "attncli softmax [OPTIONS] LOGITS|FILE"),
        ("cost", "attncli cost [OPTIONS] [FILE]"),
    ],
)
def test_usage_names_arguments_as_metavars(name: str, usage: str) -> None:
    assert help_text(name).splitlines()[0] == f"Usage: {usage}"


def test_bare_attncli_prints_the_help_on_stdout_and_exits_0() -> None:
    bare = subprocess.run([sys.executable, "-m", "attncli"], capture_output=True, text=True, cwd=ROOT)
    asked = subprocess.run([sys.executable, "-m", "attncli", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert (bare.returncode, bare.stderr) == (0, "")
    assert bare.stdout == asked.stdout and bare.stdout.startswith("Usage: attncli [OPTIONS] COMMAND")


def options_in_help(text: str) -> dict[str, str | None]:
    """Each option the help lists, by every name, with the metavar after its names (None for a flag)."""
    found: dict[str, str | None] = {}
    for line in section(text, t("help.options")):
        match = re.match(r"  (-[^ ].*?)(?:  |$)", line)
        if not match:
            continue
        names, _, metavar = match.group(1).replace(" / ", ", ").rpartition(" ")
        if metavar.startswith("-"):
            names, metavar = match.group(1).replace(" / ", ", "), ""
        for name in names.split(", "):
            found[name] = metavar or None
    return found


@pytest.mark.parametrize(("name", "synopsis"), every_synopsis())
def test_the_readme_synopsis_is_the_help(name: str, synopsis: str) -> None:
    """The README's arguments are the help's usage; each option's value is the help's metavar, or spells
    out the choices the help's description names (`--format rich|text|json`)."""
    text = help_text(name, columns=200)
    usage = text.splitlines()[0].split("[OPTIONS]", 1)[1].split()
    words = synopsis.split()[2:]
    positional = words[: next(i for i, word in enumerate([*words, "[-"]) if word.startswith(("[-", "-")))]
    assert positional == usage, synopsis
    listed = options_in_help(text)
    descriptions = " ".join(text.split())
    for option, value in re.findall(r"(--?[a-z][\w-]*)(?: ([^\s\[\]|]+(?:\|[^\s\]]+)*(?:\[[^\]]*\])?))?", synopsis):
        assert option in listed, option
        if not value or value.startswith("-"):
            assert listed[option] is None or value, option
            continue
        if re.fullmatch(r"[A-Z][A-Z_]*", value):
            assert value == listed[option], (option, value, listed[option])
        else:
            for choice in re.findall(r"[a-z_][a-z0-9_]*", value):
                assert choice in descriptions, (option, choice)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
@pytest.mark.parametrize("columns", WIDTHS)
def test_help_in_a_real_terminal_fits_it(columns: int, tmp_path: Path) -> None:
    """In a tmux pane `columns` wide, with no COLUMNS: the help asks the terminal itself."""
    session = f"attncli-help-{os.getpid()}-{columns}"
    done = tmp_path / "done"
    env = {key: value for key, value in os.environ.items() if key not in ("COLUMNS", "LINES", "TMUX")}
    command = f"cd {ROOT} && {sys.executable} -m attncli compute --help; touch {done}; sleep 30"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", str(columns), "-y", "200", command],
        env=env,
        check=True,
        timeout=30,
    )
    try:
        for _ in range(200):
            if done.exists():
                break
            time.sleep(0.05)
        screen = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", session, "-S", "-", "-E", "-"],
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], check=False, timeout=30)
    lines = screen.rstrip("\n").splitlines()
    assert lines[0].startswith("Usage: attncli compute")
    assert "…" not in screen
    expected = help_text("compute", columns=columns)
    assert [line.rstrip() for line in lines if line.strip()] == [
        line.rstrip() for line in expected.splitlines() if line.strip()
    ]


def attncli(*args: str, lang: str = "C") -> subprocess.CompletedProcess[str]:
    """attncli as a program, its locale `lang`."""
    clean = {key: value for key, value in os.environ.items() if key not in NO_LOCALE}
    environ = {**clean, "LANG": lang, "COLUMNS": "80"}
    return subprocess.run(
        [sys.executable, "-m", "attncli", *args], capture_output=True, text=True, env=environ, cwd=ROOT
    )


@pytest.mark.parametrize(
    "args", [["--lang", "es"], ["--lang=es"], ["--lang", "ES"], ["--lang", "es", "--help"], ["-h", "--lang", "es"]]
)
def test_lang_without_a_command_prints_the_help_in_that_language(args: list[str]) -> None:
    """`attncli --lang es` is bare `attncli` in Spanish: the help the Spanish locale prints, on stdout, exit 0."""
    spanish = attncli(lang="es_ES.UTF-8")
    assert spanish.stdout.startswith("Uso: attncli [OPCIONES] ORDEN")
    done = attncli(*args)
    assert (done.returncode, done.stderr, done.stdout) == (0, "", spanish.stdout)
    english = attncli("--lang", "en", lang="es_ES.UTF-8")
    assert (english.returncode, english.stdout) == (0, attncli().stdout)


def test_lang_before_the_command_is_the_commands() -> None:
    done = attncli("--lang", "es", "compute", "samples/bank.yaml")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (ROOT / "tests" / "golden" / "bank.es.txt").read_text(encoding="utf-8")


def test_an_unknown_lang_without_a_command_is_a_usage_error() -> None:
    done = attncli("--lang", "xx")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.count("\n") == 1 and "--lang" in done.stderr and "xx" in done.stderr
