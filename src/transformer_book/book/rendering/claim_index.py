"""Every claim beside the sentence that cites it: page:line, the sentence, the claim's statement, its comparison,
margin and calibration — read from the records, so that a reviewer can check that each sentence says no more
than its claim decides (``python -m transformer_book claims``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from transformer_book.book.checking import records
from transformer_book.book.rendering.pages import PageRefError, Ref, find_refs
from transformer_book.book.results import Claim, from_data, result_kind

_SENTENCE_END = "。！？"  # a semicolon joins clauses of one sentence: a claim after it backs the whole sentence
_BLOCK = re.compile(r"^(#|\||\?\?\?|!!!|```)")  # headings, tables, admonitions, fences (a directive alone: pages)


@dataclass
class CitedClaim:
    snippet: str
    key: str
    where: list[str]  # page:line of every citation
    sentence: str  # the sentence before the first citation
    claim: Claim | None  # None: the record has no such claim (build first)
    calibration: records.ClaimCalibration | None

    @property
    def verdict(self) -> str:
        if self.claim is None:
            return "无记录"
        if not self.claim.holds:
            return "不成立"
        if self.calibration is None:
            return "未校准（输入是确定的数）" if self.claim.check.margin is not None or self.claim.check.combined else "离散事实"
        if self.calibration.robust:
            return "稳健"
        return "在噪声之内" + ("（句中已说明）" if self.claim.uncertain else "")

    def seeds_text(self) -> str:
        """``3 个种子：效应 0.12，种子间相差 0.03（效应 ÷ 相差 4.0）`` for a claim over seeds; "单次运行" for a
        claim about one trained run; "" for one about exact numbers."""
        if self.claim is None:
            return ""
        check = self.claim.check
        if check.op != "seeds":
            return "单次运行" if self.calibration is not None else ""
        effect, spread = check.effect, check.seed_spread
        if effect is None:
            return f"{len(check.seeds)} 个种子（离散的比较）"
        ratio = "∞" if not spread else f"{effect / spread:.3g}"
        return f"{len(check.seeds)} 个种子：效应 {effect:.4g}，种子间相差 {spread:.3g}（效应 ÷ 相差 {ratio}）"

    def margin_text(self) -> str:
        if self.calibration is None:
            return ""
        parts = []
        for path, a in self.calibration.atoms.items():
            spread = float(a.spread or 0.0)
            m = a.margin
            ratio = "∞" if m is None or spread == 0 else f"{float(m) / spread:.3g}"
            parts.append(f"{path}: 余量 {m if m is None else format(float(m), '.4g')}，浮动 {spread:.3g}，"
                         f"余量÷浮动 {ratio}，成立 {a.held}")
        return "；".join(parts)


def _decided(kind: str) -> bool:
    """A verdict kind (a claim): what this listing is about."""
    return getattr(result_kind(kind), "decided", False)


def _paragraph_sentence(lines: list[str], index: int, tag_start: int, alone: set[int], spans: dict[int, list[Ref]]) -> str:
    """The sentence that ends at a claim tag: from the previous sentence end (in the same paragraph) to the tag.
    ``alone``: the lines that hold a directive of their own (they end a paragraph); ``spans``: the inline
    directives of each line (claims are left out of the sentence, values show as ⟨key⟩)."""
    start = index
    while start > 0 and lines[start - 1].strip() and start - 1 not in alone and not _BLOCK.match(lines[start - 1].strip()):
        start -= 1

    def prose(i: int, upto: int) -> str:
        out, pos = [], 0
        for ref in spans.get(i, []):
            if ref.start >= upto:
                break
            out.append(lines[i][pos:ref.start])
            out.append("" if _decided(ref.kind) else f"⟨{ref.key}⟩")
            pos = ref.end
        out.append(lines[i][pos:upto])
        return "".join(out).strip()

    before = " ".join(prose(i, len(lines[i])) for i in range(start, index)) + " " + prose(index, tag_start)
    before = before.replace("**", "")
    cut = max(before.rstrip(_SENTENCE_END + " ").rfind(c) for c in _SENTENCE_END)
    text = before[cut + 1:] if cut >= 0 else before
    # links keep their text: their targets are relative to the page the sentence is on, not to a listing
    text = re.sub(r"\[([^\]]*)\](\([^)]*\)|\[[^\]]*\])", r"\1", text)
    return re.sub(r"\s+", " ", text.lstrip("-*> ")).strip()


def citations(docs_dir: Path) -> Iterator[tuple[str, str, str, str]]:
    """(snippet, key, page:line, sentence) for every ``{{ claim … }}`` in the book's pages."""
    for md in sorted(docs_dir.rglob("*.md")):
        page = md.relative_to(docs_dir).as_posix()
        text = md.read_text(encoding="utf-8")
        try:
            refs = find_refs(text, page)
        except PageRefError:
            continue
        lines = text.split("\n")
        alone = {r.index for r in refs if r.own_line}
        spans: dict[int, list[Ref]] = {}
        for r in refs:
            if not r.own_line:
                spans.setdefault(r.index, []).append(r)
        for ref in refs:
            if _decided(ref.kind):
                yield ref.snippet, ref.key, ref.where, _paragraph_sentence(lines, ref.index, ref.start, alone, spans)


def index(docs_dir: Path, record_paths: dict[str, Path]) -> list[CitedClaim]:
    """Every claim cited by a page, and every recorded claim no page cites (with an empty ``where``)."""
    found: dict[tuple[str, str], CitedClaim] = {}

    def record(sid: str) -> records.Record | None:  # records.read remembers each record file by its version
        path = record_paths.get(sid)
        return records.read(path) if path is not None else None

    def claim_of(sid: str, key: str) -> Claim | None:
        data = records.results(record(sid)).get(key)
        try:
            return from_data(data) if data and _decided(data.get("type", "")) else None
        except ValueError:  # an older record: listed as having none until it is accepted again
            return None

    for sid, key, where, sentence in citations(docs_dir):
        if (sid, key) in found:
            found[sid, key].where.append(where)
            continue
        found[sid, key] = CitedClaim(sid, key, [where], sentence, claim_of(sid, key),
                                     records.claim_calibration(record(sid), key))
    for sid in sorted(record_paths):
        for key, data in records.results(record(sid)).items():
            if _decided(data.get("type", "")) and (sid, key) not in found:
                found[sid, key] = CitedClaim(sid, key, [], "", claim_of(sid, key), records.claim_calibration(record(sid), key))
    return list(found.values())


def as_text(claims: list[CitedClaim]) -> str:
    out = []
    for c in claims:
        out.append(f"{', '.join(c.where) or '（没有页面引用）'}  {c.snippet}:{c.key}  [{c.verdict}]")
        out.append(f"  句子：{c.sentence}")
        if c.claim is not None:
            out.append(f"  说法：{c.claim.statement}")
            out.append(f"  比较：{c.claim.check.describe()}")
            if c.seeds_text():
                out.append(f"  种子：{c.seeds_text()}")
            if c.claim.uncertain:
                out.append(f"  句中说明的不确定：{c.claim.uncertain}")
        if c.margin_text():
            out.append(f"  校准：{c.margin_text()}")
    robust = sum(1 for c in claims if c.verdict == "稳健")
    out.append(f"{len(claims)} 个说法；校准为稳健的 {robust} 个，在噪声之内的 "
               f"{sum(1 for c in claims if c.verdict.startswith('在噪声之内'))} 个")
    return "\n".join(out)


def as_markdown(claims: list[CitedClaim], link_from: str | None = None) -> str:
    """One Markdown table. ``link_from``: the page the table is placed on; each page:line becomes a link."""
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("{{", "{ {").replace("\n", " ")

    def where(w: str) -> str:
        if link_from is None:
            return cell(w)
        page = w.rsplit(":", 1)[0]
        depth = link_from.count("/")
        return f"[{cell(w)}]({'../' * depth}{page})"

    rows = ["| 位置 | 句子 | 说法 | 比较 | 效应与种子间的差 | 判定 |", "|---|---|---|---|---|---|"]
    for c in claims:
        rows.append("| " + " | ".join((
            "<br>".join(where(w) for w in c.where) or "—", cell(c.sentence), cell(c.claim.statement) if c.claim else "—",
            cell(c.claim.check.describe()) if c.claim else "—", cell(c.seeds_text()) or "—", cell(c.verdict))) + " |")
    return "\n".join(rows)


PAGE = "authoring-claims.md"  # the authors' guide page generated at each build (not a file in docs/)


def page_markdown(claims: list[CitedClaim]) -> str:
    """The authors' guide page: every claim beside its sentence, made from the records at build time."""
    robust = sum(1 for c in claims if c.verdict == "稳健")
    noisy = sum(1 for c in claims if c.verdict.startswith("在噪声之内"))
    return "\n".join([
        "# 说法一览",
        "",
        "这一页在每次构建时由记录生成，与 `python -m transformer_book claims --markdown` 的输出相同。"
        "每一行是正文里的一个说法标签：它所在的 `页面:行号`，标签结束的那句话，说法本身，"
        "判定它的比较（带这次记录的数和余量），以及校准给出的判定。"
        "审读时逐行对照“句子”和“比较”：句子说的不能比比较核对的更多。"
        "“在噪声之内（句中已说明）”的说法，余量不到扰动浮动的 3 倍，句子里必须写明这一点。"
        "比较训练结果的说法在每个种子上各算一次（`every_seed`），每个种子都成立才算成立；"
        "“效应与种子间的差”一栏给出各种子余量的平均和最大最小之差：只有效应是相差的好几倍，"
        "句子才配用“明显”“一截”“远低于”这样的词。",
        "",
        f"共 {len(claims)} 个说法；校准为稳健的 {robust} 个，在噪声之内的 {noisy} 个。",
        "",
        as_markdown(claims, link_from=PAGE),
        "",
    ])
