"""In a Dask worker process: run one task of the build in a snippet process forked by this worker's zygote.

The build submits :func:`run_on_worker` (:mod:`.dask_executor`, in the build's process). Here, on the worker, it

1. compares the worker with the build (:mod:`.identity`: versions, Python, every project source) and refuses,
   naming what differs, before running anything;
2. fetches the artifacts of the snippets it requires from the shared cache into a temporary folder, verified
   as the build verifies them (right hash, data only, :func:`.cache.fetch_blob`) — artifacts travel through
   the cache, never through the scheduler;
3. runs the snippet in a process of its own (:func:`run_in_snippet_process`), forked from the worker's
   preloaded zygote (:class:`Zygote`, the process of :mod:`.zygote`), with the build's numerical settings, and
   kills that process when the build is stopped or when it is still running ``KILL_GRACE`` seconds past the
   task's timeout;
4. puts the artifacts it produced into the shared cache, and returns the results.

A Dask worker is a daemon process, and daemon processes may not start ``multiprocessing`` children; so the
worker starts one preloaded interpreter with ``subprocess`` (the zygote), which forks a process per snippet that
starts with torch, numpy and matplotlib loaded, as a local one does. If the snippet process dies before handing
back its outcome, :class:`ProcessDied` is raised — Dask retries the task once (``retries=1``).

The task goes in and the outcome comes out as pickles through a private temporary folder, between processes of
the same user on the same machine; nothing read from a shared cache is ever unpickled.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from transformer_book.book.environment import NUMERICAL_VARIABLES
from transformer_book.book.execution.identity import differences, identity
from transformer_book.book.files import ENGINE_DIR, FileHasher, atomic_write_bytes
from transformer_book.book.storage.cache import Cache, fetch_blob, snippet_dir
from transformer_book.book.storage.store import open_store
from transformer_book.book.types import KILL_GRACE, Outcome, SnippetError, Task

_HASHER = FileHasher()  # a worker process hashes each project file once while it does not change
POLL_SECONDS = 0.5
ZYGOTE_MODULE = "transformer_book.book.execution.zygote"

# Set by Dask's nanny in every worker (``distributed.nanny.pre-spawn-environ``) so that the worker gives freed
# memory back to the system: glibc then trims its heap above 64 KiB on every free. A training allocates and
# frees tensors of that size at every step, so a snippet that inherited it ran each step about 1.35 × slower.
# A snippet process gets the allocator a local one has.
NOT_INHERITED = ("MALLOC_TRIM_THRESHOLD_",)

LOST = -1_000  # the exit code of a snippet process whose zygote died before it could report it


class ProcessDied(RuntimeError):
    """The process running a snippet ended without an outcome (killed, out of memory, ``os._exit``)."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message, output)
        self.message, self.output = message, output  # output: the last lines it printed

    def __str__(self) -> str:
        return self.message


# -- the task ----------------------------------------------------------------------------------------------------

def failed(task: Task, message: str, detail: str = "") -> Outcome:
    """The outcome of a task that failed outside the snippet (the worker, the cluster), naming the snippet's file."""
    rel = Path(task.path)
    root = Path(task.project_root)
    where = rel.relative_to(root).as_posix() if rel.is_relative_to(root) else task.path
    return Outcome(snippet=task.snippet, error=SnippetError(message, where, 0, detail))


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return socket.gethostname()


def run_on_worker(task: Task, cache_location: str, build: dict[str, str], settings: dict[str, str],
                  stop_event: str = "") -> Outcome:
    """The Dask task: check the worker, fetch what the snippet requires, run it fresh, share what it made.
    ``stop_event`` names a Dask ``Event`` that the build sets when it is stopped: the snippet's process is then
    killed (cancelling a Dask task does not interrupt the thread running it)."""
    mismatch = differences(build, identity(Path(task.project_root), _HASHER))
    if mismatch:
        more = f" (and {len(mismatch) - 10} more)" if len(mismatch) > 10 else ""
        return failed(task, f"{task.snippet} cannot run on worker {_worker_name()}: it differs from the build "
                            f"machine — " + "; ".join(mismatch[:10]) + more)
    storage = open_store(cache_location)
    with tempfile.TemporaryDirectory(prefix="book-blobs-") as tmp:
        requires = []
        for sid, name, file in task.requires:
            sha = Path(file).name
            local = Path(tmp) / "in" / snippet_dir(sid) / sha
            if not local.is_file():
                data = fetch_blob(storage, Cache.blob_key(sid, sha), sha)
                if data is None:
                    return failed(task, f"{task.snippet} requires the artifact {name!r} of {sid}, which is missing "
                                        f"or damaged in the shared cache {cache_location}")
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(data)
            requires.append((sid, name, str(local)))
        out_dir = Path(tmp) / "out"
        outcome = run_in_snippet_process(dataclasses.replace(task, blob_dir=str(out_dir), requires=tuple(requires)),
                                         settings, _stop_signal(stop_event))  # ProcessDied: Dask retries once
        if outcome.error is None:
            for sha in outcome.artifacts.values():
                key = Cache.blob_key(task.snippet, sha)
                if not storage.exists(key):
                    storage.put(key, (out_dir / sha).read_bytes())
    return outcome


def _stop_signal(name: str) -> Callable[[], bool]:
    """``should_stop`` for the snippet's process: whether the build set the Dask ``Event`` ``name``."""
    if not name:
        return lambda: False
    from distributed import Event

    event = Event(name)

    def should_stop() -> bool:
        try:
            return event.is_set()
        except Exception:  # noqa: BLE001 - the scheduler is gone: so is the build
            return True

    return should_stop


# -- the snippet process -----------------------------------------------------------------------------------------

def run_in_snippet_process(task: Task, settings: dict[str, str],
                           should_stop: Callable[[], bool] = lambda: False) -> Outcome:
    """Run ``task`` in a process of its own (forked by the worker's zygote, which runs with the numerical
    ``settings``); its Outcome, or :class:`ProcessDied`.

    The process is killed (its whole session) when ``should_stop()`` turns true — the build was stopped, so the
    Dask task was cancelled, and Dask cannot interrupt the thread that waits here — and when it is still running
    ``KILL_GRACE`` seconds after the task's timeout (a hang that the snippet's own SIGALRM cannot stop)."""
    with tempfile.TemporaryDirectory(prefix="book-task-") as tmp:
        task_file, out_file, log_file = Path(tmp) / "task.pickle", Path(tmp) / "outcome.pickle", Path(tmp) / "output.txt"
        status_file = Path(tmp) / "status"
        atomic_write_bytes(task_file, pickle.dumps(task))
        started = time.monotonic()
        child = ZYGOTE.fork(task_file, out_file, log_file, status_file, settings)
        stopped = ""
        try:
            while (returncode := child.wait(POLL_SECONDS)) is None:
                if should_stop():
                    stopped = "stopped: the build was interrupted while it ran"
                elif task.kill_after is not None and time.monotonic() - started > task.kill_after:
                    stopped = (f"SnippetTimeout: the snippet ran longer than its timeout of {task.timeout:g} s and did "
                               f"not stop (killed after {time.monotonic() - started:.1f} s: a hang outside Python "
                               "code, e.g. in a native library, or a blocked SIGALRM)")
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


# -- the zygote, seen from the worker ----------------------------------------------------------------------------

def _engine_state() -> tuple[tuple[str, int, int], ...]:
    """(file, mtime, size) of every engine source: a saved engine file means a new zygote."""
    out = []
    for p in sorted(ENGINE_DIR.rglob("*.py")):
        try:
            st = p.stat()
        except OSError:
            continue
        out.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(out)


class Child:
    """A snippet process forked by the zygote (not this process's child: its exit code comes as a file)."""

    def __init__(self, pid: int, status_file: Path, zygote: subprocess.Popen[bytes]) -> None:
        self.pid, self.status_file, self.zygote = pid, status_file, zygote

    def poll(self) -> int | None:
        """Its exit code (negative: killed by that signal; :data:`LOST`: ended with its zygote), or None while
        it runs."""
        try:
            return int(self.status_file.read_text(encoding="ascii"))
        except (OSError, ValueError):
            pass
        if self.zygote.poll() is None:
            return None
        # The zygote died (the snippet killed it, or it ran out of memory): the snippet ends with it, and is
        # reaped by whoever adopts it — a zombie no one reaps has ended too.
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return LOST
        return LOST if state in ("Z", "X") else None

    def wait(self, timeout: float, step: float = 0.02) -> int | None:
        end = time.monotonic() + timeout
        while (code := self.poll()) is None and time.monotonic() < end:
            time.sleep(step)
        return code


class Zygote:
    """Starts this worker's zygote when needed (:mod:`.zygote`) and asks it for snippet processes (thread-safe).

    Protocol, on the zygote's stdin/stdout (one line each way per snippet): this side writes the JSON of
    ``{"task": file, "outcome": file, "log": file, "status": file}``; the zygote forks, answers the child's pid,
    and when the child ends writes its exit code (negative: the signal) to ``status``. The zygote is replaced when
    the build's numerical settings or any engine source file differ from its start; the old one lets the
    snippets it started finish, then ends. When this worker dies, the zygote ends at once, and its snippets with
    it (:func:`.lifetime.end_with`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._errors: Any = None
        self._key: tuple[object, ...] = ()

    def fork(self, task_file: Path, out_file: Path, log_file: Path, status_file: Path,
             settings: dict[str, str]) -> Child:
        key = (tuple(sorted(settings.items())), _engine_state())
        request = json.dumps({"task": str(task_file), "outcome": str(out_file), "log": str(log_file),
                              "status": str(status_file)}) + "\n"
        with self._lock:
            for _ in (1, 2):  # a zygote that died (killed, out of memory) is started again, once
                if self._proc is None or self._proc.poll() is not None or key != self._key:
                    self._start(settings, key)
                assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
                try:
                    self._proc.stdin.write(request.encode())
                    self._proc.stdin.flush()
                    answer = self._proc.stdout.readline()
                except (BrokenPipeError, OSError):
                    answer = b""
                if answer.strip().isdigit():
                    return Child(int(answer), status_file, self._proc)
                self._stop()
        raise RuntimeError("the worker's preloaded snippet starter (zygote) could not start a process: "
                           + (self._said() or "it ended without a word"))

    def _start(self, settings: dict[str, str], key: tuple[object, ...]) -> None:
        if self._proc is not None and self._proc.poll() is None and self._proc.stdin is not None:
            self._proc.stdin.close()  # retired: it lets the snippets it started finish, then ends
        self._proc = None
        if self._errors is not None:
            self._errors.close()
        env = {k: v for k, v in os.environ.items() if k not in NUMERICAL_VARIABLES and k not in NOT_INHERITED}
        env.update(settings)
        self._errors = tempfile.TemporaryFile()  # what it says if it cannot start (an import that fails)
        self._proc = subprocess.Popen([sys.executable, "-m", ZYGOTE_MODULE], env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._errors, start_new_session=True)
        self._key = key

    def _said(self) -> str:
        if self._errors is None:
            return ""
        self._errors.seek(0)
        return self._errors.read().decode(errors="replace").strip()[-2000:]

    def _stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()  # its snippet processes end with it (:func:`.lifetime.end_with`)
            self._proc.wait()
        self._proc = None


ZYGOTE = Zygote()  # one per worker process
