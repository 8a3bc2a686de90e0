"""Computing snippets in the background while ``mkdocs serve`` already serves every page.

A serve build never waits for compute: it takes what the cache holds and renders the rest as placeholders
(``BookSession.build(..., execute_missing=False)``). This module runs the real build in a thread; each time a
snippet lands in the cache (or fails), it touches a *stamp* file that the server watches, so MkDocs rebuilds,
the pages pick up the new results, and livereload refreshes the browser. A failure is kept here (failures
are not cached) so that the next serve build shows it on its pages instead of waiting for it again.

The two threads share nothing they change in place: the background thread hands each failure over under a
lock, and a serve build gets a new :class:`.state.BuildState` from :meth:`BackgroundBuild.merge`.
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from transformer_book.book.files import atomic_write_text
from transformer_book.book.session import BookSession
from transformer_book.book.state import BuildState, Options, SnippetState
from transformer_book.book.types import SnippetError


HOLD_SECONDS = 120  # at most this long the background build waits for the first serve build to be written


@dataclass
class BackgroundBuild:
    session: BookSession
    options: Options
    stamp: Path  # touched whenever a result lands; the server watches its folder
    log: Callable[[str], None] = print
    log_error: Callable[[str], None] = print
    # Why the background build itself stopped (not a snippet's failure: the engine's), shown on every page
    # still waiting for a result, until the next edit starts it again.
    failure: SnippetError | None = None
    errors: dict[str, SnippetState] = field(default_factory=dict)  # snippet -> its failure (with the key it ran under)
    # Set once the first serve build has been written: until then the snippets wait, so that the pages are
    # rendered (and served) with the whole machine instead of sharing it with the trainings.
    released: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _again: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def merge(self, state: BuildState) -> BuildState:
        """A new state for the pages: ``state`` with a remembered failure in place of "pending" while the
        snippet's key is still the one that failed (``state`` itself is left as it is)."""
        with self._lock:  # what the background thread has handed over so far, read whole
            errors, failure = dict(self.errors), self.failure
        changed: dict[str, SnippetState] = {}
        for sid, st in state.snippets.items():
            failed = errors.get(sid)
            if st.status == "pending" and failed is not None and failed.key and failed.key == st.key:
                changed[sid] = failed
            elif st.status == "pending" and failure is not None:
                changed[sid] = SnippetState(st.snippet, "error", error=failure, key=st.key)
        return state.with_snippets(changed) if changed else state

    def serve_now(self, session: BookSession, options: Options, log_info: Callable[[str], None]) -> BuildState:
        """The state a serve build renders at once: what the cache and the records hold, the rest pending (and
        computed by this background build, which is started or asked to go round again)."""
        self.options = options
        state = self.merge(session.build(options, execute_missing=False))
        waiting = [sid for sid, st in state.snippets.items() if st.status == "pending"]
        if waiting:
            log_info(f"{len(waiting)} snippet(s) not computed yet: their pages show placeholders until the "
                     "background build fills them in")
            self.ensure_running()
        return state

    def ensure_running(self) -> None:
        """Start the background build, or ask the running one to go round once more (a source changed)."""
        with self._lock:
            if self.running:
                self._again = True
                return
            self.failure = None  # an edit starts it again: perhaps what stopped it is fixed
            self._thread = threading.Thread(target=self._run, name="book-background", daemon=True)
            self._thread.start()

    def wait(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def _landed(self, sid: str, st: SnippetState) -> None:
        with self._lock:
            if st.status == "error":
                self.errors[sid] = st
            elif st.status == "ran":
                self.errors.pop(sid, None)
            else:
                return
        atomic_write_text(self.stamp, f"{time.time()} {sid} {st.status}\n")

    def release(self) -> None:
        """The site has been written: the background build may use the cores now."""
        self.released.set()

    def _run(self) -> None:
        self.released.wait(timeout=HOLD_SECONDS)  # a build that never ends must not hold the results back
        while True:
            with self._lock:
                self._again = False
            start = time.perf_counter()
            try:
                state = self.session.build(self.options, progress=self._landed)
            except Exception as exc:  # noqa: BLE001 - a thread that dies silently leaves its pages "pending"
                detail = "".join(traceback.format_exception(exc))
                failure = SnippetError(f"the background build stopped: {type(exc).__name__}: {exc}",
                                       "(background build)", 0, detail)
                self.log_error(f"{failure.message}\n{detail}")
                with self._lock:
                    self.failure = failure
                    self._thread = None
                atomic_write_text(self.stamp, f"{time.time()} background-build error\n")  # rebuild: pages show it
                return
            ran = [sid for sid, st in state.snippets.items() if st.status in ("ran", "error")]
            if ran:
                self.log(f"background: {len(ran)} snippet(s) computed in {time.perf_counter() - start:.1f} s")
            with self._lock:
                if not self._again:
                    self._thread = None
                    return
