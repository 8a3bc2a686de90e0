"""Remembered computations: one mechanism, each value kept under an explicit key and the version it was made from.

``mkdocs serve`` rebuilds after every save, and a build asks the same questions many times (each record from
scheduling, the drift check and the pages; each page's references from three places). Every answer the engine
keeps between questions is kept by a :class:`Memo`, and every memo says in one place what its answer depends on:

- the **key** names what the answer is about (a file, a snippet, a page);
- the **version** is everything the answer was computed from that can change: a file's ``(mtime_ns, size)``
  (:func:`file_version`), a page's text, a snippet's source bytes, a cache entry's key with its record file's
  version. An answer is reused only while the version is equal; a new version replaces it (one answer per key,
  so a memo holds no more than one answer for each thing it is about).

A computation that raises is not remembered (the next question computes again). The memos of the engine:

=====================================  ==================================  ===================================
memo                                   key                                 version
=====================================  ==================================  ===================================
``files.FileHasher`` (digests)         (path, by code or by bytes)         the file's version
``discover`` (declarations)            snippet file                        its source bytes
``rendering.pages`` (references)       (page, front-matter lines)          the page's text
``site.webfont`` (characters)          file                                the file's version
``checking.drift_page`` (page lines)   page file                           the file's version
``session.BookSession`` (verdicts)     snippet                             (entry key, record file version)
``checking.records`` (records read)    record file                         the file's version
``rendering.code_excerpt`` (sources)   package file                        the file's version
=====================================  ==================================  ===================================

(The pages, the claims page and the scheduler read records through ``checking.records``, whose memo is the
only one each record goes through.) Three kinds of remembered value deliberately have no version:

- facts of the running interpreter that cannot change while it runs (library versions, the CPU, in
  :mod:`.environment`): ``functools.lru_cache`` computes each once per process;
- typeset formulas (:class:`.site.mathjax.Store`): the key is a hash of everything the answer is made from
  (the formula, the display mode, MathJax's version and settings), so an answer can never go stale; the store
  is a folder shared between builds, read through a dict of what this build already read;
- what a snippet process ran (:data:`.execution.worker._EXECUTED`): each file's digest as it was when the
  process first read it. That is a record, not a memo — a file saved while the snippet runs must keep the digest
  of what ran, so that the next build sees the change and runs the snippet again.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


def file_version(path: Path | str) -> tuple[int, int] | None:
    """What a file's contents are assumed from: ``(mtime_ns, size)``, None when there is no such file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


class Memo(Generic[V]):
    """Answers kept by key, each valid for the version it was computed from (thread-safe)."""

    def __init__(self, name: str) -> None:
        self.name = name  # what it remembers, for whoever reads a profile or a debugger
        self._kept: dict[Hashable, tuple[Hashable, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, version: Hashable, compute: Callable[[], V]) -> V:
        """The answer for ``key`` at ``version``: remembered, or ``compute()``-d now and remembered."""
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and kept[0] == version:
            return kept[1]
        value = compute()
        with self._lock:
            self._kept[key] = (version, value)
        return value

    def forget(self, key: Hashable | None = None) -> None:
        """Drop the answer for ``key`` (all answers without one)."""
        with self._lock:
            if key is None:
                self._kept.clear()
            else:
                self._kept.pop(key, None)

    def __len__(self) -> int:
        return len(self._kept)
