"""Where the tests find the repository and its samples."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"
# Samples with `layers:`: tests/test_layers.py runs them in every format that shows stacked layers.
STACK_SAMPLES = frozenset(path.name for path in SAMPLES.glob("layers*.yaml"))
ONE_LAYER_SAMPLES = sorted(path.name for path in SAMPLES.glob("*.yaml") if path.name not in STACK_SAMPLES)
