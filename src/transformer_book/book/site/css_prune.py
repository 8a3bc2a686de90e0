"""A style sheet cut down to what one page can use: rules for classes the page has, and the variables they read.

A notebook page carries JupyterLab's whole theme (~570 KB: 3,000 rules and 1,000 custom properties, for
every widget JupyterLab has); a page of the book uses a hundred of the rules. The browser parses all of it
before it draws the page and matches every element against it — on a phone, most of the page's first
second. :func:`prune` keeps

* every rule one of whose selectors can match the page: all the classes it names are in the page (the
  page's HTML, plus the ``md-`` classes Material's script adds); a selector whose match cannot be read
  off its text (``:is()``, ``:where()``, ``:has()``, an attribute test on ``class``, an escape) is kept,
  one that puts the root element inside another (the theme's ``.jupyter-wrapper :root``, scoped by
  mkdocs-jupyter) is not;
* every at-rule block (``@media``, ``@supports`` …) with the rules kept inside it, and every other at-rule
  (``@font-face``, ``@keyframes`` …) as it is;
* of the custom properties (``--jp-…: value``) only those some kept declaration reads, directly or through
  another property (``var(--…)``), and those ``keep_variables`` names (the book's own style sheet sets a few).

The text is read by a small tokenizer that knows strings, comments, parentheses and nested blocks — the
theme's icons are SVGs in ``url("data:…")`` values full of ``;`` and braces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

_CLASS = re.compile(r"\.(-?[_a-zA-Z][\w-]*)")
_VAR = re.compile(r"var\(\s*(--[\w-]+)")
_UNREADABLE = re.compile(r":(?:is|where|has|matches|-webkit-any|-moz-any)\(|\[\s*class\b|\\")
_NOT = re.compile(r":not\(")


@dataclass
class Block:
    """A rule (``selector { body }``), an at-rule with rules inside (``children``), or a statement."""

    prelude: str
    body: str | None = None  # the declarations of a rule, or an at-rule's text kept as it is
    children: list["Block"] | None = None  # the rules inside @media, @supports …
    declarations: list[tuple[str, str]] = field(default_factory=list)


def _skip_string(css: str, i: int) -> int:
    quote, i = css[i], i + 1
    while i < len(css) and css[i] != quote:
        i += 2 if css[i] == "\\" else 1
    return i + 1


def _scan(css: str, i: int, stops: str) -> int:
    """The index of the first character of ``stops`` at depth 0 from ``i`` (strings, comments, brackets
    skipped), or ``len(css)``."""
    depth = 0
    while i < len(css):
        c = css[i]
        if c in "\"'":
            i = _skip_string(css, i)
            continue
        if css.startswith("/*", i):
            end = css.find("*/", i + 2)
            i = len(css) if end < 0 else end + 2
            continue
        if depth == 0 and c in stops:
            return i
        if c in "([":
            depth += 1
        elif c in ")]":
            depth = max(0, depth - 1)
        i += 1
    return i


def _block_end(css: str, i: int) -> int:
    """``i`` just after a ``{``: the index of its matching ``}``."""
    depth = 1
    while i < len(css):
        j = _scan(css, i, "{}")
        if j >= len(css):
            return j
        depth += 1 if css[j] == "{" else -1
        if depth == 0:
            return j
        i = j + 1
    return i


def parse(css: str) -> list[Block]:
    blocks, i = [], 0
    while i < len(css):
        j = _scan(css, i, "{;}")
        prelude = re.sub(r"/\*.*?\*/", "", css[i:j], flags=re.S).strip()
        if j >= len(css):
            if prelude:
                blocks.append(Block(prelude))
            break
        if css[j] in ";}":  # a statement (@charset, @import) or a stray brace
            if prelude:
                blocks.append(Block(prelude + ";"))
            i = j + 1
            continue
        end = _block_end(css, j + 1)
        inner = css[j + 1:end]
        if prelude.startswith("@"):
            name = prelude[1:].split(None, 1)[0].lower() if len(prelude) > 1 else ""
            if name in ("media", "supports", "layer", "container", "document", "-moz-document"):
                blocks.append(Block(prelude, children=parse(inner)))
            else:
                blocks.append(Block(prelude, body=inner))
        else:
            blocks.append(Block(prelude, body=inner, declarations=_declarations(inner)))
        i = end + 1
    return blocks


def _declarations(body: str) -> list[tuple[str, str]]:
    out, i = [], 0
    while i < len(body):
        j = _scan(body, i, ";")
        part = body[i:j]
        if ":" in part:
            name, _, value = part.partition(":")
            name = re.sub(r"/\*.*?\*/", "", name, flags=re.S)
            if name.strip():
                out.append((name.strip(), value.strip()))
        i = j + 1
    return out


def _selectors(prelude: str) -> list[str]:
    out, i = [], 0
    while i <= len(prelude):
        j = _scan(prelude, i, ",")
        out.append(prelude[i:j].strip())
        i = j + 1
    return [s for s in out if s]


def _without_not(selector: str) -> str:
    """``selector`` without its ``:not(…)`` parts (what they exclude says nothing of what matches)."""
    while True:
        m = _NOT.search(selector)
        if m is None:
            return selector
        end = _scan(selector, m.end(), ")")
        selector = selector[:m.start()] + selector[end + 1:]


_ROOT_INSIDE = re.compile(r"[\s>+~]\s*:root\b")  # the root element inside another: never (``.x :root``)


def may_match(selector: str, classes: set[str]) -> bool:
    if _ROOT_INSIDE.search(selector.strip()):
        return False
    if _UNREADABLE.search(selector):
        return True
    return all(c in classes or c.startswith("md-") for c in _CLASS.findall(_without_not(selector)))


def prune(css: str, classes: Iterable[str], keep_variables: Iterable[str] = ()) -> str:
    """``css`` with only the rules that may match an element with ``classes`` (and what they read)."""
    present = set(classes)
    blocks = _keep(parse(css), present)
    read: set[str] = set(keep_variables)
    defined: dict[str, list[str]] = {}
    for block in _rules(blocks):
        for name, value in block.declarations:
            if name.startswith("--"):
                defined.setdefault(name, []).append(value)
            else:
                read.update(_VAR.findall(value))
    todo = list(read)
    while todo:  # a variable read reads the variables its values name
        for value in defined.get(todo.pop(), []):
            for name in _VAR.findall(value):
                if name not in read:
                    read.add(name)
                    todo.append(name)
    return "".join(_write(b, read) for b in blocks)


def _keep(blocks: list[Block], classes: set[str]) -> list[Block]:
    out = []
    for b in blocks:
        if b.children is not None:
            inner = _keep(b.children, classes)
            if inner:
                out.append(Block(b.prelude, children=inner))
        elif b.declarations or b.body is not None and not b.prelude.startswith("@"):
            if any(may_match(s, classes) for s in _selectors(b.prelude)):
                out.append(b)
        else:
            out.append(b)  # @font-face, @keyframes, @charset …
    return out


def _rules(blocks: list[Block]) -> Iterable[Block]:
    for b in blocks:
        if b.children is not None:
            yield from _rules(b.children)
        elif b.declarations:
            yield b


def _write(b: Block, read: set[str]) -> str:
    if b.children is not None:
        inner = "".join(_write(c, read) for c in b.children)
        return f"{b.prelude}{{{inner}}}" if inner else ""
    if b.body is None:
        return b.prelude
    if not b.declarations:
        return f"{b.prelude}{{{b.body}}}"
    kept = [f"{n}:{v}" for n, v in b.declarations if not n.startswith("--") or n in read]
    return f"{b.prelude}{{{';'.join(kept)}}}" if kept else ""
