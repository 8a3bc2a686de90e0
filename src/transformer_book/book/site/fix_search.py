"""Two fixes to Material's built search: Chinese query segmentation, and the index loaded only when wanted.

**Segmentation.** Material 9.x splits a typed Chinese query into the longest pieces found in the index, but
its loop stops one character short (``j < query.length``), so a term that ends the query is never tried
whole: 位置编码 is searched as 位置*. Fixed in the built worker.

**The index, on demand.** Material fetches the search index (``search/search_index.json``: 2 MB, 0.4 MB
compressed — the whole book's text) as soon as any page opens, competing with the page for a phone's
connection, though most readers never search. Its bundle already waits for the reader to open search —
but only for pages opened from disk (``file:``). The built bundle takes that path everywhere: the index is
fetched when the reader opens search (the search button, the ``/`` or ``s`` key, a tap in the box), then
cached by the browser for the pages after.

If Material changes either piece of code, the build says so (``tests/test_browser.py`` checks that typed
Chinese terms are searched whole and that a page loads no index before search is opened).
"""

from __future__ import annotations

import re
from pathlib import Path

from transformer_book.book.files import atomic_write_text

SEGMENT_BUG = "for(let o=s+1;o<t.length;o++)t.slice(s,o)in e"
SEGMENT_FIX = "for(let o=s+1;o<=t.length;o++)t.slice(s,o)in e"

# In the bundle (minified: names vary between releases, hence patterns):
# (1) the worker gets the index on merge(of(location.protocol !== "file:"), watchToggle("search")) →
#     filter(Boolean) → switchMap(() => index$): true at once, except from disk. Made false: the toggle decides.
EAGER_INDEX = re.compile(r'([\w$]+)\(location\.protocol!=="file:"\)(,[\w$]+\("search"\)\)\.pipe\([\w$]+\([\w$]+=>[\w$]+\),'
                         r'([\w$]+)\(\(\)=>[\w$]+\)\))')
LAZY_INDEX = r"\1(!1)\2"
LAZY_MARK = re.compile(r'[\w$]+\(!1\),[\w$]+\("search"\)\)')
# (2) search.highlight: combineLatest([index$, location$.pipe(startWith(…), filter(url has ?h=))]) subscribes
#     to the index on every page; made location$.pipe(…, filter(…), switchMap(url => index$.pipe(map(…)))):
#     the index is fetched only on a page opened from a search result (its URL has ?h=).
EAGER_HIGHLIGHT = re.compile(
    r'([\w$]+)\(\[([\w$]+),([\w$]+)\.pipe\(([^()]*\([^()]*\(\)\)),([\w$]+)\(([\w$]+)=>!!\6\.searchParams\.get\("h"\)\)\)\]\)'
    r'\.pipe\(([\w$]+)\(\(\[([\w$]+),([\w$]+)\]\)=>')
LAZY_HIGHLIGHT = r'\3.pipe(\4,\5(\6=>!!\6.searchParams.get("h")),{switch_map}(\9=>\2.pipe(\7(\8=>[\8,\9])))).pipe(\7(([\8,\9])=>'


def patch(site_dir: Path) -> list[str]:
    """Patch every search worker and bundle under ``site_dir``; returns warnings (Material's code changed)."""
    warnings = []
    scripts = site_dir / "assets" / "javascripts"
    for worker in sorted((scripts / "workers").glob("search.*.min.js")):
        text = worker.read_text(encoding="utf-8")
        if text.count(SEGMENT_FIX) == 1 and SEGMENT_BUG not in text:
            continue  # patched already (a serve rebuild that kept the file)
        if text.count(SEGMENT_BUG) != 1:
            warnings.append(f"{worker.name}: Material's query segmentation changed; review book/site/fix_search.py")
            continue
        atomic_write_text(worker, text.replace(SEGMENT_BUG, SEGMENT_FIX))
    for bundle in sorted(scripts.glob("bundle.*.min.js")):
        text = bundle.read_text(encoding="utf-8")
        if LAZY_MARK.search(text) and not EAGER_INDEX.search(text) and not EAGER_HIGHLIGHT.search(text):
            continue  # patched already
        found = EAGER_INDEX.findall(text)
        if len(found) != 1:
            warnings.append(f"{bundle.name}: Material's loading of the search index changed; "
                            "review book/site/fix_search.py")
            continue
        text = EAGER_INDEX.sub(LAZY_INDEX, text)
        switch_map = found[0][2]
        text, n = EAGER_HIGHLIGHT.subn(lambda m: m.expand(LAZY_HIGHLIGHT.replace("{switch_map}", switch_map)), text)
        if n != 1 and "search.highlight" in text:
            warnings.append(f"{bundle.name}: Material's search highlighting changed (it would load the index on "
                            "every page); review book/site/fix_search.py")
        atomic_write_text(bundle, text)
    return warnings
