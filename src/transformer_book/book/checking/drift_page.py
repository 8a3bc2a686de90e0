"""The drift report: one offline HTML page that shows what a drift does to the book, so it can be judged.

Written by every build that finds drift (a failed CI build, or a warned ``--strict`` one) to
``<report_dir>/drift.html``. Per drifted snippet and result:

- a figure: each plotted line, image or bar set that moved, recorded vs now on one scale, with their
  difference (:mod:`.drift_drawings`), and the figure as it renders now;
- a table: the whole table, each changed cell marked and showing old → new, rows added or removed marked;
- a value: old → new, the difference, the tolerance, and for a trained value the spread calibration measured;
- a claim: its statement, the comparison now (inputs, margin), the margin recorded, and per atom the
  margin, spread, worst margin and runs held under calibration;
- every page:line that shows the result, with that line's text and a link to the file.

No script, no external file: it opens from disk in any browser and reads at phone width. The page is the
template ``templates/drift.html.j2``; this module works out what it shows.
"""

from __future__ import annotations

import datetime
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from transformer_book.book.checking import drift_drawings, records
from transformer_book.book.checking.drift import Change
from transformer_book.book.files import atomic_write_text
from transformer_book.book.html_pages import markup
from transformer_book.book.html_pages import render as render_page
from transformer_book.book.memo import Memo, file_version
from transformer_book.book.results import TRAINED, Claim, Figure, Result, Table, format_number, result_kind, series_of

FILE_NAME = "drift.html"
_PAGE_LINES: Memo[list[str]] = Memo("page lines")  # a page's lines, by the file's version

STYLE = """
body{font-family:"Book CJK","Noto Sans CJK SC",system-ui,-apple-system,sans-serif;margin:0 auto;max-width:1100px;
 padding:1rem;line-height:1.55;color:#212121}
h1{font-size:1.6rem}h2{font-size:1.25rem;border-top:2px solid #1565c0;padding-top:.6rem;margin-top:2rem;
 overflow-wrap:anywhere}h3{font-size:1.05rem;overflow-wrap:anywhere}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace,"Book CJK";font-size:.9em;overflow-wrap:anywhere}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.5rem 0}td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:right;
 white-space:nowrap}th{background:#f5f5f5}td.text{text-align:left}
td.changed{background:#fff3cd;outline:2px solid #f9a825}td.changed del{color:#9e9e9e}td.changed ins{
 text-decoration:none;font-weight:600;color:#b71c1c}
tr.added td{background:#e8f5e9}tr.removed td{background:#fde0dc;text-decoration:line-through}
.panels{display:flex;flex-wrap:wrap;gap:.5rem}.panels svg{width:320px;max-width:100%;height:auto;
 border:1px solid #eee;background:#fff}
.now svg{max-width:100%;height:auto}
.verdict{display:inline-block;padding:0 .4rem;border-radius:3px;color:#fff;background:#b71c1c;font-size:.85em}
.verdict.noisy{background:#ef6c00}.verdict.other{background:#546e7a}
.where{font-size:.92em;color:#424242;margin:.3rem 0 .8rem}.where li{overflow-wrap:anywhere}
.cmd{background:#f5f5f5;padding:.4rem .6rem;font-family:ui-monospace,Menlo,Consolas,monospace,"Book CJK";
 overflow-wrap:anywhere}
nav li{overflow-wrap:anywhere}
"""


def path(report_dir: Path) -> Path:
    return report_dir / FILE_NAME


def _num(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    return repr(v) if not isinstance(v, str) else v


def _difference(old: Any, new: Any) -> str:
    if isinstance(old, (int, float)) and isinstance(new, (int, float)) and not isinstance(old, bool) \
            and not isinstance(new, bool) and math.isfinite(old) and math.isfinite(new):
        return f"{new - old:+.3g}".replace("-", "−")
    return ""


def _cell(value: Any, fmt: str) -> str:
    """A cell as the page shows it; a cell that is not in the record (or no longer produced) is a dash, and a
    value the column's format does not fit (a string in a number column) is shown as it is."""
    if value is None:
        return "—"
    try:
        return format_number(value, fmt)
    except (TypeError, ValueError):
        return str(value)


class _Page:
    """What the template shows of each drifted result, as plain values (the template escapes them)."""

    def __init__(self, project_root: Path, docs_dir: Path, usage: dict[tuple[str, str], list[str]]):
        self.root = project_root
        self.docs = docs_dir
        self.usage = usage

    # -- where a result is shown
    def _line(self, page: str, line: int) -> str:
        path = self.docs / page
        try:
            text = _PAGE_LINES.get(path, file_version(path), lambda: path.read_text(encoding="utf-8").splitlines())
        except OSError:
            text = []
        return text[line - 1].strip() if 0 < line <= len(text) else ""

    def where(self, sid: str, key: str) -> list[dict[str, str]]:
        items = []
        for loc in self.usage.get((sid, key), []):
            page, _, line = loc.rpartition(":")
            text = self._line(page, int(line)) if line.isdigit() else ""
            items.append({"loc": loc, "uri": (self.docs / page).resolve().as_uri(), "text": text[:200]})
        return items

    # -- one result, by type
    def figure(self, key: str, old: dict[str, Any] | None, new: Figure | None, changes: list[Change],
               record: records.Record | None) -> dict[str, Any]:
        changed = {ch.path for ch in changes}
        old_plotted = (old or {}).get("plotted", {})
        new_plotted = new.plotted if new is not None else {}
        panels = []
        drawn: set[str] = set()  # the changes a panel shows; the rest (data, words, colour scales) are listed
        for ax in sorted(set(old_plotted) | set(new_plotted)):
            oa, na = old_plotted.get(ax, {}), new_plotted.get(ax, {})
            for name in sorted(set(oa) | set(na)):
                prefix = f"{key}.{ax}.{name}"
                hits = {p for p in changed if p == prefix or p.startswith(prefix + ".") or p.startswith(prefix + "[")}
                if not hits:
                    continue
                svgs = drift_drawings.element(name, oa.get(name), na.get(name), f"{ax}.{name}")
                if svgs:
                    panels.append([markup(svg) for svg in svgs])
                    drawn |= hits
        data_changes = [ch for ch in changes if ch.path not in drawn]
        return {"panels": panels, "data_rows": self.values(data_changes, record) if data_changes else [],
                "now": markup(new.svg) if new is not None and new.svg else ""}

    def table(self, key: str, old: dict[str, Any] | None, new: Table | None, changes: list[Change],
              record: records.Record | None) -> dict[str, Any]:
        by_path = {ch.path: ch for ch in changes}
        columns = list(new.columns if new is not None else (old or {}).get("columns", []))
        formats = list(new.formats if new is not None else (old or {}).get("formats", [""] * len(columns)))
        formats += [""] * (len(columns) - len(formats))
        old_rows = (old or {}).get("rows", [])
        new_rows = new.rows if new is not None else []
        rows = []
        for i in range(max(len(old_rows), len(new_rows))):
            cls = "added" if i >= len(old_rows) else "removed" if i >= len(new_rows) else ""
            row = new_rows[i] if i < len(new_rows) else old_rows[i]
            cells = []
            for col, value, fmt in zip(columns, row, formats):
                ch = by_path.get(f"{key}[{i}].{col}")
                text_cls = "text" if isinstance(value, str) else ""
                if ch is not None and not cls:
                    cells.append({"cls": text_cls, "change": ch.describe(), "old": _cell(ch.old, fmt),
                                  "new": _cell(ch.new, fmt)})
                else:
                    cells.append({"cls": text_cls, "change": "", "text": _cell(value, fmt)})
            rows.append({"cls": cls, "cells": cells})
        return {"changed": sum(1 for ch in changes if ch.kind == "drift"), "columns": [str(c) for c in columns],
                "rows": rows}

    def values(self, changes: list[Change], record: records.Record | None) -> list[dict[str, str]]:
        rows = []
        for ch in changes:
            if ch.kind == "kind":
                rows.append({"path": ch.path, "old": str(ch.old), "new": str(ch.new), "difference": "",
                             "what": "种类改了", "spread": ""})
                continue
            spread = ""
            if ch.value_kind == TRAINED:
                entry = records.series_calibration(record, series_of(ch.path))
                spread = _num(entry.spread) if entry else "未校准"
            tol = ch.tolerance.describe() if ch.tolerance else ("" if ch.kind != "drift" else "精确")
            what = {"added": "新出现（记录里没有）", "removed": "不再产生"}.get(ch.kind, tol)
            rows.append({"path": ch.path, "old": _num(ch.old), "new": _num(ch.new),
                         "difference": _difference(ch.old, ch.new), "what": what, "spread": spread})
        return rows

    def value(self, key: str, old: dict[str, Any] | None, new: Result | None, changes: list[Change],
              record: records.Record | None) -> list[dict[str, str]]:
        return self.values(changes, record)

    def claim(self, key: str, old: dict[str, Any] | None, new: Claim | None, changes: list[Change],
              record: records.Record | None) -> dict[str, Any]:
        statement = new.statement if new is not None else (old or {}).get("statement", "")
        verdicts = []
        for ch in changes:
            word, cls = {"claim": ("不再成立", ""), "noisy": ("在校准噪声之内", "noisy")}.get(ch.kind, ("改了", "other"))
            other = ch.kind not in ("claim", "noisy")
            verdicts.append({"word": word, "cls": cls, "statement": statement,
                             "old": _num(ch.old) if other else None, "new": _num(ch.new) if other else None})
        out: dict[str, Any] = {"verdicts": verdicts, "now": "", "recorded": "", "atoms": []}
        if new is not None:
            recorded = ((old or {}).get("check") or {})
            out["now"] = new.describe_inputs()
            if recorded:
                out["recorded"] = _num(recorded.get("margin")) + ("（成立）" if recorded.get("holds") else "（不成立）")
            cal = records.claim_calibration(record, key)
            if cal is not None and cal.atoms:
                for path, atom in new.check.atoms():
                    a = cal.atoms.get(path or "·")
                    out["atoms"].append({"path": path or "·", "describe": atom.describe(), "margin": _num(atom.margin),
                                         "calibrated": _num(a.margin if a else None), "spread": _num(a.spread if a else None),
                                         "worst": _num(a.worst if a else None), "held": a.held if a else ""})
        return out


# How the report draws each result kind, by its ``type_name``: the macro of the same name in drift.html.j2 shows
# what the method returns. A kind without a drawing (one registered from outside the engine) is listed number by
# number (``value``), with its first change in words.
DRAWINGS = {"value": _Page.value, "table": _Page.table, "figure": _Page.figure, "claim": _Page.claim}


def _kind_word(result: Result | None, old: dict[str, Any] | None) -> str:
    kind = result.type_name if result is not None else (old or {}).get("type", "")
    cls = result_kind(kind)
    return (cls.word if cls is not None else "") or kind


def render(drift: list[Change], snippets: dict[str, Any], usage: dict[tuple[str, str], list[str]],
           project_root: Path, docs_dir: Path, font: Path | None = None) -> str:
    """The report's HTML (``templates/drift.html.j2``). ``snippets``: the build's ``SnippetState`` per snippet
    (fresh results, paths). ``font``: the book's Chinese font, referenced by its path (the report is read on the
    machine that built it; elsewhere the browser falls back to the system's fonts)."""
    page = _Page(project_root, docs_dir, usage)
    by_snippet: dict[str, dict[str, list[Change]]] = defaultdict(lambda: defaultdict(list))
    for ch in drift:
        by_snippet[ch.snippet][ch.result].append(ch)
    shown = []
    for sid, by_key in by_snippet.items():
        st = snippets[sid]
        record = records.load(st.snippet.record_path) if st.snippet.record_path.exists() else None
        recorded = records.results(record)
        results = []
        for key, changes in by_key.items():
            result, old = st.results.get(key), recorded.get(key)
            kind = result.type_name if result is not None else (old or {}).get("type", "")
            draw = DRAWINGS.get(kind)
            new = result if result is not None and result.type_name == kind else None
            item: dict[str, Any] = {"key": key, "kind_word": _kind_word(result, old), "where": page.where(sid, key),
                                    "drawn": kind if draw is not None else "value", "other": "",
                                    "drawing": (draw or _Page.value)(page, key, old, new, changes, record)}
            if draw is None and result is not None:
                item["other"] = changes[0].describe()  # a kind the report has no drawing for: its first change
            results.append(item)
        shown.append({"id": sid, "anchor": "s-" + sid.replace("/", "-"), "results": results,
                      "count": sum(len(v) for v in by_key.values()),
                      "path": st.snippet.path.relative_to(project_root).as_posix(),
                      "record": st.snippet.record_path.relative_to(project_root).as_posix()})
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M")
    return render_page("drift.html.j2", snippets=shown, total=sum(s["count"] for s in shown), when=when,
                       font=font.resolve().as_uri() if font else "", style=markup(STYLE)).lstrip()


def write(report_dir: Path, drift: list[Change], snippets: dict[str, Any], usage: dict[tuple[str, str], list[str]],
          project_root: Path, docs_dir: Path, font: Path | None = None) -> Path | None:
    """Write the report when there is drift and return its path; without drift remove a stale one."""
    target = path(report_dir)
    if not drift:
        target.unlink(missing_ok=True)
        return None
    atomic_write_text(target, render(drift, snippets, usage, project_root, docs_dir, font))
    return target
