"""The notebook of every page, run as a reader runs it (issue 13).

Every page that shows generated results offers a download of its notebook (``<page>.ipynb`` beside the page,
written by the build: ``book/rendering/page_notebook.py``). Here each one is executed with ``nbclient`` in a fresh
kernel, from the project folder, after the README's set-up — and every table, figure and number it shows is
compared with the snippet's record, within the record's tolerances (measured numbers are not compared, as
in the build). The long trainings are read from the result cache that the build of ``built_site`` filled
(each such cell says so and how to retrain): the kernels run with that build's cache and settings (conftest's
``WholeBook.env``: its own cache, and the held-out perturbation it ran under, which enters every cache key).
"""

from __future__ import annotations

import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from conftest import ROOT, WholeBook, site_job, when_the_site_is_built

pytestmark = pytest.mark.slow

CELL_TIMEOUT = 900  # seconds: a hang guard for one cell (the longest inlined snippet takes ~15 s)


def page_notebooks(site: Path) -> dict[str, Path]:
    """page (docs-relative) → its generated notebook in the site."""
    out = {}
    for path in sorted(site.rglob("*.ipynb")):
        meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {}).get("transformer_book")
        if meta:
            out[meta["page"]] = path
    return out


def test_every_page_with_results_offers_its_notebook(built_site: Path) -> None:
    notebooks = page_notebooks(built_site)
    missing = []
    for html in sorted(built_site.rglob("index.html")):
        text = html.read_text(encoding="utf-8")
        rel = html.parent.relative_to(built_site).as_posix()
        if not rel.startswith(("lecture07", "chapter20")) or "data-origin=" not in text or "jp-Notebook" in text:
            continue  # the P08 notebook page is itself a notebook (mkdocs-jupyter offers its download)
        link = re.search(r'<a href="([^"]+\.ipynb)" download', text)
        if not link or not (html.parent / link.group(1)).is_file():
            missing.append(rel)
    assert missing == [], f"pages with results but no notebook to download: {missing}"
    assert len(notebooks) >= 20, sorted(notebooks)


def _run(path: Path, env: dict[str, str]) -> tuple[float, list[dict], str | None]:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    try:
        NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT)}}).execute(env={**os.environ, **env})
        error = None
    except CellExecutionError as exc:
        error = str(exc)[-2000:]
    from transformer_book.book.cli.in_jupyter import RESULT_MIME

    shown = [o["data"][RESULT_MIME] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
             if RESULT_MIME in o.get("data", {})]
    return time.perf_counter() - start, shown, error


def _run_all(book: WholeBook, kernels: int = 1) -> dict[str, tuple[float, list[dict], str | None]]:
    notebooks = page_notebooks(book.site)
    with ThreadPoolExecutor(max_workers=kernels) as pool:
        return dict(zip(notebooks, pool.map(lambda path: _run(path, book.env), notebooks.values())))


# One kernel at a time, started as soon as the whole book is built: it runs beside the browser tests.
when_the_site_is_built(__name__, _run_all)


def test_every_page_notebook_runs_and_shows_the_recorded_results(built_site: Path, whole_book: WholeBook) -> None:
    from transformer_book.book.checking import records
    from transformer_book.book.checking.drift import compare
    from transformer_book.book.results import from_data

    runs = site_job(__name__) or _run_all(whole_book, kernels=2)  # not started: one kernel per core, now
    problems, compared = [], 0
    for page, (seconds, shown, error) in sorted(runs.items()):
        print(f"{page}: {seconds:.1f} s, {len(shown)} results shown")
        if error:
            problems.append(f"{page}: a cell failed:\n{error}")
            continue
        if not shown:
            problems.append(f"{page}: the notebook showed no result")
        for s in shown:
            record = records.load(ROOT / "snippets" / f"{s['snippet']}.record.json")
            rec = (record or {}).get("results", {}).get(s["key"])
            if rec is None:
                problems.append(f"{page}: {s['snippet']}:{s['key']} has no record")
                continue
            # A reader's kernel is not the arithmetic that recorded the result (torch's default thread count, not the
            # build's one thread): trained numbers are held to their calibrated bands, as on another machine.
            provenance = {k: v for k, v in record.get("provenance", {}).items() if k != "arithmetic"}
            changes = compare(s["snippet"], {**record, "provenance": provenance, "results": {s["key"]: rec}},
                              {s["key"]: from_data(json.loads(s["result"]))})
            compared += 1
            problems += [f"{page}: {s['snippet']}: {c.describe()}" for c in changes]
    print(f"{len(runs)} notebooks, {compared} results compared; wall time of the slowest: "
          f"{max(r[0] for r in runs.values()):.1f} s")
    assert not problems, "\n".join(problems)
