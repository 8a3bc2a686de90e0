"""The built site, opened in headless Chromium as a reader would see it (issue 7).

Every page of the site is loaded once at desktop size and once at phone size. One browser, one page per
size, nothing blocked: every request the page makes is recorded and checked. The checks:

* a page loads with no console error, no failed request, and no request leaving 127.0.0.1;
* every formula is typeset (no raw ``\\(`` ``\\[`` ``$…$`` left in the rendered text, outside code), including
  the Markdown cells of notebook pages — by the build: no page loads MathJax;
* every image loads and has alt text or a caption;
* no Chinese character falls back to a box: the site's web font "Book CJK" is loaded and holds every
  Chinese character the pages show;
* the search box finds the pages a reader looks for, and no page loads the search index before search opens;
* on a phone, wide tables scroll inside their box instead of widening the page.

A few screenshots (desktop and phone) are kept under ``artifacts/screenshots/`` for CI.

Without Chromium at /usr/bin/chromium (``BOOK_CHROMIUM`` points elsewhere) or without the ``playwright``
package, these tests are skipped. They never download a browser: playwright drives the system Chromium.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from conftest import MKDOCS_YML, ROOT, InFlight

pytestmark = pytest.mark.browser

SCREENSHOTS = ROOT / "artifacts" / "screenshots"
SCREENSHOT_PAGES = {  # page → file name stem
    "lecture07/s03-scaling/": "lecture07-s03-scaling",
    "lecture07/s05-position/": "lecture07-s05-position",
    "chapter20/c14-dataflow/": "chapter20-c14-dataflow",
}
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 375, "height": 740}
HOST = "127.0.0.1"

# The ranges the @font-face of "Book CJK" declares (docs/stylesheets/book.css) — the characters it must hold.
CJK = re.compile(r"[\u2e80-\u2fff\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef]")


# --------------------------------------------------------------------------------------------- fixtures


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".woff2": "font/woff2", ".svg": "image/svg+xml", ".js": "text/javascript", ".json": "application/json",
    }

    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="session")
def site_url(chromium, built_site: Path):
    """The built site served on 127.0.0.1 at a free port (the browser is checked first: no build without it)."""
    server = http.server.ThreadingHTTPServer((HOST, 0), functools.partial(_QuietHandler, directory=str(built_site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://{HOST}:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def site_pages(site: Path) -> list[str]:
    """Every page of the site, as a URL path relative to the root ('' is the home page).

    The sitemap is empty without ``site_url`` in mkdocs.yml, so the built index.html files are the list."""
    pages = sorted(
        "" if p.parent == site else p.parent.relative_to(site).as_posix() + "/"
        for p in site.rglob("index.html")
        if not ({"assets", "search"} & set(p.relative_to(site).parts))
    )
    if (site / "404.html").exists():
        pages.append("404.html")
    return pages


@dataclass
class Visit:
    page: str
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    info: dict = field(default_factory=dict)        # what the page reported at desktop size
    phone: dict = field(default_factory=dict)       # … and at phone size
    error: str | None = None                        # the page could not be examined at all


# Typeset formulas that a reader cannot see: an SVG collapsed to (almost) nothing, outside closed folds.
COLLAPSED_MATH = r"""
  const COLLAPSED_MATH = () => [...document.querySelectorAll('.md-content mjx-container > svg')]
    .filter(s => !s.closest('details:not([open])') && s.getClientRects().length
                 && (s.getBoundingClientRect().width < 4 || s.getBoundingClientRect().height < 4))
    .map(s => (s.closest('.arithmatex') || s).textContent.slice(0, 60) || s.getAttribute('viewBox'));
"""

# Run in the page after "load": waits for MathJax and the fonts, then reports what a reader would see.
COLLECT = r"""
async () => {""" + COLLAPSED_MATH + r"""

  const timeout = (ms) => new Promise((_, reject) => setTimeout(() => reject(new Error('timed out')), ms));
  const out = {mathjax: false, mathjaxError: null};
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    out.mathjax = true;
    try { await Promise.race([MathJax.startup.promise, timeout(20000)]); }
    catch (e) { out.mathjaxError = String(e); }
  }
  await Promise.race([document.fonts.ready, timeout(10000)]).catch(() => {});
  const content = document.querySelector('.md-content');
  out.hasContent = !!content;
  if (!content) return out;

  // Rendered text outside code, math and scripts: raw TeX delimiters must not survive here.
  const clone = content.cloneNode(true);
  clone.querySelectorAll('pre, code, mjx-container, script, style, .headerlink').forEach(e => e.remove());
  out.proseText = clone.textContent;   // notebook pages: Markdown cells (.jp-RenderedMarkdown) included

  // Formulas: every arithmatex span/div must hold a typeset mjx-container; TeX errors show as mjx-merror.
  const spans = [...content.querySelectorAll('.arithmatex')];
  out.arithmatex = spans.length;
  out.untypeset = spans.filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80));
  out.mjx = content.querySelectorAll('mjx-container').length;
  out.mathErrors = [...content.querySelectorAll('mjx-merror')].map(
    e => (e.getAttribute('data-mjx-error') || e.textContent).slice(0, 120));
  out.collapsedMath = COLLAPSED_MATH();

  // Images: loaded (lazy ones are asked to load now) and described.
  out.images = [];
  for (const img of content.querySelectorAll('img')) {
    if (img.loading === 'lazy') img.loading = 'eager';
    if (!img.complete) {
      await new Promise(r => { img.addEventListener('load', r, {once: true});
                               img.addEventListener('error', r, {once: true}); setTimeout(r, 10000); });
    }
    const fig = img.closest('figure');
    const cap = fig && fig.querySelector('figcaption');
    out.images.push({src: img.getAttribute('src'), width: img.naturalWidth,
                     alt: (img.getAttribute('alt') || '').trim(), caption: cap ? cap.textContent.trim() : ''});
  }
  out.figuresWithoutImage = [...content.querySelectorAll('figure')].filter(
    f => !f.querySelector('img, svg, object, iframe, video, canvas')).length;

  // Code blocks: each has a copy button that copies it (written into the page, or made when its fold opened).
  out.codeWithoutCopy = [...content.querySelectorAll('pre:not(.mermaid) > code')].filter(code => {
    const button = code.parentElement.querySelector(':scope > nav.md-code__nav > button.md-code__button[data-md-type=copy]');
    const target = button && document.querySelector(button.getAttribute('data-clipboard-target'));
    return !(button && button.title && (target === code || target === code.parentElement));
  }).map(code => code.textContent.trim().slice(0, 50));

  // Fonts: every character a reader can see or unfold (collapsed answers and code included).
  const all = document.body.cloneNode(true);
  all.querySelectorAll('script, style, mjx-container').forEach(e => e.remove());
  out.allText = all.textContent + ' ' + document.querySelector('.md-search__input')?.getAttribute('placeholder');
  out.visibleText = content.innerText;
  out.fontFaces = [...document.fonts].map(f => [f.family.replace(/["']/g, ''), f.status]);
  out.typesetFont = getComputedStyle(content.querySelector('.md-typeset') || content).fontFamily;
  const sample = (out.visibleText.match(/[\u3400-\u9fff]/g) || []).slice(0, 60).join('');
  out.fontSample = sample;
  out.fontCheck = sample ? document.fonts.check('16px "Book CJK"', sample) : null;
  return out;
}
"""

# At phone size: does anything widen the page? Which tables scroll inside their box?
PHONE_LAYOUT = r"""
async () => {""" + COLLAPSED_MATH + r"""

  await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
  const root = document.documentElement;
  const width = root.clientWidth;
  const wide = [];
  if (root.scrollWidth > width) {
    // Name the outermost elements that stick out (not those inside a box that scrolls or clips).
    const clipped = (e) => {
      for (let p = e.parentElement; p && p !== document.body; p = p.parentElement) {
        const s = getComputedStyle(p);
        if (s.overflowX !== 'visible') return true;
      }
      return false;
    };
    for (const e of document.querySelectorAll('.md-container *')) {
      const r = e.getBoundingClientRect();
      if (r.right > width + 1 && !clipped(e) && r.width > 0) {
        const cls = typeof e.className === 'string' && e.className
          ? '.' + e.className.trim().split(/\s+/).join('.') : '';
        const text = (e.textContent || '').trim().slice(0, 40);
        wide.push(`${e.tagName.toLowerCase()}${cls} (right edge ${Math.round(r.right)}px): ${text}`);
        if (wide.length >= 5) break;
      }
    }
  }
  const tables = [...document.querySelectorAll('.md-content table:not(.highlighttable)')].map(t => {
    const wrap = t.closest('.md-typeset__scrollwrap') || t.parentElement;
    return {wrapped: !!t.closest('.md-typeset__scrollwrap'), scrollWidth: wrap.scrollWidth,
            clientWidth: wrap.clientWidth, overflowX: getComputedStyle(wrap).overflowX};
  });
  return {scrollWidth: root.scrollWidth, clientWidth: width, innerWidth: window.innerWidth, wide, tables,
          collapsedMath: COLLAPSED_MATH()};
}
"""


# Nothing the page asked for is still on its way (the search worker's script; the web font, which a page
# adds once it has loaded): the next page load would abort it. The search index itself is fetched only
# when the reader opens search (book/site/fix_search.py).
SETTLED = """() => document.fonts.status === 'loaded'"""

WAIT_TYPESET = """
async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise)
    await Promise.race([MathJax.startup.promise, new Promise(r => setTimeout(r, 20000))]);
  await document.fonts.ready;
}
"""


@pytest.fixture(scope="session")
def visits(chromium, site_url: str, built_site: Path) -> dict[str, Visit]:
    """Every page, loaded once at desktop size and once at phone size; what it did and what it showed."""
    pages = site_pages(built_site)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    out: dict[str, Visit] = {p: Visit(p) for p in pages}
    current: list[Visit] = [out[pages[0]]]

    def record(context):
        # Requests from workers (the search index) reach the context, not the page: listen there.
        context.on("request", lambda r: current[0].requests.append(r.url))
        context.on("requestfailed", lambda r: current[0].failed_requests.append(f"{r.url} ({r.failure})"))
        context.on("response", lambda r: r.status >= 400
                   and current[0].failed_requests.append(f"{r.url} (HTTP {r.status})"))

    def watch(page):
        page.on("console", lambda m: m.type == "error" and current[0].console_errors.append(
            f"{m.text} [{m.location.get('url', '')}:{m.location.get('lineNumber', '')}]"))
        page.on("pageerror", lambda e: current[0].console_errors.append(f"uncaught: {e}"))

    for size, key in ((DESKTOP, "info"), (PHONE, "phone")):
        context = chromium.new_context(viewport=size, device_scale_factor=1, locale="zh-CN")
        record(context)
        requests = InFlight(context)
        page = context.new_page()
        page.set_default_timeout(30_000)
        watch(page)
        for p in pages:
            visit = current[0] = out[p]
            try:
                page.goto(site_url + p, wait_until="load")
                if key == "info":
                    visit.info = page.evaluate(COLLECT)
                else:
                    page.evaluate(WAIT_TYPESET)  # wide formulas count: measure after MathJax
                    visit.phone = page.evaluate(PHONE_LAYOUT)
                # Let what the page fetches after "load" arrive before the next page load would abort it.
                page.wait_for_function(SETTLED, timeout=15_000)
                requests.settle(page)
                if p in SCREENSHOT_PAGES:
                    name = SCREENSHOT_PAGES[p]
                    page.screenshot(path=str(SCREENSHOTS / f"{name}-{'desktop' if key == 'info' else 'phone'}.png"))
                    wrap = page.query_selector(".md-content .md-typeset__scrollwrap")
                    if key == "phone" and wrap:
                        wrap.scroll_into_view_if_needed()
                        page.screenshot(path=str(SCREENSHOTS / f"{name}-phone-table.png"))
            except Exception as e:  # noqa: BLE001 — one page that cannot be examined must not hide the rest
                if key == "info" or visit.error is None:
                    where = "desktop" if key == "info" else "phone"
                    visit.error = f"{where}: {type(e).__name__}: {str(e).splitlines()[0]}"
        context.close()
    return out


# ------------------------------------------------------------------------------------------------ tests


def _report(problems: list[str], what: str) -> None:
    assert not problems, f"{what} ({len(problems)}):\n  " + "\n  ".join(problems)


def _examined(visits: dict[str, Visit]) -> list[Visit]:
    return [v for v in visits.values() if v.error is None]


def test_every_page_of_the_site_can_be_examined(visits: dict[str, Visit]) -> None:
    assert len(visits) >= 40, f"only {len(visits)} pages found: {sorted(visits)}"
    _report([f"{v.page or '/'}: {v.error}" for v in visits.values() if v.error], "pages that could not be examined")
    _report([f"{v.page or '/'}: no .md-content" for v in _examined(visits)
             if v.page != "404.html" and not v.info.get("hasContent")], "pages without an article")


def test_pages_load_without_console_errors(visits: dict[str, Visit]) -> None:
    problems = []
    for v in visits.values():
        for message in dict.fromkeys(v.console_errors):  # the same error at both sizes: once
            problems.append(f"{v.page or '/'}: {message}")
    _report(problems, "console errors")


def test_no_request_fails(visits: dict[str, Visit]) -> None:
    problems = [f"{v.page or '/'}: {r}" for v in visits.values() for r in dict.fromkeys(v.failed_requests)]
    _report(problems, "failed requests")


def test_no_request_leaves_127_0_0_1(visits: dict[str, Visit]) -> None:
    problems = []
    for v in visits.values():
        for url in dict.fromkeys(v.requests):
            parts = urlsplit(url)
            if parts.scheme in ("data", "blob", "about"):
                continue
            if parts.hostname != HOST:
                problems.append(f"{v.page or '/'}: {url}")
    assert sum(len(v.requests) for v in visits.values()) > len(visits), "no requests were recorded at all"
    _report(problems, "requests that leave 127.0.0.1 (the site must work offline)")


# Raw TeX that MathJax should have turned into a formula: \( \) \[ \] $$ and $…$ on one line.
RAW_MATH = re.compile(r"\\\(|\\\)|\\\[|\\\]|\$\$|\$[^$\s][^$\n]{0,300}?\$")


def test_every_formula_is_typeset(visits: dict[str, Visit]) -> None:
    problems = []
    pages_with_math = 0
    for v in _examined(visits):
        info = v.info
        name = v.page or "/"
        if info.get("mathjaxError"):
            problems.append(f"{name}: MathJax did not finish: {info['mathjaxError']}")
        text = info.get("proseText", "")
        raw = list(RAW_MATH.finditer(text))
        for m in raw[:3]:
            problems.append(f"{name}: raw TeX in the text: …{text[max(0, m.start() - 20): m.end() + 20]!r}…")
        if len(raw) > 3:
            problems.append(f"{name}: … and {len(raw) - 3} more raw TeX")
        for src in info.get("untypeset", []):
            problems.append(f"{name}: formula not typeset: {src!r}")
        for err in info.get("mathErrors", []):
            problems.append(f"{name}: TeX error: {err}")
        if info.get("arithmatex"):
            pages_with_math += 1
            if info.get("mjx", 0) < info["arithmatex"]:
                problems.append(f"{name}: {info['arithmatex']} formulas but only {info.get('mjx')} mjx-container")
    assert pages_with_math >= 10, f"only {pages_with_math} pages have formulas: is arithmatex still configured?"
    _report(problems, "formulas that a reader sees as raw TeX")


def test_formulas_come_typeset_and_no_page_loads_mathjax(visits: dict[str, Visit]) -> None:
    """The build typesets every formula (book/site/mathjax.py): a page carries the finished SVG and no math
    script — a reader's phone no longer downloads and runs MathJax on every page."""
    problems = [f"{v.page or '/'}: {url}" for v in visits.values() for url in dict.fromkeys(v.requests)
                if "/mathjax/" in url]
    _report(problems, "pages that load MathJax (their formulas were not typeset at build time)")
    assert any(v.info.get("mjx") for v in _examined(visits))


def test_no_page_loads_the_search_index_before_search_is_opened(visits: dict[str, Visit]) -> None:
    """The search index (2 MB, the whole book's text) is fetched when the reader opens search, not by every
    page view (book/site/fix_search.py); test_search_* below open search and find what they look for."""
    problems = [f"{v.page or '/'}: {url}" for v in visits.values() for url in dict.fromkeys(v.requests)
                if "search_index" in url]
    _report(problems, "pages that fetch the search index without search being opened")


def test_every_typeset_formula_can_be_seen_at_desktop_and_phone_size(visits: dict[str, Visit]) -> None:
    """Typeset is not enough: below Material's wide-screen breakpoint a display formula's SVG once collapsed
    to 1 × 1 px (a circular min-content / max-width: 100%), so phones showed a blank where the formula was."""
    problems = []
    for v in _examined(visits):
        for where, info in (("desktop", v.info), ("phone", v.phone)):
            for tex in info.get("collapsedMath", [])[:3]:
                problems.append(f"{v.page or '/'} ({where}): formula drawn at (almost) zero size: {tex!r}")
    _report(problems, "formulas a reader cannot see")


def test_every_code_block_has_a_copy_button_for_its_code(visits: dict[str, Visit]) -> None:
    """Written into the page (book/site/page_html.py), not by the theme's script; the button's target is its
    own code block."""
    _report([f"{v.page or '/'}: {text!r}" for v in _examined(visits) for text in v.info.get("codeWithoutCopy", [])],
            "code blocks without a copy button for them")


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_page_has_one_color_scheme_meta_that_follows_the_palette(chromium, site_url: str, scheme: str) -> None:
    """The page brings the meta (book/site/fix_palette.py) and the theme's script uses it: one meta, saying the
    scheme the page is drawn in — at load in the reader's scheme, and after the reader switches."""
    context = chromium.new_context(viewport=DESKTOP, locale="zh-CN", color_scheme=scheme)
    page = context.new_page()
    state = """() => [document.body.getAttribute('data-md-color-scheme'),
                      [...document.querySelectorAll('meta[name=color-scheme]')].map(m => m.content)]"""
    try:
        page.goto(site_url + "lecture07/s02-self-attention/", wait_until="load")
        page.wait_for_function("document.querySelector('meta[name=color-scheme]').content !== ''")
        dark = scheme == "dark"
        assert page.evaluate(state) == (["slate", ["dark"]] if dark else ["default", ["light"]])
        page.locator("form[data-md-component=palette] label:not([hidden])").first.click()
        page.wait_for_function("s => document.body.getAttribute('data-md-color-scheme') === s",
                               arg="default" if dark else "slate")
        assert page.evaluate(state) == (["default", ["light"]] if dark else ["slate", ["dark"]])
    finally:
        context.close()


def test_a_code_fold_opened_brings_copy_buttons_for_its_code(chromium, site_url: str) -> None:
    """The code reference's source folds are inert until opened (book/site/page_html.py); opened, each code
    block in them has a copy button whose target is that block, and clicking one says it copied."""
    context = chromium.new_context(viewport=DESKTOP, locale="zh-CN")
    page = context.new_page()
    try:
        page.goto(site_url + "api/transformer/", wait_until="load")
        fold = page.locator("details.mkdocstrings-source").first
        assert page.evaluate("d => d.querySelectorAll('pre > code').length", fold.element_handle()) == 0
        fold.locator("summary").click()
        checked = page.evaluate("""d => [...d.querySelectorAll('pre > code')].map(code => {
            const b = code.parentElement.querySelector(':scope > nav.md-code__nav > button.md-code__button');
            return !!b && document.querySelector(b.getAttribute('data-clipboard-target')) === code.parentElement
                   || !!b && document.querySelector(b.getAttribute('data-clipboard-target')) === code; })""",
                                fold.element_handle())
        assert checked and all(checked), checked
        fold.locator("button.md-code__button").first.click()
        page.locator(".md-dialog").get_by_text("已复制").wait_for(timeout=5_000)  # the theme's "copied" notice
    finally:
        context.close()


def test_every_image_loads_and_is_described(visits: dict[str, Visit]) -> None:
    problems = []
    images = 0
    for v in _examined(visits):
        for img in v.info.get("images", []):
            images += 1
            if img["width"] <= 0:
                problems.append(f"{v.page or '/'}: image does not load: {img['src']}")
            if not img["alt"] and not img["caption"]:
                problems.append(f"{v.page or '/'}: image without alt text or caption: {img['src']}")
        if v.info.get("figuresWithoutImage"):
            problems.append(f"{v.page or '/'}: {v.info['figuresWithoutImage']} <figure> without an image")
    assert images >= 5, f"only {images} images on the whole site"
    _report(problems, "images")


def test_the_chinese_web_font_is_loaded_and_used(visits: dict[str, Visit]) -> None:
    s02 = visits["lecture07/s02-self-attention/"].info
    assert ["Book CJK", "loaded"] in s02["fontFaces"], f"document.fonts: {s02['fontFaces']}"
    problems = []
    for v in _examined(visits):
        info = v.info
        if not info.get("fontSample"):
            continue
        if not info.get("typesetFont", "").lstrip("\"' ").startswith("Book CJK"):
            problems.append(f"{v.page or '/'}: article font is {info.get('typesetFont')!r}")
        if info.get("fontCheck") is not True:
            problems.append(f"{v.page or '/'}: document.fonts.check('16px \"Book CJK\"', …) is false "
                            f"for {info['fontSample'][:20]}…")
    _report(problems, "pages whose Chinese text is not set in the site's font")


def test_every_chinese_character_shown_is_in_the_web_font(visits: dict[str, Visit], built_site: Path) -> None:
    from fontTools.ttLib import TTFont

    cmap = TTFont(str(built_site / "assets" / "fonts" / "book-cjk.woff2"))["cmap"].getBestCmap()
    missing: dict[str, set[str]] = {}
    for v in _examined(visits):
        for ch in set(CJK.findall(v.info.get("allText", ""))):
            if ord(ch) not in cmap:
                missing.setdefault(ch, set()).add(v.page or "/")
    _report([f"{ch} (U+{ord(ch):04X}) on {', '.join(sorted(pages)[:3])}" for ch, pages in sorted(missing.items())],
            "characters that fall back to a system font (a box on a machine without Chinese fonts)")


def test_on_a_phone_no_page_is_wider_than_the_screen(visits: dict[str, Visit]) -> None:
    problems = []
    for v in _examined(visits):
        ph = v.phone
        if not ph:
            continue
        if ph["scrollWidth"] > ph["clientWidth"] or ph["scrollWidth"] > ph["innerWidth"]:
            problems.append(f"{v.page or '/'}: {ph['scrollWidth']}px wide on a {ph['clientWidth']}px screen; "
                            + "; ".join(ph["wide"]))
    _report(problems, f"pages that scroll sideways at {PHONE['width']}×{PHONE['height']}")


def test_on_a_phone_wide_tables_scroll_inside_their_box(visits: dict[str, Visit]) -> None:
    scrolling = []
    problems = []
    for v in _examined(visits):
        for t in v.phone.get("tables", []):
            if t["scrollWidth"] > t["clientWidth"]:
                if t["overflowX"] in ("auto", "scroll"):
                    scrolling.append(v.page)
                else:
                    problems.append(f"{v.page}: a table {t['scrollWidth']}px wide in a {t['clientWidth']}px box "
                                    f"that does not scroll (overflow-x: {t['overflowX']})")
    _report(problems, "wide tables")
    assert scrolling, "no table is wider than a phone screen: the test no longer shows that wide tables scroll"


def test_screenshots_are_kept_for_ci(visits: dict[str, Visit]) -> None:
    for name in SCREENSHOT_PAGES.values():
        for suffix in ("desktop", "phone"):
            shot = SCREENSHOTS / f"{name}-{suffix}.png"
            assert shot.exists() and shot.stat().st_size > 5_000, shot


# ----------------------------------------------------------------------------------------------- search


@pytest.fixture(scope="module")
def search_box(chromium, site_url: str):
    """The home page at desktop size with the search box focused (the "/" shortcut), index loaded."""
    context = chromium.new_context(viewport=DESKTOP, locale="zh-CN")
    page = context.new_page()
    page.goto(site_url, wait_until="load")
    page.keyboard.press("/")
    page.wait_for_function("document.activeElement && document.activeElement.matches('.md-search__input')")
    yield page
    context.close()


def search(page, query: str) -> tuple[str, list[str]]:
    """Type a query as a reader would; returns the result count line and the result pages, best first.

    Material reads the box on keyup; a Chinese input method commits the text and then releases a key, so
    the text goes in at once and a key release follows."""
    box = page.locator(".md-search__input")
    box.fill("")
    page.keyboard.press("End")
    page.wait_for_function("document.querySelector('.md-search-result__meta').textContent.includes('键入')")
    box.fill(query)
    page.keyboard.press("End")
    page.wait_for_function(
        "(() => { const m = document.querySelector('.md-search-result__meta').textContent;"
        " return /没有找到/.test(m) || (/符合条件/.test(m) && document.querySelector('.md-search-result__item')) })()")
    meta = page.inner_text(".md-search-result__meta")
    # One result item per page (its best sections fold under it): the page of each item's first link.
    hrefs = page.eval_on_selector_all(".md-search-result__item",
                                      "els => els.map(e => e.querySelector('a.md-search-result__link').href)")
    pages = [unquote(urlsplit(h).path.lstrip("/")) for h in hrefs]
    return meta, list(dict.fromkeys(pages))


@pytest.mark.parametrize(
    "query, expected, within",
    [
        ("注意力", "lecture07/s02-self-attention/", 10),  # on almost every page: the first screen of results
        ("自注意力", "lecture07/s02-self-attention/", 10),
        ("缩放点积注意力", "lecture07/s03-scaling/", 10),
        ("位置编码", "lecture07/s05-position/", 3),
        ("多头注意力", "lecture07/s06-multihead/", 3),
        ("困惑度", "lecture07/s11-experiments/", 3),
    ],
)
def test_search_finds_the_page_for_a_typed_term(search_box, query: str, expected: str, within: int) -> None:
    meta, pages = search(search_box, query)
    assert expected in pages, f"{query!r}: {meta}; result pages: {pages}"
    rank = pages.index(expected) + 1
    assert rank <= within, f"{query!r}: {expected} is result {rank}, expected within the first {within}: {pages}"


@pytest.mark.parametrize("query", ["位置编码", "多头注意力", "注意力"])
def test_search_looks_up_and_highlights_the_whole_typed_term(search_box, query: str) -> None:
    search(search_box, query)
    href = search_box.eval_on_selector(".md-search-result__item a.md-search-result__link", "a => a.href")
    highlighted = parse_qs(urlsplit(href).query).get("h", [""])[0].split()
    assert query in highlighted, f"{query!r} is searched and highlighted as {highlighted}"


# ------------------------------------------------------------------------------------- origin of numbers


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_hovering_or_tapping_a_number_shows_where_it_comes_from(chromium, site_url: str, size: str) -> None:
    """§2: hover (desktop) or tap (phone) an inline number: a popover names its snippet and result key, the
    full value, its kind, tolerance and record; its first link unfolds the snippet's code on the same page."""
    phone = size == "phone"
    context = chromium.new_context(viewport=PHONE if phone else DESKTOP, has_touch=phone, is_mobile=phone,
                                   locale="zh-CN")
    page = context.new_page()
    try:
        page.goto(site_url + "lecture07/s02-self-attention/", wait_until="load")
        page.evaluate(WAIT_TYPESET)
        number = page.locator(".md-content p span.book-origin").first
        number.scroll_into_view_if_needed()
        shown = number.inner_text()
        key = page.evaluate("e => JSON.parse(e.getAttribute('data-origin')).key", number.element_handle())
        number.tap() if phone else number.hover()
        pop = page.locator(".book-origin-pop")
        pop.wait_for(state="visible", timeout=5_000)
        text = pop.inner_text()
        assert "lecture07/soft_lookup" in text and key in text, text
        assert "完整数值" in text and "精确值" in text and "记录于" in text and "torch" in text, text
        full = pop.locator(".book-origin-value").inner_text()
        assert full.startswith(shown.rstrip("0").rstrip(".")[:3]) and len(full) > len(shown), (shown, full)
        box, width = pop.bounding_box(), page.viewport_size["width"]
        assert box["x"] >= 0 and box["x"] + box["width"] <= width + 1, f"the popover sticks out: {box}"
        pop.locator("a.book-origin-source").click()
        page.wait_for_function("location.hash.startsWith('#src-')")
        opened = page.evaluate("""() => { const a = document.getElementById(decodeURIComponent(location.hash.slice(1)));
                                           const d = (a.closest('p') || a).nextElementSibling;
                                           return d && d.tagName === 'DETAILS' && d.open && d.textContent }""")
        assert opened and "def compute" in opened, "the link did not unfold the snippet's code"
        record = page.evaluate("() => document.querySelector('[data-origin]') && "
                               "JSON.parse(document.querySelector('[data-origin]').getAttribute('data-origin')).record")
        response = page.request.get(page.url.split("#")[0] + record)
        assert response.ok and "soft_lookup" in response.text()
    finally:
        context.close()


# ------------------------------------------------------------------- heatmaps and explorables (issue 30)


def _record(site: Path, snippet: str) -> dict:
    import json

    return json.loads((site / "assets" / "records" / f"{snippet}.record.json").read_text(encoding="utf-8"))


def _agrees(shown: str, recorded, fmt: str, kind: str, record: dict, series: str) -> bool:
    """Does a number the page shows agree with its record? Exact numbers: the record's value in the shown format.
    Trained numbers: the page shows this build's run, which the drift check held within the record's calibrated
    band — so within that band (plus half a unit of the shown precision); a series calibration could not band is
    checked through its claims, and here only as a number in the shown format."""
    from transformer_book.book.checking.records import Record, calibrated_tolerance
    from transformer_book.book.results import format_number

    record = Record.from_json(record)  # the site's copy of the record file
    if kind != "trained" or isinstance(recorded, str):
        if kind == "trained" and isinstance(recorded, str):
            tol, not_compared = calibrated_tolerance(record, series)
            return not_compared or shown == format_number(recorded, fmt)
        return shown == format_number(recorded, fmt)
    text = shown.replace("−", "-").replace(",", "").rstrip("%")
    try:
        value = float(text) / (100 if shown.endswith("%") else 1)
    except ValueError:
        return False
    tol, not_compared = calibrated_tolerance(record, series)
    if not_compared:
        return True
    digits = len(text.split(".")[1]) if "." in text else 0
    half_unit = 0.5 * 10 ** -digits / (100 if shown.endswith("%") else 1)
    return abs(value - float(recorded)) <= (tol.abs if tol else 1e-9) + half_unit + 1e-12


def _heatmap_pages(site: Path) -> list[str]:
    return sorted(p.parent.relative_to(site).as_posix() + "/" for p in site.rglob("index.html")
                  if "book-grid-data" in p.read_text(encoding="utf-8"))


HEATMAP_PAGES = ["lecture07/s04-three-flaws/", "lecture07/s05-position/", "lecture07/s08-architectures/",
                 "lecture07/s11-experiments/", "chapter20/c13-attention-weights/"]


def test_every_heatmap_of_the_book_is_carried_into_its_page(built_site: Path) -> None:
    """The attention maps (§4, §8's cross-attention, §11, c13) and §5's position-encoding table are readable
    cell by cell: each page carries its heatmaps' data, and the pages that do are exactly these."""
    assert _heatmap_pages(built_site) == sorted(HEATMAP_PAGES)


@pytest.mark.parametrize("size,scheme", [("desktop", "light"), ("phone", "light"), ("desktop", "dark")])
def test_every_heatmap_reads_out_three_cells_as_recorded(chromium, site_url: str, built_site: Path,
                                                         size: str, scheme: str) -> None:
    """On every heatmap of the book (every panel of c13 reachable from its selector), three cells pointed at —
    hovered on a desktop, tapped on a phone — read out the recorded row label, column label and value as the
    figure's cell format shows it; the keyboard reaches the cells and moves between them."""
    from transformer_book.book.results import format_number

    phone = size == "phone"
    context = chromium.new_context(viewport=PHONE if phone else DESKTOP, has_touch=phone, is_mobile=phone,
                                   color_scheme="dark" if scheme == "dark" else "light", locale="zh-CN")
    page = context.new_page()
    problems: list[str] = []
    try:
        for path in HEATMAP_PAGES:
            page.goto(site_url + path, wait_until="load")
            boxes = page.locator(".book-hm")
            page.wait_for_selector(".book-hm td.book-hm-cell")
            for b in range(boxes.count()):
                box = boxes.nth(b)
                snippet, key = box.get_attribute("data-for").rsplit(":", 1)
                record = _record(built_site, snippet)
                fig = record["results"][key]
                picks = [0]
                select = box.locator("select")
                if select.count():
                    picks = sorted({0, len(fig["grids"]) - 1})
                for g in picks:
                    if select.count():
                        select.select_option(str(g))
                    grid = fig["grids"][g]
                    values = fig["plotted"]
                    for part in grid["plotted"].split("."):
                        values = values[part]
                    rows = list(range(len(values)))[::-1] if grid.get("origin") == "lower" else list(range(len(values)))
                    n_r, n_c = len(values), len(values[0])
                    for (r, c) in sorted({(0, 0), (n_r // 2, n_c // 2), (n_r - 1, n_c - 1)}):  # the last cell last
                        cell = box.locator(f'td.book-hm-cell[data-r="{r}"][data-c="{c}"]')
                        cell.scroll_into_view_if_needed()
                        cell.tap() if phone else cell.hover()
                        text = box.locator(".book-hm-readout").inner_text()
                        at = box.locator("td.book-hm-active")
                        if (at.get_attribute("data-r"), at.get_attribute("data-c")) != (str(r), str(c)):
                            problems.append(f"{path} {snippet}:{key} grid {g}: pointed at cell ({r}, {c}), cell "
                                            f"({at.get_attribute('data-r')}, {at.get_attribute('data-c')}) is the one "
                                            "read out (the cells moved under the pointer)")
                        row, col = grid["rows"][rows[r]], grid["cols"][c]
                        shown = text.rsplit("：", 1)[-1]
                        series = f"{key}.{grid['plotted']}"  # a heatmap's values are one calibrated series
                        if not (f"「{row}」" in text and f"「{col}」" in text
                                and _agrees(shown, values[rows[r]][c], fig["cell_format"], fig["kind"], record, series)):
                            problems.append(f"{path} {snippet}:{key} grid {g} cell ({r}, {c}): shows {text!r}, recorded "
                                            f"{row!r}, {col!r}, {format_number(values[rows[r]][c], fig['cell_format'])}")
                    if n_r > 1:  # the step buttons beside the read-out: from the last cell, one row up
                        box.get_by_role("button", name="上一行").click()
                        text = box.locator(".book-hm-readout").inner_text()
                        if f"「{grid['rows'][rows[n_r - 2]]}」" not in text or f"「{grid['cols'][n_c - 1]}」" not in text:
                            problems.append(f"{path} {snippet}:{key} grid {g}: the step button 上一行 reads {text!r}")
                    box.locator('td.book-hm-cell[data-r="0"][data-c="0"]').focus()
                    page.keyboard.press("ArrowRight")
                    if n_c > 1 and page.evaluate("document.activeElement.dataset.c") != "1":
                        problems.append(f"{path} {snippet}:{key}: the arrow keys do not move between cells")
                    if box.locator('td.book-hm-cell[tabindex="0"]').count() != 1:
                        problems.append(f"{path} {snippet}:{key}: not exactly one cell in the tab order")
                if phone and page.evaluate("document.documentElement.scrollWidth") > PHONE["width"] + 1:
                    problems.append(f"{path}: the heatmap makes the page wider than the phone")
        _report(problems, "heatmap cells that do not read out their record")
    finally:
        context.close()


PLAYGROUND = "chapter20/p08b-playground/"
PLAYGROUND_WEIGHTS = "assets/generated/chapter20/scratch_playground/weights.bin"


def test_the_playground_on_a_phone_with_the_network_blocked_shows_what_torch_computes_for_typed_chinese(
        chromium, site_url: str, built_site: Path) -> None:
    """Issue 40. At 375 px, with every request off the site refused, a reader types Chinese: the top prediction,
    its probability and three attention cells of the first head (tapped) equal torch's for that text — torch
    reading the model file the page fetched — to the digits shown; characters outside the vocabulary and text
    longer than the context get their notes, an empty box its prompt; the controls are big enough to tap."""
    from transformer_book.chapter20 import playground

    model, tok = playground.load((built_site / PLAYGROUND_WEIGHTS).read_bytes())
    context = chromium.new_context(viewport=PHONE, has_touch=True, is_mobile=True, locale="zh-CN")
    off_site: list[str] = []

    def only_the_site(route) -> None:
        if route.request.url.startswith(site_url):
            route.continue_()
        else:
            off_site.append(route.request.url)
            route.abort()

    context.route("**/*", only_the_site)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and errors.append(m.text))
    try:
        page.goto(site_url + PLAYGROUND, wait_until="load")
        page.wait_for_function("(document.querySelector('.book-pg-status') || {}).textContent.includes('已载入')",
                               timeout=30_000)
        assert "框里还没有字" in page.locator(".book-pg-notes").inner_text()

        text = "床前明月光，疑是地上霜。"
        box = page.locator("#book-pg-text")
        box.tap()
        page.keyboard.insert_text(text)
        ids, _ = playground.encode(tok, text, model.pos_emb.num_embeddings)
        page.wait_for_function(f"document.querySelectorAll('.book-hm-panel td.book-hm-cell').length === {len(ids) ** 2}")
        reference = playground.torch_forward(model, ids)
        best = playground.top(reference["logits"][-1], tok, 1)[0]
        first = page.locator(".book-pg-next tbody tr").first
        shown_char, shown_prob = first.locator(".book-pg-char").inner_text(), first.locator(".book-pg-prob").inner_text()
        assert shown_char == playground.visible(best[0]), (shown_char, best)
        assert abs(float(shown_prob.rstrip("%")) - 100 * best[1]) <= 0.05 + 1e-6, (shown_prob, best)

        weights = reference["attention"][0]
        for r, c in [(0, 0), (len(ids) // 2, 1), (len(ids) - 1, len(ids) - 1)]:
            cell = page.locator(f'.book-playground td.book-hm-cell[data-r="{r}"][data-c="{c}"]')
            cell.scroll_into_view_if_needed()
            cell.tap()
            readout = page.locator(".book-playground .book-hm-readout").inner_text()
            shown = float(readout.rsplit("：", 1)[-1])
            assert abs(shown - weights[r, c]) <= 0.005 + 1e-6, (r, c, readout, weights[r, c])

        page.fill("#book-pg-text", "Hello，明月😀")
        page.wait_for_function("document.querySelector('.book-pg-notes').textContent.includes('「H」')")
        assert "「😀」" in page.locator(".book-pg-notes").inner_text()
        long = "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。床前明月光，疑是地上霜。"
        page.fill("#book-pg-text", long)
        cut = len(long) + 1 - model.pos_emb.num_embeddings
        page.wait_for_function(f"document.querySelector('.book-pg-notes').textContent.includes('前面 {cut} 个（开头的换行算在内）没有送进去')")

        page.locator(".book-pg-go").tap()
        page.wait_for_function("document.querySelector('.book-pg-new') !== null")
        small = page.evaluate("""() => [...document.querySelectorAll(
            '.book-playground select, .book-playground input, .book-playground button, .book-playground textarea')]
            .map(e => e.getBoundingClientRect()).filter(r => r.height < 43.5).length""")
        assert small == 0, f"{small} controls of the playground are less than 44 px tall"
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"] + 1
        assert not errors, errors
        assert not [u for u in off_site if not u.startswith("data:")], off_site
    finally:
        context.close()


def test_every_control_of_the_interactive_figures_is_big_enough_to_tap_on_a_phone(chromium, site_url: str) -> None:
    """At 375 px, every option, slider, picker and step button of the heatmaps and explorables is at least 44 px
    tall (the step buttons 44 px wide as well): a finger hits the one it means (WCAG 2.5.5)."""
    context = chromium.new_context(viewport=PHONE, has_touch=True, is_mobile=True, locale="zh-CN")
    page = context.new_page()
    small, seen = [], 0
    try:
        for path in sorted(set(HEATMAP_PAGES) | set(EXPLORABLES)):
            page.goto(site_url + path, wait_until="load")
            page.wait_for_selector(".book-hm td.book-hm-cell, .book-ex-controls")
            for what, selector, wide in (("option", ".book-ex-option", False),
                                         ("slider", '.book-ex-slider input[type="range"]', False),
                                         ("picker", ".book-hm-pick select", False), ("step", ".book-hm-step", True)):
                found = page.locator(selector)
                for i in range(found.count()):
                    box = found.nth(i).bounding_box()
                    seen += 1
                    if box is None or box["height"] < 44 - 0.5 or (wide and box["width"] < 44 - 0.5):
                        small.append(f"{path}: {what} {i} is {box and round(box['width'])}×{box and round(box['height'])} px")
    finally:
        context.close()
    assert seen >= 20, f"only {seen} controls found"
    _report(small, "controls smaller than 44 px to tap")


def test_every_code_excerpt_is_read_without_scrolling_sideways_on_a_phone(chromium, site_url: str,
                                                                          built_site: Path) -> None:
    """The package's code shown on a page (``{{ code … }}``): at 375 px its long lines wrap inside the box (it was
    up to 1024 px wide in a 326 px box) and the copy button sits above the first line, not on it; at 1280 px the
    lines keep the file's line numbers."""
    pages = sorted(p.parent.relative_to(built_site).as_posix() + "/" for p in built_site.rglob("index.html")
                   if "book-code-anchor" in p.read_text(encoding="utf-8"))
    assert len(pages) >= 3, pages
    measure = """() => [...document.querySelectorAll('p > a.book-code-anchor')].map(a => {
      const block = a.parentElement.nextElementSibling, code = block.querySelector('td.code pre > code');
      const first = code.querySelector(':scope > span'), copy = block.querySelector('.md-code__button');
      const f = first.getBoundingClientRect(), c = copy ? copy.getBoundingClientRect() : null;
      const numbers = block.querySelector('.linenos');
      return {id: a.id, wide: code.scrollWidth - code.clientWidth, copy: !!copy,
              numbers: !!numbers && getComputedStyle(numbers).display !== 'none',
              covered: !!c && c.bottom > f.top + 1 && c.top < f.bottom - 1 && c.left < f.right};
    })"""
    problems = []
    for viewport, phone in ((PHONE, True), (DESKTOP, False)):
        context = chromium.new_context(viewport=viewport, has_touch=phone, is_mobile=phone, locale="zh-CN")
        page = context.new_page()
        try:
            for path in pages:
                page.goto(site_url + path, wait_until="load")
                for ex in page.evaluate(measure):
                    if not ex["copy"]:
                        problems.append(f"{path}#{ex['id']}: no copy button")
                    if phone and ex["wide"] > 1:
                        problems.append(f"{path}#{ex['id']}: {ex['wide']} px wider than its box at 375 px")
                    if phone and ex["covered"]:
                        problems.append(f"{path}#{ex['id']}: the copy button covers the first line at 375 px")
                    if not phone and not ex["numbers"]:
                        problems.append(f"{path}#{ex['id']}: no line numbers at 1280 px")
        finally:
            context.close()
    _report(problems, "code excerpts hard to read")


def test_without_javascript_every_heatmap_is_its_static_figure(chromium, site_url: str) -> None:
    context = chromium.new_context(viewport=DESKTOP, java_script_enabled=False)
    page = context.new_page()
    try:
        for path in HEATMAP_PAGES:
            page.goto(site_url + path, wait_until="load")
            figures = page.locator("figure.book-heatmap img")
            assert figures.count() >= 1 and page.locator(".book-hm").count() == 0
            for i in range(figures.count()):
                assert figures.nth(i).is_visible(), f"{path}: heatmap {i} is not shown without JavaScript"
    finally:
        context.close()


EXPLORABLES = {  # page → (snippet, key) and the control choices to walk through (label text per control)
    "lecture07/s03-scaling/": ("lecture07/s03_explore", "explore", [["1024", "不除"], ["4", "不除"], ["1024", "除以 √dₖ"]]),
    "lecture07/s05-position/": ("lecture07/s05_shift_explore", "explore", [["5"], ["100"], ["0"]]),
    "chapter20/c11-train-generate/": ("chapter20/c11_decoding_explore", "explore",
                                      [["0.5", "5", "不截断"], ["1.5", "不截断", "0.9"], ["0（贪心）", "10", "0.5"]]),
}


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_every_explorable_shows_the_recorded_state_its_controls_pick(chromium, site_url: str, built_site: Path,
                                                                      size: str) -> None:
    """Each explorable, moved through several states by clicking (tapping) its options or pressing the arrow
    keys on its slider: every bar value and text it shows is the record's for that state, in the view's format."""
    import itertools

    from transformer_book.book.results import format_number

    phone = size == "phone"
    context = chromium.new_context(viewport=PHONE if phone else DESKTOP, has_touch=phone, is_mobile=phone,
                                   locale="zh-CN")
    page = context.new_page()
    problems: list[str] = []
    try:
        for path, (snippet, key, walks) in EXPLORABLES.items():
            page.goto(site_url + path, wait_until="load")
            record = _record(built_site, snippet)
            rec = record["results"][key]
            uid = "ex-" + f"{snippet}-{key}".replace("/", "-").replace("_", "-")  # as the renderer names it
            root = page.locator(f"#{uid}")
            root.locator(".book-ex-controls").wait_for(state="visible")
            combos = list(itertools.product(*(range(len(c["labels"])) for c in rec["controls"])))
            for walk in walks:
                chosen = []
                for i, (control, text) in enumerate(zip(rec["controls"], walk)):
                    j = control["labels"].index(text)
                    chosen.append(j)
                    slider = root.locator(f'input[type="range"][data-control="{i}"]')
                    if slider.count():
                        slider.focus()
                        page.keyboard.press("Home")
                        for _ in range(j):
                            page.keyboard.press("ArrowRight")
                    else:
                        option = root.locator(f'input[type="radio"][data-control="{i}"][value="{j}"]')
                        label = option.locator("xpath=..")
                        label.tap() if phone else label.click()
                index = combos.index(tuple(chosen))
                state = rec["states"][index]
                name = ", ".join(f"{c['name']}={c['labels'][j]}" for c, j in zip(rec["controls"], chosen))
                kinds = rec.get("kinds") or {}
                want = [(x, v["fmt"], v["values"]) for v in rec["show"] if v["view"] == "bars" for x in state[v["values"]]]
                want += [(state[v["field"]], v["fmt"], v["field"]) for v in rec["show"] if v["view"] == "text"]
                got = (root.locator(".book-ex-view .book-ex-bar-value").all_inner_texts()
                       + root.locator(".book-ex-view .book-ex-text-value").all_inner_texts())
                agree = len(got) == len(want) and all(
                    _agrees(g, x, fmt, kinds.get(field, rec["kind"]), record, f"{key}[{name}].{field}")
                    for g, (x, fmt, field) in zip(got, want))
                if not agree or root.locator(".book-ex-state").inner_text() != name:
                    problems.append(f"{path} {walk}: shows {got}, recorded {[format_number(x, f) for x, f, _ in want]}")
        _report(problems, "explorables that show something else than the record")
    finally:
        context.close()


# ---------------------------------------------------------------------------------------------- dark mode


def _contrast(png: bytes) -> tuple[float, tuple[int, int, int]]:
    """WCAG contrast of a figure's darkest marks (text, axes) against the colour at its edge, and that colour."""
    import io

    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    w, h = img.size
    px = img.load()

    def lum(c: tuple[int, int, int]) -> float:
        def ch(v: int) -> float:
            v = v / 255
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4
        return 0.2126 * ch(c[0]) + 0.7152 * ch(c[1]) + 0.0722 * ch(c[2])

    edge = [px[x, y] for x in range(w) for y in (1, h - 2)] + [px[x, y] for y in range(h) for x in (1, w - 2)]
    bg = max(set(edge), key=edge.count)
    lb = lum(bg)
    ratios = sorted(((max(lum(px[x, y]), lb) + 0.05) / (min(lum(px[x, y]), lb) + 0.05))
                    for x in range(0, w, 2) for y in range(0, h, 2))
    return ratios[int(len(ratios) * 0.999)], bg  # the strongest marks, ignoring a few stray pixels


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_figures_stay_legible_in_the_light_and_the_dark_scheme(chromium, site_url: str, scheme: str) -> None:
    """The palette toggle is there and switches the scheme; in either scheme, the text and axes of every figure
    on a page stand out from what is behind them (WCAG contrast at least 4.5), measured on a screenshot."""
    context = chromium.new_context(viewport=DESKTOP, color_scheme=scheme, locale="zh-CN")
    page = context.new_page()
    try:
        page.goto(site_url + "lecture07/s05-position/", wait_until="load")
        page.evaluate(WAIT_TYPESET)
        expected = "slate" if scheme == "dark" else "default"
        assert page.get_attribute("body", "data-md-color-scheme") == expected
        toggle = page.locator("form[data-md-component=palette] label:visible")
        assert toggle.count() == 1, "no light/dark toggle in the header"
        figures = page.locator(".md-content figure.book-figure img:visible")  # the heatmap's cells replace its picture
        assert figures.count() >= 1
        problems = []
        for i in range(figures.count()):
            img = figures.nth(i)
            img.scroll_into_view_if_needed()
            page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=img.element_handle())
            ratio, bg = _contrast(img.screenshot())
            if ratio < 4.5:
                problems.append(f"figure {i + 1} ({img.get_attribute('src')}): contrast {ratio:.2f} on background {bg}")
        _report(problems, f"figures hard to read in the {scheme} scheme")
        toggle.click()  # the toggle switches to the other scheme
        other = "default" if scheme == "dark" else "slate"
        page.wait_for_function(f"document.body.getAttribute('data-md-color-scheme') === '{other}'")
    finally:
        context.close()


# ------------------------------------------------------------------------------- serve: results land live


SERVE_YML = MKDOCS_YML.replace("plugins:\n", "theme:\n  name: material\n  language: zh\n  font: false\nplugins:\n")

SLOW_SNIPPET = """
import time

from transformer_book.book import Value


def compute():
    time.sleep(4.0)
    return {"answer": Value(1.5, ".2f")}
"""


@contextlib.contextmanager
def served(chromium, tmp_path: Path, yml: str, pages: dict[str, str]):
    """A fresh project (``pages``: docs-relative path → Markdown; one slow snippet) under ``mkdocs serve
    --dirty``, as ``scripts/serve.sh`` runs it; yields a browser page on its home page once it answers."""
    import signal
    import socket
    import subprocess
    import sys
    import time

    (tmp_path / "docs").mkdir()
    (tmp_path / "snippets").mkdir()
    (tmp_path / "mkdocs.yml").write_text(yml, encoding="utf-8")
    for rel, text in pages.items():
        (tmp_path / "docs" / rel).write_text(text, encoding="utf-8")
    (tmp_path / "snippets" / "slow.py").write_text(SLOW_SNIPPET, encoding="utf-8")
    with socket.socket() as s:
        s.bind((HOST, 0))
        port = s.getsockname()[1]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONDONTWRITEBYTECODE": "1"}
    server = subprocess.Popen([sys.executable, "-m", "mkdocs", "serve", "--dirty", "-a", f"{HOST}:{port}"],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              start_new_session=True)
    context = chromium.new_context(viewport=DESKTOP, locale="zh-CN")
    try:
        page = context.new_page()
        deadline = time.time() + 60
        while True:
            try:
                page.goto(f"http://{HOST}:{port}/", wait_until="load", timeout=5_000)
                break
            except Exception:  # noqa: BLE001 - not listening yet
                if time.time() > deadline or server.poll() is not None:
                    raise AssertionError("mkdocs serve did not answer within 60 s")
                time.sleep(0.3)
        yield page
    finally:
        context.close()
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


LANDED = ("document.querySelector('.md-content') && "
          "document.querySelector('.md-content').innerText.includes('答案是 1.50')")


def test_a_served_page_shows_a_placeholder_then_its_result_without_a_reload_by_hand(chromium, tmp_path: Path) -> None:
    """A fresh project under `mkdocs serve`: the page is served at once with a placeholder; when the snippet
    finishes in the background, MkDocs' livereload brings the result into the open page by itself."""
    with served(chromium, tmp_path, SERVE_YML, {"index.md": "# 首页\n\n答案是 {{ slow:answer }}。\n"}) as page:
        first = page.inner_text(".md-content")
        assert "正在计算" in first and "1.50" not in first, first
        page.wait_for_function(LANDED, timeout=120_000)


SERVE_NAV_YML = SERVE_YML.replace("plugins:\n", "nav:\n  - index.md\n  - other.md\nplugins:\n  - autorefs\n").replace(
    "  - md_in_html\n", "  - md_in_html\n  - attr_list\n")


def test_a_page_rerendered_by_the_background_build_keeps_its_navigation_and_references(chromium, tmp_path: Path) -> None:
    """`serve --dirty` re-renders only the page whose result landed; MkDocs forgets the titles and anchors of
    the pages it did not re-read (every other nav entry read "None", every reference stayed raw). After the
    result lands, the page must have the whole navigation and its cross-reference resolved."""
    pages = {"index.md": "# 首页\n\n答案是 {{ slow:answer }}。详见[另一页的一节][one-section]。\n",
             "other.md": "# 另一页\n\n## 一节 {#one-section}\n\n正文。\n"}
    with served(chromium, tmp_path, SERVE_NAV_YML, pages) as page:
        assert "正在计算" in page.inner_text(".md-content")
        page.wait_for_function(LANDED, timeout=120_000)
        nav = page.inner_text("nav.md-nav--primary")
        assert "另一页" in nav and "None" not in nav, f"the re-rendered page's navigation: {nav!r}"
        assert "[one-section]" not in page.inner_text(".md-content"), "the cross-reference was left raw"
        link = page.locator(".md-content a", has_text="另一页的一节")
        assert link.count() == 1 and link.get_attribute("href").endswith("other/#one-section")
