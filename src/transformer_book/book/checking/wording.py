"""Does a sentence point the way its claim does? The words of comparison in a sentence that cites a claim,
against the words of the claim's own statement.

A claim decides a comparison ("一个块比二元模型的验证损失低 0.05 以上"); the sentence that cites it is free
prose. If an edit turns the sentence round ("……比二元模型高") the claim still holds and nothing else would
notice. This check reads both for words that say which way a comparison goes — 高于/低于, 超过/不到,
比……高/比……低, 上升/下降 … — and reports a sentence whose words all point the opposite way of its claim's.
It says nothing where either has no such word. Where a sentence uses both directions it compares several
things; then the clause that ends at the citation (after the last ，；：) is the one held to the claim, and
if that clause has no such word or points both ways, a reviewer reads it against the claims listing.

A negation just before a word turns it round: 不高于 points down, 没有下降 points up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

UP, DOWN = 1, -1

# Words that say "more / higher / larger" (UP) or "less / lower / smaller" (DOWN) on their own. Words that
# judge rather than measure (领先, 好于, 不如 …) are left out: a lower loss "leads".
_WORDS = {
    UP: ("高于", "大于", "多于", "超过", "超出", "更高", "更大", "更多", "上升", "升高", "增大", "变大",
         "提高", "增加", "快于"),
    DOWN: ("低于", "小于", "少于", "不到", "不足", "更低", "更小", "更少", "下降", "降低", "减小", "变小",
           "减少", "慢于", "降下"),
}
# 比 X 高 / 比 X 低: the adjective after a 比 phrase (within one clause).
_COMPARATIVE = re.compile(r"(?<![对相])比(?![较例如方率值重特])[^，。；！？,;]{0,24}?(高|低|大|小|多|少|强|弱)")
_ADJECTIVE = {"高": UP, "大": UP, "多": UP, "强": UP, "低": DOWN, "小": DOWN, "少": DOWN, "弱": DOWN}
_NEGATION = re.compile(r"(不|没有|没|未|并非|并不)$")
# Words whose negation is part of the word itself (不到, 不足, 不如): never turned round again.
_FIXED = {"不到", "不足"}


def directions(text: str) -> set[int]:
    """The directions of comparison ``text`` states (UP, DOWN, both, or none)."""
    found: set[int] = set()
    spans: list[tuple[int, int]] = []
    for direction, words in _WORDS.items():
        for word in words:
            for m in re.finditer(re.escape(word), text):
                if any(a <= m.start() < b for a, b in spans):
                    continue
                spans.append((m.start(), m.end()))
                d = direction
                if word not in _FIXED and _NEGATION.search(text[max(0, m.start() - 2):m.start()]):
                    d = -d
                found.add(d)
    for m in _COMPARATIVE.finditer(text):
        if any(a <= m.start(1) < b for a, b in spans):
            continue
        d = _ADJECTIVE[m.group(1)]
        if _NEGATION.search(text[max(0, m.start() - 2):m.start()]):  # 不比 X 高
            d = -d
        found.add(d)
    return found


@dataclass(frozen=True)
class Conflict:
    where: str  # page:line of the citation
    snippet: str
    key: str
    sentence: str
    statement: str

    def describe(self) -> str:
        return (f"{self.where}: the sentence points the other way from the claim it cites ({self.snippet}:{self.key}):"
                f" sentence «{self.sentence}» — claim «{self.statement}»; make the sentence say what the claim checks")


_CLAUSE = re.compile(r"[，；：,;:]")


def opposite(sentence: str, statement: str) -> bool:
    """True when the sentence's words of comparison point against the statement's: all of the sentence's, or,
    where the sentence compares several things (both directions), those of the clause that ends at the claim —
    "每一步都比上一步低：A 比 B 高{{ claim A<B }}" is turned round in its last clause."""
    claimed = directions(statement)
    if len(claimed) != 1:
        return False
    said = directions(sentence)
    if len(said) == 2:  # several comparisons: the clause that ends at the citation is the claim's
        said = directions(_CLAUSE.split(sentence.rstrip("，；：,;: "))[-1])
    return len(said) == 1 and said != claimed


def conflicts(cited: list) -> list[Conflict]:
    """The cited claims (:class:`..rendering.claim_index.CitedClaim`) whose sentence points the other way."""
    out = []
    for c in cited:
        if c.claim is None or not c.where or not c.sentence:
            continue
        if opposite(c.sentence, c.claim.statement):
            out.append(Conflict(c.where[0], c.snippet, c.key, c.sentence, c.claim.statement))
    return out
