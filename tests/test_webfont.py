"""The site's Chinese web font: cut from the sources' characters while the pages render, checked against the
characters the built site shows, and cut again for the site when the sources missed one."""

from __future__ import annotations

from pathlib import Path

import pytest
from fontTools.ttLib import TTFont, TTLibError

from conftest import ROOT
from transformer_book.book.site import webfont

FONT = ROOT / "src" / "transformer_book" / "fonts" / "NotoSansCJKsc-Regular-GB2312.otf"


def site_with(tmp_path: Path, text: str) -> Path:
    site = tmp_path / "site"
    (site / "page").mkdir(parents=True)
    (site / "page" / "index.html").write_text(f"<html><body><p>{text}</p></body></html>", encoding="utf-8")
    return site


def covered(path: Path) -> set[str]:
    return {chr(c) for c in TTFont(str(path))["cmap"].getBestCmap()}


def test_a_font_cut_from_the_sources_is_shipped_when_it_covers_the_site(tmp_path: Path) -> None:
    cache = tmp_path / "fonts"
    site = site_with(tmp_path, "自注意力")
    started = webfont.Subset(FONT, "自注意力机制", cache)
    assert not started.cached
    out, n, how = webfont.write(site, webfont.URI, FONT, cache, started)
    assert how == "cut while rendering" and n == len("自注意力机制")
    assert set("自注意力机制") <= covered(out)
    assert out.read_bytes()[:4] == b"wOF2"
    again = webfont.Subset(FONT, "自注意力机制", cache)  # the next build with the same sources
    assert again.cached
    assert webfont.write(site, webfont.URI, FONT, cache, again)[2] == "cached"


def test_a_character_the_sources_lack_makes_the_font_be_cut_for_the_site(tmp_path: Path) -> None:
    cache = tmp_path / "fonts"
    site = site_with(tmp_path, "注意力鑫")  # 鑫 is in no source
    out, n, how = webfont.write(site, webfont.URI, FONT, cache, webfont.Subset(FONT, "注意力", cache))
    assert how == "cut after the build" and n == 4
    assert set("注意力鑫") <= covered(out)
    assert [p.name for p in cache.glob("*.woff2")] and all(p.stat().st_size for p in cache.glob("*.woff2"))


def test_a_failed_cutting_process_raises_in_the_build_and_leaves_no_file(tmp_path: Path) -> None:
    not_a_font = tmp_path / "broken.otf"
    not_a_font.write_bytes(b"not a font at all" * 100)
    started = webfont.Subset(not_a_font, "注意力", tmp_path / "fonts")
    with pytest.raises(TTLibError, match="Not a TrueType or OpenType font"):  # fontTools' own error, here
        started.wait()
    assert not started.path.exists()
    assert list((tmp_path / "fonts").iterdir()) == []  # no half-written temporary file either


def test_source_characters_read_pages_and_code_but_not_data_or_environments(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# 页面\n", encoding="utf-8")
    code = tmp_path / "src"
    (code / "pkg").mkdir(parents=True)
    (code / "pkg" / "mod.py").write_text('"""模块。"""\n', encoding="utf-8")
    (code / "pkg" / "corpus.txt").write_text("语料库里的字不上页面", encoding="utf-8")
    (code / ".venv" / "lib").mkdir(parents=True)
    (code / ".venv" / "lib" / "x.py").write_text("# 环境\n", encoding="utf-8")
    (code / "env").mkdir()
    (code / "env" / "pyvenv.cfg").write_text("home = /usr\n", encoding="utf-8")
    (code / "env" / "y.py").write_text("# 虚拟\n", encoding="utf-8")
    chars = webfont.source_characters([tmp_path / "docs"], code=[code])
    assert set(chars) == set("页面模块。")
