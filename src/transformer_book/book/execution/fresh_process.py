"""One snippet in a process of its own on a Dask worker, forked from the worker's preloaded :mod:`.zygote`.

A Dask worker is a daemon process, and daemon processes may not start ``multiprocessing`` children; so the
worker starts one preloaded interpreter with ``subprocess`` (the zygote) and has it fork a process per snippet,
which starts with torch, numpy and matplotlib loaded, as a local one does.

The child runs :func:`.worker.run_snippet` exactly as a local worker does (seeds, threads, Matplotlib settings),
with the *build's* numerical settings (``BOOK_THREADS``, ``ATEN_CPU_CAPABILITY`` … of :mod:`.environment`)
whatever the worker's own environment says, so a result does not depend on where it ran. The child has a
session of its own (a snippet that signals its process group reaches only itself) and exits when the process
that started it dies, when the build is stopped, or when it runs well past its timeout. If the child dies
before handing back its outcome, :class:`ProcessDied` is raised — the caller decides whether to retry.

The task goes in and the outcome comes out as pickles through a private temporary folder, between two
processes of the same user on the same machine; nothing read from a shared cache is ever unpickled.
"""

from __future__ import annotations

import importlib
import os
import pickle
import signal
import tempfile
import time
from pathlib import Path
from typing import Callable

from transformer_book.book.execution.lifetime import end_with
from transformer_book.book.files import atomic_write_bytes, atomic_write_text
from transformer_book.book.execution.zygote import LOST, ZYGOTE
from transformer_book.book.types import Outcome, SnippetError, Task


class ProcessDied(RuntimeError):
    """The process running a snippet ended without an outcome (killed, out of memory, ``os._exit``)."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message, output)
        self.message, self.output = message, output  # output: the last lines it printed

    def __str__(self) -> str:
        return self.message


def _describe(returncode: int | None) -> str:
    if returncode is None:
        return "it did not end when killed"
    if returncode == LOST:
        return "its worker's snippet starter died with it"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


KILL_GRACE = 5.0  # as for a local snippet process: seconds past its announced timeout before it is killed
POLL_SECONDS = 0.5


def run_in_fresh_process(task: Task, settings: dict[str, str],
                         should_stop: Callable[[], bool] = lambda: False) -> Outcome:
    """Run ``task`` in a process of its own (forked by the worker's zygote, which runs with the numerical
    ``settings``); its Outcome, or :class:`ProcessDied`.

    The child is killed (its whole session) when ``should_stop()`` turns true — the build was stopped, so the
    Dask task was cancelled, and Dask cannot interrupt the thread that waits here — and when it is still running
    ``KILL_GRACE`` seconds after the timeout it announced (a hang SIGALRM cannot stop)."""
    with tempfile.TemporaryDirectory(prefix="book-task-") as tmp:
        task_file, out_file, log_file = Path(tmp) / "task.pickle", Path(tmp) / "outcome.pickle", Path(tmp) / "output.txt"
        deadline_file, status_file = Path(tmp) / "deadline", Path(tmp) / "status"
        atomic_write_bytes(task_file, pickle.dumps(task))
        started = time.monotonic()
        child = ZYGOTE.fork([str(task_file), str(out_file), str(deadline_file)], log_file, status_file, settings)
        stopped = ""
        try:
            while (returncode := child.wait(POLL_SECONDS)) is None:
                if should_stop():
                    stopped = "stopped: the build was interrupted while it ran"
                else:
                    limit = _announced(deadline_file)
                    if limit and time.monotonic() - started > limit + KILL_GRACE:
                        stopped = (f"SnippetTimeout: the snippet ran longer than its timeout of {limit:g} s and did "
                                   f"not stop (killed after {time.monotonic() - started:.1f} s: a hang outside "
                                   "Python code, e.g. in a native library, or a blocked SIGALRM)")
                if stopped:
                    _kill(child.pid)
                    child.wait(KILL_GRACE)
                    return Outcome(snippet=task.snippet, error=SnippetError(stopped, task.path, 0, ""))
        finally:
            if child.poll() is None:  # this thread was interrupted: take the snippet's process with it
                _kill(child.pid)
                child.wait(KILL_GRACE)
        if out_file.is_file():
            outcome: Outcome = pickle.loads(out_file.read_bytes())
            return outcome
        output = log_file.read_text(encoding="utf-8", errors="replace").strip()[-2000:]
        raise ProcessDied(f"the process running {task.snippet} died ({_describe(returncode)})", output)


def _kill(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)  # its session: the snippet and anything it started
    except ProcessLookupError:
        try:
            os.kill(pid, signal.SIGKILL)  # forked a moment ago, before it made its session
        except ProcessLookupError:
            pass


def _announced(deadline_file: Path) -> float:
    """The timeout the child announced (seconds from its start), 0 when none or when its code is over."""
    try:
        return float(deadline_file.read_text(encoding="ascii") or 0)
    except (OSError, ValueError):
        return 0.0


def main(task_file: str, out_file: str, deadline_file: str = "") -> None:
    end_with(os.getppid())  # nobody waits for this snippet once its worker is gone
    # What a local worker's forkserver has loaded, with the same thread settings (OMP_NUM_THREADS …).
    importlib.import_module(f"{__package__}.preload")
    from transformer_book.book.execution.worker import on_deadline, run_snippet

    if deadline_file:
        on_deadline(lambda seconds: atomic_write_text(Path(deadline_file), f"{seconds:g}"))

    task: Task = pickle.loads(Path(task_file).read_bytes())
    outcome = run_snippet(task)
    atomic_write_bytes(Path(out_file), pickle.dumps(outcome))  # the worker reads it: whole or absent

