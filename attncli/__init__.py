"""attncli: the attention mechanism of Transformers, calculated step by step.

The library's front door is attncli.pipeline: `load` a problem, `solve` it, `grade` answers
to it, or run the blocked `attention` kernel and its backward pass, `attention_backward`. They
are imported lazily, so that the command line starts without numpy.
"""

from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["__version__", "attention", "attention_backward", "grade", "load", "solve"]
_PIPELINE = ("attention", "attention_backward", "grade", "load", "solve")


def __getattr__(name: str) -> object:
    if name in _PIPELINE:
        from attncli import pipeline

        return getattr(pipeline, name)
    raise AttributeError(f"module 'attncli' has no attribute {name!r}")
