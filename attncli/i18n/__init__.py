"""Every sentence a person reads comes from a catalogue here, one per language.

The language is chosen once per run (`--lang`, else the locale variables) and
kept in a context variable, so deep code can phrase messages without threading a
language argument through every call, and a run leaves no language behind for the
next one (a test, an embedding program). The program's entry point sets it before
importing the commands, whose --help texts are built on import; each command run
sets it again from its own --lang (attncli.cli.common.boundary).

Errors are translated only when printed (`describe`): an AttnError carries a
catalogue key and its parameters, and a parameter (a hint, what was found) or
the field itself may be a `Message`, translated with it.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, NamedTuple

from attncli.i18n import en

if TYPE_CHECKING:
    from attncli.errors import AttnError

LANGUAGES = ("en", "es")  # each the module of its catalogue, imported when a run first speaks it
_CATALOGUES: dict[str, Mapping[str, str]] = {"en": en.MESSAGES}
LANGUAGE: ContextVar[str] = ContextVar("attncli_language", default="en")
QUOTED = 80  # characters of a name or value an error message repeats; longer ones are cut, the cut marked


class Message(NamedTuple):
    """A catalogue key and its parameters, translated only when printed: a part of an error's message, or its field."""

    key: str
    params: dict[str, object]


def language_from_environment(environ: Mapping[str, str] = os.environ) -> str:
    """The first of LC_ALL, LC_MESSAGES, LANG that is set decides, as in gettext.

    A locale name is `language[_territory][.codeset][@modifier]`, so `es`, `es_MX`,
    `es_ES.UTF-8` and `es_ES@euro` all mean Spanish; `C`, `POSIX`, `C.UTF-8` and
    languages without a catalogue mean English.
    """
    for variable in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(variable, "").strip()
        if value:
            code = re.split(r"[_.@-]", value, maxsplit=1)[0].lower()
            return code if code in LANGUAGES else "en"
    return "en"


def language_in_arguments(arguments: Sequence[str]) -> str | None:
    """The --lang value among command-line arguments, if it is a language we speak (in any case, as
    attncli.cli.environment.checked_language takes it).

    Read before Typer parses anything: the help texts are built in this language
    when the commands are imported, and a usage error may stop parsing early.
    """
    for index, argument in enumerate(arguments):
        value = argument.partition("=")[2] if argument.startswith("--lang=") else None
        if argument == "--lang" and index + 1 < len(arguments):
            value = arguments[index + 1]
        if value is not None and value.lower() in LANGUAGES:
            return value.lower()
    return None


def current_language() -> str:
    return LANGUAGE.get()


def t(key: str, /, **params: object) -> str:
    """The message `key` in the current language, placeholders filled (a `Message` among them translated too).

    `{count:row|rows}` is the word for `count`: the first form for exactly 1, the second
    for any other number, as in both English and Spanish ("1 row", "0 rows", "1 fila").
    """
    template = catalogue(LANGUAGE.get()).get(key) or en.MESSAGES[key]
    if not params:
        return template
    template = PLURAL.sub(lambda found: _form(params[found.group(1)], found.group(2), found.group(3)), template)
    return template.format(**{name: _text(value) for name, value in params.items()})


def catalogue(language: str) -> Mapping[str, str]:
    """The messages of `language`, one of LANGUAGES."""
    if language not in _CATALOGUES:
        _CATALOGUES[language] = importlib.import_module(f"attncli.i18n.{language}").MESSAGES
    return _CATALOGUES[language]


PLURAL = re.compile(r"\{(\w+):([^{}|]*)\|([^{}]*)\}")


def _form(count: object, one: str, other: str) -> str:
    return one if str(count).strip() == "1" else other


def _text(value: object) -> object:
    return t(value.key, **value.params) if isinstance(value, Message) else value


def describe(error: AttnError) -> str:
    """`file:line: field: message` in the current language, leaving out what is not known.

    What came from the user (a file name, a field, a name, a value) is quoted at most QUOTED
    characters long, its cut marked: a 10,000-character name must not make a 10,000-character line.
    """
    where = error.where
    place = ":".join(_short(part) for part in (where.source, where.line) if part is not None)
    params = {name: _said(value) if isinstance(value, str) else value for name, value in error.params.items()}
    field = _text(where.field)  # a row named in words is a Message
    parts = [str(part) for part in (place, field and _short(field), t(error.key, **params)) if part]
    return ": ".join(parts)


def in_english(error: AttnError) -> str:
    """`describe(error)` in English whatever language the run speaks: `str(error)`."""
    token = LANGUAGE.set("en")
    try:
        return describe(error)
    finally:
        LANGUAGE.reset(token)


def _said(text: str) -> str:
    """`text` in the current language when it is a sentence of the system's, PyYAML's or zipfile's we know;
    else (a name, a value from the user) `text` quoted at most QUOTED characters long."""
    from attncli.i18n import foreign  # the patterns cost a start-up that prints no error

    found = foreign.reason(text)
    return t(found[0], **found[1]) if found else _short(text)


def usage_message(message: str) -> str:
    """One of Typer's usage errors (a bad flag, a missing argument) in the current language."""
    from attncli.i18n import foreign

    found = foreign.usage(message)
    if found is None:
        return message
    key, parts = found
    params: dict[str, object] = {name: _short(value) for name, value in parts.items()}
    if key == "usage.extra_arguments":
        params["count"] = len(parts["args"].split())
    return t(key, **params)


def _short(value: object) -> str:
    """`value` as text, cut in the middle past QUOTED characters: a path keeps its start and its file name."""
    text = str(value)
    if len(text) <= QUOTED:
        return text
    tail = (QUOTED - 3) // 3
    return f"{text[: QUOTED - 3 - tail]}...{text[len(text) - tail :]}"
