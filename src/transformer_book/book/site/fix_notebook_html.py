"""Fixing what mkdocs-jupyter's HTML gets wrong for this site: CDN scripts, Chinese heading ids, and the
half-megabyte of notebook CSS it inlines into every notebook page."""

from __future__ import annotations

import hashlib
import posixpath
import re
from pathlib import Path

from transformer_book.book.files import atomic_write_text

_EXTERNAL_SCRIPT = re.compile(
    r"<script\b[^>]*>(?:(?!</script>).)*?(?:https?:)?//[a-z0-9.-]+\.[a-z]{2,}/(?:(?!</script>).)*</script>"
    r"|<script\b[^>]*\bsrc=[\"'](?:https?:)?//[^\"']+[\"'][^>]*>\s*</script>"
    r"|<script type=\"text/x-mathjax-config\">(?:(?!</script>).)*</script>",
    re.DOTALL | re.IGNORECASE,
)
_NB_HEADING = re.compile(r'<h([1-6]) id="">(.*?)<a class="anchor-link" href="#">¶</a></h\1>', re.S)


_STYLE = re.compile(r'<style type="text/css">\n?(.*?)</style>', re.S)
STYLES = "assets/notebook"
INLINE_LIMIT = 20_000  # a style block longer than this is moved to a shared file


def fix(html_text: str, page_url: str = "", site_dir: Path | None = None) -> str:
    """nbconvert's template adds MathJax 2 and mermaid from CDNs; the site typesets formulas itself
    (:mod:`.mathjax`), so those scripts go and the site stays offline; the formulas of Markdown cells get the
    markup of the other pages' formulas (:func:`markdown_math`). Chinese headings get the ids the rest of the
    site uses. With ``site_dir``, the notebook CSS moves to a shared file."""
    html_text = markdown_math(chinese_heading_ids(_EXTERNAL_SCRIPT.sub("", html_text)))
    return external_styles(html_text, page_url, site_dir) if site_dir is not None else html_text


_MD_CELL = re.compile(r'<div class="[^"]*\bjp-RenderedMarkdown\b[^"]*"[^>]*>')
_DIV = re.compile(r"<(/?)div\b[^>]*>", re.I)
_TAG_OR_TEXT = re.compile(r"(<[^>]*>)|([^<]+)")
_RAW = ("code", "pre", "script", "style", "kbd", "samp")
# TeX in a Markdown cell's text, as MathJax finds it (processEscapes, processEnvironments): $$…$$ and \[…\]
# display, \(…\) and $…$ inline, \begin{env}…\end{env} display; \$ is a dollar sign.
_TEX = re.compile(
    r"(?P<escaped>\\\$)"
    r"|\$\$(?P<dd>.+?)\$\$"
    r"|\\\[(?P<bd>.+?)\\\]"
    r"|\\\((?P<bi>.+?)\\\)"
    r"|(?P<env>\\begin\{(?P<name>[A-Za-z]+\*?)\}.*?\\end\{(?P=name)\})"
    r"|\$(?P<di>[^$]+?)\$",
    re.S,
)


def markdown_math(html_text: str) -> str:
    """The formulas of the notebook's Markdown cells (``$…$``, ``$$…$$`` …, left as TeX by nbconvert) as
    arithmatex markup — ``<span class="arithmatex">\\(…\\)</span>`` or ``\\[…\\]`` — the markup the
    build typesets on every other page. Text inside code is left alone."""
    out, pos = [], 0
    for m in _MD_CELL.finditer(html_text):
        if m.start() < pos:
            continue  # inside a cell already done
        end = _cell_end(html_text, m.end())
        out.append(html_text[pos:m.end()])
        out.append(_cell_math(html_text[m.end():end]))
        pos = end
    out.append(html_text[pos:])
    return "".join(out)


def _cell_end(text: str, start: int) -> int:
    depth = 1
    for m in _DIV.finditer(text, start):
        depth += -1 if m.group(1) else 1
        if depth == 0:
            return m.start()
    return len(text)


def _cell_math(cell: str) -> str:
    out, raw = [], []
    for m in _TAG_OR_TEXT.finditer(cell):
        tag, text = m.group(1), m.group(2)
        if tag is not None:
            name = re.match(r"<(/?)([a-zA-Z0-9]+)", tag)
            if name and name.group(2).lower() in _RAW and not tag.endswith("/>"):
                if name.group(1):
                    if raw and raw[-1] == name.group(2).lower():
                        raw.pop()
                else:
                    raw.append(name.group(2).lower())
            out.append(tag)
        else:
            out.append(text if raw else _TEX.sub(_arithmatex, text))
    return "".join(out)


def _arithmatex(m: re.Match[str]) -> str:
    if m.group("escaped"):
        return "$"
    if m.group("di") is not None:
        return f'<span class="arithmatex">\\({m.group("di")}\\)</span>'
    if m.group("bi") is not None:
        return f'<span class="arithmatex">\\({m.group("bi")}\\)</span>'
    tex = m.group("dd") if m.group("dd") is not None else m.group("bd") if m.group("bd") is not None else m.group("env")
    return f'<span class="arithmatex">\\[{tex}\\]</span>'


def external_styles(html_text: str, page_url: str, site_dir: Path) -> str:
    """Move the long ``<style>`` blocks (JupyterLab's theme, ~570 KB with its icons) into files under
    ``assets/notebook/`` named by their content, linked from the page: every notebook page shares one copy
    that the browser caches, and the page itself stays light (tests/test_site_links.py keeps a budget)."""
    here = page_url if page_url.endswith("/") or not page_url else posixpath.dirname(page_url) + "/"

    def move(m: re.Match[str]) -> str:
        css = m.group(1)
        if len(css) < INLINE_LIMIT:
            return m.group(0)
        name = f"{STYLES}/{hashlib.sha256(css.encode()).hexdigest()[:16]}.css"
        target = site_dir / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(target, css)
        return f'<link rel="stylesheet" href="{posixpath.relpath(name, here.rstrip("/") or ".")}">'

    return _STYLE.sub(move, html_text)


def chinese_heading_ids(html_text: str) -> str:
    """mkdocs-jupyter slugifies notebook headings to ASCII, so Chinese headings get ``id=""`` (and the page's
    table of contents links ``#_1``, ``#_2`` … to nothing). Give them the ids the rest of the site uses
    (``pymdownx.slugs.slugify(case="lower")``) and point the table of contents at them, in order."""
    from pymdownx.slugs import slugify

    slug = slugify(case="lower")
    taken = set(re.findall(r'\bid="([^"]+)"', html_text))
    new_ids: list[str] = []

    def heading(m: re.Match[str]) -> str:
        base = slug(re.sub(r"<[^>]+>", "", m.group(2)), "-") or "section"
        ident, n = base, 1
        while ident in taken:
            ident, n = f"{base}_{n}", n + 1
        taken.add(ident)
        new_ids.append(ident)
        return f'<h{m.group(1)} id="{ident}">{m.group(2)}<a class="anchor-link" href="#{ident}">¶</a></h{m.group(1)}>'

    html_text = _NB_HEADING.sub(heading, html_text)

    def toc(m: re.Match[str]) -> str:
        k = int(m.group(1))
        return f'href="#{new_ids[k - 1]}"' if 0 < k <= len(new_ids) else m.group(0)

    return re.sub(r'href="#_(\d+)"', toc, html_text)
