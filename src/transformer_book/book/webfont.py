"""A Chinese web font made for this site: the CJK characters the built pages use, and nothing else.

The site must render Chinese on a machine without Chinese system fonts and without the internet, so it
ships its own font. Shipping the whole GB 2312 subset would cost every reader 2 MB; instead, after each
build, the characters that actually occur in the pages are cut out of the packaged font (a few hundred KB)
and written as WOFF2. The result is cached by (character set, font file), so a build that adds no new
character does no font work.
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from .files import atomic_write_bytes

URI = "assets/fonts/book-cjk.woff2"  # declared by the site's stylesheet (@font-face)

# CJK punctuation, Hanzi, full-width forms — the ranges the @font-face declares in book.css.
CJK = re.compile(r"[\u2e80-\u2fff\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")


def used_characters(site_dir: Path) -> str:
    chars: set[str] = set()
    for path in site_dir.rglob("*"):
        # Pages and the search index; not the bundled scripts (lunr's word lists hold characters no page shows).
        if path.suffix in (".html", ".json") and path.is_file():
            chars.update(CJK.findall(path.read_text(encoding="utf-8", errors="ignore")))
    return "".join(sorted(chars))


def write_subset(font: Path, site_dir: Path, target: str, cache_dir: Path) -> tuple[Path, int, bool]:
    """Write the subset for this site to ``site_dir/target``; returns (path, characters, was_cached)."""
    chars = used_characters(site_dir)
    key = hashlib.sha256(chars.encode() + font.read_bytes()[:4096] + str(font.stat().st_size).encode()).hexdigest()[:24]
    cached = cache_dir / f"{key}.woff2"
    hit = cached.exists()
    if not hit:
        from fontTools import subset
        from fontTools.ttLib import TTFont

        ttf = TTFont(str(font))
        options = subset.Options()
        options.flavor = "woff2"
        options.layout_features = ["*"]
        options.hinting = False
        subsetter = subset.Subsetter(options)
        subsetter.populate(text=chars or "中")
        subsetter.subset(ttf)
        import io

        buf = io.BytesIO()
        ttf.flavor = "woff2"
        ttf.save(buf)
        atomic_write_bytes(cached, buf.getvalue())
        for old in cache_dir.glob("*.woff2"):
            if old != cached:
                old.unlink(missing_ok=True)
    out = site_dir / target
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cached, out)
    return out, len(chars), hit
