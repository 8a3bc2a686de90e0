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

No script, no external file: it opens from disk in any browser and reads at phone width.
"""

from __future__ import annotations

import datetime
import math
from collections import defaultdict
from html import escape
from pathlib import Path
from typing import Any

from transformer_book.book.checking import drift_drawings, records
from transformer_book.book.checking.drift import Change
from transformer_book.book.results import TRAINED, Claim, Figure, Result, Table, Value, format_number, series_of

FILE_NAME = "drift.html"

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
    return escape(repr(v)) if not isinstance(v, str) else escape(v)


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
    def __init__(self, project_root: Path, docs_dir: Path, usage: dict[tuple[str, str], list[str]]):
        self.root = project_root
        self.docs = docs_dir
        self.usage = usage
        self._lines: dict[str, list[str]] = {}

    # -- where a result is shown
    def _line(self, page: str, line: int) -> str:
        if page not in self._lines:
            try:
                self._lines[page] = (self.docs / page).read_text(encoding="utf-8").splitlines()
            except OSError:
                self._lines[page] = []
        text = self._lines[page]
        return text[line - 1].strip() if 0 < line <= len(text) else ""

    def where(self, sid: str, key: str) -> str:
        shown = self.usage.get((sid, key), [])
        if not shown:
            return '<p class="where">没有哪一页引用它。</p>'
        items = []
        for loc in shown:
            page, _, line = loc.rpartition(":")
            target = (self.docs / page).resolve()
            text = self._line(page, int(line)) if line.isdigit() else ""
            items.append(f'<li><a href="{escape(target.as_uri())}"><code>{escape(loc)}</code></a>'
                         + (f"：{escape(text[:200])}" if text else "") + "</li>")
        return '<ul class="where">' + "".join(items) + "</ul>"

    # -- one result, by type
    def figure(self, key: str, old: dict[str, Any] | None, new: Figure | None, changes: list[Change],
               record: dict[str, Any] | None) -> str:
        changed = {ch.path for ch in changes}
        old_plotted = (old or {}).get("plotted", {})
        new_plotted = new.plotted if new is not None else {}
        parts = []
        for ax in sorted(set(old_plotted) | set(new_plotted)):
            oa, na = old_plotted.get(ax, {}), new_plotted.get(ax, {})
            for name in sorted(set(oa) | set(na)):
                prefix = f"{key}.{ax}.{name}"
                if not any(p == prefix or p.startswith(prefix + ".") or p.startswith(prefix + "[") for p in changed):
                    continue
                panels = drift_drawings.element(name, oa.get(name), na.get(name), f"{ax}.{name}")
                parts.append('<div class="panels">' + "".join(panels) + "</div>")
        data_changes = [ch for ch in changes if ch.path.startswith(f"{key}.data.")]
        if data_changes:
            parts.append(self.values(data_changes, record))
        if new is not None and new.svg:
            parts.append('<details class="now"><summary>现在的图（如网站所示）</summary>' + new.svg + "</details>")
        return "".join(parts)

    def table(self, key: str, old: dict[str, Any] | None, new: Table | None, changes: list[Change]) -> str:
        by_path = {ch.path: ch for ch in changes}
        columns = list(new.columns if new is not None else (old or {}).get("columns", []))
        formats = list(new.formats if new is not None else (old or {}).get("formats", [""] * len(columns)))
        formats += [""] * (len(columns) - len(formats))
        old_rows = (old or {}).get("rows", [])
        new_rows = new.rows if new is not None else []
        head = "<tr>" + "".join(f"<th>{escape(str(c))}</th>" for c in columns) + "</tr>"
        body = []
        for i in range(max(len(old_rows), len(new_rows))):
            cls = "added" if i >= len(old_rows) else "removed" if i >= len(new_rows) else ""
            row = new_rows[i] if i < len(new_rows) else old_rows[i]
            cells = []
            for col, value, fmt in zip(columns, row, formats):
                ch = by_path.get(f"{key}[{i}].{col}")
                text_cls = "text" if isinstance(value, str) else ""
                if ch is not None and not cls:
                    cells.append(f'<td class="changed {text_cls}" title="{escape(ch.describe())}">'
                                 f"<del>{escape(_cell(ch.old, fmt))}</del> → "
                                 f"<ins>{escape(_cell(ch.new, fmt))}</ins></td>")
                else:
                    cells.append(f'<td class="{text_cls}">{escape(_cell(value, fmt))}</td>')
            body.append(f'<tr class="{cls}">' + "".join(cells) + "</tr>")
        count = sum(1 for ch in changes if ch.kind == "drift")
        note = f"<p>{count} 个单元格变了（黄色：记录 → 现在）。</p>" if count else ""
        return note + '<div class="scroll"><table>' + head + "".join(body) + "</table></div>"

    def values(self, changes: list[Change], record: dict[str, Any] | None) -> str:
        rows = []
        for ch in changes:
            if ch.kind == "kind":
                rows.append(f'<tr><td class="text mono">{escape(ch.path)}</td><td>{escape(str(ch.old))}</td>'
                            f'<td>{escape(str(ch.new))}</td><td></td><td class="text">种类改了</td><td></td></tr>')
                continue
            spread = ""
            if ch.value_kind == TRAINED:
                entry = ((record or {}).get("calibration") or {}).get("series", {}).get(series_of(ch.path))
                spread = _num(entry.get("spread")) if entry else "未校准"
            tol = ch.tolerance.describe() if ch.tolerance else ("" if ch.kind != "drift" else "精确")
            what = {"added": "新出现（记录里没有）", "removed": "不再产生"}.get(ch.kind, tol)
            rows.append(f'<tr><td class="text mono">{escape(ch.path)}</td><td>{_num(ch.old)}</td><td>{_num(ch.new)}</td>'
                        f'<td>{_difference(ch.old, ch.new)}</td><td class="text">{escape(what)}</td>'
                        f"<td>{spread}</td></tr>")
        return ('<div class="scroll"><table><tr><th>哪个数</th><th>记录</th><th>现在</th><th>差</th><th>容差</th>'
                "<th>校准测得的离散度</th></tr>" + "".join(rows) + "</table></div>")

    def claim(self, key: str, old: dict[str, Any] | None, new: Claim | None, changes: list[Change],
              record: dict[str, Any] | None) -> str:
        out = []
        for ch in changes:
            verdict = {"claim": ("不再成立", ""), "noisy": ("在校准噪声之内", "noisy")}.get(ch.kind, ("改了", "other"))
            out.append(f'<p><span class="verdict {verdict[1]}">{verdict[0]}</span> ')
            statement = new.statement if new is not None else (old or {}).get("statement", "")
            out.append(f"«{escape(statement)}»</p>")
            if ch.kind not in ("claim", "noisy"):
                out.append(f"<p>记录：{_num(ch.old)} → 现在：{_num(ch.new)}</p>")
        if new is not None:
            recorded = ((old or {}).get("check") or {})
            out.append(f"<p>现在：{escape(new.describe_inputs())}</p>")
            if recorded:
                out.append(f"<p>记录时的余量：{_num(recorded.get('margin'))}"
                           f"{'（成立）' if recorded.get('holds') else '（不成立）'}</p>")
            cal = records.claim_calibration(record, key)
            atoms = (cal or {}).get("atoms", {})
            if atoms:
                rows = []
                for path, atom in new.check.atoms():
                    a = atoms.get(path or "·", {})
                    rows.append(f'<tr><td class="text mono">{escape(path or "·")}</td>'
                                f'<td class="text">{escape(atom.describe())}</td><td>{_num(atom.margin)}</td>'
                                f"<td>{_num(a.get('margin'))}</td><td>{_num(a.get('spread'))}</td>"
                                f"<td>{_num(a.get('worst'))}</td><td>{escape(str(a.get('held', '')))}</td></tr>")
                out.append('<div class="scroll"><table><tr><th>比较</th><th>现在</th><th>现在的余量</th>'
                           "<th>校准时的余量</th><th>离散度</th><th>最差余量</th><th>成立次数</th></tr>"
                           + "".join(rows) + "</table></div>")
        return "".join(out)


def _kind_word(result: Result | None, old: dict[str, Any] | None) -> str:
    kind = result.type_name if result is not None else (old or {}).get("type", "")
    return {"figure": "图", "table": "表", "value": "数值", "claim": "说法", "block": "文本块"}.get(kind, kind)


def render(drift: list[Change], snippets: dict[str, Any], usage: dict[tuple[str, str], list[str]],
           project_root: Path, docs_dir: Path, font: Path | None = None) -> str:
    """The report's HTML. ``snippets``: the build's ``SnippetState`` per snippet (fresh results, paths).
    ``font``: the book's Chinese font, referenced by its path (the report is read on the machine that built
    it; elsewhere the browser falls back to the system's fonts)."""
    page = _Page(project_root, docs_dir, usage)
    by_snippet: dict[str, dict[str, list[Change]]] = defaultdict(lambda: defaultdict(list))
    for ch in drift:
        by_snippet[ch.snippet][ch.result].append(ch)
    toc, sections = [], []
    for sid, by_key in by_snippet.items():
        st = snippets[sid]
        record = records.load(st.snippet.record_path) if st.snippet.record_path.exists() else None
        recorded = (record or {}).get("results", {})
        anchor = "s-" + sid.replace("/", "-")
        count = sum(len(v) for v in by_key.values())
        toc.append(f'<li><a href="#{anchor}">{escape(sid)}</a>：{len(by_key)} 个结果，{count} 处变化</li>')
        body = [f'<h2 id="{anchor}">{escape(sid)}</h2>',
                f'<p class="mono">{escape(st.snippet.path.relative_to(project_root).as_posix())} · 记录 '
                f'{escape(st.snippet.record_path.relative_to(project_root).as_posix())}</p>']
        for key, changes in by_key.items():
            result, old = st.results.get(key), recorded.get(key)
            body.append(f"<h3>{escape(key)}　<small>{_kind_word(result, old)}</small></h3>")
            body.append(page.where(sid, key))
            if isinstance(result, Claim) or (result is None and (old or {}).get("type") == "claim"):
                body.append(page.claim(key, old, result if isinstance(result, Claim) else None, changes, record))
            elif isinstance(result, Figure) or (result is None and (old or {}).get("type") == "figure"):
                body.append(page.figure(key, old, result if isinstance(result, Figure) else None, changes, record))
            elif isinstance(result, Table) or (result is None and (old or {}).get("type") == "table"):
                body.append(page.table(key, old, result if isinstance(result, Table) else None, changes))
            else:
                body.append(page.values(changes, record))
            if not isinstance(result, (Value, Table, Figure, Claim)) and result is not None:
                body.append(f"<p>{escape(changes[0].describe())}</p>")
            body.append(f'<p>只接受这一项：</p><div class="cmd">python -m transformer_book accept {escape(sid)}:{escape(key)}</div>')
        sections.append("".join(body))
    face = (f'@font-face{{font-family:"Book CJK";src:url("{font.resolve().as_uri()}")}}' if font else "")
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M")
    total = sum(len(c) for by_key in by_snippet.values() for c in by_key.values())
    return ("<!doctype html><html lang=\"zh-CN\"><head><meta charset=\"utf-8\">"
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>漂移报告</title><style>{face}{STYLE}</style></head><body>"
            f"<h1>漂移报告</h1><p>{escape(when)} 的构建：{len(by_snippet)} 个片段里 {total} 处与记录不同。"
            "逐项看清楚再决定：改代码、改句子，还是接受新值（<code>python -m transformer_book accept 片段[:结果]</code>，"
            "会打印它接受了什么）。</p><nav><ul>" + "".join(toc) + "</ul></nav>"
            + "".join(sections) + "</body></html>")


def write(report_dir: Path, drift: list[Change], snippets: dict[str, Any], usage: dict[tuple[str, str], list[str]],
          project_root: Path, docs_dir: Path, font: Path | None = None) -> Path | None:
    """Write the report when there is drift and return its path; without drift remove a stale one."""
    from transformer_book.book.files import atomic_write_text

    target = path(report_dir)
    if not drift:
        target.unlink(missing_ok=True)
        return None
    atomic_write_text(target, render(drift, snippets, usage, project_root, docs_dir, font))
    return target
