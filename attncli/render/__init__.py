"""One renderer per output format, each reading the `Steps` record.

`human` lays out Rich renderables (formats rich and text); `document` returns the
text or bytes of every other format. Renderer modules are imported on demand.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attncli.core import Steps

HUMAN_FORMATS = ("rich", "text")
DOCUMENT_FORMATS = ("json", "csv", "tsv", "npy")
BINARY_FORMATS = ("npy",)


def document(steps: Steps, fmt: str) -> str | bytes:
    """The whole output in format `fmt`, one of DOCUMENT_FORMATS."""
    if fmt == "json":
        from attncli.render import json_doc

        return json_doc.render(steps)
    if fmt in ("csv", "tsv"):
        from attncli.render import long_table

        return long_table.render(steps, delimiter="," if fmt == "csv" else "\t")
    if fmt == "npy":
        import numpy as np

        buffer = io.BytesIO()
        np.save(buffer, steps.output, allow_pickle=False)
        return buffer.getvalue()
    raise ValueError(f"no renderer for {fmt!r}")
