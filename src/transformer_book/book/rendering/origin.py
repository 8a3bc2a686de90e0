"""Where a result on a page comes from, for the reader who wants to check it.

Every generated value, table, figure and claim carries its origin as one ``data-origin`` attribute (JSON):
the snippet and result key, the value at full precision, its kind, the tolerance it is checked with, and
the date and versions of the record it is checked against, with two links — to the snippet's code on the
same page and to the whole record. ``rendering/static/origin.js`` (shipped as ``assets/book/origin.js``) shows
it in a popover on hover, focus or tap; nothing here depends on JavaScript to be read (the attribute is plain
text in the HTML).
"""

from __future__ import annotations

import html
import json
import posixpath
from pathlib import Path

from transformer_book.book.checking import records
from transformer_book.book.results import EXACT, MEASURED, ROUNDING, TRAINED, Claim, Result

MEASURED_NOTE = "在构建本书的机器上测得"
RECORDS = "assets/records"  # the site folder the records are copied to (one JSON file per snippet)
SCRIPT = "assets/book/origin.js"  # the popover, shipped with the engine (no CDN, no build step)
EXPLORE_SCRIPT = "assets/book/explore.js"  # heatmaps read cell by cell, explorables' controls
STYLE = "assets/book/engine.css"  # the styles of both, one file: one request fewer before a page can paint
SCRIPTS = (SCRIPT, EXPLORE_SCRIPT)
STYLES = (STYLE,)


def assets() -> dict[str, Path]:
    """Site path → file of the engine's own script and style."""
    here = Path(__file__).parent / "static"
    return {SCRIPT: here / "origin.js", EXPLORE_SCRIPT: here / "explore.js", STYLE: here / "engine.css"}

KIND_TEXT = {
    EXACT: "精确值：确定性计算，每次构建都要与记录相符",
    TRAINED: "训练所得：随运算顺序浮动，带宽由一组扰动重算测出，并用留出的重算检验过",
    MEASURED: "实测值：随机器和负载而变，不与记录比较，只核对正文据此说出的结论",
    ROUNDING: "舍入误差：本次运行算出的值，随 CPU 和库而变，不与记录比较，只核对正文给它的上界",
}


def anchor(snippet: str) -> str:
    """The id of the anchor placed just before a snippet's code fold."""
    return "src-" + snippet.replace("/", "-").replace("_", "-")


def served_relative(target: str, page_url: str) -> str:
    """``target`` (a path in the site) relative to where a page is served (``lecture07/s02-self-attention/``):
    for links in raw HTML, which MkDocs does not rewrite."""
    here = page_url if page_url.endswith("/") or not page_url else posixpath.dirname(page_url) + "/"
    return posixpath.relpath(target, here.rstrip("/") or ".")


def record_target(snippet: str) -> str:
    return f"{RECORDS}/{snippet}.record.json"


def recorded(record: records.Record | None) -> str:
    """"2026-12-01；torch 2.13.0+cpu，numpy 2.4.6，Python 3.11.7" — when and with what the record was made."""
    prov = records.made_with(record)
    if not prov:
        return "还没有记录（新片段：第一次构建会写下它的记录）"
    parts = [f"{name} {prov.get(k)}" for name, k in (("torch", "torch"), ("numpy", "numpy"), ("Python", "python")) if prov.get(k)]
    return f"{prov.date or '?'}；" + "，".join(parts) + (f"；{prov.get('machine')}" if prov.get("machine") else "")


def _tolerance(result: Result, key: str, record: records.Record | None) -> str:
    kinds = result.kinds
    texts = []
    if EXACT in kinds:
        tol = getattr(result, "tolerance", None)
        if tol is not None:
            texts.append(f"精确部分：相对 {tol.rel:g}，绝对 {tol.abs:g}" + (f"（{tol.reason}）" if tol.reason else ""))
    if TRAINED in kinds:
        spans = []
        for n in result.numbers(key):
            if n.kind != TRAINED:
                continue
            tol, not_compared = records.calibrated_tolerance(record, n.series)
            if tol is None:
                spans.append("尚未校准")
            elif not_compared:
                spans.append("随机器而变，不比较数值，只核对相关的说法")
            else:
                spans.append(f"±{tol.abs:.3g}")
        uniq = list(dict.fromkeys(spans))
        runs = records.calibration_runs(record)
        texts.append("训练部分：" + ("、".join(uniq[:3]) + ("……" if len(uniq) > 3 else "") if uniq else "—")
                     + (f"（{runs} 次扰动重算所见最大偏离的 {records.CALIBRATION_FACTOR:g} 倍；页面上的数来自一次运行）"
                        if runs else ""))
    if MEASURED in kinds:
        texts.append("实测部分：不比较数值")
    if ROUNDING in kinds:
        texts.append("舍入部分：不比较数值")
    return "；".join(texts) or "—"


VARIES_NOTE = "其中训练所得的一部分数随机器而变：书里显示的是一次运行的结果，构建不按数值核对这部分数，只核对正文据此说出的结论"


def varies(result: Result, key: str, record: records.Record | None) -> bool:
    """Whether some trained number of the result is not compared as a number (calibration could not band it,
    or refused a band as wide as what it guards): then its caption says so, like its origin badge."""
    series = {n.series for n in result.numbers(key) if n.kind == TRAINED}  # a heatmap has thousands of numbers
    return any(records.calibrated_tolerance(record, s)[1] for s in series)


def _kind(result: Result) -> str:
    present = result.kinds  # computed once: a figure's walks all its plotted numbers
    kinds = [k for k in (EXACT, TRAINED, MEASURED, ROUNDING) if k in present]
    if not kinds:
        return "—"
    return "；".join(KIND_TEXT[k] for k in kinds)


def describe(snippet: str, key: str, result: Result, record: records.Record | None, page_url: str,
             measured_on: str = "") -> dict[str, str]:
    """The origin of one result as shown in its popover (keys are stable: origin.js and the tests read them).

    ``page_url`` is where the page is served (``lecture07/s02-self-attention/``): links in raw HTML are not
    rewritten by MkDocs, so the record's link is made relative to it here."""
    out = {"snippet": snippet, "key": key, "value": result.summary()}
    if result.decided:
        out["statement"] = result.statement
        out["margin"] = _claim_margin(key, result, record)
    else:
        out["kind"] = _kind(result)
        out["tolerance"] = _tolerance(result, key, record)
        if MEASURED in result.kinds and measured_on:
            out["measured"] = f"{MEASURED_NOTE}（{measured_on}）；换一台机器、换一种负载都会不同"
    out["recorded"] = recorded(record)
    out["source"] = "#" + anchor(snippet)
    if record is not None:
        out["record"] = served_relative(record_target(snippet), page_url)
    return out


def _claim_margin(key: str, claim: Claim, record: records.Record | None) -> str:
    """How far the claim is from flipping, against how far calibration saw its margin move."""
    cal = records.claim_calibration(record, key)
    if cal is None:
        return "比较的是确定的数，余量不随机器而变" if claim.check.margin is not None or claim.check.combined else "离散的事实，不随机器而变"
    runs = records.calibration_runs(record) or "?"
    moved = max((float(a.spread or 0.0) for a in cal.atoms.values()), default=0.0)
    worst = [a.worst for a in cal.atoms.values() if a.worst is not None]
    text = (f"{runs} 次扰动重算中，余量最多移动 {moved:.3g}" + (f"，最小余量 {min(worst):.3g}" if worst else "")
            + ("；稳健：余量远大于它的浮动" if cal.robust else "；余量在浮动之内"))
    if claim.uncertain:
        text += f"（正文已说明：{claim.uncertain}）"
    return text


# Characters that Markdown's inline patterns (math, code spans, links, escapes, emphasis) act on before
# raw HTML is protected: written as character references, which the browser reads back as the character.
_MARKDOWN_ACTIVE = str.maketrans({c: f"&#{ord(c)};" for c in "\\`$[]*_~^{}!"})


def attribute(origin: dict[str, str]) -> str:
    """``data-origin="…"``: the origin as escaped JSON, ready to put inside a tag (and safe from Markdown)."""
    text = html.escape(json.dumps(origin, ensure_ascii=False), quote=True)
    return 'data-origin="' + text.translate(_MARKDOWN_ACTIVE) + '"'


def badge(origin: dict[str, str]) -> str:
    """The small "来源" button placed beside a table's or figure's caption."""
    return f'<button type="button" class="book-origin book-origin-badge" {attribute(origin)}>来源</button>'
