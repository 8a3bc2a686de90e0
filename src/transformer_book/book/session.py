"""One build of the book's results: decide what to run, use the cache, execute, compare with records."""

from __future__ import annotations

import json
from fnmatch import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import records
from .cache import Cache, Entry, FileHasher, atomic_write_text, sha256_bytes
from .discover import Snippet, cache_key, discover
from .execute import Outcome, SnippetError, Task, run_many
from .records import Change


def dependency_levels(requires: dict[str, list[str]]) -> list[list[str]]:
    """Snippets grouped so that each group needs only earlier groups (``REQUIRES``); cycles are errors."""
    depth: dict[str, int] = {}

    def visit(sid: str, path: tuple[str, ...]) -> int:
        if sid in path:
            raise ValueError("REQUIRES forms a cycle: " + " → ".join((*path, sid)))
        if sid not in depth:
            depth[sid] = 1 + max((visit(r, (*path, sid)) for r in requires.get(sid, []) if r in requires), default=-1)
        return depth[sid]

    for sid in requires:
        visit(sid, ())
    levels: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
    for sid in sorted(requires):
        levels[depth[sid]].append(sid)
    return levels


def closure(wanted: set[str], requires: dict[str, list[str]]) -> set[str]:
    """``wanted`` plus everything it requires, transitively."""
    out, todo = set(), list(wanted)
    while todo:
        sid = todo.pop()
        if sid not in out:
            out.add(sid)
            todo.extend(r for r in requires.get(sid, []) if r in requires)
    return out


def _fingerprint(key: str, deps: dict[str, str]) -> str:
    return sha256_bytes((key + "".join(f"{k}={v}" for k, v in sorted(deps.items()))).encode())[:32]


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)


@dataclass
class SnippetState:
    snippet: Snippet
    status: str  # "cached" | "ran" | "error" | "skipped"
    seconds: float = 0.0
    results: dict[str, Any] = field(default_factory=dict)
    error: SnippetError | None = None
    budget: float | None = None


@dataclass
class BuildState:
    snippets: dict[str, SnippetState]
    drift: list[Change] = field(default_factory=list)
    missing_records: list[str] = field(default_factory=list)  # snippets with no record file
    new_records: list[str] = field(default_factory=list)  # records written because they were missing
    orphan_records: list[Path] = field(default_factory=list)  # record files no snippet produces
    record_errors: list[str] = field(default_factory=list)
    keys: dict[str, str] = field(default_factory=dict)  # cache key of each snippet that has results


@dataclass
class Options:
    execute: bool = True  # False: a plain build, nothing runs, pages show placeholders
    fresh: bool = False  # ignore cached results (still refresh the cache)
    ci: bool = False  # fresh, and every result must have a record and every record a snippet
    workers: int = 0  # 0: one per core
    write_missing_records: bool = True  # outside CI, a new snippet's first results become its record
    select: tuple[str, ...] = ()  # glob patterns (e.g. "lecture07/*"): run only these, skip the rest


class BookSession:
    """Holds what survives between builds of one ``mkdocs serve``: file hashes and the last results."""

    def __init__(
        self, project_root: Path, snippets_dir: Path, cache_dir: Path, report_dir: Path, notebooks_dir: Path | None = None
    ) -> None:
        self.project_root = project_root
        self.snippets_dir = snippets_dir
        self.notebooks_dir = notebooks_dir  # docs/: notebook pages are executed like snippets
        self.report_dir = report_dir
        self.hasher = FileHasher()
        self.cache = Cache(cache_dir, project_root, self.hasher)
        import transformer_book

        self.package_dir = str(Path(transformer_book.__file__).resolve().parent)

    def discover(self) -> dict[str, Snippet]:
        return discover(self.snippets_dir, self.notebooks_dir)

    def _expected_times(self) -> dict[str, float]:
        try:
            rows = json.loads((self.report_dir / "timing.json").read_text(encoding="utf-8"))
            return {r["snippet"]: float(r["seconds"]) for r in rows if r.get("status") == "ran"}
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def build(self, options: Options, only: list[str] | None = None) -> BuildState:
        found = self.discover()
        requires: dict[str, list[str]] = {}
        bad_requires: dict[str, str] = {}
        for sid, snip in found.items():
            try:
                requires[sid] = snip.requires()
            except ValueError as exc:  # that snippet's error, not the whole build's
                requires[sid], bad_requires[sid] = [], str(exc)
        levels = dependency_levels(requires)
        if only is not None:
            unknown = [s for s in only if s not in found]
            if unknown:
                raise KeyError(f"unknown snippet(s): {', '.join(unknown)}; known: {', '.join(found)}")
        wanted = set(found) if only is None else set(only)
        if options.select:
            wanted = {sid for sid in wanted if any(fnmatch(sid, p) for p in options.select)}
        selected = closure(wanted, requires) if options.execute else set()
        states: dict[str, SnippetState] = {}
        for sid in set(found) - selected:
            if only is None:
                states[sid] = SnippetState(found[sid], "skipped")

        fresh = options.fresh or options.ci
        keys: dict[str, str] = {}
        fingerprints: dict[str, str] = {}
        for level in levels:
            to_run: list[Task] = []
            for sid in level:
                if sid not in selected:
                    continue
                snip = found[sid]
                if sid in bad_requires:
                    msg = bad_requires[sid]
                    states[sid] = SnippetState(snip, "error", error=SnippetError(msg, _rel(snip.path, self.project_root), 0, msg))
                    continue
                failed = [r for r in requires[sid] if r not in fingerprints]
                if failed:
                    msg = f"required snippet(s) failed or do not exist: {', '.join(failed)}"
                    states[sid] = SnippetState(snip, "error", error=SnippetError(msg, _rel(snip.path, self.project_root), 0, msg))
                    continue
                keys[sid] = cache_key(snip, snip.source(), {r: fingerprints[r] for r in requires[sid]})
                entry = None if fresh else self.cache.load(sid, keys[sid])
                if entry is not None:
                    payload = entry.payload
                    states[sid] = SnippetState(snip, "cached", entry.seconds, payload["results"], None, payload.get("budget"))
                    fingerprints[sid] = _fingerprint(keys[sid], entry.deps)
                else:
                    artifacts = tuple((r, str(self.cache.entry_path(r, keys[r]))) for r in requires[sid])
                    to_run.append(Task(sid, str(snip.path), str(self.project_root), self.package_dir, artifacts))
            outcomes = run_many(to_run, options.workers or None, self._expected_times())
            for sid, out in outcomes.items():
                snip = found[sid]
                if out.error is not None:
                    states[sid] = SnippetState(snip, "error", out.seconds, {}, out.error, out.budget)
                    continue
                states[sid] = SnippetState(snip, "ran", out.seconds, out.results, None, out.budget)
                self.cache.store(self._entry(keys[sid], out))
                fingerprints[sid] = _fingerprint(keys[sid], out.deps)

        state = BuildState(dict(sorted(states.items())), keys=keys)
        self._check_records(state, options, complete=only is None and not options.select)
        return state

    @staticmethod
    def _entry(key: str, out: Outcome) -> Entry:
        return Entry(key, out.snippet, out.deps, {"results": out.results, "budget": out.budget}, out.seconds)

    def _check_records(self, state: BuildState, options: Options, complete: bool) -> None:
        for sid, st in state.snippets.items():
            if st.status not in ("cached", "ran"):
                continue
            try:
                rec = records.load(st.snippet.record_path)
            except ValueError as exc:
                state.record_errors.append(str(exc))
                continue
            if rec is None:
                state.missing_records.append(sid)
                if options.write_missing_records and not options.ci:
                    records.save(st.snippet.record_path, records.build_record(sid, st.results))
                    state.new_records.append(sid)
                continue
            state.drift.extend(records.compare(sid, rec, st.results))
        if complete:
            known = {s.record_path.resolve() for s in self.discover().values()}
            for path in sorted(self.snippets_dir.rglob("*.record.json")):
                if path.resolve() not in known:
                    state.orphan_records.append(path)

    def accept(self, only: list[str] | None, workers: int = 0) -> tuple[BuildState, dict[str, list[Change]]]:
        """Re-execute (fresh) and rewrite records; returns the changes per snippet (old → new)."""
        state = self.build(Options(fresh=True, workers=workers, write_missing_records=False), only)
        diffs: dict[str, list[Change]] = {}
        for sid, st in state.snippets.items():
            if st.status != "ran":
                continue
            old = records.load(st.snippet.record_path)
            diffs[sid] = records.compare(sid, old, st.results)
            if old is None or diffs[sid]:
                records.save(st.snippet.record_path, records.build_record(sid, st.results))
        if only is None:
            for path in state.orphan_records:
                path.unlink()
        return state, diffs

    def requirements(self, sid: str) -> tuple[tuple[str, str], ...]:
        """Cache (or run) what ``sid`` requires; return (snippet, entry file) pairs for its Task."""
        snip = self.discover()[sid]
        required = snip.requires()
        if not required:
            return ()
        state = self.build(Options(), only=required)
        failed = [r for r in required if state.snippets[r].status not in ("cached", "ran")]
        if failed:
            raise RuntimeError(f"{sid} requires {', '.join(failed)}, which failed")
        return tuple((r, str(self.cache.entry_path(r, state.keys[r]))) for r in required)

    def write_timing(self, state: BuildState) -> list[dict[str, Any]]:
        rows = [
            {"snippet": sid, "status": st.status, "seconds": round(st.seconds, 3), "budget": st.budget}
            for sid, st in state.snippets.items()
        ]
        if any(r["status"] == "ran" for r in rows):
            # Keep the last real run times (for scheduling) when this build only hit the cache.
            atomic_write_text(self.report_dir / "timing.json", json.dumps(rows, ensure_ascii=False, indent=1))
        return rows
