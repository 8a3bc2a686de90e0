"""Dirty rebuilds under ``serve``: which pages must be re-rendered, and what MkDocs forgets about the others.

``mkdocs serve --dirty`` (what ``scripts/serve.sh`` runs, so that a prose edit is back in the browser in half
a second) re-renders only the pages whose source changed or whose results landed. The other pages are not
read again, so MkDocs does not know their titles — every page it re-renders then shows a navigation of
"None" (upstream mkdocs issue 4047) — and mkdocs-autorefs, a fresh instance at every rebuild, knows only the
anchors of the pages re-rendered, so their cross-references to the API pages stay as raw ``[x][y]`` text.

:class:`PageMemory` keeps both from every build that did read a page, and gives them back, before the
navigation is rendered and before autorefs resolves references, for the pages this rebuild skipped. Titles
are set on the page (MkDocs' ``Page.title`` may be overwritten); anchors go back through autorefs' public
``register_anchor``. Reading autorefs' anchors after a build uses its internal maps (mkdocs-autorefs 1.4);
if they are not there, nothing is restored and the rebuild is as MkDocs leaves it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable


class ShownResults:
    """What each snippet's pages last showed. In a dirty rebuild MkDocs re-renders only pages whose source
    changed; a page whose *results* changed must be re-rendered too, although its Markdown did not: a snippet
    that re-ran, failed, landed in the background, or came back from the cache after an edit was undone (a
    fixed error must not stay)."""

    def __init__(self) -> None:
        self.signatures: dict[str, tuple] = {}  # snippet -> signature (see ``signature``)

    @staticmethod
    def signature(state: Any, entry: Any) -> tuple:
        """What a snippet's pages show: its results (the entry's fingerprint), or its status and error."""
        if entry is not None:
            return ("results", entry.fingerprint)
        if state.error is not None:
            return (state.status, state.error.location(), state.error.message)
        return (state.status, state.key)

    def update(self, build: Any) -> set[str]:
        """Remember what this build shows; return the snippets whose pages now show something else."""
        changed = set()
        for sid, st in build.snippets.items():
            sig = self.signature(st, build.entries.get(sid))
            if self.signatures.get(sid) != sig:
                changed.add(sid)
            self.signatures[sid] = sig
        return changed

    @staticmethod
    def mark_pages(files: Any, changed: set[str], usage: dict[tuple[str, str], list[str]], build: Any) -> None:
        """Make MkDocs re-render every page that shows a result of a ``changed`` snippet (and a changed
        notebook page itself)."""
        pages = {where.rsplit(":", 1)[0] for (sid, _), wheres in usage.items() if sid in changed for where in wheres}
        pages |= {f"{sid}.ipynb" for sid in changed if build.snippets[sid].snippet.is_notebook}
        ShownResults.mark_modified(files, pages)

    @staticmethod
    def mark_modified(files: Any, pages: Iterable[str]) -> None:
        """Make MkDocs re-render these pages (by source path) in a dirty rebuild."""
        for page in pages:
            f = files.get_file_from_path(page)
            if f is not None:
                f.is_modified = lambda: True  # type: ignore[method-assign]


@dataclass
class PageMemory:
    titles: dict[str, str] = field(default_factory=dict)  # page src_uri -> its title
    anchors: list[tuple[str, str, str, bool]] = field(default_factory=list)  # (identifier, page url, anchor, primary)

    def restore(self, config: Any, files: Any) -> None:
        """Before anything renders (``on_env``): give the pages this build did not read their titles, and
        their anchors back to autorefs; remember the titles of those it did read."""
        pages = [f.page for f in files.documentation_pages() if f.page is not None]
        for page in pages:
            if page.title is not None:
                self.titles[page.file.src_uri] = page.title
            elif page.file.src_uri in self.titles:
                page.title = self.titles[page.file.src_uri]
        autorefs = _autorefs(config)
        if autorefs is None:
            return
        skipped = {page.url: page for page in pages if page.content is None}  # not rendered in this build
        for identifier, url, anchor, primary in self.anchors:
            if url in skipped:
                autorefs.register_anchor(skipped[url], identifier, anchor, primary=primary)

    def remember(self, config: Any) -> None:
        """After a build (``on_post_build``): every anchor autorefs resolved against."""
        autorefs = _autorefs(config)
        if autorefs is None:
            return
        anchors = []
        for maps, primary in ((getattr(autorefs, "_primary_url_map", {}), True),
                              (getattr(autorefs, "_secondary_url_map", {}), False)):
            for identifier, urls in maps.items():
                for url in urls:
                    page_url, _, anchor = url.partition("#")
                    anchors.append((identifier, page_url, anchor or identifier, primary))
        self.anchors = anchors


def _autorefs(config: Any) -> Any:
    plugin = config.plugins.get("autorefs") if hasattr(config.plugins, "get") else None
    return plugin if plugin is not None and hasattr(plugin, "register_anchor") else None
