"""What `attncli compute` leaves out of its start-up, so that it cannot come back unnoticed (issue 14, target 3).

Times are too noisy for a test; what is imported and what is built at import time is not.
"""

from __future__ import annotations

import dataclasses
import inspect

from attncli import problem
from attncli.render import walk


def _classes(module: object) -> list[type]:
    return [value for value in vars(module).values() if inspect.isclass(value) and value.__module__ == module.__name__]


def test_the_records_every_run_builds_are_named_tuples() -> None:
    """A frozen dataclass costs about ten times a NamedTuple to create (six methods compiled from source), and
    every run creates the problem's records and the walk's: only Score, which checks its kind, is a dataclass."""
    for module, allowed in ((problem, ["Score"]), (walk, [])):
        records = _classes(module)
        assert len(records) >= 8
        assert [record.__name__ for record in records if dataclasses.is_dataclass(record)] == allowed
        assert all(issubclass(record, tuple) for record in records if record.__name__ not in allowed)
