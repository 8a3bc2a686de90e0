"""``{{ code module:name }}``: the package's own source beside the formula it implements (issue 31).

Tested on a small throw-away book with its own package (``src/transformer_book/tiny.py``), an API page made by
mkdocstrings, and one snippet (so that the page has a notebook).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from transformer_book.book.rendering import code_excerpt, pages

MKDOCS_YML = """
site_name: t
docs_dir: docs
nav:
  - index.md
  - part/page.md
  - api/tiny.md
plugins:
  - book:
      preload: []
      mathjax: false
  - mkdocstrings:
      default_handler: python
      handlers:
        python:
          paths: [src]
          options:
            show_root_heading: false
            heading_level: 2
markdown_extensions:
  - admonition
  - attr_list
  - md_in_html
  - pymdownx.details
  - pymdownx.superfences
  - pymdownx.highlight
"""

# The build parses this file and never imports it: importing it would fail on its first line.
TINY = '''
"""一个小模块：构建只解析它，从不导入它。"""

import no_such_module_anywhere


def _helper():
    return 1


def attend(q, k):
    """注意力的打分。"""
    scores = q @ k.T  # (T, T)
    return scores


class Mixer:
    """混合器。"""

    @staticmethod
    def mix(x):
        """混一下。"""
        return x + _helper()

    def plain(self, x):
        return x
'''

SNIPPET = '''
from transformer_book.book import Value


def compute():
    return {"answer": Value(1.5, ".2f")}
'''

PAGE = """
# 测试页

## 打分

答案是 {{ a:answer }}。

$$ S = QK^\\top $$

{{ code tiny:attend }}

## 混合

!!! note "代码"

    {{ code tiny:Mixer.mix }}

{{ code tiny:Mixer.plain }}
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


@pytest.fixture
def book(tmp_path: Path) -> Path:
    write(tmp_path / "mkdocs.yml", MKDOCS_YML)
    write(tmp_path / "src" / "transformer_book" / "__init__.py", '"""测试用的包。"""\n')
    write(tmp_path / "src" / "transformer_book" / "tiny.py", TINY)
    write(tmp_path / "snippets" / "part" / "a.py", SNIPPET)
    write(tmp_path / "docs" / "index.md", "# 首页\n")
    write(tmp_path / "docs" / "part" / "page.md", PAGE)
    write(tmp_path / "docs" / "api" / "tiny.md", "# tiny\n\n::: transformer_book.tiny\n")
    return tmp_path


def build(book: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("BOOK_CI", "BOOK_FRESH", "BOOK_EXECUTE", "BOOK_CACHE_DIR")}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict"], cwd=book,
                          env={**env, "NO_MKDOCS_2_WARNING": "1"}, capture_output=True, text=True, timeout=300)


def line_of(book: Path, page: str, needle: str) -> int:
    lines = (book / "docs" / page).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def source_lines(book: Path, first_needle: str, count: int) -> tuple[int, list[str]]:
    lines = (book / "src" / "transformer_book" / "tiny.py").read_text(encoding="utf-8").splitlines()
    first = next(i for i, line in enumerate(lines, 1) if first_needle in line)
    return first, lines[first - 1:first - 1 + count]


def code_text(html_fragment: str) -> str:
    """The text of a highlighted code block, as a reader copies it."""
    code = re.search(r'<td class="code">.*?<code>(.*?)</code>', html_fragment, re.S).group(1)
    import html

    return html.unescape(re.sub(r"<[^>]+>", "", code)).rstrip("\n")


def test_an_excerpt_shows_the_object_as_the_file_has_it_and_links_to_its_api_entry_and_back(book: Path) -> None:
    done = build(book)
    assert done.returncode == 0, done.stdout + done.stderr
    page = (book / "site" / "part" / "page" / "index.html").read_text(encoding="utf-8")

    # the function, exactly as the file has it, numbered from its first line in the file
    first, lines = source_lines(book, "def attend(", 4)
    block = page[page.index('id="code-tiny.attend"'):]
    assert code_text(block) == "\n".join(lines)
    assert re.search(r'class="filename">src/transformer_book/tiny\.py<', block[:600])
    numbers = re.findall(r'<span class="normal">(\d+)</span>', block.split("</table>")[0])
    assert [int(n) for n in numbers] == list(range(first, first + 4))
    # a method with its decorator, inside an admonition, with the file's indentation
    first, lines = source_lines(book, "@staticmethod", 4)
    assert code_text(page[page.index('id="code-tiny.Mixer.mix"'):]) == "\n".join(lines)

    # the link to the API entry: mkdocstrings' anchor; an object the API page does not show links to its class
    assert 'href="../../api/tiny/#transformer_book.tiny.attend"' in page
    assert 'href="../../api/tiny/#transformer_book.tiny.Mixer.mix"' in page
    assert 'href="../../api/tiny/#transformer_book.tiny.Mixer"' in page
    api = (book / "site" / "api" / "tiny" / "index.html").read_text(encoding="utf-8")
    assert 'id="transformer_book.tiny.Mixer.plain"' not in api  # no docstring: mkdocstrings leaves it out

    # the other direction: under the entry's heading, a link to the place in the book that shows it
    entry = re.search(r'<h2 id="transformer_book\.tiny\.attend".*?</h2>\s*<p class="book-shown-in">(.*?)</p>',
                      api, re.S)
    assert entry, "no 在书中 line under attend's heading"
    assert entry.group(1) == '在书中：<a href="../../part/page/#code-tiny.attend">测试页 › 打分</a>'
    mixer = re.search(r'<h2 id="transformer_book\.tiny\.Mixer".*?</h2>\s*<p class="book-shown-in">(.*?)</p>', api, re.S)
    assert mixer and "#code-tiny.Mixer.plain" in mixer.group(1)

    # the page's notebook: a whole function is a code cell that redefines it in its module (the reader edits and
    # reruns it); a method, which cannot run on its own, a Markdown cell
    nb = json.loads((book / "site" / "part" / "page" / "page.ipynb").read_text(encoding="utf-8"))
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    markdown = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
    _, lines = source_lines(book, "def attend(", 4)
    defining = [c for c in code if c.startswith("%%define transformer_book.tiny\n")]
    assert len(defining) == 1 and defining[0].endswith("\n" + "\n".join(lines)), code
    assert any(c.startswith("```python\n") and "def plain(" in c for c in markdown), markdown
    assert not any("def plain(" in c for c in code)
    assert "no_such_module_anywhere" not in done.stdout + done.stderr  # parsed, never imported


def test_renaming_the_function_fails_the_strict_build_naming_page_and_line(book: Path) -> None:
    tiny = book / "src" / "transformer_book" / "tiny.py"
    tiny.write_text(tiny.read_text(encoding="utf-8").replace("def attend(", "def attend_scores("), encoding="utf-8")
    done = build(book)
    assert done.returncode != 0
    line = line_of(book, "part/page.md", "{{ code tiny:attend }}")
    assert (f"part/page.md:{line}: {{{{ code tiny:attend }}}}: transformer_book.tiny (src/transformer_book/tiny.py) "
            "has no function or class 'attend'; did you mean attend_scores?") in done.stdout + done.stderr


def test_an_unknown_module_a_missing_api_page_and_a_misspelt_method_name_their_page_and_line(book: Path) -> None:
    ex = code_excerpt.Excerpts(book, book / "src" / "transformer_book", book / "docs")

    def error(line: str) -> str:
        ref = pages.find_refs(f"# 页\n\n{line}\n", "part/x.md")[0]
        with pytest.raises(pages.PageRefError) as info:
            ex.render(ref)
        return str(info.value)

    assert error("{{ code tiyn:attend }}").startswith("part/x.md:3: {{ code tiyn:attend }}: unknown module 'tiyn'")
    assert "did you mean tiny?" in error("{{ code tiyn:attend }}")
    assert "tiny.Mixer (src/transformer_book/tiny.py) has no function or class 'mixx'; did you mean mix?" in error("{{ code tiny:Mixer.mixx }}")
    (book / "docs" / "api" / "tiny.md").write_text("# tiny\n", encoding="utf-8")
    ex = code_excerpt.Excerpts(book, book / "src" / "transformer_book", book / "docs")
    assert "no API page documents transformer_book.tiny" in error("{{ code tiny:attend }}")


def test_references_to_code_are_found_outside_code_blocks_only(tmp_path: Path) -> None:
    text = "# 页\n\n{{ code transformer:MultiHeadAttention.forward }}\n\n```text\n{{ code transformer:x }}\n```\n"
    refs = pages.find_refs(text, "lecture07/p.md")
    assert [(r.kind, r.snippet, r.key, r.line) for r in refs] == [("code", "transformer", "MultiHeadAttention.forward", 3)]
    write(tmp_path / "lecture07" / "p.md", text + "\n{{ a:b }}\n")
    assert pages.usage(tmp_path) == {("lecture07/a", "b"): ["lecture07/p.md:9"]}  # an excerpt shows no result


def test_under_serve_dirty_the_pages_whose_excerpts_or_back_links_changed_are_rendered_again(book: Path) -> None:
    ex = code_excerpt.Excerpts(book, book / "src" / "transformer_book", book / "docs")
    assert ex.changed_pages() == {"part/page.md", "api/tiny.md"}  # the first build renders them
    assert ex.changed_pages() == set()
    tiny = book / "src" / "transformer_book" / "tiny.py"
    time.sleep(0.01)
    tiny.write_text(tiny.read_text(encoding="utf-8").replace("return scores", "return scores * 1"), encoding="utf-8")
    assert ex.changed_pages() == {"part/page.md"}  # the excerpt's text changed; its entry did not
    tiny.write_text(tiny.read_text(encoding="utf-8").replace('"""混合器。"""\n', '"""混合器。"""\n\n    # 注\n'),
                    encoding="utf-8")
    assert ex.changed_pages() == {"part/page.md"}  # the methods moved down a line
    write(book / "docs" / "part" / "other.md", "# 另一页\n\n{{ code tiny:attend }}\n")
    assert ex.changed_pages() == {"part/other.md", "api/tiny.md"}  # a new excerpt: a new back-link


def test_a_dirty_serve_rebuild_renders_again_the_page_whose_excerpt_changed(book: Path) -> None:
    from mkdocs.config import load_config
    from mkdocs.structure.files import get_files

    cwd = os.getcwd()
    os.chdir(book)
    try:
        config = load_config(str(book / "mkdocs.yml"))
    finally:
        os.chdir(cwd)
    plugin = config.plugins["book"]
    plugin.on_startup(command="serve", dirty=True)
    config = config.plugins.on_config(config)
    plugin.options.execute = False  # this test is about excerpts, not snippets

    def rebuild():
        plugin.on_pre_build(config=config)
        files = get_files(config)
        for f in files:
            f.is_modified = lambda: False  # as if every page were already built and unchanged
        return plugin.on_files(files, config=config)

    rebuild()  # the first build
    tiny = book / "src" / "transformer_book" / "tiny.py"
    tiny.write_text(tiny.read_text(encoding="utf-8").replace("return scores", "return scores * 1"), encoding="utf-8")
    files = rebuild()
    assert files.get_file_from_path("part/page.md").is_modified()
    assert not files.get_file_from_path("api/tiny.md").is_modified()
    assert not files.get_file_from_path("index.md").is_modified()
    assert not rebuild().get_file_from_path("part/page.md").is_modified()  # nothing changed since
