"""Shared paths for the tests, and a fresh language for each test."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from attncli.i18n import set_language

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


@pytest.fixture(autouse=True)
def english() -> Iterator[None]:
    """The language is a module-level setting: start every test in English, whatever ran before."""
    set_language("en")
    yield
