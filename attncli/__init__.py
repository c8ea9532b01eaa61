"""attncli: the attention mechanism of Transformers, calculated step by step.

`from attncli import attention` gives the blocked numpy kernel (see attncli.kernel);
it is imported lazily so that the command line starts without numpy.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__", "attention"]


def __getattr__(name: str) -> object:
    if name == "attention":
        from attncli.kernel import attention

        return attention
    raise AttributeError(f"module 'attncli' has no attribute {name!r}")
