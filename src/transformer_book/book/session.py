"""One build of the book's results: decide what to run, use the cache, execute, compare with records."""

from __future__ import annotations

import json
from fnmatch import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import records
from .cache import Cache, Entry, FileHasher, atomic_write_text
from .discover import Snippet, cache_key, discover
from .execute import Outcome, SnippetError, Task, run_many
from .records import Change


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

    def __init__(self, project_root: Path, snippets_dir: Path, cache_dir: Path, report_dir: Path) -> None:
        self.project_root = project_root
        self.snippets_dir = snippets_dir
        self.report_dir = report_dir
        self.hasher = FileHasher()
        self.cache = Cache(cache_dir, project_root, self.hasher)
        import transformer_book

        self.package_dir = str(Path(transformer_book.__file__).resolve().parent)

    def _expected_times(self) -> dict[str, float]:
        try:
            rows = json.loads((self.report_dir / "timing.json").read_text(encoding="utf-8"))
            return {r["snippet"]: float(r["seconds"]) for r in rows if r.get("status") == "ran"}
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def build(self, options: Options, only: list[str] | None = None) -> BuildState:
        found = discover(self.snippets_dir)
        if only is not None:
            unknown = [s for s in only if s not in found]
            if unknown:
                raise KeyError(f"unknown snippet(s): {', '.join(unknown)}; known: {', '.join(found)}")
            found = {s: found[s] for s in only}
        states: dict[str, SnippetState] = {}
        selected = {sid for sid in found if not options.select or any(fnmatch(sid, p) for p in options.select)}
        if not options.execute:
            selected = set()
        for sid in set(found) - selected:
            states[sid] = SnippetState(found[sid], "skipped")
        if not selected:
            return BuildState(states)

        fresh = options.fresh or options.ci
        keys: dict[str, str] = {}
        to_run: list[Task] = []
        for sid, snip in found.items():
            if sid not in selected:
                continue
            source = snip.source()
            keys[sid] = cache_key(snip, source)
            entry = None if fresh else self.cache.load(sid, keys[sid])
            if entry is not None:
                payload = entry.payload
                states[sid] = SnippetState(snip, "cached", entry.seconds, payload["results"], None, payload.get("budget"))
            else:
                to_run.append(Task(sid, str(snip.path), str(self.project_root), self.package_dir))

        outcomes = run_many(to_run, options.workers or None, self._expected_times())
        for sid, out in outcomes.items():
            snip = found[sid]
            if out.error is not None:
                states[sid] = SnippetState(snip, "error", out.seconds, {}, out.error, out.budget)
                continue
            states[sid] = SnippetState(snip, "ran", out.seconds, out.results, None, out.budget)
            self.cache.store(self._entry(keys[sid], out))

        state = BuildState(dict(sorted(states.items())))
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
            known = {s.snippet.record_path.resolve() for s in state.snippets.values()}
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

    def write_timing(self, state: BuildState) -> list[dict[str, Any]]:
        rows = [
            {"snippet": sid, "status": st.status, "seconds": round(st.seconds, 3), "budget": st.budget}
            for sid, st in state.snippets.items()
        ]
        if any(r["status"] == "ran" for r in rows):
            # Keep the last real run times (for scheduling) when this build only hit the cache.
            atomic_write_text(self.report_dir / "timing.json", json.dumps(rows, ensure_ascii=False, indent=1))
        return rows
