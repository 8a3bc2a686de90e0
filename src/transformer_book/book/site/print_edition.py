"""The print edition: every page of the built site, in navigation order, printed by Chromium into one PDF.

What the ecosystem offers was weighed first: ``mkdocs-print-site-plugin`` joins the pages into one *site*
page (which then ships, far over the 500 KB page budget, and is searched and link-checked like a chapter);
``mkdocs-with-pdf`` renders with WeasyPrint (system Pango libraries; no MathJax, so no formulas);
``mkdocs-exporter`` prints page by page (no book-wide page numbers or contents). So the book prints its own
built pages, as a reader's browser shows them: the articles of the built site (found and edited by
:mod:`..html_edit`) are joined, in navigation order, by the template ``templates/print.html.j2`` into one
temporary HTML file beside the site (deleted after printing, never shipped), with the site's
own style sheets, web font and typeset formulas plus a print style sheet (``PRINT_CSS``); headless Chromium, driven
by playwright, waits for the fonts and formulas, then prints it with page numbers in the footer and a PDF
outline of the headings. Figures, tables, formulas and generated values are exactly those of the site.

For paper: collapsed answers (``??? success``, ``??? note`` …) are printed open, right where they are; the
code folds under results (``??? example``: the snippet that produced them) and the source folds of the code
reference are printed as one line naming the file (the code is in the repository and on the site: on paper
it would double the book); wide tables and code wrap instead of scrolling. Links between pages point inside the PDF.

Without Chromium or playwright the step says so and is skipped (``unavailable``): it never fails the book.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlsplit

from transformer_book.book.html_pages import markup, render
from transformer_book.book import html_edit
from transformer_book.book.site import chromium, mathjax, page_html, webfont

PDF_NAME = "transformer-book.pdf"

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
.zeroclipboard-container, .md-clipboard, .md-code__nav { display: none !important; }  /* copy buttons: nothing to click on paper */
.book-notebook-download, .md-content__button, .headerlink, .book-src-anchor, .book-origin-badge {
  display: none !important; }
a { color: inherit; }
* { content-visibility: visible !important; }  /* book.css lets the screen skip far cells; paper has them all */
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
    return chromium.unavailable()


def page_id(url: str) -> str:
    return "p-" + (re.sub(r"[^0-9A-Za-z]+", "-", url).strip("-") or "index")


def _html_file(site_dir: Path, url: str) -> Path:
    return site_dir / url / "index.html" if url.endswith("/") or url == "" else site_dir / url


CODE_FOLDS = {"example", "mkdocstrings-source"}  # a snippet under its results (??? example), a function's source


def _article_of(page: str) -> str:
    """The content of the page's ``<article class="md-content__inner md-typeset">`` ("" when it has none)."""
    for element in html_edit.parse(page):
        if element.tag == "article" and {"md-content__inner", "md-typeset"} <= element.classes:
            return element.inner(page)
    return ""


def article(site_dir: Path, entry: Entry, known: set[str]) -> str:
    """The page's article, made to live inside the print file: its URLs resolved against the site root,
    its ids prefixed with the page's id (links between pages land inside the PDF), folds decided for paper —
    a code fold (with whatever folds it holds) becomes one line naming its code, every other fold is open."""
    body = _article_of(_html_file(site_dir, entry.url).read_text(encoding="utf-8"))
    pid = page_id(entry.url)
    elements = html_edit.parse(body)
    folds = [e for e in elements if e.tag == "details" and e.classes & CODE_FOLDS]
    folds = [f for f in folds if not any(f is not g and f.within(g) for g in folds)]  # the outermost ones
    changes = []
    for fold in folds:
        summary = fold.first("summary")
        title = summary.inner(body) if summary is not None else ""
        changes.append((fold.start, fold.end, f'<p class="print-code-ref">{title}（代码见仓库与网站）</p>'))

    def resolve(attr: str, value: str) -> str:
        if value.startswith("#"):
            return f"#{pid}--{value[1:]}" if value[1:] else f"#{pid}"
        parts = urlsplit(value)
        if parts.scheme or value.startswith(("//", "data:", "mailto:")):
            return value
        target = urljoin("/" + entry.url, value).lstrip("/")
        path, _, fragment = target.partition("#")
        if attr == "href" and path in known:  # another page of the book: its place in the PDF
            return f"#{page_id(path)}--{fragment}" if fragment else f"#{page_id(path)}"
        return path

    for element in elements:
        if any(element.within(f) for f in folds):
            continue
        attrs = []
        for name, value in element.attrs:
            if name == "id" and value:
                value = f"{pid}--{value}"
            elif name in ("src", "href") and value is not None:
                value = resolve(name, value)
            attrs.append((name, value))
        if element.tag == "details" and not element.has("open"):
            attrs.append(("open", None))
        if element.tag == "img" and element.get("loading") == "lazy":  # all printed: none waits for a scroll
            attrs = [(name, value) for name, value in attrs if name != "loading"]
        if attrs != element.attrs:
            changes.append((element.start, element.open_end, element.start_tag(attrs)))
    return html_edit.edit(body, changes)


def combine(site_dir: Path, entries: list[Entry], title: str, description: str = "") -> str:
    """The whole book as one HTML file that sits in ``site_dir`` (its URLs are relative to the site root)."""
    sheets: list[str] = []
    if entries:
        home = _html_file(site_dir, entries[0].url).read_text(encoding="utf-8")
        sheets = [urljoin("/" + entries[0].url, e.get("href") or "").lstrip("/") for e in html_edit.parse(home)
                  if e.tag == "link" and "stylesheet" in (e.get("rel") or "").split() and e.get("href")]
    known = {e.url for e in entries}
    toc, sections, part = [], [], None
    for e in entries:
        if e.part != part and e.part:
            sections.append({"part": True, "id": page_id("part-" + e.part), "title": e.part})
            toc.append({"part": True, "id": page_id("part-" + e.part), "title": e.part})
        part = e.part
        toc.append({"part": False, "id": page_id(e.url), "title": e.title, "indent": 1.2 if e.part else 0})
        sections.append({"part": False, "id": page_id(e.url), "article": markup(article(site_dir, e, known))})
    # The formulas were typeset when the site was built (mathjax.SiteMath): their style sheet comes along.
    # A site whose pages typeset in the browser instead (no build-time typesetting) prints with MathJax.
    math_css, scripts = "", ""
    opening = f'<style id="{mathjax.STYLE_ID}">'
    for e in entries:
        page = _html_file(site_dir, e.url).read_text(encoding="utf-8")
        at = page.find(opening)  # a style element's text holds no "</style>"
        if at >= 0:
            math_css = page[at + len(opening):page.index("</style>", at)]
        if mathjax.formulas(page):
            scripts = f'<script>{mathjax.config_script()}</script><script src="{mathjax.URI}"></script>'
    fonts = page_html.blocking_font_faces(site_dir, sheets)  # on paper, text waits for its font
    if (site_dir / webfont.URI).exists():  # the pages add it by script (page_html.FONT_LOADER)
        fonts += webfont.font_face(webfont.URI)
    return render("print.html.j2", title=title, description=description, sheets=sheets,
                  style=markup(math_css + fonts + PRINT_CSS), scripts=markup(scripts), toc=toc, sections=sections)


def build(site_dir: Path, entries: list[Entry], title: str, description: str = "", timeout_s: float = 600) -> Path:
    """Print the book into ``site_dir / PDF_NAME`` (written whole or not at all); returns its path."""
    from playwright.sync_api import sync_playwright

    from transformer_book.book.files import atomic_write_bytes

    fd, tmp = tempfile.mkstemp(prefix=".print-", suffix=".html", dir=site_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(combine(site_dir, entries, title, description))
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(chromium.CHROMIUM), headless=True, args=chromium.ARGS)
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


NOT_PRINTED = ("authoring", "maintainers")  # pages for people writing or maintaining the book, not its readers


def entries(nav: object) -> list[Entry]:
    """The pages of MkDocs' navigation in order, each with the top-level section it belongs to (its part);
    the authors' and maintainers' pages (:data:`NOT_PRINTED`) are left out."""
    out: list[Entry] = []

    def walk(items: list, part: str) -> None:
        for item in items:
            if getattr(item, "is_page", False):
                if not item.url.startswith(NOT_PRINTED):
                    out.append(Entry(item.url, item.title or item.url, part))
            elif getattr(item, "is_section", False):
                walk(item.children, part or item.title)

    walk(list(getattr(nav, "items", [])), "")
    return out


HOME_LINK = ('\n\n<p class="book-print-link"><strong>印刷版：</strong><a href="{name}">下载全书 PDF</a>'
             "（两部分与术语表、代码参考按目录顺序排成一册，图、表、公式和生成的数值与网站相同；"
             "折叠的答案印成展开的，生成结果的代码只写出文件名）</p>\n")
