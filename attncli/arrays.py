"""Matrices stored in files: `.npy`, `.npz` (with a key) and `.csv`, for inputs too large for YAML."""

from __future__ import annotations

import math
import re
import stat
import warnings
import zipfile
from pathlib import Path
from typing import IO

import numpy as np

from attncli import inputs
from attncli.errors import fail

# An array file may hold at most this many bytes of float64 numbers, checked from its header
# before anything is read: a file's header can claim any shape, and a small .npz can
# decompress to terabytes. Larger inputs belong to the Python API (`from attncli import attention`).
MAX_ARRAY_BYTES = 2**30
MAX_TEXT_BYTES = 64 * 2**20  # a .csv/.tsv file, like a YAML file


def load(path: Path, key: object = None) -> np.ndarray:
    """A finite 2-D float array from `path`, a regular file; pickled objects are never loaded.

    A FIFO or a device is refused without being opened (reading one could block or never end);
    a binary file's shape and dtype are checked from its header before its data is read; a text
    file's errors name the cell, never its content (a link to /etc/passwd must not print it).
    """
    suffix = path.suffix.lower()
    check_name(str(path))
    _check_regular(path)
    try:
        if suffix == ".npy":
            with open(path, "rb") as stream:
                _check_header(path, stream)
            array = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            array = _member(path, key)
        elif suffix in (".csv", ".tsv", ".txt"):
            array = _table(path, "\t" if suffix == ".tsv" else ",")
        else:
            raise fail("arrays.unknown_format", path=str(path))
    except (ValueError, OSError, EOFError, MemoryError, zipfile.BadZipFile) as error:
        raise fail(
            "arrays.unreadable", path=str(path), reason=str(error).splitlines()[0] if str(error) else ""
        ) from None
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.size == 0:
        raise fail("arrays.not_matrix", path=str(path), shape="×".join(map(str, array.shape)) or "()")
    if not np.isfinite(array).all():
        raise fail("arrays.not_finite", path=str(path))
    return array


def check_name(name: str) -> None:
    """Refuse a file name no file can have: one holding a NUL byte (the system would raise ValueError)."""
    if "\0" in name:
        raise fail("arrays.nul_in_name", path=name)


def _check_regular(path: Path) -> None:
    """Refuse what is not a regular file (symbolic links followed) before opening it; note it as an input."""
    try:
        status = path.stat()
    except FileNotFoundError:
        raise fail("arrays.missing", path=str(path)) from None
    except OSError as error:  # a name too long, a loop of links, a folder without permission
        raise fail("arrays.unreadable", path=str(path), reason=error.strerror or str(error)) from None
    if not stat.S_ISREG(status.st_mode):
        raise fail("arrays.not_regular", path=str(path))
    inputs.note(status, str(path))


def _check_header(path: Path, stream: IO[bytes]) -> None:
    """The shape and dtype an .npy header claims, checked before any data is read.

    Only real numbers are taken: integers, floats and booleans (read as 0 and 1); complex,
    dates, time spans (numpy counts them as integers), objects, text and records are refused.
    """
    version = np.lib.format.read_magic(stream)
    read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read(stream)
    if dtype.kind not in "biuf":
        raise fail("arrays.not_numbers", path=str(path), dtype=str(dtype))
    _check_size(path, shape)


def _member(path: Path, key: object) -> np.ndarray:
    """The array `key` of an .npz archive (the only one when `key` is None), its header checked first."""
    with np.load(path, allow_pickle=False) as archive:
        names = list(archive.keys())
        if key is None and len(names) == 1:
            key = names[0]
        if key is None:
            raise fail("arrays.npz_which", path=str(path), names=", ".join(names))
        if key not in names:
            raise fail("arrays.npz_key", path=str(path), name=key, names=", ".join(names))
        member = f"{key}.npy" if f"{key}.npy" in archive.zip.namelist() else str(key)
        with archive.zip.open(member) as stream:
            _check_header(path, stream)
        return archive[str(key)]


# numpy's reasons for refusing a table quote the text it could not read; only the cell is kept.
_NOT_A_NUMBER = re.compile(r"could not convert string .* at row (\d+), column (\d+)", re.DOTALL)
_RAGGED = re.compile(r"the number of columns changed from (\d+) to (\d+) at row (\d+)")


def _table(path: Path, delimiter: str) -> np.ndarray:
    """A .csv/.tsv/.txt file of numbers; an error names the row and column, not what is written there."""
    size = path.stat().st_size
    if size > MAX_TEXT_BYTES:
        raise fail("arrays.too_large", path=str(path), size=_mib(size), limit=_mib(MAX_TEXT_BYTES))
    try:
        with warnings.catch_warnings():  # an empty file is reported by `load`, not warned about
            warnings.simplefilter("ignore")
            return np.loadtxt(path, delimiter=delimiter, dtype=np.float64, ndmin=2, encoding="utf-8")
    except ValueError as error:
        if found := _NOT_A_NUMBER.search(str(error)):  # numpy counts rows from 0 here, columns from 1
            raise fail("arrays.not_a_number", path=str(path), row=int(found[1]) + 1, column=found[2]) from None
        if found := _RAGGED.search(str(error)):
            raise fail("arrays.ragged", path=str(path), row=found[3], count=found[2], expected=found[1]) from None
        raise fail("arrays.not_a_table", path=str(path)) from None


def _check_size(path: Path, shape: tuple[int, ...]) -> None:
    size = math.prod(shape) * np.dtype(np.float64).itemsize
    if size > MAX_ARRAY_BYTES:
        raise fail("arrays.too_large", path=str(path), size=_mib(size), limit=_mib(MAX_ARRAY_BYTES))


def _mib(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB"


def load_flag(value: str) -> np.ndarray:
    """A flag's `@path` or `@archive.npz:key` value, relative to the working directory."""
    text = value[1:]
    name, _, key = text.rpartition(":") if ".npz:" in text else (text, "", "")
    return load(Path(name), key or None)
