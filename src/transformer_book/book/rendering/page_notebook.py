"""A runnable notebook for every page that shows results, written beside the page in the site.

The notebook is the page: its prose as Markdown cells, with the generated numbers filled in; before the
paragraph (or table, figure, block) that first states a snippet's results, a code cell with the snippet's code
exactly as the build runs it (then ``results[...] = run(compute)``): each result is computed before the text
states it; where the page places a table, figure or block, a cell that shows it; after a paragraph with inline
numbers or cited claims, a cell that shows those numbers and claims (a claim as ✓ or ✗ and its statement); where the page shows an excerpt of the package
(``{{ code module:name }}``), a cell with that code: for a whole class or function a code cell under
``%%define <module>`` that the reader changes and reruns, for a part of one (a method) a Markdown cell. A
snippet's helper modules (``_*.py``) come as ``%%module`` cells, so the notebook runs outside the book's project
too. Long trainings (and the models that other snippets ``REQUIRES``) are taken from the book's result cache by
:func:`.in_jupyter.computed` and :func:`.in_jupyter.require` — computed in the kernel outside a checkout, or when
the reader asks to retrain. The cells run with :mod:`.in_jupyter`.

The notebook is written as nbformat 4.5 JSON directly (plain dicts, laid out as ``nbformat.write`` lays out a
file), not through ``nbformat``: its cell constructors validate every cell against the JSON schema, which
compiles a validator on first use — a tenth of a second on every warm build for notebooks that are the same
each time.
The tests validate what is written with ``nbformat``. Cell ids are derived from the cell's place and text, so
that two builds of one page write the same bytes (``nbformat`` draws random ids).
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from transformer_book.book.rendering import pages
from transformer_book.book.results import MEASURED, Result, result_kind

LONG_SECONDS = 20.0  # a snippet that took longer in the build is read from the cache, not rerun

ADMONITION = re.compile(r'^(?P<indent>[ \t]*)(?:!!!|\?\?\?\+?)\s+(?P<type>[\w-]+)(?:\s+"(?P<title>[^"]*)")?\s*$')
TITLES = {"note": "注", "tip": "提示", "warning": "注意", "abstract": "摘要", "success": "答案", "question": "问题",
          "failure": "失败", "info": "说明", "example": "例子"}
AUTOREF = re.compile(r"\[([^\]]+)\]\[[\w.]+\]")
PAGE_LINK = re.compile(r"(?<!!)\[([^\]]+)\]\((?![a-z]+://)[^)]*\)")


@dataclass
class SnippetView:
    """What the notebook needs of one snippet: where its code is, what it requires, how long it takes."""

    sid: str
    path: Path
    requires: list[str] = field(default_factory=list)
    seconds: float = 0.0
    results: dict[str, Result] | None = None  # None: not computed (numbers show as ⟨snippet:key⟩)


@dataclass(frozen=True)
class _Line:
    """A line of the page as the notebook writes it: its text with the directives in a sentence replaced by their
    words, the results those state (``stated``, shown in a cell after the paragraph), and what a directive on a
    line of its own places there (``place``: a result's :class:`.pages.Ref`, or an excerpt's ``(cell type, text)``);
    such a line's text is only its indentation."""

    text: str
    place: pages.Ref | tuple[str, str] | None = None
    stated: tuple[pages.Ref, ...] = ()

    @property
    def blank(self) -> bool:
        return self.place is None and not self.text.strip()

    @property
    def indent(self) -> int:
        return len(self.text) - len(self.text.lstrip())


def _blockquote(lines: list[_Line]) -> list[_Line]:
    """Admonitions (``!!! tip "标题"`` + indented body) as blockquotes with a bold title, which Jupyter renders."""
    out: list[_Line] = []
    i = 0
    while i < len(lines):
        m = ADMONITION.match(lines[i].text) if lines[i].place is None else None
        if not m:
            out.append(lines[i])
            i += 1
            continue
        indent = len(m["indent"].expandtabs(4))
        title = m["title"] if m["title"] is not None else TITLES.get(m["type"], m["type"])
        body: list[_Line] = []
        i += 1
        while i < len(lines) and (lines[i].blank or lines[i].indent >= indent + 4):
            body.append(_Line("") if lines[i].blank else replace(lines[i], text=lines[i].text[indent + 4:]))
            i += 1
        while body and body[-1].blank:
            body.pop()
        inner = _blockquote(body)
        quoted = [_Line(m["indent"] + "> " + f"**{title}**" if title else m["indent"] + ">"), _Line(m["indent"] + ">")]
        quoted += [_Line(m["indent"] + ">") if b.blank else replace(b, text=m["indent"] + "> " + b.text) for b in inner]
        out.extend(quoted)
        out.append(_Line(""))
    return out


def _plain_links(text: str) -> str:
    """Links to other pages of the site mean nothing in a downloaded notebook: keep their text."""
    return PAGE_LINK.sub(r"\1", AUTOREF.sub(r"\1", text))


def _value_text(ref: pages.Ref, view: SnippetView | None) -> str:
    result = (view.results or {}).get(ref.key) if view is not None else None
    if result is None or result.type_name != ref.kind:  # a verdict has no words in the sentence, shown or not
        return "" if getattr(result_kind(ref.kind), "decided", False) else f"⟨{ref.snippet}:{ref.key}⟩"
    text = result.text(ref.fmt)
    return text + ("（实测）" if text and MEASURED in result.kinds else "")


def _name(sid: str, part: str) -> str:
    return sid.split("/", 1)[1] if sid.startswith(part + "/") else sid


def _helper_imports(path: Path) -> list[str]:
    """The helper modules (``_name.py`` beside the snippet) that the snippet's code imports, in order."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return []
    names: list[str] = []
    for node in ast.walk(tree):
        found = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
        names += [n for n in found if n.startswith("_") and "." not in n and (path.parent / f"{n}.py").is_file()]
    return list(dict.fromkeys(names))


def _cell(cell_type: str, source: str, index: int) -> dict[str, Any]:
    """One nbformat 4.5 cell; its id (1–64 of ``[A-Za-z0-9-_]``) from its place and text."""
    digest = hashlib.sha256(f"{index}\x00{source}".encode()).hexdigest()[:16]
    cell: dict[str, Any] = {"cell_type": cell_type, "id": f"c{index}-{digest}", "metadata": {}, "source": source}
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


class _Writer:
    def __init__(self, part: str, snippets: dict[str, SnippetView], shown_source: Any) -> None:
        self.part = part
        self.snippets = snippets
        self.shown_source = shown_source
        self.cells: list[Any] = []
        self.defined: set[str] = set()
        self.required: set[str] = set()
        self.modules: set[str] = set()

    def md(self, text: str) -> None:
        text = text.strip("\n")
        if text.strip():
            self.cells.append(_cell("markdown", text, len(self.cells)))

    def code(self, text: str) -> None:
        self.cells.append(_cell("code", text.strip("\n"), len(self.cells)))

    def key(self, sid: str) -> str:
        return json.dumps(_name(sid, self.part), ensure_ascii=False)  # a Python string literal, whatever the name holds

    def helpers(self, sid: str) -> None:
        """A ``%%module`` cell for each helper module of the snippet's folder (``_*.py``) that its code imports
        (once per notebook): with them the notebook needs nothing of the book's project to run."""
        view = self.snippets[sid]
        for name in _helper_imports(view.path):
            if name not in self.modules:
                self.modules.add(name)
                rel = f"snippets/{self.part}/{name}.py"
                self.code(f"%%module {name}\n# {rel}：下面片段导入的辅助模块，原样照抄。\n"
                          + (view.path.parent / f"{name}.py").read_text(encoding="utf-8"))

    def define(self, sid: str) -> None:
        """The cells that compute a snippet's results (once per notebook)."""
        if sid in self.defined:
            return
        self.defined.add(sid)
        view = self.snippets[sid]
        rel = f"snippets/{sid}.py"
        source = self.shown_source(view.path)
        self.helpers(sid)
        need = [r for r in view.requires if r not in self.required]
        if need:
            self.required.update(need)
            seconds = sum(self.snippets[r].seconds for r in need if r in self.snippets)
            names = "、".join(f"`{r}`" for r in need)
            self.md(f"下面的 `{rel}` 要用 {names} 的结果（训练好的模型）。下一格用本 notebook 里已经算出的；"
                    f"还没算的从本书的结果缓存里取（本机还没有构建过本书时会先训练，书的构建里约用了 {seconds:.0f} 秒）。")
            self.code(f"require({need!r})".replace("'", '"'))
        if view.seconds > LONG_SECONDS:  # from the cache by default: the reader decides to retrain
            self.code(f"# {rel}：书在构建时运行的就是这段代码，它在构建里用了约 {view.seconds:.0f} 秒。\n"
                      "# 最后一行默认从本书的结果缓存里取出构建时的结果（不在本书的项目目录里时就在这里算）；\n"
                      "# 把 retrain=False 改成 retrain=True，就在这里重新算，用的是上面各格里的定义。\n\n"
                      f'{source}\n\nresults[{self.key(sid)}] = computed("{sid}", compute, retrain=False)')
            return
        self.code(f"# {rel}：书在构建时运行的就是这段代码。改一改再运行，看结果怎么变。\n\n"
                  f'{source}\n\nresults[{self.key(sid)}] = run(compute, "{sid}")')

    def show(self, sid: str, keys: list[str], fmts: dict[str, str]) -> None:
        self.define(sid)
        args = ", ".join(f'"{k}"' for k in keys)
        extra = f', fmt={fmts!r}'.replace("'", '"') if fmts else ""
        self.code(f'show(results[{self.key(sid)}], {args}, snippet="{sid}"{extra})')


def _lines(markdown: str, page: str, line_offset: int, snippets: dict[str, SnippetView],
           excerpt: Any) -> tuple[list[_Line], int]:
    """The page's lines with its directives (:func:`.pages.find_refs`) resolved for the notebook, and how many
    results it shows. A result whose snippet the notebook does not have stays as ``⟨snippet:key⟩``; a directive
    that is not a result places the cell it says (:attr:`.pages.Directive.notebook`: ``{{ source … }}`` nothing,
    its code comes as a cell before the results; ``{{ code … }}`` the excerpt, when ``excerpt`` is given)."""
    by_line: dict[int, list[pages.Ref]] = {}
    for ref in pages.find_refs(markdown, page, line_offset):
        by_line.setdefault(ref.index, []).append(ref)
    out: list[_Line] = []
    shown = 0
    for i, text in enumerate(markdown.split("\n")):
        refs = by_line.get(i, [])
        own = next((r for r in refs if r.own_line), None)
        if own is not None:  # a directive on a line of its own is the whole line
            if (directive := pages.DIRECTIVES.get(own.kind)) is not None:
                cell = directive.notebook(own, excerpt)
                out.append(_Line(own.indent, cell) if cell is not None else _Line(""))
            elif own.snippet not in snippets:
                out.append(_Line(f"{own.indent}⟨{own.snippet}:{own.key}⟩"))
            else:
                shown += 1
                out.append(_Line(own.indent, own))
            continue
        stated: list[pages.Ref] = []
        for ref in reversed(refs):  # right to left: earlier spans keep their columns
            if ref.snippet not in snippets:
                words = "" if ref.kind == "claim" else f"⟨{ref.snippet}:{ref.key}⟩"
            else:
                words = _value_text(ref, snippets.get(ref.snippet))
                stated.insert(0, ref)
            text = text[:ref.start] + words + text[ref.end:]
        shown += len(stated)
        out.append(_Line(text, stated=tuple(stated)))
    return out, shown


def build(page: str, title: str, markdown: str, line_offset: int, snippets: dict[str, SnippetView],
          shown_source: Any, excerpt: Any = None) -> dict[str, Any] | None:
    """The notebook of a page (nbformat 4.5 as a dict), or None if the page shows no results.
    ``excerpt(ref)`` gives the cell of a ``{{ code … }}`` excerpt as ``(cell type, text)`` (none: such a line is
    left out)."""
    part = page.split("/", 1)[0]
    lines, shown = _lines(markdown, page, line_offset, snippets, excerpt)
    if not shown:
        return None
    w = _Writer(part, snippets, shown_source)
    first = next((i for i, line in enumerate(lines) if not line.blank), None)
    if first is not None and lines[first].text.startswith("# "):  # the page's title comes first
        w.md(lines[first].text)
        lines = lines[first + 1:]
    w.md(f"> 这是「{title}」一页的可运行版本，由本书的构建生成：正文与网页相同；每个表、图和数字之前的代码格，"
         f"就是书在构建时运行的片段（`snippets/{part}/…`），原样照抄；正文摘出的包里的类和函数，也是可以改了再运行的代码格。"
         "在本书的项目目录里（按 README 装好环境）打开它，训练很久的片段直接取本书的结果缓存；在别处，只要装了 "
         "`transformer_book` 包，它也能从上到下运行，那时每个片段都在这里现算。")
    w.code("# 先运行这一格：与书的构建相同的随机种子和线程数；%%define、%%module 两种格子也从这里开始可用。\n"
           "from transformer_book.book.cli.in_jupyter import built, computed, require, run, setup, show\n\n"
           f'setup("{part}")\nresults = {{}}')

    buffer: list[_Line] = []

    def flush() -> None:
        stated = [ref for line in buffer for ref in line.stated]
        chunk = "\n".join(line.text for line in buffer)
        buffer.clear()
        by_snippet: dict[str, list[pages.Ref]] = {}
        for ref in stated:
            by_snippet.setdefault(ref.snippet, []).append(ref)
        for sid in by_snippet:  # computed before the text that states its numbers
            w.define(sid)
        w.md(_plain_links(chunk))
        for sid, rs in by_snippet.items():
            keys = list(dict.fromkeys(r.key for r in rs))
            fmts = {r.key: r.fmt for r in rs if r.fmt is not None}
            w.show(sid, keys, fmts)

    for line in _blockquote(lines):
        if isinstance(line.place, tuple):  # an excerpt of the package: a cell of its own
            flush()
            kind, cell = line.place
            (w.code if kind == "code" else w.md)(cell)
        elif line.place is not None:
            flush()
            ref = line.place
            w.define(ref.snippet)  # its cells first, so that the caption stands right above what it names
            if ref.caption:
                w.md(f"**{_plain_links(ref.caption)}**")
            w.show(ref.snippet, [ref.key], {})
        else:
            if re.match(r"^#{1,6} ", line.text) and buffer:
                flush()
            buffer.append(line)
    flush()
    return {"cells": w.cells, "nbformat": 4, "nbformat_minor": 5,
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
                         "language_info": {"name": "python"},
                         "transformer_book": {"page": page, "snippets": sorted(w.defined)}}}


# -- in the site ----------------------------------------------------------------------------------------

DOWNLOAD_ICON = ('<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">'
                 '<path d="M5 20h14v-2H5m14-9h-4V3H9v6H5l7 7z"/></svg>')  # Material Design's "download"


def site_location(page_url: str, src_uri: str) -> tuple[str, str]:
    """(folder in the site, file name) of a page's notebook: beside the page's ``index.html``."""
    folder = page_url if page_url.endswith("/") or not page_url else page_url.rsplit("/", 1)[0] + "/"
    return folder, Path(src_uri).stem + ".ipynb"


def download_button(file_name: str) -> str:
    """A page action like Material's edit button, floated at the top right of the page."""
    return (f'<a href="{file_name}" download class="md-content__button md-icon book-notebook-download" '
            f'title="下载本页的 Jupyter notebook（可运行）">{DOWNLOAD_ICON}</a>')


def notebook_json(notebook: dict[str, Any]) -> str:
    """The file's text, laid out as ``nbformat.write`` lays out a file (multi-line sources as lists of lines)."""
    def lines(cell: dict[str, Any]) -> dict[str, Any]:
        return {**cell, "source": cell["source"].splitlines(keepends=True)}

    return json.dumps({**notebook, "cells": [lines(c) for c in notebook["cells"]]},
                      sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def write(site_dir: Path, folder: str, file_name: str, notebook: dict[str, Any]) -> Path:
    from transformer_book.book.files import atomic_write_text

    target = site_dir / folder / file_name
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, notebook_json(notebook))
    return target
