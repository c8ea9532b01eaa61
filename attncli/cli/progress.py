"""A progress bar on stderr for the few commands that can run for seconds (`attncli scaling`).

Only on a terminal: a pipe or a log file gets nothing, so scripts still see one line of
stderr or none. The bar is transient: once the work ends it is erased, and stdout is untouched.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from attncli.cli.environment import Environment

# Work (in the caller's steps) below which no bar is shown; with `probes.scaling_work`'s steps of
# about 40 ns, 2^25 of them take about a second.
QUIET_WORK = 1 << 25


@contextlib.contextmanager
def bar(total: int, label: str, env: Environment) -> Iterator[Callable[[int], None]]:
    """A function to report steps done, drawing a bar out of `total` on stderr when it is a long run on a terminal."""
    if total < QUIET_WORK or not env.stderr_is_terminal:
        yield lambda done: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeRemainingColumn

    columns = (TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=env.stderr), transient=True) as progress:
        task = progress.add_task(label, total=total)
        yield lambda done: progress.advance(task, done)
