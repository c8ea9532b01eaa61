"""One renderer per output format, each reading the `Steps` record.

`human` lays out styled lines (formats rich and text); `document` returns the
text or bytes of every other format. Renderer modules are imported on demand.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attncli.core import Steps
    from attncli.probes import Intervention, Norms

HUMAN_FORMATS = ("rich", "text")
DOCUMENT_FORMATS = ("json", "csv", "tsv", "npy", "markdown", "latex")
BINARY_FORMATS = ("npy",)
MAX_DOCUMENT_CELLS = 2_000_000  # (query, key) cells over all heads that text formats print, a few at each


def document(
    steps: Steps,
    fmt: str,
    *,
    precision: int = 4,
    follow: tuple[str, ...] | None = None,
    norms: Norms | None = None,
    interventions: Sequence[Intervention] = (),
) -> str | bytes:
    """The whole output in format `fmt`, one of DOCUMENT_FORMATS.

    `precision` and `follow` shape the write-ups (markdown, latex); `norms` and
    `interventions` join the JSON document when they were asked for.
    """
    if fmt == "json":
        from attncli.render import json_doc

        return json_doc.render(steps, norms, interventions)
    if fmt in ("csv", "tsv"):
        from attncli.render import long_table

        return long_table.render(steps, delimiter="," if fmt == "csv" else "\t")
    if fmt == "npy":
        import numpy as np

        buffer = io.BytesIO()
        np.save(buffer, steps.output, allow_pickle=False)
        return buffer.getvalue()
    if fmt in ("markdown", "latex"):
        from attncli.render import latex, markdown

        return (markdown if fmt == "markdown" else latex).render(steps, precision, follow)
    raise ValueError(f"no renderer for {fmt!r}")
