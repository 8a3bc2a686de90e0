"""The MkDocs events, wired to the rooms that do the work; the plugin decides nothing itself.

:mod:`.config` and :mod:`.setup` (options, the session, what a build decides first), :mod:`.session` (running
and checking snippets), :mod:`.report` (what the build says, whether it stops), :mod:`.page_markdown` (results
into pages, page notebooks), :mod:`.generated_files`, the site fixes and :mod:`.finish`. What lives across
``mkdocs serve`` rebuilds is on the plugin; what belongs to one build is a :class:`Build`, made once the snippets
have run and handed to every later event.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, event_priority, get_plugin_logger
from mkdocs.structure.files import Files

from transformer_book.book.execution import pool
from transformer_book.book.rendering import code_excerpt, page_notebook, pages
from transformer_book.book.session import BookSession
from transformer_book.book.site import config as book_config
from transformer_book.book.site import fix_notebook_html, generated_files, page_html, print_edition, report
from transformer_book.book.site import setup as site_setup
from transformer_book.book.site.background import BackgroundBuild
from transformer_book.book.site.dirty_pages import PageMemory, ShownResults
from transformer_book.book.site.finish import finish
from transformer_book.book.site.page_markdown import PageWriter
from transformer_book.book.site.site_font import SiteFont, font_file
from transformer_book.book.state import BuildState, Options
from transformer_book.book.types import ExecutorUnavailable

log = get_plugin_logger("book")


@dataclass
class Build:
    """One build, from ``on_pre_build`` to ``on_post_build``."""

    state: BuildState
    usage: report.Usage
    pages: PageWriter
    timing_rows: list[dict[str, Any]]
    files: Files | None = None
    nav: Any = None


class BookPlugin(BasePlugin[book_config.BookConfig]):
    def __init__(self) -> None:
        self.command, self.dirty = "build", False
        self.session: BookSession | None = None
        self.options = Options()
        self.background: BackgroundBuild | None = None
        self.state: BuildState | None = None  # the last build's snippets (serve: does the backlog still run?)
        self.shown = ShownResults()  # what each snippet's pages last showed: a dirty rebuild re-renders changes
        self.memory = PageMemory()  # titles and anchors of pages a dirty rebuild does not read
        self.font = SiteFont()  # the web font of each build, cut while its pages render
        self.excerpts: code_excerpt.Excerpts | None = None  # {{ code … }}: the package's source beside the prose
        self.build: Build | None = None

    def on_startup(self, *, command: str, dirty: bool) -> None:
        # Defining on_startup keeps this instance across `mkdocs serve` rebuilds (file hashes, results).
        self.command, self.dirty = command, dirty  # `mkdocs serve --dirty`: MkDocs re-renders only modified pages

    @property
    def serving(self) -> bool:
        return self.command == "serve"

    def on_config(self, config: Any) -> Any:
        root = Path(config.config_file_path).resolve().parent
        if self.session is not None and self.session.project_root != root:
            # MkDocs keeps an instance of a plugin that defines on_startup for the whole process (serve keeps
            # it across rebuilds); another project loaded in the same process must not inherit this one's state.
            self.session, self.state, self.background, self.shown = None, None, None, ShownResults()
        try:  # a missing Markdown extension; an option the session cannot use (result_kinds naming a broken module)
            site_setup.check_extensions(config)
            self.session = self.session or book_config.open_session(self.config, root, Path(config.docs_dir))
        except ValueError as exc:
            raise PluginError(str(exc)) from None
        self.options = book_config.options(self.config)
        if self.excerpts is None or self.excerpts.root != root:
            self.excerpts = code_excerpt.Excerpts(root, root / self.config.code_package, Path(config.docs_dir))
        if self.serving and self.options.execute and self.background is None:
            # `mkdocs serve` never waits for compute: pages are served at once, results land in the background.
            self.background = BackgroundBuild(self.session, self.options, self.session.cache.root / "serve" / "landed",
                                              log=log.info, log_error=log.error)
        site_setup.start_early(self.command, config, self.options, self.session)
        self.setup = site_setup.setup(config, self.config, self.serving, self.session.cache.root, log)
        return config

    def on_serve(self, server: Any, *, config: Any, builder: Any) -> Any:
        # Start the worker forkserver (it imports torch, numpy, matplotlib: ~2 s) now, in the background,
        # so that the first snippet edit of the session does not wait for it.
        if self.options.execute:
            threading.Thread(target=pool.warm_up, daemon=True).start()
        for path in (self.session.project_root / rel for rel in self.config.watch):
            if path.exists():
                server.watch(str(path))
        if self.background is not None:  # results landing in the background rebuild the pages that show them
            self.background.stamp.parent.mkdir(parents=True, exist_ok=True)
            server.watch(str(self.background.stamp.parent))
        return server

    def on_env(self, env: Any, *, config: Any, files: Files) -> Any:
        site_setup.cache_templates(env, self.session.cache.root / "jinja")
        self.memory.restore(config, files)  # before autorefs resolves references (its on_env: priority -50)
        return env

    def on_pre_build(self, *, config: Any) -> None:
        usage = pages.usage(Path(config.docs_dir))
        self.excerpts.start_build()
        if self.background is not None and (self.state is None or self.background.running):
            # The first serve build, and any rebuild while the backlog is still being computed: serve at once,
            # compute in the background. Later rebuilds (an edit) run what they need before rendering.
            state = self.background.serve_now(self.session, self.options, log.info)
        else:
            try:
                state = self.session.build(self.options)
            except ExecutorUnavailable as exc:  # the message, not a traceback
                raise PluginError(str(exc)) from None
        self.state = state
        writer = PageWriter(self.excerpts, state, self.options, self.session.project_root, self.session.discover,
                            self.serving, log.error)
        self.build = Build(state, usage, writer, self.session.write_timing(state))
        said = report.after_snippets(state, usage, self.options, self.serving, self.session.report_dir,
                                     self.session.project_root, Path(config.docs_dir),
                                     font_file(self.config.webfont, self.session.project_root))
        if said.stop:
            raise PluginError(said.stop)
        for level, texts in ((log.error, said.errors), (log.info, said.infos), (log.warning, said.warnings)):
            for text in texts:
                level(text)

    @event_priority(-100)  # after mkdocs-jupyter has wrapped notebook files (we set the wrapper's source path)
    def on_files(self, files: Files, *, config: Any) -> Files:
        b = self.build
        for warning in generated_files.add(files, config, b.state, self.session, self.setup.math is not None):
            log.warning(warning)
        changed = self.shown.update(b.state)  # and remember what is shown, for the next dirty rebuild
        if self.dirty:
            self.shown.mark_pages(files, changed, b.usage, b.state)
        if self.serving:  # excerpts whose source changed, API pages whose "在书中" links changed
            changed_pages = self.excerpts.changed_pages()
            if self.dirty:
                self.shown.mark_modified(files, changed_pages)
        b.files = files  # the generated figures, for the sizes of their <img> (page_html)
        self.font.start(config, self.config, self.session.project_root, self.session.cache.root,
                        self.session.snippets_dir)
        return files

    def on_nav(self, nav: Any, *, config: Any, files: Files) -> Any:
        self.build.nav = nav  # the print edition's page order
        return nav

    def on_page_markdown(self, markdown: str, *, page: Any, config: Any, files: Files) -> str:
        if self.setup.print_pdf and page.is_homepage:  # the PDF is printed at the end of this build
            markdown += print_edition.HOME_LINK.format(name=print_edition.PDF_NAME)
        return self.build.pages.page(markdown, page.file.src_uri, page.title, page.file.abs_src_path, page.url)

    def on_page_content(self, html_text: str, *, page: Any, config: Any, files: Files) -> str:
        # an API page: "在书中" under each entry the book shows an excerpt of
        html_text = self.excerpts.back_links(html_text, page.file.src_uri, page.url,
                                             {f.src_uri: f.url for f in files.documentation_pages()})
        if page.file.src_uri in self.build.pages.notebooks:
            html_text = page_notebook.download_button(page_notebook.site_location(page.url, page.file.src_uri)[1]) + html_text
        return html_text

    def on_post_page(self, output: str, *, page: Any, config: Any) -> str:
        if page.file.src_uri.endswith(".ipynb"):
            output = fix_notebook_html.fix(output, page.url, Path(config.site_dir))
        output = page_html.fix(output, page.url, page_html.svg_of(self.build.files), bool(self.config.webfont))
        if self.setup.math is not None:
            output = self.setup.math.page(output, page.url, page.file.dest_uri)
        nb = self.build.pages.notebooks.get(page.file.src_uri)
        if nb is not None:
            folder, name = page_notebook.site_location(page.url, page.file.src_uri)
            page_notebook.write(Path(config.site_dir), folder, name, nb)
        return output

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
        b = self.build
        finish(Path(config.site_dir), config, self.setup, self.font, self.background, b.nav, log)
        if self.options.execute:
            report.log_timing(b.timing_rows, self.session.report_dir, log)
