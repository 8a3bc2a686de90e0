"""A result kind added from outside the engine (issue 41): one class, registered by a module the book names.

The small book below defines a kind of its own — a gauge, one number in [0, 1] drawn as a ``<meter>`` — in a
module beside its mkdocs.yml, names that module in the plugin's ``result_kinds`` option, and places the result
with a directive of the kind's name. Nothing in the engine knows the kind: the build records it, shows it,
prints it in a terminal, reports its drift (the command line and the HTML report), and refuses a directive
of a kind nobody registered, naming page:line and the kinds it knows.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MKDOCS_YML, book_env, mkdocs_build, output, write

GAUGES = '''
"""这本小书自己的结果类型：一个 0~1 之间的数，画成一根进度条。"""

from dataclasses import dataclass
from typing import Any, Iterator

from transformer_book.book.results import EXACT, Number, Result, format_number, register


@register
@dataclass
class Gauge(Result):
    value: float
    kind: str = EXACT
    type_name = "gauge"
    word = "进度条"

    def numbers(self, key: str) -> Iterator[Number]:
        yield Number(key, self.value, self.kind, key)

    def validate(self, snippet: str, key: str) -> None:
        if not 0.0 <= self.value <= 1.0:
            raise TypeError(f"{snippet}: Gauge {key!r} is {self.value}, not in [0, 1]")

    def to_data(self) -> dict[str, Any]:
        return {"type": "gauge", "kind": self.kind, "value": self.value}

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> "Gauge":
        return cls(d["value"], d.get("kind", EXACT))

    def render(self, renderer: Any, ref: Any, caption: str, badge: str) -> str:
        shown = format_number(self.value, ".0%")
        return f'<p class="gauge"><meter min="0" max="1" value="{self.value}">{shown}</meter> {caption} {badge}</p>\\n'

    def terminal(self, key: str) -> str:
        return f"{key}: 进度 {format_number(self.value, '.0%')}"
'''

SNIPPET = '''
from gauges import Gauge


def compute():
    return {"done": Gauge(LEVEL)}
'''


@pytest.fixture
def book(tmp_path: Path) -> Path:
    write(tmp_path / "mkdocs.yml", MKDOCS_YML.replace("      preload: []\n", "      preload: []\n      result_kinds: [gauges]\n"))
    write(tmp_path / "gauges.py", GAUGES)
    write(tmp_path / "snippets" / "part" / "g.py", "LEVEL = 0.42\n" + SNIPPET)
    write(tmp_path / "docs" / "index.md", "# 首页\n")
    write(tmp_path / "docs" / "part" / "page.md", '# 页\n\n完成了多少：\n\n{{ gauge part/g:done "完成度" }}\n')
    return tmp_path


def test_a_kind_registered_by_the_book_is_recorded_shown_printed_and_its_drift_reported(book: Path) -> None:
    done = mkdocs_build(book, BOOK_FRESH="1")
    assert done.returncode == 0, output(done)
    html = (book / "site" / "part" / "page" / "index.html").read_text(encoding="utf-8")
    assert '<meter min="0" max="1" value="0.42">42%</meter> 完成度' in html
    record = json.loads((book / "snippets" / "part" / "g.record.json").read_text(encoding="utf-8"))
    assert record["results"]["done"] == {"type": "gauge", "kind": "exact", "value": 0.42}

    run = subprocess.run([sys.executable, "-m", "transformer_book", "run", "part/g"], cwd=book, env=book_env(),
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "done: 进度 42%" in run.stdout, run.stdout + run.stderr

    write(book / "snippets" / "part" / "g.py", "LEVEL = 0.5\n" + SNIPPET)
    drift = mkdocs_build(book)
    assert drift.returncode != 0
    assert "done: recorded 0.42, now 0.5" in output(drift) and "shown at: part/page.md:5" in output(drift)
    report = (book / ".book-cache" / "report" / "drift.html").read_text(encoding="utf-8")
    assert "进度条" in report and "part/g" in report


REMARKS = '''
"""这本小书自己的一条指令：{{ remark 一句话 }} 在页面上是一段旁注，在本页的 notebook 里是一个 Markdown 格。"""

import re

from transformer_book.book.rendering.pages import Directive, register_directive

register_directive(Directive(
    "remark", re.compile(r"^(?P<indent>[ \\t]*)\\{\\{\\s+remark\\s+(?P<text>[^}]+?)\\s*\\}\\}\\s*$"),
    lambda m, page: ("", m["text"]),
    site=lambda ref, writer: f'<p class="remark">旁注：{ref.key}</p>\\n',
    notebook=lambda ref, excerpt: ("markdown", f"> 旁注：{ref.key}"),
    names_snippet=False))
'''


def test_a_directive_registered_by_the_book_is_placed_on_the_page_and_in_its_notebook(book: Path) -> None:
    """A directive that is not a result, added from outside the engine: one ``register_directive`` call in a module
    the book names. The page shows what it renders to, the page's notebook gets its cell, in place."""
    write(book / "mkdocs.yml", MKDOCS_YML.replace("      preload: []\n", "      preload: []\n      result_kinds: [gauges, remarks]\n"))
    write(book / "remarks.py", REMARKS)
    write(book / "docs" / "part" / "page.md", '# 页\n\n完成了多少：\n\n{{ gauge part/g:done "完成度" }}\n\n'
                                              '{{ remark 进度条只画了一个数 }}\n\n最后一段。\n')
    done = mkdocs_build(book, BOOK_FRESH="1")
    assert done.returncode == 0, output(done)
    html = (book / "site" / "part" / "page" / "index.html").read_text(encoding="utf-8")
    assert '<p class="remark">旁注：进度条只画了一个数</p>' in html and "{{ remark" not in html
    notebook = json.loads((book / "site" / "part" / "page" / "page.ipynb").read_text(encoding="utf-8"))
    cells = ["".join(c["source"]) for c in notebook["cells"]]
    assert cells.index("> 旁注：进度条只画了一个数") == cells.index("最后一段。") - 1, cells


def test_a_result_the_snippet_cannot_give_is_refused_by_its_kind(book: Path) -> None:
    write(book / "snippets" / "part" / "g.py", "LEVEL = 1.5\n" + SNIPPET)
    done = mkdocs_build(book, BOOK_FRESH="1")
    assert done.returncode != 0 and "Gauge 'done' is 1.5, not in [0, 1]" in output(done), output(done)


def test_a_directive_of_a_kind_nobody_registered_fails_naming_page_line_and_the_kinds(book: Path) -> None:
    write(book / "docs" / "part" / "page.md", "# 页\n\n{{ dial part/g:done }}\n")
    done = mkdocs_build(book, BOOK_FRESH="1")
    assert done.returncode != 0
    assert "part/page.md:3: unknown directive 'dial'" in output(done) and "gauge" in output(done), output(done)


def test_a_book_naming_a_module_that_does_not_import_fails_naming_it(book: Path) -> None:
    write(book / "gauges.py", "raise RuntimeError('坏了')\n")
    done = mkdocs_build(book, BOOK_FRESH="1")
    assert done.returncode != 0 and "result_kinds: cannot import 'gauges': RuntimeError: 坏了" in output(done), output(done)


def test_two_kinds_under_one_name_are_refused() -> None:
    from transformer_book.book.results import Result, Table, register

    class Other(Result):
        type_name = "table"

    with pytest.raises(ValueError, match="the result kind 'table' is transformer_book.book.results.Table already"):
        register(Other)
    assert register(Table) is Table  # the same class again: nothing happens


def test_a_claim_on_a_line_of_its_own_is_still_cited_inline() -> None:
    from transformer_book.book.rendering.pages import find_refs

    [ref] = find_refs("# 页\n\n它成立。\n{{ claim part/g:holds }}\n", "part/page.md", 0)
    assert (ref.kind, ref.own_line, ref.where) == ("claim", False, "part/page.md:4")


EVERY_KIND = '''
from transformer_book.book import (Artifact, Bars, Block, Claim, Control, Explorable, Figure, Table, Text, Value,
                                   at_least, equal)
from transformer_book.plotting import new_figure


def compute():
    fig, (ax_line, ax_map) = new_figure(ncols=2, width=6, height=3)
    ax_line.plot([0, 1, 2], [3.0, 2.5, 2.25], label="损失")
    ax_line.legend()
    ax_map.imshow([[0.125, 0.875], [0.5, 0.25]], cmap="Blues", vmin=0, vmax=1)
    ax_map.set_xticks(range(2), ["猫", "坐"])
    ax_map.set_yticks(range(2), ["查询甲", "查询乙"])
    return {
        "value": Value(1.25, ".2f"),
        "measured": Value(0.5, ".1f", kind="measured"),
        "table": Table(columns=["x", "y"], rows=[[1, 0.5], [2, 0.25]], formats=["d", ".2f"]),
        "figure": Figure(fig, grid_labels=("查询", "键"), cell_format=".3f"),
        "claim": Claim("值不小于 1", at_least(1.25, 1.0, name="值")),
        # named out of sorted order ("输入" < "输出"): the popover must say them as written, warm or fresh
        "same": Claim("形状不变", equal(输出形状=[2, 3], 输入形状=[2, 3])),
        "block": Block("| 甲 | 乙 |\\n|---|---|\\n| 1 | 2 |", markdown=True, caption="一张小表"),
        "play": Explorable([Control("温度", [1, 2])], lambda t: {"w": [t * 0.25, t * 0.5], "note": f"t={t}"},
                           show=[Bars("w", ["甲", "乙"], title="权重", fmt=".2f"), Text("note", "标记")]),
        "weights": Artifact({"w": [1.0, 2.0]}),
    }
'''

EVERY_KIND_PAGE = """# 页

值是 {{ a:value }}，实测 {{ a:measured }}。{{ claim a:claim }}形状不变。{{ claim a:same }}

{{ table a:table "表 1　一张表" }}

{{ figure a:figure "图 1　一条线和一张热图" }}

{{ block a:block }}

{{ explorable a:play "图 2　可调" }}
"""


def test_a_warm_build_gives_the_pages_and_records_of_the_fresh_build_byte_for_byte(tmp_path: Path) -> None:
    """Issue 41's guard for refactoring the kinds: a book with every kind of result, built fresh and then from its
    cache (no snippet runs), gives identical pages, generated files and records — what a kind writes to its cache
    entry is all it needs to be shown and checked again. (The search index and the sitemap are left out: they
    carry nothing a result decides; MkDocs stamps the home page with the time of the build.)"""
    import re

    BUILD_DATE = re.compile(rb"Build Date UTC : [^\n]*")
    write(tmp_path / "mkdocs.yml", MKDOCS_YML)
    write(tmp_path / "snippets" / "part" / "a.py", EVERY_KIND)
    write(tmp_path / "docs" / "part" / "page.md", EVERY_KIND_PAGE)
    write(tmp_path / "docs" / "index.md", "# 首页\n")

    def site_and_records(name: str, **settings: str) -> dict[str, bytes]:
        done = mkdocs_build(tmp_path, "-d", str(tmp_path / name), **settings)
        assert done.returncode == 0, output(done)
        files = {f"site/{p.relative_to(tmp_path / name).as_posix()}": BUILD_DATE.sub(b"", p.read_bytes())
                 for p in (tmp_path / name).rglob("*") if p.is_file()
                 and not p.name.startswith(("search_index", "sitemap")) and "search" not in p.parts}
        records = {f"record/{p.name}": p.read_bytes() for p in (tmp_path / "snippets").rglob("*.record.json")}
        return files | records, output(done)

    mkdocs_build(tmp_path)  # writes the record
    fresh, _ = site_and_records("fresh", BOOK_FRESH="1")
    warm, said = site_and_records("warm")
    assert "1 from cache" in said or "from cache" in said, said
    assert sorted(fresh) == sorted(warm), set(fresh) ^ set(warm)
    differ = sorted(name for name in fresh if fresh[name] != warm[name])
    assert not differ, f"the warm build differs from the fresh one in {differ}"
    page = warm["site/part/page/index.html"].decode()
    for shown in ("1.25", "表 1", "图 1", "一张小表", "图 2", "值不小于 1", "输出形状 = &#91;2, 3&#93; == 输入形状"):
        assert shown in page, shown


FILE_SNIPPET = '''
from transformer_book.book import SiteFile
import knobs


def compute():
    return {"weights": SiteFile(bytes(range(256)) * 8 + knobs.TAIL, "bin", kind="exact")}
'''


def test_a_file_result_is_served_beside_the_pages_linked_where_placed_recorded_by_its_hash_and_its_change_reported(
        tmp_path: Path) -> None:
    """Issue 40: a snippet's file (a model's weights for a page's script) is a result kind of the engine's own — the
    site serves its bytes, the page links it where ``{{ file … }}`` stands (relative to where the page is served,
    with its size), the record keeps its sha256 and size, and a change of its bytes is drift naming it."""
    import hashlib
    import posixpath
    import re

    write(tmp_path / "mkdocs.yml", MKDOCS_YML)
    write(tmp_path / "lib" / "knobs.py", "TAIL = b''\n")
    write(tmp_path / "snippets" / "part" / "a.py", "import sys\nfrom pathlib import Path\n"
          "sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'lib'))\n" + FILE_SNIPPET)
    write(tmp_path / "docs" / "part" / "page.md", '# 页\n\n{{ file a:weights "下载这个文件" }}\n')
    write(tmp_path / "docs" / "index.md", "# 首页\n")
    done = mkdocs_build(tmp_path)
    assert done.returncode == 0, output(done)
    data = bytes(range(256)) * 8
    served = tmp_path / "site" / "assets" / "generated" / "part" / "a" / "weights.bin"
    assert served.read_bytes() == data
    page = (tmp_path / "site" / "part" / "page" / "index.html").read_text(encoding="utf-8")
    link = re.search(r'<a href="([^"]+)" download data-book-file="part/a:weights">下载这个文件</a>（2 KB）', page)
    assert link, page
    assert (tmp_path / "site" / posixpath.normpath(posixpath.join("part/page", link.group(1)))).read_bytes() == data
    rec = json.loads((tmp_path / "snippets" / "part" / "a.record.json").read_text(encoding="utf-8"))["results"]["weights"]
    assert rec == {"type": "file", "kind": "exact", "suffix": "bin", "sha256": hashlib.sha256(data).hexdigest(),
                   "bytes": len(data)}

    from transformer_book.book.results import SiteFile, from_data

    shown = from_data(json.loads(json.dumps(SiteFile(data, kind="exact").notebook_record())))  # a page notebook's output
    assert {n.path: n.value for n in shown.numbers("weights")} == {"weights.sha256": rec["sha256"], "weights.bytes": len(data)}

    write(tmp_path / "lib" / "knobs.py", "TAIL = b'!'\n")
    done = mkdocs_build(tmp_path, BOOK_CI="1")
    assert done.returncode != 0 and "weights.sha256" in output(done) and "weights.bytes" in output(done), output(done)
