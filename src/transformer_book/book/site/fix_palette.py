"""Material's colour palette set without restyling the whole page, twice, at every load.

Material's script sets the colour palette on every page load, not only when the reader switches it, and
each of three things it does there makes the browser restyle every element of the page (measured in
Chromium with a CPU profile of the load, each undone by hand in turn: ~60 ms of a desktop's time on the
API page, four times that on Lighthouse's phone — the largest share of its blocking time):

* **The colour-switch rule.** While it sets the palette the script marks the body
  (``data-md-color-switching``, taken off a moment later), and the palette style sheet has a rule for that
  mark, ``[data-md-color-switching] *`` (and ``:before``, ``:after``) ``{transition-duration: 0s}``, which
  matches every element: setting the mark and taking it off each restyle the page, and the script reads a
  computed style in between, which forces the first at once. The rule only stops the few colour
  transitions Material has (0.25 s, header and code blocks) while the reader switches between light and
  dark; without it the switch fades instead. It is taken out of the built ``palette.*.min.css``.
* **The color-scheme meta, added** (``<meta name="color-scheme">``, which tells the browser to draw its
  own scroll bars and controls light or dark). Chromium restyles the page whenever such a meta is added
  or its content set — even to the value it has. The pages carry one from the start (:data:`HEAD_META`,
  put in by :mod:`.page_html`: in the head, before anything is styled, it costs nothing), and the built
  script uses it instead of adding its own.
* **The color-scheme meta, set.** The script then sets that meta's content on every load; the built
  script sets it only when it changes (when the reader switches, or on a dark page: the meta says light).

If Material changes any of the three, the build says so.
"""

from __future__ import annotations

import re
from pathlib import Path

from transformer_book.book.files import atomic_write_text

HEAD_META = '<meta name="color-scheme" content="light">'  # Material's default scheme; the script corrects it

MARK = "data-md-color-switching"
SWITCH_RULE = re.compile(r"\[data-md-color-switching\][^{}]*\{[^{}]*\}")

# In the bundle (minified: names vary between releases, hence patterns):
# let o=x("meta",{name:"color-scheme"});document.head.appendChild(o);  →  the page's own meta, or a new one
ADD_META = re.compile(r'let ([\w$]+)=([\w$]+)\("meta",\{name:"color-scheme"\}\);document\.head\.appendChild\(\1\);')
USE_META = r"""let \1=document.querySelector('meta[name="color-scheme"]')||document.head.appendChild(\2("meta",{name:"color-scheme"}));"""
USED_MARK = """document.querySelector('meta[name="color-scheme"]')||"""
# return o.content=a.colorScheme,  →  set only when it changes
SET_META = re.compile(r"return ([\w$]+)\.content=([\w$]+)\.colorScheme,")
SET_IF_CHANGED = r"return \1.content!==\2.colorScheme&&(\1.content=\2.colorScheme),"


def patch(site_dir: Path) -> list[str]:
    """Patch every palette style sheet and bundle under ``site_dir``; returns warnings (Material's code changed)."""
    warnings = []
    assets = site_dir / "assets"
    for sheet in sorted((assets / "stylesheets").glob("palette.*.min.css")):
        text = sheet.read_text(encoding="utf-8")
        if MARK not in text:
            continue  # patched already (a serve rebuild that kept the file)
        text, n = SWITCH_RULE.subn("", text)
        if n != 1 or MARK in text:
            warnings.append(f"{sheet.name}: Material's colour-switch rule changed; review book/site/fix_palette.py")
            continue
        atomic_write_text(sheet, text)
    for bundle in sorted((assets / "javascripts").glob("bundle.*.min.js")):
        text = bundle.read_text(encoding="utf-8")
        if USED_MARK in text and not SET_META.search(text):
            continue  # patched already
        text, added = ADD_META.subn(USE_META, text)
        text, set_ = SET_META.subn(SET_IF_CHANGED, text)
        if (added, set_) != (1, 1):
            warnings.append(f"{bundle.name}: Material's color-scheme meta changed; review book/site/fix_palette.py")
            continue
        atomic_write_text(bundle, text)
    return warnings
