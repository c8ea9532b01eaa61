"""The memory budget: a problem (or an analysis of it) whose calculation would pass it is refused before it runs."""

from __future__ import annotations

import math

from attncli.errors import fail

# A problem whose calculation would need more than this is refused before any (L, S) matrix exists.
MEMORY_BUDGET = 4 * 2**30


def within_budget(needed: int, heads: int, queries: int, keys: int, source: str | None, layers: int = 1) -> None:
    """Refuse a run that would hold more than MEMORY_BUDGET bytes: the calculation (with `layers`, a stack's so far),
    or an analysis on top of it."""
    if needed > MEMORY_BUDGET:
        raise fail(
            "problem.too_large" if layers == 1 else "problem.too_large_layers",
            size=_size(needed),
            limit=_size(MEMORY_BUDGET),
            heads=heads,
            queries=queries,
            keys=keys,
            layers=layers,
        ).at(source=source)


def _size(count: float) -> str:
    """A number of bytes as people read them: 6.0 GiB."""
    units = ("KiB", "MiB", "GiB", "TiB")
    power = min(len(units), max(1, int(math.log(max(count, 1), 1024))))
    return f"{count / 1024**power:.1f} {units[power - 1]}"
