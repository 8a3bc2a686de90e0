"""One build of the book's results: decide what to run, use the cache, execute, check against records.

Snippets are scheduled as a graph, not in levels: a snippet is looked up in the cache (or queued) as soon as
everything it ``REQUIRES`` is done, and the queue hands the free workers the snippet with the longest
expected critical path first (its own duration, from its record or the last run, plus the longest chain of
snippets waiting for it). So no core idles while work is queued, and a long training that others need starts
first.
"""

from __future__ import annotations

import graphlib
import heapq
import threading
import json
import os
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Callable, Protocol

from transformer_book.book.checking import drift, records
from transformer_book.book.storage.cache import Entry, cache_key, open_cache
from transformer_book.book.discover import Snippet, discover
from transformer_book.book.checking.drift import Change
from transformer_book.book.files import FileHasher, atomic_write_text
from transformer_book.book.results import Result
from transformer_book.book.types import Outcome, SnippetError, Task


def snippet_graph(requires: dict[str, list[str]], selected: set[str]) -> graphlib.TopologicalSorter:
    """The graph of the selected snippets (an edge per ``REQUIRES`` inside the selection), prepared: a cycle
    raises ``ValueError`` naming it."""
    graph = graphlib.TopologicalSorter({sid: [r for r in requires[sid] if r in selected] for sid in selected})
    try:
        graph.prepare()
    except graphlib.CycleError as exc:
        raise ValueError("REQUIRES forms a cycle: " + " → ".join(reversed(exc.args[1]))) from None
    return graph


def closure(wanted: set[str], requires: dict[str, list[str]]) -> set[str]:
    """``wanted`` plus everything it requires, transitively."""
    out, todo = set(), list(wanted)
    while todo:
        sid = todo.pop()
        if sid not in out:
            out.add(sid)
            todo.extend(r for r in requires.get(sid, []) if r in requires)
    return out


def critical_paths(requires: dict[str, list[str]], expected: dict[str, float]) -> dict[str, float]:
    """For each snippet: its expected seconds plus the longest chain of snippets that wait for it."""
    dependents: dict[str, list[str]] = {sid: [] for sid in requires}
    for sid, reqs in requires.items():
        for r in reqs:
            if r in dependents:
                dependents[r].append(sid)
    memo: dict[str, float] = {}

    def path(sid: str) -> float:
        if sid not in memo:
            memo[sid] = expected.get(sid, 1.0) + max((path(d) for d in dependents[sid]), default=0.0)
        return memo[sid]

    return {sid: path(sid) for sid in requires}


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


@dataclass
class SnippetState:
    snippet: Snippet
    status: str  # "cached" | "ran" | "error" | "skipped" | "pending" (not computed yet: execute_missing=False)
    seconds: float = 0.0
    results: dict[str, Result] = field(default_factory=dict)
    error: SnippetError | None = None
    budget: float | None = None
    key: str = ""  # the cache key it was looked up under ("" when not known yet: a requirement is pending)


@dataclass
class BuildState:
    snippets: dict[str, SnippetState]
    drift: list[Change] = field(default_factory=list)
    missing_records: list[str] = field(default_factory=list)  # snippets with no record file
    new_records: list[str] = field(default_factory=list)  # records written because they were missing
    orphan_records: list[Path] = field(default_factory=list)  # record files no snippet produces
    record_errors: list[str] = field(default_factory=list)
    uncalibrated: dict[str, list[str]] = field(default_factory=dict)  # snippet -> trained series
    entries: dict[str, Entry] = field(default_factory=dict)  # snippet -> its cache entry (cached or stored)


@dataclass(frozen=True)
class _Verdict:
    """What checking one snippet's results against its record found."""

    problems: list[str]
    drift: list[Change]
    uncalibrated: list[str]


def _file_state(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


@dataclass
class Options:
    execute: bool = True  # False: a plain build, nothing runs, pages show placeholders
    fresh: bool = False  # ignore cached results (still refresh the cache)
    fresh_only: tuple[str, ...] = ()  # with fresh: only these snippets; what they require may come from the cache
    ci: bool = False  # fresh, and every result must have a record and every record a snippet
    workers: int = 0  # 0: one per BOOK_THREADS cores (environment.default_workers)
    write_missing_records: bool = True  # outside CI, a new snippet's first results become its record
    select: tuple[str, ...] = ()  # glob patterns (e.g. "lecture07/*"): run only these, skip the rest
    executor: str = "local"  # or "dask://host:port": run snippets on a Dask cluster (:mod:`.dask_executor`)
    # seconds after which a snippet that declares neither TIMEOUT_SECONDS nor BUDGET_SECONDS is stopped
    timeout: float = 1800.0


class Executor(Protocol):
    def submit(self, task: Task) -> Future: ...
    def outcome(self, task: Task, future: Future) -> Outcome: ...
    def close(self) -> None: ...  # after the last task: wait for nothing, release the workers
    def abort(self) -> None: ...  # now: cancel what is queued, kill what runs


Progress = Callable[[str, SnippetState], None]


class _Run:
    """One build's schedule. ``graphlib.TopologicalSorter`` hands out each snippet once everything it requires is
    settled; a handed-out snippet is answered from the cache, marked pending or failed at once, or queued — the
    free workers take the queued snippet with the longest critical path first (the reverse under the
    ``BOOK_ORDER=reverse`` perturbation). A snippet is done in the graph when it is settled, so what waits for it
    is handed out next."""

    def __init__(self, session: BookSession, found: dict[str, Snippet], requires: dict[str, list[str]],
                 bad_requires: dict[str, str], selected: set[str], options: Options, progress: Progress | None,
                 execute_missing: bool) -> None:
        self.session, self.found, self.requires, self.bad_requires = session, found, requires, bad_requires
        self.options, self.progress, self.execute_missing = options, progress, execute_missing
        self.selected = selected
        self.graph = snippet_graph(requires, selected)
        self.states: dict[str, SnippetState] = {}
        self.entries: dict[str, Entry] = {}
        self.keys: dict[str, str] = {}
        self._priority: dict[str, float] | None = None  # see :meth:`priority`
        self.reverse = os.environ.get("BOOK_ORDER", "") == "reverse"  # a calibration perturbation
        self.queue: list[tuple[float, str, Task]] = []
        self.running: dict[Future, tuple[str, Task]] = {}
        self.fresh = options.fresh or options.ci

    @property
    def priority(self) -> dict[str, float]:
        """Each selected snippet's critical path, worked out when the first snippet is queued: a build that
        runs nothing (``serve`` rebuilding after a save of prose) does not read 53 records for it."""
        if self._priority is None:
            self._priority = critical_paths({s: self.requires[s] for s in self.selected},
                                            self.session.expected_times(self.found))
        return self._priority

    def settle(self, sid: str, state: SnippetState) -> None:
        self.states[sid] = state
        if self.progress is not None:
            self.progress(sid, state)
        self.graph.done(sid)

    def fail(self, sid: str, msg: str) -> None:
        snip = self.found[sid]
        self.settle(sid, SnippetState(snip, "error", error=SnippetError(msg, _rel(snip.path, self.session.project_root),
                                                                        0, msg)))

    def release(self) -> None:
        """Hand out every snippet whose requirements are settled; settling one may release the next."""
        while ready := sorted(self.graph.get_ready()):
            for sid in ready:
                self.look_up(sid)

    def look_up(self, sid: str) -> None:
        snip, reqs = self.found[sid], self.requires[sid]
        states = self.states
        unknown = [r for r in reqs if r not in self.found]
        if sid in self.bad_requires:
            self.fail(sid, self.bad_requires[sid])
        elif unknown:
            self.fail(sid, f"REQUIRES names no snippet: {', '.join(unknown)}")
        elif any(states[r].status == "error" for r in reqs):
            self.fail(sid, f"required snippet(s) failed: {', '.join(r for r in reqs if states[r].status == 'error')}")
        elif any(states[r].status == "pending" for r in reqs):
            self.settle(sid, SnippetState(snip, "pending"))
        else:
            source = snip.path.read_bytes()  # read once: what the key hashes is what the worker runs
            key = self.keys[sid] = cache_key(snip, snip.source(source), {r: self.entries[r].fingerprint for r in reqs})
            options = self.options
            rerun = self.fresh and (options.ci or not options.fresh_only or sid in options.fresh_only)
            entry = None if rerun else self.session.cache.load(sid, key)
            if entry is not None:
                self.entries[sid] = entry
                self.settle(sid, SnippetState(snip, "cached", entry.seconds, entry.results, None, entry.budget, key))
            elif not self.execute_missing:
                self.settle(sid, SnippetState(snip, "pending", key=key))
            else:
                cache = self.session.cache
                provided = tuple((r, name, file) for r in reqs for name, file in cache.artifact_files(self.entries[r]).items())
                task = Task(sid, str(snip.path), str(self.session.project_root), str(cache.blob_dir(sid)), provided,
                            source=source, timeout=options.timeout)
                rank = self.priority.get(sid, 1.0)
                heapq.heappush(self.queue, (rank if self.reverse else -rank, sid, task))

    def collect(self, sid: str, out: Outcome) -> None:
        snip, key = self.found[sid], self.keys[sid]
        if out.error is not None:
            self.settle(sid, SnippetState(snip, "error", out.seconds, {}, out.error, out.budget, key))
            return
        entry = Entry(key, sid, out.deps, out.results, out.seconds, out.budget, out.artifacts, out.measured_on)
        self.session.cache.store(entry)
        self.entries[sid] = entry
        self.settle(sid, SnippetState(snip, "ran", out.seconds, out.results, None, out.budget, key))

    def go(self) -> None:
        session, stopping = self.session, self.session.stopping
        if not session.live:
            stopping.clear()  # stop() ends the builds that were running then, not the next one
        executor: Executor | None = None
        completed = False
        try:
            self.release()
            while (self.queue or self.running) and not stopping.is_set():
                if self.queue and executor is None:
                    executor = session.executor_for(self.options)
                    session.live.add(executor)
                while self.queue and len(self.running) < getattr(executor, "workers", 1):
                    _, sid, task = heapq.heappop(self.queue)
                    self.running[executor.submit(task)] = (sid, task)
                done, _ = wait(list(self.running), return_when=FIRST_COMPLETED)
                if stopping.is_set():
                    break  # what ended now was killed by stop(): reported as interrupted below
                for fut in done:
                    sid, task = self.running.pop(fut)
                    self.collect(sid, executor.outcome(task, fut))
                self.release()
            completed = not stopping.is_set()
        finally:
            if executor is not None:
                session.live.discard(executor)
                # a failed or interrupted build (Ctrl-C, an error, :meth:`stop`) leaves no snippet process running
                executor.close() if completed else executor.abort()
        for sid, _task in self.running.values():
            self.fail(sid, "stopped: the build was interrupted while it ran")
        for _, sid, _task in self.queue:
            self.fail(sid, "stopped: the build was interrupted before it ran")
        for sid in sorted(self.selected - set(self.states)):  # waiting for one of those
            self.states[sid] = SnippetState(self.found[sid], "error", error=SnippetError(
                "required snippet(s) were not run", _rel(self.found[sid].path, session.project_root), 0,
                "required snippet(s) were not run"))


class BookSession:
    """Holds what survives between builds of one ``mkdocs serve``: file hashes and the cache."""

    def __init__(self, project_root: Path, snippets_dir: Path, cache_dir: Path | str, report_dir: Path,
                 notebooks_dir: Path | None = None, executor_factory: Callable[[int], Executor] | None = None) -> None:
        self.project_root = project_root
        self.snippets_dir = snippets_dir
        self.notebooks_dir = notebooks_dir  # docs/: notebook pages are executed like snippets
        self.report_dir = report_dir
        self.hasher = FileHasher()
        self.cache = open_cache(cache_dir, project_root, self.hasher)  # a folder, or a URL (:mod:`.store`)
        self.executor_factory = executor_factory
        self.live: set[Executor] = set()  # executors of the builds running now (the background one, too)
        self.stopping = threading.Event()
        # snippet -> ((entry key, record file's (mtime, size)), what checking that record found): ``serve``
        # rebuilds after every save of prose, and comparing 53 unchanged records again took a tenth of a second
        self._verdicts: dict[str, tuple[tuple[str, tuple[int, int] | None], _Verdict]] = {}

    def discover(self) -> dict[str, Snippet]:
        return discover(self.snippets_dir, self.notebooks_dir)

    def expected_times(self, found: dict[str, Snippet]) -> dict[str, float]:
        """Seconds each snippet took last time: the local timing report, else its committed record."""
        out: dict[str, float] = {}
        for sid, snip in found.items():
            try:
                seconds = (records.read(snip.record_path) or {}).get("provenance", {}).get("seconds")
            except ValueError:
                seconds = None
            if isinstance(seconds, (int, float)):
                out[sid] = float(seconds)
        try:
            rows = json.loads((self.report_dir / "timing.json").read_text(encoding="utf-8"))
            out.update({r["snippet"]: float(r["seconds"]) for r in rows if r.get("status") == "ran"})
        except (OSError, ValueError, KeyError, TypeError):
            pass
        return out

    def stop(self) -> None:
        """End every build of this session now (``mkdocs serve`` shutting down, a failed build): running
        snippets are killed, queued ones are not started. A later build starts afresh."""
        self.stopping.set()
        for executor in list(self.live):
            executor.abort()

    def executor_for(self, options: Options) -> Executor:
        """The executor a build with these options runs its snippets on: local processes or a Dask cluster."""
        if self.executor_factory is not None:
            return self.executor_factory(options.workers)
        if options.executor != "local":
            from transformer_book.book.execution.dask_executor import DaskExecutor

            return DaskExecutor(options.executor, self.cache, self.project_root, options.workers)
        from transformer_book.book.execution.pool import LocalExecutor

        return LocalExecutor(options.workers or None)

    def build(self, options: Options, only: list[str] | None = None, progress: Progress | None = None,
              execute_missing: bool = True) -> BuildState:
        """Results of every selected snippet: from the cache, or executed.

        ``execute_missing=False`` executes nothing: what the cache cannot answer is reported as ``"pending"``
        (with the key it needs, when that is known) — ``mkdocs serve`` renders those pages at once and lets a
        background build fill them in (:mod:`.site.background`)."""
        found = self.discover()
        requires: dict[str, list[str]] = {}
        bad_requires: dict[str, str] = {}
        for sid, snip in found.items():
            try:
                requires[sid] = snip.requires()
            except ValueError as exc:  # that snippet's error, not the whole build's
                requires[sid], bad_requires[sid] = [], str(exc)
        snippet_graph(requires, set(requires))  # a cycle anywhere is an error, even outside the selection
        if only is not None:
            unknown = [s for s in only if s not in found]
            if unknown:
                raise KeyError(f"unknown snippet(s): {', '.join(unknown)}; known: {', '.join(found)}")
        wanted = set(found) if only is None else set(only)
        if options.select:
            wanted = {sid for sid in wanted if any(fnmatch(sid, p) for p in options.select)}
        selected = closure(wanted, requires) if options.execute else set()
        run = _Run(self, found, requires, bad_requires, selected, options, progress, execute_missing)
        if only is None:
            for sid in set(found) - selected:
                run.states[sid] = SnippetState(found[sid], "skipped")
        run.go()
        state = BuildState(dict(sorted(run.states.items())), entries=run.entries)
        self._check_records(state, options, complete=only is None and not options.select)
        return state

    def _check_records(self, state: BuildState, options: Options, complete: bool) -> None:
        for sid, st in state.snippets.items():
            if st.status not in ("cached", "ran"):
                continue
            entry = state.entries.get(sid)
            seen = _file_state(st.snippet.record_path)
            known = self._verdicts.get(sid)
            if st.status == "cached" and entry is not None and known is not None and known[0] == (entry.key, seen):
                verdict = known[1]  # the same cached results against the same record file: the same answer
            else:
                try:
                    rec = records.load(st.snippet.record_path)
                except ValueError as exc:
                    state.record_errors.append(str(exc))
                    continue
                if rec is None:
                    state.missing_records.append(sid)
                    if options.write_missing_records and not options.ci:
                        records.save(st.snippet.record_path, records.build_record(sid, st.results, st.seconds))
                        state.new_records.append(sid)
                    continue
                verdict = _Verdict(records.problems(st.snippet.record_path, rec), drift.compare(sid, rec, st.results),
                                   drift.uncalibrated(rec, st.results))
                if entry is not None:
                    self._verdicts[sid] = ((entry.key, seen), verdict)
            state.record_errors.extend(verdict.problems)
            state.drift.extend(verdict.drift)
            if verdict.uncalibrated:
                state.uncalibrated[sid] = verdict.uncalibrated
        if complete:
            known = {s.record_path.resolve() for s in self.discover().values()}
            for path in sorted(self.snippets_dir.rglob("*.record.json")):
                if path.resolve() not in known:
                    state.orphan_records.append(path)

    def accept(self, only: list[str] | None, workers: int = 0, keep_requirements: bool = False,
               keys: dict[str, set[str]] | None = None) -> tuple[BuildState, dict[str, list[Change]]]:
        """Re-execute (fresh) and rewrite records; returns the changes per snippet (old → new).
        ``keep_requirements``: rerun only the named snippets; what they require comes from the cache when it
        is there (accepting a consumer without training its producers again). ``keys``: per snippet, accept
        only these results; the record keeps every other result as it was (and their drift stays)."""
        keys = keys or {}
        fresh_only = tuple(only) if keep_requirements and only else ()
        state = self.build(Options(fresh=True, fresh_only=fresh_only, workers=workers, write_missing_records=False), only)
        diffs: dict[str, list[Change]] = {}
        for sid, st in state.snippets.items():
            if st.status != "ran":
                continue
            try:
                old = records.load(st.snippet.record_path)
            except ValueError:  # unreadable or an older format: rewritten whole
                old = None
            diffs[sid] = drift.compare(sid, old, st.results)
            new = records.build_record(sid, st.results, st.seconds, old)
            if sid in keys:
                unknown = keys[sid] - set(new["results"]) - set((old or {}).get("results", {}))
                if unknown:
                    raise ValueError(f"{sid} has no result {', '.join(sorted(unknown))}; it has "
                                     + ", ".join(new["results"]))
                new = records.accept_keys(old, new, keys[sid])
                diffs[sid] = [ch for ch in diffs[sid] if ch.result in keys[sid]]
            # also when only what is recorded *about* a result changed (a claim's comparison, a format)
            if old is None or diffs[sid] or new["results"] != old.get("results"):
                records.save(st.snippet.record_path, new)
        if only is None:
            for path in state.orphan_records:
                path.unlink()
        return state, diffs

    def requirements(self, sid: str) -> tuple[tuple[str, str, str], ...]:
        """Cache (or run) what ``sid`` requires; return the (snippet, artifact, file) triples for its Task."""
        snip = self.discover()[sid]
        required = snip.requires()
        if not required:
            return ()
        state = self.build(Options(), only=required)
        failed = [r for r in required if state.snippets[r].status not in ("cached", "ran")]
        if failed:
            raise RuntimeError(f"{sid} requires {', '.join(failed)}, which failed")
        return tuple((r, name, file) for r in required for name, file in self.cache.artifact_files(state.entries[r]).items())

    def write_timing(self, state: BuildState) -> list[dict[str, Any]]:
        rows = [
            {"snippet": sid, "status": st.status, "seconds": round(st.seconds, 3), "budget": st.budget}
            for sid, st in state.snippets.items()
        ]
        if any(r["status"] == "ran" for r in rows):
            # Keep the last real run times (for scheduling) when this build only hit the cache.
            atomic_write_text(self.report_dir / "timing.json", json.dumps(rows, ensure_ascii=False, indent=1))
        return rows
