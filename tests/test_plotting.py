"""Chinese figure labels render with the font that ships with the package, on any machine."""

from __future__ import annotations

import io
import logging
import re
import warnings
from pathlib import Path

import matplotlib
from fontTools.ttLib import TTFont

from transformer_book.plotting import FONT_PATH, new_figure

ROOT = Path(__file__).resolve().parents[1]


def test_a_figure_with_chinese_labels_draws_every_glyph(caplog) -> None:
    matplotlib.rcParams["svg.fonttype"] = "path"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Glyph … missing from font(s)" is a UserWarning
        with caplog.at_level(logging.WARNING, logger="matplotlib"):
            fig, ax = new_figure()
            ax.plot([4, 16, 64], [0.5, 0.7, 0.9], label="不缩放：最大权重")
            ax.set(xlabel="维度 dₖ（对数刻度）", ylabel="注意力权重", title="位置编码 −1.5 × √d")
            ax.legend()
            buf = io.StringIO()
            fig.savefig(buf, format="svg")
    assert not [r for r in caplog.records if "glyph" in r.getMessage()]
    assert buf.getvalue().count("<path") > 20


def test_the_shipped_font_covers_every_chinese_character_in_the_snippets() -> None:
    cmap = TTFont(FONT_PATH, fontNumber=0)["cmap"].getBestCmap()
    used = set()
    for path in list((ROOT / "snippets").rglob("*.py")) + list((ROOT / "src").rglob("*.py")):
        used |= set(re.findall(r"[\u4e00-\u9fff\u3000-\u303f\uff00-\uffef]", path.read_text(encoding="utf-8")))
    missing = sorted(ch for ch in used if ord(ch) not in cmap)
    assert missing == [], f"characters the figure font cannot draw: {''.join(missing)}"


def test_the_font_licence_ships_beside_the_font() -> None:
    licence = (FONT_PATH.parent / "OFL.txt").read_text(encoding="utf-8")
    assert "SIL OPEN FONT LICENSE Version 1.1" in licence
