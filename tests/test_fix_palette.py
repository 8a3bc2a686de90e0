"""Material's palette set without restyling the page (book/site/fix_palette.py), on Material's own built files:
the three patterns are found in the installed release, patched once, and a changed file is reported, not
patched blindly. The browser side (one color-scheme meta, light or dark as the page is) is in test_browser."""

from __future__ import annotations

import shutil
from pathlib import Path

import material

from transformer_book.book.site import fix_palette

THEME_ASSETS = Path(material.__file__).parent / "templates" / "assets"


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    for sub, pattern in (("stylesheets", "palette.*.min.css"), ("javascripts", "bundle.*.min.js")):
        (site / "assets" / sub).mkdir(parents=True)
        for f in (THEME_ASSETS / sub).glob(pattern):
            shutil.copy(f, site / "assets" / sub / f.name)
    return site


def test_the_installed_themes_palette_is_patched_once(tmp_path: Path) -> None:
    site = _site(tmp_path)
    assert fix_palette.patch(site) == []
    sheet = next((site / "assets" / "stylesheets").glob("palette.*.min.css")).read_text(encoding="utf-8")
    bundle = next((site / "assets" / "javascripts").glob("bundle.*.min.js")).read_text(encoding="utf-8")
    assert fix_palette.MARK not in sheet and "[data-md-color-scheme=slate]" in sheet  # only the switch rule went
    assert bundle.count(fix_palette.USED_MARK) == 1  # the page's meta is used, not a new one added
    assert not fix_palette.SET_META.search(bundle) and ".content!==" in bundle  # set only when it changes
    before = {f: f.read_bytes() for f in site.rglob("*.*")}
    assert fix_palette.patch(site) == []  # a second build over the same files changes nothing
    assert {f: f.read_bytes() for f in site.rglob("*.*")} == before


def test_a_changed_theme_is_reported_and_left_alone(tmp_path: Path) -> None:
    site = _site(tmp_path)
    bundle = next((site / "assets" / "javascripts").glob("bundle.*.min.js"))
    changed = bundle.read_text(encoding="utf-8").replace('{name:"color-scheme"}', '{name:"color-scheme",id:"x"}')
    bundle.write_text(changed, encoding="utf-8")
    warnings = fix_palette.patch(site)
    assert len(warnings) == 1 and bundle.name in warnings[0] and "fix_palette.py" in warnings[0]
    assert bundle.read_text(encoding="utf-8") == changed
