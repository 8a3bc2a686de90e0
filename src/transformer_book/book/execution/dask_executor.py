"""Snippets on a Dask cluster, seen from the build: ``BOOK_EXECUTOR=dask://host:port`` (or ``executor:`` in mkdocs.yml).

The build keeps its own scheduling (:mod:`.session`: a snippet is submitted when what it ``REQUIRES`` is done,
the longest critical path first); this executor submits each task to the cluster as :func:`.dask_worker.run_on_worker`
(what happens on the worker is there), as many at once as the cluster has worker threads, and checks what comes
back: the files the snippet read on the worker must be this machine's. The build then writes the entry
(:meth:`.cache.Cache.store`), so an entry exists only for a whole, successful run.

A snippet process that dies is retried once (``retries=1``) on whichever worker is free; when the Dask worker
itself dies, the scheduler reruns the task (``distributed.scheduler.allowed-failures``, set it to 1 for the same
single retry). A second failure fails that snippet with a message naming it. Stopping the build sets a Dask
``Event`` that the workers watch: the snippet processes running for it are killed.

Every worker must reach the cache at the same location (a URL such as ``s3://bucket/prefix``, or a folder on a
shared file system mounted at the same path) and have the project checked out at the same path. Dask is needed
only here, and only when this executor is chosen: ``pip install 'dask[distributed]'``.
"""

from __future__ import annotations

import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any


from transformer_book.book.environment import numerical_settings
from transformer_book.book.execution.dask_worker import ProcessDied, failed, run_on_worker
from transformer_book.book.execution.identity import identity
from transformer_book.book.storage.cache import Cache
from transformer_book.book.types import Executor, ExecutorUnavailable, Outcome, Task

INSTALL_HINT = "pip install 'dask[distributed]'"


def scheduler_address(executor: str) -> str:
    """``dask://host:port`` → ``tcp://host:port``."""
    if executor.startswith("dask://") and len(executor) > len("dask://"):
        return "tcp://" + executor[len("dask://"):]
    raise ExecutorUnavailable(f"unknown executor {executor!r}: use \"local\" or \"dask://host:port\"")


class DaskExecutor(Executor):
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
            return failed(task, f"{task.snippet}: the Dask worker running it died, and died again when it was "
                                f"retried — the snippet may be using more memory than a worker has")
        except ProcessDied as exc:
            return failed(task, f"{task.snippet}: {exc.message} — and again when it was retried",
                          f"its last output:\n{exc.output}" if exc.output else "")
        except Exception as exc:  # noqa: BLE001 - reported for that snippet, the build goes on
            return failed(task, f"{task.snippet} failed on the cluster (after a retry): {type(exc).__name__}: {exc}")
        finally:
            remote.release()
        if out.error is None:
            # What the snippet actually read on the worker (imported modules, data files) must be what this
            # machine has: the entry will be checked against these files.
            for rel, digest in out.deps.items():
                mine = self.cache.hash_file.like(self.project_root / rel, digest) or "missing"
                if mine != digest:
                    return failed(task, f"{task.snippet} read {rel} on the worker, and it differs from the build "
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
