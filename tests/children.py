"""Child processes that a test signals, started as a job in the background starts them.

A shell starting a job in the background (`nohup … &`, some CI runners) starts it with SIGINT
ignored, and an ignored signal stays ignored across fork and exec: Python then installs no
KeyboardInterrupt handler, and a child sent SIGINT (or Ctrl-C typed on its terminal) never
hears it. Each test that signals a child starts it inside `as_in_the_background()`, whatever
the shell running pytest did, and gives it `sigint_by_default` to run before attncli starts.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def as_in_the_background() -> Iterator[None]:
    """SIGINT ignored in this process meanwhile (what a child started inside inherits), then restored."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def sigint_by_default() -> None:
    """In the child, before attncli starts: SIGINT back to its default, so Python turns it into KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
