"""One build of the book's results: decide what to run, use the cache, execute, check against records.

Snippets are scheduled as a graph, not in levels: a snippet is looked up in the cache (or queued) as soon as
everything it ``REQUIRES`` is done, and the queue hands the free workers the snippet with the longest
expected critical path first (its own duration, from its record or the last run, plus the longest chain of
snippets waiting for it). So no core idles while work is queued, and a long training that others need starts
first.
"""

from __future__ import annotations

import heapq
import json
import os
import threading
from concurrent.futures import FIRST_COMPLETED, Future, wait
from contextlib import contextmanager
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Callable, Iterator

from transformer_book.book.checking import drift, records
from transformer_book.book.checking.drift import Change
from transformer_book.book.discover import Declared, Snippet, discover
from transformer_book.book.files import FileHasher, atomic_write_text
from transformer_book.book.graph import closure, critical_paths, snippet_graph
from transformer_book.book.memo import Memo, file_version
from transformer_book.book.state import BuildState, Options, SnippetState
from transformer_book.book.storage.cache import Entry, cache_key, open_cache
from transformer_book.book.types import Executor, Outcome, SnippetError, Task


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


@dataclass(frozen=True)
class _Verdict:
    """What checking one snippet's results against its record found."""

    problems: list[str]
    drift: list[Change]
    uncalibrated: list[str]


Progress = Callable[[str, SnippetState], None]


@dataclass(frozen=True)
class _Plan:
    """What one build is to settle: the snippets found, what each declares (an unreadable declaration is that
    snippet's error), and the selection (what was asked for, with everything it requires)."""

    found: dict[str, Snippet]
    declared: dict[str, Declared]
    bad: dict[str, str]  # snippet -> why its declarations cannot be read
    selected: set[str]

    def requires(self, sid: str) -> list[str]:
        return list(self.declared[sid].requires)


class _Run:
    """One build's schedule. ``graphlib.TopologicalSorter`` hands out each snippet once everything it requires is
    settled; a handed-out snippet is answered from the cache, marked pending or failed at once, or queued — the
    free workers take the queued snippet with the longest critical path first (the reverse under the
    ``BOOK_ORDER=reverse`` perturbation). A snippet is done in the graph when it is settled, so what waits for it
    is handed out next."""

    def __init__(self, session: BookSession, plan: _Plan, options: Options, progress: Progress | None,
                 execute_missing: bool) -> None:
        self.session, self.plan, self.options = session, plan, options
        self.progress, self.execute_missing = progress, execute_missing
        self.graph = snippet_graph({sid: plan.requires(sid) for sid in plan.found}, plan.selected)
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
            self._priority = critical_paths({s: self.plan.requires(s) for s in self.plan.selected},
                                            self.session.expected_times(self.plan.found))
        return self._priority

    def settle(self, sid: str, state: SnippetState) -> None:
        self.states[sid] = state
        if self.progress is not None:
            self.progress(sid, state)
        self.graph.done(sid)

    def fail(self, sid: str, msg: str) -> None:
        snip = self.plan.found[sid]
        self.settle(sid, SnippetState(snip, "error", error=SnippetError(msg, _rel(snip.path, self.session.project_root),
                                                                        0, msg)))

    def release(self) -> None:
        """Hand out every snippet whose requirements are settled; settling one may release the next."""
        while ready := sorted(self.graph.get_ready()):
            for sid in ready:
                self.look_up(sid)

    def look_up(self, sid: str) -> None:
        snip, reqs = self.plan.found[sid], self.plan.requires(sid)
        states = self.states
        unknown = [r for r in reqs if r not in self.plan.found]
        if sid in self.plan.bad:
            self.fail(sid, self.plan.bad[sid])
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
                try:
                    timeout = snip.timeout(options.timeout, source)  # the bytes that will run, as the key
                except ValueError as exc:  # saved since the plan read it
                    self.fail(sid, str(exc))
                    return
                cache = self.session.cache
                provided = tuple((r, name, file) for r in reqs for name, file in cache.artifact_files(self.entries[r]).items())
                task = Task(sid, str(snip.path), str(self.session.project_root), str(cache.blob_dir(sid)), provided,
                            source=source, timeout=timeout)
                rank = self.priority.get(sid, 1.0)
                heapq.heappush(self.queue, (rank if self.reverse else -rank, sid, task))

    def collect(self, sid: str, task: Task, out: Outcome) -> None:
        snip, key = self.plan.found[sid], self.keys[sid]
        budget = snip.declared(task.source).budget
        if out.error is not None:
            self.settle(sid, SnippetState(snip, "error", out.seconds, {}, out.error, budget, key))
            return
        entry = Entry(key, sid, out.deps, out.results, out.seconds, budget, out.artifacts, out.measured_on)
        self.session.cache.store(entry)
        self.entries[sid] = entry
        self.settle(sid, SnippetState(snip, "ran", out.seconds, out.results, None, budget, key))

    @contextmanager
    def _executor(self) -> Iterator[Callable[[], Executor]]:
        """The build's executor, made when the first task is queued and kept in the session's live list while
        it works; at the end closed (a finished build) or aborted (an error, Ctrl-C, :meth:`BookSession.stop`:
        no snippet process is left running)."""
        made: list[Executor] = []

        def executor() -> Executor:
            if not made:
                made.append(self.session.executor_for(self.options))
                self.session.live.add(made[0])
            return made[0]

        completed = False
        try:
            yield executor
            completed = not self.session.stopping.is_set()
        finally:
            for ex in made:
                self.session.live.discard(ex)
                ex.close() if completed else ex.abort()

    def go(self) -> None:
        stopping = self.session.stopping
        if not self.session.live:
            stopping.clear()  # stop() ends the builds that were running then, not the next one
        with self._executor() as executor:
            self.release()
            while (self.queue or self.running) and not stopping.is_set():
                while self.queue and len(self.running) < executor().workers:
                    _, sid, task = heapq.heappop(self.queue)
                    self.running[executor().submit(task)] = (sid, task)
                done, _ = wait(list(self.running), return_when=FIRST_COMPLETED)
                if stopping.is_set():
                    break  # what ended now was killed by stop(): reported as interrupted below
                for fut in done:
                    sid, task = self.running.pop(fut)
                    self.collect(sid, task, executor().outcome(task, fut))
                self.release()
        self._fail_unfinished()

    def _fail_unfinished(self) -> None:
        """An interrupted build: what ran, what was queued and what waited for them, each failed saying so."""
        for sid, _task in self.running.values():
            self.fail(sid, "stopped: the build was interrupted while it ran")
        for _, sid, _task in self.queue:
            self.fail(sid, "stopped: the build was interrupted before it ran")
        for sid in sorted(self.plan.selected - set(self.states)):  # waiting for one of those
            snip = self.plan.found[sid]
            self.states[sid] = SnippetState(snip, "error", error=SnippetError(
                "required snippet(s) were not run", _rel(snip.path, self.session.project_root), 0,
                "required snippet(s) were not run"))


class BookSession:
    """Holds what survives between builds of one ``mkdocs serve``: file hashes, the cache, and the verdicts of the
    records. ``options`` are the settings it was opened with (:func:`.site.config.open_session`: the plugin's, with
    their environment overrides); a build or a command starts from them."""

    def __init__(self, project_root: Path, snippets_dir: Path, cache_dir: Path | str, report_dir: Path,
                 notebooks_dir: Path | None = None, executor_factory: Callable[[int], Executor] | None = None,
                 options: Options | None = None) -> None:
        self.project_root = project_root
        self.snippets_dir = snippets_dir
        self.notebooks_dir = notebooks_dir  # docs/: notebook pages are executed like snippets
        self.report_dir = report_dir
        self.options = options or Options()
        self.hasher = FileHasher()
        self.cache = open_cache(cache_dir, project_root, self.hasher)  # a folder, or a URL (:mod:`.store`)
        self.executor_factory = executor_factory
        self.live: set[Executor] = set()  # executors of the builds running now (the background one, too)
        self.stopping = threading.Event()
        # What checking a snippet's record found, by (entry key, record file version): ``serve`` rebuilds after
        # every save of prose, and comparing 53 unchanged records again took a tenth of a second.
        self._verdicts: Memo[_Verdict | None] = Memo("record verdicts")

    def discover(self) -> dict[str, Snippet]:
        return discover(self.snippets_dir, self.notebooks_dir)

    def expected_times(self, found: dict[str, Snippet]) -> dict[str, float]:
        """Seconds each snippet took last time: the local timing report, else its committed record."""
        out: dict[str, float] = {}
        for sid, snip in found.items():
            try:
                seconds = records.made_with(records.read(snip.record_path)).get("seconds")
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
        plan = self._plan(options, only)
        run = _Run(self, plan, options, progress, execute_missing)
        if only is None:
            for sid in set(plan.found) - plan.selected:
                run.states[sid] = SnippetState(plan.found[sid], "skipped")
        run.go()
        state = BuildState(dict(sorted(run.states.items())), entries=run.entries)
        self._check_records(state, options, complete=only is None and not options.select)
        return state

    def _plan(self, options: Options, only: list[str] | None) -> _Plan:
        found = self.discover()
        declared: dict[str, Declared] = {}
        bad: dict[str, str] = {}
        for sid, snip in found.items():
            try:
                declared[sid] = snip.declared()
            except ValueError as exc:  # that snippet's error, not the whole build's
                declared[sid], bad[sid] = Declared(), str(exc)
        requires = {sid: list(d.requires) for sid, d in declared.items()}
        snippet_graph(requires, set(requires))  # a cycle anywhere is an error, even outside the selection
        if only is not None:
            unknown = [s for s in only if s not in found]
            if unknown:
                raise KeyError(f"unknown snippet(s): {', '.join(unknown)}; known: {', '.join(found)}")
        wanted = set(found) if only is None else set(only)
        if options.select:
            wanted = {sid for sid in wanted if any(fnmatch(sid, p) for p in options.select)}
        return _Plan(found, declared, bad, closure(wanted, requires) if options.execute else set())

    def _check_records(self, state: BuildState, options: Options, complete: bool) -> None:
        for sid, st in state.snippets.items():
            if st.status not in ("cached", "ran"):
                continue
            try:
                verdict = self._verdict(sid, st, state.entries.get(sid))
            except ValueError as exc:
                state.record_errors.append(str(exc))
                continue
            if verdict is None:
                state.missing_records.append(sid)
                if options.write_missing_records and not options.ci:
                    records.save(st.snippet.record_path, records.build_record(sid, st.results, st.seconds))
                    state.new_records.append(sid)
                continue
            state.record_errors.extend(verdict.problems)
            state.drift.extend(verdict.drift)
            if verdict.uncalibrated:
                state.uncalibrated[sid] = verdict.uncalibrated
        if complete:
            known = {s.record_path.resolve() for s in self.discover().values()}
            for path in sorted(self.snippets_dir.rglob("*.record.json")):
                if path.resolve() not in known:
                    state.orphan_records.append(path)

    def _verdict(self, sid: str, st: SnippetState, entry: Entry | None) -> _Verdict | None:
        """What checking the snippet's results against its record finds (None: it has no record). The same cached
        entry against the same record file gives the same answer; results that ran now are checked anew."""
        path = st.snippet.record_path

        def check() -> _Verdict | None:
            rec = records.load(path)
            if rec is None:
                return None
            return _Verdict(records.problems(path, rec), drift.compare(sid, rec, st.results),
                            drift.uncalibrated(rec, st.results))

        if entry is None:
            return check()
        if st.status == "ran":
            self._verdicts.forget(sid)
        return self._verdicts.get(sid, (entry.key, file_version(path)), check)

    def accept(self, only: list[str] | None, workers: int = 0, keep_requirements: bool = False,
               keys: dict[str, set[str]] | None = None) -> tuple[BuildState, dict[str, list[Change]]]:
        """Re-execute (fresh) and rewrite records; returns the changes per snippet (old → new).
        ``keep_requirements``: rerun only the named snippets; what they require comes from the cache when it
        is there (accepting a consumer without training its producers again). ``keys``: per snippet, accept
        only these results; the record keeps every other result as it was (and their drift stays)."""
        keys = keys or {}
        fresh_only = tuple(only) if keep_requirements and only else ()
        state = self.build(self.command_options(fresh=True, fresh_only=fresh_only, workers=workers), only)
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
                unknown = keys[sid] - set(new.results) - set(records.results(old))
                if unknown:
                    raise ValueError(f"{sid} has no result {', '.join(sorted(unknown))}; it has "
                                     + ", ".join(new.results))
                new = records.accept_keys(old, new, keys[sid])
                diffs[sid] = [ch for ch in diffs[sid] if ch.result in keys[sid]]
            # also when only what is recorded *about* a result changed (a claim's comparison, a format) — for the
            # snippets named. A requirement rerun only to feed them keeps its record unless it drifted: rewritten
            # for bits inside its tolerance, it was reported "unchanged" yet its numbers moved (and a second
            # record of the same training, the P08 notebook's, no longer equalled it).
            named = only is None or sid in only
            if old is None or diffs[sid] or (named and not records.results_as_written(old, new)):
                records.save(st.snippet.record_path, new)
        if only is None:
            for path in state.orphan_records:
                path.unlink()
        return state, diffs

    def command_options(self, workers: int = 0, **changes: Any) -> Options:
        """The session's options for a command that names its snippets itself (``accept``, ``run``, ``results`` …):
        executed whatever ``BOOK_EXECUTE`` says, not CI (records are the command's to write), no ``BOOK_ONLY``
        selection, no new record written on the side; the executor, workers and timeout stay the session's."""
        return self.options.replace(execute=True, ci=False, select=(), write_missing_records=False,
                                    workers=workers or self.options.workers, **changes)

    def requirements(self, sid: str) -> tuple[tuple[str, str, str], ...]:
        """Cache (or run) what ``sid`` requires; return the (snippet, artifact, file) triples for its Task."""
        snip = self.discover()[sid]
        required = snip.requires()
        if not required:
            return ()
        state = self.build(self.command_options(), only=required)
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
