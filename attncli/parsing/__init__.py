"""From YAML documents (and command-line flags) to validated records: a `Problem`, its `Answers`.

`parse` here sends a document to the reader of its kind: problem_file.py assembles a single
problem from tokens, heads.py (Q, K, V and which field a head uses), scores.py (the score
function) and masks.py (causal, window, padding, 0/1 rows); layers.py a stack of layers, each
built as a single problem. fields.py reads typed values and says where a bad one sits, for every
input section; budget.py refuses a calculation too large for memory before it runs; answers.py
reads the `answers:` a student wrote against the calculation.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from attncli.problem import Problem, Stack
    from attncli.yamldoc import Document


def parse(
    document: Document,
    flags: Mapping[str, object] | None = None,
    base: Path | None = None,
    dtype: type[np.floating] = np.float64,
    confined: bool = False,
    results_only: bool = False,
) -> Problem | Stack:
    """Validate `document` with `flags` (field -> value, given on the command line) laid over it.

    Array files are found under `base` (with `confined`, only there); every matrix comes out as
    `dtype`, which the core computes in. A document with `layers:` is a stack of layers
    (attncli.parsing.layers), each a problem of its own. `results_only`: the caller needs the output
    alone (`pipeline.result`), so the memory budget is the blocked kernel's for dot-product heads
    without a bias.
    """
    from attncli.parsing.fields import FieldReader
    from attncli.parsing.problem_file import TOP_FIELDS, Builder

    data = document.data if document.data is not None else {}
    reader = FieldReader(document, dict(flags or {}), base, np.dtype(dtype), confined)
    if not isinstance(data, dict):
        raise reader.error((), "problem.not_mapping")
    data = {**data, **reader.flags}
    if "layers" in data:
        from attncli.parsing import layers

        return layers.read(reader, data)
    reader.check_fields(data, (), TOP_FIELDS)
    return Builder(reader, data, results_only and "bias" not in data).problem()


def base_folder(file: str | None) -> Path:
    """Where the array files a problem names are found: beside its file; for stdin or flags, the working directory."""
    return Path(file).parent if file not in (None, "-") else Path(".")
