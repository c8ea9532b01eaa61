"""A class graded on every core: the files shared out to worker processes, their results handed back in the order
the files were given, each as soon as it and every file before it are graded.

Grading is Python's arithmetic more than numpy's, so threads would wait on each other: the workers are processes,
forked from this one once its keys are read and solved (they inherit them, and the run's language, without
copying). Each worker grades a chunk of files at a time and sends back small frozen results; the caller writes
each row as it comes, so memory stays flat however many files there are. The files a worker reads (a homework's
array files) are noted in this process too (attncli.inputs), so that no output of the run writes over one.

One job (or one file) grades in this process, exactly as attncli.grading.submissions.grade_file does.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from attncli import inputs
from attncli.errors import AttnError
from attncli.grading.submissions import Key, Options, Result, grade_file

MAX_JOBS = 256
# Files a worker takes at a time: at most CHUNK (a small file grades in about 1.2 ms of CPU; over 3,000 of them two
# workers took a quarter more CPU than one process with 8 a chunk, a twelfth more with 64), and at least four chunks
# a worker, so that a small class is shared evenly and the first rows come early
CHUNK = 64
Keys = Key | Mapping[str, Key] | None

Made = TypeVar("Made")
_WORK: tuple[Keys, Options, Callable[[AttnError], str], Callable[[Result], Any]] | None = None  # a worker's (inherited)


def cores() -> int:
    """The cores this process may run on (`--jobs`' default)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def each_graded(
    files: Sequence[str],
    keys: Keys,
    options: Options,
    describe: Callable[[AttnError], str],
    jobs: int = 1,
    then: Callable[[Result], Made] = lambda result: result,  # type: ignore[assignment,return-value]
) -> Iterator[Made]:
    """`then` of every file's result, in the order given, graded by `jobs` processes (1: in this one). A worker
    applies `then` itself: a gradebook's row is a few hundred bytes to send back, a whole report tens of kilobytes
    to pickle and unpickle (as long as grading it)."""
    jobs = min(jobs, len(files))
    if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():
        for file in files:
            yield then(grade_file(file, keys, options, describe))
        return
    global _WORK
    _WORK = (keys, options, describe, then)
    pool = multiprocessing.get_context("fork").Pool(jobs, initializer=_quiet)
    try:
        chunk = max(1, min(CHUNK, len(files) // (4 * jobs)))
        for made, read in pool.imap(_graded, files, chunksize=chunk):
            inputs.noted(read)
            yield made
        pool.close()  # every file graded: the workers end by themselves
    except BaseException:  # an error, Ctrl-C, or a reader that stopped early (| head)
        pool.terminate()
        raise
    finally:
        pool.join()
        _WORK = None


def _quiet() -> None:
    """A worker leaves Ctrl-C to the run, which ends it, and ends when it is told to (the run's own handlers would
    print a traceback from each worker, which would say nothing)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _graded(file: str) -> tuple[Any, dict[inputs.File, str]]:
    """In a worker: what is made of one file's result, and the files grading it read."""
    assert _WORK is not None
    keys, options, describe, then = _WORK
    with inputs.recorded():
        made = then(grade_file(file, keys, options, describe))
        return made, inputs.read()
