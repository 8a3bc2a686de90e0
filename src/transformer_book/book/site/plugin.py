"""The MkDocs events: run snippets before the build, place results in pages, fix the site, report.

This class only wires events to the modules that do the work: :mod:`.config` (options), :mod:`.session`
(running and checking snippets), :mod:`.render` (results into Markdown), :mod:`.report` (what the build
says), and the site fixes (:mod:`.fix_notebook_html`, :mod:`.fix_search`, :mod:`.fix_palette`, :mod:`.mathjax`,
and the web font: :mod:`.site_font`).
"""

from __future__ import annotations

import html
import threading
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from mkdocs.config.config_options import ExtraScriptValue
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, event_priority, get_plugin_logger
from mkdocs.structure.files import File, Files

from transformer_book.book.checking import drift_page, wording
from transformer_book.book.site import config as book_config
from transformer_book.book.site import fix_notebook_html, fix_palette, fix_search, mathjax, page_html, print_edition
from transformer_book.book.site import report
from transformer_book.book.site import page_script
from transformer_book.book.site.site_font import SiteFont, font_file
from transformer_book.book.rendering import claim_index, code_excerpt, origin, page_notebook, pages
from transformer_book.book.execution import pool
from transformer_book.book.types import ExecutorUnavailable
from transformer_book.book.checking import records
from transformer_book.book.artifacts import decode
from transformer_book.book.site.background import BackgroundBuild
from transformer_book.book.site.dirty_pages import PageMemory, ShownResults
from transformer_book.book.environment import measured_here
from transformer_book.book.files import atomic_write_text
from transformer_book.book.memo import Memo
from transformer_book.book.rendering.render import Renderer, shown_source, site_files
from transformer_book.book.session import BookSession
from transformer_book.book.state import BuildState, Options
from transformer_book.book.types import NOTEBOOK_OUTPUT

log = get_plugin_logger("book")


class BookPlugin(BasePlugin[book_config.BookConfig]):
    def __init__(self) -> None:
        self.command = "build"
        self.dirty = False
        self.session: BookSession | None = None
        self.state: BuildState | None = None
        self.usage: report.Usage = {}
        self.options = Options()
        self.background: BackgroundBuild | None = None
        self.shown = ShownResults()  # what each snippet's pages last showed: a dirty rebuild re-renders changes
        self.notebooks: dict[str, Any] = {}  # page src_uri -> its notebook (this build)
        self.builds = 0  # this process's builds so far: what a memo of "this build's" answers is valid for
        # What a page's notebook needs of each snippet, made at the build's first page (memo.Memo: one per build)
        self.views: Memo[dict[str, page_notebook.SnippetView]] = Memo("page notebook views")
        self.font = SiteFont()  # the web font of this build, cut while the pages render
        self.memory = PageMemory()  # titles and anchors of pages a dirty rebuild does not read
        self.print_pdf = False  # this build prints the book into a PDF (print_edition)
        self.nav: Any = None
        self.excerpts: code_excerpt.Excerpts | None = None  # {{ code … }}: the package's source beside the prose
        self.math: mathjax.SiteMath | None = None  # the formulas of this build's pages
        self.files: Files | None = None  # this build's files (on_files)

    # -- set-up --------------------------------------------------------------------------------------

    def on_startup(self, *, command: str, dirty: bool) -> None:
        # Defining on_startup keeps this instance across `mkdocs serve` rebuilds (file hashes, results).
        self.command = command
        self.dirty = dirty  # `mkdocs serve --dirty`: MkDocs re-renders only modified pages

    @property
    def serving(self) -> bool:
        return self.command == "serve"

    def on_config(self, config: Any) -> Any:
        missing = book_config.missing_extensions(config)
        if missing:
            raise PluginError(
                "The book plugin needs these Markdown extensions in mkdocs.yml (markdown_extensions): "
                + "; ".join(missing)
            )
        self.project_root = Path(config.config_file_path).resolve().parent
        cfg = self.config
        self.options = book_config.options(cfg)
        if self.session is not None and self.session.project_root != self.project_root:
            # MkDocs keeps an instance of a plugin that defines on_startup for the whole process (serve keeps
            # it across rebuilds); another project loaded in the same process must not inherit this one's state.
            self.session, self.state, self.background, self.shown = None, None, None, ShownResults()
        if self.session is None:
            try:
                self.session = book_config.open_session(cfg, self.project_root, Path(config.docs_dir))
            except ValueError as exc:  # an option the session cannot use (result_kinds naming a broken module)
                raise PluginError(str(exc)) from None
        self.renderer = Renderer(self.project_root, self._measured_on, self._record_of)
        if self.excerpts is None or self.excerpts.root != self.project_root:
            self.excerpts = code_excerpt.Excerpts(self.project_root, self.project_root / cfg.code_package,
                                                  Path(config.docs_dir))
        if self.serving and self.options.execute and self.background is None:
            # `mkdocs serve` never waits for compute: pages are served at once, results land in the background.
            self.background = BackgroundBuild(self.session, self.options, self.session.cache.root / "serve" / "landed",
                                              log=log.info, log_error=log.error)
        self._start_early(config)
        self.print_pdf = False
        if book_config.pdf(cfg) and not self.serving:
            why_not = print_edition.unavailable()
            if why_not:
                log.info(f"print edition skipped: {why_not}")
            self.print_pdf = not why_not
        self.math = None
        if cfg.mathjax:  # formulas typeset by the build (or, where it cannot, by MathJax in the reader's browser)
            why_not = "mkdocs serve shows a new formula at once" if self.serving else mathjax.unavailable()
            if why_not and not self.serving:
                log.info(f"formulas are typeset in the reader's browser: {why_not}")
            store = None if why_not else mathjax.Store(self._cache_root() / "math")
            self.math = mathjax.SiteMath(store, log.warning)
        # The engine's own scripts and styles, shipped with the site. The scripts are deferred: they only
        # enhance a page that is already readable (popovers, heatmap cells, folds), so they never hold up its
        # first paint; deferred scripts still run in order, after Material's bundle, before DOMContentLoaded.
        for script in (*origin.SCRIPTS, page_script.URI):
            if script not in [str(s) for s in config.extra_javascript]:
                value = ExtraScriptValue(script)
                value.defer = True
                config.extra_javascript.append(value)
        for style in origin.STYLES:
            if style not in [str(s) for s in config.extra_css]:
                config.extra_css.append(style)
        return config

    def _cache_root(self) -> Path:
        return self.session.cache.root if self.session is not None else self.project_root / ".book-cache"

    def _start_early(self, config: Any) -> None:
        """Start in the background what the build will wait for later, so that it overlaps the wait for the
        snippets — only when this build will wait for them (fresh, CI, or no result cache yet): the forkserver's
        imports (about 2 s: torch, numpy, matplotlib) and the search plugin's Chinese word segmenter (jieba
        loads its dictionary on first use, about 0.7 s of Python). In a warm build there is no wait to fill:
        a jieba thread then only takes the GIL from the main thread, which waited up to a switch interval
        (5 ms) after every file it read — 0.3 s of a 1.6 s warm build — so jieba loads when search needs it."""
        if not (self.command == "build" and self.options.execute
                and (self.options.fresh or not self.session.cache.has_entries())):
            return
        if self.options.executor == "local":
            threading.Thread(target=pool.warm_up, name="book-warm-up", daemon=True).start()
        if "search" in config.plugins or "material/search" in config.plugins:
            try:
                import jieba
            except ImportError:
                return
            threading.Thread(target=jieba.initialize, name="book-jieba", daemon=True).start()

    def on_serve(self, server: Any, *, config: Any, builder: Any) -> Any:
        # Start the worker forkserver (it imports torch, numpy, matplotlib: ~2 s) now, in the background,
        # so that the first snippet edit of the session does not wait for it.
        if self.options.execute:
            threading.Thread(target=pool.warm_up, daemon=True).start()
        for rel in self.config.watch:
            path = self.project_root / rel
            if path.exists():
                server.watch(str(path))
        if self.background is not None:  # results landing in the background rebuild the pages that show them
            self.background.stamp.parent.mkdir(parents=True, exist_ok=True)
            server.watch(str(self.background.stamp.parent))
        return server

    def on_env(self, env: Any, *, config: Any, files: Files) -> Any:
        # MkDocs makes a new Jinja environment for every build, so each `mkdocs serve` rebuild compiled
        # the theme's ~70 templates again (over a second). Cache the compiled bytecode by template source.
        import jinja2

        if env.bytecode_cache is None:
            cache_dir = self.session.cache.root / "jinja" if self.session else self.project_root / ".book-cache" / "jinja"
            cache_dir.mkdir(parents=True, exist_ok=True)
            env.bytecode_cache = jinja2.FileSystemBytecodeCache(str(cache_dir))
        # before autorefs resolves references (its on_env runs at priority -50) and before any page renders
        self.memory.restore(config, files)
        return env

    # -- running snippets ----------------------------------------------------------------------------

    def _measured_on(self, sid: str) -> str:
        """Where and when a snippet's shown results were computed: its cache entry says (the worker that ran
        it, the day it ran), whether this build ran it, took it from the cache or from a cluster."""
        entry = self.state.entries.get(sid) if self.state is not None else None
        if entry is not None and entry.measured_on:
            return entry.measured_on
        return measured_here()

    def _record_of(self, sid: str) -> dict[str, Any] | None:
        """The committed record of a snippet, for the origin of what it shows (``records.read`` remembers each
        record file by its version: read once while it does not change)."""
        st = self.state.snippets.get(sid) if self.state is not None else None
        try:
            return records.read(st.snippet.record_path) if st is not None else None
        except ValueError:
            return None

    def on_pre_build(self, *, config: Any) -> None:
        assert self.session is not None
        self.builds += 1
        self.notebooks = {}
        self.usage = pages.usage(Path(config.docs_dir))
        self.excerpts.start_build()
        if self.background is not None and (self.state is None or self.background.running):
            # The first serve build, and any rebuild while the backlog is still being computed: serve at once,
            # compute in the background. Later rebuilds (an edit) run what they need before rendering, so one
            # edit gives one rebuild that already shows its results.
            self.background.options = self.options
            state = self.background.merge(self.session.build(self.options, execute_missing=False))
            waiting = [sid for sid, st in state.snippets.items() if st.status == "pending"]
            if waiting:
                log.info(f"{len(waiting)} snippet(s) not computed yet: their pages show placeholders until the "
                         "background build fills them in")
                self.background.ensure_running()
        else:
            try:
                state = self.session.build(self.options)
            except ExecutorUnavailable as exc:  # the message, not a traceback
                raise PluginError(str(exc)) from None
        self.state = state
        self.timing_rows = self.session.write_timing(state)

        errors = report.error_report(state, self.usage)
        if errors:
            if self.serving:
                log.error(errors)
            else:
                raise PluginError("A snippet failed; the build stops.\n" + errors)
        for sid in state.new_records:
            log.info(f"new record written: snippets/{sid}.record.json (commit it with the snippet)")
        drift_text = report.drift_report(state, self.usage)
        if not self.options.select:  # a partial build sees part of the drift: it leaves the last report alone
            shown = drift_page.write(self.session.report_dir, state.drift, state.snippets, self.usage,
                                     self.project_root, Path(config.docs_dir),
                                     font_file(self.config.webfont, self.project_root))
            if shown is not None:  # printed last: the page to open before deciding anything
                drift_text += f"\nDrift report (figures, tables and claims, recorded vs now): {shown}"
        texts = [t for t in (report.records_report(state, self.options.ci), drift_text) if t]
        if texts and self.options.ci:
            raise PluginError("\n".join(texts))
        for text in texts:
            log.warning(text)
        uncited = report.uncited_claims(state, self.usage)
        if uncited and not self.options.select:
            log.warning(uncited)

    @event_priority(-100)  # after mkdocs-jupyter has wrapped notebook files (we set the wrapper's source path)
    def on_files(self, files: Files, *, config: Any) -> Files:
        if self.state is not None:
            for path, content in site_files({sid: st.results for sid, st in self.state.snippets.items()}):
                files.append(File.generated(config, path, content=content))
        self._use_executed_notebooks(files)
        if self.state is not None:
            changed = self.shown.update(self.state)  # and remember what is shown, for the next dirty rebuild
            if self.dirty:
                self.shown.mark_pages(files, changed, self.usage, self.state)
        if self.serving:  # excerpts whose source changed, API pages whose "在书中" links changed
            for page in self.excerpts.changed_pages():
                f = files.get_file_from_path(page)
                if self.dirty and f is not None:
                    f.is_modified = lambda: True  # type: ignore[method-assign]
        if self.config.mathjax:
            files.append(File.generated(config, mathjax.URI, abs_src_path=str(mathjax.source())))
        if self.state is not None:  # the "完整记录" link of every origin popover
            for sid, st in self.state.snippets.items():
                if st.snippet.record_path.exists():
                    files.append(File.generated(config, origin.record_target(sid), abs_src_path=str(st.snippet.record_path)))
        for uri, path in origin.assets().items():
            files.append(File.generated(config, uri, abs_src_path=str(path)))
        files.append(File.generated(config, page_script.URI, content=page_script.SCRIPT))
        self.files = files  # the generated figures, for the sizes of their <img> (page_html)
        if self.session is not None and files.get_file_from_path(claim_index.PAGE) is None:
            # the authors' guide page of every claim beside its sentence, from the records as they are now
            found = {sid: snip.record_path for sid, snip in self.session.discover().items()}
            claims = claim_index.index(Path(config.docs_dir), found)
            files.append(File.generated(config, claim_index.PAGE, content=claim_index.page_markdown(claims)))
            for conflict in wording.conflicts(claims):  # a warning: the strict build and CI fail on it
                log.warning(conflict.describe())
        self.font.start(config, self.config, self.project_root,
                        self.session.cache.root if self.session else None,
                        self.session.snippets_dir if self.session else None)
        return files

    def _use_executed_notebooks(self, files: Files) -> None:
        """Point each notebook page at its executed copy (outputs included): what mkdocs-jupyter renders
        and readers download. Without results (execution off, or the notebook failed) the page shows the
        notebook as saved."""
        if self.state is None or self.session is None:
            return
        out_dir = self.session.cache.root / "notebooks"
        for sid, entry in self.state.entries.items():
            blob = self.session.cache.artifact_files(entry).get(NOTEBOOK_OUTPUT)
            f = files.get_file_from_path(f"{sid}.ipynb")
            if f is None or blob is None:
                continue
            target = out_dir / f"{sid}.ipynb"
            text = decode(Path(blob).read_bytes())
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                atomic_write_text(target, text)
            f.abs_src_path = str(target)

    # -- pages ---------------------------------------------------------------------------------------

    def on_nav(self, nav: Any, *, config: Any, files: Files) -> Any:
        self.nav = nav  # the print edition's page order
        return nav

    def on_page_markdown(self, markdown: str, *, page: Any, config: Any, files: Files) -> str:
        page_path = page.file.src_uri
        if self.print_pdf and page.is_homepage:  # the PDF is printed at the end of this build
            markdown += print_edition.HOME_LINK.format(name=print_edition.PDF_NAME)
        self.renderer.page_url = page.url
        offset = pages.front_matter_lines(page.file.abs_src_path, markdown)
        try:
            explicit = {ref.snippet for ref in pages.find_refs(markdown, page_path, offset) if ref.kind == "source"}
        except pages.PageRefError as exc:
            return self._fail(exc.where, exc.message, markdown_fallback=markdown)
        shown: set[str] = set()

        inline: dict[str, None] = {}  # snippets whose values or claims the page shows, in page order
        self.excerpts.begin_page(page_path)

        def render_ref(ref: pages.Ref) -> str:
            if not ref.own_line:
                inline.setdefault(ref.snippet)
            try:
                if ref.kind == "code":
                    return self.excerpts.render(ref)
                return self._render(ref, explicit, shown)
            except pages.PageRefError as exc:
                return self._fail(exc.where, exc.message, inline=not ref.own_line)

        out = pages.render(markdown, page_path, offset, render_ref)
        if self.state is not None and self.options.execute and page_path.endswith(".md"):
            nb = page_notebook.build(page_path, page.title or page_path, markdown, offset, self._views(),
                                     lambda path: shown_source(path.read_text(encoding="utf-8")),
                                     excerpt=self.excerpts.notebook_cell)
            if nb is not None:
                self.notebooks[page_path] = nb
        return out + self._inline_sources([sid for sid in inline if sid not in shown])

    def _views(self) -> dict[str, page_notebook.SnippetView]:
        """What a page's notebook needs of each snippet (durations from the committed records, so that the
        notebook's text does not depend on the machine that built it). Made once per build: every page asks,
        and reading each snippet's ``REQUIRES`` for each of 60 pages took 1.5 s of a 13 s build."""
        assert self.state is not None
        return self.views.get("views", self.builds, self._make_views)

    def _make_views(self) -> dict[str, page_notebook.SnippetView]:
        assert self.state is not None
        return {sid: page_notebook.SnippetView(
                    sid, st.snippet.path, st.snippet.requires(),
                    float(((self._record_of(sid) or {}).get("provenance") or {}).get("seconds") or 0.0),
                    st.results if st.status in ("cached", "ran") else None)
                for sid, st in self.state.snippets.items() if not st.snippet.is_notebook}

    def on_page_content(self, html_text: str, *, page: Any, config: Any, files: Files) -> str:
        if self.excerpts is not None:  # an API page: "在书中" under each entry the book shows an excerpt of
            html_text = self.excerpts.back_links(html_text, page.file.src_uri, page.url,
                                                 {f.src_uri: f.url for f in files.documentation_pages()})
        if page.file.src_uri in self.notebooks:
            _, name = page_notebook.site_location(page.url, page.file.src_uri)
            html_text = page_notebook.download_button(name) + html_text
        return html_text

    def _inline_sources(self, sids: list[str]) -> str:
        """The code folds of the snippets a page cites only inline, at its end: every number's origin popover
        links to the code that computed it on the same page."""
        assert self.state is not None
        folds = [self.renderer.source(self.state.snippets[sid].snippet.path, self._helpers(sid), sid)
                 for sid in sids if sid in self.state.snippets and self.state.snippets[sid].status != "skipped"]
        if not folds:
            return ""
        return ('\n\n<p class="book-sources-intro">本页正文中的数字由下面的代码算出：</p>\n\n'
                + "\n".join(folds))

    def _fail(self, where: str, message: str, inline: bool = False, markdown_fallback: str | None = None) -> str:
        if not self.serving:
            raise PluginError(f"{where}: {message}")
        log.error(f"{where}: {message}")
        text = html.escape(f"{where}: {message}", quote=False)
        if inline:
            return f'<span class="book-error">⚠ {text}</span>'
        block = f'!!! failure "引用出错"\n\n    {text}\n'
        return block + ("\n" + markdown_fallback if markdown_fallback is not None else "")

    def _render(self, ref: pages.Ref, explicit: set[str], shown: set[str]) -> str:
        assert self.state is not None and self.session is not None
        st = self.state.snippets.get(ref.snippet)
        if st is None and self.options.select and not any(fnmatch(ref.snippet, p) for p in self.options.select):
            return self.renderer.placeholder(ref)  # a partial build (BOOK_ONLY) does not judge other authors' pages
        if st is None:
            known = ", ".join(sorted(self.session.discover())) or "(none)"
            raise pages.PageRefError(ref.where, f"unknown snippet {ref.snippet!r} (snippets: {known})")
        if ref.kind == "source":
            shown.add(ref.snippet)
            return self.renderer.source(st.snippet.path, self._helpers(ref.snippet), ref.snippet)
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
        if ref.kind in ("table", "figure", "block") and ref.snippet not in explicit and ref.snippet not in shown:
            shown.add(ref.snippet)
            body += "\n" + self.renderer.source(st.snippet.path, self._helpers(ref.snippet), ref.snippet)
        return body

    def _helpers(self, sid: str) -> tuple[Path, ...]:
        """The helper modules (``_*.py`` beside the snippet) that the snippet imported when it ran."""
        assert self.state is not None
        entry = self.state.entries.get(sid)
        folder = self.state.snippets[sid].snippet.path.parent
        if entry is None:
            return ()
        found = [self.project_root / rel for rel in entry.deps]
        return tuple(p for p in found if p.parent == folder and p.name.startswith("_") and p.suffix == ".py")


    def on_post_page(self, output: str, *, page: Any, config: Any) -> str:
        if page.file.src_uri.endswith(".ipynb"):
            output = fix_notebook_html.fix(output, page.url, Path(config.site_dir))
        output = page_html.fix(output, page.url, self._generated_svg, bool(self.config.webfont))
        if self.math is not None:
            output = self.math.page(output, page.url, page.file.dest_uri)
        nb = self.notebooks.get(page.file.src_uri)
        if nb is not None:
            folder, name = page_notebook.site_location(page.url, page.file.src_uri)
            page_notebook.write(Path(config.site_dir), folder, name, nb)
        return output

    def _generated_svg(self, path: str) -> str | None:
        """A generated figure's SVG by its path in the site (what page_html sizes its <img> by)."""
        f = self.files.get_file_from_path(path) if self.files is not None else None
        if f is None:
            return None
        try:
            return f.content_string
        except (OSError, UnicodeDecodeError):
            return None

    # -- the end -------------------------------------------------------------------------------------

    def _print(self, site_dir: Path, config: Any) -> None:
        import time

        started = time.perf_counter()
        try:
            pdf = print_edition.build(site_dir, print_edition.entries(self.nav), config.site_name,
                                      config.site_description or "")
        except Exception as exc:  # the home page links the PDF: a failed print is a broken site
            log.warning(f"the print edition could not be printed: {type(exc).__name__}: {exc}")
            return
        log.info(f"print edition: {pdf.name}, {pdf.stat().st_size // 1024} KB, "
                 f"{time.perf_counter() - started:.1f} s")

    def on_build_error(self, *, error: Exception) -> None:
        # `mkdocs build` failed (or was interrupted): no snippet may go on running. Under serve a failed
        # rebuild leaves the background build alone; it ends with the server (on_shutdown).
        if self.session is not None and not self.serving:
            self.session.stop()

    def on_shutdown(self) -> None:
        # Ctrl-C on `mkdocs serve`: kill the snippets of the background build instead of waiting for them.
        if self.session is not None:
            self.session.stop()

    def on_post_build(self, *, config: Any) -> None:
        self.memory.remember(config)
        site_dir = Path(config.site_dir)
        written = self.font.write(site_dir)
        if written is not None:
            out, n, how = written
            log.debug(f"Chinese web font: {n} characters, {out.stat().st_size // 1024} KB ({how})")
        if self.math is not None:  # after the font: \text{…} in a formula is measured in it
            typeset, finished = self.math.finish(site_dir)
            if finished:
                log.info(f"formulas: {typeset} typeset at build time, {finished} page(s) finished")
        if self.background is not None:
            self.background.release()  # the pages are written: now the snippets may have the cores
        for warning in fix_search.patch(site_dir):
            log.warning(warning + " (tests/test_browser.py checks the search: whole Chinese terms, the index on demand)")
        for warning in fix_palette.patch(site_dir):
            log.warning(warning)
        if self.print_pdf and self.nav is not None:
            self._print(site_dir, config)
        if self.state is None or not self.options.execute or self.session is None:
            return
        table = report.timing_table(self.timing_rows)
        atomic_write_text(self.session.report_dir / "timing.txt", table + "\n")
        log.info("snippet timing (also in %s):\n%s", (self.session.report_dir / "timing.txt").as_posix(), table)
        for line in report.over_budget(self.timing_rows):
            log.info("over budget: " + line)
