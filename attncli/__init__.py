"""attncli: the attention mechanism of Transformers, calculated step by step."""

__version__ = "0.1.0"
