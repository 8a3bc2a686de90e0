"""The book's project: its root folder and the one way to open a build session on it.

Both the MkDocs plugin and the command line read the same settings (``plugins: - book:`` in ``mkdocs.yml``),
so a snippet run by hand uses the same snippets folder and cache as the build.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from transformer_book.book.session import BookSession
from transformer_book.book.storage.store import cache_location


def find_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) with a ``mkdocs.yml``."""
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "mkdocs.yml").is_file():
            return p
    raise SystemExit("run this inside the book's project (a folder with mkdocs.yml)")


def mkdocs_settings(root: Path) -> tuple[Path, Any]:
    """(the docs folder, the ``book`` plugin's validated options), read by MkDocs' own loader — the same
    reading as the build's, ``!ENV`` tags, inheritance and defaults included."""
    import logging

    from mkdocs.config import load_config

    logging.getLogger("mkdocs").setLevel(logging.ERROR)  # the command line's output is the engine's, not MkDocs'
    cfg = load_config(str(root / "mkdocs.yml"))
    plugin = cfg.plugins.get("book")
    if plugin is None:
        raise SystemExit(f"{root / 'mkdocs.yml'} does not use the book plugin (plugins: - book)")
    return Path(cfg.docs_dir), plugin.config


def open_session(root: Path | None = None) -> BookSession:
    root = root or find_root()
    docs_dir, book = mkdocs_settings(root)
    return BookSession(
        root,
        root / book.snippets_dir,
        cache_location(os.environ.get("BOOK_CACHE_DIR") or book.cache_dir, root),
        root / book.report_dir,
        docs_dir,
    )
