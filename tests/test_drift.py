"""The drift check fails on real drift, and only on real drift — one test per kind of result, on a
throw-away project: exact values, trained values against their calibrated band, measured values, claims;
and the checks that keep a green build from hiding a broken site."""

from __future__ import annotations

import json
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import HELD_OUT, MKDOCS_YML, mkdocs_build as build, output, write

# A knob the tests turn: a module the snippet reads, so the "code" can change without touching the snippet.
SNIPPET = '''
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import knobs
from transformer_book.book import Claim, Table, Value, at_least


def compute():
    speedup = knobs.SLOW / knobs.FAST
    return {
        "exact": Value(knobs.EXACT, ".2f"),
        "trained": Value(knobs.TRAINED, ".3f", kind="trained"),
        "speedup": Value(speedup, ".1f", kind="measured"),
        "timing": Table(columns=["n", "秒"], rows=[[1, knobs.SLOW]], kinds={"秒": "measured"}),
        "faster": Claim("缓存至少快 1.5 倍", at_least(speedup, 1.5, name="加速比")),
    }
'''

PAGE = """# 页

精确的数是 {{ a:exact }}，训练出的数是 {{ a:trained }}。

加速约为 {{ a:speedup }} 倍。{{ claim a:faster }}

{{ table a:timing "表 1　计时" }}
"""


def knobs(project: Path, **values: float) -> None:
    base = {"EXACT": 1.5, "TRAINED": 2.0, "SLOW": 3.0, "FAST": 1.0}
    base.update(values)
    write(project / "lib" / "knobs.py", "".join(f"{k} = {v!r}\n" for k, v in base.items()))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    write(tmp_path / "mkdocs.yml", MKDOCS_YML)
    knobs(tmp_path)
    write(tmp_path / "snippets" / "part" / "a.py", SNIPPET)
    write(tmp_path / "docs" / "part" / "page.md", PAGE)
    write(tmp_path / "docs" / "index.md", "# 首页\n")
    return tmp_path


def record(project: Path) -> dict:
    return json.loads((project / "snippets" / "part" / "a.record.json").read_text(encoding="utf-8"))


def calibrate_by_hand(project: Path, spread: float) -> None:
    """What `calibrate` writes, with a spread chosen by the test (the command itself is tested below)."""
    rec = record(project)
    rec["calibration"] = {
        "provenance": {"date": "2026-12-01", "runs": 1, "perturbations": {"test": "by hand"}},
        "series": {"trained": {"spread": spread, "abs": 3 * spread}},
    }
    (project / "snippets" / "part" / "a.record.json").write_text(json.dumps(rec, ensure_ascii=False), encoding="utf-8")


def test_an_exact_value_that_changes_fails_naming_snippet_key_old_new_and_page(project: Path) -> None:
    assert build(project).returncode == 0
    calibrate_by_hand(project, 0.01)
    knobs(project, EXACT=1.6)
    done = build(project, BOOK_CI="1")
    assert done.returncode != 0
    out = output(done)
    assert "snippets/part/a.py" in out
    assert "exact: recorded 1.5, now 1.6 (tolerance rel 1e-06, abs 1e-09)" in out
    assert "part/page.md:3" in out



def test_a_result_the_snippet_no_longer_produces_fails_naming_it_until_accepted(project: Path) -> None:
    """A snippet that drops a result (a seed taken out of an experiment) while its record still holds it: the
    build names every recorded number and the claim that went, and ``accept`` takes them out of the record."""
    assert build(project).returncode == 0
    calibrate_by_hand(project, 0.01)
    write(project / "snippets" / "part" / "a.py", SNIPPET.replace(
        '        "exact": Value(knobs.EXACT, ".2f"),\n', "").replace(
        '        "faster": Claim("缓存至少快 1.5 倍", at_least(speedup, 1.5, name="加速比")),\n', ""))
    write(project / "docs" / "part" / "page.md",
          PAGE.replace("精确的数是 {{ a:exact }}，", "").replace("{{ claim a:faster }}", ""))
    done = build(project, BOOK_CI="1")
    assert done.returncode != 0
    out = output(done)
    assert "exact: recorded 1.5, no longer produced" in out, out
    assert "faster: recorded '缓存至少快 1.5 倍', no longer produced" in out, out
    accepted = subprocess.run([sys.executable, "-m", "transformer_book", "accept", "part/a"], cwd=project,
                              capture_output=True, text=True, timeout=300)
    assert accepted.returncode == 0, accepted.stderr
    assert "exact" not in record(project)["results"] and "faster" not in record(project)["results"]
    assert build(project, BOOK_CI="1").returncode == 0

def test_a_trained_value_passes_within_its_calibrated_band_and_fails_beyond_it(project: Path) -> None:
    """On another machine (here: other numerical settings than the record's) the calibrated band applies; on
    the arithmetic that made the record, a trained value must come out bit for bit (tests/test_lessons.py)."""
    assert build(project).returncode == 0
    calibrate_by_hand(project, 0.01)  # tolerance 0.03
    knobs(project, TRAINED=2.02)
    assert build(project, BOOK_CI="1", **HELD_OUT).returncode == 0, "within 3 × the calibrated spread"
    knobs(project, TRAINED=2.05)
    done = build(project, BOOK_CI="1", **HELD_OUT)
    assert done.returncode != 0
    assert "trained: recorded 2.0, now 2.05 (tolerance calibrated abs 0.03)" in output(done)


def test_a_trained_value_without_calibration_fails_in_ci_and_names_the_command(project: Path) -> None:
    assert build(project).returncode == 0
    done = build(project, BOOK_CI="1")
    assert done.returncode != 0
    assert "python -m transformer_book calibrate part/a" in output(done)


def test_a_measured_value_far_off_passes_and_is_labelled_as_measured(project: Path) -> None:
    assert build(project).returncode == 0
    calibrate_by_hand(project, 0.01)
    knobs(project, SLOW=30.0, FAST=1.0)  # ten times the recorded speed-up: a busy or a different machine
    site = project / "site"
    done = build(project, "-d", str(site), BOOK_CI="1")
    assert done.returncode == 0, output(done)
    html = (site / "part" / "page" / "index.html").read_text(encoding="utf-8")
    assert 'class="book-origin book-measured"' in html and "在构建本书的机器上测得" in html and "30.0" in html
    assert "book-measured-note" in html and "「秒」" in html  # the table's measured column is named


def test_a_claim_that_turns_false_fails_naming_the_claim_its_inputs_and_page_line(project: Path) -> None:
    assert build(project).returncode == 0
    calibrate_by_hand(project, 0.01)
    knobs(project, SLOW=1.2, FAST=1.0)
    done = build(project, BOOK_CI="1")
    assert done.returncode != 0
    out = output(done)
    assert "claim 'faster' no longer holds: «缓存至少快 1.5 倍» (加速比 = 1.2 ≥ 1.5（余量 -0.3）)" in out
    assert "stated at: part/page.md:5" in out


def test_a_cited_claim_shows_a_check_mark_with_its_statement(project: Path) -> None:
    site = project / "site"
    assert build(project, "-d", str(site)).returncode == 0
    html = (site / "part" / "page" / "index.html").read_text(encoding="utf-8")
    assert 'class="book-claim book-origin"' in html and "缓存至少快 1.5 倍" in html
    assert 'aria-label="由代码核对：缓存至少快 1.5 倍"' in html  # read out by a screen reader, too


def test_a_claim_no_page_cites_fails_the_strict_build(project: Path) -> None:
    write(project / "docs" / "part" / "page.md", PAGE.replace("{{ claim a:faster }}", ""))
    done = build(project)
    assert done.returncode != 0
    assert "Claims that no page cites" in output(done) and "part/a:faster" in output(done)


def test_a_hand_widened_tolerance_in_a_record_without_a_reason_fails(project: Path) -> None:
    assert build(project).returncode == 0
    calibrate_by_hand(project, 0.01)
    rec = record(project)
    rec["results"]["exact"]["tolerance"] = {"rel": 0.5, "abs": 1e-9}
    (project / "snippets" / "part" / "a.record.json").write_text(json.dumps(rec), encoding="utf-8")
    done = build(project, BOOK_CI="1")
    assert done.returncode != 0
    assert "wider than the default and no reason" in output(done)


def test_a_calibrated_tolerance_wider_than_three_spreads_fails(project: Path) -> None:
    assert build(project).returncode == 0
    calibrate_by_hand(project, 0.01)
    rec = record(project)
    rec["calibration"]["series"]["trained"]["abs"] = 1.0
    (project / "snippets" / "part" / "a.record.json").write_text(json.dumps(rec), encoding="utf-8")
    done = build(project, BOOK_CI="1")
    assert done.returncode != 0
    assert "wider than 3 × its calibrated spread" in output(done)


def test_calibrate_measures_the_spread_under_a_perturbation_and_one_run_cannot_validate_a_band(project: Path) -> None:
    """A sum of a million float32 numbers changes in its last bits when torch takes another kernel. One run is
    one sample: no band fitted without it can cover it, so the value is not compared as a number (its claims
    would be) and the record says why. The ensemble tests are in test_calibration.py."""
    write(project / "snippets" / "part" / "a.py", '''
        import torch
        from transformer_book.book import Value

        def compute():
            torch.manual_seed(0)
            return {"total": Value(torch.randn(1_000_003).sum().item(), ".1f", kind="trained")}
    ''')
    write(project / "docs" / "part" / "page.md", "# 页\n\n和是 {{ a:total }}。\n")
    assert build(project).returncode == 0
    code = textwrap.dedent("""
        from transformer_book.book.checking.calibrate import Perturbation, calibrate, summary
        from transformer_book.book.cli.project import open_session
        session = open_session()
        cals = calibrate(session.project_root, session.discover(), ["part/a"], chosen=[Perturbation("aten-default", "标量内核", {"ATEN_CPU_CAPABILITY": "default"})])
        print(summary(cals))
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    cal = record(project)["calibration"]
    spread = cal["series"]["total"]["spread"]
    assert spread > 0, "the scalar kernel sums in another order"
    assert cal["series"]["total"]["abs"] == pytest.approx(3 * spread)
    assert cal["series"]["total"]["check"] == "claims" and "留一法" in cal["series"]["total"]["why"]
    assert cal["held_out"] == {"banded_series": 0, "unbanded_series": 1, "covered": 0, "trials": 1}
    assert cal["provenance"]["runs"] == 1 and "aten-default" in cal["provenance"]["perturbations"]
    done = build(project, BOOK_CI="1", ATEN_CPU_CAPABILITY="default")
    assert done.returncode == 0, "the build under the same perturbation passes: " + output(done)


def test_files_the_engine_writes_get_ordinary_permissions(project: Path) -> None:
    site = project / "site"
    assert build(project, "-d", str(site)).returncode == 0
    cache = project / ".book-cache"
    written = [*(cache / "entries").rglob("*"), *(cache / "report").rglob("*")]  # not jinja's own bytecode cache
    for path in [*site.rglob("*"), project / "snippets" / "part" / "a.record.json", *written]:
        if path.is_file():
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode & 0o044 == 0o044, f"{path} is not readable by group and others: {oct(mode)}"


def test_a_missing_markdown_extension_fails_the_build_naming_it(project: Path) -> None:
    write(project / "mkdocs.yml", MKDOCS_YML.replace("  - pymdownx.details\n", ""))
    done = build(project)
    assert done.returncode != 0
    assert "pymdownx.details" in output(done) and "markdown_extensions" in output(done)
