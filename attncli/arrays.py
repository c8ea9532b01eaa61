"""Matrices stored in files: `.npy`, `.npz` (with a key) and `.csv`, for inputs too large for YAML."""

from __future__ import annotations

import math
import warnings
import zipfile
from pathlib import Path

import numpy as np

from attncli.errors import fail

# An array file may hold at most this many bytes of float64 numbers, checked from its header
# before anything is read: a file's header can claim any shape, and a small .npz can
# decompress to terabytes. Larger inputs belong to the Python API (`from attncli import attention`).
MAX_ARRAY_BYTES = 2**30
MAX_TEXT_BYTES = 64 * 2**20  # a .csv/.tsv file, like a YAML file


def load(path: Path, key: object = None) -> np.ndarray:
    """A finite 2-D float array from `path`; pickled objects are never loaded."""
    suffix = path.suffix.lower()
    if not path.is_file():
        raise fail("arrays.missing", path=str(path))
    try:
        if suffix == ".npy":
            mapped = np.load(path, mmap_mode="r", allow_pickle=False)  # reads the header only
            _check_size(path, mapped.shape)
            array = np.array(mapped)
        elif suffix == ".npz":
            array = _member(path, key)
        elif suffix in (".csv", ".tsv", ".txt"):
            if path.stat().st_size > MAX_TEXT_BYTES:
                size = path.stat().st_size
                raise fail("arrays.too_large", path=str(path), size=_mib(size), limit=_mib(MAX_TEXT_BYTES))
            with warnings.catch_warnings():  # an empty file is reported below, not warned about
                warnings.simplefilter("ignore")
                array = np.loadtxt(path, delimiter="\t" if suffix == ".tsv" else ",", dtype=np.float64, ndmin=2)
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
    if not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
        raise fail("arrays.not_numbers", path=str(path), dtype=str(array.dtype))
    if not np.isfinite(array).all():
        raise fail("arrays.not_finite", path=str(path))
    return array


def _member(path: Path, key: object) -> np.ndarray:
    """The array `key` of an .npz archive (the only one when `key` is None), its size checked first."""
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
            version = np.lib.format.read_magic(stream)
            read_header = np.lib.format.read_array_header_1_0
            if version != (1, 0):
                read_header = np.lib.format.read_array_header_2_0
            shape, _, _ = read_header(stream)
        _check_size(path, shape)
        return archive[str(key)]


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
