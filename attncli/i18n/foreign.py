"""Sentences others write in English, said again in the run's language: Typer's usage errors, the
operating system's reasons, PyYAML's and zipfile's complaints.

Typer 0.28 carries its own copy of Click, whose messages are plain English f-strings (no
gettext to hook into), and `os.strerror` speaks the C locale. Each known sentence is
matched whole by its English pattern; its parts (an option, a value) are kept, and the
sentence is rephrased from the catalogue. English has the same keys, written as Typer
and the system write them, so a pattern that stops matching (a new Typer) shows the
original sentence rather than a wrong one, and tests/test_spanish.py says which.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Mapping

# Typer's usage errors, as format_message() gives them: a pattern and our catalogue key.
USAGE: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern, re.DOTALL), key)
    for pattern, key in (
        (r"No such option: (?P<name>\S+) \(Possible options: (?P<near>.+)\)", "usage.no_such_option_near"),
        (r"No such option: (?P<name>.+)", "usage.no_such_option"),
        (r"No such command '(?P<name>.*)'\. Did you mean (?P<near>.+)\?", "usage.no_such_command_near"),
        (r"No such command '(?P<name>.*)'\.", "usage.no_such_command"),
        (r"Missing argument '(?P<name>.+)'\.", "usage.missing_argument"),
        (r"Missing option '(?P<name>.+)'\.", "usage.missing_option"),
        (
            r"Invalid value for '(?P<name>.+?)': '(?P<value>.*)' is not a valid (?P<kind>int(?: range)?)\.",
            "usage.not_integer",
        ),
        (
            r"Invalid value for '(?P<name>.+?)': '(?P<value>.*)' is not a valid (?P<kind>float(?: range)?)\.",
            "usage.not_number",
        ),
        (
            r"Invalid value for '(?P<name>.+?)': (?P<value>.+) is not in the range (?P<range>\S+)\.",
            "usage.out_of_range",
        ),
        (r"Option '(?P<name>.+)' requires an argument\.", "usage.needs_value"),
        (r"Option '(?P<name>.+)' does not take a value\.", "usage.takes_no_value"),
        (r"Got unexpected extra argument\(s\) \((?P<args>.*)\)", "usage.extra_arguments"),
    )
)

# The reasons the system gives for a failed open, read or write (os.strerror), by errno name.
SYSTEM = (
    "ENOENT",
    "EACCES",
    "EPERM",
    "EISDIR",
    "ENOTDIR",
    "ENAMETOOLONG",
    "ENOSPC",
    "EROFS",
    "EEXIST",
    "ELOOP",
    "EBADF",
    "EIO",
    "ENXIO",
    "EINVAL",
    "EPIPE",
    "EFBIG",
    "EDQUOT",
)
REASONS: Mapping[str, str] = {
    os.strerror(getattr(errno, name)): f"os.{name}" for name in SYSTEM if hasattr(errno, name)
}

# PyYAML's problems (the first line of a YAMLError) and zipfile's, as patterns.
OTHERS: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), key)
    for pattern, key in (
        (r"did not find expected key", "foreign.yaml_expected_key"),
        (r"did not find expected (?P<first>'[^']*') or (?P<second>'[^']*')", "foreign.yaml_expected_either"),
        (r"(?:did|could) not find expected (?P<what>'[^']*'|<[^>]*>)", "foreign.yaml_expected"),
        (r"expected (?P<what>.+), but found (?P<found>.+)", "foreign.yaml_expected_found"),
        (r"found character (?P<what>'.*') that cannot start any token", "foreign.yaml_bad_start"),
        (r"found character that cannot start any token", "foreign.yaml_bad_start_any"),
        (r"unacceptable character (?P<what>#x[0-9a-fA-F]+): .*", "foreign.yaml_bad_character"),
        (r"mapping values are not allowed here", "foreign.yaml_mapping_here"),
        (r"found unexpected end of stream", "foreign.yaml_end"),
        (r"found unknown escape character (?P<what>.+)", "foreign.yaml_escape"),
        (r"File is not a zip file", "foreign.not_zip"),
    )
)
ERRNO = re.compile(r"\[Errno \d+\] (?P<reason>[^:]+)(?:: .*)?")  # str() of an OSError: the reason, then the path


def usage(message: str) -> tuple[str, dict[str, str]] | None:
    """The catalogue key and parts of one of Typer's usage errors, or None for a sentence we do not know."""
    return _match(USAGE, message)


def reason(text: str) -> tuple[str, dict[str, str]] | None:
    """The catalogue key and parts of a sentence the system, PyYAML or zipfile wrote, or None."""
    system = ERRNO.fullmatch(text)
    text = system.group("reason") if system else text
    if text in REASONS:
        return REASONS[text], {}
    return _match(OTHERS, text)


def _match(patterns: tuple[tuple[re.Pattern[str], str], ...], text: str) -> tuple[str, dict[str, str]] | None:
    for pattern, key in patterns:
        found = pattern.fullmatch(text)
        if found:
            return key, found.groupdict()
    return None
