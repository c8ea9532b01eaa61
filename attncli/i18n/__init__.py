"""Every sentence a person reads comes from a catalogue here, one per language.

The language is chosen once per invocation (`--lang`, else the locale variables)
and kept in a module variable, so deep code can phrase errors without threading
a language argument through every call.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from attncli.i18n import en, es

CATALOGUES: dict[str, Mapping[str, str]] = {"en": en.MESSAGES, "es": es.MESSAGES}
LANGUAGES = tuple(CATALOGUES)
_current = "en"


def language_from_environment(environ: Mapping[str, str] = os.environ) -> str:
    """The first of LC_ALL, LC_MESSAGES, LANG that is set decides, as in gettext."""
    for variable in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(variable, "")
        if value:
            code = value.split("_")[0].split(".")[0].lower()
            return code if code in CATALOGUES else "en"
    return "en"


def set_language(lang: str | None) -> str:
    """Use `lang`, or the environment's language when None; returns the one in use."""
    global _current
    _current = lang if lang in CATALOGUES else language_from_environment()
    return _current


def current_language() -> str:
    return _current


def t(key: str, **params: object) -> str:
    """The message `key` in the current language, placeholders filled."""
    template = CATALOGUES[_current].get(key) or en.MESSAGES[key]
    return template.format(**params) if params else template
