"""Worker processes for snippets: a forkserver with the heavy libraries loaded, one fresh process per task.

Processes come from a *forkserver* that has already imported torch, numpy, matplotlib (and whatever the
plugin's ``preload`` option adds, e.g. ``torch._dynamo``, which the first optimiser step imports), so a
snippet starts in milliseconds instead of paying seconds of imports — yet every snippet gets a process of
its own. The scheduling (what to run when) is :mod:`.schedule`'s job; this module only starts processes.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Sequence

from transformer_book.book.environment import default_workers
from transformer_book.book.execution.lifetime import end_with
from transformer_book.book.execution.worker import run_snippet
from transformer_book.book.types import Outcome, SnippetError, Task

_CONTEXT: multiprocessing.context.BaseContext | None = None
_PRELOAD: list[str] = []


def configure(preload: Sequence[str]) -> None:
    """Modules the forkserver imports besides torch, numpy and matplotlib (before it first starts)."""
    _PRELOAD[:] = [m for m in preload if m]


def _context() -> multiprocessing.context.BaseContext:
    global _CONTEXT
    if _CONTEXT is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["transformer_book.book.execution.preload", *_PRELOAD,
                                        "transformer_book.book.execution.forkserver_exit"])
        else:  # pragma: no cover - not on Linux
            ctx = multiprocessing.get_context("spawn")
        _CONTEXT = ctx
    return _CONTEXT


def warm_up() -> None:
    """Start the forkserver (and its preloaded libraries) ahead of the first snippet run."""
    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


class LocalExecutor:
    """Runs tasks in fresh local processes, ``workers`` at a time."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or default_workers())
        self._pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=_context(), max_tasks_per_child=1,
                                         initializer=end_with, initargs=(os.getpid(),))

    def submit(self, task: Task) -> Future:
        return self._pool.submit(run_snippet, task)

    @staticmethod
    def outcome(task: Task, future: Future) -> Outcome:
        try:
            return future.result()
        except BrokenProcessPool as exc:
            return Outcome(snippet=task.snippet, error=SnippetError(f"worker process died: {exc}", task.path, 0, ""))

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def abort(self) -> None:
        """Cancel the queued tasks and kill the running ones (a Ctrl-C must not wait for a training).
        ``ProcessPoolExecutor`` has no public way to end its processes before Python 3.14
        (``terminate_workers``): its process table is read directly."""
        processes = list((getattr(self._pool, "_processes", None) or {}).values())  # None once shut down
        self._pool.shutdown(wait=False, cancel_futures=True)
        for p in processes:
            p.terminate()
        for p in processes:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
