"""One build's pages: every directive of a page's Markdown replaced by what it places, and the page's notebook.

:class:`PageWriter` is made for one build (:mod:`.plugin` makes it in ``on_pre_build``, once the snippets have
run) and decides, for each directive, what a reader sees: the result; a placeholder (execution off, a partial
build, a snippet skipped); the recorded result while ``mkdocs serve`` recomputes it; the snippet's error; its
source, folded, after the first table, figure or block it shows (or at the page's end for a snippet cited only
in sentences); or a ``{{ code … }}`` excerpt of the package. A reference nothing can resolve fails the build
with page:line (under ``serve`` it is shown on the page and logged instead).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any, Callable, Iterable

from mkdocs.exceptions import PluginError

from transformer_book.book.checking import records
from transformer_book.book.environment import measured_here
from transformer_book.book.rendering import code_excerpt, page_notebook, pages
from transformer_book.book.rendering.render import Renderer, shown_source
from transformer_book.book.state import BuildState, Options

SOURCES_INTRO = '\n\n<p class="book-sources-intro">本页正文中的数字由下面的代码算出：</p>\n\n'


@dataclass
class PageWriter:
    excerpts: code_excerpt.Excerpts
    state: BuildState
    options: Options
    project_root: Path
    known: Callable[[], Iterable[str]]  # every snippet id of the book (for the message on an unknown one)
    serving: bool = False
    log_error: Callable[[str], None] = print
    notebooks: dict[str, Any] = field(default_factory=dict)  # page src_uri -> its notebook
    _views: dict[str, page_notebook.SnippetView] | None = None
    _shown: set[str] = field(default_factory=set)  # the page being written: snippets whose code fold it placed

    def __post_init__(self) -> None:
        self.renderer = Renderer(self.project_root, self.measured_on, self.record_of)

    def measured_on(self, sid: str) -> str:
        """Where and when a snippet's shown results were computed: its cache entry says (the worker that ran
        it, the day it ran), whether this build ran it, took it from the cache or from a cluster."""
        entry = self.state.entries.get(sid)
        return entry.measured_on if entry is not None and entry.measured_on else measured_here()

    def record_of(self, sid: str) -> records.Record | None:
        """The committed record of a snippet, for the origin of what it shows (``records.read`` remembers each
        record file by its version: read once while it does not change)."""
        st = self.state.snippets.get(sid)
        try:
            return records.read(st.snippet.record_path) if st is not None else None
        except ValueError:
            return None

    def page(self, markdown: str, page_path: str, title: str, abs_src_path: str | None, url: str) -> str:
        """The page's Markdown with its directives replaced (and its notebook made, in :attr:`notebooks`)."""
        self.renderer.page_url = url
        offset = pages.front_matter_lines(abs_src_path, markdown)
        try:
            explicit = {ref.snippet for ref in pages.find_refs(markdown, page_path, offset) if ref.kind == "source"}
        except pages.PageRefError as exc:
            return self._fail(exc.where, exc.message, markdown_fallback=markdown)
        self._shown = set()
        inline: dict[str, None] = {}  # snippets whose values or claims the page shows, in page order
        self.excerpts.begin_page(page_path)

        def render_ref(ref: pages.Ref) -> str:
            if not ref.own_line:
                inline.setdefault(ref.snippet)
            try:
                if (directive := pages.DIRECTIVES.get(ref.kind)) is not None:
                    return directive.site(ref, self)
                return self._place(ref, explicit)
            except pages.PageRefError as exc:
                return self._fail(exc.where, exc.message, inline=not ref.own_line)

        out = pages.render(markdown, page_path, offset, render_ref)
        if self.options.execute and page_path.endswith(".md"):
            nb = page_notebook.build(page_path, title or page_path, markdown, offset, self.views(),
                                     lambda path: shown_source(path.read_text(encoding="utf-8")),
                                     excerpt=self.excerpts.notebook_cell)
            if nb is not None:
                self.notebooks[page_path] = nb
        return out + self._inline_sources([sid for sid in inline if sid not in self._shown])

    def views(self) -> dict[str, page_notebook.SnippetView]:
        """What a page's notebook needs of each snippet, made once for the build (every page asks; reading each
        snippet's ``REQUIRES`` for each of 60 pages took 1.5 s of a 13 s build). Durations come from the
        committed records, so that a notebook's text does not depend on the machine that built it."""
        if self._views is None:
            self._views = {sid: page_notebook.SnippetView(
                               sid, st.snippet.path, st.snippet.requires(), records.seconds(self.record_of(sid)),
                               st.results if st.status in ("cached", "ran") else None)
                           for sid, st in self.state.snippets.items() if not st.snippet.is_notebook}
        return self._views

    # -- what the directives that are not results ask for (:data:`.pages.DIRECTIVES`) --------------------------

    def source_fold(self, ref: pages.Ref) -> str:
        """``{{ source … }}``: the snippet's code, folded, here (and not again at the page's end)."""
        st = self._snippet(ref)
        if st is None:
            return self.renderer.placeholder(ref)
        self._shown.add(ref.snippet)
        return self.renderer.source(st.snippet.path, self.helpers(ref.snippet), ref.snippet)

    def excerpt(self, ref: pages.Ref) -> str:
        """``{{ code … }}``: a function, class or method of the package as its file has it."""
        return self.excerpts.render(ref)

    # -- results -------------------------------------------------------------------------------------------------

    def _snippet(self, ref: pages.Ref) -> Any:
        """The snippet a directive names (None: a partial build that does not judge this page); an unknown one
        fails with page:line."""
        st = self.state.snippets.get(ref.snippet)
        if st is None and self.options.select and not any(fnmatch(ref.snippet, p) for p in self.options.select):
            return None  # a partial build (BOOK_ONLY) does not judge other authors' pages
        if st is None:
            known = ", ".join(sorted(self.known())) or "(none)"
            raise pages.PageRefError(ref.where, f"unknown snippet {ref.snippet!r} (snippets: {known})")
        return st

    def _place(self, ref: pages.Ref, explicit: set[str]) -> str:
        st = self._snippet(ref)
        if st is None:
            return self.renderer.placeholder(ref)
        if st.status == "skipped":
            return self.renderer.placeholder(ref)
        if st.status == "pending":
            return self.renderer.pending(ref, st.snippet.record_path)
        if st.error is not None:
            return self.renderer.error(ref, st.error)
        result = st.results.get(ref.key)
        if result is None:
            raise pages.PageRefError(
                ref.where, f"snippet {ref.snippet!r} has no result {ref.key!r} (it has: {', '.join(st.results)})"
            )
        body = self.renderer.result(ref, result)
        if result.folds_code and ref.snippet not in explicit and ref.snippet not in self._shown:
            self._shown.add(ref.snippet)
            body += "\n" + self.renderer.source(st.snippet.path, self.helpers(ref.snippet), ref.snippet)
        return body

    def helpers(self, sid: str) -> tuple[Path, ...]:
        """The helper modules (``_*.py`` beside the snippet) that the snippet imported when it ran."""
        entry = self.state.entries.get(sid)
        folder = self.state.snippets[sid].snippet.path.parent
        if entry is None:
            return ()
        found = [self.project_root / rel for rel in entry.deps]
        return tuple(p for p in found if p.parent == folder and p.name.startswith("_") and p.suffix == ".py")

    def _inline_sources(self, sids: list[str]) -> str:
        """The code folds of the snippets a page cites only inline, at its end: every number's origin popover
        links to the code that computed it on the same page."""
        folds = [self.renderer.source(self.state.snippets[sid].snippet.path, self.helpers(sid), sid)
                 for sid in sids if sid in self.state.snippets and self.state.snippets[sid].status != "skipped"]
        return SOURCES_INTRO + "\n".join(folds) if folds else ""

    def _fail(self, where: str, message: str, inline: bool = False, markdown_fallback: str | None = None) -> str:
        if not self.serving:
            raise PluginError(f"{where}: {message}")
        self.log_error(f"{where}: {message}")
        text = html.escape(f"{where}: {message}", quote=False)
        if inline:
            return f'<span class="book-error">⚠ {text}</span>'
        block = f'!!! failure "引用出错"\n\n    {text}\n'
        return block + ("\n" + markdown_fallback if markdown_fallback is not None else "")
