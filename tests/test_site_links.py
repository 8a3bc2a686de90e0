"""Links and structure of the book: every internal link lands somewhere, and both seeds are there, in order.

* Every relative link (and every ``#anchor``) in every built page points at a file that exists and an
  ``id`` that exists in it — Chinese heading ids included (links carry them percent-encoded).
* Every section of the two seeds (../shared/seeds: lecture 7, sections 0–17; chapter 20) has its page,
  and the navigation shows the two parts, and the sections within each, in the seeds' order. Our titles
  are our own words (词元 for Token, 块 for Block …), so a lecture section is matched by its number and a
  chapter section by a key phrase of its seed heading.
"""

from __future__ import annotations

import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pytest
import yaml

from conftest import ROOT

SHARED = Path(os.environ.get("BOOK_SHARED_DIR", ROOT.parent / "shared"))
LECTURE_SEED = SHARED / "seeds" / "000_fad9b65c4b29693f.txt"
CHAPTER_SEED = SHARED / "seeds" / "004_623489f85c371c6e.txt"
CONTENT_MAP = SHARED / "CONTENT-MAP.md"


# --------------------------------------------------------------------------------------- internal links


class _PageParser(HTMLParser):
    """The ids a page defines and the links it makes (tag, attribute, value)."""

    LINK_ATTRS = {"a": "href", "link": "href", "area": "href", "img": "src", "script": "src", "source": "src",
                  "iframe": "src", "object": "data"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("name"):
            self.ids.add(a["name"])
        attr = self.LINK_ATTRS.get(tag)
        if attr and a.get(attr) is not None:
            if tag == "link" and (a.get("rel") or "") in ("canonical", "alternate"):
                return
            self.links.append((tag, attr, a[attr]))


def _parse(path: Path) -> _PageParser:
    parser = _PageParser()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


@pytest.fixture(scope="module")
def parsed_site(built_site: Path) -> dict[str, _PageParser]:
    """Every HTML page of the built site, by its path relative to the site root."""
    return {p.relative_to(built_site).as_posix(): _parse(p) for p in sorted(built_site.rglob("*.html"))}


def _target(site: Path, page: str, href: str) -> tuple[str, str] | None:
    """(file relative to the site root, fragment) a link on ``page`` points at; None for external links."""
    parts = urlsplit(href)
    if parts.scheme or parts.netloc or href.startswith("//"):
        return None  # http:, https:, mailto:, data:, javascript: …
    base = "/" + page
    resolved = urlsplit(urljoin(base, parts.path)) if parts.path else urlsplit(base)
    path = unquote(resolved.path).lstrip("/")
    if path == "" or path.endswith("/"):
        path += "index.html"
    elif (site / path).is_dir():
        path += "/index.html"
    return path, unquote(parts.fragment)


@pytest.mark.slow
def test_every_internal_link_and_anchor_resolves(built_site: Path, parsed_site: dict[str, _PageParser]) -> None:
    problems = []
    checked = anchors = 0
    for page, parsed in parsed_site.items():
        for tag, attr, href in parsed.links:
            if href in ("", "#"):  # the top of the page itself
                continue
            target = _target(built_site, page, href)
            if target is None:
                continue
            path, fragment = target
            checked += 1
            file = built_site / path
            if not file.is_file():
                problems.append(f"{page}: <{tag} {attr}={href!r}>: no file {path}")
                continue
            if fragment and path.endswith(".html"):
                anchors += 1
                ids = parsed_site[path].ids if path in parsed_site else _parse(file).ids
                if fragment not in ids:
                    problems.append(f"{page}: <{tag} {attr}={href!r}>: no id {fragment!r} in {path}")
    assert checked > 500 and anchors > 100, f"only {checked} links and {anchors} anchors checked"
    problems = list(dict.fromkeys(problems))  # a page's toc appears twice (sidebar and table of contents)
    assert not problems, f"broken internal links ({len(problems)}):\n  " + "\n  ".join(problems)


PAGE_BUDGET = 500_000  # bytes of HTML per page: a reader on a phone downloads the page before any of it shows


@pytest.mark.slow
def test_no_page_is_heavier_than_the_budget(built_site: Path) -> None:
    """Every HTML page stays under the budget; the five heaviest are printed (pytest -s) to watch the trend.

    What keeps pages light: the API reference is one page per module, figures are separate SVG files, and the
    notebook pages share one stylesheet instead of inlining JupyterLab's (~570 KB) into each."""
    sizes = sorted(((p.stat().st_size, p.relative_to(built_site).as_posix()) for p in built_site.rglob("*.html")),
                   reverse=True)
    print("heaviest pages:", ", ".join(f"{name} {size / 1000:.0f} KB" for size, name in sizes[:5]))
    print(f"site: {sum(f.stat().st_size for f in built_site.rglob('*') if f.is_file()) / 1e6:.1f} MB")
    assert len(sizes) >= 40
    over = [f"{name}: {size / 1000:.0f} KB" for size, name in sizes if size > PAGE_BUDGET]
    assert over == [], f"pages over {PAGE_BUDGET / 1000:.0f} KB: {over}"
    api = [name for _, name in sizes if name.startswith("api/")]
    assert len(api) >= 15, f"the API reference should be one page per module: {api}"


@pytest.mark.slow
def test_every_search_result_location_resolves(built_site: Path, parsed_site: dict[str, _PageParser]) -> None:
    """The search index sends readers to ``page/#anchor``: each must land on a heading that exists."""
    index = json.loads((built_site / "search" / "search_index.json").read_text(encoding="utf-8"))
    problems = []
    for doc in index["docs"]:
        path, fragment = _target(built_site, "index.html", doc["location"])
        if path not in parsed_site:
            problems.append(f"{doc['location']}: no page {path}")
        elif fragment and fragment not in parsed_site[path].ids:
            problems.append(f"{doc['location']}: no id {fragment!r} in {path}")
    assert not problems, f"search results that lead nowhere ({len(problems)}):\n  " + "\n  ".join(problems)


# ------------------------------------------------------------------------------ the seeds, section by section


# Chapter 20's sections, as the seed heads them (each must be a line of the seed), and the phrase our page
# title must contain. The seed calls the practice "实践路径：P08" and places a short pointer to it before the
# summary; the content map (Part B) lists 实践 P08 last, as our own page after the references.
CHAPTER_SECTIONS = [
    ("为什么不再排队传话", "排队传话"),
    ("第一步：把文本变成 Token", "把文本变成"),
    ("第二步：编号变成向量", "编号变成向量"),
    ("第三步：告诉模型位置", "告诉模型位置"),
    ("第四步：每个位置提出查询", "提出查询"),
    ("因果掩码：不能偷看答案", "因果掩码"),
    ("多头注意力：同时学习不同匹配方式", "多头注意力"),
    ("注意力之后，为什么还要前馈网络", "还要前馈网络"),
    ("一个解码器 Block 的完整旅程", "完整旅程"),
    ("从隐藏向量到下一个 Token", "从隐藏向量到下一个"),
    ("核心机制：并行训练，顺序生成", "并行训练"),
    ("它为什么能扩展，又在哪里昂贵", "为什么能扩展"),
    ("注意力权重告诉了我们什么", "注意力权重"),
    ("一次完整的数据流核对", "数据流核对"),
    ("Transformer 没有解决什么", "没有解决什么"),
    ("本章小结", "本章小结"),
    ("思考问题", "思考问题"),
    ("延伸阅读", "延伸阅读"),
    ("参考文献", "参考文献"),
]
PRACTICE = ("实践路径：P08 训练迷你 Transformer", "P08")


def _require_shared() -> None:
    for f in (LECTURE_SEED, CHAPTER_SEED, CONTENT_MAP):
        if not f.exists():
            pytest.skip(f"no {f} (the seeds live in ../shared beside the repository; BOOK_SHARED_DIR=… elsewhere)")


class _IgnoreTags(yaml.SafeLoader):
    """mkdocs.yml holds ``!!python/…`` tags (the slugify function): read them as nothing."""


_IgnoreTags.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)
_IgnoreTags.add_multi_constructor("!", lambda loader, suffix, node: None)


def _nav_parts() -> list[tuple[str, list[str]]]:
    """mkdocs.yml's nav: (title, [markdown files]) for each entry, in order."""
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_IgnoreTags)
    parts = []
    def files_of(value) -> list[str]:  # a page, a titled page, or a (nested) section
        if isinstance(value, list):
            return [f for v in value for f in files_of(v)]
        if isinstance(value, dict):
            return files_of(next(iter(value.values())))
        return [value]

    for entry in config["nav"]:
        (title, value), = entry.items() if isinstance(entry, dict) else ((None, entry),)
        parts.append((title, files_of(value)))
    return parts


def _title(doc: str) -> str:
    """The H1 of a page (a notebook: of its first Markdown cell)."""
    path = ROOT / "docs" / doc
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    else:
        text = path.read_text(encoding="utf-8")
    m = re.search(r"^# (.+)$", text, re.M)
    return m.group(1).strip() if m else ""


def _lecture_sections() -> list[tuple[int, str]]:
    seen: dict[int, str] = {}
    for m in re.finditer(r"^(\d{1,2})\. (\S.*)$", LECTURE_SEED.read_text(encoding="utf-8"), re.M):
        seen.setdefault(int(m.group(1)), m.group(2).strip())
    return list(seen.items())


def _part(parts: list[tuple[str, list[str]]], marker: str) -> tuple[int, list[str]]:
    found = [(i, files) for i, (title, files) in enumerate(parts) if title and marker in title]
    assert len(found) == 1, f"the nav should have one part titled …{marker}…: {[t for t, _ in parts]}"
    return found[0]


def test_the_nav_shows_lecture_7_then_chapter_20() -> None:
    _require_shared()
    parts = _nav_parts()
    lecture_at, _ = _part(parts, "第 7 讲")
    chapter_at, _ = _part(parts, "第 20 章")
    assert lecture_at < chapter_at, "the lecture (seed 000) comes before the chapter (seed 004)"
    content_map = CONTENT_MAP.read_text(encoding="utf-8")
    assert content_map.index("Part A — 第 7 讲") < content_map.index("Part B — 第20章")


def test_every_lecture_section_has_its_page_in_the_seed_order() -> None:
    _require_shared()
    seed = _lecture_sections()
    assert [n for n, _ in seed] == list(range(18)), f"seed 000 sections: {seed}"
    _, files = _part(_nav_parts(), "第 7 讲")
    ours = []
    for doc in files:
        assert (ROOT / "docs" / doc).exists(), f"the nav lists {doc}, which does not exist"
        m = re.match(r"第\s*(\d+)\s*节", _title(doc))
        assert m, f"{doc}: title {_title(doc)!r} does not start with 第 N 节"
        ours.append(int(m.group(1)))
    missing = [f"§{n} {t}" for n, t in seed if n not in ours]
    assert not missing, f"lecture sections without a page: {missing}"
    assert ours == [n for n, _ in seed], f"lecture pages in the nav are in the order {ours}"
    # Tolerant of our wording, not of a different subject: most Chinese characters of the seed's title recur.
    for (n, seed_title), doc in zip(seed, files):
        want = set(re.findall(r"[\u4e00-\u9fff]", seed_title))
        have = set(re.findall(r"[\u4e00-\u9fff]", _title(doc)))
        assert len(want & have) >= 0.6 * len(want), f"§{n}: seed {seed_title!r}, ours {_title(doc)!r} ({doc})"


def test_every_chapter_section_has_its_page_in_the_seed_order() -> None:
    _require_shared()
    seed_lines = {line.strip() for line in CHAPTER_SEED.read_text(encoding="utf-8").splitlines()}
    for heading, _ in CHAPTER_SECTIONS + [PRACTICE]:
        assert heading in seed_lines, f"seed 004 no longer has the section {heading!r}: update CHAPTER_SECTIONS"
    _, files = _part(_nav_parts(), "第 20 章")
    titles = []
    for doc in files:
        assert (ROOT / "docs" / doc).exists(), f"the nav lists {doc}, which does not exist"
        titles.append((doc, _title(doc)))
    positions = []
    missing = []
    for heading, phrase in CHAPTER_SECTIONS:
        at = [i for i, (_, t) in enumerate(titles) if phrase in t]
        if not at:
            missing.append(f"{heading} (no page title with {phrase!r})")
        else:
            positions.append((at[0], heading))
    practice = [doc for doc, t in titles if PRACTICE[1] in t]
    if not practice:
        missing.append(f"{PRACTICE[0]} (no page title with {PRACTICE[1]!r})")
    assert not missing, f"chapter sections without a page: {missing}\nour pages: {titles}"
    order = [h for _, h in sorted(positions)]
    assert order == [h for h, _ in CHAPTER_SECTIONS], f"chapter pages in the nav are in the order {order}"
    assert titles[0][0] == "chapter20/index.md", "the chapter's opening page comes first"


class _NavParser(HTMLParser):
    """The primary navigation of a built page: part labels and page links, in order (not the page's own toc)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0          # depth inside nav.md-nav--primary (0: outside)
        self.entries: list[list[str]] = []  # [kind, href, text]
        self._open: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if self.depth == 0:
            if tag == "nav" and "md-nav--primary" in cls:
                self.depth = 1
            return
        if tag == "nav":
            self.depth += 1
        if tag in ("a", "label") and "md-nav__link" in cls:
            href = a.get("href") or ""
            if not href.startswith("#"):
                self._open = [tag, href, ""]
                self.entries.append(self._open)

    def handle_endtag(self, tag: str) -> None:
        if self.depth == 0:
            return
        if tag in ("a", "label"):
            self._open = None
        if tag == "nav":
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self._open is not None:
            self._open[2] = (self._open[2] + " " + data.strip()).strip()


@pytest.mark.slow
def test_the_built_navigation_lists_both_parts_in_order(built_site: Path) -> None:
    """What a reader sees in the sidebar: every nav page, lecture 7 before chapter 20, in mkdocs.yml's order."""
    nav = _NavParser()
    nav.feed((built_site / "index.html").read_text(encoding="utf-8"))
    texts = [text for _, _, text in nav.entries]
    hrefs = [urljoin("/", href) for _, href, _ in nav.entries if href]
    first_lecture = next(i for i, t in enumerate(texts) if "第 7 讲" in t)
    first_chapter = next(i for i, t in enumerate(texts) if "第 20 章" in t)
    assert first_lecture < first_chapter, texts
    expected = []
    for _, files in _nav_parts():
        for doc in files:
            stem = doc.rsplit(".", 1)[0]
            page = "/" + (stem[: -len("index")] if stem == "index" or stem.endswith("/index") else stem + "/")
            expected.append(page)
            assert (built_site / page.lstrip("/") / "index.html").exists(), f"{doc} has no built page {page}"
    shown = [h for h in dict.fromkeys(hrefs) if h in expected]
    assert shown == expected, f"the sidebar shows the pages in the order {shown}"
