"""The print edition: every page of the built site, in navigation order, printed by Chromium into one PDF.

What the ecosystem offers was weighed first: ``mkdocs-print-site-plugin`` joins the pages into one *site*
page (which then ships, far over the 500 KB page budget, and is searched and link-checked like a chapter);
``mkdocs-with-pdf`` renders with WeasyPrint (system Pango libraries; no MathJax, so no formulas);
``mkdocs-exporter`` prints page by page (no book-wide page numbers or contents). So the book prints its own
built pages, as a reader's browser shows them: the articles of the built site are joined, in navigation
order, into one temporary HTML file beside the site (deleted after printing, never shipped), with the site's
own style sheets, web font and MathJax plus a print style sheet (``PRINT_CSS``); headless Chromium, driven
by playwright, waits for the fonts and formulas, then prints it with page numbers in the footer and a PDF
outline of the headings. Figures, tables, formulas and generated values are exactly those of the site.

For paper: collapsed answers (``??? success``, ``??? note`` …) are printed open, right where they are; the
code folds under results (``??? example``: the snippet that produced them) and the source folds of the code
reference are printed as one line naming the file (the code is in the repository and on the site: on paper
it would double the book); wide tables and code wrap instead of scrolling. Links between pages point inside the PDF.

Without Chromium or playwright the step says so and is skipped (``unavailable``): it never fails the book.
"""

from __future__ import annotations

import html
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from transformer_book.book.site import mathjax, page_html, webfont

PDF_NAME = "transformer-book.pdf"
CHROMIUM = Path(os.environ.get("BOOK_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]

PRINT_CSS = """
@page { size: A4; margin: 18mm 16mm 20mm 16mm; }
html, body { background: #fff; }
body { font-size: 10.5pt; }
.md-typeset { font-size: 10.5pt; line-height: 1.6; }
.print-part { break-before: page; font-size: 1.9em; margin: 30% 0 0; text-align: center; }
.print-page { break-before: page; }
.print-cover { text-align: center; margin-top: 35%; }
.print-cover h1 { font-size: 2.8em; margin-bottom: .4em; color: #212121; font-weight: 600; }
.print-cover p { font-size: 1.15em; color: #424242; }
.print-toc ol { list-style: none; padding-left: 1.2em; }
.print-toc > ol { padding-left: 0; }
.print-toc a { color: inherit; text-decoration: none; }
.md-typeset h1, .md-typeset h2, .md-typeset h3 { break-after: avoid; }
.md-typeset figure, .md-typeset img, .md-typeset svg, .md-typeset tr, .book-figure { break-inside: avoid; }
.md-typeset img { max-width: 100%; height: auto; }
.md-typeset__scrollwrap, .md-typeset__table, .highlight, pre { overflow: visible !important; }
.md-typeset table:not([class]) { display: table; width: 100%; font-size: .82em; table-layout: auto; }
.md-typeset table:not([class]) th, .md-typeset table:not([class]) td { padding: .3em .45em; white-space: normal;
  overflow-wrap: anywhere; }
.md-typeset pre > code, pre { white-space: pre-wrap !important; overflow-wrap: anywhere; }
.md-typeset .highlighttable .linenos { display: none; }
mjx-container[display="true"] { overflow: visible !important; max-width: 100%; }
mjx-container svg { max-width: 100%; }
.md-typeset details { break-inside: auto; }
.md-typeset details > summary::after { display: none; }
.print-code-ref { color: #555; font-size: .9em; margin: .2em 0 1em; }
.book-caption { break-after: avoid; }  /* a table's caption stays with its table */
.zeroclipboard-container, .md-clipboard { display: none !important; }
.book-notebook-download, .md-content__button, .headerlink, .book-src-anchor, .book-origin-badge {
  display: none !important; }
a { color: inherit; }
"""

FOOTER = ('<div style="width:100%;font-size:8px;color:#666;text-align:center;font-family:sans-serif">'
          '<span class="pageNumber"></span> / <span class="totalPages"></span></div>')


@dataclass
class Entry:
    """One page of the navigation: its URL in the site (``lecture07/s03-scaling/``), title and part."""

    url: str
    title: str
    part: str = ""


def unavailable() -> str:
    """Why the PDF cannot be printed here ("" when it can)."""
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM} (set BOOK_CHROMIUM, or install it: apt-get install chromium)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "no playwright to drive Chromium (pip install playwright)"
    return ""


def page_id(url: str) -> str:
    return "p-" + (re.sub(r"[^0-9A-Za-z]+", "-", url).strip("-") or "index")


def _html_file(site_dir: Path, url: str) -> Path:
    return site_dir / url / "index.html" if url.endswith("/") or url == "" else site_dir / url


_ARTICLE = re.compile(r'<article class="md-content__inner md-typeset">(.*?)</article>', re.S)
# the code folds: a snippet under its results (``??? example``), a function's source in the code reference
_CODE_FOLD = re.compile(r'<details class="(?:example|mkdocstrings-source)">\s*<summary>(.*?)</summary>.*?</details>', re.S)
_ATTR = re.compile(r'\b(src|href)="([^"]*)"')
_ID = re.compile(r'\bid="([^"]+)"')


def article(site_dir: Path, entry: Entry, known: set[str]) -> str:
    """The page's article, made to live inside the print file: its URLs resolved against the site root,
    its ids prefixed with the page's id (links between pages land inside the PDF), folds decided for paper."""
    text = _html_file(site_dir, entry.url).read_text(encoding="utf-8")
    found = _ARTICLE.search(text)
    body = found.group(1) if found else ""
    pid = page_id(entry.url)
    body = _CODE_FOLD.sub(lambda m: f'<p class="print-code-ref">{m.group(1)}（代码见仓库与网站）</p>', body)
    body = re.sub(r"<details(?![^>]*\bopen\b)", "<details open", body)
    body = body.replace(' loading="lazy"', "")  # every figure is printed: none waits to be scrolled to
    body = _ID.sub(lambda m: f'id="{pid}--{m.group(1)}"', body)

    def resolve(m: re.Match[str]) -> str:
        attr, value = m.group(1), html.unescape(m.group(2))
        if value.startswith("#"):
            return f'{attr}="#{pid}--{value[1:]}"' if value[1:] else f'{attr}="#{pid}"'
        parts = urlsplit(value)
        if parts.scheme or value.startswith(("//", "data:", "mailto:")):
            return m.group(0)
        target = urljoin("/" + entry.url, value).lstrip("/")
        path, _, fragment = target.partition("#")
        if attr == "href" and path in known:  # another page of the book: its place in the PDF
            other = page_id(path)
            return f'href="#{other}--{fragment}"' if fragment else f'href="#{other}"'
        return f'{attr}="{html.escape(path)}"'

    return _ATTR.sub(resolve, body)


def combine(site_dir: Path, entries: list[Entry], title: str, description: str = "") -> str:
    """The whole book as one HTML file that sits in ``site_dir`` (its URLs are relative to the site root)."""
    home = _html_file(site_dir, entries[0].url).read_text(encoding="utf-8") if entries else ""
    sheets = re.findall(r'<link rel="stylesheet" href="([^"]+)"', home)
    sheets = [urljoin("/" + entries[0].url, s).lstrip("/") for s in sheets] if entries else []
    known = {e.url for e in entries}
    toc, body, part = [], [], None
    for e in entries:
        if e.part != part and e.part:
            body.append(f'<h1 class="print-part" id="{page_id("part-" + e.part)}">{html.escape(e.part)}</h1>')
            toc.append(f'<li><a href="#{page_id("part-" + e.part)}">{html.escape(e.part)}</a></li>')
        part = e.part
        toc.append(f'<li style="margin-left:{1.2 if e.part else 0}em"><a href="#{page_id(e.url)}">'
                   f"{html.escape(e.title)}</a></li>")
        body.append(f'<section class="print-page" id="{page_id(e.url)}">{article(site_dir, e, known)}</section>')
    links = "".join(f'<link rel="stylesheet" href="{html.escape(s)}">' for s in sheets)
    articles = "".join(body)
    # The formulas were typeset when the site was built (mathjax.SiteMath): their style sheet comes along.
    # A site whose pages typeset in the browser instead (no build-time typesetting) prints with MathJax.
    math_css = ""
    for e in entries:
        found = re.search(rf'<style id="{mathjax.STYLE_ID}">(.*?)</style>',
                          _html_file(site_dir, e.url).read_text(encoding="utf-8"), re.S)
        if found:
            math_css = f"<style>{found.group(1)}</style>"
            break
    scripts = f"<script>{mathjax.config_script()}</script><script src=\"{mathjax.URI}\"></script>" \
        if mathjax.formulas(articles) else ""
    fonts = page_html.blocking_font_faces(site_dir, sheets)  # on paper, text waits for its font
    if (site_dir / webfont.URI).exists():  # the pages add it by script (page_html.FONT_LOADER)
        fonts += webfont.font_face(webfont.URI)
    return ("<!doctype html><html lang=\"zh\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title>{links}{math_css}<style>{fonts}{PRINT_CSS}</style>{scripts}"
            '</head><body class="md-typeset"><div class="md-typeset">'
            f'<div class="print-cover"><h1>{html.escape(title)}</h1><p>{html.escape(description)}</p><p>印刷版</p></div>'
            f'<nav class="print-toc print-page"><h2>目录</h2><ol>{"".join(toc)}</ol></nav>'
            + articles + "</div></body></html>")


def build(site_dir: Path, entries: list[Entry], title: str, description: str = "", timeout_s: float = 600) -> Path:
    """Print the book into ``site_dir / PDF_NAME`` (written whole or not at all); returns its path."""
    from playwright.sync_api import sync_playwright

    from transformer_book.book.files import atomic_write_bytes

    fd, tmp = tempfile.mkstemp(prefix=".print-", suffix=".html", dir=site_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(combine(site_dir, entries, title, description))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.set_default_timeout(timeout_s * 1000)
                page.goto(Path(tmp).as_uri(), wait_until="load")
                page.evaluate("document.fonts.ready.then(() => 0)")
                page.evaluate("window.MathJax && MathJax.startup && MathJax.startup.promise"
                              " ? MathJax.startup.promise.then(() => 0) : 0")
                broken = page.evaluate("[...document.images].filter(i => !i.complete || i.naturalWidth === 0)"
                                       ".map(i => i.getAttribute('src'))")
                if broken:
                    raise RuntimeError(f"{len(broken)} image(s) did not load in the print edition: {broken[:5]}")
                pdf = page.pdf(format="A4", print_background=True, display_header_footer=True,
                               header_template="<span></span>", footer_template=FOOTER,
                               margin={"top": "18mm", "bottom": "20mm", "left": "16mm", "right": "16mm"},
                               outline=True, tagged=True)
            finally:
                browser.close()
        target = site_dir / PDF_NAME
        atomic_write_bytes(target, pdf)
        return target
    finally:
        Path(tmp).unlink(missing_ok=True)


def entries(nav: object) -> list[Entry]:
    """The pages of MkDocs' navigation in order, each with the top-level section it belongs to (its part);
    the authors' pages (``authoring*``) are for people writing the book, not for its readers, and are left out."""
    out: list[Entry] = []

    def walk(items: list, part: str) -> None:
        for item in items:
            if getattr(item, "is_page", False):
                if not item.url.startswith("authoring"):
                    out.append(Entry(item.url, item.title or item.url, part))
            elif getattr(item, "is_section", False):
                walk(item.children, part or item.title)

    walk(list(getattr(nav, "items", [])), "")
    return out


HOME_LINK = ('\n\n<p class="book-print-link"><strong>印刷版：</strong><a href="{name}">下载全书 PDF</a>'
             "（两部分与术语表、代码参考按目录顺序排成一册，图、表、公式和生成的数值与网站相同；"
             "折叠的答案印成展开的，生成结果的代码只写出文件名）</p>\n")
