"""Matrices stored in files: `.npy`, `.npz` (with a key) and `.csv`, for inputs too large for YAML."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from attncli.errors import fail


def load(path: Path, key: object = None) -> np.ndarray:
    """A finite 2-D float array from `path`; pickled objects are never loaded."""
    suffix = path.suffix.lower()
    if not path.is_file():
        raise fail("arrays.missing", path=str(path))
    try:
        if suffix == ".npy":
            array = np.load(path, allow_pickle=False)
        elif suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                names = list(archive.keys())
                if key is None and len(names) == 1:
                    key = names[0]
                if key not in names:
                    raise fail("arrays.npz_key", path=str(path), key=key, names=", ".join(names))
                array = archive[str(key)]
        elif suffix in (".csv", ".tsv", ".txt"):
            array = np.loadtxt(path, delimiter="\t" if suffix == ".tsv" else ",", dtype=np.float64, ndmin=2)
        else:
            raise fail("arrays.unknown_format", path=str(path))
    except (ValueError, OSError, EOFError) as error:
        raise fail(
            "arrays.unreadable", path=str(path), reason=str(error).splitlines()[0] if str(error) else ""
        ) from None
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.size == 0:
        raise fail("arrays.not_matrix", path=str(path), shape="×".join(map(str, array.shape)))
    if not np.issubdtype(array.dtype, np.number) or np.iscomplexobj(array):
        raise fail("arrays.not_numbers", path=str(path), dtype=str(array.dtype))
    if not np.isfinite(array).all():
        raise fail("arrays.not_finite", path=str(path))
    return array


def load_flag(value: str, base: Path) -> np.ndarray:
    """A flag's `@path` or `@archive.npz:key` value."""
    text = value[1:]
    name, _, key = text.partition(":") if ".npz:" in text else (text, "", "")
    return load(base / name, key or None)
