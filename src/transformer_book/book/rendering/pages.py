"""The page syntax: finding references to snippet results in Markdown, and rendering them.

Five forms, all between ``{{ `` and `` }}`` (the space after ``{{`` is part of the syntax, so LaTeX's
``{{`` is never mistaken for a reference); fenced code blocks and inline code spans are left alone:

- a block on a line of its own places a table, a figure, an explorable (controls over recorded states) or a
  ready-made block, with an optional caption::

      {{ table soft_lookup:lookup "表 2-1　三个查询的软查找" }}
      {{ figure scaling_study:curves "图 3-1　缩放前后" }}
      {{ explorable s03_explore:scaling "图 3-2　改变 d_k" }}
      {{ block some_snippet:svg }}

- a block that shows a snippet's source as a collapsible listing::

      {{ source soft_lookup }}

- a block that shows one function, class or method of the package exactly as its file has it, with a link to
  its API entry (module path relative to the package; :mod:`.code_excerpt` finds and renders it)::

      {{ code transformer:MultiHeadAttention.forward }}

- an inline value inside a sentence, with an optional format spec::

      第一个查询的输出是 {{ soft_lookup:first_output | .2f }}。

- a claim cited right after the sentence that makes it (rendered as a small check mark; the build fails,
  naming this page:line, when the claim no longer holds)::

      上下文越长，KV 缓存省下的越多。{{ claim c11_kv_cache:longer_saves_more }}

A snippet id without a ``/`` is looked up in the folder of ``snippets/`` that has the page's folder name
(``docs/lecture07/x.md`` → ``snippets/lecture07/``); ``lecture07/soft_lookup`` is always absolute.

The directives that place a result are the result kinds' (:func:`.results.register`: a kind placed as a block
gets a line of its own, one placed inline a reference in a sentence). The others — ``source`` and ``code`` — are
:class:`Directive` objects in :data:`DIRECTIVES`: each says how its line is written, what it names, and what it
becomes on the page and in the page's notebook, through the services the page writer offers (a snippet's code
fold, an excerpt of the package). Adding one is one :func:`register_directive` call (and, if it needs a new
service, that service in :mod:`.site.page_markdown`).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from transformer_book.book.memo import Memo
from transformer_book.book.results import result_kind, result_kinds

_ID = r"[\w][\w./-]*"
BLOCK_RE = re.compile(
    rf'^(?P<indent>[ \t]*)\{{\{{\s+(?P<kind>[a-z][a-z_]*)\s+(?P<snippet>{_ID}):(?P<key>\w+)'
    rf'(?:\s+"(?P<caption>[^"]*)")?\s*\}}\}}\s*$'
)
SOURCE_RE = re.compile(rf"^(?P<indent>[ \t]*)\{{\{{\s+source\s+(?P<snippet>{_ID})\s*\}}\}}\s*$")
CODE_RE = re.compile(r"^(?P<indent>[ \t]*)\{\{\s+code\s+(?P<module>[\w.]+):(?P<name>[\w.]+)\s*\}\}\s*$")
INLINE_RE = re.compile(
    rf"\{{\{{\s+(?:(?P<claim>claim)\s+)?(?P<snippet>{_ID}):(?P<key>\w+)\s*(?:\|\s*(?P<fmt>[^\s}}]+)\s*)?\}}\}}"
)
OPENER_RE = re.compile(r"\{\{\s")
FENCE_RE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})")
CODE_SPAN_RE = re.compile(r"(`+)(?:.+?)\1")


class PageRefError(Exception):
    """A reference that cannot be resolved; ``where`` is ``page:line``."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where
        self.message = message


@dataclass(frozen=True)
class Ref:
    """One directive of a page, as parsed once (:func:`find_refs`): what it names and where it stands."""

    page: str  # docs-relative path of the page
    line: int  # 1-based line in the page's source file
    kind: str  # "table" | "figure" | "explorable" | "block" | "source" | "value" | "claim" | "code"
    snippet: str  # resolved snippet id (for "code": the module path, relative to the package)
    key: str = ""  # (for "code": the function, class or Class.method)
    fmt: str | None = None
    caption: str | None = None
    index: int = -1  # 0-based index of its line in the Markdown it was parsed from
    start: int = 0  # its text is line[start:end]; a directive on a line of its own spans the whole line
    end: int = 0
    indent: str = ""  # a line of its own: the line's indentation, which what it renders to keeps

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def own_line(self) -> bool:
        """A directive on a line of its own (a table, figure, source, code …), not one in a sentence: what its
        result kind says (:attr:`.results.Result.placement`); ``source`` and ``code`` are not results."""
        kind = result_kind(self.kind)
        return kind is None or kind.placement != "inline"


@dataclass(frozen=True)
class Directive:
    """A directive on a line of its own that places something other than a snippet's result.

    ``line`` matches its whole line (with the line's indentation as ``indent``); ``names`` turns the match and
    the page into the :class:`Ref`'s (snippet, key). ``site(ref, writer)`` is the Markdown it becomes on the page,
    from the page writer's services (:class:`.site.page_markdown.PageWriter`: ``source_fold``, ``excerpt``);
    ``notebook(ref, excerpt)`` is the cell it places in the page's notebook, ``(cell type, text)``, or None for
    nothing (``excerpt`` is the notebook's excerpt maker, None when there is none). ``names_snippet``: whether
    what it names is a snippet (then :func:`usage` lists where it is shown)."""

    name: str
    line: re.Pattern[str]
    names: Callable[[re.Match[str], str], tuple[str, str]]
    site: Callable[[Ref, Any], str]
    notebook: Callable[[Ref, Any], tuple[str, str] | None]
    names_snippet: bool = True


DIRECTIVES: dict[str, Directive] = {}


def register_directive(directive: Directive) -> None:
    """Make ``directive`` part of the page syntax (its name must not be a result kind's)."""
    if result_kind(directive.name) is not None:
        raise ValueError(f"{directive.name!r} is a result kind's directive already")
    DIRECTIVES[directive.name] = directive
    _PARSED.forget()  # pages parsed before it was known are parsed again


def resolve_id(snippet: str, page: str) -> str:
    if "/" in snippet:
        return snippet
    folder = posixpath.dirname(page)
    return f"{folder}/{snippet}" if folder else snippet


def _prose_lines(markdown: str) -> Iterator[tuple[int, str, bool]]:
    """Yield (index, line, in_code) for each line, tracking fenced code blocks."""
    fence: str | None = None
    for i, line in enumerate(markdown.split("\n")):
        m = FENCE_RE.match(line)
        if fence is None and m:
            fence = m.group("fence")
            yield i, line, True
        elif fence is not None:
            if m and m.group("fence")[0] == fence[0] and len(m.group("fence")) >= len(fence) and line.strip() == m.group("fence"):
                fence = None
            yield i, line, True
        else:
            yield i, line, False


def prose_lines(markdown: str) -> Iterator[tuple[int, str, bool]]:
    """(index, line, in_code) for each line of a page; lines of fenced code blocks have ``in_code`` true."""
    return _prose_lines(markdown)


def _split_code_spans(line: str) -> list[tuple[str, bool]]:
    parts: list[tuple[str, bool]] = []
    pos = 0
    for m in CODE_SPAN_RE.finditer(line):
        parts.append((line[pos : m.start()], False))
        parts.append((m.group(0), True))
        pos = m.end()
    parts.append((line[pos:], False))
    return parts


def _inline_ref(m: re.Match[str], page: str, lineno: int, index: int, offset: int) -> Ref:
    kind = "claim" if m["claim"] else "value"
    return Ref(page, lineno, kind, resolve_id(m["snippet"], page), m["key"], m["fmt"] if kind == "value" else None,
               index=index, start=offset + m.start(), end=offset + m.end())


def find_refs(markdown: str, page: str, line_offset: int = 0) -> list[Ref]:
    """All directives of a page, in order. A malformed ``{{ …`` raises with page:line.

    This is the one parser of the page syntax: rendering, the claims listing and the page notebooks all work
    on its :class:`Ref` objects. A page's text is parsed once: the build asks for the same page's references
    several times (where each result is shown, the claim index, the page itself), and gets the first answer
    again while the text is the same."""
    return list(_PARSED.get((page, line_offset), markdown, lambda: _parse(markdown, page, line_offset)))


_PARSED: Memo[tuple[Ref, ...]] = Memo("page references")  # (page, front-matter lines) → refs, by the page's text


def block_kinds() -> list[str]:
    """The result kinds a directive on a line of its own can place (every registered kind placed as a block)."""
    return sorted(name for name, cls in result_kinds().items() if cls.placement == "block")


def _own_line(line: str, page: str, lineno: int, index: int) -> Ref | None:
    whole = {"index": index, "start": 0, "end": len(line)}
    for directive in DIRECTIVES.values():
        if m := directive.line.match(line):
            named, key = directive.names(m, page)
            return Ref(page, lineno, directive.name, named, key, indent=m["indent"], **whole)
    m = BLOCK_RE.match(line)
    kind = result_kind(m["kind"]) if m else None
    if m and (kind is None or kind.placement != "inline"):  # a claim alone on a line is still inline
        if kind is None or kind.placement != "block":
            raise PageRefError(f"{page}:{lineno}", f"unknown directive {m['kind']!r}: a line of its own places one of "
                                                   f"{', '.join(block_kinds())}, or is one of {', '.join(DIRECTIVES)}")
        return Ref(page, lineno, m["kind"], resolve_id(m["snippet"], page), m["key"], None, m["caption"],
                   indent=m["indent"], **whole)
    return None


def _parse(markdown: str, page: str, line_offset: int) -> tuple[Ref, ...]:
    refs: list[Ref] = []
    for i, line, in_code in _prose_lines(markdown):
        if in_code:
            continue
        lineno = i + 1 + line_offset
        where = f"{page}:{lineno}"
        if ref := _own_line(line, page, lineno, i):
            refs.append(ref)
            continue
        offset = 0
        for text, is_code in _split_code_spans(line):
            if not is_code:
                matched = 0
                for m in INLINE_RE.finditer(text):
                    matched += 1
                    refs.append(_inline_ref(m, page, lineno, i, offset))
                if len(OPENER_RE.findall(text)) > matched:
                    raise PageRefError(
                        where,
                        "malformed reference: expected {{ snippet:key }}, {{ snippet:key | fmt }} or "
                        '{{ claim snippet:key }} inline, or {{ table|figure|block snippet:key "caption" }} / '
                        "{{ source snippet }} / {{ code module:name }} on a line of its own",
                    )
            offset += len(text)
    return tuple(refs)


Renderer = Callable[[Ref], str]


def render(markdown: str, page: str, line_offset: int, render_ref: Renderer) -> str:
    """Replace every directive by what ``render_ref`` returns for it (a line of its own keeps its indentation
    on every line of its output). The directives are :func:`find_refs`'s: the page is not parsed again."""
    lines = markdown.split("\n")
    refs = find_refs(markdown, page, line_offset)
    outs = [render_ref(ref) for ref in refs]  # in page order: a renderer may number or collect what it sees
    for ref, out in reversed(list(zip(refs, outs))):  # right to left within a line: earlier spans keep their columns
        if ref.own_line:
            out = "\n".join((ref.indent + b) if b else b for b in out.split("\n"))
        line = lines[ref.index]
        lines[ref.index] = line[:ref.start] + out + line[ref.end:]
    return "\n".join(lines)


def usage(docs_dir: Path) -> dict[tuple[str, str], list[str]]:
    """Where each result is shown: ``(snippet, key) -> ["page.md:12", …]`` over every page of the book.
    A page with a malformed reference is skipped here; its error is reported when it is rendered."""
    found: dict[tuple[str, str], list[str]] = {}
    for md in sorted(docs_dir.rglob("*.md")):
        page = md.relative_to(docs_dir).as_posix()
        try:
            refs = find_refs(md.read_text(encoding="utf-8"), page)
        except PageRefError:
            continue
        for ref in refs:
            directive = DIRECTIVES.get(ref.kind)
            if directive is None or directive.names_snippet:  # an excerpt of the package names no snippet
                found.setdefault((ref.snippet, ref.key), []).append(ref.where)
    return found


def front_matter_lines(abs_src_path: str | None, markdown: str) -> int:
    """How many lines MkDocs removed from the top of the page's file (YAML front matter): added to every
    line number a reference reports, so that ``page:line`` is the line in the file."""
    if not abs_src_path:
        return 0
    try:
        raw = Path(abs_src_path).read_text(encoding="utf-8-sig")
    except OSError:
        return 0
    probe = markdown[:200]
    idx = raw.find(probe) if probe else -1
    return raw.count("\n", 0, idx) if idx > 0 else 0


# -- the two directives that are not results -------------------------------------------------------------------

register_directive(Directive(
    "source", SOURCE_RE, lambda m, page: (resolve_id(m["snippet"], page), ""),
    site=lambda ref, writer: writer.source_fold(ref),
    notebook=lambda ref, excerpt: None))  # the notebook has the snippet's code as a cell before its results
register_directive(Directive(
    "code", CODE_RE, lambda m, page: (m["module"], m["name"]),
    site=lambda ref, writer: writer.excerpt(ref),
    notebook=lambda ref, excerpt: excerpt(ref) if excerpt is not None else None,
    names_snippet=False))
