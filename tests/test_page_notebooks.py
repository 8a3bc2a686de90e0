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
from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

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


def _run(path: Path, env: dict[str, str], folder: Path = ROOT, change: Any = None) -> tuple[float, list[dict], str | None]:
    """Execute the notebook at ``path`` in ``folder`` (``change(nb)`` edits it first, as a reader would)."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    if change is not None:
        change(nb)
    start = time.perf_counter()
    try:
        NotebookClient(nb, timeout=CELL_TIMEOUT, kernel_name="python3",
                       resources={"metadata": {"path": str(folder)}}).execute(env={**os.environ, **env})
        error = None
    except CellExecutionError as exc:
        error = str(exc)[-2000:]
    from transformer_book.book.cli.in_jupyter import RESULT_MIME

    shown = [o["data"][RESULT_MIME] for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
             if RESULT_MIME in o.get("data", {})]
    if change is not None:
        shown.append({"cells": [c for c in nb.cells if c.cell_type == "code"]})
    return time.perf_counter() - start, shown, error


FROM_SCRATCH = "chapter20/p08a-from-scratch.md"


def _shorter_trainings(nb: Any) -> None:
    """What a reader in a hurry does after the set-up cell: 20 steps a training, the validation loss before and
    after them only, on the first 64 validation windows, 3 poems a model (the stages are the page's own cells;
    only their length changes, so the run takes seconds, not minutes: measured idle, the five stages' trainings
    took 20 s with all 806 validation windows, most of it those passes, and 9 s with 64)."""
    import nbformat

    cell = nbformat.v4.new_code_cell(
        "import transformer_book.chapter20.scratch as scratch\n"
        "scratch.train_seeds.__defaults__ = (scratch.SEEDS, scratch.ScratchConfig(steps=20, warmup_steps=5, eval_every=20))\n"
        "scratch.N_POEMS = 3\n"
        "windows = scratch.eval_windows\n"
        "scratch.eval_windows = lambda ids, context: [w[:64] for w in windows(ids, context)]")
    at = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "setup(" in c.source) + 1
    nb.cells.insert(at, cell)
    nb.cells.append(nbformat.v4.new_code_cell("import transformer_book\nprint(transformer_book.__file__)"))


def _outside_a_checkout(book: WholeBook) -> tuple[float, list[dict], str | None]:
    """The from-scratch page's notebook where a reader who only installed the package runs it: the package
    copied out of the project (no mkdocs.yml, no snippets, no result cache above it), the kernel started in an
    empty folder, nothing of the book's settings in its environment."""
    import shutil
    import tempfile

    place = Path(tempfile.mkdtemp(prefix="book-reader-"))
    shutil.copytree(ROOT / "src" / "transformer_book", place / "lib" / "transformer_book",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (place / "work").mkdir()
    env = {k: "" for k in os.environ if k.startswith("BOOK_")}
    env["PYTHONPATH"] = str(place / "lib")
    try:
        return _run(page_notebooks(book.site)[FROM_SCRATCH], env, place / "work", _shorter_trainings)
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _run_all(book: WholeBook, kernels: int = 2) -> dict[str, tuple[float, list[dict], str | None]]:
    notebooks = page_notebooks(book.site)
    with ThreadPoolExecutor(max_workers=kernels) as pool:
        outside = pool.submit(_outside_a_checkout, book)  # the longest (it trains): first
        runs = dict(zip(notebooks, pool.map(lambda path: _run(path, book.env), notebooks.values())))
        runs["outside a checkout"] = outside.result()
    return runs


# Started as soon as the whole book is built, beside the browser tests: two kernels at a time, because the browser
# tests mostly wait for Chromium (measured on a site built beforehand: one kernel left the two cores half idle and
# the site tests took 203 s, the notebooks being the last to finish).
when_the_site_is_built(__name__, _run_all)


def test_every_page_notebook_runs_and_shows_the_recorded_results(built_site: Path, whole_book: WholeBook) -> None:
    from transformer_book.book.checking import records
    from transformer_book.book.checking.drift import compare
    from transformer_book.book.results import from_data

    runs = dict(site_job(__name__) or _run_all(whole_book))  # not started (only this module selected): now
    runs.pop("outside a checkout")
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
            rec = records.results(record).get(s["key"])
            if rec is None:
                problems.append(f"{page}: {s['snippet']}:{s['key']} has no record")
                continue
            # A reader's kernel is not the arithmetic that recorded the result (torch's default thread count, not the
            # build's one thread): trained numbers are held to their calibrated bands, as on another machine.
            provenance = records.Provenance({k: v for k, v in record.provenance.fields.items() if k != "arithmetic"})
            changes = compare(s["snippet"], replace(record, provenance=provenance, results={s["key"]: rec}),
                              {s["key"]: from_data(json.loads(s["result"]))})
            compared += 1
            problems += [f"{page}: {s['snippet']}: {c.describe()}" for c in changes]
    print(f"{len(runs)} notebooks, {compared} results compared; wall time of the slowest: "
          f"{max(r[0] for r in runs.values()):.1f} s")
    assert not problems, "\n".join(problems)


def test_the_from_scratch_notebook_defines_the_models_in_code_cells_and_runs_where_only_the_package_is(
        built_site: Path, whole_book: WholeBook) -> None:
    """Issue 39: every model class of the page is a code cell the reader changes and reruns (``%%define``), in
    the page's order, before the training that uses it; the notebook runs from the installed package alone —
    each stage trained in the kernel (with the models of those cells), the comparison computed from them."""
    import nbformat

    nb = nbformat.read(page_notebooks(built_site)[FROM_SCRATCH], as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    defines = [i for i, c in enumerate(code) if c.startswith("%%define transformer_book.chapter20.scratch\n")]
    classes = [re.search(r"^class (\w+)", code[i], re.M) for i in defines]
    assert [m[1] for m in classes if m] == ["BigramLM", "AverageLM", "Head", "OneHeadLM", "MultiHead", "MultiHeadLM",
                                            "FeedForward", "Block", "BlockLM"]
    for stage, model in [("bigram", "BigramLM"), ("average", "AverageLM"), ("head", "OneHeadLM"),
                         ("heads", "MultiHeadLM"), ("block", "BlockLM")]:
        trains = next(i for i, c in enumerate(code) if f'computed("chapter20/scratch_{stage}"' in c)
        defined = next(i for i, c in enumerate(code) if re.search(rf"^class {model}\(", c, re.M))
        assert defined < trains, f"{model} is defined after the cell that trains it"
    assert any(c.startswith("%%module _scratch_stage\n") for c in code)

    runs = site_job(__name__) or {"outside a checkout": _outside_a_checkout(whole_book)}
    seconds, shown, error = runs["outside a checkout"]
    assert error is None, error
    cells = shown.pop()["cells"]
    printed = "".join(o.get("text", "") for o in cells[-1].get("outputs", []))
    assert "book-reader-" in printed and str(ROOT) not in printed, f"the package was imported from {printed!r}"
    keys = {(s["snippet"], s["key"]) for s in shown}
    for stage in ("bigram", "average", "head", "heads", "block"):
        assert (f"chapter20/scratch_{stage}", "val_loss") in keys
    assert {("chapter20/scratch_losses", "table"), ("chapter20/scratch_losses", "samples")} <= keys
    print(f"the from-scratch notebook outside a checkout, with 20 training steps: {seconds:.0f} s")
