"""Snippets on a Dask cluster: ``BOOK_EXECUTOR=dask://host:port``, or ``executor: dask://host:port`` in mkdocs.yml.

The build keeps its own scheduling (:mod:`.session`: a snippet is submitted when what it ``REQUIRES`` is done,
the longest critical path first); this executor runs each submitted task on the cluster, as many at once as the
cluster has worker threads. On the worker, a task

1. compares the worker with the build (:mod:`.identity`: versions, Python, every project source) and refuses,
   naming what differs, before running anything;
2. fetches the artifacts of the snippets it requires from the shared cache into a temporary folder, verified
   as the build verifies them (right hash, data only, :func:`.cache.fetch_blob`) — artifacts travel through
   the cache, never through the scheduler;
3. runs the snippet in a process of its own, forked from the worker's preloaded zygote (:mod:`.fresh_process`,
   :mod:`.zygote`), with the build's seeds and numerical settings, so a record does not depend on where its
   snippet ran;
4. puts the artifacts it produced into the shared cache, and returns the results (numbers, tables, SVG text).

The build then writes the entry (:meth:`.cache.Cache.store`), so an entry exists only for a whole, successful
run. A snippet process that dies is retried once (``retries=1``) on whichever worker is free; when the Dask
worker itself dies, the scheduler reruns the task (``distributed.scheduler.allowed-failures``, set it to 1 for
the same single retry). A second failure fails that snippet with a message naming it.

Every worker must reach the cache at the same location (a URL such as ``s3://bucket/prefix``, or a folder on a
shared file system mounted at the same path) and have the project checked out at the same path. Dask is needed
only here, and only when this executor is chosen: ``pip install 'dask[distributed]'``.
"""

from __future__ import annotations

import dataclasses
import socket
import tempfile
import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable

from mkdocs.exceptions import PluginError

from transformer_book.book.storage.cache import Cache, fetch_blob, snippet_dir
from transformer_book.book.environment import numerical_settings
from transformer_book.book.files import FileHasher
from transformer_book.book.execution.fresh_process import ProcessDied, run_in_fresh_process
from transformer_book.book.execution.identity import differences, identity
from transformer_book.book.storage.store import open_store
from transformer_book.book.types import Outcome, SnippetError, Task

INSTALL_HINT = "pip install 'dask[distributed]'"
_HASHER = FileHasher()  # a worker process hashes each project file once while it does not change


class ExecutorUnavailable(PluginError):
    """The chosen executor cannot be used (Dask missing, scheduler unreachable, no workers).

    A :class:`~mkdocs.exceptions.PluginError`, so ``mkdocs build`` stops with this message, not a traceback."""


def scheduler_address(executor: str) -> str:
    """``dask://host:port`` → ``tcp://host:port``."""
    if executor.startswith("dask://") and len(executor) > len("dask://"):
        return "tcp://" + executor[len("dask://"):]
    raise ExecutorUnavailable(f"unknown executor {executor!r}: use \"local\" or \"dask://host:port\"")


def _error(task: Task, message: str, detail: str = "") -> Outcome:
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
        return _error(task, f"{task.snippet} cannot run on worker {_worker_name()}: it differs from the build "
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
                    return _error(task, f"{task.snippet} requires the artifact {name!r} of {sid}, which is missing "
                                        f"or damaged in the shared cache {cache_location}")
                local.parent.mkdir(parents=True, exist_ok=True)
                local.write_bytes(data)
            requires.append((sid, name, str(local)))
        out_dir = Path(tmp) / "out"
        outcome = run_in_fresh_process(dataclasses.replace(task, blob_dir=str(out_dir), requires=tuple(requires)),
                                       settings, _stop_signal(stop_event))  # ProcessDied: Dask retries the task once
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


class DaskExecutor:
    """Runs tasks on the Dask cluster at ``executor`` (``dask://host:port``), sharing results through ``cache``."""

    def __init__(self, executor: str, cache: Cache, project_root: Path, workers: int = 0, timeout: float = 30) -> None:
        try:
            import distributed
        except ImportError:
            raise ExecutorUnavailable(f"BOOK_EXECUTOR / executor {executor!r} needs Dask: {INSTALL_HINT}") from None
        self._distributed = distributed
        address = scheduler_address(executor)
        self.cache = cache
        self.project_root = project_root
        self.location = cache.storage.location
        self.identity = identity(project_root, cache.hash_file)
        self.settings = numerical_settings()
        try:
            self.client = distributed.Client(address, timeout=timeout, set_as_default=False)
        except OSError as exc:
            raise ExecutorUnavailable(f"cannot reach the Dask scheduler at {address}: {exc}") from None
        try:
            self.client.wait_for_workers(1, timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - dask raises TimeoutError (builtin or its own)
            self.client.close()
            raise ExecutorUnavailable(f"no Dask worker joined the scheduler at {address} within {timeout:g} s") from exc
        threads = sum(self.client.nthreads().values())
        self.workers = max(1, min(threads, workers) if workers else threads)
        self._running: dict[Future, Any] = {}
        self.stop_event = f"book-stop-{uuid.uuid4().hex}"  # set by abort(): the running snippets' processes end

    def submit(self, task: Task) -> Future:
        done: Future = Future()
        remote = self.client.submit(run_on_worker, task, self.location, self.identity, self.settings, self.stop_event,
                                    key=f"book-{task.snippet}-{uuid.uuid4().hex[:8]}", pure=False, retries=1)
        self._running[done] = remote
        remote.add_done_callback(lambda _f: done.set_result(None) if not done.done() else None)
        return done

    def outcome(self, task: Task, future: Future) -> Outcome:
        remote = self._running.pop(future)
        try:
            out: Outcome = remote.result()
        except self._distributed.KilledWorker:
            return _error(task, f"{task.snippet}: the Dask worker running it died, and died again when it was "
                                f"retried — the snippet may be using more memory than a worker has")
        except ProcessDied as exc:
            return _error(task, f"{task.snippet}: {exc.message} — and again when it was retried",
                          f"its last output:\n{exc.output}" if exc.output else "")
        except Exception as exc:  # noqa: BLE001 - reported for that snippet, the build goes on
            return _error(task, f"{task.snippet} failed on the cluster (after a retry): {type(exc).__name__}: {exc}")
        finally:
            remote.release()
        if out.error is None:
            # What the snippet actually read on the worker (imported modules, data files) must be what this
            # machine has: the entry will be checked against these files.
            for rel, digest in out.deps.items():
                mine = self.cache.hash_file.like(self.project_root / rel, digest) or "missing"
                if mine != digest:
                    return _error(task, f"{task.snippet} read {rel} on the worker, and it differs from the build "
                                        f"machine's (build {mine[:12]}, worker {digest[:12]})")
        return out

    def close(self) -> None:
        for remote in self._running.values():
            remote.cancel()
        self._running.clear()
        self.client.close()

    def abort(self) -> None:
        """Cancel every task on the cluster, and kill the snippet processes already running on the workers."""
        try:
            self._distributed.Event(self.stop_event, client=self.client).set()
        except Exception:  # noqa: BLE001 - a scheduler that is gone has no running task to stop
            pass
        self.close()
