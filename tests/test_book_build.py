"""The whole book, built fresh as CI builds it: what a reader gets."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from conftest import ROOT, WholeBook, held_out_settings

pytestmark = pytest.mark.slow


def _the_build(whole_book: WholeBook) -> WholeBook:
    if whole_book.prebuilt:
        pytest.skip("the site was built beforehand (BOOK_SITE_DIR): this test checks the suite's own build")
    return whole_book


def test_the_book_builds_fresh_with_every_result_matching_its_record_while_the_machine_is_loaded(whole_book: WholeBook) -> None:
    """The suite's one whole-book build (conftest.WholeBook): ``mkdocs build --strict`` as CI runs it, so every
    snippet ran afresh and a changed result, a false claim or a missing record would have failed it — and for at
    least a third of its time (the rest of the suite's time beside it) at least ``cores - 1`` other processes
    wanted the cores (conftest.Load)."""
    book = _the_build(whole_book)
    assert book.returncode == 0, f"the build failed:\n{book.stdout[-4000:]}\n{book.stderr[-6000:]}"
    m = re.search(r"(\d+) snippets: (\d+) executed", book.stderr)
    assert m and int(m[1]) >= 50 and m[1] == m[2], "every snippet ran afresh (nothing came from a cache)"
    wanted = max(1, (os.cpu_count() or 1) - 1)
    assert book.loaded >= wanted - 0.05, f"only {book.loaded:.2f} runnable processes beside the build on average"
    assert book.shared >= book.seconds / 3, f"only {book.shared:.0f} s of the build's {book.seconds:.0f} s beside the rest of the suite"


def test_the_book_passes_the_drift_check_under_a_perturbation_calibration_never_saw(whole_book: WholeBook,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """What a contributor's machine does to the book: torch's kernels on another CPU's code path (or, where this
    CPU has none to offer, other rounding in every training step). The calibrated bands absorbed it and every claim held — the same build as above, run under
    settings calibration never ran."""
    from transformer_book.book.checking.calibrate import JITTER_RUNS, perturbations

    from transformer_book.book.discover import discover
    from transformer_book.book.storage.cache import cache_key, open_cache

    book = _the_build(whole_book)
    held_out = held_out_settings()
    calibrated = {(k, v) for p in perturbations() for k, v in p.env.items()}
    assert held_out and not set(held_out.items()) & calibrated
    assert int(held_out.get("BOOK_JITTER", JITTER_RUNS + 1)) > JITTER_RUNS
    assert book.returncode == 0, f"the held-out build failed:\n{book.stdout[-4000:]}\n{book.stderr[-6000:]}"
    # Each result in the build's cache sits under the key of the held-out settings, none under an ordinary key:
    # the snippets ran perturbed (the settings enter every key, environment.fingerprint).
    cache = open_cache(book.cache, ROOT)
    roots = {sid: snip for sid, snip in discover(ROOT / "snippets").items() if not snip.requires()}
    ordinary = {sid for sid, snip in roots.items() if cache.load(sid, cache_key(snip)) is not None}
    for name, value in held_out.items():
        monkeypatch.setenv(name, value)
    perturbed = {sid for sid, snip in roots.items() if cache.load(sid, cache_key(snip)) is not None}
    assert len(roots) >= 40 and perturbed == set(roots) and ordinary == set()


def test_every_file_of_the_built_site_is_readable_by_everyone(built_site: Path) -> None:
    """A web server usually runs as another user: a file only its owner can read is a broken site."""
    import stat

    unreadable = [p.relative_to(built_site).as_posix() for p in built_site.rglob("*")
                  if p.is_file() and stat.S_IMODE(p.stat().st_mode) & 0o004 == 0]
    assert unreadable == []


def test_every_measured_value_is_labelled_as_measured_on_its_page(built_site: Path) -> None:
    import json

    pages = {}
    for record in (ROOT / "snippets").rglob("*.record.json"):
        rec = json.loads(record.read_text(encoding="utf-8"))
        for key, r in rec["results"].items():
            if r.get("type") == "value" and r.get("kind") == "measured":
                pages[(rec["snippet"], key)] = r
    assert pages, "the book has measured values (the KV-cache timing)"
    s11 = (built_site / "chapter20" / "c11-train-generate" / "index.html").read_text(encoding="utf-8")
    assert s11.count('book-measured"') >= 2 and "在构建本书的机器上测得" in s11  # class="book-origin book-measured"
    assert 'class="book-measured-note"' in s11  # the timing table names its measured columns


EXTERNAL_LOAD = re.compile(
    r"""<(?:script|img|iframe|source|audio|video)\b[^>]*\bsrc=["'](?:https?:)?//"""
    r"""|<link\b[^>]*\bhref=["'](?:https?:)?//[^"']*["'][^>]*>"""
    r"""|@import\s+url\(["']?(?:https?:)?//|url\(["']?(?:https?:)?//""",
    re.IGNORECASE,
)


def test_the_site_loads_nothing_from_the_internet(built_site: Path) -> None:
    offenders = []
    for path in built_site.rglob("*"):
        if path.suffix not in (".html", ".css", ".js") or "mathjax" in path.parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for m in EXTERNAL_LOAD.finditer(text):
            snippet = text[m.start() : m.start() + 120]
            if 'rel="canonical"' in snippet or "rel=canonical" in snippet:
                continue
            offenders.append(f"{path.relative_to(built_site)}: {snippet}")
    assert offenders == []


def test_math_is_typeset_when_the_book_is_built(built_site: Path) -> None:
    """The formulas arrive as SVG (MathJax ran at build time, book/site/mathjax.py): no TeX left, no math
    script; the glyphs the page's formulas use are in one hidden sheet, MathJax's small style sheet inline.
    MathJax still ships with the site, for a build where no Chromium typesets (pages then load it)."""
    from transformer_book.book.site import mathjax

    assert (built_site / "assets" / "mathjax" / "tex-svg-full.js").stat().st_size > 1_000_000
    page = (built_site / "lecture07" / "s03-scaling" / "index.html").read_text(encoding="utf-8")
    why = mathjax.unavailable()
    if why:  # the README's pip-only set-up: the page must carry its TeX and load MathJax itself
        assert 'class="arithmatex"' in page and "<mjx-container" not in page and not mathjax.typeset_already(page)
        assert "tex-svg-full.js" in page and "MathJax =" in page
        pytest.skip(f"the formulas are typeset in the reader's browser here, as they must be: {why}")
    assert 'class="arithmatex"' in page and "<mjx-container" in page
    assert mathjax.typeset_already(page), "raw TeX left in the page"
    assert "tex-svg-full.js" not in page and "MathJax =" not in page
    assert page.count(f'id="{mathjax.CACHE_ID}"') == 1 and page.count(f'id="{mathjax.STYLE_ID}"') == 1
    used = set(re.findall(r'href="#(MJX-[A-Z0-9-]+)"', page))
    defined = set(re.findall(r'<path id="(MJX-[A-Z0-9-]+)"', page))
    assert used and used <= defined, f"glyphs used but not defined: {sorted(used - defined)[:5]}"


def test_generated_tables_figures_and_inline_numbers_are_in_the_pages(built_site: Path) -> None:
    s02 = (built_site / "lecture07" / "s02-self-attention" / "index.html").read_text(encoding="utf-8")
    assert "10.95" in s02 and "18.77" in s02 and "20.69" in s02  # the soft lookup (§2.1), deterministic
    s03 = (built_site / "lecture07" / "s03-scaling" / "index.html").read_text(encoding="utf-8")
    assert "../../assets/generated/lecture07/scaling_study/figure.svg" in s03
    svg = (built_site / "assets" / "generated" / "lecture07" / "scaling_study" / "figure.svg").read_text(encoding="utf-8")
    assert svg.startswith("<?xml") and "<path" in svg
    assert "{{" not in s02 and "{{" not in s03, "a reference was left unrendered"
    assert "生成它的代码" in s03  # the collapsible source listing


def test_chinese_headings_get_chinese_ids(built_site: Path) -> None:
    s02 = (built_site / "lecture07" / "s02-self-attention" / "index.html").read_text(encoding="utf-8")
    assert 'id="21-注意力是软的字典查找"' in s02


def test_the_api_reference_renders_the_package_with_chinese_docstrings(built_site: Path) -> None:
    api = (built_site / "api" / "attention_numpy" / "index.html").read_text(encoding="utf-8")
    assert "soft_lookup" in api and "scaling_study" in api
    assert "数值稳定的 softmax" in api  # a Chinese docstring, rendered
    index = (built_site / "api" / "index.html").read_text(encoding="utf-8")
    assert 'href="attention_numpy/' in index  # the index links to each module's page


def test_the_search_dictionary_holds_every_glossary_term() -> None:
    glossary = (ROOT / "docs" / "glossary.md").read_text(encoding="utf-8")
    glossary = glossary.split("\n## 不用的写法")[0]  # the words the book avoids are not its terms
    terms = {m.group(1).strip() for m in re.finditer(r"^\| ([^|]+?) \|", glossary, re.M)} - {"中文", "---"}
    terms = {t for t in terms if " " not in t and re.search(r"[\u4e00-\u9fff]", t)}
    words = {line.split()[0] for line in (ROOT / "search-terms.txt").read_text(encoding="utf-8").splitlines() if line.strip()}
    assert terms - words == set(), "add these glossary terms to search-terms.txt"


def test_no_heading_contains_math() -> None:
    """Navigation, the table of contents and search show headings as plain text: use Unicode (√dₖ), not $…$."""
    offenders = []
    for md in sorted((ROOT / "docs").rglob("*.md")):
        in_code = False
        for i, line in enumerate(md.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith(("```", "~~~")):
                in_code = not in_code
            if not in_code and re.match(r"^#{1,6} ", line) and ("$" in line or "\\(" in line):
                offenders.append(f"{md.relative_to(ROOT)}:{i}: {line}")
    assert offenders == []


def test_the_site_ships_its_chinese_web_font_as_a_subset_each_page_loads_after_it_has_loaded(built_site: Path) -> None:
    """The font holds only what the site shows (that it holds every character shown, the browser checks:
    tests/test_browser.py)."""
    font = built_site / "assets" / "fonts" / "book-cjk.woff2"
    assert font.read_bytes()[:4] == b"wOF2"
    assert font.stat().st_size < 1_500_000, "the subset should hold only the characters the site uses"
    # The pages add the font themselves once loaded (page_html.FONT_LOADER); book.css names it first in every
    # stack and declares the placeholder the text is laid out in meanwhile where no Chinese font exists.
    page = (built_site / "lecture07" / "s02-self-attention" / "index.html").read_text(encoding="utf-8")
    head = page.split("</head>", 1)[0]
    assert '"../../assets/fonts/book-cjk.woff2"' in head and "new FontFace(" in head
    assert 'href="../../assets/fonts/book-cjk-placeholder.woff2" as="font"' in head
    css = (built_site / "stylesheets" / "book.css").read_text(encoding="utf-8")
    assert 'url("../assets/fonts/book-cjk-placeholder.woff2")' in css
    assert (built_site / "assets" / "fonts" / "book-cjk-placeholder.woff2").stat().st_size < 10_000
