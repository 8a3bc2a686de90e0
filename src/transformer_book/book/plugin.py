"""The MkDocs glue: run snippets before the build, place results in pages, report at the end.

Configured in ``mkdocs.yml`` under ``plugins: - book:``; every switch can be overridden by an environment
variable so that the same ``mkdocs.yml`` serves authors and CI:

==================  =====================  ===============================================================
option              environment            meaning
==================  =====================  ===============================================================
``execute``         ``BOOK_EXECUTE=0``     plain build: run nothing, show placeholders (for benchmarks)
``fresh``           ``BOOK_FRESH=1``       ignore cached results, execute every snippet
``ci``              ``BOOK_CI=1``          fresh, and a missing/orphaned record or any drift fails
``workers``         ``BOOK_WORKERS=N``     parallel snippet processes (default: one per core)
(none)              ``BOOK_ONLY=a/*,b/x``  run only these snippets (globs); others show placeholders
==================  =====================  ===============================================================
"""

from __future__ import annotations

import html
import os
import posixpath
import re
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from mkdocs.config import base
from mkdocs.config import config_options as c
from mkdocs.exceptions import PluginError
from mkdocs.plugins import BasePlugin, event_priority, get_plugin_logger
from mkdocs.structure.files import File, Files

from . import pages as pagesyntax
from . import report
from .cache import atomic_write_text
from .execute import NOTEBOOK_OUTPUT
from .results import Artifact, Figure, Table, Value
from .session import BookSession, BuildState, Options

log = get_plugin_logger("book")

GENERATED = "assets/generated"
_EXTERNAL_SCRIPT = re.compile(
    r"<script\b[^>]*>(?:(?!</script>).)*?(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/(?:(?!</script>).)*</script>"
    r"|<script\b[^>]*\bsrc=[\"'](?:https?:)?//[^\"']+[\"'][^>]*>\s*</script>"
    r"|<script type=\"text/x-mathjax-config\">(?:(?!</script>).)*</script>",
    re.DOTALL | re.IGNORECASE,
)
MATHJAX_URI = "assets/mathjax/tex-svg-full.js"
WEBFONT_URI = "assets/fonts/book-cjk.woff2"  # declared in docs/stylesheets/book.css


class BookConfig(base.Config):
    snippets_dir = c.Type(str, default="snippets")
    cache_dir = c.Type(str, default=".book-cache")
    report_dir = c.Type(str, default=".book-cache/report")
    execute = c.Type(bool, default=True)
    fresh = c.Type(bool, default=False)
    ci = c.Type(bool, default=False)
    workers = c.Type(int, default=0)
    mathjax = c.Type(bool, default=True)
    webfont = c.Type(bool, default=True)  # a Chinese web font cut to the characters the site uses
    watch = c.ListOfItems(c.Type(str), default=["src", "snippets", "data"])


def _env_flag(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


class BookPlugin(BasePlugin[BookConfig]):
    def __init__(self) -> None:
        self.command = "build"
        self.session: BookSession | None = None
        self.state: BuildState | None = None
        self.usage: report.Usage = {}
        self.options = Options()

    # -- set-up --------------------------------------------------------------------------------------

    def on_startup(self, *, command: str, dirty: bool) -> None:
        # Defining on_startup keeps this instance across `mkdocs serve` rebuilds (file hashes, results).
        self.command = command
        self.dirty = dirty  # `mkdocs serve --dirty`: MkDocs re-renders only modified pages

    @property
    def serving(self) -> bool:
        return self.command == "serve"

    def on_config(self, config: Any) -> Any:
        self.project_root = Path(config.config_file_path).resolve().parent
        cfg = self.config
        ci = _env_flag("BOOK_CI", cfg.ci)
        self.options = Options(
            execute=_env_flag("BOOK_EXECUTE", cfg.execute),
            fresh=_env_flag("BOOK_FRESH", cfg.fresh) or ci,
            ci=ci,
            workers=int(os.environ.get("BOOK_WORKERS") or cfg.workers),
            # CI always runs everything; an author may build just the part being written.
            select=() if ci else tuple(p for p in os.environ.get("BOOK_ONLY", "").split(",") if p.strip()),
        )
        self.snippets_dir = self.project_root / cfg.snippets_dir
        if self.session is None:
            self.session = BookSession(
                self.project_root,
                self.snippets_dir,
                self.project_root / cfg.cache_dir,
                self.project_root / cfg.report_dir,
                Path(config.docs_dir),
            )
        if cfg.mathjax and MATHJAX_URI not in [str(s) for s in config.extra_javascript]:
            config.extra_javascript.append(MATHJAX_URI)
        return config

    def on_serve(self, server: Any, *, config: Any, builder: Any) -> Any:
        # Start the worker forkserver (it imports torch, numpy, matplotlib: ~2 s) now, in the background,
        # so that the first snippet edit of the session does not wait for it.
        if self.options.execute:
            import threading

            from .execute import warm_up

            threading.Thread(target=warm_up, daemon=True).start()
        for rel in self.config.watch:
            path = self.project_root / rel
            if path.exists():
                server.watch(str(path))
        return server

    def on_env(self, env: Any, *, config: Any, files: Files) -> Any:
        # MkDocs makes a new Jinja environment for every build, so each `mkdocs serve` rebuild compiled
        # the theme's ~70 templates again (over a second). Cache the compiled bytecode by template source.
        import jinja2

        if env.bytecode_cache is None:
            cache_dir = self.project_root / self.config.cache_dir / "jinja"
            cache_dir.mkdir(parents=True, exist_ok=True)
            env.bytecode_cache = jinja2.FileSystemBytecodeCache(str(cache_dir))
        return env

    # -- running snippets ----------------------------------------------------------------------------

    def _scan_usage(self, docs_dir: Path) -> report.Usage:
        usage: report.Usage = {}
        for md in sorted(docs_dir.rglob("*.md")):
            page = md.relative_to(docs_dir).as_posix()
            try:
                refs = pagesyntax.find_refs(md.read_text(encoding="utf-8"), page)
            except pagesyntax.PageRefError:
                continue  # reported with its line when the page is rendered
            for ref in refs:
                usage.setdefault((ref.snippet, ref.key), []).append(ref.where)
        return usage

    def on_pre_build(self, *, config: Any) -> None:
        assert self.session is not None
        self.usage = self._scan_usage(Path(config.docs_dir))
        self.state = state = self.session.build(self.options)
        self.timing_rows = self.session.write_timing(state)

        errors = report.error_report(state, self.usage)
        if errors:
            if self.serving:
                log.error(errors)
            else:
                raise PluginError("A snippet failed; the build stops.\n" + errors)
        for sid in state.new_records:
            log.info(f"new record written: snippets/{sid}.record.json (commit it with the snippet)")
        problems = report.records_report(state, self.options.ci)
        if problems:
            if self.options.ci:
                raise PluginError(problems)
            log.warning(problems)
        drift = report.drift_report(state, self.usage)
        if drift:
            if self.options.ci:
                raise PluginError(drift)
            log.warning(drift)

    @event_priority(-100)  # after mkdocs-jupyter has wrapped notebook files (we set the wrapper's source path)
    def on_files(self, files: Files, *, config: Any) -> Files:
        if self.state is not None:
            for sid, st in self.state.snippets.items():
                for key, result in st.results.items():
                    if isinstance(result, Figure):
                        files.append(File.generated(config, f"{GENERATED}/{sid}/{key}.svg", content=result.svg))
        self._use_executed_notebooks(files)
        if getattr(self, "dirty", False):
            self._mark_pages_with_new_results(files)
        if self.config.mathjax:
            import mathjax

            src = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5" / "tex-svg-full.js"
            files.append(File.generated(config, MATHJAX_URI, abs_src_path=str(src)))
        return files

    def _mark_pages_with_new_results(self, files: Files) -> None:
        """In a dirty rebuild MkDocs re-renders only pages whose source changed; a page whose snippet just
        re-ran (or failed) must be re-rendered too, although its Markdown did not change."""
        assert self.state is not None
        fresh = {sid for sid, st in self.state.snippets.items() if st.status in ("ran", "error")}
        pages = {where.rsplit(":", 1)[0] for (sid, _), wheres in self.usage.items() if sid in fresh for where in wheres}
        pages |= {f"{sid}.ipynb" for sid in fresh if self.state.snippets[sid].snippet.is_notebook}
        for page in pages:
            f = files.get_file_from_path(page)
            if f is not None:
                f.is_modified = lambda: True  # type: ignore[method-assign]

    def _use_executed_notebooks(self, files: Files) -> None:
        """Point each notebook page at its executed copy (outputs included): what mkdocs-jupyter renders
        and readers download. Without results (execution off, or the notebook failed) the page shows the
        notebook as saved."""
        if self.state is None:
            return
        out_dir = self.project_root / self.config.cache_dir / "notebooks"
        for sid, st in self.state.snippets.items():
            executed = st.results.get(NOTEBOOK_OUTPUT)
            f = files.get_file_from_path(f"{sid}.ipynb") if st.snippet.is_notebook else None
            if f is None or not isinstance(executed, Artifact):
                continue
            target = out_dir / f"{sid}.ipynb"
            text = executed.load()
            if not target.exists() or target.read_text(encoding="utf-8") != text:
                atomic_write_text(target, text)
            f.abs_src_path = str(target)

    # -- pages ---------------------------------------------------------------------------------------

    def on_page_markdown(self, markdown: str, *, page: Any, config: Any, files: Files) -> str:
        page_path = page.file.src_uri
        offset = _front_matter_lines(page.file.abs_src_path, markdown)
        explicit_sources = set()
        try:
            for ref in pagesyntax.find_refs(markdown, page_path, offset):
                if ref.kind == "source":
                    explicit_sources.add(ref.snippet)
        except pagesyntax.PageRefError as exc:
            return self._fail(exc.where, exc.message, markdown_fallback=markdown)
        shown_sources: set[str] = set()

        def render_ref(ref: pagesyntax.Ref) -> str:
            try:
                return self._render(ref, page_path, explicit_sources, shown_sources)
            except pagesyntax.PageRefError as exc:
                return self._fail(exc.where, exc.message, inline=ref.kind == "value")

        return pagesyntax.render(markdown, page_path, offset, render_ref)

    def _fail(self, where: str, message: str, inline: bool = False, markdown_fallback: str | None = None) -> str:
        if not self.serving:
            raise PluginError(f"{where}: {message}")
        log.error(f"{where}: {message}")
        text = html.escape(f"{where}: {message}", quote=False)
        if inline:
            return f'<span class="book-error">⚠ {text}</span>'
        block = f'!!! failure "引用出错"\n\n    {text}\n'
        return block + ("\n" + markdown_fallback if markdown_fallback is not None else "")

    def _render(self, ref: pagesyntax.Ref, page_path: str, explicit: set[str], shown: set[str]) -> str:
        assert self.state is not None
        st = self.state.snippets.get(ref.snippet)
        if st is None and self.options.select and not any(fnmatch(ref.snippet, p) for p in self.options.select):
            return _placeholder(ref)  # a partial build (BOOK_ONLY) does not judge other authors' pages
        if st is None:
            known = ", ".join(sorted(self.session.discover())) or "(none)"
            raise pagesyntax.PageRefError(ref.where, f"unknown snippet {ref.snippet!r} (snippets: {known})")
        if ref.kind == "source":
            shown.add(ref.snippet)
            return _source_block(st.snippet.path, self.project_root)
        if st.status == "skipped":
            return _placeholder(ref)
        if st.error is not None:
            err = st.error
            text = html.escape(f"{err.location()}: {err.message}", quote=False)
            if ref.kind == "value":
                return f'<span class="book-error">⚠ {text}</span>'
            tb = "\n".join("        " + line for line in err.traceback.rstrip().splitlines())
            return f'!!! failure "片段 {ref.snippet} 运行出错"\n\n    {text}\n\n    ```text\n{tb}\n    ```\n'
        result = st.results.get(ref.key)
        if result is None:
            raise pagesyntax.PageRefError(
                ref.where, f"snippet {ref.snippet!r} has no result {ref.key!r} (it has: {', '.join(st.results)})"
            )
        expected = {"table": Table, "figure": Figure, "value": Value}[ref.kind]
        if not isinstance(result, expected):
            raise pagesyntax.PageRefError(
                ref.where, f"{ref.snippet}:{ref.key} is a {type(result).__name__}, not a {expected.__name__}"
            )
        if isinstance(result, Value):
            from .results import format_number

            try:
                return format_number(result.value, ref.fmt if ref.fmt is not None else result.fmt)
            except ValueError as exc:
                raise pagesyntax.PageRefError(ref.where, f"bad format {ref.fmt!r} for {result.value!r}: {exc}")
        caption = ref.caption if ref.caption is not None else result.caption
        if isinstance(result, Table):
            body = ""
            if caption:
                body += f'<p class="book-caption" markdown="span">{caption}</p>\n\n'
            body += result.to_markdown() + "\n"
        else:
            target = f"{GENERATED}/{ref.snippet}/{ref.key}.svg"
            rel = posixpath.relpath(target, posixpath.dirname(page_path) or ".")
            alt = caption or f"{ref.snippet} {ref.key}"
            body = f'<figure class="book-figure" markdown="span">\n  ![{alt}]({rel})\n'
            if caption:
                body += f"  <figcaption>{caption}</figcaption>\n"
            body += "</figure>\n"
        if ref.snippet not in explicit and ref.snippet not in shown:
            shown.add(ref.snippet)
            body += "\n" + _source_block(st.snippet.path, self.project_root)
        return body

    def on_post_page(self, output: str, *, page: Any, config: Any) -> str:
        # nbconvert's template adds MathJax 2 and mermaid from CDNs to notebook pages. The site ships its own
        # MathJax (configured to typeset notebook Markdown too), so those scripts go: the site stays offline.
        if page.file.src_uri.endswith(".ipynb"):
            output = _EXTERNAL_SCRIPT.sub("", output)
            output = _chinese_notebook_heading_ids(output)
        return output

    # -- the end -------------------------------------------------------------------------------------

    def on_post_build(self, *, config: Any) -> None:
        self._write_webfont(Path(config.site_dir))
        _patch_chinese_query_segmentation(Path(config.site_dir))
        if self.state is None or not self.options.execute:
            return
        table = report.timing_table(self.timing_rows)
        assert self.session is not None
        atomic_write_text(self.session.report_dir / "timing.txt", table + "\n")
        log.info("snippet timing (also in %s):\n%s", (self.session.report_dir / "timing.txt").as_posix(), table)
        for line in report.over_budget(self.timing_rows):
            log.info("over budget: " + line)


    def _write_webfont(self, site_dir: Path) -> None:
        if not self.config.webfont:
            return
        from transformer_book.plotting import FONT_PATH  # the same OFL font the figures use

        from .webfont import write_subset

        out, n, hit = write_subset(FONT_PATH, site_dir, WEBFONT_URI, self.project_root / self.config.cache_dir / "fonts")
        log.debug(f"Chinese web font: {n} characters, {out.stat().st_size // 1024} KB ({'cached' if hit else 'new'})")


# Material 9.x splits a typed Chinese query into the longest pieces found in the index, but its loop stops
# one character short (``j < query.length``), so a term that ends the query is never tried whole: 位置编码 is
# searched as 位置*. Fixed in the built worker; if Material changes the code, the build says so.
_SEGMENT_BUG = "for(let o=s+1;o<t.length;o++)t.slice(s,o)in e"
_SEGMENT_FIX = "for(let o=s+1;o<=t.length;o++)t.slice(s,o)in e"


def _patch_chinese_query_segmentation(site_dir: Path) -> None:
    workers = sorted((site_dir / "assets" / "javascripts" / "workers").glob("search.*.min.js"))
    for worker in workers:
        text = worker.read_text(encoding="utf-8")
        if text.count(_SEGMENT_FIX) == 1 and _SEGMENT_BUG not in text:
            continue  # patched already (a serve rebuild that kept the file)
        if text.count(_SEGMENT_BUG) != 1:
            log.warning(
                f"{worker.name}: Material's query segmentation changed; review _patch_chinese_query_segmentation "
                "(tests/test_browser.py checks that typed Chinese terms are searched whole)"
            )
            continue
        atomic_write_text(worker, text.replace(_SEGMENT_BUG, _SEGMENT_FIX))


_NB_HEADING = re.compile(r'<h([1-6]) id="">(.*?)<a class="anchor-link" href="#">¶</a></h\1>', re.S)


def _chinese_notebook_heading_ids(html_text: str) -> str:
    """mkdocs-jupyter slugifies notebook headings to ASCII, so Chinese headings get ``id=""`` (and the page's
    table of contents links ``#_1``, ``#_2`` … to nothing). Give them the ids the rest of the site uses
    (``pymdownx.slugs.slugify(case="lower")``) and point the table of contents at them, in order."""
    from pymdownx.slugs import slugify

    slug = slugify(case="lower")
    taken = set(re.findall(r'\bid="([^"]+)"', html_text))
    new_ids: list[str] = []

    def fix(m: re.Match[str]) -> str:
        base = slug(re.sub(r"<[^>]+>", "", m.group(2)), "-") or "section"
        ident, n = base, 1
        while ident in taken:
            ident, n = f"{base}_{n}", n + 1
        taken.add(ident)
        new_ids.append(ident)
        return f'<h{m.group(1)} id="{ident}">{m.group(2)}<a class="anchor-link" href="#{ident}">¶</a></h{m.group(1)}>'

    html_text = _NB_HEADING.sub(fix, html_text)

    def toc(m: re.Match[str]) -> str:
        k = int(m.group(1))
        return f'href="#{new_ids[k - 1]}"' if 0 < k <= len(new_ids) else m.group(0)

    return re.sub(r'href="#_(\d+)"', toc, html_text)


def _front_matter_lines(abs_src_path: str | None, markdown: str) -> int:
    """How many lines MkDocs removed from the top of the file (YAML front matter)."""
    if not abs_src_path:
        return 0
    try:
        raw = Path(abs_src_path).read_text(encoding="utf-8-sig")
    except OSError:
        return 0
    probe = markdown[:200]
    idx = raw.find(probe) if probe else -1
    return raw.count("\n", 0, idx) if idx > 0 else 0


def _source_block(path: Path, root: Path) -> str:
    rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    code = path.read_text(encoding="utf-8").rstrip("\n")
    fence = "````" if "```" in code else "```"
    body = "\n".join(("    " + line) if line else "" for line in code.split("\n"))
    return f'??? example "生成它的代码：`{rel}`"\n\n    {fence}python linenums="1"\n{body}\n    {fence}\n'


def _placeholder(ref: pagesyntax.Ref) -> str:
    if ref.kind == "value":
        return f"⟨{ref.snippet}:{ref.key}⟩"
    return f'!!! note "未执行"\n\n    这里是 `{ref.snippet}:{ref.key}`（本次构建关闭了代码执行）。\n'
