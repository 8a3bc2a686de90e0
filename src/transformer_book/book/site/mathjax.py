"""The site's formulas: typeset once, when the book is built, by the MathJax the site used to send to readers.

``pymdownx.arithmatex`` leaves every formula in the page as TeX (``<span class="arithmatex">\\(…\\)</span>``,
``<div class="arithmatex">\\[…\\]</div>``; notebook pages get the same markup from :mod:`.fix_notebook_html`).
A reader's browser used to download MathJax (``tex-svg-full.js``: 2.2 MB, 0.7 MB compressed) on every page and
typeset the page itself — seconds of script on a phone, and the text jumped as each formula appeared. Now
the build does it (:class:`Typesetter`): the same MathJax 3 from the ``django-static-mathjax`` package, with
the same configuration (:data:`CONFIG`), typesets every formula in headless Chromium inside the site's own
article style sheet and fonts, and the page carries the finished SVG (with MathJax's hidden MathML for
screen readers). Each page gets one hidden ``<svg>`` of the glyph outlines its formulas use, referenced by
``<use>``, and MathJax's small style sheet in its head; no math script at all.

A formula's SVG is cached by its TeX (:class:`Store`, under the result cache): a build typesets only formulas
it has not seen, so a warm build starts no browser. Pages whose formulas are all cached are finished while
MathJax renders them (:meth:`SiteMath.page`); the rest are typeset together at the end of the build
(:meth:`SiteMath.finish`). Where that cannot happen — no Chromium or playwright (the README's set-up is
pip-only), ``BOOK_MATH=browser``, or ``mkdocs serve``, where a new formula must show at once — the pages
that have formulas load MathJax themselves, deferred, as before (:func:`client_scripts`): the same
typesetting, in the reader's browser. The authors' guide (docs/authoring.md, 「网页在手机上也要快」) says
why, with the measurements.
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import os
import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from transformer_book.book.files import atomic_write_text

URI = "assets/mathjax/tex-svg-full.js"  # MathJax in the site: for pages the build could not typeset
PROGRAM = "tex-svg-full.js"

# MathJax's configuration, for the build's typesetting and for a reader's browser alike.
CONFIG: dict = {
    "tex": {
        # \( \) and \[ \] come from pymdownx.arithmatex (and from notebook pages, see fix_notebook_html).
        "inlineMath": [["\\(", "\\)"]],
        "displayMath": [["\\[", "\\]"]],
        "processEscapes": True,
        "processEnvironments": True,
    },
    # Typeset only the arithmatex spans; ".+" (not ".*|") so that nothing else is searched for TeX.
    "options": {"ignoreHtmlClass": ".+", "processHtmlClass": "arithmatex"},
    # \text{…} in the surrounding font: the Chinese labels of a formula (上下括号下的说明) drawn with the
    # book's web font, not with MathJax's own fonts, which hold no Chinese characters.
    "svg": {"mtextInheritFont": True},
    "loader": {"load": []},
    "startup": {"typeset": True},
}

# Bump when what the build does with MathJax's output changes: every cached formula is typeset again.
FORMAT = "6"

_MATH = re.compile(r'<(span|div) class="arithmatex">(.*?)</\1>', re.S)
_DEFS = re.compile(r"<defs>(.*?)</defs>", re.S)
_GLYPH = re.compile(r'<path id="MJX-\d+-([A-Z0-9-]+)" d="([^"]*)"></path>')
_LOCAL_REF = re.compile(r'xlink:href="#MJX-\d+-([A-Z0-9-]+)"')
_NAMESPACES = re.compile(r' xmlns(?::xlink)?="http://www\.w3\.org/(?:2000/svg|1999/xlink)"')
_DATA_C = re.compile(r' data-c="[0-9A-F]+"| data-mjx-texclass="[A-Z]+"')
_NODE = re.compile(r' data-mml-node="([A-Za-z]+)"')
_STYLED_NODES = {"merror", "mtable", "mtr", "mtd", "mlabeledtr", "menclose", "maction"}
_G_TAG = re.compile(r"<g\b[^>]*>|</g>")
_SHARED_ATTRIBUTES = (
    (' style="position: relative;"', ""),
    (' role="img" focusable="false"', ""),
    ('<g stroke="currentColor" fill="currentColor" stroke-width="0" transform="scale(1,-1)">',
     '<g transform="scale(1,-1)">'),
    ('<math xmlns="http://www.w3.org/1998/Math/MathML">', "<math>"),
    (' unselectable="on"', ""),
)
# The style every formula's SVG had in its attributes (_SHARED_ATTRIBUTES), once per page.
SHARED_CSS = ('mjx-container[jax="SVG"]{position:relative}'
              'mjx-container[jax="SVG"]>svg>g{stroke:currentColor;fill:currentColor;stroke-width:0}')
CACHE_ID = "MJX-SVG-glyphs"  # the hidden <svg> of a page's glyph outlines
STYLE_ID = "MJX-SVG-styles"


def source() -> Path:
    """The file to copy into the site as :data:`URI`."""
    return _es5() / PROGRAM


def _es5() -> Path:
    import mathjax

    return Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"


@functools.lru_cache(maxsize=None)
def version() -> str:
    try:
        return json.loads((_es5().parent / "package.json").read_text(encoding="utf-8"))["version"]
    except (OSError, ValueError, KeyError):
        return "?"


def config_script(typeset: bool = True) -> str:
    cfg = {**CONFIG, "startup": {"typeset": typeset}}
    if not typeset:  # the build's own page: no context menu (it would add tabindex and menu attributes)
        cfg["options"] = {**cfg["options"], "enableMenu": False}
    return "window.MathJax = " + json.dumps(cfg, ensure_ascii=False) + ";"


def client_scripts(page_url: str) -> str:
    """The scripts a page loads to typeset its own formulas in the reader's browser (deferred)."""
    here = page_url if page_url.endswith("/") or not page_url else posixpath.dirname(page_url) + "/"
    src = posixpath.relpath(URI, here.rstrip("/") or ".")
    return f'<script>{config_script()}</script><script defer src="{html.escape(src)}"></script>'


# ------------------------------------------------------------------------------------------------ formulas


@dataclass(frozen=True)
class Formula:
    tex: str
    display: bool

    @property
    def key(self) -> str:
        text = json.dumps([FORMAT, version(), CONFIG, self.tex, self.display], ensure_ascii=False, sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Typeset:
    """One formula, typeset: its ``<mjx-container>`` (glyphs referenced as ``#MJX-TEX-…``) and those glyphs."""

    container: str
    glyphs: dict[str, str] = field(default_factory=dict)


def formulas(page_html: str) -> list[Formula]:
    """The formulas of a page, in order (arithmatex markup not typeset yet)."""
    out = []
    for m in _MATH.finditer(page_html):
        f = _formula(m)
        if f is not None:
            out.append(f)
    return out


def _formula(m: re.Match[str]) -> Formula | None:
    text = html.unescape(m.group(2)).strip()
    if text.startswith("\\(") and text.endswith("\\)"):
        return Formula(text[2:-2], False)
    if text.startswith("\\[") and text.endswith("\\]"):
        return Formula(text[2:-2], True)
    return None  # typeset already, or not TeX


def from_mathjax(container: str) -> Typeset:
    """MathJax's output with a per-formula font cache (``<defs>`` of ``MJX-<n>-TEX-…`` paths in each SVG) →
    the container without its ``<defs>``, its ``<use>`` pointing at page-wide ids, and the glyphs it uses."""
    glyphs: dict[str, str] = {}
    for defs in _DEFS.findall(container):
        for gid, d in _GLYPH.findall(defs):
            glyphs[f"MJX-{gid}"] = d
    container = _DEFS.sub("", container)
    container = _LOCAL_REF.sub(lambda m: f'href="#MJX-{m.group(1)}"', container)
    # What an HTML page does not need: namespaces (the HTML parser knows <svg>), the character codes, TeX
    # classes and node names that only MathJax's own interactive tools read (those its style sheet selects
    # are kept).
    container = _NAMESPACES.sub("", container)
    container = _DATA_C.sub("", container)
    container = _NODE.sub(lambda m: m.group(0) if m.group(1) in _STYLED_NODES else "", container)
    # What every formula repeats is said once, in the page's style sheet (:data:`SHARED_CSS`); attributes no
    # browser reads any more (focusable, unselectable) go; <g> left without attributes are unwrapped.
    for said_once, instead in _SHARED_ATTRIBUTES:
        container = container.replace(said_once, instead)
    return Typeset(_unwrap_bare_groups(container), glyphs)


def _unwrap_bare_groups(svg: str) -> str:
    out, stack, pos = [], [], 0
    for m in _G_TAG.finditer(svg):
        out.append(svg[pos:m.start()])
        pos = m.end()
        if m.group(0) == "</g>":
            if not stack.pop():
                out.append(m.group(0))
        else:
            bare = m.group(0) == "<g>"
            stack.append(bare)
            if not bare:
                out.append(m.group(0))
    out.append(svg[pos:])
    return "".join(out)


def substitute(page_html: str, typeset: dict[str, Typeset], stylesheet: str) -> str:
    """The page with each formula replaced by its SVG, the glyphs it uses in one hidden ``<svg>`` at the start
    of the article (so that the print edition, which joins articles, takes them along) and MathJax's style
    sheet in the head. Formulas missing from ``typeset`` stay TeX."""
    used: dict[str, str] = {}

    def one(m: re.Match[str]) -> str:
        f = _formula(m)
        done = typeset.get(f.key) if f is not None else None
        if done is None:
            return m.group(0)
        used.update(done.glyphs)
        return f'<{m.group(1)} class="arithmatex">{done.container}</{m.group(1)}>'

    out = _MATH.sub(one, page_html)
    if not used and out == page_html:
        return page_html
    paths = "".join(f'<path id="{gid}" d="{d}"></path>' for gid, d in sorted(used.items()))
    cache = (f'<svg xmlns="http://www.w3.org/2000/svg" id="{CACHE_ID}" style="display: none;" aria-hidden="true">'
             f"<defs>{paths}</defs></svg>")
    article = re.search(r"<article\b[^>]*>", out)  # before the formulas: each <use> finds its glyph parsed
    out = out[:article.end()] + cache + out[article.end():] if article else out.replace("<body>", "<body>" + cache, 1)
    if f'id="{STYLE_ID}"' not in out:
        out = out.replace("</head>", f'<style id="{STYLE_ID}">{stylesheet}{SHARED_CSS}</style></head>', 1)
    return out


def add_client_scripts(page_html: str, page_url: str) -> str:
    """A page the build did not typeset: it loads MathJax (deferred) if it has formulas left."""
    if not formulas(page_html) or URI.rsplit("/", 1)[-1] in page_html:
        return page_html
    return page_html.replace("</body>", client_scripts(page_url) + "</body>", 1)


# ------------------------------------------------------------------------------------------------ the cache


class Store:
    """Typeset formulas by key, one small JSON file each (content-addressed: safe to share between builds)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.memory: dict[str, Typeset] = {}

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> Typeset | None:
        if key in self.memory:
            return self.memory[key]
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            found = Typeset(data["container"], data.get("glyphs") or {})
        except (OSError, ValueError, KeyError, TypeError):
            return None
        self.memory[key] = found
        return found

    def put(self, key: str, value: Typeset) -> None:
        self.memory[key] = value
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({"container": value.container, "glyphs": value.glyphs},
                                           ensure_ascii=False))

    def stylesheet(self) -> str | None:
        found = self.get(_stylesheet_key())
        return found.container if found is not None else None

    def put_stylesheet(self, css: str) -> None:
        css = re.sub(r"\s*([{};,])\s*", r"\1", re.sub(r":\s+", ":", css.strip()))  # one line: it goes in every page
        self.put(_stylesheet_key(), Typeset(css))


def _stylesheet_key() -> str:
    return Formula("(MathJax SVG style sheet)", False).key


# ------------------------------------------------------------------------------------------------ typesetting


def unavailable() -> str:
    """Why the build cannot typeset here ("" when it can)."""
    if os.environ.get("BOOK_MATH", "").strip().lower() == "browser":
        return "BOOK_MATH=browser"
    from transformer_book.book.site import chromium

    return chromium.unavailable()


HOST = "http://book.invalid/"

# The page formulas are typeset in: the site's own style sheets, the article's markup and fonts, so that
# MathJax measures \text{…} in the font a reader sees (the web font for Chinese, the theme's for Latin).
PAGE = """<!doctype html><html lang="zh"><head><meta charset="utf-8">{links}
<script>{config}</script><script src="{host}mathjax/{program}"></script></head>
<body><div class="md-container"><main class="md-main"><div class="md-content">
<article class="md-content__inner md-typeset" id="host"></article></div></main></div></body></html>"""

TYPESET = r"""
async (items) => {
  await document.fonts.ready;
  const host = document.getElementById('host');
  host.replaceChildren();
  for (const [tex, display] of items) {
    const el = document.createElement(display ? 'div' : 'span');
    el.className = 'arithmatex';
    el.textContent = display ? '\\[' + tex + '\\]' : '\\(' + tex + '\\)';
    host.appendChild(el);
    host.appendChild(document.createTextNode(' '));
  }
  await Promise.all([...host.querySelectorAll('.arithmatex')].map(
    el => document.fonts.load('16px ' + getComputedStyle(el).fontFamily, el.textContent)));
  MathJax.startup.document.clear();
  await MathJax.typesetPromise([host]);
  // Text inside a formula (\text{…}) is drawn in the reader's font but was placed with the width measured
  // here: textLength keeps that width whatever font the reader has, so nothing after it overlaps.
  for (const t of host.querySelectorAll('mjx-container svg text')) {
    const w = t.getComputedTextLength();
    if (w > 0) t.setAttribute('textLength', w.toFixed(1));
  }
  return [...host.querySelectorAll('.arithmatex')].map(el => el.innerHTML);
}
"""


class Typesetter:
    """Headless Chromium with MathJax loaded in a page styled like the site's articles."""

    def __init__(self, site_dir: Path, stylesheets: Iterable[str]) -> None:
        from playwright.sync_api import sync_playwright

        from transformer_book.book.site import chromium, webfont
        from transformer_book.book.site.page_html import blocking_font_faces

        self._pw = sync_playwright().start()
        try:
            self._browser = self._pw.chromium.launch(executable_path=str(chromium.CHROMIUM), headless=True,
                                                     args=chromium.ARGS)
            self.page = self._browser.new_page()
            self.page.set_default_timeout(120_000)
            es5, site = _es5(), site_dir.resolve()

            def serve(route) -> None:
                path = route.request.url[len(HOST):].split("?", 1)[0]
                base, rel = (es5, path[len("mathjax/"):]) if path.startswith("mathjax/") else (site, path)
                target = (base / rel).resolve()
                if not target.is_relative_to(base) or not target.is_file():
                    route.fulfill(status=404, body="")
                    return
                route.fulfill(path=str(target))

            self.page.route(HOST + "**", serve)
            stylesheets = list(stylesheets)
            links = "".join(f'<link rel="stylesheet" href="{HOST}{html.escape(s)}">' for s in stylesheets)
            # the fonts as the reader's browser has them once loaded (never the fallback while they load)
            fonts = blocking_font_faces(site_dir, stylesheets)
            if (site_dir / webfont.URI).exists():  # the pages add it by script (page_html.FONT_LOADER)
                fonts += webfont.font_face(HOST + webfont.URI)
            links += f"<style>{fonts}</style>"
            page = PAGE.format(links=links, config=config_script(typeset=False), host=HOST, program=PROGRAM)
            self.page.route(HOST + "typeset.html", lambda route: route.fulfill(
                body=page, content_type="text/html; charset=utf-8"))
            self.page.goto(HOST + "typeset.html", wait_until="load")
            self.page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise")
            self.page.evaluate("MathJax.startup.promise.then(() => 0)")
        except BaseException:
            self.close()
            raise

    def stylesheet(self) -> str:
        return self.page.evaluate("MathJax.startup.adaptor.textContent(MathJax.svgStylesheet())")

    def typeset(self, items: list[Formula], batch: int = 200) -> dict[str, Typeset]:
        out: dict[str, Typeset] = {}
        for i in range(0, len(items), batch):
            chunk = items[i:i + batch]
            done = self.page.evaluate(TYPESET, [[f.tex, f.display] for f in chunk])
            for f, container in zip(chunk, done):
                out[f.key] = from_mathjax(container)
        return out

    def close(self) -> None:
        browser = getattr(self, "_browser", None)
        if browser is not None:
            browser.close()
        self._pw.stop()


# ------------------------------------------------------------------------------------------------ one build


class SiteMath:
    """What one build does with the formulas of its pages."""

    def __init__(self, store: Store | None, log_warning: Callable[[str], None] = print) -> None:
        self.store = store  # None: the pages typeset their formulas in the reader's browser
        self.log_warning = log_warning
        self.waiting: dict[str, str] = {}  # site-relative file → page URL: pages with formulas not cached

    def page(self, page_html: str, page_url: str, dest_path: str) -> str:
        """A rendered page: its formulas replaced by their cached SVG, or the page remembered for
        :meth:`finish` (or, without a build-time typesetter, given MathJax's scripts)."""
        found = formulas(page_html)
        if not found:
            return page_html
        if self.store is None:
            return add_client_scripts(page_html, page_url)
        css = self.store.stylesheet()
        done = {f.key: t for f in found if (t := self.store.get(f.key)) is not None}
        if css is None or len(done) < len({f.key for f in found}):
            self.waiting[dest_path] = page_url
            return page_html
        return substitute(page_html, done, css)

    def finish(self, site_dir: Path) -> tuple[int, int]:
        """Typeset what no earlier build had, and finish the pages that waited for it. Returns (formulas
        typeset, pages finished)."""
        if not self.waiting or self.store is None:
            return 0, 0
        texts = {dest: (site_dir / dest).read_text(encoding="utf-8") for dest in self.waiting}
        missing: dict[str, Formula] = {}
        for text in texts.values():
            for f in formulas(text):
                if self.store.get(f.key) is None:
                    missing.setdefault(f.key, f)
        first = next(iter(self.waiting))
        try:
            typesetter = Typesetter(site_dir, page_stylesheets(texts[first], self.waiting[first]))
        except Exception as exc:  # no browser after all: these pages typeset in the reader's browser
            self.log_warning(f"formulas could not be typeset at build time ({type(exc).__name__}: {exc}); "
                             f"{len(texts)} page(s) load MathJax instead")
            for dest, text in texts.items():
                atomic_write_text(site_dir / dest, add_client_scripts(text, self.waiting[dest]))
            self.waiting = {}
            return 0, 0
        try:
            if self.store.stylesheet() is None:
                self.store.put_stylesheet(typesetter.stylesheet())
            for key, value in typesetter.typeset(list(missing.values())).items():
                self.store.put(key, value)
        finally:
            typesetter.close()
        css = self.store.stylesheet() or ""
        for dest, text in texts.items():
            done = {f.key: t for f in formulas(text) if (t := self.store.get(f.key)) is not None}
            atomic_write_text(site_dir / dest, substitute(text, done, css))
        pages = len(self.waiting)
        self.waiting = {}
        return len(missing), pages


def page_stylesheets(page_html: str, page_url: str) -> list[str]:
    """The site-relative style sheets a built page links (the typesetting page uses the same)."""
    here = page_url if page_url.endswith("/") or not page_url else posixpath.dirname(page_url) + "/"
    out = []
    for href in re.findall(r'<link rel="stylesheet" href="([^"]+)"', page_html):
        if "//" in href:
            continue
        out.append(posixpath.normpath(posixpath.join(here, html.unescape(href))).lstrip("/"))
    return out


def typeset_already(page_html: str) -> bool:
    """Whether a page's formulas were typeset at build time (it carries the SVG and no TeX)."""
    return f'id="{CACHE_ID}"' in page_html and not formulas(page_html)
