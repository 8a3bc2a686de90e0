"""The headless Chromium the build drives: where it is, how it is started, and why it cannot run here.

Two parts of the build use it — the formulas typeset at build time (:mod:`.mathjax`) and the print edition
(:mod:`.print_edition`) — and both ask this module, so neither imports the other.
"""

from __future__ import annotations

import os
from pathlib import Path

CHROMIUM = Path(os.environ.get("BOOK_CHROMIUM", "/usr/bin/chromium"))
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]


def unavailable() -> str:
    """Why Chromium cannot be driven here ("" when it can)."""
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM} (set BOOK_CHROMIUM, or install it: apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "no playwright to drive Chromium (pip install playwright)"
    return ""
