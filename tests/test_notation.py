"""The pages follow the book's one notation (docs/glossary.md, section 记号): inside math, no symbol the table
retires — a sequence length written n, the width written d_model or D, the head count H, a head index ℓ or h —
and the feed-forward network in row form (xW₁), or else in a paragraph that says it is the column-vector form."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT

DOCS = ROOT / "docs"

# ------------------------------------------------------------------ where the math is

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
DISPLAY = re.compile(r"\$\$(.+?)\$\$", re.S)
INLINE = re.compile(r"(?<![\\$])\$(?!\$)([^$\n]+?)(?<![\\\s])\$(?!\$)")


@dataclass(frozen=True)
class Math:
    line: int  # line of the page on which the formula starts
    text: str  # the TeX between the dollars
    before: str  # the prose just before it on its line (for words such as 长度为, 头数为)
    after: str  # the prose just after it on its line
    paragraph: str  # the whole paragraph (blank-line separated) holding it


def formulas(text: str) -> list[Math]:
    """Every $…$ and $$…$$ of a Markdown text with its line, outside fenced code and code spans (captions of
    {{ table … "…" }} tags are included: the reader sees their math)."""
    lines = []
    in_code = False
    for line in text.splitlines():
        if FENCE.match(line):
            in_code = not in_code
            lines.append("")
            continue
        lines.append("" if in_code else CODE_SPAN.sub(lambda m: " " * len(m.group()), line))
    page = "\n".join(lines)
    starts = [0] + [m.end() for m in re.finditer(r"\n", page)]
    paragraphs = [(m.start(), m.end()) for m in re.finditer(r"(?:[^\n]+\n?)+", page)]

    def where(offset: int) -> tuple[int, str, str, str]:
        line = max(i for i, s in enumerate(starts) if s <= offset)
        para = next((page[a:b] for a, b in paragraphs if a <= offset < b), "")
        return line + 1, page[starts[line]:offset], para, ""

    out = []
    taken = [False] * len(page)
    for m in DISPLAY.finditer(page):
        line, _, para, _ = where(m.start())
        out.append(Math(line, m.group(1), "", "", para))
        for k in range(m.start(), m.end()):
            taken[k] = True
    for m in INLINE.finditer(page):
        if taken[m.start()]:
            continue
        line, before, para, _ = where(m.start())
        end_of_line = page.find("\n", m.end())
        after = page[m.end(): end_of_line if end_of_line >= 0 else len(page)]
        out.append(Math(line, m.group(1), before, after, para))
    return sorted(out, key=lambda m: m.line)


def pages() -> list[tuple[str, str]]:
    """Every reader's page under docs/: Markdown pages (not the authors' guides) and notebooks' markdown cells."""
    out = []
    for md in sorted(DOCS.rglob("*.md")):
        if md.name.startswith("authoring"):  # the authors' guides and the generated list of claims
            continue
        out.append((md.relative_to(ROOT).as_posix(), md.read_text(encoding="utf-8")))
    for nb in sorted(DOCS.rglob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        for n, cell in enumerate(cells, 1):
            if cell["cell_type"] == "markdown":
                out.append((f"{nb.relative_to(ROOT).as_posix()}#cell{n}", "".join(cell["source"])))
    return out


# ------------------------------------------------------------------ what the table retires


def _plain(tex: str) -> str:
    """The TeX with words inside \\text{…}, \\mathrm{…}, \\operatorname{…} blanked and command names removed, so that
    the letters left are the formula's own symbols (the D of \\text{Dropout} or \\Delta is not a width)."""
    tex = re.sub(r"\\(?:text|mathrm|operatorname|textrm|mathcal|mathbb|mathbf)\s*\{[^{}]*\}", " ", tex)
    return re.sub(r"\\[A-Za-z]+", " ", tex)


# A sequence length written n: n next to a product, a power, a big-O, a shape, a width, a length typed as a number,
# or the upper end of a sum or a list x_1, …, x_n. RoPE's positions m and n (m − n, nθ, k_n) match none of these.
_N = r"(?<![A-Za-z\\])n(?![A-Za-z])"  # the letter n as a symbol of its own (not the n of \\in, in, mn)
SEQ_N = re.compile("|".join([
    _N + r"\s*\\times", r"\\times\s*" + _N, r"O\(\s*\d*" + _N, _N + r"\s*\^", r"\\mathbb\{R\}\^\{\s*" + _N,
    r"(?<![A-Za-z\\])n\s*(?:\\,|,)?\s*d(?![A-Za-z])", _N + r"\s*\\cdot", _N + r"\s*/", _N + r"\s*=\s*\d*d(?![A-Za-z])",
    _N + r"\s*[<>]", _N + r"\s*=\s*\d{3,}", _N + r"\s*[-+−]\s*\d",
    r"\\dots\s*,?\s*[A-Za-z]_\{?n\}?(?![A-Za-z])", r"\\sum_\{[^}]*\}\^\{?\s*n\s*\}?(?![A-Za-z])",
]))
# words that make a bare $n$ a length: 长为 n、长度为 n、序列长 n; n 个词、n 个位置、n 个词元、n 步
LENGTH_BEFORE = re.compile(r"(长|长度|句长|长度为|长为|长是)\s*$")
LENGTH_AFTER = re.compile(r"^\s*(个(词|位置|token)|步)")
ORDINAL = re.compile(r"第\s*$")  # 第 n 个词 is a position, not a length

D_MODEL = re.compile(r"d_\{?\s*(?:\\(?:text|mathrm|rm|textrm)\s*\{)?\s*model")
WIDTH_D = re.compile(r"(?<![a-z])D(?![a-z])(?!_\{?KL)")

# H as the head count: in a shape, next to d_h, as a divisor, a typed count, H_kv, or a factor of a product.
HEADS_H = re.compile(
    r"[\[(,]\s*H\s*[,)\]]|\bH\s*(?:\\,|\\;)?\s*[dD]_\{?h\b|\bH_\{?kv|/\s*H\b|\bH\s*=\s*\d|\\times\s*H\b|\bH\s*\\times"
)

# ℓ or h as the index of a head: head_ℓ, W^Q_ℓ, W_ℓ^Q, ℓ = 1, …, h
HEAD_INDEX = re.compile(
    r"head\}?_\{?\s*(?:\\ell|h)\b|W\^\{?[QKVO]\}?_\{?\s*(?:\\ell|h)\b|W_\{?\s*(?:\\ell|h)\s*\}?\^\{?[QKVO]"
    r"|\\ell\s*=\s*1\s*,\s*\\dots\s*,\s*h\b"
)

# … except the last item of a list head_1, …, head_h (there h is the count, the last index)
LIST_END = re.compile(r"\\dots\s*[;,]?\s*(?:\\[,;!]\s*)*(?:\\(?:text|mathrm)\{)?$")

# the feed-forward network in column form: a weight matrix W_1, W_2 or W_3 times the input x on its right
FFN_COLUMN = re.compile(r"W_\{?[123]\}?\s*(?:\\,|\\;|\\!)?\s*x(?![A-Za-z])")


def violations(m: Math) -> list[str]:
    """What in one formula breaks the notation table, each as a short reason."""
    tex, plain = m.text, _plain(m.text)
    found = []
    bare_length = tex.strip() == "n" and not ORDINAL.search(m.before) and (
        LENGTH_BEFORE.search(m.before) or LENGTH_AFTER.search(m.after))
    if SEQ_N.search(tex) or bare_length:
        found.append("序列长度写成 n（改用 T）")
    if D_MODEL.search(tex):
        found.append("模型宽度写成 d_model（改用 d）")
    if WIDTH_D.search(plain):
        found.append("模型宽度写成 D（改用 d）")
    if HEADS_H.search(tex) or (tex.strip() == "H" and "头" in m.before + m.after):
        found.append("头数写成 H（改用 h）")
    if any(not LIST_END.search(tex[:hit.start()]) for hit in HEAD_INDEX.finditer(tex)):
        found.append("头的编号写成 ℓ 或 h（改用 r）")
    if FFN_COLUMN.search(tex) and "列向量" not in m.paragraph:
        found.append("前馈网络写成列向量形式 W₂σ(W₁x)（改成 σ(xW₁)W₂，或在同一段说明这是列向量写法）")
    return found


# Formulas that match a rule but are not the retired use, each with its reason: (page, the formula's TeX, reason).
ALLOWED: list[tuple[str, str, str]] = []


def offenders(where: str, text: str) -> list[str]:
    allowed = {(page, tex) for page, tex, _ in ALLOWED}
    out = []
    for m in formulas(text):
        if (where, m.text.strip()) in allowed:
            continue
        for reason in violations(m):
            out.append(f"{where}:{m.line}: {reason}: ${' '.join(m.text.split())[:90]}$")
    return out


# ------------------------------------------------------------------ the rules themselves


def _flags(tex: str, before: str = "", after: str = "", paragraph: str = "") -> list[str]:
    return violations(Math(1, tex, before, after, paragraph or tex))


@pytest.mark.parametrize("tex, before, after", [
    (r"X \in \mathbb{R}^{n \times d}", "", ""),
    (r"O(n^2 d)", "", ""),
    (r"O(n)", "", ""),
    (r"4nd^2", "", ""),
    (r"n / (n + 6d)", "", ""),
    (r"n = 6d =", "", ""),
    (r"n = 131072", "", ""),
    (r"\sum_{j'=1}^{n} \exp(e_{ij'})", "", ""),
    (r"x_1, \dots, x_n", "", ""),
    (r"n", "长度为 ", " 的一句话"),
    (r"n", "设输入是 ", " 个词向量"),
    (r"E \in \mathbb{R}^{V \times d_{\text{model}}}", "", ""),
    (r"[B, T, D]", "", ""),
    (r"T = 2LD", "", ""),
    (r"[B, H, T, d_h]", "", ""),
    (r"d_h = d / H", "", ""),
    (r"H", "头数为 ", ""),
    (r"\text{head}_\ell = \operatorname{Attention}(XW^Q_\ell, XW^K_\ell, XW^V_\ell)", "", ""),
    (r"W_h^Q", "", ""),
    (r"\text{head}_1, \dots, \text{head}_h \text{ 里的 } \text{head}_h", "", ""),
    (r"\operatorname{FFN}(x) = W_2\, \operatorname{ReLU}(W_1 x + b_1) + b_2", "", ""),
    (r"W_2\big(\text{SiLU}(W_1 x) \odot W_3 x\big)", "", ""),
])
def test_each_retired_form_is_flagged(tex: str, before: str, after: str) -> None:
    assert _flags(tex, before, after)


@pytest.mark.parametrize("tex, before, after", [
    (r"X \in \mathbb{R}^{T \times d}", "", ""),
    (r"O(T^2 d)", "", ""),
    (r"q^\top R\big((n - m)\theta\big)\, k", "", ""),  # RoPE: positions m and n
    (r"\operatorname{Re}\big[q e^{im\theta} \cdot \overline{k e^{in\theta}}\big]", "", ""),
    (r"m - n = -3", "", ""),
    (r"n = 1", "位置 ", ""),  # a RoPE position in an exercise
    (r"n", "位置 ", " 的键"),
    (r"\dfrac{n}{2}", "", ""),
    (r"\text{Dropout}(x)", "", ""),
    (r"\lVert H - \mathbf{1}\bar h \rVert_F", "", ""),  # a matrix of hidden states
    (r"\operatorname{CrossAttention}(H^{\text{dec}}, H^{\text{enc}})", "", ""),
    (r"\text{head}_r = \operatorname{Attention}(XW^Q_r, XW^K_r, XW^V_r), \quad r = 1, \dots, h", "", ""),
    (r"d_h = d / h", "", ""),
    (r"\left[\text{head}_1;\, \dots;\, \text{head}_h\right] W^O", "", ""),  # h heads, the last is head_h
    (r"x^{(\ell+1)} = x^{(\ell)} + F(x^{(\ell)})", "", ""),  # ℓ as the index of a layer
    (r"\operatorname{FFN}(x) = \varphi(xW_1 + b_1)\,W_2 + b_2", "", ""),
])
def test_the_table_s_own_notation_is_not_flagged(tex: str, before: str, after: str) -> None:
    assert _flags(tex, before, after) == []


def test_a_column_form_ffn_is_allowed_beside_its_bridge() -> None:
    bridge = "有些文献用列向量，写成 $W_2\\,\\varphi(W_1 x + b_1) + b_2$：那里的 $W_1$、$W_2$ 是这里的转置。"
    (m,) = [f for f in formulas(bridge) if "W_1 x" in f.text]
    assert violations(m) == []
    assert offenders("p.md", "前馈网络是 $W_2\\,\\varphi(W_1 x + b_1) + b_2$。") != []


def test_formulas_are_found_with_their_lines() -> None:
    text = "# 标题\n\n长度为 $n$ 的句子\n\n```python\nx = '$n \\times d$'\n```\n\n$$\nQ \\in \\mathbb{R}^{n \\times d}\n$$\n"
    assert [(m.line, m.text.strip()) for m in formulas(text)] == [(3, "n"), (9, r"Q \in \mathbb{R}^{n \times d}")]
    assert [o.split(": ")[0] for o in offenders("p.md", text)] == ["p.md:3", "p.md:9"]


# ------------------------------------------------------------------ the pages


def test_every_allowed_formula_is_still_on_its_page() -> None:
    texts = dict(pages())
    stale = [f"{page}: ${tex}$" for page, tex, _ in ALLOWED
             if page not in texts or tex not in {m.text.strip() for m in formulas(texts[page])}]
    assert stale == []


@pytest.mark.parametrize("where, text", pages(), ids=[where for where, _ in pages()])
def test_no_page_uses_a_retired_symbol(where: str, text: str) -> None:
    """Every page under docs/ (both parts, the glossary, the home page, the notebooks' prose)."""
    assert offenders(where, text) == []
