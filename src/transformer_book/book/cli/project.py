"""The book's project for the command line: its root folder, its settings, and a session opened from them.

The command line reads ``mkdocs.yml`` with MkDocs' own loader and opens its session where the plugin opens its
own (:func:`.site.config.open_session`), so a snippet run by hand uses the same snippets folder, cache, executor
and timeout as the build.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformer_book.book.session import BookSession


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
    """A session on the project at ``root`` (default: the one around the working directory), opened as the
    plugin opens it (:func:`.site.config.open_session`): ``BOOK_EXECUTOR``, ``BOOK_CACHE_DIR`` … included."""
    from transformer_book.book.site.config import open_session as open_with

    root = root or find_root()
    docs_dir, book = mkdocs_settings(root)
    return open_with(book, root, docs_dir)
