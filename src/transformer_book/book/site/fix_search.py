"""Fixing Material's Chinese query segmentation in the built search worker.

Material 9.x splits a typed Chinese query into the longest pieces found in the index, but its loop stops
one character short (``j < query.length``), so a term that ends the query is never tried whole: 位置编码 is
searched as 位置*. Fixed in the built worker; if Material changes the code, the build says so
(``tests/test_browser.py`` checks that typed Chinese terms are searched whole).
"""

from __future__ import annotations

from pathlib import Path

from transformer_book.book.files import atomic_write_text

SEGMENT_BUG = "for(let o=s+1;o<t.length;o++)t.slice(s,o)in e"
SEGMENT_FIX = "for(let o=s+1;o<=t.length;o++)t.slice(s,o)in e"


def patch(site_dir: Path) -> list[str]:
    """Patch every search worker under ``site_dir``; returns warnings (Material's code changed)."""
    warnings = []
    for worker in sorted((site_dir / "assets" / "javascripts" / "workers").glob("search.*.min.js")):
        text = worker.read_text(encoding="utf-8")
        if text.count(SEGMENT_FIX) == 1 and SEGMENT_BUG not in text:
            continue  # patched already (a serve rebuild that kept the file)
        if text.count(SEGMENT_BUG) != 1:
            warnings.append(f"{worker.name}: Material's query segmentation changed; review book/site/fix_search.py")
            continue
        atomic_write_text(worker, text.replace(SEGMENT_BUG, SEGMENT_FIX))
    return warnings
