"""Snippet processes on this machine: a forkserver with the heavy libraries loaded, and one process per task,
owned by the executor (this file runs in the build's process; the snippet process runs :mod:`.worker`).

Processes come from a *forkserver* that has already imported torch, numpy, matplotlib (and whatever the
plugin's ``preload`` option adds, e.g. ``torch._dynamo``, which the first optimiser step imports), so a
snippet starts in milliseconds instead of paying seconds of imports — yet every snippet gets a process of
its own. The executor starts that process itself (a ``Process`` and a pipe per task, not a pool), so

- a process that dies (a segfault, ``os._exit``, the OOM killer) is exactly its own snippet's failure, named
  with its exit code or signal; the snippets running beside it and queued after it are not touched;
- the task's timeout (:attr:`.types.Task.timeout`, the snippet's declared one) is enforced from outside too:
  the snippet process stops its Python code with SIGALRM at the timeout; a process still running
  ``KILL_GRACE`` seconds later (a hang in native code, a blocked or ignored signal) is killed here and the task
  fails naming its timeout;
- :meth:`LocalExecutor.abort` kills exactly the processes it started (Ctrl-C on serve, a failed build).

What to run when is the session's job (:mod:`transformer_book.book.session`); this module only runs it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import Future
from multiprocessing.connection import Connection
from multiprocessing.connection import wait as connection_wait
from typing import Sequence

from transformer_book.book.environment import default_workers
from transformer_book.book.execution.worker import run_in_pipe_process
from transformer_book.book.types import Executor, Outcome, SnippetError, Task

_CONTEXT: multiprocessing.context.BaseContext | None = None  # the one forkserver of this process (not a cache)
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


class LocalExecutor(Executor):
    """Runs each task in a fresh local process of its own, forked from the preloaded forkserver. The session
    submits at most ``workers`` tasks at a time."""

    def __init__(self, workers: int | None = None) -> None:
        self.workers = max(1, workers or default_workers())
        self._ctx = _context()
        self._lock = threading.Lock()
        self._processes: dict[Future, multiprocessing.process.BaseProcess] = {}
        self._aborted = False

    def submit(self, task: Task) -> Future:
        future: Future = Future()
        future.set_running_or_notify_cancel()
        receive, send = self._ctx.Pipe(duplex=False)
        process = self._ctx.Process(target=run_in_pipe_process, args=(task, send, os.getpid()),
                                    name=f"snippet {task.snippet}")
        with self._lock:
            if self._aborted:
                future.set_result(_failed(task, "stopped: the build was interrupted before it ran"))
                return future
            process.start()
            self._processes[future] = process
        send.close()  # the child holds the other end: when it dies, recv() sees EOF
        threading.Thread(target=self._watch, args=(task, process, receive, future), daemon=True,
                         name=f"watch {task.snippet}").start()
        return future

    def _watch(self, task: Task, process: multiprocessing.process.BaseProcess, receive: Connection,
               future: Future) -> None:
        """Wait for the task's outcome, its process's death or its deadline — whichever comes first."""
        started = time.monotonic()
        kill_at = None if task.kill_after is None else started + task.kill_after
        remaining = None if kill_at is None else max(0.0, kill_at - time.monotonic())
        ready = connection_wait([receive, process.sentinel], timeout=remaining)
        outcome: Outcome
        if not ready:  # past the deadline and still running: its SIGALRM did not stop it
            process.kill()
            outcome = _failed(task, f"SnippetTimeout: the snippet ran longer than its timeout of {task.timeout:g} s "
                                    f"and did not stop (killed after {time.monotonic() - started:.1f} s: a hang outside "
                                    "Python code, e.g. in a native library, or a blocked SIGALRM)")
        elif receive in ready or receive.poll(0):
            try:
                outcome = receive.recv()
            except (EOFError, OSError):  # the process ended without sending its outcome
                process.join(timeout=5)
                outcome = _failed(task, f"the snippet's process died while it ran ({_how_it_ended(process)})")
            except Exception as exc:  # noqa: BLE001 - an outcome that cannot be unpickled here
                outcome = _failed(task, f"the snippet's outcome could not be read: {type(exc).__name__}: {exc}")
        else:  # ended, and nothing was sent (even if a child of it holds the pipe)
            process.join(timeout=5)
            outcome = _failed(task, f"the snippet's process died while it ran ({_how_it_ended(process)})")
        receive.close()
        process.join(timeout=10)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)
        with self._lock:
            self._processes.pop(future, None)
        future.set_result(outcome)

    @staticmethod
    def outcome(task: Task, future: Future) -> Outcome:
        return future.result()

    def processes(self) -> list[multiprocessing.process.BaseProcess]:
        """The snippet processes running now."""
        with self._lock:
            return list(self._processes.values())

    def close(self) -> None:
        """After the last task: nothing is left running (each watcher joined its process)."""
        with self._lock:
            processes = list(self._processes.values())
        for process in processes:
            process.join()

    def abort(self) -> None:
        """Kill every running snippet process now and start no more (a Ctrl-C must not wait for a training)."""
        with self._lock:
            self._aborted = True
            processes = list(self._processes.values())
        for process in processes:
            process.kill()
        for process in processes:
            process.join(timeout=5)


def _failed(task: Task, message: str) -> Outcome:
    return Outcome(snippet=task.snippet, error=SnippetError(message, task.path, 0, ""))


def _how_it_ended(process: multiprocessing.process.BaseProcess) -> str:
    code = process.exitcode
    if code is None:
        return "it is still running"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
