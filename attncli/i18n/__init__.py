"""Every sentence a person reads comes from a catalogue here, one per language.

The language is chosen once per invocation (`--lang`, else the locale variables)
and kept in a module variable, so deep code can phrase errors without threading
a language argument through every call. The program's entry point chooses it
before importing the commands, whose --help texts are built on import.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from attncli.errors import fail
from attncli.i18n import en, es

CATALOGUES: dict[str, Mapping[str, str]] = {"en": en.MESSAGES, "es": es.MESSAGES}
LANGUAGES = tuple(CATALOGUES)
_current = "en"


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
            return code if code in CATALOGUES else "en"
    return "en"


def language_in_arguments(arguments: Sequence[str]) -> str | None:
    """The --lang value among command-line arguments, if it is a language we speak.

    Read before Typer parses anything: the help texts are built in this language
    when the commands are imported, and a usage error may stop parsing early.
    """
    for index, argument in enumerate(arguments):
        value = argument.partition("=")[2] if argument.startswith("--lang=") else None
        if argument == "--lang" and index + 1 < len(arguments):
            value = arguments[index + 1]
        if value in LANGUAGES:
            return value
    return None


def set_language(lang: str | None) -> str:
    """Use `lang`, or the environment's language when None; returns the one in use.

    An unknown `lang` is the user's mistake: the environment's language is kept, so
    the error that says so is already in a language the user reads.
    """
    global _current
    chosen = language_from_environment() if lang is None else lang.lower()
    if chosen not in CATALOGUES:
        _current = language_from_environment()
        raise fail("cli.bad_lang", name=lang, known=", ".join(LANGUAGES)).at(source="--lang")
    _current = chosen
    return _current


def current_language() -> str:
    return _current


def t(key: str, /, **params: object) -> str:
    """The message `key` in the current language, placeholders filled."""
    template = CATALOGUES[_current].get(key) or en.MESSAGES[key]
    return template.format(**params) if params else template
