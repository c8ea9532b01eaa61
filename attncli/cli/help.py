"""attncli's own --help: plain text wrapped to the terminal, every word from the catalogue.

Typer's rich help cuts option names and descriptions with "…" on a narrow terminal,
breaks example commands where a line ends, lists the examples after the options, keeps
Click's English labels, and costs markdown-it and pygments at every start. This help
never cuts a word: it wraps. An example too long for a line is broken only between two
arguments, the break ended with a backslash, so that it still pastes into a shell.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from collections.abc import Sequence
from typing import Any

from attncli.i18n import t

WIDEST = 100  # columns of help text on a wider terminal: longer lines are hard to read
NARROWEST = 20  # a terminal narrower than this gets lines of this width, which it wraps itself
INDENT = "  "
CONTINUED = INDENT + "    "  # the continuation lines of a broken example
HIDDEN_DEFAULTS: tuple[object, ...] = (None, False, (), [])


def width() -> int:
    """The width of the help: the terminal's (COLUMNS first), within NARROWEST..WIDEST."""
    return max(NARROWEST, min(WIDEST, shutil.get_terminal_size((80, 24)).columns))


def wrap(text: str, columns: int, indent: str = "") -> list[str]:
    """`text` in lines of at most `columns` characters, broken at spaces (a word longer than a line stays whole)."""
    return textwrap.wrap(
        text,
        columns,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [indent.rstrip()]


def command_help(ctx: Any, command: Any) -> str:
    """The help of one command: usage, what it does, examples, arguments, options, then its notes and exit codes."""
    columns = width()
    arguments = [param for param in command.get_params(ctx) if param.param_type_name == "argument"]
    options = [param for param in command.get_params(ctx) if param.param_type_name == "option"]
    usage = [ctx.command_path, t("help.usage_options"), *(argument_metavar(param) for param in arguments)]
    parts = [_usage(usage, columns), wrap(command.help or "", columns)]
    examples, _, notes = (command.epilog or "").partition("\n\n")
    if examples:
        parts.append([t("help.examples"), *_examples(examples, columns)])
    if arguments:
        rows = [(argument_metavar(param), _description(param)) for param in arguments]
        parts.append([t("help.arguments"), *definitions(rows, columns)])
    parts.append([t("help.options"), *definitions([option_row(param) for param in options], columns)])
    parts += [wrap(paragraph, columns) for paragraph in notes.split("\n\n") if paragraph]
    return _joined(parts)


def group_help(ctx: Any, group: Any, commands: Sequence[Any], examples: str) -> str:
    """The help of attncli itself: usage, what it is, examples, its commands and options, where to read more."""
    columns = width()
    options = [param for param in group.get_params(ctx) if param.param_type_name == "option"]
    usage = [ctx.command_path, t("help.usage_options"), t("help.usage_command")]
    parts = [
        _usage(usage, columns),
        wrap(group.help or "", columns),
        [t("help.examples"), *_examples(examples, columns)],
        [t("help.commands"), *definitions([(each.name or "", each.help or "") for each in commands], columns)],
        [t("help.options"), *definitions([option_row(param) for param in options], columns)],
        wrap(t("help.more", command=ctx.command_path), columns),
        wrap(t("help.exit_codes.app"), columns),
    ]
    return _joined(parts)


def _joined(parts: list[list[str]]) -> str:
    return "\n\n".join("\n".join(part) for part in parts if part) + "\n"


def _usage(words: list[str], columns: int) -> list[str]:
    label = t("help.usage")
    lines = wrap(" ".join(words), columns - len(label) - 1)
    return [f"{label} {lines[0]}", *(" " * (len(label) + 1) + line for line in lines[1:])]


def argument_metavar(param: Any) -> str:
    """FILE, FILE... (any number), [FILE] (optional): the argument's name as usage and the README write it."""
    name = param.metavar or (param.name or "").upper()
    if param.nargs == -1:
        name += "..."
    return name if param.required else f"[{name}]"


def option_metavar(param: Any) -> str:
    """What follows the option's name: its own metavar, else N for a whole number, X for a number, FILE for a path."""
    if param.metavar:
        return param.metavar
    kind = getattr(param.type, "name", "").partition(" ")[0]  # an "int range" is an int
    return t(METAVARS.get(kind, "help.metavar.text"))


METAVARS = {"int": "help.metavar.n", "float": "help.metavar.x", "path": "help.metavar.file"}


def option_names(param: Any) -> str:
    """`-o, --output FILE`, `--projections / --no-projections`: short names first, then the value's metavar."""
    names = sorted(param.opts, key=lambda name: (name.startswith("--"), name))
    text = ", ".join(names)
    if param.secondary_opts:
        text += " / " + ", ".join(param.secondary_opts)
    if not getattr(param, "is_flag", False) and not getattr(param, "count", False):
        text += f" {option_metavar(param)}"
    return text


def option_row(param: Any) -> tuple[str, str]:
    return option_names(param), _description(param)


OWN_HELP = {  # the options Click and Typer add, whose help they write in English
    "help": "help.help",
    "install_completion": "help.install_completion",
    "show_completion": "help.show_completion",
}


def _description(param: Any) -> str:
    """The parameter's help, then its range and its default, when they say something."""
    text = t(OWN_HELP[param.name]) if param.name in OWN_HELP else getattr(param, "help", None) or ""
    extras = [_range(getattr(param.type, "min", None), getattr(param.type, "max", None))]
    default = param.default
    if param.param_type_name == "option" and default not in HIDDEN_DEFAULTS and not callable(default):
        extras.append(t("help.default", value=default))
    said = "; ".join(extra for extra in extras if extra)
    if not said:
        return text
    stem, stop = (text[:-1], ".") if text.endswith(".") else (text, "")
    if stem.endswith(")"):  # "(default d_k)" becomes "(default d_k; 1 to 8)"
        return f"{stem[:-1]}; {said}){stop}"
    return f"{stem} ({said}){stop}"


def _range(low: object, high: object) -> str:
    """A number option's bounds (Click's IntRange, FloatRange), in words."""
    if low is not None and high is not None:
        return t("help.range", low=low, high=high)
    if low is not None:
        return t("help.at_least", low=low)
    return t("help.at_most", high=high) if high is not None else ""


def definitions(rows: list[tuple[str, str]], columns: int) -> list[str]:
    """Terms and their descriptions, side by side when there is room; a longer term, or a narrow terminal,
    puts the description under its term."""
    if not rows:
        return []
    term_width = min(max(len(term) for term, _ in rows), max(10, (columns - 4) * 2 // 5))
    text_width = columns - len(INDENT) - term_width - 2
    lines: list[str] = []
    for term, text in rows:
        if text_width < 30:
            lines += [INDENT + term, *wrap(text, columns, CONTINUED)]
            continue
        wrapped = wrap(text, text_width)
        margin = " " * (len(INDENT) + term_width + 2)
        if len(term) <= term_width:
            lines.append(f"{INDENT}{term:<{term_width}}  {wrapped[0]}".rstrip())
            lines += [margin + line for line in wrapped[1:]]
        else:
            lines += [INDENT + term, *(margin + line for line in wrapped)]
    return lines


def _examples(text: str, columns: int) -> list[str]:
    """Example commands (indented lines naming attncli), shown whole or broken between arguments; a note
    (a line not indented) wrapped; any other indented line (a file's content) kept as it is."""
    lines: list[str] = []
    for line in text.splitlines():
        if not line.startswith(" "):
            lines += ["", *wrap(line, columns)]
        elif "attncli" in line:
            lines += example_lines(line.strip(), columns)
        else:
            lines.append(line)
    return lines


def example_lines(command: str, columns: int) -> list[str]:
    """`command` on one line, or broken between arguments with a trailing backslash; an option stays with its value."""
    room = columns - len(CONTINUED) - 2
    pieces = [
        word
        for piece in _pieces(shell_words(command))
        for word in (piece.split(" ", 1) if len(piece) > room else [piece])
    ]
    lines = [INDENT + pieces[0]]
    for piece in pieces[1:]:
        if len(lines[-1]) + 1 + len(piece) + 2 <= columns or len(lines[-1]) <= len(CONTINUED):
            lines[-1] += " " + piece
        else:
            lines[-1] += " \\"
            lines.append(CONTINUED + piece)
    return lines


SHELL_WORD = re.compile(r"""(?:[^\s'"]+|'[^']*'|"[^"]*")+""")


def shell_words(command: str) -> list[str]:
    """The words of a shell command as written (quotes kept), so that it can be broken between them."""
    return SHELL_WORD.findall(command)


def _pieces(words: list[str]) -> list[str]:
    """Words grouped so that an option stays on one line with its value (`--format json`), a pipe or a
    redirection with what follows it (`| attncli`, `> out.yaml`)."""
    pieces: list[str] = []
    for word in words:
        joins = pieces and (pieces[-1] in ("|", ">") or (pieces[-1].startswith("-") and " " not in pieces[-1]))
        if joins and not word.startswith("-"):
            pieces[-1] += " " + word
        else:
            pieces.append(word)
    return pieces
