"""The threads the blocked kernels share (attncli.kernel, attncli.kernel_backward): a call's blocks taken by
whichever thread is free, helper threads kept between calls, and BLAS held to one thread meanwhile.

numpy lets go of the GIL inside its matrix products and ufuncs, so one thread computes e^s while
another multiplies; BLAS at one thread (threadpoolctl) keeps the cores from being asked for twice over.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from threadpoolctl import LibController


class Call:
    """One call's blocks, taken by whichever thread is free (the caller's and any helpers'), in `order`
    (with a causal mask the widest first: the last block to finish is then a narrow one, and no core waits long).

    Each block is `run(*block, scratch)`, with the thread's own scratch buffers, made once per thread.
    A block that fails is recorded and no block after it in `blocks` is started; the first failing
    block's error is raised, whichever thread met it, so the message does not depend on scheduling.
    """

    def __init__(
        self,
        blocks: list[tuple],
        run: Callable[..., None],
        scratch: Callable[[], object],
        order: list[int] | None = None,
    ) -> None:
        self._blocks = ((position, blocks[position]) for position in (order or range(len(blocks))))
        self._first_failure = len(blocks)
        self._run = run
        self._scratch = scratch
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._open = True
        self._helping = 0
        self._failures: list[tuple[int, Exception]] = []

    def work(self) -> None:
        buffers = None
        while True:
            with self._lock:
                task = next(self._blocks, None) if self._open else None
                if task is not None and task[0] > self._first_failure:
                    continue  # an earlier block has failed: its error is the one raised
            if task is None:
                return
            position, block = task
            if buffers is None:
                buffers = self._scratch()
            try:
                self._run(*block, buffers)
            except Exception as error:  # anything else (Ctrl-C) propagates at once
                with self._lock:
                    self._failures.append((position, error))
                    self._first_failure = min(self._first_failure, position)

    def help(self) -> None:
        """A helper thread's share; nothing if the call has already closed."""
        with self._lock:
            if not self._open:
                return
            self._helping += 1
        try:
            self.work()
        finally:
            with self._lock:
                self._helping -= 1
                self._idle.notify_all()

    def close(self) -> None:
        """No block starts after this; returns when the helpers' blocks are done."""
        with self._lock:
            self._open = False
            while self._helping:
                self._idle.wait()

    def raise_first_failure(self) -> None:
        if self._failures:
            raise min(self._failures, key=lambda failure: failure[0])[1]


class _Pool:
    """Helper threads kept between calls: starting a thread costs more than a small block.

    They wait on a queue of calls and are daemons, so they never hold up the interpreter's
    exit; a forked child starts with none.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: queue.SimpleQueue[Call] = queue.SimpleQueue()
        self._size = 0

    def lend(self, call: Call, helpers: int) -> None:
        with self._lock:
            for _ in range(self._size, helpers):
                threading.Thread(target=self._serve, args=(self._calls,), name="attncli-kernel", daemon=True).start()
            self._size = max(self._size, helpers)
        for _ in range(helpers):
            self._calls.put(call)

    @staticmethod
    def _serve(calls: queue.SimpleQueue[Call]) -> None:
        while True:
            calls.get().help()


def cores() -> int:
    """The cores this process may run on (its affinity where the system says, else all)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


class _BlasThreads:
    """BLAS at one thread while any call here runs threads of its own; restored when the last one ends.

    threadpoolctl is imported on first use, so `import attncli` stays cheap; the BLAS libraries it
    finds (a scan of the loaded libraries) are kept, and their thread counts set directly: its
    `limit()` takes 0.1 ms a call, as long as the whole of attention at n = 64.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._libraries: list[LibController] | None = None
        self._before: list[tuple[LibController, int]] = []

    @contextmanager
    def one(self) -> Iterator[None]:
        with self._lock:
            if self._users == 0:
                if self._libraries is None:
                    from threadpoolctl import ThreadpoolController

                    self._libraries = ThreadpoolController().select(user_api="blas").lib_controllers
                self._before = [(library, library.get_num_threads()) for library in self._libraries]
                for library, _ in self._before:
                    library.set_num_threads(1)
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if self._users == 0:
                    for library, threads in self._before:
                        library.set_num_threads(threads)


_BLAS = _BlasThreads()
_POOL = _Pool()


def run(call: Call, helpers: int | None) -> None:
    """`call`'s blocks on this thread and `helpers` of the pool's threads, BLAS held at one thread meanwhile
    (None: on this thread alone, BLAS left as it is); then the first failing block's error, if any."""
    if helpers is None:
        call.work()
    else:
        with _BLAS.one():
            _POOL.lend(call, helpers)
            try:
                call.work()
            finally:
                call.close()
    call.raise_first_failure()


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS at one thread inside, for small products: waking OpenBLAS's threads costs more than
    a product of a few rows, and on a loaded machine a 0.1 ms product then takes 0.5 s."""
    with _BLAS.one():
        yield


def _after_fork() -> None:
    """A forked child has only the thread that forked: no helpers, and locks that nobody holds."""
    global _BLAS, _POOL
    _BLAS, _POOL = _BlasThreads(), _Pool()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)
