"""The book's project: its root folder and the one way to open a build session on it.

Both the MkDocs plugin and the command line read the same settings (``plugins: - book:`` in ``mkdocs.yml``),
so a snippet run by hand uses the same snippets folder and cache as the build.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .session import BookSession
from .store import cache_location


def find_root(start: Path | None = None) -> Path:
    """The nearest folder at or above ``start`` (default: the working directory) with a ``mkdocs.yml``."""
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "mkdocs.yml").is_file():
            return p
    raise SystemExit("run this inside the book's project (a folder with mkdocs.yml)")


def mkdocs_settings(root: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(``mkdocs.yml``, the ``book`` plugin's options in it); tags such as ``!!python/…`` are ignored."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    data = yaml.load((root / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader) or {}
    for plugin in data.get("plugins") or []:
        if isinstance(plugin, dict) and "book" in plugin:
            return data, dict(plugin["book"] or {})
    return data, {}


def open_session(root: Path | None = None) -> BookSession:
    root = root or find_root()
    data, book = mkdocs_settings(root)
    return BookSession(
        root,
        root / book.get("snippets_dir", "snippets"),
        cache_location(os.environ.get("BOOK_CACHE_DIR") or book.get("cache_dir", ".book-cache"), root),
        root / book.get("report_dir", ".book-cache/report"),
        root / data.get("docs_dir", "docs"),
    )
