"""The prose keeps the book's own promises: its own words, one term per concept, no computed number typed by
hand, and no results that live outside the book."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

DOCS = ROOT / "docs"
SHARED = ROOT.parent / "shared"
OVERLAP_TOOL = SHARED / "tools" / "seed_overlap.py"

FENCE = re.compile(r"^(\s*)(```|~~~)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
TAG = re.compile(r"\{\{.*?\}\}")
LINK_TARGET = re.compile(r"\]\([^)]*\)")
HTML_TAG = re.compile(r"<[^>]+>")


def prose_lines(text: str):
    """(line number, line) of the prose of a Markdown text: fenced code, code spans, tags, link targets and
    HTML tags are blanked out (identifiers and generated values are not prose)."""
    in_code = False
    for i, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_code = not in_code
            continue
        if in_code:
            continue
        for pattern in (CODE_SPAN, TAG, LINK_TARGET, HTML_TAG):
            line = pattern.sub(" ", line)
        yield i, line


def pages():
    """Every page's prose: Markdown pages, and the markdown cells of notebook pages."""
    for md in sorted(DOCS.rglob("*.md")):
        yield md.relative_to(ROOT).as_posix(), md.read_text(encoding="utf-8")
    for nb in sorted(DOCS.rglob("*.ipynb")):
        cells = json.loads(nb.read_text(encoding="utf-8"))["cells"]
        for n, cell in enumerate(cells, 1):
            if cell["cell_type"] == "markdown":
                yield f"{nb.relative_to(ROOT).as_posix()}#cell{n}", "".join(cell["source"])


# ------------------------------------------------------------------ one term per concept


def rejected_variants() -> dict[str, str]:
    """The glossary's section 不用的写法: rejected variant → the term to use."""
    glossary = (DOCS / "glossary.md").read_text(encoding="utf-8")
    section = glossary.split("## 不用的写法", 1)[1]
    rows = re.findall(r"^\| ([^|]+?) \| ([^|]+?) \| [^|]+ \|$", section, re.M)
    return {bad.strip(): good.strip() for bad, good in rows if bad.strip() not in ("不用", "---")}


def test_the_glossary_lists_its_rejected_variants() -> None:
    variants = rejected_variants()
    assert {"开发集", "warmup", "前馈层"} <= set(variants)


def test_no_page_uses_a_variant_the_glossary_rejects() -> None:
    variants = rejected_variants()
    offenders = []
    for where, text in pages():
        if where == "docs/glossary.md":
            continue
        for lineno, line in prose_lines(text):
            for bad, good in variants.items():
                if re.search(rf"(?<![A-Za-z_-]){re.escape(bad)}(?![A-Za-z_])", line, re.I if bad.isascii() else 0):
                    offenders.append(f"{where}:{lineno}: {bad} → {good}")
    assert offenders == []


# ------------------------------------------------------------------ results the reader can see


def test_no_page_cites_results_of_lecture_notes_the_reader_never_sees() -> None:
    """This book is the lecture: it has no other notes behind it whose results could be compared."""
    offenders = [f"{where}:{lineno}: {line.strip()[:60]}" for where, text in pages()
                 for lineno, line in prose_lines(text) if "讲义" in line]
    assert offenders == []


# ------------------------------------------------------------------ no computed number typed by hand


NUMBER = re.compile(r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+\.\d+|\d{3,})(%?)(?![\w.])")
SECTION_REF = re.compile(r"第\s*\d+(?:\.\d+)*\s*[节讲章]|\d+(?:\.\d+)+\s*节|（\d+(?:\.\d+)+）|^#+ .*$")
ALLOWED = ROOT / "tests" / "typed_numbers.txt"


def recorded_values() -> dict[tuple[str, str], list[str]]:
    """Every inline value a record holds, as a page would print it: (part, text) → the results it comes from.

    Only values (the results meant for sentences), and only matched against pages of the same part: a
    table cell or another part's number equal to a section number or a year is a coincidence, not a copy."""
    from transformer_book.book.results import format_number

    out: dict[tuple[str, str], list[str]] = {}
    for path in sorted((ROOT / "snippets").rglob("*.record.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        part = rec["snippet"].split("/")[0]
        for key, r in rec["results"].items():
            v = r.get("value") if r.get("type") == "value" else None
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            fmts = {r.get("fmt") or ""} | ({",d", "d"} if isinstance(v, int) else {".1f", ".2f", ".3f", ".1%", ".0%"})
            for fmt in fmts:
                try:
                    text = format_number(v, fmt).replace("−", "-")
                except ValueError:
                    continue
                out.setdefault((part, text), []).append(f"{rec['snippet']}:{key}")
    return out


def allowed_numbers() -> dict[str, str]:
    """tests/typed_numbers.txt: ``page  number  reason`` lines — configuration facts a page may type."""
    allowed = {}
    for line in ALLOWED.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            page, number, reason = line.split(None, 2)
            allowed[f"{page} {number}"] = reason
    return allowed


def test_no_computed_number_is_typed_by_hand() -> None:
    """A number in the prose (three digits or more, a decimal, a percentage; not a section number) that equals
    a value a snippet of the same part computes must be its tag; configuration facts that a page states as
    part of a set-up are listed, with a reason, in tests/typed_numbers.txt."""
    recorded = recorded_values()
    allowed = allowed_numbers()
    offenders = []
    for where, text in pages():
        page = where.split("#", 1)[0].removeprefix("docs/")
        part = page.split("/")[0]
        for lineno, line in prose_lines(re.sub(r"\$[^$\n]*\$", " ", text)):
            for m in NUMBER.finditer(SECTION_REF.sub(" ", line)):
                number = m.group(1) + m.group(2)
                if (part, number) in recorded and f"{page} {number}" not in allowed:
                    offenders.append(f"{where}:{lineno}: {number} = {', '.join(sorted(set(recorded[part, number]))[:3])}")
    assert offenders == [], "use the tag instead, or list the configuration fact in tests/typed_numbers.txt"


def test_every_allowed_typed_number_is_still_on_its_page() -> None:
    """The allow-list does not outlive the text it excuses."""
    stale = []
    texts: dict[str, str] = {}
    for where, text in pages():  # a notebook page is all of its markdown cells
        page = where.split("#", 1)[0].removeprefix("docs/")
        texts[page] = texts.get(page, "") + "\n" + text
    for entry in allowed_numbers():
        page, number = entry.split(" ", 1)
        if number not in texts.get(page, ""):
            stale.append(entry)
    assert stale == []


# ------------------------------------------------------------------ own words


@pytest.mark.skipif(not OVERLAP_TOOL.exists(), reason="../shared/tools/seed_overlap.py is not beside the project")
def test_the_book_is_written_in_its_own_words() -> None:
    """No paragraph repeats the source documents closely (≥ 30 %), and the median stays at or under 8 %."""
    done = subprocess.run([sys.executable, str(OVERLAP_TOOL)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    summary = re.search(r"(\d+) paragraphs judged; median (\d+)%.*?(\d+) at or over 30%", done.stdout)
    assert summary, done.stdout + done.stderr
    assert done.returncode == 0 and int(summary[3]) == 0, done.stdout[-3000:]
    assert int(summary[2]) <= 8, summary[0]
