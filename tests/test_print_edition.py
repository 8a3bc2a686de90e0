"""The print edition (issue 23): the PDF that the CI build of the whole book prints, read as a reader would
hold it — every printed page of the site in it, every figure drawn, the font embedded, the generated values
of three pages exactly as their HTML shows them, in order, and no text beyond the page's right margin or
outside the page. Skipped without Chromium and playwright (the build then skips the PDF, saying so)."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT
from transformer_book.book.site.print_edition import NOT_PRINTED

PDF = "transformer-book.pdf"
MARGIN_PT = 16 * 72 / 25.4  # the left/right page margin print_edition asks Chromium for
THREE_PAGES = ["lecture07/s03-scaling/", "lecture07/s11-experiments/", "chapter20/c10-next-token/"]


def nav_pages() -> list[str]:
    """The printed pages (the navigation of mkdocs.yml without the authors' pages), as site URLs."""
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    files = re.findall(r"([\w/.-]+\.(?:md|ipynb))\s*$", nav, re.M)
    urls = []
    for f in files:
        if f.startswith(NOT_PRINTED):
            continue
        stem = f.rsplit(".", 1)[0]
        urls.append("" if stem == "index" else (stem[: -len("index")] if stem.endswith("/index") else stem + "/"))
    return urls


@pytest.fixture(scope="module")
def pdf(built_site: Path):
    pypdfium2 = pytest.importorskip("pypdfium2")
    path = built_site / PDF
    if not path.exists():
        pytest.skip("the build printed no PDF (no Chromium or playwright: it said so in its log)")
    doc = pypdfium2.PdfDocument(str(path))
    texts = [doc[i].get_textpage().get_text_range() for i in range(len(doc))]
    yield path, doc, texts
    doc.close()


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


@pytest.mark.browser
def test_the_home_page_links_the_pdf_and_the_page_count_is_plausible(built_site: Path, pdf) -> None:
    _, doc, texts = pdf
    home = (built_site / "index.html").read_text(encoding="utf-8")
    assert f'href="{PDF}"' in home
    pages = nav_pages()
    assert len(pages) > 40
    assert len(pages) + 2 <= len(doc) <= 12 * len(pages)  # cover, contents, at least a page per page
    assert squeeze("目录") in squeeze(texts[1])
    assert all(re.search(r"\d+ / %d" % len(doc), t) for t in texts[2:])  # every page numbered in its footer


@pytest.mark.browser
def test_every_figure_of_the_printed_pages_is_drawn_in_the_pdf(built_site: Path, pdf) -> None:
    _, doc, texts = pdf
    squeezed = [squeeze(t) for t in texts]
    captions, shown = [], set()
    for url in nav_pages():
        page = (built_site / url / "index.html").read_text(encoding="utf-8")
        for fig in re.findall(r'<figure class="book-figure[^"]*">(.*?)</figure>', page, re.S):  # heatmaps too
            cap = re.search(r"<figcaption>(.*?)<button", fig, re.S) or re.search(r"<figcaption>(.*?)</figcaption>", fig, re.S)
            captions.append(squeeze(html.unescape(re.sub(r"<[^>]+>", "", cap.group(1)))))
            src = re.search(r'<img[^>]*src="([^"]+)"', fig)
            shown.add((built_site / url / html.unescape(src.group(1))).resolve())
    generated = {p.resolve() for p in (built_site / "assets" / "generated").rglob("*.svg")}
    # every figure the snippets drew is shown on a printed page (a figure may be shown on two: §2 and c05)
    assert shown == generated and len(generated) >= 15
    for caption in captions:
        where = [i for i, t in enumerate(squeezed) if caption[:30] in t]
        assert where, f"figure not in the PDF: {caption}"
        # the figure is drawn beside its caption: vector paths or an image on that page or the one before
        drawn = sum(1 for i in {where[0], max(where[0] - 1, 0)} for o in doc[i].get_objects(max_depth=2)
                    if o.type in (2, 3))  # FPDF_PAGEOBJ_PATH, FPDF_PAGEOBJ_IMAGE
        assert drawn > 20, f"figure {caption[:30]} has no drawing near its caption"


@pytest.mark.browser
def test_every_font_is_embedded_and_the_chinese_text_is_real_text(pdf) -> None:
    pypdf = pytest.importorskip("pypdf")
    path, _, texts = pdf
    reader = pypdf.PdfReader(str(path))
    seen = 0
    for page in reader.pages:
        fonts = (page.get("/Resources") or {}).get("/Font") or {}
        for font in fonts.values():
            font = font.get_object()
            seen += 1
            if font.get("/Subtype") == "/Type3":  # glyphs drawn by the PDF itself (Chromium's CFF fonts)
                assert font.get("/CharProcs"), font
                continue
            desc = font.get("/FontDescriptor")
            if desc is None and "/DescendantFonts" in font:
                desc = font["/DescendantFonts"][0].get_object().get("/FontDescriptor")
            desc = desc.get_object()
            assert any(k in desc for k in ("/FontFile", "/FontFile2", "/FontFile3")), f"not embedded: {font.get('/BaseFont')}"
    assert seen > 0
    assert "自注意力" in "".join(texts)  # Chinese glyphs carry their Unicode: searchable, copyable


@pytest.mark.browser
@pytest.mark.parametrize("url", THREE_PAGES)
def test_the_generated_values_of_a_page_are_printed_exactly_as_its_html_shows_them(built_site: Path, pdf, url: str) -> None:
    _, _, texts = pdf
    page = (built_site / url / "index.html").read_text(encoding="utf-8")
    article = page[page.index("<article"):page.index("</article>")]
    values = [squeeze(html.unescape(re.sub(r"<[^>]+>", "", v)))
              for v in re.findall(r'<span class="book-origin"[^>]*>(.*?)</span>', article, re.S)]
    # a value written as a formula (``\([B,H,T,T]\)``) is typeset by MathJax into drawn glyphs, not text
    values = [v for v in values if "\\(" not in v]
    assert len(values) >= 5
    heading = re.search(r"<h1[^>]*>(.*?)</h1>", article, re.S).group(1)
    heading = re.sub(r'<a class="headerlink".*?</a>', "", heading, flags=re.S)
    title = squeeze(html.unescape(re.sub(r"<[^>]+>", "", heading)))
    whole = squeeze("".join(texts))
    in_contents = whole.index(title, whole.index(squeeze("目录")))
    at = whole.index(title, in_contents + len(title))  # the page itself, after its line in the contents
    for v in values:  # in the page's order, each found after the one before
        found = whole.find(v, at)
        assert found >= 0, f"{url}: value {v!r} not printed after position {at}"
        at = found + len(v)


@pytest.mark.browser
def test_no_text_runs_past_the_right_margin_or_off_the_page(pdf) -> None:
    _, doc, _ = pdf
    outside = []
    for i in range(len(doc)):
        page = doc[i]
        width, height = page.get_size()
        tp = page.get_textpage()
        for j in range(tp.count_rects()):
            left, bottom, right, top = tp.get_rect(j)
            if left < 0 or bottom < 0 or top > height or right > width - MARGIN_PT + 2:
                outside.append(f"page {i + 1}: {tp.get_text_bounded(left, bottom, right, top)[:40]!r} at x {left:.0f}–{right:.0f}")
    assert not outside, "\n".join(outside[:20])


def test_without_chromium_the_build_says_so_skips_the_pdf_and_links_nothing(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# 首页\n\n正文。\n", encoding="utf-8")
    (tmp_path / "mkdocs.yml").write_text(textwrap.dedent("""\
        site_name: t
        plugins:
          - book:
              mathjax: false
              pdf: true
        markdown_extensions: [admonition, pymdownx.details, pymdownx.superfences, md_in_html, tables]
        """), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOK_")}
    env.update(NO_MKDOCS_2_WARNING="1", BOOK_CHROMIUM=str(tmp_path / "no-chromium"))
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"print edition skipped: no Chromium at {tmp_path / 'no-chromium'}" in done.stderr
    assert not (tmp_path / "site" / PDF).exists()
    assert PDF not in (tmp_path / "site" / "index.html").read_text(encoding="utf-8")


# -- the print file, made from the site's pages by their parse (html_edit.py) --------------------------------

FOLDED_PAGE = """<html><head><link rel='stylesheet' href='../assets/main.css'></head><body>
<article class="md-content__inner md-typeset">
<h2 id='results'>结果</h2>
<details class="example"><summary>生成它的代码：<code>a.py</code></summary>
<details class="note"><summary>内层</summary><p>一层套一层</p></details>
<p id="inside">still inside the fold</p>
</details>
<p id="after">after the fold <a href='../other/#part'>another page</a> <a href="#results">here</a></p>
<details class='note'><summary>答案</summary><p>展开</p></details>
<img src='figure.svg' alt='图'>
<svg viewBox="0 0 1 1"><path d="M0 0"/></svg>
</article></body></html>"""


def test_a_code_fold_with_folds_inside_is_printed_as_one_line_and_the_text_after_it_stays(tmp_path: Path) -> None:
    from transformer_book.book.site.print_edition import Entry, article

    (tmp_path / "page").mkdir()
    (tmp_path / "page" / "index.html").write_text(FOLDED_PAGE, encoding="utf-8")
    out = article(tmp_path, Entry("page/", "页"), {"page/", "other/"})
    assert out.count('<p class="print-code-ref">生成它的代码：<code>a.py</code>（代码见仓库与网站）</p>') == 1
    assert "一层套一层" not in out and "still inside the fold" not in out  # the nested fold went with its fold
    assert 'id="p-page--after"' in out and "after the fold" in out  # not swallowed by the first </details>
    assert "<details class=\"note\" open>" in out and "展开" in out


def test_single_quoted_attributes_are_resolved_like_double_quoted_ones(tmp_path: Path) -> None:
    from transformer_book.book.site.print_edition import Entry, article, combine

    (tmp_path / "page").mkdir()
    (tmp_path / "page" / "index.html").write_text(FOLDED_PAGE, encoding="utf-8")
    out = article(tmp_path, Entry("page/", "页"), {"page/", "other/"})
    assert 'id="p-page--results"' in out and 'href="#p-page--results"' in out
    assert 'href="#p-other--part"' in out  # a link to another page of the book lands inside the PDF
    assert 'src="page/figure.svg"' in out  # resolved against the site root
    assert '<svg viewBox="0 0 1 1"><path d="M0 0"/></svg>' in out  # untouched elements stay as written
    book = combine(tmp_path, [Entry("page/", "页")], "书名")
    assert '<link rel="stylesheet" href="assets/main.css">' in book  # the home page's single-quoted style sheet
    assert book.startswith("<!doctype html>") and "<title>书名</title>" in book
