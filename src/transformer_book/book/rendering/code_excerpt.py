"""Code beside the formula: ``{{ code module:name }}`` shows one object of the package as its file has it.

A page writes, on a line of its own (inside an admonition too)::

    {{ code transformer:MultiHeadAttention.forward }}
    {{ code lecture07.positions:rope_rotate }}

The module path is relative to the package (``transformer_book``); the name is a function, a class or
``Class.method`` (nested as deep as the file nests them). The object is found by parsing the file with
:mod:`ast` — the module is never imported, so the build does not import torch for this — and shown exactly as
the file has it, decorators included, as a code block titled with the file's path whose line numbers are the
file's. Below it, a link to the object's entry on the API reference page (mkdocstrings' anchor, resolved by
mkdocs-autorefs). An unknown module or name, or a module that no API page documents, fails the build with
``page:line``, like an unknown snippet reference.

The other direction: the object's entry on the API page gets a line "在书中：…" with a link to every place of
the book that shows an excerpt of it (:meth:`Excerpts.back_links`, applied to the API page's HTML). An object
that mkdocstrings does not show (private, or without a docstring) is linked at its nearest shown ancestor.

Under ``mkdocs serve --dirty`` only pages whose Markdown changed are rendered again; :meth:`Excerpts.changed_pages`
names the pages whose excerpts (an edit of the source) or back-links (an excerpt added or removed elsewhere)
are no longer what they last showed, so that the plugin renders them again too.
"""

from __future__ import annotations

import ast
import difflib
import html
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from transformer_book.book import html_edit
from transformer_book.book.memo import Memo, file_version
from transformer_book.book.rendering import pages

HEADING_RE = re.compile(r"^(?P<level>#{1,6})\s+(?P<text>.+?)\s*(?:\{[^}]*\})?\s*#*\s*$")
API_RE = re.compile(r"^[ \t]*:::[ \t]+(?P<ident>[\w.]+)[ \t]*$", re.M)
PRIVATE = re.compile(r"^_[^_]")  # mkdocstrings' default filter leaves these out
HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass(frozen=True)
class Excerpt:
    """One object's source, as the file has it."""

    identifier: str  # "transformer_book.transformer.MultiHeadAttention.forward"
    qualname: str  # "MultiHeadAttention.forward"
    rel: str  # the file, relative to the project: "src/transformer_book/transformer.py"
    first: int  # first line (1-based; the first decorator, if any)
    last: int
    text: str  # lines first … last, exactly
    api: str  # the identifier of its entry on the API page (itself, or the nearest shown ancestor)


@dataclass(frozen=True)
class Shown:
    """One place of the book that shows an excerpt: the other end of an API entry's "在书中" link."""

    page: str  # docs-relative source path of the page
    line: int
    anchor: str  # the id placed right before the excerpt
    title: str  # the page's title (its first "# " heading)
    section: str  # the heading the excerpt stands under ("" if none but the title)
    excerpt: Excerpt  # what it shows

    @property
    def api(self) -> str:
        """The API entry it links to."""
        return self.excerpt.api

    @property
    def label(self) -> str:
        return f"{self.title} › {self.section}" if self.section and self.section != self.title else self.title


class ExcerptError(Exception):
    pass


def _documented(node: ast.AST) -> bool:
    return (not PRIVATE.match(getattr(node, "name", ""))) and ast.get_docstring(node, clean=False) is not None


class Excerpts:
    """The objects of one package, as pages show them; one per build session (files are parsed once per
    version: a file is read again when its modification time or size changes)."""

    def __init__(self, project_root: Path, package_dir: Path, docs_dir: Path | None = None) -> None:
        self.root = project_root
        self.package_dir = package_dir
        self.package = package_dir.name
        self.docs_dir = docs_dir
        self._parsed: Memo[tuple[str, ast.Module]] = Memo("package sources")  # file → (text, tree), by its version
        self._page_count: dict[str, int] = {}  # (page, identifier) occurrences while a page renders
        self._current_page = ""
        self.shown_signatures: dict[str, Any] = {}  # page -> what it showed in the last build (serve --dirty)
        self.documented: dict[str, str] | None = None  # this build's (start_build)
        self.everywhere: list[Shown] = []  # this build's: every excerpt of the book

    def start_build(self) -> None:
        """Read, once per build, which modules the API pages document and where the book shows excerpts."""
        self.documented = self.documented_modules()
        self.everywhere = self.shown()

    # -- finding ------------------------------------------------------------------------------------

    def _file(self, module: str) -> Path:
        base = self.package_dir.joinpath(*module.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        known = sorted(p.relative_to(self.package_dir).with_suffix("").as_posix().replace("/", ".")
                       for p in self.package_dir.rglob("*.py") if "__pycache__" not in p.parts)
        close = difflib.get_close_matches(module, known, n=3)
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ExcerptError(f"unknown module {module!r}: no {self._rel(base)}.py in the package{hint}")

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix() if path.is_relative_to(self.root) else path.as_posix()

    def _tree(self, path: Path) -> tuple[str, ast.Module]:
        def parse() -> tuple[str, ast.Module]:
            text = path.read_text(encoding="utf-8")
            try:
                return text, ast.parse(text, filename=str(path))
            except SyntaxError as exc:  # not remembered: the next question parses again
                raise ExcerptError(f"{self._rel(path)}:{exc.lineno}: cannot be parsed: {exc.msg}") from None

        return self._parsed.get(path, file_version(path), parse)

    def find(self, module: str, qualname: str) -> Excerpt:
        """The excerpt of ``module:qualname``; raises :class:`ExcerptError` naming what is missing."""
        path = self._file(module)
        text, tree = self._tree(path)
        module_id = f"{self.package}.{module}"
        body: list[ast.stmt] = tree.body
        node: ast.AST | None = None
        trail, api, shown_so_far = module_id, module_id, True
        for part in qualname.split("."):
            found = [n for n in body if isinstance(n, DEFINITIONS) and n.name == part]
            if not found:
                names = [n.name for n in body if isinstance(n, DEFINITIONS)]
                close = difflib.get_close_matches(part, names, n=3)
                hint = f"; did you mean {', '.join(close)}?" if close else f"; it defines: {', '.join(names) or 'nothing'}"
                raise ExcerptError(f"{trail} ({self._rel(path)}) has no function or class {part!r}{hint}")
            node = found[-1]  # as Python does: a later definition of the same name wins
            trail = f"{trail}.{part}"
            shown_so_far = shown_so_far and _documented(node)  # mkdocstrings shows it, and all above it
            if shown_so_far:
                api = trail
            body = getattr(node, "body", [])
        assert node is not None
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        last = node.end_lineno or node.lineno
        lines = text.split("\n")[first - 1:last]
        return Excerpt(f"{module_id}.{qualname}", qualname, self._rel(path), first, last, "\n".join(lines), api)

    def documented_modules(self) -> dict[str, str]:
        """Module identifier → the API page (docs-relative) whose ``::: module`` directive documents it."""
        found: dict[str, str] = {}
        if self.docs_dir is None:
            return found
        for md in sorted(self.docs_dir.rglob("*.md")):
            for m in API_RE.finditer(md.read_text(encoding="utf-8")):
                found.setdefault(m["ident"], md.relative_to(self.docs_dir).as_posix())
        return found

    def excerpt(self, ref: pages.Ref, documented: dict[str, str] | None = None) -> Excerpt:
        """The excerpt a reference shows; a missing object or API page raises :class:`pages.PageRefError`."""
        try:
            ex = self.find(ref.snippet, ref.key)
        except ExcerptError as exc:
            raise pages.PageRefError(ref.where, f"{{{{ code {ref.snippet}:{ref.key} }}}}: {exc}") from None
        if documented is None:
            if self.documented is None:
                self.documented = self.documented_modules()
            documented = self.documented
        module_id = f"{self.package}.{ref.snippet}"
        if self.docs_dir is not None and module_id not in documented:
            raise pages.PageRefError(
                ref.where, f"{{{{ code {ref.snippet}:{ref.key} }}}}: no API page documents {module_id} "
                f"(add a page under docs/api/ with the line `::: {module_id}`, and put it in the nav)")
        return ex

    # -- in a page ----------------------------------------------------------------------------------

    def begin_page(self, page: str) -> None:
        """Anchors are numbered per page: call before the page's references are rendered."""
        self._current_page = page
        self._page_count = {}

    def _anchor(self, identifier: str, counts: dict[str, int]) -> str:
        counts[identifier] = counts.get(identifier, 0) + 1
        n = counts[identifier]
        base = "code-" + identifier.removeprefix(self.package + ".")
        return base if n == 1 else f"{base}-{n}"

    def render(self, ref: pages.Ref) -> str:
        """The Markdown of an excerpt: an anchor (the API page's back-link lands here), the code block
        titled with its file and numbered as the file is, and a line linking to its API entry."""
        if ref.page != self._current_page:
            self.begin_page(ref.page)
        ex = self.excerpt(ref)
        anchor = self._anchor(ex.identifier, self._page_count)
        fence = "`" * max(3, _longest_backticks(ex.text) + 1)
        return (f'<a id="{html.escape(anchor, quote=True)}" class="book-code-anchor"></a>\n\n'
                f'{fence}python title="{ex.rel}" linenums="{ex.first}"\n{ex.text}\n{fence}\n\n'
                f'<small class="book-code-source">`{ex.qualname}` 原样取自 `{ex.rel}` 第 {ex.first}–{ex.last} 行 · '
                f"代码参考：[`{ex.qualname}`][{ex.api}]</small>\n")

    def notebook_cell(self, ref: pages.Ref) -> tuple[str, str]:
        """The excerpt as a cell of the page's notebook: ``("code", …)`` for a whole class or function of a
        module — the same code under ``%%define <module>`` (:func:`.in_jupyter.define`), which the reader edits
        and reruns, and what comes after uses their version; ``("markdown", …)`` for a part of one (a method,
        a nested function), which cannot run on its own."""
        try:
            ex = self.find(ref.snippet, ref.key)
        except ExcerptError as exc:  # the page itself reports it (serve shows the page with the error)
            return "markdown", f"⚠ {ref.where}: {exc}"
        where = f"原样取自 `{ex.rel}` 第 {ex.first}–{ex.last} 行"
        if "." not in ex.qualname:
            return "code", (f"%%define {self.package}.{ref.snippet}\n"
                            f"# {ex.qualname}，{where.replace('`', '')}。改一改再运行这一格，"
                            "后面的代码用的就是改过的这一个。\n"
                            f"{ex.text}")
        fence = "`" * max(3, _longest_backticks(ex.text) + 1)
        return "markdown", f"{fence}python\n{ex.text}\n{fence}\n\n`{ex.qualname}`，{where}。"

    # -- the book as a whole -------------------------------------------------------------------------

    def shown(self) -> list[Shown]:
        """Every excerpt of the book, page by page, with the anchor its page gives it. Pages whose
        references cannot be parsed, and excerpts that cannot be found, are left out (their pages report
        the error when they render)."""
        out: list[Shown] = []
        if self.docs_dir is None:
            return out
        for md in sorted(self.docs_dir.rglob("*.md")):
            page = md.relative_to(self.docs_dir).as_posix()
            text = md.read_text(encoding="utf-8")
            if "{{ code" not in text and "{{\tcode" not in text:
                continue
            out.extend(self._shown_in(page, text))
        return out

    def _shown_in(self, page: str, text: str) -> list[Shown]:
        try:
            refs = [r for r in pages.find_refs(text, page) if r.kind == "code"]
        except pages.PageRefError:
            return []
        headings: list[tuple[int, int, str]] = []  # (line, level, text)
        for i, line, in_code in pages.prose_lines(text):
            m = HEADING_RE.match(line) if not in_code else None
            if m:
                headings.append((i + 1, len(m["level"]), m["text"].strip().replace("`", "")))
        title = next((t for _, level, t in headings if level == 1), page)
        counts: dict[str, int] = {}
        out = []
        for ref in refs:
            try:
                ex = self.find(ref.snippet, ref.key)
            except ExcerptError:
                continue
            above = [t for line, level, t in headings if line < ref.line and level > 1]
            out.append(Shown(page, ref.line, self._anchor(ex.identifier, counts), title,
                             above[-1] if above else "", ex))
        return out

    def back_links(self, html_text: str, page: str, page_url: str, urls: dict[str, str]) -> str:
        """An API page's HTML with "在书中：…" under the heading of every entry the book shows an excerpt of
        (this build's :meth:`start_build`). ``urls`` maps a page's source path to its URL in the site."""
        from mkdocs.utils import get_relative_url

        modules = [m for m, p in (self.documented or {}).items() if p == page]
        if not modules:
            return html_text
        by_entry: dict[str, list[Shown]] = {}
        for s in self.everywhere:
            if not any(s.api == m or s.api.startswith(m + ".") for m in modules):
                continue
            by_entry.setdefault(s.api, []).append(s)
        elements = html_edit.parse(html_text)
        headings: dict[str | None, html_edit.Element] = {}
        anchors: dict[str | None, html_edit.Element] = {}
        for e in elements:  # the first element with an id, as the browser's #fragment finds it
            if e.get("id") and (e.tag in HEADINGS or e.tag == "a"):
                (headings if e.tag in HEADINGS else anchors).setdefault(e.get("id"), e)
        changes = []
        for entry, places in by_entry.items():
            at = headings.get(entry) or anchors.get(entry)  # mkdocstrings' heading, or its bare anchor
            if at is None:
                continue
            links = []
            for s in places:
                if s.page not in urls:
                    continue
                href = get_relative_url(urls[s.page], page_url) + "#" + s.anchor
                links.append(f'<a href="{html.escape(href, quote=True)}">{html.escape(s.label)}</a>')
            if not links:
                continue
            changes.append((at.end, at.end, f'\n<p class="book-shown-in">在书中：{"；".join(links)}</p>\n'))
        return html_edit.edit(html_text, changes)

    def changed_pages(self) -> set[str]:
        """Under ``serve --dirty``: the pages (docs-relative) whose excerpts or back-links differ from what
        they showed at the last call — the excerpts' text changed, or an excerpt was added or removed."""
        documented = self.documented_modules()
        signatures: dict[str, Any] = {}
        shown = self.shown()
        for s in shown:  # a page with excerpts: the text of each
            signatures.setdefault(s.page, []).append((s.line, s.anchor, s.excerpt))
        for module_id, api_page in documented.items():  # an API page: its back-links
            sig = signatures.setdefault(api_page, [])
            sig.extend((s.api, s.page, s.anchor, s.label) for s in shown
                       if s.api == module_id or s.api.startswith(module_id + "."))
        frozen = {page: tuple(sig) for page, sig in signatures.items()}
        changed = {p for p in set(frozen) | set(self.shown_signatures)
                   if frozen.get(p) != self.shown_signatures.get(p)}
        self.shown_signatures = frozen
        return changed


def _longest_backticks(text: str) -> int:
    runs = re.findall(r"`+", text)
    return max((len(r) for r in runs), default=0)
