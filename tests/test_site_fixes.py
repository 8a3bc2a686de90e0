"""What the site's fixes do to a notebook page that mkdocs-jupyter wrote (book/site/fix_notebook_html.py), on a
made-up page shaped like nbconvert's: each edit made on the page's parse, everything else left as it was."""

from __future__ import annotations

from pathlib import Path

from transformer_book.book.site import fix_notebook_html

NOTEBOOK_PAGE = """<div class="md-content">
<script src='https://cdnjs.cloudflare.com/ajax/libs/mathjax/2.7.7/latest.js?config=TeX-AMS_CHTML-full,Safe'> </script>
<script src=""> </script>
<script type='text/x-mathjax-config'>init_mathjax = function() { MathJax.Hub.Config({}); }</script>
<script type="module">
  document.addEventListener("DOMContentLoaded", async () => {
    const mermaid = (await import("https://cdnjs.cloudflare.com/ajax/libs/mermaid/11.10.0/mermaid.esm.min.mjs")).default;
  });
</script>
<script>
// ClipboardCopyElement, see https://github.com/github/clipboard-copy-element/ for its licence
(function (global) { global.copied = true; })(this);
</script>
<script src="../../assets/book/origin.js"></script>
<nav><a href="#_1">第一节</a> <a href='#_2'>第二节</a></nav>
<h1 id="">实践 P08：训练一个<em>小</em>模型<a class="anchor-link" href="#">¶</a></h1>
<h2 id=''>数据与词表<a class='anchor-link' href='#'>¶</a></h2>
<style type="text/css">
""" + "a{color:red}" * 3000 + """</style>
</div>"""


def test_scripts_that_load_code_from_another_host_go_and_a_script_that_only_names_a_url_stays() -> None:
    out = fix_notebook_html.fix(NOTEBOOK_PAGE)
    assert "cdnjs.cloudflare.com" not in out  # the MathJax 2 loader (single-quoted src) and mermaid's import
    assert "x-mathjax-config" not in out and 'src=""' not in out
    assert "global.copied = true" in out and "clipboard-copy-element" in out  # a URL in a comment loads nothing
    assert '<script src="../../assets/book/origin.js"></script>' in out  # the site's own script, as written


def test_chinese_headings_get_the_sites_ids_and_the_contents_and_anchors_point_at_them() -> None:
    from pymdownx.slugs import slugify

    out = fix_notebook_html.fix(NOTEBOOK_PAGE)
    first, second = slugify(case="lower")("实践 P08：训练一个小模型", "-"), slugify(case="lower")("数据与词表", "-")
    assert f'<h1 id="{first}">' in out and f'<h2 id="{second}">' in out  # the double- and the single-quoted one
    assert f'<a class="anchor-link" href="#{first}">¶</a>' in out
    assert f'<a href="#{first}">第一节</a> <a href="#{second}">第二节</a>' in out


def test_the_long_notebook_style_moves_to_a_shared_file(tmp_path: Path) -> None:
    out = fix_notebook_html.fix(NOTEBOOK_PAGE, "chapter20/p08-practice/", tmp_path)
    [css] = list((tmp_path / "assets" / "notebook").glob("*.css"))
    assert css.read_text(encoding="utf-8") == "a{color:red}" * 3000
    assert f'<link rel="stylesheet" href="../../assets/notebook/{css.name}">' in out and "<style" not in out
