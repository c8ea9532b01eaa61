"""The files a run reads, noted as they are opened, so that the run never writes over one of them.

A problem file, a homework, a teacher's key and every array file they name are noted by the
reader that opens them (attncli.yamldoc, attncli.arrays), by the file itself (device and inode,
links and hard links followed), while a run records them; the command line's outputs are then
checked against them (attncli.cli.output). The Python API records nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar

File = tuple[int, int]  # (st_dev, st_ino)

_READ: ContextVar[dict[File, str] | None] = ContextVar("attncli_inputs", default=None)


@contextlib.contextmanager
def recorded() -> Iterator[None]:
    """Note every file read inside the block (a run of the command line)."""
    token = _READ.set({})
    try:
        yield
    finally:
        _READ.reset(token)


def note(status: os.stat_result, name: str) -> None:
    """The file `status` describes (as opened, under `name`) is an input of the run being recorded."""
    read = _READ.get()
    if read is not None:
        read.setdefault((status.st_dev, status.st_ino), name)


def read() -> dict[File, str]:
    """The files noted so far (a copy), for a worker process to hand back to the run it grades for."""
    return dict(_READ.get() or {})


def noted(files: dict[File, str]) -> None:
    """Files read elsewhere for this run (by a worker process, `read`), noted as if read here."""
    found = _READ.get()
    if found is not None:
        for file, name in files.items():
            found.setdefault(file, name)


def reading(path: str) -> str | None:
    """The name under which the run read the file `path` is (links followed), or None: not an input, or no file."""
    read = _READ.get()
    if not read:
        return None
    try:
        status = os.stat(path)
    except (OSError, ValueError):  # no such file (a new output), or a name no file can have
        return None
    return read.get((status.st_dev, status.st_ino))
