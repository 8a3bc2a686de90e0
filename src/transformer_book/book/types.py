"""What passes between the build and the processes that run snippets: a ``Task`` out, an ``Outcome`` back,
and, when a snippet fails, its ``SnippetError`` (``file:line`` in the snippet). Plain data, picklable, so
every executor (the local pool, a fresh interpreter, a Dask worker) sends the same thing."""

from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Future
from dataclasses import dataclass, field

from transformer_book.book.results import Result

NOTEBOOK_OUTPUT = "executed_notebook"  # the artifact that carries a notebook's executed copy


@dataclass
class SnippetError:
    """Where and why a snippet failed: ``file:line`` of the innermost frame in the snippet itself."""

    message: str  # "ValueError: …"
    file: str
    line: int
    traceback: str
    deepest: str = ""  # innermost project frame, when the error was raised inside the library
    cell: int | None = None  # for a notebook: which code cell (1-based)

    def location(self) -> str:
        if self.cell is not None:
            return f"{self.file}:cell {self.cell}:{self.line}"
        return f"{self.file}:{self.line}"


@dataclass
class Outcome:
    snippet: str
    results: dict[str, Result] = field(default_factory=dict)  # artifacts appear as empty Artifact()
    artifacts: dict[str, str] = field(default_factory=dict)  # artifact name -> sha256 of its blob
    deps: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    error: SnippetError | None = None
    measured_on: str = ""  # the machine that ran it and the day: "AMD EPYC，2 核，Linux-x86_64，2026-12-03"


@dataclass(frozen=True)
class Task:
    snippet: str
    path: str
    project_root: str
    blob_dir: str  # where this snippet's artifacts are written
    requires: tuple[tuple[str, str, str], ...] = ()  # (required snippet, artifact name, blob file)
    # The bytes the cache key was computed from: these are what runs, whatever the file holds by then.
    # Empty: read the file (``python -m transformer_book run`` on a file being written).
    source: bytes = b""
    # Seconds the snippet may run: its declared timeout (:meth:`.discover.Snippet.timeout`); 0: none. The one
    # deadline: the snippet process stops its own code by SIGALRM at ``timeout`` (:mod:`.worker`), and whoever
    # owns that process kills it at ``kill_after`` (:mod:`.pool` here, :mod:`.dask_worker` on a cluster).
    timeout: float = 0.0

    @property
    def kill_after(self) -> float | None:
        """Seconds after its start at which the snippet's process is killed if it still runs (None: never)."""
        return self.timeout + KILL_GRACE if self.timeout > 0 else None


KILL_GRACE = 5.0  # seconds past its timeout before a snippet process that did not stop is killed


class ExecutorUnavailable(RuntimeError):
    """The chosen executor cannot be used (Dask missing, scheduler unreachable, no workers). The plugin stops
    ``mkdocs build`` with this message, not a traceback (the execution layer knows nothing of MkDocs)."""


class Executor(ABC):
    """Where a build's snippet processes run: the local forkserver pool (:class:`.execution.pool.LocalExecutor`)
    or a Dask cluster (:class:`.execution.dask_executor.DaskExecutor`). The session submits at most
    :attr:`workers` tasks at a time."""

    workers: int = 1

    @abstractmethod
    def submit(self, task: Task) -> Future: ...

    @abstractmethod
    def outcome(self, task: Task, future: Future) -> Outcome:
        """The task's outcome once its future is done (an error outcome if its process died)."""

    @abstractmethod
    def close(self) -> None:
        """After the last task: wait for nothing, release the workers."""

    @abstractmethod
    def abort(self) -> None:
        """Now: cancel what is queued, kill what runs."""
