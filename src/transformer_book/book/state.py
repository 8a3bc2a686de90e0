"""What a build is asked to do and what it found: its options, each snippet's state, drift and record problems.

Plain data. The session (:mod:`.session`) fills a :class:`BuildState`; the reports (:mod:`.site.report`),
the pages (:mod:`.site.plugin`) and the build behind ``serve`` (:mod:`.site.background`) read it. A state is
never changed once handed over: whoever has something to add makes a new one (:meth:`BuildState.with_snippets`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from transformer_book.book.checking.drift import Change
from transformer_book.book.discover import Snippet
from transformer_book.book.results import Result
from transformer_book.book.storage.cache import Entry
from transformer_book.book.types import SnippetError


@dataclass
class Options:
    """How to build: the plugin's settings (``mkdocs.yml``) and their environment overrides (:mod:`.site.config`),
    changed per command by the command line (``accept`` is fresh, ``run`` selects one snippet …)."""

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

    def replace(self, **changes: object) -> "Options":
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


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

    def with_snippets(self, changed: dict[str, SnippetState]) -> "BuildState":
        """A new state: this one with ``changed`` in place of those snippets' states (this one is left as it is)."""
        return dataclasses.replace(self, snippets={**self.snippets, **changed})
