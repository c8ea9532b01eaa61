"""The README against the program: its synopses are the options `--help` lists, its samples exist.

The synopsis of each command (the block under "The command line", and any other block
that spells a command's options, such as the one of `attncli generate`) must name every
option of that command and no other; the options every command takes (`--lang`,
`--debug`, `-h/--help`) are said once, in the paragraph after the block. Every
command's --help ends with examples that use only its own options, and every file in
samples/ is named in the README.
"""

from __future__ import annotations

import importlib
import re
import shlex
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from attncli.cli import app
from attncli.i18n import t
from tests.paths import ROOT, SAMPLES

README = (ROOT / "README.md").read_text(encoding="utf-8")
COMMANDS: dict[str, Any] = typer.main.get_command(app).commands  # type: ignore[attr-defined]  (Click commands)
COMMON = {"--lang", "--debug", "--help", "-h"}  # every command's, said once after the synopsis
OPTION = re.compile(r"(?<![\w-])(--?[a-zA-Z][\w-]*)")


def blocks(text: str) -> list[str]:
    """The fenced code blocks of a Markdown text."""
    return re.findall(r"^```[a-z]*\n(.*?)^```$", text, flags=re.MULTILINE | re.DOTALL)


def synopses(block: str) -> list[tuple[str, str]]:
    """(command, synopsis) for each `attncli NAME ...` line of `block`, with its indented continuation lines."""
    entries: list[tuple[str, str]] = []
    for line in block.splitlines():
        if line.startswith("attncli "):
            entries.append((line.split()[1], line))
        elif line.startswith(" ") and entries:
            entries[-1] = (entries[-1][0], f"{entries[-1][1]} {line.strip()}")
    return entries


def command_line_block() -> str:
    section = README.split("\n## The command line\n", 1)[1]
    return blocks(section)[0]


def every_synopsis() -> list[tuple[str, str]]:
    """The command-line block's synopses, and those of any other block written as a synopsis ([options])."""
    found = synopses(command_line_block())
    for block in blocks(README):
        if block != command_line_block() and block.startswith("attncli ") and "[--" in block:
            found += synopses(block)
    return found


def options_of(command: Any) -> dict[str, set[str]]:
    """Each option of `command`, by its first name, with every name it answers to (`-o`, `--no-answers`).

    The options every command takes are left out.
    """
    options = [param for param in command.params if param.param_type_name == "option"]
    names = {param.opts[0]: set(param.opts) | set(param.secondary_opts) for param in options}
    return {name: each for name, each in names.items() if not each & COMMON}


def test_the_command_line_block_has_every_command_once() -> None:
    named = [name for name, _ in synopses(command_line_block())]
    assert sorted(named) == sorted(COMMANDS)


def test_the_paragraph_after_the_block_names_the_options_every_command_takes() -> None:
    paragraph = README.split("\n## The command line\n", 1)[1].split("```", 2)[2].split("\n\n")[1]
    for option in ("--lang", "-h/--help", "--debug"):
        assert option in paragraph
    for name, command in COMMANDS.items():
        names = {opt for param in command.params for opt in param.opts}
        assert {"--lang", "--debug"} <= names, name


@pytest.mark.parametrize(("name", "synopsis"), every_synopsis())
def test_a_synopsis_names_every_option_and_no_other(name: str, synopsis: str) -> None:
    options = options_of(COMMANDS[name])
    written = set(OPTION.findall(synopsis))
    missing = [option for option, each in options.items() if not each & written]
    unknown = sorted(written - set().union(*options.values()))
    assert (missing, unknown) == ([], []), f"attncli {name}: missing from the README {missing}, not options {unknown}"


@pytest.mark.parametrize(("name", "synopsis"), every_synopsis())
def test_a_synopsis_lists_the_formats_the_command_offers(name: str, synopsis: str) -> None:
    formats = getattr(importlib.import_module(f"attncli.cli.{name}"), "FORMATS", None)
    written = re.search(r"--format ([\w|]+)", synopsis)
    assert (written.group(1).split("|") if written else None) == (list(formats) if formats else None)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_help_shows_examples_of_its_own_options_before_the_options(name: str) -> None:
    text = CliRunner().invoke(app, [name, "--help"], env={"COLUMNS": "200"}).stdout.replace(" \\\n", " ")
    assert text.index(t("help.examples")) < text.index(t("help.options")), name
    examples = [line.split(f"attncli {name}", 1)[1] for line in text.splitlines() if f"  attncli {name}" in line]
    assert examples, f"attncli {name} --help shows no example"
    command = COMMANDS[name]
    known = set().union(*(set(param.opts) | set(param.secondary_opts) for param in command.params))
    for example in examples:
        words = shlex.split(re.split(r"\s[|>]\s?", example)[0])
        used = {word.partition("=")[0] for word in words if OPTION.fullmatch(word.partition("=")[0])}
        assert used <= known, f"attncli{example}: {sorted(used - known)} are not options of {name}"


def test_every_sample_is_named_in_the_readme() -> None:
    samples = sorted(path.name for path in SAMPLES.iterdir() if path.is_file())
    assert samples
    assert [name for name in samples if f"`{name}`" not in README] == []


@pytest.mark.parametrize("readme", ["README.md", "README.es.md"])
def test_the_readmes_point_only_into_the_repository(readme: str) -> None:
    """A reader has the repository and nothing beside it: no `../` paths, and every relative link resolves."""
    text = (ROOT / readme).read_text(encoding="utf-8")
    assert "../" not in text
    links = re.findall(r"\]\(([^)#]+)\)", text)
    assert [link for link in links if "://" not in link and not (ROOT / link).exists()] == []


def test_the_checking_example_prints_what_the_readme_shows(tmp_path: Any) -> None:
    """The homework of "Checking homework": samples/bank.yaml with the README's answers, checked as shown."""
    section = README.split("\n## Checking homework: `attncli check`\n", 1)[1]
    answers, shown = blocks(section)[:2]
    homework = tmp_path / "homework.yaml"
    homework.write_text((SAMPLES / "bank.yaml").read_text(encoding="utf-8") + answers, encoding="utf-8")
    command, *_, last = shown.strip().splitlines()
    assert command == "$ attncli check homework.yaml"
    result = CliRunner().invoke(app, ["check", str(homework)], env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 1
    assert result.stdout.strip().splitlines()[-1] == last


def layout_section() -> str:
    return README.split("\n## Layout of the code\n", 1)[1].split("\n## ", 1)[0]


def named_modules() -> set[str]:
    """The files the layout's table names: its first column's paths, and in a folder's row the file names
    there (`fields.py`, relative to the folder), or paths from the package (`render/tiles.py`)."""
    named: set[str] = set()
    for row in layout_section().splitlines():
        if not row.startswith("| `attncli/"):
            continue
        first, text = row.split(" | ", 1)
        paths = re.findall(r"`(attncli/[\w/.]*)`", first)
        named.update(path for path in paths if path.endswith(".py"))
        folder = paths[0] if len(paths) == 1 and paths[0].endswith("/") else None
        for written in re.findall(r"`([\w/]+\.py)`", text):
            if written.startswith("attncli/"):
                named.add(written)
            elif "/" in written or folder is None:
                named.add(f"attncli/{written}")
            else:
                named.add(f"{folder}{written}")
    return named


def test_every_module_the_layout_names_exists() -> None:
    named = named_modules()
    assert len(named) > 50
    assert sorted(path for path in named if not (ROOT / path).is_file()) == []


def test_the_layout_names_every_module_of_the_package() -> None:
    """Every file of attncli/, an __init__.py too unless it holds nothing but its docstring."""
    import ast

    named = named_modules()
    missing = []
    for path in sorted((ROOT / "attncli").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        body = ast.parse(path.read_text(encoding="utf-8")).body
        only_docstring = len(body) <= 1 and all(isinstance(node, ast.Expr) for node in body)
        if relative not in named and not (path.name == "__init__.py" and only_docstring):
            missing.append(relative)
    assert missing == []


def recipes() -> list[str]:
    """The layout's recipes, "Where a change goes": one entry per bullet."""
    text = layout_section().split("Where a change goes:", 1)[1]
    return [" ".join(bullet.split()) for bullet in re.split(r"\n- ", text) if bullet.strip()]


def _defined(path: str) -> set[str]:
    """The names a module defines at its top level and in its classes: functions, classes, assignments."""
    import ast

    names: set[str] = set()
    for node in ast.walk(ast.parse((ROOT / path).read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name))
    return names


@pytest.mark.parametrize("recipe", recipes(), ids=lambda recipe: recipe.split("**")[1])
def test_a_recipe_names_files_that_exist_and_names_they_define(recipe: str) -> None:
    """Each backticked path exists; each backticked name (`SCORE_KINDS`, `compatibility()`) is defined in one of the
    Python files the same recipe names."""
    paths = [path for path in re.findall(r"`([\w/.]+)`", recipe) if "/" in path]
    assert [path for path in paths if not (ROOT / path).exists()] == []
    modules = [path for path in paths if path.endswith(".py")]
    names = [name.removesuffix("()") for name in re.findall(r"`([A-Za-z_]\w*(?:\(\))?)`", recipe)]
    defined = set().union(*(_defined(path) for path in modules))
    assert modules and names
    assert [name for name in names if name not in defined] == [], recipe.split("**")[1]


def test_the_recipes_cover_a_score_kind_a_format_a_diagnosis_and_a_step() -> None:
    titles = [recipe.split("**")[1] for recipe in recipes()]
    assert titles == ["A new score function", "A new output format", "A new diagnosis", "A new step"]
