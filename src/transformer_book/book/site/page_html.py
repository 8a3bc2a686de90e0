"""Small fixes to every rendered page, for a reader on a phone and for a reader who does not see the screen.

* **Figures sized before they load.** The engine's figures are ``<img>`` of SVG files under
  ``assets/generated/``; without a size the browser lays the page out with an empty box and moves the text
  below when the picture arrives (layout shift). Each gets ``width``/``height`` from its SVG (the book's
  style sheet keeps ``max-width: 100%; height: auto``: the box has the picture's proportions at any width),
  and all but the first load lazily (``loading="lazy"``: pictures far down the page do not compete with the
  text).
* **The web font off the critical path.** The Chinese web font (360 KB) is the largest file a page loads. A
  page first draws its Chinese in the reader's own Chinese font and switches to the book's once it has
  loaded, or at once where an earlier page loaded the font (:data:`FONT_LOADER`; book.css explains why
  nothing moves when it does).
* **A name for Material's search dialog** (``aria-label="搜索"``; axe-core: ``aria-dialog-name``).
* **No empty header cells.** The empty top-left cell of a table whose rows are named (``| | 第 1 维 |``)
  is not a header of anything: it becomes a ``<td>`` (axe-core: ``empty-table-header``).
"""

from __future__ import annotations

import html
import json
import posixpath
import re
from typing import Callable

from transformer_book.book.site.webfont import FAMILY, PLACEHOLDER_URI, UNICODE_RANGE, URI

_IMG = re.compile(r"<img\b[^>]*>")
_SRC = re.compile(r'\bsrc="([^"]+)"')
_SVG_TAG = re.compile(r"<svg\b[^>]*>", re.S)
_LENGTH = re.compile(r"^\s*([0-9.]+)\s*(px|pt|pc|mm|cm|in)?\s*$")
_TO_PX = {None: 1.0, "px": 1.0, "pt": 4 / 3, "pc": 16.0, "mm": 96 / 25.4, "cm": 96 / 2.54, "in": 96.0}
GENERATED = "assets/generated/"


def svg_size(svg: str) -> tuple[int, int] | None:
    """The CSS pixel size an SVG is drawn at by an ``<img>`` (its width/height, else its viewBox)."""
    tag = _SVG_TAG.search(svg)
    if tag is None:
        return None
    attrs = dict(re.findall(r'([\w:-]+)="([^"]*)"', tag.group(0)))
    w, h = _length(attrs.get("width")), _length(attrs.get("height"))
    if w and h:
        return round(w), round(h)
    box = attrs.get("viewBox", "").replace(",", " ").split()
    if len(box) == 4:
        try:
            bw, bh = float(box[2]), float(box[3])
        except ValueError:
            return None
        if bw > 0 and bh > 0:
            return round(bw), round(bh)
    return None


def _length(value: str | None) -> float | None:
    m = _LENGTH.match(value or "")
    return float(m.group(1)) * _TO_PX[m.group(2)] if m else None


def _here(page_url: str) -> str:
    return page_url if page_url.endswith("/") or not page_url else posixpath.dirname(page_url) + "/"


def size_figures(page_html: str, page_url: str, svg_of: Callable[[str], str | None]) -> str:
    """Every ``<img>`` of a generated SVG gets its size (``svg_of``: the SVG's text by its path in the site)
    and ``decoding="async"``, and all but the first ``loading="lazy"``."""
    here = _here(page_url)
    first = [True]

    def one(m: re.Match[str]) -> str:
        tag = m.group(0)
        src = _SRC.search(tag)
        if src is None or " width=" in tag:
            return tag
        path = posixpath.normpath(posixpath.join(here, html.unescape(src.group(1)))).lstrip("/")
        if not path.startswith(GENERATED) or not path.endswith(".svg"):
            return tag
        svg = svg_of(path)
        size = svg_size(svg) if svg else None
        if size is None:
            return tag
        # the page's first figure may be on its first screen: it loads at once, the others when scrolled near
        extra = f' width="{size[0]}" height="{size[1]}"' + ("" if first[0] else ' loading="lazy"') + ' decoding="async"'
        first[0] = False
        return tag[:-2].rstrip() + extra + " />" if tag.endswith("/>") else tag[:-1] + extra + ">"

    return _IMG.sub(one, page_html)


FONT_KEY = "book-cjk"  # in localStorage: a page has loaded the web font (it is in the browser's cache)
# In each page's head: the web font is added to the page (FontFace) at once where an earlier page loaded it
# (it is cached: the text waits for it, "block"), else once this page has loaded and the browser is idle
# ("swap") — never on the critical path of the first page a reader opens, nor competing with its pictures. The style sheets name the family first in every stack,
# so adding it changes no style: the browser only lays the Chinese text out again, in the same widths.
FONT_LOADER = (
    "<script>(function(){var k=\"%(key)s\",c=false;try{c=localStorage.getItem(k)===\"1\"}catch(e){}"
    "function add(){if(!window.FontFace||!document.fonts)return;"
    "var f=new FontFace(\"%(family)s\",'url(\"'+%(url)s+'\") format(\"woff2\")',"
    "{unicodeRange:\"%(range)s\",display:c?\"block\":\"swap\"});document.fonts.add(f);"
    "f.load().then(function(){try{localStorage.setItem(k,\"1\")}catch(e){}},function(){})}"
    "if(c)add();else addEventListener(\"load\",function(){if(window.requestIdleCallback)"
    "requestIdleCallback(add,{timeout:3000});else setTimeout(add,500)})})()</script>"
)


def font_loader(page_html: str, page_url: str) -> str:
    """First thing in the head: the web font's loader (:data:`FONT_LOADER`) and the preload of the
    placeholder font the text is laid out in meanwhile on a machine without Chinese fonts (book.css)."""
    if f'"{FONT_KEY}"' in page_html.split("</head>", 1)[0]:
        return page_html
    here = _here(page_url).rstrip("/") or "."
    href = posixpath.relpath(PLACEHOLDER_URI, here)
    loader = FONT_LOADER % {"key": FONT_KEY, "family": FAMILY, "range": UNICODE_RANGE,
                            "url": json.dumps(posixpath.relpath(URI, here))}
    head = f'<link rel="preload" href="{html.escape(href)}" as="font" type="font/woff2" crossorigin>' + loader
    at = page_html.find("<meta charset")
    if at < 0:
        return page_html.replace("</head>", head + "</head>", 1)
    end = page_html.index(">", at) + 1
    return page_html[:end] + head + page_html[end:]


_SEARCH_DIALOG = '<div class="md-search" data-md-component="search" role="dialog">'
SEARCH_NAME = "搜索"  # Material's own word for it (its search box's label in Chinese)


def search_dialog_name(page_html: str) -> str:
    """Material's search dialog has no name (axe-core: ``aria-dialog-name``): it gets one."""
    return page_html.replace(_SEARCH_DIALOG, _SEARCH_DIALOG[:-1] + f' aria-label="{SEARCH_NAME}">', 1)


_EMPTY_TH = re.compile(r"<th(\s[^>]*)?>\s*</th>")


def empty_header_cells(page_html: str) -> str:
    """``<th></th>`` (a table's empty corner) → ``<td></td>``."""
    return _EMPTY_TH.sub(lambda m: f"<td{m.group(1) or ''}></td>", page_html)


def fix(page_html: str, page_url: str, svg_of: Callable[[str], str | None], webfont: bool) -> str:
    page_html = size_figures(search_dialog_name(empty_header_cells(page_html)), page_url, svg_of)
    return font_loader(page_html, page_url) if webfont else page_html


_FONT_FACE = re.compile(r"@font-face\s*\{[^}]*\}", re.S)
_URL = re.compile(r"""url\(\s*(["']?)([^"')]+)\1\s*\)""")


def blocking_font_faces(site_dir, sheets: list[str]) -> str:
    """The web fonts of the site's style sheets (``sheets``: paths in the site), declared again with
    ``font-display: block`` and URLs relative to the site's root. For pages drawn once and kept — the print
    edition, the page formulas are typeset in — where text must wait for its font, never fall back."""
    out = []
    for sheet in sheets:
        try:
            css = (site_dir / sheet).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        base = posixpath.dirname(sheet)
        for rule in _FONT_FACE.findall(css):
            if "font-display" not in rule or "font-display: block" in rule:
                continue
            rule = re.sub(r"font-display\s*:\s*[a-z]+", "font-display: block", rule)
            rule = _URL.sub(lambda m: m.group(0) if ":" in m.group(2) else
                            f'url("{posixpath.normpath(posixpath.join(base, m.group(2)))}")', rule)
            out.append(rule)
    return "\n".join(out)
