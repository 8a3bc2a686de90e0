"""Heatmaps a reader reads cell by cell, and explorables whose every state the build computed (issue 30),
tested on a throw-away project: what the engine carries into the page is the record, a drifted state fails the
strict build naming snippet, key and state, and in Chromium the cells and controls show the recorded numbers —
by mouse, by tap, by keyboard, in the dark scheme, and the static figure without JavaScript."""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from transformer_book.book.results import format_number

MKDOCS_YML = """site_name: t
docs_dir: docs
theme:
  name: material
  palette:
    - scheme: default
      toggle: {icon: material/weather-night, name: dark}
    - scheme: slate
      toggle: {icon: material/weather-sunny, name: light}
plugins:
  - book:
      preload: []
      mathjax: false
      webfont: false
markdown_extensions:
  - admonition
  - pymdownx.details
  - pymdownx.superfences
  - md_in_html
  - tables
"""

SNIPPET = '''
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import knobs
from transformer_book.book import Bars, Control, Explorable, Figure, Text
from transformer_book.plotting import new_figure


def compute():
    fig, ax = new_figure(width=3, height=3)
    ax.imshow([[0.125, 0.9, 0.0], [0.5, 0.25, knobs.CORNER]], cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(3), ["猫", "坐", "下"])
    ax.set_yticks(range(2), ["查询甲", "查询乙"])
    ax.set_xlabel("键")
    ax.set_ylabel("查询")

    def state(t, way):
        bump = knobs.SCALE if (t == 2 and way == "y") else 1.0
        return {"w": [t * 0.1, t * 0.2 * bump], "note": f"{t}-{way}"}

    return {
        "map": Figure(fig, cell_format=".2f"),
        "play": Explorable([Control("温度", [1, 2, 3], default=2), Control("方式", ["x", "y"])], state,
                           show=[Bars("w", ["甲", "乙"], title="权重", fmt=".3f"), Text("note", "标记")]),
    }
'''

PAGE = """# 页

{{ figure a:map "图 1　一张热图" }}

{{ explorable a:play "图 2　可调" }}
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def build(project: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("BOOK_CI", "BOOK_FRESH", "BOOK_EXECUTE", "BOOK_SITE_DIR")}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", *args], cwd=project,
                          env={**env, "NO_MKDOCS_2_WARNING": "1", "BOOK_PDF": "0"},
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("interactive")
    write(root / "mkdocs.yml", MKDOCS_YML)
    write(root / "lib" / "knobs.py", "CORNER = 0.75\nSCALE = 1.0\n")
    write(root / "snippets" / "part" / "a.py", SNIPPET)
    write(root / "docs" / "part" / "page.md", PAGE)
    write(root / "docs" / "index.md", "# 首页\n")
    done = build(root)
    assert done.returncode == 0, done.stderr
    done = build(root, "--strict")  # the records written by the first build now hold
    assert done.returncode == 0, done.stderr
    return root


def page_html(project: Path) -> str:
    return (project / "site" / "part" / "page" / "index.html").read_text(encoding="utf-8")


def record(project: Path) -> dict:
    return json.loads((project / "snippets" / "part" / "a.record.json").read_text(encoding="utf-8"))


def grid_data(html: str) -> dict:
    m = re.search(r'<script type="application/json" class="book-grid-data">(.*?)</script>', html, re.S)
    assert m, "no heatmap data after the figure"
    return json.loads(m.group(1))


def explorable_data(html: str) -> dict:
    m = re.search(r'<script type="application/json" class="book-ex-data">(.*?)</script>', html, re.S)
    assert m, "no explorable states in the page"
    return json.loads(m.group(1))


def expected_cells(rec: dict, key: str) -> list[tuple[str, str, str]]:
    """(row label, column label, value as displayed) of every cell, from the record alone."""
    fig = rec["results"][key]
    out = []
    for grid in fig["grids"]:
        node = fig["plotted"]
        for part in grid["plotted"].split("."):
            node = node[part]
        for r, row in enumerate(node):
            for c, v in enumerate(row):
                out.append((grid["rows"][r], grid["cols"][c], format_number(v, fig["cell_format"])))
    return out


# -- what the engine writes ----------------------------------------------------------------------------------


def test_the_heatmap_page_carries_every_cell_as_recorded(project: Path) -> None:
    data = grid_data(page_html(project))
    assert data["for"] == "part/a:map"
    (grid,) = data["grids"]
    shown = [(grid["rows"][r], grid["cols"][c], grid["values"][r][c])
             for r in range(len(grid["rows"])) for c in range(len(grid["cols"]))]
    assert shown == expected_cells(record(project), "map")
    assert (grid["row_name"], grid["col_name"]) == ("查询", "键")
    assert grid["values"][1][2] == "0.75" and grid["values"][0][0] == "0.12"  # 0.125 shown as the format rounds it
    assert grid["shades"][0][2] == 0 and grid["shades"][0][1] > grid["shades"][1][0]  # the colour follows the value


def test_the_labels_a_reader_is_told_are_recorded(project: Path) -> None:
    grids = record(project)["results"]["map"]["grids"]
    assert grids[0]["rows"] == ["查询甲", "查询乙"] and grids[0]["cols"] == ["猫", "坐", "下"]
    assert "colors" not in grids[0]  # the colour map is not a result


def test_the_explorable_shows_its_default_state_and_carries_every_state(project: Path) -> None:
    html = page_html(project)
    data = explorable_data(html)
    rec = record(project)["results"]["play"]
    assert len(data["states"]) == len(rec["states"]) == 6
    assert data["state_names"][2] == "温度=2, 方式=x"
    for state, drawn in zip(rec["states"], data["states"]):
        assert [format_number(v, ".3f") for v in state["w"]] == re.findall(r'book-ex-bar-value">([^<]*)<', drawn)
        assert f">{state['note']}<" in drawn
    default = html.split('class="book-ex-view">', 1)[1]
    assert default.startswith(data["states"][2])  # 温度 = 2 (the default), 方式 = x (the first)
    assert "共 6 个状态" in html  # what the static page (and the PDF) says the controls vary


def test_a_drifted_state_fails_the_strict_build_naming_snippet_key_and_state(project: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns("site"))
    write(copy / "lib" / "knobs.py", "CORNER = 0.75\nSCALE = 1.5\n")
    done = build(copy, "--strict")
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "part/a" in out and "play[温度=2, 方式=y].w[1]" in out, out[-3000:]
    assert "play[温度=2, 方式=x]" not in out  # only the state that moved
    report = (copy / ".book-cache" / "report" / "drift.html").read_text(encoding="utf-8")
    assert "play[温度=2, 方式=y].w[1]" in report


def test_a_bad_control_is_refused_in_the_snippet() -> None:
    from transformer_book.book.results import Bars, Control, Explorable

    with pytest.raises(ValueError, match="default"):
        Control("温度", [1, 2], default=3)
    with pytest.raises(ValueError, match="name a state"):
        Control("a=b", [1, 2])
    with pytest.raises(ValueError, match="no state"):
        Explorable([Control("x", [1, 2])], {(1,): {"v": [1.0]}}, show=[Bars("v", ["甲"])])
    with pytest.raises(ValueError, match="fields"):
        Explorable([Control("x", [1, 2])], lambda x: {"v": [1.0]} if x == 1 else {"u": [1.0]}, show=[Bars("v", ["甲"])])


# -- in the browser ------------------------------------------------------------------------------------------


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def served(project: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(project / "site")))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/part/page/"
    server.shutdown()
    server.server_close()


SIZES = {"desktop": {"width": 1280, "height": 800}, "phone": {"width": 375, "height": 740}}


@pytest.mark.browser
@pytest.mark.parametrize("size,scheme", [("desktop", "light"), ("phone", "light"), ("desktop", "dark")])
def test_pointing_at_cells_reads_out_the_recorded_labels_and_value(chromium, served: str, project: Path,
                                                                   size: str, scheme: str) -> None:
    phone = size == "phone"
    context = chromium.new_context(viewport=SIZES[size], has_touch=phone, is_mobile=phone,
                                   color_scheme="dark" if scheme == "dark" else "light")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(served, wait_until="load")
        if scheme == "dark":
            page.evaluate("document.body.setAttribute('data-md-color-scheme', 'slate')")
        page.wait_for_selector(".book-hm td.book-hm-cell")
        assert not page.locator("figure.book-heatmap > img").is_visible()  # the cells replace the picture
        cells = expected_cells(record(project), "map")
        readout = page.locator(".book-hm-readout")
        for index in (0, 4, 5):
            r, c = divmod(index, 3)
            cell = page.locator(f'td.book-hm-cell[data-r="{r}"][data-c="{c}"]')
            cell.tap() if phone else cell.hover()
            row, col, value = cells[index]
            assert readout.inner_text() == f"查询「{row}」，键「{col}」：{value}"
        assert page.locator('td.book-hm-cell[tabindex="0"]').count() == 1  # one tab stop; arrows move inside
        page.locator('td.book-hm-cell[data-r="0"][data-c="0"]').focus()
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowDown")
        assert readout.inner_text() == "查询「{}」，键「{}」：{}".format(*cells[4])
        assert page.evaluate("document.activeElement.dataset.r + ',' + document.activeElement.dataset.c") == "1,1"
        assert page.locator(".book-hm-bar .book-hm-low").inner_text() == "0.00"
        assert not errors, errors
    finally:
        context.close()


@pytest.mark.browser
def test_without_javascript_the_static_figure_and_the_default_state_are_there(chromium, served: str) -> None:
    context = chromium.new_context(java_script_enabled=False, viewport=SIZES["desktop"])
    page = context.new_page()
    try:
        page.goto(served, wait_until="load")
        img = page.locator("figure.book-heatmap img")
        assert img.is_visible() and img.bounding_box()["width"] > 50
        assert page.locator(".book-hm").count() == 0
        assert not page.locator(".book-ex-controls").is_visible()
        assert page.locator(".book-ex-view .book-ex-bar-value").all_inner_texts() == ["0.200", "0.400"]
        assert "共 6 个状态" in page.locator(".book-ex-note").inner_text()
    finally:
        context.close()


@pytest.mark.browser
@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_the_controls_switch_between_recorded_states(chromium, served: str, project: Path, size: str) -> None:
    phone = size == "phone"
    context = chromium.new_context(viewport=SIZES[size], has_touch=phone, is_mobile=phone)
    page = context.new_page()
    try:
        page.goto(served, wait_until="load")
        page.wait_for_selector(".book-ex-controls:not([hidden])")
        rec = record(project)["results"]["play"]
        states = rec["states"]

        def shown() -> list[str]:
            return page.locator(".book-ex-view .book-ex-bar-value").all_inner_texts()

        def label(text: str):
            return page.locator(".book-ex-option", has_text=re.compile(f"^{re.escape(text)}$"))

        for temp, way, index in (("3", "y", 5), ("1", "y", 1), ("1", "x", 0)):
            for text in (temp, way):
                label(text).tap() if phone else label(text).click()
            assert shown() == [format_number(v, ".3f") for v in states[index]["w"]]
            assert page.locator(".book-ex-text-value").inner_text() == states[index]["note"]
        radio = page.locator('input[type="radio"][data-control="0"]').first
        radio.focus()
        page.keyboard.press("ArrowRight")  # the browser's own radio-group keys pick 温度 = 2
        assert shown() == [format_number(v, ".3f") for v in states[2]["w"]]
        assert page.locator(".book-ex-state").inner_text() == "温度=2, 方式=x"
    finally:
        context.close()


# -- the page's own parts, without a build: interactive.py's output with the shipped script and styles -------


def _causal_figure():
    """A heatmap like s04's causal-mask weights (one panel), as the engine hands it to the page."""
    from transformer_book.book.results import Figure

    words = ["the", "cat", "sat", "down"]
    weights = [[1.0, 0.0, 0.0, 0.0], [0.3716, 0.6284, 0.0, 0.0], [0.7858, 0.054, 0.1601, 0.0],
               [0.5432, 0.1713, 0.2377, 0.0478]]
    grid = {"plotted": "ax0.image0", "title": "加上因果掩码", "row_name": "查询的词", "col_name": "被关注的词（键）",
            "rows": words, "cols": words, "vmin": 0.0, "vmax": 1.0, "origin": "upper",
            "colors": ["#f7fbff", "#6baed6", "#08306b"]}
    return Figure.from_data({"plotted": {"ax0": {"image0": weights}}, "grids": [grid], "cell_format": ".2f"})


def _signed_explorable():
    """An explorable whose bars change sign with its control (like s05's scores as the positions move)."""
    from transformer_book.book.results import Bars, Control, Explorable, Text

    return Explorable([Control("Δ", [0, 1, 2])], lambda m: {"s": [1.5 - m, -0.5 - m], "t": float(m)},
                      show=[Bars("s", ["甲", "乙"], title="分数", fmt=".2f"), Text("t", "差", ".1f")])


def test_the_static_note_names_the_drawn_state_in_a_part_the_script_can_follow() -> None:
    from transformer_book.book.rendering import interactive

    html = interactive.explorable_html(_signed_explorable(), "ex-t")
    note = re.search(r'<p class="book-ex-note">(.*?)</p>', html, re.S).group(1)
    assert note.startswith('<span class="book-ex-note-shown">这里显示的是 '
                           '<span class="book-ex-note-state">Δ=0</span> 时的结果。</span>在网页上可以改变 ')
    assert "共 3 个状态" in note  # what the controls vary stays outside the part that is hidden on screen


def _bare_page(body: str) -> str:
    import material

    static = Path(__file__).resolve().parents[1] / "src" / "transformer_book" / "book" / "rendering" / "static"
    sheets = sorted((Path(material.__file__).parent / "templates" / "assets" / "stylesheets").glob("*.min.css"))
    css = "".join(f"<style>{p.read_text(encoding='utf-8')}</style>" for p in sheets)
    return (f'<!doctype html><html lang="zh"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">{css}'
            f"<style>{(static / 'engine.css').read_text(encoding='utf-8')}</style></head>"
            f'<body data-md-color-scheme="default" data-md-color-primary="indigo" data-md-color-accent="indigo">'
            f'<article class="md-typeset">{body}</article>'
            f"<script>{(static / 'explore.js').read_text(encoding='utf-8')}</script></body></html>")


def _rgb(css: str) -> tuple[float, float, float, float]:
    parts = [float(x) for x in re.findall(r"[\d.]+", css)]
    return (*parts[:3], parts[3] if len(parts) > 3 else 1.0)


def _contrast(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    def lum(c: tuple[float, ...]) -> float:
        ch = [v / 255 for v in c[:3]]
        ch = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in ch]
        return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]
    hi, lo = sorted((lum(a), lum(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.browser
def test_heatmap_cells_read_apart_as_text_and_on_a_phone(chromium) -> None:
    from transformer_book.book.rendering import interactive

    figure = '<figure class="book-figure book-heatmap"><img alt="图" src="data:,"><figcaption>图</figcaption></figure>'
    page_html = _bare_page(figure + interactive.heatmap_script(_causal_figure(), "x:heatmap"))
    context = chromium.new_context(viewport=SIZES["phone"], has_touch=True, is_mobile=True)
    page = context.new_page()
    try:
        page.set_content(page_html)
        page.wait_for_selector("td.book-hm-cell")
        text = page.locator("table.book-hm-grid").text_content()
        assert "cat 0.37 0.63 0.00 0.00" in text, text  # not "cat0.370.630.000.00"
        assert page.locator(".book-hm-bar").text_content().split() == ["0.00", "1.00"]
        gaps = page.evaluate("""() => {  // the space between the numbers of neighbouring cells, as drawn
            const row = [...document.querySelectorAll('td.book-hm-cell[data-r="1"]')];
            const boxes = row.map(td => { const r = document.createRange(); r.selectNodeContents(td);
                                          return r.getBoundingClientRect(); });
            return boxes.slice(1).map((b, i) => b.left - boxes[i].right);
        }""")
        assert min(gaps) >= 6, gaps
        cell = page.locator('td.book-hm-cell[data-r="1"][data-c="1"]')
        cell.tap()
        ring = page.evaluate("""() => { const s = getComputedStyle(document.querySelector('td.book-hm-active'));
                                        return [s.outlineStyle, parseFloat(s.outlineWidth), s.boxShadow]; }""")
        assert ring[0] == "solid" and ring[1] >= 2 and "inset" in ring[2], ring  # a ring, and a ring inside it
        assert page.locator(".book-hm-readout").inner_text() == "查询的词「cat」，被关注的词（键）「cat」：0.63"
    finally:
        context.close()


@pytest.mark.browser
def test_column_labels_wider_than_their_cells_stand_on_end(chromium) -> None:
    from transformer_book.book.rendering import interactive
    from transformer_book.book.results import Figure

    cols = [str(j) for j in range(30)]  # a dense map (like s05's positions × dimensions): cells narrower than "10"
    grid = {"plotted": "ax0.image0", "row_name": "位置", "col_name": "维度", "rows": ["0", "1"], "cols": cols,
            "vmin": 0.0, "vmax": 1.0, "origin": "upper"}
    fig = Figure.from_data({"plotted": {"ax0": {"image0": [[0.5] * 30, [0.25] * 30]}}, "grids": [grid]})
    figure = '<figure class="book-figure book-heatmap"><img alt="图" src="data:,"><figcaption>图</figcaption></figure>'
    context = chromium.new_context(viewport=SIZES["phone"], has_touch=True, is_mobile=True)
    page = context.new_page()
    try:
        page.set_content(_bare_page(figure + interactive.heatmap_script(fig, "x:dense")))
        page.wait_for_selector("td.book-hm-cell")
        heads = page.locator("th.book-hm-col")
        assert "book-hm-vertical" not in heads.nth(9).get_attribute("class")  # "9" fits across its cell
        assert all("book-hm-vertical" in heads.nth(j).get_attribute("class") for j in range(10, 30))
        assert heads.nth(10).evaluate("th => getComputedStyle(th).writingMode") == "vertical-rl"
    finally:
        context.close()


@pytest.mark.browser
def test_the_static_note_follows_the_state_and_negative_bars_keep_their_colour(chromium) -> None:
    from transformer_book.book.rendering import interactive

    context = chromium.new_context(viewport=SIZES["phone"], has_touch=True, is_mobile=True)
    page = context.new_page()
    try:
        page.set_content(_bare_page(interactive.explorable_html(_signed_explorable(), "ex-t")))
        page.wait_for_selector(".book-ex-controls:not([hidden])")
        note = page.locator(".book-ex-note")
        assert not page.locator(".book-ex-note-shown").is_visible()  # on screen the line above names the state
        assert "共 3 个状态" in note.inner_text()
        page.locator(".book-ex-option", has_text=re.compile("^2$")).tap()
        assert page.locator(".book-ex-state").inner_text() == "Δ=2"
        page.emulate_media(media="print")  # printed after a change: the note names what is drawn
        assert note.inner_text().startswith("这里显示的是 Δ=2 时的结果。")
        page.emulate_media(media="screen")
        page.locator(".book-ex-option", has_text=re.compile("^1$")).tap()  # Δ = 1: one bar of each sign
        for scheme in ("default", "slate"):
            page.evaluate(f"document.body.setAttribute('data-md-color-scheme', '{scheme}')")
            fills = page.evaluate("""() => [...document.querySelectorAll('.book-ex-bar-fill')].map(e =>
                [e.classList.contains('book-ex-neg'), getComputedStyle(e).backgroundColor,
                 getComputedStyle(e.parentNode).backgroundColor])""")
            page_bg = _rgb(page.evaluate("getComputedStyle(document.body).backgroundColor"))
            positive = {c for neg, c, _ in fills if not neg}
            negative = {c for neg, c, _ in fills if neg}
            assert positive and negative and positive.isdisjoint(negative), (scheme, fills)  # the sign has its colour
            for _, colour, track in fills:
                t = _rgb(track)
                behind = tuple(t[i] * t[3] + page_bg[i] * (1 - t[3]) for i in range(3))
                assert _contrast(_rgb(colour), page_bg) >= 3 and _contrast(_rgb(colour), behind) >= 3, (scheme, colour)
    finally:
        context.close()
