"""The end of a build, after every page is written: the web font cut to the characters the site uses, the
formulas finished, the background build let loose, the search index and the palette patched, the PDF printed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from transformer_book.book.site import fix_palette, fix_search, print_edition


def finish(site_dir: Path, config: Any, setup: Any, font: Any, background: Any, nav: Any, log: Any) -> None:
    written = font.write(site_dir)
    if written is not None:
        out, n, how = written
        log.debug(f"Chinese web font: {n} characters, {out.stat().st_size // 1024} KB ({how})")
    if setup.math is not None:  # after the font: \text{…} in a formula is measured in it
        typeset, finished = setup.math.finish(site_dir)
        if finished:
            log.info(f"formulas: {typeset} typeset at build time, {finished} page(s) finished")
    if background is not None:
        background.release()  # the pages are written: now the snippets may have the cores
    for warning in fix_search.patch(site_dir):
        log.warning(warning + " (tests/test_browser.py checks the search: whole Chinese terms, the index on demand)")
    for warning in fix_palette.patch(site_dir):
        log.warning(warning)
    if setup.print_pdf and nav is not None:
        print_pdf(site_dir, config, nav, log)


PRINTING = "print edition: the pages are written; printing them into one PDF"  # tests/conftest.py waits for it


def print_pdf(site_dir: Path, config: Any, nav: Any, log: Any) -> None:
    log.info(PRINTING)
    started = time.perf_counter()
    try:
        pdf = print_edition.build(site_dir, print_edition.entries(nav), config.site_name, config.site_description or "")
    except Exception as exc:  # the home page links the PDF: a failed print is a broken site
        log.warning(f"the print edition could not be printed: {type(exc).__name__}: {exc}")
        return
    log.info(f"print edition: {pdf.name}, {pdf.stat().st_size // 1024} KB, {time.perf_counter() - started:.1f} s")
