"""What a build decides before its snippets run: the Markdown extensions it needs, the engine's scripts and
styles, whether it prints the PDF and typesets the formulas, what it starts early in the background, and the
Jinja cache of the theme's templates."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mkdocs.config.config_options import ExtraScriptValue

from transformer_book.book.execution import pool
from transformer_book.book.rendering import origin
from transformer_book.book.session import BookSession
from transformer_book.book.site import config as book_config
from transformer_book.book.site import mathjax, page_script, print_edition
from transformer_book.book.state import Options


@dataclass
class BuildSetup:
    print_pdf: bool = False  # this build prints the book into a PDF at its end (print_edition)
    math: mathjax.SiteMath | None = None  # the formulas of this build's pages (None: MathJax is off)


def check_extensions(config: Any) -> None:
    """Raise ``ValueError`` naming every Markdown extension the engine's output needs and mkdocs.yml lacks."""
    missing = book_config.missing_extensions(config)
    if missing:
        raise ValueError("The book plugin needs these Markdown extensions in mkdocs.yml (markdown_extensions): "
                         + "; ".join(missing))


def setup(config: Any, cfg: book_config.BookConfig, serving: bool, cache_root: Path, log: Any) -> BuildSetup:
    """The engine's scripts and styles added to ``config``; the print edition and the formulas decided."""
    out = BuildSetup()
    if book_config.pdf(cfg) and not serving:
        why_not = print_edition.unavailable()
        if why_not:
            log.info(f"print edition skipped: {why_not}")
        out.print_pdf = not why_not
    if cfg.mathjax:  # formulas typeset by the build (or, where it cannot, by MathJax in the reader's browser)
        why_not = "mkdocs serve shows a new formula at once" if serving else mathjax.unavailable()
        if why_not and not serving:
            log.info(f"formulas are typeset in the reader's browser: {why_not}")
        out.math = mathjax.SiteMath(None if why_not else mathjax.Store(cache_root / "math"), log.warning)
    # The engine's own scripts and styles, shipped with the site. The scripts are deferred: they only enhance a
    # page that is already readable (popovers, heatmap cells, folds), so they never hold up its first paint;
    # deferred scripts still run in order, after Material's bundle, before DOMContentLoaded.
    for script in (*origin.SCRIPTS, page_script.URI):
        if script not in [str(s) for s in config.extra_javascript]:
            value = ExtraScriptValue(script)
            value.defer = True
            config.extra_javascript.append(value)
    for style in origin.STYLES:
        if style not in [str(s) for s in config.extra_css]:
            config.extra_css.append(style)
    return out


def start_early(command: str, config: Any, options: Options, session: BookSession) -> None:
    """Start in the background what the build will wait for later, so that it overlaps the wait for the
    snippets — only when this build will wait for them (fresh, CI, or no result cache yet): the forkserver's
    imports (about 2 s: torch, numpy, matplotlib) and the search plugin's Chinese word segmenter (jieba
    loads its dictionary on first use, about 0.7 s of Python). In a warm build there is no wait to fill:
    a jieba thread then only takes the GIL from the main thread, which waited up to a switch interval
    (5 ms) after every file it read — 0.3 s of a 1.6 s warm build — so jieba loads when search needs it."""
    if not (command == "build" and options.execute and (options.fresh or not session.cache.has_entries())):
        return
    if options.executor == "local":
        threading.Thread(target=pool.warm_up, name="book-warm-up", daemon=True).start()
    if "search" in config.plugins or "material/search" in config.plugins:
        try:
            import jieba
        except ImportError:
            return
        threading.Thread(target=jieba.initialize, name="book-jieba", daemon=True).start()


def cache_templates(env: Any, folder: Path) -> None:
    """MkDocs makes a new Jinja environment for every build, so each `mkdocs serve` rebuild compiled the theme's
    ~70 templates again (over a second): keep their compiled bytecode, by template source, in ``folder``."""
    import jinja2

    if env.bytecode_cache is None:
        folder.mkdir(parents=True, exist_ok=True)
        env.bytecode_cache = jinja2.FileSystemBytecodeCache(str(folder))
