"""Editing HTML by its parse: elements found by the standard library's parser, changed in place, the rest kept.

The site's fixes and the print edition change a few elements of pages that Python-Markdown, Material or
nbconvert wrote: drop a script, open a fold, prefix an id, point a link elsewhere. Regular expressions get
nesting and quoting wrong (a fold ends at the first nested ``</details>``; ``href='…'`` is missed), so the page
is parsed by :class:`html.parser.HTMLParser` — the parser the tests read the site with — into elements that know
where they start and end in the text. An edit replaces an element, its content or its start tag; everything
else stays byte for byte as it was written.

Used by the site fixes (``site/page_html.py``, ``site/fix_notebook_html.py``), the print edition and the back-links
under the API pages' headings (``rendering/code_excerpt.py``). One module still edits pages with a regular
expression, on purpose: ``site/mathjax.py`` swaps each ``<span class="arithmatex">…</span>`` (Arithmatex's
output: TeX text with no element inside, so the first end tag is its own) for its typeset SVG, and rewrites
MathJax's own SVG, which one program writes in one shape: markup without the nesting and quoting a parse guards
against.
"""

from __future__ import annotations

import html
import html.parser
from dataclasses import dataclass, field

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
                  "track", "wbr"})


@dataclass(eq=False)
class Element:
    """One element of a parsed text: its tag, attributes (values unescaped; a bare attribute is None) and where it
    is — ``start`` at ``<``, ``open_end`` after its start tag, ``close`` at its end tag's ``<`` and ``end`` after
    that tag (for an element without an end tag, both are ``open_end``)."""

    tag: str
    attrs: list[tuple[str, str | None]]
    raw: str  # the start tag as written
    start: int
    open_end: int
    self_closing: bool
    close: int = -1
    end: int = -1
    parent: "Element | None" = None
    children: list["Element"] = field(default_factory=list)

    def get(self, name: str) -> str | None:
        for key, value in self.attrs:
            if key == name:
                return value
        return None

    def has(self, name: str) -> bool:
        return any(key == name for key, _ in self.attrs)

    @property
    def classes(self) -> set[str]:
        return set((self.get("class") or "").split())

    def inner(self, text: str) -> str:
        return text[self.open_end:self.close]

    def outer(self, text: str) -> str:
        return text[self.start:self.end]

    def within(self, other: "Element") -> bool:
        """Whether this element lies inside ``other`` (or is it)."""
        return other.start <= self.start and self.end <= other.end

    def first(self, tag: str) -> "Element | None":
        """The first child element with this tag."""
        return next((c for c in self.children if c.tag == tag), None)

    def start_tag(self, attrs: list[tuple[str, str | None]]) -> str:
        """This element's start tag with ``attrs`` in place of its own, attribute names spelled as written
        (inline SVG's ``viewBox`` stays ``viewBox``), values double-quoted and escaped."""
        spelled = {name.lower(): name for name in _attribute_names(self.raw)}
        parts = [f"<{_tag_name(self.raw) or self.tag}"]
        for name, value in attrs:
            name = spelled.get(name, name)
            parts.append(f" {name}" if value is None else f' {name}="{html.escape(value, quote=True)}"')
        return "".join(parts) + (" />" if self.self_closing else ">")


class _Parser(html.parser.HTMLParser):
    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.text = text
        self.line_starts = [0]
        for i, ch in enumerate(text):
            if ch == "\n":
                self.line_starts.append(i + 1)
        self.elements: list[Element] = []
        self.open: list[Element] = []

    def _offset(self) -> int:
        line, column = self.getpos()
        return self.line_starts[line - 1] + column

    def _start(self, tag: str, attrs: list[tuple[str, str | None]], self_closing: bool) -> Element:
        start = self._offset()
        raw = self.get_starttag_text() or ""
        parent = self.open[-1] if self.open else None
        element = Element(tag, attrs, raw, start, start + len(raw), self_closing, parent=parent)
        if parent is not None:
            parent.children.append(element)
        self.elements.append(element)
        return element

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = self._start(tag, attrs, False)
        if tag in VOID:
            element.close = element.end = element.open_end
        else:
            self.open.append(element)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = self._start(tag, attrs, True)
        element.close = element.end = element.open_end

    def handle_endtag(self, tag: str) -> None:
        at = self._offset()
        if not any(e.tag == tag for e in self.open):
            return  # an end tag nothing opened: not ours to match
        close_end = self.text.find(">", at) + 1 or len(self.text)
        while self.open:
            element = self.open.pop()
            if element.tag == tag:
                element.close, element.end = at, close_end
                return
            element.close = element.end = at  # ended by its parent's end tag (an optional end tag left out)


def parse(text: str) -> list[Element]:
    """Every element of ``text``, in document order (each with its parent and children)."""
    parser = _Parser(text)
    parser.feed(text)
    parser.close()
    for element in parser.open:  # never closed: it runs to the end of the text
        element.close = element.end = len(text)
    return parser.elements


def edit(text: str, changes: list[tuple[int, int, str]]) -> str:
    """``text`` with each ``(start, end, replacement)`` applied; the ranges must not overlap."""
    out, pos = [], 0
    for start, end, replacement in sorted(changes, key=lambda c: (c[0], c[1])):
        if start < pos:
            raise ValueError(f"overlapping HTML edits at {start}")
        out += [text[pos:start], replacement]
        pos = end
    return "".join(out) + text[pos:]


def _tag_name(raw: str) -> str:
    found = html.parser.tagfind_tolerant.match(raw, 1) if hasattr(html.parser, "tagfind_tolerant") else None
    return found.group(1) if found else ""


def _attribute_names(raw: str) -> list[str]:
    """The attribute names of a start tag as written, found the way the parser finds them."""
    finder = getattr(html.parser, "attrfind_tolerant", None)
    tag = html.parser.tagfind_tolerant.match(raw, 1) if hasattr(html.parser, "tagfind_tolerant") else None
    if finder is None or tag is None:
        return []
    names, k = [], tag.end()
    while k < len(raw):
        m = finder.match(raw, k)
        if not m or not m.group(1):
            break
        names.append(m.group(1))
        k = m.end()
    return names
