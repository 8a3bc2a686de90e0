"""What must be the same on every machine that runs a snippet for one build: versions and project sources.

A cache key hashes the versions of Python, torch, numpy, matplotlib and the engine (:mod:`.environment`) and
the sources a snippet runs (its own, and the project modules it imports). A result computed on another machine
is this build's result only if all of these are the same there. So before a cluster worker runs a snippet
(:mod:`.dask_worker`) it computes its own identity, compares it with the build's, and refuses with the list
of what differs — ``version torch: build 2.13.0, worker 2.12.0``, ``source src/x.py: build 3f2a…, worker absent``.

The sources are every ``*.py`` file of the project outside hidden folders (``.venv``, ``.git``, the cache),
``__pycache__`` and installed packages — the snippets, their helpers, the book's library — and the engine's
own modules. (Numerical settings such as ``BOOK_THREADS`` are not compared: the build hands its own to every
task, see :mod:`.dask_worker`.)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from transformer_book.book.environment import versions
from transformer_book.book.files import ENGINE_DIR, FileHasher

SKIPPED_DIRS = {"__pycache__", "node_modules", "site-packages"}


def project_sources(root: Path) -> list[Path]:
    """The project's Python sources, sorted."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS]
        out.extend(Path(folder) / f for f in files if f.endswith(".py"))
    return sorted(out)


def identity(project_root: Path, hasher: FileHasher | None = None) -> dict[str, str]:
    """Name → value of everything a result depends on besides the numerical settings of the run."""
    hasher = hasher or FileHasher()
    root = project_root.resolve()
    out = {f"version {k}": v for k, v in versions().items()}
    out["python cache tag"] = sys.implementation.cache_tag or ""
    for path in project_sources(root):
        out[f"source {path.relative_to(root).as_posix()}"] = hasher(path) or "absent"
    if not ENGINE_DIR.is_relative_to(root):  # the engine is installed from elsewhere
        for path in sorted(ENGINE_DIR.rglob("*.py")):
            out[f"engine {path.relative_to(ENGINE_DIR).as_posix()}"] = hasher(path) or "absent"
    return out


def _short(value: str) -> str:
    return value[:12] if len(value) == 64 and all(c in "0123456789abcdef" for c in value) else value


def differences(build: dict[str, str], worker: dict[str, str]) -> list[str]:
    """One line per item that differs: ``name: build X, worker Y`` (hashes shortened)."""
    out = []
    for name in sorted(set(build) | set(worker)):
        b, w = build.get(name, "absent"), worker.get(name, "absent")
        if b != w:
            out.append(f"{name}: build {_short(b)}, worker {_short(w)}")
    return out
