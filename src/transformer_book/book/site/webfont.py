"""A Chinese web font made for this site: the CJK characters the book uses, and nothing else.

The site must render Chinese on a machine without Chinese system fonts and without the internet, so it
ships its own font. Shipping the whole GB 2312 subset would cost every reader 2 MB; instead the characters
the book uses are cut out of the packaged font (a few hundred KB) and written as WOFF2.

Cutting takes about 3 s (most of it Brotli), too long to wait for at the end of every fresh build or first
``serve``. So the character set is read from the book's *sources* (pages, snippets and their records, the
Python code in the folders the plugin watches, ``mkdocs.yml``, the engine's own words, the theme's words for
the site's language), which are known before any page is rendered, and the font is cut by a separate
process (:class:`Subset`) while MkDocs renders the pages. At the end of the build the site's own characters
are checked against it; if a page shows a character the sources do not hold (a theme string, say), the font
is cut again, for the site's characters, before the build ends: the shipped font always covers every
character shown. Results are cached by (character set, font file), so a build that adds no new character
does no font work.
"""

from __future__ import annotations

import hashlib
import io
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterable

from transformer_book.book.files import atomic_write_bytes
from transformer_book.book.memo import Memo, file_version

URI = "assets/fonts/book-cjk.woff2"  # declared by the site's stylesheet (@font-face)

# CJK punctuation, Hanzi, full-width forms — the ranges the @font-face declares in book.css.
CJK = re.compile(r"[\u2e80-\u2fff\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")

SOURCE_SUFFIXES = (".md", ".ipynb", ".py", ".json", ".yml", ".yaml", ".txt", ".html", ".js", ".css", ".csv")
SKIP_DIRS = ("__pycache__", "node_modules")


def used_characters(site_dir: Path) -> str:
    """The CJK characters of a built site: its pages and the search index (not the bundled scripts: lunr's
    word lists hold characters no page shows)."""
    chars: set[str] = set()
    for path in site_dir.rglob("*"):
        if path.suffix in (".html", ".json") and path.is_file():
            chars.update(_characters_of(path))  # under serve, only the pages this rebuild wrote are read
    return "".join(sorted(chars))


def source_characters(paths: Iterable[Path], code: Iterable[Path] = ()) -> str:
    """The CJK characters of the given files, of the text files under the given folders, and of the Python
    files under the ``code`` folders (whose docstrings the API pages show; their data files are not shown).
    Hidden folders, ``__pycache__`` and virtual environments are skipped."""
    chars: set[str] = set()
    todo = [(p, SOURCE_SUFFIXES) for p in paths] + [(p, (".py",)) for p in code]
    for path, suffixes in todo:
        if path.is_file():
            files: Iterable[Path] = [path]
        elif path.is_dir():
            files = _text_files(path, suffixes)
        else:
            continue
        for f in files:
            chars.update(_characters_of(f))
    return "".join(sorted(chars))


_CHARACTERS: Memo[frozenset[str]] = Memo("characters of a file")  # by the file's version: serve rebuilds


def _characters_of(path: Path) -> frozenset[str]:
    return _CHARACTERS.get(path, file_version(path),
                           lambda: frozenset(CJK.findall(path.read_text(encoding="utf-8", errors="ignore"))))


def _text_files(folder: Path, suffixes: tuple[str, ...]) -> Iterable[Path]:
    for path in sorted(folder.iterdir()):
        if path.is_dir():
            if path.name.startswith(".") or path.name in SKIP_DIRS or (path / "pyvenv.cfg").exists():
                continue
            yield from _text_files(path, suffixes)
        elif path.suffix in suffixes:
            yield path


def cache_path(font: Path, chars: str, cache_dir: Path) -> Path:
    key = hashlib.sha256(chars.encode() + font.read_bytes()[:4096] + str(font.stat().st_size).encode()).hexdigest()[:24]
    return cache_dir / f"{key}.woff2"


def cut(font: Path, chars: str, target: Path) -> None:
    """Write the WOFF2 subset of ``font`` holding ``chars`` (and the layout features they need) to ``target``."""
    import io

    from fontTools import subset

    options = subset.Options()  # pyftsubset's defaults: glyph bounds are not recomputed (a second or more)
    options.flavor = "woff2"
    options.layout_features = ["*"]
    options.hinting = False
    ttf = subset.load_font(str(font), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=chars or "中")
    subsetter.subset(ttf)
    buf = io.BytesIO()
    subset.save_font(ttf, buf, options)
    atomic_write_bytes(target, buf.getvalue())


class Subset:
    """The font for one character set, cut in a separate process started now (or found in the cache)."""

    def __init__(self, font: Path, chars: str, cache_dir: Path) -> None:
        self.font, self.chars = font, chars
        self.path = cache_path(font, chars, cache_dir)
        self.cached = self.path.exists()
        self._proc: subprocess.Popen | None = None
        if not self.cached:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._proc = subprocess.Popen([sys.executable, "-m", __name__, str(font), str(self.path)],
                                          stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            assert self._proc.stdin is not None
            self._proc.stdin.write(chars.encode("utf-8"))
            self._proc.stdin.close()

    def wait(self) -> Path:
        """The finished font file. If the process failed, the font is cut here, so that its error (if any)
        is raised in the build with its own traceback."""
        if self._proc is not None:
            # Its stderr is not kept: a failure is cut again here, where the error is raised in the build.
            if self._proc.wait() != 0 or not self.path.exists():
                cut(self.font, self.chars, self.path)
            self._proc = None
        return self.path

    def cancel(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None


def write(site_dir: Path, target: str, font: Path, cache_dir: Path, started: Subset | None) -> tuple[Path, int, str]:
    """Put the site's font at ``site_dir/target``: the one ``started`` from the sources when it covers every
    character the site shows, else one cut now for the site's characters. Returns (path, characters, how)
    with how = "cached", "cut while rendering" or "cut after the build"."""
    shown = used_characters(site_dir)
    if started is not None and set(shown) <= set(started.chars):
        how = "cached" if started.cached else "cut while rendering"
        font_file = started.wait()
        n = len(started.chars)
    else:
        if started is not None:
            started.cancel()
        font_file = cache_path(font, shown, cache_dir)
        how = "cached" if font_file.exists() else "cut after the build"
        if not font_file.exists():
            cut(font, shown, font_file)
        n = len(shown)
    for old in cache_dir.glob("*.woff2"):  # keep the one in use and the one the sources predicted
        if old != font_file and (started is None or old != started.path):
            old.unlink(missing_ok=True)
    out = site_dir / target
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(font_file, out)
    return out, n, how


# The code point ranges of CJK above, as the placeholder font covers them; its punctuation keeps the
# OpenType features a browser trims adjacent punctuation with (CSS text-spacing-trim).
CJK_RANGES = ((0x2E80, 0x2FFF), (0x3000, 0x303F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),
              (0xFE30, 0xFE4F), (0xFF00, 0xFFEF))
UNICODE_RANGE = ", ".join(f"U+{lo:04X}-{hi:04X}" for lo, hi in CJK_RANGES)
FAMILY = "Book CJK"
PUNCTUATION = ((0x3000, 0x303F), (0xFE30, 0xFE4F), (0xFF00, 0xFFEF))
SPACING_FEATURES = ["chws", "halt", "vchw", "vhal"]
PLACEHOLDER_URI = "assets/fonts/book-cjk-placeholder.woff2"  # declared by book.css, preloaded by every page


def placeholder(font: Path) -> bytes:
    """A WOFF2 of about 2 KB that draws nothing but lays Chinese text out exactly as ``font`` does: every
    CJK code point has a blank glyph with the advance ``font`` gives it (1 em for a Hanzi), the punctuation
    keeps the font's spacing features, and the vertical metrics are the font's. book.css makes it the last
    font of the text, preloaded: a machine without any Chinese font (machines with one never reach it)
    lays the page out in it until the web font arrives — blank space of the right width instead of boxes
    of another width, which moved every line when the web font came."""
    from fontTools import subset
    from fontTools.fontBuilder import FontBuilder
    from fontTools.misc.timeTools import timestampFromString
    from fontTools.pens.ttGlyphPen import TTGlyphPen
    from fontTools.ttLib import TTFont
    from fontTools.ttLib.tables._c_m_a_p import CmapSubtable

    src = TTFont(str(font), lazy=True)
    cmap, hmtx, upm = src.getBestCmap(), src["hmtx"], src["head"].unitsPerEm
    options = subset.Options()
    options.layout_features = SPACING_FEATURES
    options.notdef_outline, options.glyph_names, options.hinting, options.name_IDs = False, True, False, []
    marks = subset.load_font(str(font), options)
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[cp for lo, hi in PUNCTUATION for cp in range(lo, hi + 1) if cp in cmap])
    subsetter.subset(marks)  # the punctuation with its spacing features
    punct = marks.getBestCmap()
    advance = {cp: (hmtx[cmap[cp]][0] if cp in cmap else upm)
               for lo, hi in CJK_RANGES for cp in range(lo, hi + 1) if cp not in punct}
    widths = sorted(set(advance.values()))
    names = marks.getGlyphOrder() + [f"blank{w}" for w in widths]
    fb = FontBuilder(upm, isTTF=True)
    fb.setupGlyphOrder(names)
    fb.setupCharacterMap({})
    box = TTGlyphPen(None)  # .notdef has an outline: a glyf table of only empty glyphs is refused (OTS)
    box.moveTo((100, 0))
    box.lineTo((100, 700))
    box.lineTo((500, 700))
    box.lineTo((500, 0))
    box.closePath()
    fb.setupGlyf({n: box.glyph() if n == ".notdef" else TTGlyphPen(None).glyph() for n in names})
    fb.setupHorizontalMetrics({**{n: (marks["hmtx"][n][0], 0) for n in marks.getGlyphOrder()},
                               **{f"blank{w}": (w, 0) for w in widths}})
    hhea, os2 = src["hhea"], src["OS/2"]
    fb.setupHorizontalHeader(ascent=hhea.ascent, descent=hhea.descent, lineGap=hhea.lineGap)
    fb.setupNameTable({"familyName": "Book CJK placeholder", "styleName": "Regular"})
    fb.setupOS2(sTypoAscender=os2.sTypoAscender, sTypoDescender=os2.sTypoDescender, sTypoLineGap=os2.sTypoLineGap,
                usWinAscent=os2.usWinAscent, usWinDescent=os2.usWinDescent, fsSelection=os2.fsSelection,
                achVendID="BOOK")
    fb.setupPost()
    out = fb.font
    for tag in ("GDEF", "GPOS", "GSUB"):
        if tag in marks:
            out[tag] = marks[tag]
    out["head"].created = out["head"].modified = timestampFromString("Mon Jan  1 00:00:00 2024")  # same bytes
    many_to_one = CmapSubtable.newSubtable(13)  # a run of code points sharing one glyph is one group
    many_to_one.platformID, many_to_one.platEncID, many_to_one.language = 3, 10, 0
    many_to_one.cmap = {**{cp: f"blank{w}" for cp, w in advance.items()}, **punct}
    out["cmap"].tables = [many_to_one]
    out.flavor = "woff2"
    buf = io.BytesIO()
    out.save(buf)
    return buf.getvalue()


def font_face(url: str, display: str = "block") -> str:
    """The ``@font-face`` of the web font at ``url``, for a page that must draw its text in it (the print
    edition, the page formulas are typeset in). The site's pages load it by script (page_html.FONT_LOADER)."""
    return (f'@font-face{{font-family:"{FAMILY}";src:url("{url}") format("woff2");font-display:{display};'
            f"unicode-range:{UNICODE_RANGE}}}")


def write_placeholder(site_dir: Path, font: Path, cache_dir: Path) -> Path:
    """Put :func:`placeholder` of ``font`` at ``site_dir/PLACEHOLDER_URI`` (made once per font, cached)."""
    key = hashlib.sha256(b"placeholder/1" + font.read_bytes()[:4096] + str(font.stat().st_size).encode()).hexdigest()
    cached = cache_dir / "placeholder" / f"{key[:24]}.woff2"
    if not cached.exists():
        cached.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(cached, placeholder(font))
    out = site_dir / PLACEHOLDER_URI
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(cached, out)
    return out


def main(argv: list[str]) -> int:
    """``python -m transformer_book.book.site.webfont FONT TARGET`` with the characters on stdin."""
    font, target = Path(argv[0]), Path(argv[1])
    cut(font, sys.stdin.buffer.read().decode("utf-8"), target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
