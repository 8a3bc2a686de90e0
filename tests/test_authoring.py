"""Everything docs/authoring.md (如何参与写作) tells an author to type, typed in a scratch copy of the book."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, book_env

PAGE = ROOT / "docs" / "authoring.md"


def blocks(lang: str) -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    return [m.group(1) for m in re.finditer(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small book: the real mkdocs.yml (without the nav), the page the guide writes, its snippet."""
    root = tmp_path_factory.mktemp("book")
    config = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    (root / "mkdocs.yml").write_text(config[: config.index("\nnav:")] + "\n", encoding="utf-8")
    shutil.copy2(ROOT / "search-terms.txt", root / "search-terms.txt")
    shutil.copytree(ROOT / "docs" / "stylesheets", root / "docs" / "stylesheets")  # the book's scripts ship with the engine
    # the webfont option names a font relative to mkdocs.yml: the small book ships the same font
    shutil.copytree(ROOT / "src" / "transformer_book" / "fonts", root / "src" / "transformer_book" / "fonts")
    (root / "docs" / "index.md").write_text("# 首页\n", encoding="utf-8")
    (root / "docs" / "lecture07").mkdir(parents=True)
    (root / "docs" / "lecture07" / "demo.md").write_text("# 演示\n\n" + blocks("text")[0], encoding="utf-8")
    (root / "snippets" / "lecture07").mkdir(parents=True)
    (root / "snippets" / "lecture07" / "demo_softmax.py").write_text(blocks("python")[0], encoding="utf-8")
    return root


def run(command: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    env = book_env(PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def command(pattern: str) -> str:
    found = [b.strip() for b in blocks("bash") if re.search(pattern, b)]
    assert len(found) == 1, f"the guide should show exactly one command matching {pattern!r}"
    return found[0]


@pytest.fixture(scope="module")
def built(scratch: Path) -> subprocess.CompletedProcess:
    """The guide's build command (``BOOK_FRESH=1 mkdocs build``), run once: the commands after it in the guide
    read what it made. Tests that change the small book put it back as it was (accept, calibrate: last)."""
    return run(command("BOOK_FRESH=1"), scratch)


def test_every_command_in_the_guide_is_tested_here() -> None:
    tested = ["^mkdocs serve", "BOOK_ONLY=", "transformer_book run", "BOOK_FRESH=1", "transformer_book accept",
              "transformer_book calibrate", "transformer_book timing", "transformer_book list", "transformer_book claims"]
    for b in blocks("bash"):
        assert any(re.search(p, b) for p in tested), f"an untested command in the guide: {b!r}"


def test_building_the_guides_snippet_and_page_renders_its_table_figure_and_numbers(scratch: Path, built) -> None:
    assert built.returncode == 0, built.stdout + built.stderr
    html = (scratch / "site" / "lecture07" / "demo" / "index.html").read_text(encoding="utf-8")
    assert "表 1　softmax 的输入与输出" in html and "0.659" in html and "66%" in html
    assert "assets/generated/lecture07/demo_softmax/figure.svg" in html
    assert (scratch / "snippets" / "lecture07" / "demo_softmax.record.json").exists()
    assert "lecture07/demo_softmax" in built.stderr and "ran" in built.stderr  # the timing table


def test_claims_lists_the_guides_claim_with_its_page_line_and_comparison(scratch: Path, built) -> None:
    done = run(command("transformer_book claims"), scratch)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lecture07/demo_softmax:sums_to_one" in done.stdout and "比较：与 1 之差 = " in done.stdout
    assert "| 位置 | 句子 | 说法 | 比较 | 效应与种子间的差 | 判定 |" in done.stdout  # the --markdown line of the same block


def test_the_site_has_the_claims_page_generated_from_the_records(scratch: Path, built) -> None:
    html = (scratch / "site" / "authoring-claims" / "index.html").read_text(encoding="utf-8")
    assert "说法一览" in html and "共 1 个说法" in html
    assert 'href="../lecture07/demo/"' in html and "lecture07/demo.md:" in html  # page:line, linked to the page
    assert "与 1 之差 = " in html  # the comparison, with the recorded numbers


def test_timing_and_list_show_the_snippets(scratch: Path, built) -> None:
    timing = run(command("transformer_book timing"), scratch)
    assert timing.returncode == 0 and "lecture07/demo_softmax" in timing.stdout
    listing = run(command("transformer_book list"), scratch)
    assert listing.returncode == 0 and "lecture07/demo_softmax" in listing.stdout


def test_book_only_builds_just_the_named_snippets(scratch: Path, built) -> None:
    done = run(command("BOOK_ONLY="), scratch)
    assert done.returncode == 0, done.stdout + done.stderr
    # the guide names other snippets than the small book's one: it is left alone (shown as a placeholder)
    assert re.search(r"lecture07/demo_softmax\s+skipped", done.stderr) and "1 skipped" in done.stderr


def test_running_one_snippet_prints_its_results(scratch: Path) -> None:
    done = run(command("transformer_book run"), scratch)
    assert done.returncode == 0, done.stderr
    assert "top_weight = 0.659" in done.stdout
    assert "sums_to_one: 成立" in done.stdout


def test_accept_prints_old_to_new_after_a_deliberate_change(scratch: Path, built) -> None:
    snippet = scratch / "snippets" / "lecture07" / "demo_softmax.py"
    original = snippet.read_text(encoding="utf-8")
    snippet.write_text(original.replace("[2.0, 1.0, 0.1]", "[3.0, 1.0, 0.1]"), encoding="utf-8")
    try:
        drift = run("mkdocs build --strict", scratch)
        assert drift.returncode != 0 and "top_weight: recorded 0.659" in drift.stdout + drift.stderr
        report = scratch / ".book-cache" / "report" / "drift.html"
        assert f"recorded vs now): {report}" in drift.stdout + drift.stderr and "top_weight" in report.read_text(encoding="utf-8")
        done = run(command("transformer_book accept"), scratch)
        assert done.returncode == 0, done.stderr
        assert re.search(r"~ top_weight: 0\.659\d* → 0\.8", done.stdout)
        assert run("mkdocs build --strict", scratch).returncode == 0
    finally:
        snippet.write_text(original, encoding="utf-8")
        run(command("transformer_book accept"), scratch)


def test_calibrate_reruns_the_snippet_under_perturbations_and_reports(scratch: Path, built) -> None:
    done = run(command("transformer_book calibrate"), scratch)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "lecture07/demo_softmax" in done.stdout and "threads-2-reversed" in done.stdout + done.stderr


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mkdocs_serve_starts_and_serves_the_page(scratch: Path) -> None:
    import urllib.request

    port = free_port()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.Popen(
        ["bash", "-c", command("^mkdocs serve") + f" -a 127.0.0.1:{port}"],
        cwd=scratch, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/lecture07/demo/", timeout=5) as r:
                    assert "softmax 的输入与输出" in r.read().decode("utf-8")
                    return
            except OSError:
                time.sleep(0.5)
        pytest.fail("mkdocs serve did not serve the page within 300 s")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_claims_sentence_keeps_the_text_of_its_links_not_their_targets(tmp_path: Path) -> None:
    """The claims page lists sentences from every page: a relative link would point nowhere from there."""
    from transformer_book.book.rendering.claim_index import citations

    page = tmp_path / "docs" / "part" / "a.md"
    page.parent.mkdir(parents=True)
    page.write_text("# 页\n\n- **两者相同。** 见[第 8 节](s08.md)与 [`f`][mod.f]：输出一样。{{ claim part/x:same }}\n",
                    encoding="utf-8")
    [(snippet, key, where, sentence)] = list(citations(tmp_path / "docs"))
    assert (snippet, key, where) == ("part/x", "same", "part/a.md:3")
    assert sentence == "见第 8 节与 `f`：输出一样。"
