"""One snippet in a fresh Python interpreter started by ``subprocess`` (where a forkserver cannot be used).

A Dask worker is a daemon process, and daemon processes may not start ``multiprocessing`` children; so a
cluster task starts a new interpreter instead (two or three seconds more per snippet than a forked one).

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
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from transformer_book.book.environment import NUMERICAL_VARIABLES
from transformer_book.book.execution.lifetime import end_with
from transformer_book.book.types import Outcome, SnippetError, Task


class ProcessDied(RuntimeError):
    """The process running a snippet ended without an outcome (killed, out of memory, ``os._exit``)."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message, output)
        self.message, self.output = message, output  # output: the last lines it printed

    def __str__(self) -> str:
        return self.message


def _describe(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit status {returncode}"


# Set by Dask's nanny in every worker (``distributed.nanny.pre-spawn-environ``) so that the worker gives freed
# memory back to the system: glibc then trims its heap above 64 KiB on every free. A training allocates and
# frees tensors of that size at every step, so a snippet that inherited it ran each step about 1.35 × slower
# (the cluster's whole book took 1.2–1.9 × as long per snippet as the local pool). A snippet process gets the
# allocator a local one has.
NOT_INHERITED = ("MALLOC_TRIM_THRESHOLD_",)
KILL_GRACE = 5.0  # as for a local snippet process: seconds past its announced timeout before it is killed
POLL_SECONDS = 0.5


def run_in_fresh_process(task: Task, settings: dict[str, str],
                         should_stop: Callable[[], bool] = lambda: False) -> Outcome:
    """Run ``task`` in a new interpreter with the numerical ``settings``; its Outcome, or :class:`ProcessDied`.

    The child is killed (its whole session) when ``should_stop()`` turns true — the build was stopped, so the
    Dask task was cancelled, and Dask cannot interrupt the thread that waits here — and when it is still running
    ``KILL_GRACE`` seconds after the timeout it announced (a hang SIGALRM cannot stop)."""
    with tempfile.TemporaryDirectory(prefix="book-task-") as tmp:
        task_file, out_file, log_file = Path(tmp) / "task.pickle", Path(tmp) / "outcome.pickle", Path(tmp) / "output.txt"
        deadline_file = Path(tmp) / "deadline"
        task_file.write_bytes(pickle.dumps(task))
        env = {k: v for k, v in os.environ.items() if k not in NUMERICAL_VARIABLES and k not in NOT_INHERITED}
        env.update(settings)
        started = time.monotonic()
        with open(log_file, "wb") as log:
            proc = subprocess.Popen([sys.executable, "-m", __name__, str(task_file), str(out_file), str(deadline_file)],
                                    env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            stopped = ""
            try:
                while True:
                    try:
                        returncode = proc.wait(timeout=POLL_SECONDS)
                        break
                    except subprocess.TimeoutExpired:
                        pass
                    if should_stop():
                        stopped = "stopped: the build was interrupted while it ran"
                    else:
                        limit = _announced(deadline_file)
                        if limit and time.monotonic() - started > limit + KILL_GRACE:
                            stopped = (f"SnippetTimeout: the snippet ran longer than its timeout of {limit:g} s and did "
                                       f"not stop (killed after {time.monotonic() - started:.1f} s: a hang outside "
                                       "Python code, e.g. in a native library, or a blocked SIGALRM)")
                    if stopped:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        return Outcome(snippet=task.snippet, error=SnippetError(stopped, task.path, 0, ""))
            finally:
                if proc.poll() is None:  # this thread was interrupted: take the snippet's process with it
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
        if out_file.is_file():
            outcome: Outcome = pickle.loads(out_file.read_bytes())
            return outcome
        output = log_file.read_text(encoding="utf-8", errors="replace").strip()[-2000:]
        raise ProcessDied(f"the process running {task.snippet} died ({_describe(returncode)})", output)


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
        on_deadline(lambda seconds: Path(deadline_file).write_text(f"{seconds:g}", encoding="ascii"))

    task: Task = pickle.loads(Path(task_file).read_bytes())
    outcome = run_snippet(task)
    tmp = Path(out_file).with_suffix(".tmp")
    tmp.write_bytes(pickle.dumps(outcome))
    tmp.replace(out_file)  # whole or absent


if __name__ == "__main__":
    main(*sys.argv[1:4])
