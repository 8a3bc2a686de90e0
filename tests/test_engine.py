"""The book engine's promises, each tested on a small throw-away project."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from transformer_book.book.rendering import pages
from transformer_book.book.state import Options

from conftest import (CONSUMER, MKDOCS_YML, PAGE, PRODUCER, SNIPPET_A, SNIPPET_B, mkdocs_build, output, session,
                      statuses, unwrap_origins, write)

# -- cache --------------------------------------------------------------------------------------------


def test_editing_an_imported_module_reruns_only_the_snippets_that_import_it(project: Path) -> None:
    s = session(project)
    assert statuses(s.build(Options())) == {"part/a": "ran", "part/b": "ran"}
    assert statuses(s.build(Options())) == {"part/a": "cached", "part/b": "cached"}

    (project / "lib" / "helper_a.py").write_text("VALUE = 2.5\n", encoding="utf-8")
    state = s.build(Options())
    assert statuses(state) == {"part/a": "ran", "part/b": "cached"}
    assert state.snippets["part/a"].results["answer"].value == 2.5


def test_editing_prose_or_an_unimported_module_reruns_nothing(project: Path) -> None:
    s = session(project)
    s.build(Options())
    (project / "docs" / "part" / "page.md").write_text(PAGE + "\n多写一句。\n", encoding="utf-8")
    (project / "lib" / "unrelated.py").write_text("X = 1\n", encoding="utf-8")
    assert statuses(s.build(Options())) == {"part/a": "cached", "part/b": "cached"}


DOCUMENTED = '''"""助手模块。"""

VALUE = 1.5  # 一个数
NAME = "甲"


def scale(x):
    """乘以 VALUE。"""
    return x * VALUE
'''

# The same code, documented otherwise: docstrings reworded and longer (every line number moves), an attribute
# docstring and comments added. What it computes is unchanged.
REDOCUMENTED = '''"""助手模块：给片段一个数。

这段说明多了两行，后面每一行的行号都变了。
"""

VALUE = 1.5  # 改过的注释
"""VALUE 的说明（属性文档字符串）。"""
NAME = "甲"


def scale(x):
    """乘以 VALUE，返回一个数。"""
    # 新加的注释
    return x * VALUE
'''


def test_a_modules_docstrings_and_comments_are_prose_and_its_code_is_what_reruns_its_snippets(project: Path) -> None:
    """The book's modules carry the docstrings the API reference shows: rewording one reruns nothing. A
    change to what the module computes — even to a string that is not a docstring — reruns its snippets."""
    lib = project / "lib" / "helper_a.py"
    lib.write_text(DOCUMENTED, encoding="utf-8")
    s = session(project)
    state = s.build(Options())
    deps = state.entries["part/a"].deps
    assert deps["lib/helper_a.py"].startswith("code:"), deps
    engine = [d for rel, d in deps.items() if "transformer_book/book/" in rel]
    assert engine and not any(d.startswith("code:") for d in engine), "the engine is recorded by its bytes"

    lib.write_text(REDOCUMENTED, encoding="utf-8")
    assert statuses(s.build(Options())) == {"part/a": "cached", "part/b": "cached"}
    assert statuses(session(project).build(Options())) == {"part/a": "cached", "part/b": "cached"}  # a new process

    for edit in (REDOCUMENTED.replace('NAME = "甲"', 'NAME = "乙"'), REDOCUMENTED.replace("VALUE = 1.5", "VALUE = 2.5")):
        lib.write_text(edit, encoding="utf-8")
        state = s.build(Options())
        assert statuses(state)["part/a"] == "ran"
    assert state.snippets["part/a"].results["answer"].value == 2.5


def test_editing_a_snippet_reruns_only_that_snippet(project: Path) -> None:
    s = session(project)
    s.build(Options())
    path = project / "snippets" / "part" / "b.py"
    path.write_text(path.read_text(encoding="utf-8") + "\n# 注释也算改动\n", encoding="utf-8")
    assert statuses(s.build(Options())) == {"part/a": "cached", "part/b": "ran"}


def test_a_truncated_cache_entry_is_recomputed_not_trusted(project: Path) -> None:
    s = session(project)
    s.build(Options())
    entries = sorted((project / ".book-cache" / "entries").rglob("*.json"))
    assert len(entries) == 2
    for entry in entries:
        blob = entry.read_bytes()
        entry.write_bytes(blob[: len(blob) // 2])
    fresh = session(project)  # a new process would also start with an empty in-memory hash memo
    state = fresh.build(Options())
    assert statuses(state) == {"part/a": "ran", "part/b": "ran"}
    assert state.snippets["part/a"].results["answer"].value == 1.5
    assert statuses(fresh.build(Options())) == {"part/a": "cached", "part/b": "cached"}


def test_a_corrupted_cache_entry_with_intact_length_is_recomputed(project: Path) -> None:
    s = session(project)
    s.build(Options())
    for entry in (project / ".book-cache" / "entries").rglob("*.json"):
        blob = bytearray(entry.read_bytes())
        blob[-10] ^= 0xFF
        entry.write_bytes(bytes(blob))
    assert statuses(session(project).build(Options())) == {"part/a": "ran", "part/b": "ran"}


def test_fresh_mode_executes_everything_even_when_cached(project: Path) -> None:
    s = session(project)
    s.build(Options())
    assert statuses(s.build(Options(fresh=True))) == {"part/a": "ran", "part/b": "ran"}


def test_no_temporary_files_are_left_in_the_cache(project: Path) -> None:
    session(project).build(Options())
    leftovers = [p for p in (project / ".book-cache").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []


# -- records and drift --------------------------------------------------------------------------------


def _records(project: Path) -> dict[str, dict]:
    from transformer_book.book.checking.records import deterministic_part

    return {p.name: deterministic_part(json.loads(p.read_text(encoding="utf-8")))
            for p in (project / "snippets").rglob("*.record.json")}


def test_two_fresh_builds_give_identical_records(project: Path) -> None:
    """Identical except what is declared measured (the run's duration, measured results)."""
    s = session(project)
    s.build(Options(fresh=True))
    first = _records(project)
    for p in (project / "snippets").rglob("*.record.json"):
        p.unlink()
    s.build(Options(fresh=True))
    second = _records(project)
    assert set(first) == {"a.record.json", "b.record.json"}
    assert first == second


def test_a_session_that_rebuilds_checks_again_only_what_changed_and_still_sees_every_drift(
        project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``serve`` rebuilds after every save; unchanged results against unchanged records are not compared
    again — but a record edited by hand, or a snippet that ran again with another result, is."""
    from transformer_book.book.checking import drift

    compared: list[str] = []
    real = drift.compare
    monkeypatch.setattr(drift, "compare", lambda sid, *a: compared.append(sid) or real(sid, *a))
    s = session(project)
    assert s.build(Options()).drift == []  # writes the records
    record = project / "snippets" / "part" / "a.record.json"
    compared.clear()
    assert s.build(Options()).drift == []
    assert s.build(Options()).drift == []
    assert compared == ["part/a", "part/b"]  # once each, after the first build wrote their records

    data = json.loads(record.read_text(encoding="utf-8"))
    data["results"]["answer"]["value"] = 1.25  # the record now says something the results do not
    record.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    state = s.build(Options())
    assert statuses(state)["part/a"] == "cached"
    assert [(ch.path, ch.old, ch.new) for ch in state.drift] == [("answer", 1.25, 1.5)]
    assert [(ch.path, ch.old, ch.new) for ch in s.build(Options()).drift] == [("answer", 1.25, 1.5)]  # and again

    (project / "lib" / "helper_a.py").write_text("VALUE = 1.25\n", encoding="utf-8")  # ran again: now it agrees
    state = s.build(Options())
    assert statuses(state)["part/a"] == "ran" and [ch.path for ch in state.drift if ch.snippet == "part/a"] == [
        "grid[0].y", "grid[1].y"]


def test_a_changed_result_is_reported_as_drift_with_the_pages_that_show_it(project: Path) -> None:
    assert mkdocs_build(project).returncode == 0  # writes the records
    (project / "lib" / "helper_a.py").write_text("VALUE = 1.6\n", encoding="utf-8")
    done = mkdocs_build(project)
    assert done.returncode != 0
    report = done.stdout + done.stderr
    assert "snippets/part/a.py" in report
    assert "answer: recorded 1.5, now 1.6" in report
    assert "part/page.md:3" in report  # the inline value
    assert "grid[0].y: recorded 1.5, now 1.6" in report
    assert "part/page.md:5" in report  # the table
    assert "python -m transformer_book accept part/a" in report


def test_a_drift_within_a_declared_tolerance_passes(project: Path) -> None:
    write(project / "snippets" / "part" / "b.py", SNIPPET_B.replace(
        'Value(helper_b.VALUE, ".1f")',
        'Value(helper_b.VALUE, ".1f", tolerance=Tolerance(rel=0.01, reason="测试：允许 1% 的波动"))',
    ).replace("import Value", "import Tolerance, Value"))
    assert mkdocs_build(project).returncode == 0
    (project / "lib" / "helper_b.py").write_text("VALUE = 7.05\n", encoding="utf-8")
    assert mkdocs_build(project).returncode == 0
    (project / "lib" / "helper_b.py").write_text("VALUE = 7.2\n", encoding="utf-8")
    assert mkdocs_build(project).returncode != 0


def test_a_widened_tolerance_needs_a_reason() -> None:
    from transformer_book.book import Tolerance

    with pytest.raises(ValueError, match="reason"):
        Tolerance(rel=0.1)


def test_ci_mode_fails_on_a_result_without_record(project: Path) -> None:
    done = mkdocs_build(project, BOOK_CI="1")
    assert done.returncode != 0
    assert "Results with no record" in done.stdout + done.stderr
    assert not list((project / "snippets").rglob("*.record.json")), "CI must not write records"


def test_ci_mode_fails_on_a_record_that_no_snippet_produces(project: Path) -> None:
    assert mkdocs_build(project).returncode == 0
    assert mkdocs_build(project, BOOK_CI="1").returncode == 0
    (project / "snippets" / "part" / "b.py").unlink()
    (project / "docs" / "part" / "page.md").write_text(PAGE.replace("另一个数：{{ b:other | .3f }}。", ""), encoding="utf-8")
    done = mkdocs_build(project, BOOK_CI="1")
    assert done.returncode != 0
    assert "no snippet produces" in done.stdout + done.stderr
    assert "snippets/part/b.record.json" in done.stdout + done.stderr


def test_accept_rewrites_records_and_prints_old_to_new(project: Path) -> None:
    assert mkdocs_build(project).returncode == 0
    (project / "lib" / "helper_a.py").write_text("VALUE = 3.0\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "transformer_book", "accept", "part/a"],
        cwd=project, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "~ answer: 1.5 → 3.0" in done.stdout
    record = json.loads((project / "snippets" / "part" / "a.record.json").read_text(encoding="utf-8"))
    assert record["results"]["answer"]["value"] == 3.0
    assert mkdocs_build(project, BOOK_CI="1").returncode == 0


def test_accept_rewrites_a_record_that_holds_a_claims_inputs_in_another_order(project: Path) -> None:
    """Two mappings in different orders compare equal, but a claim is shown in its stored order: a record holding
    ``equal(省下的=…, Vd=…)`` as {Vd, 省下的} (written once from a key-sorted cache) is put back by ``accept``."""
    write(project / "snippets" / "part" / "b.py", """
        from transformer_book.book import Claim, Value, equal


        def compute():
            return {"other": Value(7.0, ".1f"), "same": Claim("省下的恰好是 V·d", equal(省下的=1920, Vd=1920))}
    """)
    accept = [sys.executable, "-m", "transformer_book", "accept", "part/b"]
    first = subprocess.run(accept, cwd=project, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    path = project / "snippets" / "part" / "b.record.json"
    written = path.read_text(encoding="utf-8")
    turned = written.replace('"省下的": 1920,\n          "Vd": 1920', '"Vd": 1920,\n          "省下的": 1920')
    assert turned != written
    path.write_text(turned, encoding="utf-8")
    done = subprocess.run(accept, cwd=project, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert path.read_text(encoding="utf-8").split('"results"')[1] == written.split('"results"')[1]

# -- errors with locations ----------------------------------------------------------------------------


def test_a_raising_snippet_fails_the_build_with_its_file_and_line(project: Path) -> None:
    write(project / "snippets" / "part" / "b.py", """
        from transformer_book.book import Value


        def compute():
            x = 1
            raise RuntimeError("模拟的错误")
    """)
    done = mkdocs_build(project)
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "snippets/part/b.py:6" in out
    assert "RuntimeError: 模拟的错误" in out
    assert "part/page.md:7" in out  # the page that uses it


def test_an_error_inside_the_library_names_the_snippet_line_and_the_library_line(project: Path) -> None:
    write(project / "lib" / "helper_a.py", "VALUE = 1.5\n\n\ndef boom():\n    return 1 / 0\n")
    src = SNIPPET_A.replace("def compute():\n", "def compute():\n    helper_a.boom()\n")
    write(project / "snippets" / "part" / "a.py", src)
    state = session(project).build(Options())
    err = state.snippets["part/a"].error
    assert err is not None
    line = src.lstrip("\n").splitlines().index("    helper_a.boom()") + 1
    assert err.location() == f"snippets/part/a.py:{line}"
    assert err.deepest == "lib/helper_a.py:5"
    assert "ZeroDivisionError" in err.message


def test_an_unknown_snippet_in_a_page_fails_with_page_and_line(project: Path) -> None:
    write(project / "docs" / "part" / "page.md", PAGE + "\n\n结尾 {{ nosuch:value }}。\n")
    done = mkdocs_build(project)
    assert done.returncode != 0
    assert "part/page.md:10: unknown snippet 'part/nosuch'" in done.stdout + done.stderr


def test_an_unknown_key_in_a_page_fails_with_page_and_line(project: Path) -> None:
    write(project / "docs" / "part" / "page.md", "---\ntitle: x\n---\n" + PAGE.replace("a:answer", "a:answr"))
    done = mkdocs_build(project)
    assert done.returncode != 0
    assert "part/page.md:6: snippet 'part/a' has no result 'answr'" in done.stdout + done.stderr


# -- page syntax ----------------------------------------------------------------------------------------


def test_references_are_found_outside_code_only() -> None:
    text = textwrap.dedent("""
        值 {{ a:x }} 与 `{{ a:y }}`。
        ```text
        {{ table a:z }}
        ```
        {{ figure b:f "图" }}
          {{ source b }}
    """)
    refs = pages.find_refs(text, "lecture07/p.md")
    assert [(r.kind, r.snippet, r.key, r.line) for r in refs] == [
        ("value", "lecture07/a", "x", 2),
        ("figure", "lecture07/b", "f", 6),
        ("source", "lecture07/b", "", 7),
    ]


def test_a_page_is_parsed_once_and_rendering_replaces_each_directive_where_the_parser_found_it(tmp_path: Path) -> None:
    """The one parser (issue 41): each directive carries its place (line, columns, indentation); rendering
    substitutes the parsed directives in page order, without matching the syntax again, and the claims listing
    reads the sentence before a citation from the same objects."""
    from transformer_book.book.rendering import claim_index

    text = "# 页\n\n甲 {{ a:x }} 乙 `{{ a:y }}` 丙 {{ claim a:c }}，丁 {{ b:z | .1f }}。\n\n    {{ table a:t \"表\" }}\n"
    refs = pages.find_refs(text, "part/p.md")
    line = text.split("\n")[2]
    assert [(r.kind, line[r.start:r.end]) for r in refs[:3]] == [
        ("value", "{{ a:x }}"), ("claim", "{{ claim a:c }}"), ("value", "{{ b:z | .1f }}")]
    assert refs[3].own_line and refs[3].indent == "    " and refs[3].index == 4
    seen: list[str] = []
    out = pages.render(text, "part/p.md", 0, lambda r: seen.append(r.key) or f"[{r.key}]\n第二行" * r.own_line or f"[{r.key}]")
    assert seen == ["x", "c", "z", "t"], "called once per directive, in page order"
    assert out.split("\n")[2:6] == ["甲 [x] 乙 `{{ a:y }}` 丙 [c]，丁 [z]。", "", "    [t]", "    第二行"]
    write(tmp_path / "docs" / "part" / "p.md", text)
    assert list(claim_index.citations(tmp_path / "docs")) == [("part/a", "c", "part/p.md:3", "甲 ⟨x⟩ 乙 `{{ a:y }}` 丙")]


def test_a_malformed_reference_is_an_error_with_its_line() -> None:
    with pytest.raises(pages.PageRefError, match="p.md:2"):
        pages.find_refs("好\n{{ a }}\n", "p.md")


def test_latex_double_braces_are_not_references() -> None:
    assert pages.find_refs("公式 $x^{{2}}$ 与 $\\frac{{a}}{b}$。", "p.md") == []


def test_values_render_with_the_page_format_or_the_default() -> None:
    from transformer_book.book.results import format_number

    assert format_number(10.948908, ".2f") == "10.95"
    assert format_number(-0.5, ".3f") == "−0.500"
    assert format_number(124439808, ",d") == "124,439,808"


# -- under `mkdocs serve` -------------------------------------------------------------------------------


def _serve_config(project: Path, dirty: bool):
    """The project's config and book plugin, started as `mkdocs serve [--dirty]` starts them."""
    from mkdocs.config import load_config

    cwd = os.getcwd()
    os.chdir(project)
    try:
        config = load_config(str(project / "mkdocs.yml"))
    finally:
        os.chdir(cwd)
    plugin = config.plugins["book"]
    plugin.on_startup(command="serve", dirty=dirty)
    return config.plugins.on_config(config), plugin


def _serve_plugin(project: Path):
    """The plugin as `mkdocs serve` drives it: started with command="serve", then one build's events."""
    from mkdocs.structure.files import get_files
    from mkdocs.structure.pages import Page

    config, plugin = _serve_config(project, dirty=False)
    files = get_files(config)

    def render(page_path: str) -> str:
        plugin.on_pre_build(config=config)
        if plugin.background is not None and plugin.background.running:  # results land in the background …
            plugin.on_post_build(config=config)  # (once the first build is written)
            plugin.background.wait(120)
            plugin.on_pre_build(config=config)  # … and the stamp's rebuild picks them up
        f = files.get_file_from_path(page_path)
        page = Page(None, f, config)
        return unwrap_origins(plugin.on_page_markdown(f.content_string, page=page, config=config, files=files))

    return render


def test_under_serve_a_failing_snippet_is_shown_in_the_page_and_the_server_keeps_going(project: Path) -> None:
    write(project / "snippets" / "part" / "b.py", """
        def compute():
            raise ValueError("坏了")
    """)
    render = _serve_plugin(project)
    html = render("part/page.md")  # no exception: serve keeps running
    assert "答案是 1.50。" in html  # the healthy snippet still renders
    assert "snippets/part/b.py:2: ValueError: 坏了" in html


def test_under_serve_an_unknown_reference_is_shown_in_the_page(project: Path) -> None:
    write(project / "docs" / "part" / "page.md", PAGE + "\n{{ table a:nosuch }}\n")
    html = _serve_plugin(project)("part/page.md")
    assert "part/page.md:9: snippet 'part/a' has no result 'nosuch'" in html


def test_book_only_runs_the_selected_snippets_and_shows_placeholders_for_the_rest(project: Path) -> None:
    state = session(project).build(Options(select=("part/a",)))
    assert statuses(state) == {"part/a": "ran", "part/b": "skipped"}
    assert state.orphan_records == []


def test_a_snippet_reuses_another_snippets_trained_artifact_and_reruns_when_it_changes(project: Path) -> None:
    write(project / "snippets" / "part" / "train.py", PRODUCER)
    write(project / "snippets" / "part" / "use.py", CONSUMER)
    s = session(project)
    state = s.build(Options())
    assert state.snippets["part/use"].results["total"].value == 4.5
    record = json.loads((project / "snippets" / "part" / "train.record.json").read_text(encoding="utf-8"))
    assert set(record["results"]) == {"trained_value"}, "artifacts are cached, not recorded"
    assert statuses(s.build(Options()))["part/use"] == "cached"

    (project / "lib" / "helper_a.py").write_text("VALUE = 2.0\n", encoding="utf-8")
    state = s.build(Options())
    assert {k: v for k, v in statuses(state).items() if k != "part/b"} == {"part/a": "ran", "part/train": "ran", "part/use": "ran"}
    assert state.snippets["part/use"].results["total"].value == 6.0


def test_accept_with_keep_requirements_reruns_only_the_consumer(project: Path) -> None:
    """Accepting a consumer need not train its producer again: the producer comes from the cache."""
    write(project / "snippets" / "part" / "train.py", PRODUCER)
    write(project / "snippets" / "part" / "use.py", CONSUMER)
    s = session(project)
    s.build(Options())
    write(project / "snippets" / "part" / "use.py", CONSUMER.replace('".2f"', '".3f"'))
    state, diffs = s.accept(["part/use"], keep_requirements=True)
    assert statuses(state) == {"part/train": "cached", "part/use": "ran"}
    state, _ = s.accept(["part/use"])
    assert statuses(state) == {"part/train": "ran", "part/use": "ran"}, "without it, accept reruns the closure"


def test_accept_leaves_a_requirements_record_alone_unless_it_drifted(project: Path) -> None:
    """Accepting a consumer reruns its producer; the producer's record changes only if its results drifted
    beyond their tolerance (and then the change is listed), never for bits inside it while saying "unchanged"."""
    write(project / "snippets" / "part" / "train.py", PRODUCER)
    write(project / "snippets" / "part" / "use.py", CONSUMER)
    s = session(project)
    s.build(Options())
    producer = project / "snippets" / "part" / "train.record.json"
    consumer = project / "snippets" / "part" / "use.record.json"
    before = producer.read_text(encoding="utf-8")
    (project / "lib" / "helper_a.py").write_text(f"VALUE = {1.5 * (1 + 1e-9)!r}\n", encoding="utf-8")  # inside rel 1e-6
    _, diffs = s.accept(["part/use"])
    assert diffs["part/train"] == [] and diffs["part/use"] == []
    assert producer.read_text(encoding="utf-8") == before, "a requirement inside its tolerance keeps its record"
    assert json.loads(consumer.read_text(encoding="utf-8"))["results"]["total"]["value"] == sum([1.5 * (1 + 1e-9)] * 3)

    (project / "lib" / "helper_a.py").write_text("VALUE = 2.0\n", encoding="utf-8")  # beyond it
    _, diffs = s.accept(["part/use"])
    assert [c.result for c in diffs["part/train"]] == ["trained_value"]
    assert json.loads(producer.read_text(encoding="utf-8"))["results"]["trained_value"]["value"] == 2.0


def test_accept_rewrites_a_record_when_only_a_claims_comparison_changed(project: Path) -> None:
    """Same statement, another bound: the record must carry the comparison the build now checks."""
    claim = '''
        from transformer_book.book import Claim, below

        def compute():
            return {{"small": Claim("误差很小", below(0.001, {bound}, name="误差"))}}
    '''
    write(project / "snippets" / "part" / "c.py", claim.format(bound=0.01))
    s = session(project)
    s.accept(["part/c"])
    write(project / "snippets" / "part" / "c.py", claim.format(bound=0.1))
    _, diffs = s.accept(["part/c"])
    assert diffs["part/c"] == [], "the statement did not change"
    rec = json.loads((project / "snippets" / "part" / "c.record.json").read_text(encoding="utf-8"))
    assert rec["results"]["small"]["check"]["inputs"]["界"] == 0.1


def test_a_requires_cycle_fails_the_build_naming_it(project: Path) -> None:
    write(project / "snippets" / "part" / "a.py", 'REQUIRES = ["part/b"]\n' + SNIPPET_A)
    write(project / "snippets" / "part" / "b.py", 'REQUIRES = ["part/a"]\n' + SNIPPET_B)
    with pytest.raises(ValueError, match=r"REQUIRES forms a cycle: part/(a|b) → part/(b|a) → part/\1"):
        session(project).build(Options())


# -- notebook pages -------------------------------------------------------------------------------------


def notebook(*cells: tuple[str, str]) -> str:
    return json.dumps({
        "cells": [
            {"cell_type": kind, "metadata": {}, "source": src.splitlines(True),
             **({"outputs": [], "execution_count": None} if kind == "code" else {})}
            for kind, src in cells
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }, ensure_ascii=False)


NOTEBOOK_YML = MKDOCS_YML.replace("      mathjax: false\n", """      mathjax: false
  - mkdocs-jupyter:
      include: ["*.ipynb"]
      execute: false
      include_source: true
""")


def test_a_notebook_page_is_executed_recorded_and_rendered_with_its_outputs(project: Path) -> None:
    write(project / "mkdocs.yml", NOTEBOOK_YML)
    (project / "docs" / "part" / "nb.ipynb").write_text(notebook(
        ("markdown", "# 笔记本\n\n公式 $x^2$。"),
        ("code", "import sys\nsys.path.insert(0, 'lib')\nimport helper_a\nfrom transformer_book.book import record"),
        ("code", "loss = record('loss', helper_a.VALUE * 2, '.2f')\nprint('训练后的损失', loss)"),
        ("code", "loss + 1"),
    ), encoding="utf-8")
    site = project / "site"
    done = mkdocs_build(project, "-d", str(site))
    assert done.returncode == 0, done.stdout + done.stderr
    record = json.loads((project / "snippets" / "part" / "nb.record.json").read_text(encoding="utf-8"))
    assert record["results"]["loss"]["value"] == 3.0
    html = (site / "part" / "nb" / "index.html").read_text(encoding="utf-8")
    assert "训练后的损失 3.0" in html and "4.0" in html  # printed text and the last expression
    external = re.findall(r"""<script\b[^>]*src=["']https?://[^"']+|import [^;]* from ['"]https?://[^'"]+""", html)
    assert [e for e in external if "mathjax" in e.lower() or "mermaid" in e.lower()] == [], (
        "nbconvert's CDN scripts (MathJax 2, mermaid) are stripped"
    )
    downloaded = json.loads((site / "part" / "nb" / "nb.ipynb").read_text(encoding="utf-8"))
    assert downloaded["cells"][2]["outputs"][0]["text"] == ["训练后的损失 3.0\n"]

    (project / "lib" / "helper_a.py").write_text("VALUE = 1.75\n", encoding="utf-8")
    done = mkdocs_build(project, "-d", str(site))
    assert done.returncode != 0
    assert "loss: recorded 3.0, now 3.5" in done.stdout + done.stderr


def test_a_failing_notebook_cell_fails_the_build_with_cell_and_line(project: Path) -> None:
    write(project / "mkdocs.yml", NOTEBOOK_YML)
    (project / "docs" / "part" / "nb.ipynb").write_text(notebook(
        ("code", "x = 1"),
        ("code", "y = 2\nraise KeyError('没有这个键')"),
    ), encoding="utf-8")
    done = mkdocs_build(project)
    assert done.returncode != 0
    assert "docs/part/nb.ipynb:cell 2:2" in done.stdout + done.stderr
    assert "KeyError" in done.stdout + done.stderr


def test_under_serve_dirty_pages_showing_a_rerun_snippet_are_rebuilt(project: Path) -> None:
    from mkdocs.structure.files import get_files

    session(project).build(Options())  # cache everything first
    (project / "lib" / "helper_b.py").write_text("VALUE = 8.0\n", encoding="utf-8")  # b re-runs, a does not
    config, plugin = _serve_config(project, dirty=True)
    plugin.on_pre_build(config=config)
    files = get_files(config)
    for f in files:
        f.is_modified = lambda: False  # as if every page were already built and unchanged
    files = plugin.on_files(files, config=config)
    assert files.get_file_from_path("part/page.md").is_modified()  # it shows part/b, which re-ran
    assert not files.get_file_from_path("index.md").is_modified()


# -- `mkdocs serve` never waits for compute ----------------------------------------------------------------

SLOW = '''
import time
from transformer_book.book import Value


def compute():
    time.sleep(1.0)
    return {"other": Value(7.0, ".1f")}
'''


def _served(project: Path, dirty: bool = True):
    """A plugin started as `mkdocs serve --dirty` starts it; returns (config, plugin, render)."""
    from mkdocs.structure.files import get_files
    from mkdocs.structure.pages import Page

    config, plugin = _serve_config(project, dirty=dirty)

    def render(page_path: str) -> str:
        plugin.on_pre_build(config=config)
        files = plugin.on_files(get_files(config), config=config)
        f = files.get_file_from_path(page_path)
        html = unwrap_origins(plugin.on_page_markdown(f.content_string, page=Page(None, f, config), config=config, files=files))
        plugin.on_post_build(config=config)  # the site is written: the background build starts computing
        return html

    return config, plugin, render


def test_the_first_serve_build_renders_every_page_at_once_and_computes_in_the_background(project: Path) -> None:
    write(project / "snippets" / "part" / "b.py", SLOW)
    _, plugin, render = _served(project)
    html = render("part/page.md")
    assert plugin.state.snippets["part/b"].status == "pending", "the serve build did not wait for the snippet"
    assert "正在计算" in html and "答案是" in html
    plugin.background.wait(120)
    assert plugin.background.stamp.exists(), "a landed result touches the watched stamp (livereload rebuilds)"
    html = render("part/page.md")
    assert plugin.state.snippets["part/b"].status == "cached" and "另一个数：7.000。" in html


def test_while_recomputing_serve_shows_the_recorded_value_marked_as_such(project: Path) -> None:
    assert mkdocs_build(project).returncode == 0  # records written
    shutil_rmtree(project / ".book-cache")
    write(project / "snippets" / "part" / "b.py", SLOW.replace("7.0", "7.0)  # 同一个值\n    _ = (1"))
    _, plugin, render = _served(project)
    html = render("part/page.md")
    assert '答案是 <span class="book-pending" title="来自记录，正在重新计算">1.50<sup' in html  # recorded, marked
    assert 'class="book-caption"' in html  # the table rendered from its record (formats recorded)
    plugin.background.wait(120)


def test_a_broken_snippet_that_is_restored_shows_its_result_again_without_any_other_edit(project: Path) -> None:
    session(project).build(Options())  # everything cached, as after a first serve
    _, plugin, render = _served(project)
    assert "另一个数：7.000。" in render("part/page.md")
    path = project / "snippets" / "part" / "b.py"
    original = path.read_text(encoding="utf-8")
    path.write_text(original.replace("def compute():\n", "def compute():\n    1 / 0\n"), encoding="utf-8")
    html = render("part/page.md")  # an edit: this rebuild runs what it needs before rendering
    assert "ZeroDivisionError" in html
    path.write_text(original, encoding="utf-8")  # undo the edit
    html = render("part/page.md")
    assert "另一个数：7.000。" in html and "ZeroDivisionError" not in html
    assert plugin.state.snippets["part/b"].status == "cached", "undoing an edit reruns nothing"


def test_a_dirty_rebuild_rerenders_every_page_whose_results_changed(project: Path) -> None:
    from mkdocs.structure.files import get_files

    session(project).build(Options())
    config, plugin, render = _served(project)
    render("part/page.md")  # what the pages show now
    path = project / "snippets" / "part" / "b.py"
    original = path.read_text(encoding="utf-8")
    path.write_text(original.replace("def compute():\n", "def compute():\n    1 / 0\n"), encoding="utf-8")
    render("part/page.md")
    path.write_text(original, encoding="utf-8")
    plugin.on_pre_build(config=config)  # the restored snippet comes from the cache: nothing ran …
    files = get_files(config)
    for f in files:
        f.is_modified = lambda: False
    files = plugin.on_files(files, config=config)
    assert files.get_file_from_path("part/page.md").is_modified(), "… but its page changed back and is re-rendered"
    assert not files.get_file_from_path("index.md").is_modified()


def test_running_snippets_leaves_no_bytecode_in_the_watched_folders(project: Path) -> None:
    """A .pyc written beside a watched source makes `mkdocs serve` rebuild twice for one edit."""
    session(project).build(Options(fresh=True))
    assert [p for p in project.rglob("__pycache__") if ".book-cache" not in p.parts] == []


def shutil_rmtree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def test_every_shown_result_carries_its_origin_and_the_page_holds_the_code_behind_each_number(project: Path) -> None:
    import html as html_lib

    site = project / "site"
    done = mkdocs_build(project, "-d", str(site))  # the first build writes the records
    assert done.returncode == 0, done.stdout + done.stderr
    done = mkdocs_build(project, "-d", str(site))
    assert done.returncode == 0, done.stdout + done.stderr
    page = (site / "part" / "page" / "index.html").read_text(encoding="utf-8")
    origins = [json.loads(html_lib.unescape(m)) for m in re.findall(r'data-origin="([^"]*)"', page)]
    by_key = {(o["snippet"], o["key"]): o for o in origins}
    answer = by_key[("part/a", "answer")]
    assert answer["value"] == "1.5" and "精确值" in answer["kind"] and "相对 1e-06" in answer["tolerance"]
    record = json.loads((project / "snippets" / "part" / "a.record.json").read_text(encoding="utf-8"))
    assert answer["recorded"].startswith(record["provenance"]["date"]) and "torch" in answer["recorded"]
    assert ("part/a", "grid") in by_key and "行 × " in by_key[("part/a", "grid")]["value"]  # the table's badge
    other = by_key[("part/b", "other")]
    assert other["value"] == "7.0"
    # each popover links to the snippet's code on the same page — b is cited inline only, so its fold is
    # appended at the end of the page — and to the whole record, which the site carries
    for o in (answer, other):
        assert f'id="{o["source"][1:]}"' in page, o["source"]
        assert (site / "part" / "page" / o["record"]).resolve().is_file(), o["record"]
    assert page.index("本页正文中的数字由下面的代码算出") < page.index('id="src-part-b"')
    assert "snippets/part/b.py" in page
    assert '1.50</span>' in page  # the number itself is still what the text shows


def test_an_origin_survives_markdown_characters_in_a_claim(project: Path) -> None:
    import html as html_lib

    write(project / "snippets" / "part" / "c.py", '''
        from transformer_book.book import Claim, equal

        def compute():
            return {"ok": Claim("`F.gelu` 的 $x\\\\,\\\\Phi(x)$ 与 [链接](x) *强调* 都原样保留", equal(n=1, 期望=1))}
    ''')
    write(project / "docs" / "part" / "page.md", PAGE + "\n一句话。{{ claim c:ok }}\n")
    site = project / "site"
    done = mkdocs_build(project, "-d", str(site))
    assert done.returncode == 0, done.stdout + done.stderr
    page = (site / "part" / "page" / "index.html").read_text(encoding="utf-8")
    (raw,) = [m for m in re.findall(r'data-origin="([^"]*)"', page) if "c&quot;" in m or "part/c" in html_lib.unescape(m)]
    claim = json.loads(html_lib.unescape(raw))
    assert claim["statement"] == "`F.gelu` 的 $x\\,\\Phi(x)$ 与 [链接](x) *强调* 都原样保留"
    assert claim["value"] == "成立：n = 1 == 期望 = 1"
    assert claim["margin"] == "离散的事实，不随机器而变"  # the popover says how far the claim is from flipping


NOTEBOOK_SNIPPET = '''
"""一个小片段：一个数、一张表、一张图。"""

import numpy as np

from transformer_book.book import Figure, Table, Value
from transformer_book.plotting import new_figure

N = 4


def compute():
    xs = np.arange(N)
    fig, ax = new_figure()
    ax.plot(xs, xs ** 2)
    ax.set_xlabel("位置")
    return {
        "x": Value(float(np.sqrt(2.25)), ".3f"),
        "t": Table(columns=["n", "平方"], rows=[[int(i), int(i * i)] for i in xs], formats=["d", "d"]),
        "f": Figure(fig),
    }
'''

NOTEBOOK_PAGE = """# 第二页

数是 {{ c:x | .2f }}，[回到第一页](page.md)。

{{ table c:t "表 1　平方" }}

{{ figure c:f "图 1　平方" }}

!!! tip "提示"

    里面也有 {{ c:x }}。
"""


def test_a_page_notebook_places_each_directive_where_it_stands_inside_admonitions_and_lists(tmp_path: Path) -> None:
    """The notebook is written from the page's parsed directives: a number stated inside a tip, a table inside it,
    and a table indented under a list item each get their cells there (the list's table once stayed behind as a
    control character in the Markdown cell)."""
    from transformer_book.book.rendering import page_notebook
    from transformer_book.book.results import Table, Value

    code = tmp_path / "a.py"
    code.write_text("def compute():\n    return {}\n", encoding="utf-8")
    view = page_notebook.SnippetView("part/a", code, results={"x": Value(1.5, ".2f"), "t": Table(["列"], [[1]])})
    page = ('# 页\n\n!!! tip "看表"\n\n    数是 {{ a:x }}，见表。\n\n    {{ table a:t "表 1　提示里的表" }}\n\n'
            '- 列表里的一项：\n\n    {{ table a:t "表 2　列表里的表" }}\n\n没有结果的一段。\n')
    nb = page_notebook.build("part/p.md", "页", page, 0, {"part/a": view}, lambda path: path.read_text(encoding="utf-8"))
    cells = [c["source"] for c in nb["cells"]]
    assert not any(ch in "".join(cells) for ch in "\x00\x01\x02\x03")
    assert cells[0] == "# 页"
    stated = next(i for i, c in enumerate(cells) if c.startswith("> **看表**") and "\n> 数是 1.50，见表。" in c)
    assert cells[stated + 1] == 'show(results["a"], "x", snippet="part/a")', "the number's cell follows its paragraph"
    assert cells[stated + 2:stated + 4] == ["**表 1　提示里的表**", 'show(results["a"], "t", snippet="part/a")']
    listed = cells.index("- 列表里的一项：")
    assert cells[listed + 1:listed + 3] == ["**表 2　列表里的表**", 'show(results["a"], "t", snippet="part/a")']
    assert cells[-1] == "没有结果的一段。"
    assert sum("def compute():" in c for c in cells) == 1, "the snippet's code comes once, before its first result"


def test_a_page_with_results_gets_a_runnable_notebook_that_reproduces_its_numbers(project: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    from transformer_book.book.checking import records
    from transformer_book.book.checking.drift import compare
    from transformer_book.book.cli.in_jupyter import RESULT_MIME
    from transformer_book.book.results import from_data

    write(project / "snippets" / "part" / "c.py", NOTEBOOK_SNIPPET)
    write(project / "docs" / "part" / "page2.md", NOTEBOOK_PAGE)
    site = project / "site"
    written = []
    for _ in range(2):  # the first build writes the records
        done = mkdocs_build(project, "-d", str(site))
        assert done.returncode == 0, done.stdout + done.stderr
        written.append((site / "part" / "page2" / "page2.ipynb").read_bytes())
    assert written[0] == written[1], "two builds of one page write the same notebook (cell ids included)"
    html = (site / "part" / "page2" / "index.html").read_text(encoding="utf-8")
    assert 'href="page2.ipynb" download' in html
    nb = nbformat.read(site / "part" / "page2" / "page2.ipynb", as_version=4)
    nbformat.validate(nb)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert nb.cells[0].source == "# 第二页"
    assert "数是 1.50，回到第一页。" in markdown  # the number filled in; a link to another page kept as text
    assert "> **提示**" in markdown and "里面也有 1.500。" in markdown  # an admonition as a blockquote
    assert "def compute():" in code and 'results["c"] = run(compute, "part/c")' in code
    assert code.count("def compute():") == 1, "a snippet's code appears once"

    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(project)}}).execute()
    shown = [o["data"][RESULT_MIME] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
             if RESULT_MIME in o.get("data", {})]
    assert sorted({s["key"] for s in shown}) == ["f", "t", "x"]
    record = records.load(project / "snippets" / "part" / "c.record.json")
    for s in shown:
        sub = replace(record, results={s["key"]: record.results[s["key"]]})
        assert compare("part/c", sub, {s["key"]: from_data(json.loads(s["result"]))}) == [], s["key"]
    svg = [o for c in nb.cells for o in c.get("outputs", []) if "image/svg+xml" in o.get("data", {})]
    assert len(svg) == 1, "the figure is shown once (as SVG), not a second time by the inline backend"


BLOCK_SNIPPET = '''
from transformer_book.book import Block

COLOR = "#336699"


def compute():
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" width="40" height="10"><rect width="40" height="10" fill="{COLOR}"/></svg>'
    return {
        "svg": Block(svg, caption="一条色带"),
        "md": Block("| 甲 | 乙 |\\n|---|---|\\n| 1 | 2 |", markdown=True),
    }
'''


def test_a_raw_block_is_placed_as_it_is_and_recorded_by_its_hash(project: Path) -> None:
    write(project / "snippets" / "part" / "d.py", BLOCK_SNIPPET)
    write(project / "docs" / "part" / "page.md", PAGE + "\n{{ block d:svg }}\n\n{{ block d:md \"表 2　甲乙\" }}\n")
    site = project / "site"
    done = mkdocs_build(project, "-d", str(site))
    assert done.returncode == 0, done.stdout + done.stderr
    html = (site / "part" / "page" / "index.html").read_text(encoding="utf-8")
    assert '<rect width="40" height="10" fill="#336699"/>' in html and "一条色带" in html  # raw, with its caption
    assert "<td>1</td>" in html and "表 2　甲乙" in html  # a Markdown block goes through Markdown
    assert "snippets/part/d.py" in html  # with the usual code fold
    record = json.loads((project / "snippets" / "part" / "d.record.json").read_text(encoding="utf-8"))
    assert set(record["results"]["svg"]) == {"type", "kind", "sha256", "chars"}, "recorded by its hash, not as text"
    old_hash = record["results"]["svg"]["sha256"]

    write(project / "snippets" / "part" / "d.py", BLOCK_SNIPPET.replace("#336699", "#993366"))
    done = mkdocs_build(project, "-d", str(site), BOOK_CI="1")
    assert done.returncode != 0
    out = done.stdout + done.stderr
    assert "svg.sha256" in out and old_hash[:12] in out and "part/page.md:" in out, out[-3000:]


def test_stopping_a_build_stops_its_snippet_processes(project: Path) -> None:
    """A build killed mid-run (Ctrl-C, a cancelled CI job) must not leave a training running for minutes."""
    import signal
    import time

    marker = project / "worker.pid"
    write(project / "snippets" / "part" / "b.py", f"""
        import os
        import time
        from pathlib import Path

        from transformer_book.book import Value


        def compute():
            Path({str(marker)!r}).write_text(str(os.getpid()))
            time.sleep(120)
            return {{"other": Value(7.0)}}
    """)
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = subprocess.Popen([sys.executable, "-m", "mkdocs", "build", "-d", str(project / "site")], cwd=project,
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 120
        while not marker.exists() or not marker.read_text():
            assert time.time() < deadline and build.poll() is None, "the snippet never started"
            time.sleep(0.2)
        pid = int(marker.read_text())
        build.send_signal(signal.SIGKILL)
        build.wait(timeout=30)
        deadline = time.time() + 30
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            # a zombie has ended; only a live process counts
            if Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                break
            assert time.time() < deadline, f"snippet process {pid} still runs 30 s after its build was killed"
            time.sleep(0.2)
    finally:
        if build.poll() is None:
            build.kill()


def test_snippet_processes_never_oversubscribe_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """With torch on n threads a build runs one snippet process per n cores (OpenMP threads that share a
    core wait for each other: a 2-thread build with one process per core took several times longer)."""
    from transformer_book.book.environment import default_workers

    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.delenv("BOOK_THREADS", raising=False)
    assert default_workers() == 4
    monkeypatch.setenv("BOOK_THREADS", "2")
    assert default_workers() == 2
    monkeypatch.setenv("BOOK_THREADS", "8")
    assert default_workers() == 1


PRELOAD_PROBE = '''
import sys

LOADED = "torch" in sys.modules  # before this snippet imports anything: what its forkserver had imported

from transformer_book.book import Value


def compute():
    return {"loaded": Value("已预先导入" if LOADED else "未预先导入")}
'''


def test_a_book_that_does_not_say_preloads_torch_only_if_a_snippet_reaches_it(tmp_path: Path) -> None:
    """The ``preload`` option left out: torch is imported by the forkserver only when some snippet reaches it
    (itself, inside ``compute()``, or through a module of the project it imports) — read from the sources."""
    write(tmp_path / "mkdocs.yml", MKDOCS_YML.replace("      preload: []\n", ""))
    write(tmp_path / "docs" / "index.md", "# 首页\n\n探针：{{ part/probe:loaded }}。\n")
    write(tmp_path / "snippets" / "part" / "probe.py", PRELOAD_PROBE)

    def shown() -> str:
        done = mkdocs_build(tmp_path, BOOK_FRESH="1")
        assert done.returncode == 0, output(done)
        return unwrap_origins((tmp_path / "site" / "index.html").read_text(encoding="utf-8"))

    assert "未预先导入" in shown()
    write(tmp_path / "lib" / "models.py", "import torch\n")  # a project module that imports torch …
    write(tmp_path / "snippets" / "part" / "train.py", "from transformer_book.book import Value\n\n\ndef compute():\n"
                                                        "    from lib import models\n    return {'n': Value(1)}\n")
    (tmp_path / "snippets" / "part" / "probe.record.json").unlink()  # the probe's answer is meant to change
    assert "已预先导入" in shown()  # … imported inside compute() by another snippet: the book reaches torch
