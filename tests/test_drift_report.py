"""The drift report (issue 23): a deliberate change to a figure, a table and a claim, in a throw-away
project, gives one HTML page that shows each of them recorded vs now — the figure's moved line and image
redrawn side by side with their difference, the table with its changed cells marked old → new, the claim
with its comparison and margins, each with the page:line that shows it — and ``accept SNIPPET:KEY`` takes
that one result and leaves the others failing. The page is opened in Chromium at desktop and phone width."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MKDOCS_YML, book_env, write

SNIPPET = '''
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import knobs
import matplotlib.pyplot as plt
from transformer_book.book import Claim, Figure, Table, Value, above


def compute():
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(6, 3))
    ax1.plot([0, 1, 2, 3], [1.0, 0.5, knobs.CURVE, 0.2])
    ax1.set_title("loss")
    ax2.imshow([[1.0, 0.0], [0.0, knobs.CORNER]])
    return {
        "curve": Figure(fig, "图 1　损失与权重"),
        "table": Table(columns=["层", "准确率"], rows=[["第 1 层", 0.5], ["第 2 层", knobs.CELL]],
                       formats={"准确率": ".2f"}),
        "gain": Value(knobs.GAIN, ".2f"),
        "beats": Claim("第 2 层的准确率高于 0.6", above(knobs.CELL, 0.6, name="第 2 层")),
    }
'''

PAGE = """# 页

增益是 {{ a:gain }}。

第 2 层更准。{{ claim a:beats }}

{{ table a:table "表 1　各层" }}

{{ figure a:curve }}
"""

BASE = {"CURVE": 0.3, "CORNER": 1.0, "CELL": 0.8, "GAIN": 2.0}


def knobs(project: Path, **values: float) -> None:
    write(project / "lib" / "knobs.py", "".join(f"{k} = {v!r}\n" for k, v in {**BASE, **values}.items()))


def run(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=project, env=book_env(BOOK_CI="1"), capture_output=True,
                          text=True, timeout=300)


def build(project: Path) -> subprocess.CompletedProcess:
    return run(project, "-m", "mkdocs", "build", "--strict")


@pytest.fixture(scope="module")
def drifted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    """A project whose records were written, then whose code changed a figure, a table cell and a claim."""
    project = tmp_path_factory.mktemp("drift-report")
    write(project / "mkdocs.yml", MKDOCS_YML)
    knobs(project)
    write(project / "snippets" / "part" / "a.py", SNIPPET)
    write(project / "docs" / "part" / "page.md", PAGE)
    write(project / "docs" / "index.md", "# 首页\n")
    first = run(project, "-m", "transformer_book", "accept")
    assert first.returncode == 0, first.stdout + first.stderr
    assert build(project).returncode == 0
    assert not (project / ".book-cache" / "report" / "drift.html").exists()  # no drift, no report
    knobs(project, CURVE=0.6, CORNER=0.25, CELL=0.4)  # the figure, the table (and with it the claim) change
    return project, build(project)


def report_of(done: subprocess.CompletedProcess) -> Path:
    out = done.stdout + done.stderr
    found = re.findall(r"Drift report \(figures, tables and claims, recorded vs now\): (\S+)", out)
    assert found, out
    return Path(found[-1])


def test_a_failed_build_names_its_drift_report_last_and_the_report_exists(drifted) -> None:
    project, done = drifted
    assert done.returncode != 0
    path = report_of(done)
    assert path == project / ".book-cache" / "report" / "drift.html"
    assert path.is_file()
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    tail = "\n".join(lines[-4:])
    assert "drift.html" in tail, tail  # the last thing the author reads is where to look


def test_the_report_shows_the_figure_recorded_and_now_with_their_difference(drifted) -> None:
    html = report_of(drifted[1]).read_text(encoding="utf-8")
    section = html[html.index("<h3>curve"):html.index("<h3>", html.index("<h3>curve") + 1)]
    assert "ax0.line0：记录与现在" in section and "ax0.line0：差（现在 − 记录）" in section
    assert "ax1.image0：记录" in section and "ax1.image0：现在" in section and "ax1.image0：差" in section
    # both lines are drawn: the recorded one dashed and grey, the fresh one solid
    assert section.count("<polyline") >= 3 and 'stroke-dasharray="5 3"' in section
    # the difference image: the corner went down (full blue), the three other cells did not move (white)
    diff = next(svg for svg in section.split("<svg")[1:] if "ax1.image0：差" in svg)
    assert diff.count('fill="rgb(0,0,255)"') == 1 and diff.count('fill="rgb(255,255,255)"') == 3
    assert "现在的图（如网站所示）" in section and "<svg" in section
    assert "<code>part/page.md:9</code>" in section


def test_the_report_marks_the_changed_cell_of_the_table_old_to_new(drifted) -> None:
    html = report_of(drifted[1]).read_text(encoding="utf-8")
    section = html[html.index("<h3>table"):html.index("<h3>", html.index("<h3>table") + 1)]
    changed = re.findall(r'<td class="changed[^"]*"[^>]*>(.*?)</td>', section)
    assert changed == ["<del>0.80</del> → <ins>0.40</ins>"]  # in the table's own format, only that cell
    assert "<td class=\"\">0.50</td>" in section  # the unchanged cell is shown plainly
    assert "part/page.md:7" in section and "表 1　各层" in section  # where, with the line's text


def test_the_report_gives_the_claim_its_comparison_margins_and_sentence(drifted) -> None:
    html = report_of(drifted[1]).read_text(encoding="utf-8")
    section = html[html.index("<h3>beats"):]
    assert "不再成立" in section and "«第 2 层的准确率高于 0.6»" in section
    assert "现在：第 2 层 = 0.4 &gt; 0.6（余量 -0.2）" in section
    assert "记录时的余量：0.2（成立）" in section
    assert "part/page.md:5</code></a>：第 2 层更准。" in section
    assert "gain" not in re.findall(r"<h3>(\w+)", html)  # an unchanged value is not in the report


def test_accepting_one_key_takes_that_result_and_leaves_the_others_failing(drifted, tmp_path: Path) -> None:
    project, _ = drifted
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(project), str(copy)], check=True)
    done = run(copy, "-m", "transformer_book", "accept", "snippets/part/a.py:table")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(only table; the other results keep their record)" in done.stdout
    assert "~ table[1].准确率: 0.8 → 0.4" in done.stdout
    assert "curve" not in done.stdout  # it prints what it accepts, and nothing else
    again = build(copy)
    assert again.returncode != 0
    html = report_of(again).read_text(encoding="utf-8")
    assert sorted(re.findall(r"<h3>(\w+)", html)) == ["beats", "curve"]  # the table is no longer drift
    unknown = run(copy, "-m", "transformer_book", "accept", "part/a:nothing")
    assert unknown.returncode != 0 and "part/a has no result nothing" in unknown.stderr


@pytest.mark.browser
def test_the_report_reads_in_a_browser_at_desktop_and_phone_width(drifted, chromium) -> None:
    path = report_of(drifted[1])
    for size in ({"width": 1280, "height": 800}, {"width": 375, "height": 740}):
        page = chromium.new_page(viewport=size)
        errors: list[str] = []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("requestfailed", lambda r: errors.append(r.url))
        page.goto(path.as_uri())
        assert errors == []
        # nothing wider than the screen: the page does not scroll sideways (wide tables scroll in their box)
        assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
        panels = page.locator(".panels svg")
        assert panels.count() >= 5
        for i in range(panels.count()):
            box = panels.nth(i).bounding_box()
            assert box is not None and box["width"] > 150 and box["x"] + box["width"] <= size["width"] + 1
        assert page.locator("td.changed").count() == 1
        page.close()
