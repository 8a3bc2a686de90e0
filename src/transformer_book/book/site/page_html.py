"""Small fixes to every rendered page, for a reader on a phone and for a reader who does not see the screen.

All but the web font's loader are made on the page's parse (:mod:`..html_edit`), in one pass (:func:`fix`):

* **Figures sized before they load.** The engine's figures are ``<img>`` of SVG files under
  ``assets/generated/``; without a size the browser lays the page out with an empty box and moves the text
  below when the picture arrives (layout shift). Each gets ``width``/``height`` from its SVG (the book's
  style sheet keeps ``max-width: 100%; height: auto``: the box has the picture's proportions at any width),
  ``decoding="async"``, and all but the first load lazily (``loading="lazy"``: pictures far down the page do
  not compete with the text).
* **Code folds parsed only when opened.** The code under a result (``??? example``) and a function's source
  in the code reference are folded; on §11 or an API page they are most of the page's elements, which the
  browser builds and the theme's script walks on every view, though few readers open them. The content
  of a closed code fold goes into a ``<template>``: still in the page (search, the print edition and tests
  read it), but inert until the fold opens, when the page script (:mod:`.page_script`) puts it in place.
* **The web font off the critical path.** The Chinese web font (360 KB) is the largest file a page loads. A
  page first draws its Chinese in the reader's own Chinese font and switches to the book's once it has
  loaded, or at once where an earlier page loaded the font (:data:`FONT_LOADER`; book.css explains why
  nothing moves when it does).
* **The theme's script after the text.** Material's script (``bundle.….min.js``, 110 KB) sits at the end of
  the body and blocks the parser there; it searches, follows the contents and switches the colours, but
  the page reads without it. Fetched at high priority it competes with the style sheets and the page for a
  slow connection, and a browser that has it before the style sheets runs it before the first paint; it
  gets ``fetchpriority="low"``, so the text is drawn first (Lighthouse: first contentful paint on the P08
  page 1.90 → 1.66 s whenever the script had come first).
* **Copy buttons written into the page.** Material's script gives every code block its copy button by
  inserting it and then measuring the block, one block after another: each insertion makes the next
  measurement lay the page out again (on the API page, 22 blocks: ~30 ms of a desktop's time at load, four
  times that on Lighthouse's phone). The buttons are written here instead, the same markup Material makes
  (``nav.md-code__nav > button.md-code__button[data-md-type=copy]``, its title from the theme's own
  translation), pointing at the code by an id of its own (``__book_code_N``: Material renames the ``pre``
  when it mounts the block); the theme's ``content.code.copy`` is off (mkdocs.yml), its clipboard handler
  listens on the whole document as before. The code in a closed fold gets its button when it opens (the
  page script: written here, those buttons would only add bytes to every page view). Code with
  numbered lines also gets the class Material's script would add (``md-code__content``, ``display: grid``):
  added at load, it laid each such block out anew, one block at a time.
* **The color-scheme meta from the start** (:data:`.fix_palette.HEAD_META`): Chromium restyles the whole
  page whenever one is added, which Material's script did at every load; it now finds this one.
* **A name for Material's search dialog** (``aria-label="搜索"``; axe-core: ``aria-dialog-name``).
* **No dangling dash in the code reference.** mkdocstrings lists a parameter as "name (type) – description";
  where a docstring gives only the type (``out : Tensor (B, T, d)``), the dash is left before nothing and is
  taken out.
* **No empty header cells.** The empty top-left cell of a table whose rows are named (``| | 第 1 维 |``)
  is not a header of anything: it becomes a ``<td>`` (axe-core: ``empty-table-header``).
"""

from __future__ import annotations

import html
import json
import posixpath
import re
from typing import Any, Callable

from transformer_book.book import html_edit
from transformer_book.book.site.fix_palette import HEAD_META

from transformer_book.book.site.webfont import FAMILY, PLACEHOLDER_URI, UNICODE_RANGE, URI

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


FONT_KEY = "book-cjk"  # in localStorage: a page has loaded the web font (it is in the browser's cache)
# In each page's head: the web font is added to the page (FontFace) at once where an earlier page loaded it
# (it is cached: the text waits for it, "block"), else once this page has loaded and the browser is idle
# ("swap") — never on the critical path of the first page a reader opens, nor competing with its pictures. The style sheets name the family first in every stack,
# so adding it changes no style: the browser only lays the Chinese text out again, in the same widths.
# On a first visit the font is loaded first and added once it is there: a face added while it loads makes
# the browser lay all the text out twice (when it is added, and again when it arrives), and on a long page
# each of those is a long task (the API page: 30–40 ms each on this machine, four times that on a phone).
FONT_LOADER = (
    "<script>(function(){var k=\"%(key)s\",c=false;try{c=localStorage.getItem(k)===\"1\"}catch(e){}"
    "function add(){if(!window.FontFace||!document.fonts)return;"
    "var f=new FontFace(\"%(family)s\",'url(\"'+%(url)s+'\") format(\"woff2\")',"
    "{unicodeRange:\"%(range)s\",display:c?\"block\":\"swap\"});"
    "function done(){try{localStorage.setItem(k,\"1\")}catch(e){}}"
    "if(c){document.fonts.add(f);f.load().then(done,function(){})}"
    "else f.load().then(function(){document.fonts.add(f);done()},function(){})}"
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


THEME_SCRIPT = re.compile(r"(^|/)assets/javascripts/bundle\.[0-9a-f]+\.min\.js$")  # Material's script
SEARCH_NAME = "搜索"  # Material's own word for it (its search box's label in Chinese)
CODE_FOLDS = {"example", "mkdocstrings-source"}  # as print_edition names them
FOLD_MARK = "data-book-fold"  # on the <template> of a code fold's content (page_script opens it)
CODE_ID = "__book_code_"  # + a number: the id of a code block's <code>, which its copy button copies
COPY_TITLE = "复制"  # the copy button's title where the theme's configuration does not give one


def _copy_title(elements: list[html_edit.Element], page_html: str) -> str:
    """The theme's word for the copy button (``translations["clipboard.copy"]`` in its ``#__config``)."""
    config = next((e for e in elements if e.tag == "script" and e.get("id") == "__config"), None)
    try:
        return json.loads(config.inner(page_html))["translations"]["clipboard.copy"] if config else COPY_TITLE
    except (ValueError, KeyError, TypeError):
        return COPY_TITLE


def _copyable(code: html_edit.Element) -> bool:
    """A ``pre > code`` Material would give a copy button (not a diagram, not under ``.no-copy``) that has none."""
    pre = code.parent
    if pre is None or pre.tag != "pre" or "mermaid" in pre.classes or code.has("id"):
        return False
    if any(c.tag == "nav" and "md-code__nav" in c.classes for c in pre.children):
        return False  # a page fixed before
    ancestor: html_edit.Element | None = pre
    while ancestor is not None:
        if "no-copy" in ancestor.classes:
            return False
        ancestor = ancestor.parent
    return True


def svg_of(files: Any) -> Callable[[str], str | None]:
    """A generated figure's SVG by its path in the site (what :func:`fix` sizes its ``<img>`` by), from the
    build's MkDocs ``Files``."""
    def read(path: str) -> str | None:
        f = files.get_file_from_path(path) if files is not None else None
        if f is None:
            return None
        try:
            return f.content_string
        except (OSError, UnicodeDecodeError):
            return None
    return read


def fix(page_html: str, page_url: str, svg_of: Callable[[str], str | None], webfont: bool) -> str:
    """The page with the fixes above; ``svg_of``: a generated SVG's text by its path in the site."""
    here = _here(page_url)
    elements = html_edit.parse(page_html)
    changes: list[tuple[int, int, str]] = []
    first_figure = True
    folds = [e for e in elements if e.tag == "details" and e.classes & CODE_FOLDS and not e.has("open")]
    content = next((e for e in elements if e.get("data-md-component") == "content"), None)
    copy_title = html.escape(_copy_title(elements, page_html), quote=True)
    codes = 0
    charset = next((e for e in elements if e.tag == "meta" and e.has("charset")), None)
    if charset is not None and not any(e.tag == "meta" and e.get("name") == "color-scheme" for e in elements):
        changes.append((charset.open_end, charset.open_end, HEAD_META))
    for e in elements:
        if e.tag == "img":
            size = _generated_size(e, here, svg_of)
            if size is not None:
                attrs = [(n, v) for n, v in e.attrs if n not in ("width", "height", "loading", "decoding")]
                attrs += [("width", str(size[0])), ("height", str(size[1]))]
                attrs += ([] if first_figure else [("loading", "lazy")]) + [("decoding", "async")]
                first_figure = False
                changes.append((e.start, e.open_end, e.start_tag(attrs)))
        elif e.tag == "th" and not e.inner(page_html).strip():
            changes.append((e.start, e.end, e.start_tag(e.attrs).replace("<th", "<td", 1) + "</td>"))
        elif e.tag == "script" and THEME_SCRIPT.search(e.get("src") or "") and not e.has("fetchpriority"):
            changes.append((e.start, e.open_end, e.start_tag(e.attrs + [("fetchpriority", "low")])))
        elif (e.tag == "code" and content is not None and e.within(content) and _copyable(e)
              and not any(e.within(f) for f in folds)):  # a closed fold's: the page script, when it opens
            code_id = f"{CODE_ID}{codes}"
            codes += 1
            button = (f'<nav class="md-code__nav"><button class="md-code__button" title="{copy_title}" '
                      f'data-clipboard-target="#{code_id}" data-md-type="copy"></button></nav>')
            attrs = e.attrs + [("id", code_id)]
            if any(c.tag == "span" and c.has("id") for c in e.children) and "md-code__content" not in e.classes:
                # numbered lines: Material's script adds this class (display: grid) — a layout of the whole block
                # again, each block forced by its next read; here it costs nothing
                classes = (e.get("class") or "").split() + ["md-code__content"]  # as written: the same every build
                attrs = [(n, v) for n, v in attrs if n != "class"] + [("class", " ".join(classes))]
            changes.append((e.start, e.open_end, button + e.start_tag(attrs)))
        elif e.tag == "div" and "md-search" in e.classes and e.get("role") == "dialog" and not e.has("aria-label"):
            changes.append((e.start, e.open_end, e.start_tag(e.attrs + [("aria-label", SEARCH_NAME)])))
        elif e.tag == "div" and "doc-md-description" in e.classes and not e.inner(page_html).strip():
            dash = e.start - 1
            while dash >= 0 and page_html[dash].isspace():  # only the blank run before the div, not the page
                dash -= 1
            if dash >= 0 and page_html[dash] == "–":
                changes.append((dash, dash + 1, ""))
        elif e in folds and not any(e is not f and e.within(f) for f in folds):
            summary = e.first("summary")
            template = e.first("template")
            folded = template is not None and template.has(FOLD_MARK)  # a page fixed before: once is enough
            if summary is not None and summary.end < e.close and not folded:
                changes.append((summary.end, summary.end, f"<template {FOLD_MARK}>"))
                changes.append((e.close, e.close, "</template>"))
    page_html = html_edit.edit(page_html, changes)
    return font_loader(page_html, page_url) if webfont else page_html


def _generated_size(img: html_edit.Element, here: str, svg_of: Callable[[str], str | None]) -> tuple[int, int] | None:
    src = img.get("src")
    if not src or img.has("width"):
        return None
    path = posixpath.normpath(posixpath.join(here, src)).lstrip("/")
    if not path.startswith(GENERATED) or not path.endswith(".svg"):
        return None
    svg = svg_of(path)
    return svg_size(svg) if svg else None


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
