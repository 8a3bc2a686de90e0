"""The small fixes every rendered page gets (book/site/page_html.py), on hand-written pages: what each changes
and what it leaves alone. The whole book's pages are read in a browser by test_browser and test_accessibility."""

from __future__ import annotations

from transformer_book.book.site import page_html

PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>t</title></head><body>
<div class="md-search" data-md-component="search" role="dialog"></div>
<pre><code>outside the content</code></pre>
<div class="md-content" data-md-component="content">
<pre><span></span><code><span id="__span-0-1">a = 1</span></code></pre>
<div class="no-copy"><pre><code>b = 2</code></pre></div>
<table><thead><tr><th></th><th>第 1 维</th></tr></thead><tbody><tr><th>a</th><td>1</td></tr></tbody></table>
<details class="example"><summary>代码</summary><pre><code>x = 1</code></pre></details>
<details class="example" open><summary>开着</summary><p>留在原处</p></details>
<ul><li class="doc-section-item field-body"><b><code>out</code></b> (<code>Tensor</code>)
  –
  <div class="doc-md-description">
  </div></li>
<li class="doc-section-item field-body"><b><code>x</code></b> (<code>int</code>)
  –
  <div class="doc-md-description"><p>说明</p></div></li></ul>
</div>
<script id="__config" type="application/json">{"translations": {"clipboard.copy": "复制到剪贴板"}}</script>
<script src="../../assets/javascripts/bundle.a5f9d56c.min.js"></script>
<script src="../../assets/book/page.js" defer></script>
<script src="../../assets/javascripts/bundle.js"></script>
</body></html>"""


def fixed(page: str = PAGE, webfont: bool = False) -> str:
    return page_html.fix(page, "lecture07/s02/", lambda path: None, webfont)


def test_the_themes_script_is_fetched_after_what_the_first_paint_needs_and_nothing_else_is():
    out = fixed()
    assert '<script src="../../assets/javascripts/bundle.a5f9d56c.min.js" fetchpriority="low"></script>' in out
    assert '<script src="../../assets/book/page.js" defer></script>' in out  # the engine's own: deferred already
    assert '<script src="../../assets/javascripts/bundle.js"></script>' in out  # not Material's hashed bundle
    assert fixed(out) == out  # fixing a fixed page changes nothing


def test_search_dialog_named_empty_header_cell_made_a_data_cell_closed_fold_inert():
    out = fixed()
    assert f'role="dialog" aria-label="{page_html.SEARCH_NAME}"' in out
    assert "<thead><tr><td></td><th>第 1 维</th>" in out
    assert f"<summary>代码</summary><template {page_html.FOLD_MARK}><pre><code>x = 1</code></pre></template>" in out
    assert "<summary>开着</summary><p>留在原处</p>" in out  # an open fold is shown as it is


def test_the_web_font_is_added_to_the_page_only_once_it_has_loaded_on_a_first_visit():
    head = fixed(webfont=True).split("</head>", 1)[0]
    assert head.count("new FontFace(") == 1
    # first visit: load, then add (one layout of the text in the new font); cached: add at once, text waits
    assert "else f.load().then(function(){document.fonts.add(f);" in head
    assert "if(c){document.fonts.add(f);f.load()" in head
    assert 'rel="preload" href="../../assets/fonts/book-cjk-placeholder.woff2"' in head


def test_a_parameter_without_a_description_has_no_dash_before_nothing():
    out = fixed()
    assert '(<code>Tensor</code>)\n  \n  <div class="doc-md-description">' in out
    assert '(<code>int</code>)\n  –\n  <div class="doc-md-description"><p>说明</p>' in out


def test_code_in_the_content_gets_its_copy_button_in_the_page_and_the_head_its_color_scheme():
    out = fixed()
    button = ('<nav class="md-code__nav"><button class="md-code__button" title="复制到剪贴板" '
              'data-clipboard-target="#__book_code_0" data-md-type="copy"></button></nav>')
    # numbered lines: the class the theme's script would add (display: grid) is there from the start
    assert f'<pre><span></span>{button}<code id="__book_code_0" class="md-code__content"><span id="__span-0-1">' in out
    assert out.count("md-code__nav") == 1  # not outside the content, not under .no-copy, not in a closed fold
    assert "<pre><code>outside the content</code></pre>" in out and "<pre><code>b = 2</code></pre>" in out
    assert out.count('<meta name="color-scheme"') == 1 and '<meta charset="utf-8"><meta name="color-scheme"' in out
    without_config = fixed(PAGE.replace('"clipboard.copy": "复制到剪贴板"', '"other": 1'))
    assert f'title="{page_html.COPY_TITLE}"' in without_config
