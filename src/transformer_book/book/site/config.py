"""The plugin's configuration (``plugins: - book:`` in ``mkdocs.yml``) and its environment overrides.

Every switch can be overridden by an environment variable, so that the same ``mkdocs.yml`` serves authors
and CI:

==================  =====================  ===============================================================
option              environment            meaning
==================  =====================  ===============================================================
``execute``         ``BOOK_EXECUTE=0``     plain build: run nothing, show placeholders (for benchmarks)
``fresh``           ``BOOK_FRESH=1``       ignore cached results, execute every snippet
``ci``              ``BOOK_CI=1``          fresh, and a missing/orphaned record, any drift, a claim that
                                           no longer holds or an uncalibrated trained value fails
``workers``         ``BOOK_WORKERS=N``     parallel snippet processes (default: one per BOOK_THREADS cores)
``cache_dir``       ``BOOK_CACHE_DIR``     where results are cached: a folder, or a shared fsspec URL
                                           (``s3://bucket/prefix``, ``file:///shared/dir``)
``executor``        ``BOOK_EXECUTOR``      ``local`` (processes on this machine) or ``dask://host:port``
                                           (a Dask cluster, docs/authoring-cluster.md)
``pdf``             ``BOOK_PDF=0``         print the whole book into one PDF after ``mkdocs build``
                                           (:mod:`.print_edition`; skipped, saying why, without Chromium)
(none)              ``BOOK_ONLY=a/*,b/x``  run only these snippets (globs); others show placeholders
==================  =====================  ===============================================================
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from mkdocs.config import base
from mkdocs.config import config_options as c

from transformer_book.book.environment import HEAVY_MODULES
from transformer_book.book import static_imports
from transformer_book.book.execution import pool
from transformer_book.book.session import BookSession
from transformer_book.book.state import Options
from transformer_book.book.storage.store import cache_location

# What the engine's output needs from Python-Markdown: code folds and placeholders are ``??? example`` /
# ``!!! note`` blocks (admonition + pymdownx.details), code inside them needs superfences, figures and
# captions are HTML with ``markdown="span"`` (md_in_html), results are Markdown tables (tables).
REQUIRED_EXTENSIONS = {
    "admonition": "code folds and placeholders (!!! / ???)",
    "pymdownx.details": "the collapsible ??? code folds",
    "pymdownx.superfences": "code listings inside the folds",
    "md_in_html": 'figures and captions (markdown="span")',
    "tables": "generated tables",
}


class BookConfig(base.Config):
    snippets_dir = c.Type(str, default="snippets")
    cache_dir = c.Type(str, default=".book-cache")  # a path relative to mkdocs.yml, or a URL
    executor = c.Type(str, default="local")  # "local" or "dask://host:port"
    report_dir = c.Type(str, default=".book-cache/report")
    execute = c.Type(bool, default=True)
    fresh = c.Type(bool, default=False)
    ci = c.Type(bool, default=False)
    workers = c.Type(int, default=0)
    # Seconds after which a snippet that declares neither TIMEOUT_SECONDS nor BUDGET_SECONDS is stopped
    # (one that declares BUDGET_SECONDS = b is stopped after 10 b): a hang fails the build, naming it.
    timeout = c.Type((int, float), default=1800)
    mathjax = c.Type(bool, default=True)
    # A Chinese font (OTF/TTF) cut to the characters the site uses and shipped as WOFF2; "" = none.
    webfont = c.Type((str, bool), default="")  # a path relative to mkdocs.yml; false or "" = none
    # Modules the worker forkserver imports up front (besides numpy and matplotlib). Left out, it is torch and
    # what a training snippet imports anyway (the first optimiser step pulls in torch._dynamo, ~1 s per process
    # otherwise) if any snippet of the book reaches torch, and nothing if none does (a forkserver then starts
    # ~3 s sooner: every build, every calibration run): see :func:`default_preload`. A module that is not
    # installed is skipped.
    preload = c.Optional(c.ListOfItems(c.Type(str)))
    watch = c.ListOfItems(c.Type(str), default=["src", "snippets", "data"])
    # Modules that register result kinds of the book's own (results.register), imported before the first page
    # is read: a module of the project (beside mkdocs.yml) or an installed one. Installed packages can also
    # register theirs through the entry-point group results.ENTRY_POINTS without being named here.
    result_kinds = c.ListOfItems(c.Type(str), default=[])
    pdf = c.Type(bool, default=False)  # the print edition (never under serve)
    # The package whose functions and classes pages show with {{ code module:name }} (rendering/code_excerpt.py)
    code_package = c.Type(str, default="src/transformer_book")


def env_flag(environ: Mapping[str, str], name: str, default: bool) -> bool:
    value = environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() not in ("0", "false", "no", "off")


def options(cfg: BookConfig, environ: Mapping[str, str] = os.environ) -> Options:
    ci = env_flag(environ, "BOOK_CI", cfg.ci)
    return Options(
        execute=env_flag(environ, "BOOK_EXECUTE", cfg.execute),
        fresh=env_flag(environ, "BOOK_FRESH", cfg.fresh) or ci,
        ci=ci,
        workers=int(environ.get("BOOK_WORKERS") or cfg.workers),
        executor=environ.get("BOOK_EXECUTOR") or cfg.executor,
        timeout=float(cfg.timeout),
        # CI always runs everything; an author may build just the part being written.
        select=() if ci else tuple(p.strip() for p in environ.get("BOOK_ONLY", "").split(",") if p.strip()),
    )


def pdf(cfg: BookConfig, environ: Mapping[str, str] = os.environ) -> bool:
    return env_flag(environ, "BOOK_PDF", cfg.pdf)


def cache_dir(cfg: BookConfig, project_root: Path, environ: Mapping[str, str] = os.environ) -> Path | str:
    return cache_location(environ.get("BOOK_CACHE_DIR") or cfg.cache_dir, project_root)


def missing_extensions(mkdocs_config: Any) -> list[str]:
    """The Markdown extensions the engine's output needs that ``markdown_extensions`` does not list."""
    names = set()
    for ext in mkdocs_config.markdown_extensions:
        name = ext if isinstance(ext, str) else getattr(ext, "__module__", "")
        names.add(name.removeprefix("markdown.extensions."))
    return [f"{name} ({why})" for name, why in REQUIRED_EXTENSIONS.items() if name not in names]


def default_preload(snippets_dir: Path, docs_dir: Path) -> list[str]:
    """What the forkserver imports when the book does not say: :data:`HEAVY_MODULES` if any snippet, helper or
    notebook page reaches torch (read statically, :mod:`..static_imports`), else nothing."""
    files = [*sorted(snippets_dir.rglob("*.py")), *sorted(docs_dir.rglob("*.ipynb"))]
    return list(HEAVY_MODULES) if static_imports.reaches(files, "torch") else []


def load_result_kinds(modules: list[str], project_root: Path) -> None:
    """Import the modules of the ``result_kinds`` option (they register their kinds as they are imported)."""
    if modules and str(project_root) not in sys.path:
        sys.path.insert(0, str(project_root))  # a module beside mkdocs.yml, as the snippet processes see it
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - any failure is the option's error
            raise ValueError(f"result_kinds: cannot import {name!r}: {type(exc).__name__}: {exc}") from None


def open_session(cfg: BookConfig, project_root: Path, docs_dir: Path,
                 environ: Mapping[str, str] = os.environ) -> BookSession:
    """The one way a session is opened on a project — by the plugin (:mod:`.plugin`) and by the command line
    (:mod:`..cli.project`), from the same settings: the snippets folder, the cache (``BOOK_CACHE_DIR``), the report
    folder, and the build options with their environment overrides (``BOOK_EXECUTOR``, ``BOOK_WORKERS`` …)."""
    load_result_kinds(cfg.result_kinds, project_root)
    snippets_dir = project_root / cfg.snippets_dir
    preload = cfg.preload if cfg.preload is not None else default_preload(snippets_dir, docs_dir)
    pool.configure(preload)  # before the first snippet process: what its forkserver imports
    return BookSession(project_root, snippets_dir, cache_dir(cfg, project_root, environ),
                       project_root / cfg.report_dir, docs_dir, options=options(cfg, environ))
