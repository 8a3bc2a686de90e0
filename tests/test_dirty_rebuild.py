"""A dirty rebuild (``mkdocs serve --dirty``, what scripts/serve.sh runs) re-renders only some pages: those
pages must still show every other page's title in the navigation and resolve their cross-references, as a
full build does (upstream mkdocs issue 4047 is what happens otherwise: "None" everywhere, raw ``[x][y]``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from mkdocs.commands.build import build
from mkdocs.config import load_config

from conftest import write

NAV = """
nav:
  - index.md
  - 第一部分:
      - part/page.md
      - part/other.md
"""


def _build(project: Path, dirty: bool) -> None:
    cfg = load_config(str(project / "mkdocs.yml"))
    cfg.plugins.on_startup(command="build", dirty=dirty)
    build(cfg, dirty=dirty)


def test_a_page_rerendered_by_a_dirty_rebuild_keeps_the_navigation_titles_and_its_references(project: Path) -> None:
    config = (project / "mkdocs.yml").read_text(encoding="utf-8")
    (project / "mkdocs.yml").write_text(config.replace("plugins:\n", "plugins:\n  - autorefs\n") + NAV, encoding="utf-8")
    write(project / "docs" / "part" / "other.md", "# 另一页的标题\n\n## Target heading\n\n这里是目标。\n")
    page = project / "docs" / "part" / "page.md"
    page.write_text(page.read_text(encoding="utf-8") + "\n见 [目标一节][target-heading]。\n", encoding="utf-8")
    old = os.getcwd()
    os.chdir(project)
    try:
        _build(project, dirty=False)  # the first build of `serve` reads every page
        time.sleep(1.1)  # a later modification time than the site's copy
        page.write_text(page.read_text(encoding="utf-8") + "\n改了一句。\n", encoding="utf-8")
        _build(project, dirty=True)
    finally:
        os.chdir(old)
    html = (project / "site" / "part" / "page" / "index.html").read_text(encoding="utf-8")
    assert "改了一句" in html, "the edited page was re-rendered"
    assert "另一页的标题" in html, "the navigation lost the title of a page this rebuild did not read"
    assert ">None<" not in html and "None\n" not in html
    assert "[目标一节][target-heading]" not in html and 'href="../other/#target-heading"' in html
