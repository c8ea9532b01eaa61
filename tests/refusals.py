"""How a bad input must end, in both languages: exit 2, nothing on stdout, one line of at most 200 characters."""

from __future__ import annotations

from collections.abc import Callable

Run = Callable[..., tuple[int, str, str]]  # (*args, lang=) -> exit code, stdout, stderr


def refused(run: Run, args: list[str], message: str) -> str:
    """`run(*args)` refused with `message` in its one English line, and with one line in Spanish; that line."""
    for lang in ("en", "es"):
        code, stdout, stderr = run(*args, lang=lang)
        assert (code, stdout) == (2, ""), (lang, stderr)
        assert stderr.count("\n") == 1 and len(stderr.rstrip("\n")) <= 200, stderr
        assert lang == "es" or message in stderr, stderr
    return stderr
