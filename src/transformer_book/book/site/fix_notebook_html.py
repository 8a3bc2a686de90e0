"""Fixing what mkdocs-jupyter's HTML gets wrong for this site: CDN scripts, Chinese heading ids, and the
half-megabyte of notebook CSS it inlines into every notebook page.

Every change is made on the page's parse (:mod:`..html_edit`): the elements are found by the HTML parser, and
only they are rewritten.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from pathlib import Path

from transformer_book.book.files import atomic_write_bytes, atomic_write_text
from transformer_book.book import html_edit
from transformer_book.book.site import css_prune

STYLES = "assets/notebook"
INLINE_LIMIT = 20_000  # a style block longer than this is moved to a shared file

# Script text that fetches code from another host when it runs: a module import, a dynamic import, a loader
# given a URL (nbconvert's mermaid block does ``await import("https://cdnjs…")``). This reads JavaScript, not
# HTML — a script that only mentions a URL, in a comment or a string it does not load, stays.
_LOADS_FROM_A_HOST = re.compile(
    r"""\bimport\s*\(\s*["'`](?:https?:)?//|\bfrom\s*["'](?:https?:)?//|\bimport\s*["'](?:https?:)?//"""
    r"""|\.src\s*=\s*["'`](?:https?:)?//|\brequire(?:js)?\s*\(\s*\[?\s*["'](?:https?:)?//""")


def fix(html_text: str, page_url: str = "", site_dir: Path | None = None) -> str:
    """nbconvert's template adds MathJax 2 and mermaid from CDNs; the site typesets formulas itself
    (:mod:`.mathjax`), so those scripts go and the site stays offline; the formulas of Markdown cells get the
    markup of the other pages' formulas (:func:`markdown_math`). Chinese headings get the ids the rest of the
    site uses. With ``site_dir``, the notebook CSS moves to a shared file."""
    html_text = markdown_math(chinese_heading_ids(without_external_scripts(html_text)))
    if site_dir is None:
        return html_text
    return external_images(external_styles(html_text, page_url, site_dir), page_url, site_dir)


IMAGE_LIMIT = 4_000  # a data: image longer than this becomes a file
_DATA_IMAGE = re.compile(r"data:image/(png|jpeg|gif|webp);base64,([A-Za-z0-9+/=\s]+)$")


def external_images(html_text: str, page_url: str, site_dir: Path) -> str:
    """The pictures a notebook's cells output (matplotlib's PNGs, inlined by nbconvert as base64: on P08 two
    thirds of the page's compressed bytes) become files under ``assets/notebook/`` named by their content,
    each ``<img>`` sized by its picture (the box is reserved before it loads) and loaded lazily: the page's
    text arrives without them."""
    import base64
    import binascii

    here = page_url if page_url.endswith("/") or not page_url else posixpath.dirname(page_url) + "/"
    changes = []
    for e in html_edit.parse(html_text):
        src = e.get("src") or ""
        m = _DATA_IMAGE.match(src) if e.tag == "img" and len(src) > IMAGE_LIMIT else None
        if m is None:
            continue
        try:
            data = base64.b64decode(re.sub(r"\s+", "", m.group(2)), validate=True)
        except (binascii.Error, ValueError):
            continue
        ext = "jpg" if m.group(1) == "jpeg" else m.group(1)
        name = f"{STYLES}/{hashlib.sha256(data).hexdigest()[:16]}.{ext}"
        target = site_dir / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(target, data)
        attrs = [(k, v) for k, v in e.attrs if k not in ("src", "loading", "decoding")]
        attrs.insert(0, ("src", posixpath.relpath(name, here.rstrip("/") or ".")))
        size = _png_size(data) if ext == "png" else None
        if size is not None and not e.has("width") and not e.has("height"):
            attrs += [("width", str(size[0])), ("height", str(size[1]))]
        attrs += [("loading", "lazy"), ("decoding", "async")]
        changes.append((e.start, e.open_end, e.start_tag(attrs)))
    return html_edit.edit(html_text, changes)


def _png_size(data: bytes) -> tuple[int, int] | None:
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        return None
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")


_RAW = {"code", "pre", "script", "style", "kbd", "samp"}  # their text is never TeX
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
    build typesets on every other page. Only the cells' text is read: not their tags, not code."""
    elements = html_edit.parse(html_text)
    cells = [e for e in elements if "jp-RenderedMarkdown" in e.classes]
    cells = [c for c in cells if not any(c is not d and c.within(d) for d in cells)]
    changes = []
    for cell in cells:
        # what is not text: every tag of the cell, and the whole of any code inside it
        taken = []
        for e in elements:
            if e is cell or not e.within(cell):
                continue
            if e.tag in _RAW:
                taken.append((e.start, e.end))
            else:
                taken += [(e.start, e.open_end), (e.close, e.end)]
        pos = cell.open_end
        for start, end in sorted(taken) + [(cell.close, cell.close)]:
            if start > pos:
                text = html_text[pos:start]
                new = _TEX.sub(_arithmatex, text)
                if new != text:
                    changes.append((pos, start, new))
            pos = max(pos, end)
    return html_edit.edit(html_text, changes)


def _arithmatex(m: re.Match[str]) -> str:
    if m.group("escaped"):
        return "$"
    inline = m.group("di") if m.group("di") is not None else m.group("bi")
    if inline is not None:
        return f'<span class="arithmatex">\\({inline}\\)</span>'
    tex = next(m.group(g) for g in ("dd", "bd", "env") if m.group(g) is not None)
    return f'<span class="arithmatex">\\[{tex}\\]</span>'


def _external(url: str) -> bool:
    return url.startswith("//") or re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*://", url) is not None


def without_external_scripts(html_text: str) -> str:
    """The page without the scripts that load code from another host: a ``src`` on another host, or an empty
    one (nbconvert's MathJax 2 loader with its URL left blank), MathJax 2's configuration block, and inline
    scripts that import from another host."""
    drop = []
    for e in html_edit.parse(html_text):
        if e.tag != "script":
            continue
        src = e.get("src")
        if (src is not None and (_external(src.strip()) or not src.strip())) \
                or (e.get("type") or "").strip().lower() == "text/x-mathjax-config" \
                or _LOADS_FROM_A_HOST.search(e.inner(html_text)):
            drop.append((e.start, e.end, ""))
    return html_edit.edit(html_text, drop)


def external_styles(html_text: str, page_url: str, site_dir: Path) -> str:
    """Move the long ``<style>`` blocks (JupyterLab's theme, ~570 KB with its icons), cut down to the rules the
    page can use (:mod:`.css_prune`: ~10 % of it), into files under ``assets/notebook/`` named by their
    content, linked from the page: the page itself stays light (tests/test_site_links.py keeps a budget), and
    notebook pages with the same classes share one copy that the browser caches."""
    here = page_url if page_url.endswith("/") or not page_url else posixpath.dirname(page_url) + "/"
    changes = []
    elements = html_edit.parse(html_text)
    classes = {c for e in elements for c in e.classes}
    variables = set(re.findall(r"var\(\s*(--[\w-]+)", html_text))  # read by the page's own inline styles
    for e in elements:
        if e.tag != "style" or len(e.inner(html_text)) < INLINE_LIMIT:
            continue
        # only what this page can use (css_prune): JupyterLab's theme is for every widget JupyterLab has
        css = css_prune.prune(e.inner(html_text).removeprefix("\n"), classes, variables)
        name = f"{STYLES}/{hashlib.sha256(css.encode()).hexdigest()[:16]}.css"
        target = site_dir / name
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(target, css)
        changes.append((e.start, e.end, f'<link rel="stylesheet" href="{posixpath.relpath(name, here.rstrip("/") or ".")}">'))
    return html_edit.edit(html_text, changes)


def chinese_heading_ids(html_text: str) -> str:
    """mkdocs-jupyter slugifies notebook headings to ASCII, so Chinese headings get ``id=""`` (and the page's
    table of contents links ``#_1``, ``#_2`` … to nothing). Give them the ids the rest of the site uses
    (``pymdownx.slugs.slugify(case="lower")``), point each heading's ``¶`` anchor and the table of contents at
    them, in order."""
    from pymdownx.slugs import slugify

    slug = slugify(case="lower")
    elements = html_edit.parse(html_text)
    taken = {e.get("id") for e in elements if e.get("id")}
    changes = []
    new_ids: list[str] = []
    headings = [e for e in elements if re.fullmatch(r"h[1-6]", e.tag) and e.get("id") == ""]
    for h in headings:
        anchor = next((a for a in h.children if a.tag == "a" and "anchor-link" in a.classes), None)
        text = h.inner(html_text)[: anchor.start - h.open_end] if anchor is not None else h.inner(html_text)
        base = slug(_text_of(text), "-") or "section"
        ident, n = base, 1
        while ident in taken:
            ident, n = f"{base}_{n}", n + 1
        taken.add(ident)
        new_ids.append(ident)
        changes.append((h.start, h.open_end, h.start_tag([(k, ident if k == "id" else v) for k, v in h.attrs])))
        if anchor is not None and anchor.get("href") == "#":
            changes.append((anchor.start, anchor.open_end,
                            anchor.start_tag([(k, f"#{ident}" if k == "href" else v) for k, v in anchor.attrs])))
    for a in elements:  # the table of contents: #_1, #_2 … in heading order
        m = re.fullmatch(r"#_(\d+)", a.get("href") or "") if a.tag == "a" else None
        if m and 0 < int(m.group(1)) <= len(new_ids) and not any(a is c or a.within(h) for h in headings for c in h.children):
            changes.append((a.start, a.open_end,
                            a.start_tag([(k, f"#{new_ids[int(m.group(1)) - 1]}" if k == "href" else v) for k, v in a.attrs])))
    return html_edit.edit(html_text, changes)


def _text_of(fragment: str) -> str:
    """The text of an HTML fragment (a heading's content), as the parser reads it."""
    import html.parser

    parts: list[str] = []

    class Text(html.parser.HTMLParser):
        def handle_data(self, data: str) -> None:
            parts.append(data)

    parser = Text(convert_charrefs=True)
    parser.feed(fragment)
    parser.close()
    return "".join(parts)
