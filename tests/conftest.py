from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The browser tests drive the system Chromium through playwright; they never download a browser.
CHROMIUM = Path(os.environ.get("BOOK_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


@pytest.fixture(scope="module")
def one_torch_thread():
    """Training tests run on 1 thread, as the book's snippets do (tiny models are faster and reproducible)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


SPIN = "import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"


@contextlib.contextmanager
def busy_cores(n: int | None = None, seconds: float = 3600) -> Iterator[None]:
    """Keep ``n`` cores (default: all) busy with spinning processes that stop by themselves after ``seconds``
    (and are stopped when the block ends): the load of a shared CI runner or of an author's other work."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=seconds)])
             for _ in range(n or os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=30)


def build_book(site: Path, timeout: float = 3600, **env: str) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of the whole book into ``site``, as CI builds it (BOOK_CI=1: every snippet
    executed afresh, every result checked against its record), with extra environment variables."""
    full_env = {**os.environ, "BOOK_CI": "1", "NO_MKDOCS_2_WARNING": "1", **env}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
                          cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole book, built once per test run exactly as CI builds it — while other processes spin on all
    cores but one: a build must not fail because the machine is loaded. (More runnable processes than cores
    is what preempts the snippet processes and reorders when they finish; spinning on every core as well only
    doubles the wall time — 20 minutes of the suite's 46 on the 2-core machine — without loading anything new.)

    ``BOOK_SITE_DIR=/path/to/site`` reuses a site built beforehand instead (while writing site tests)."""
    prebuilt = os.environ.get("BOOK_SITE_DIR")
    if prebuilt:  # for working on the site tests: reuse a site you built (never set in CI)
        return Path(prebuilt)
    site = tmp_path_factory.mktemp("site")
    with busy_cores(max(1, (os.cpu_count() or 1) - 1)):
        done = build_book(site)
    if done.returncode != 0:
        report = ROOT / ".book-cache" / "report" / "drift.html"
        if report.exists():  # kept beside the screenshots, for whoever reads the CI run
            (ROOT / "artifacts").mkdir(exist_ok=True)
            shutil.copyfile(report, ROOT / "artifacts" / "drift-report.html")
        pytest.fail(f"the book does not build while the machine is busy:\n{done.stdout}\n{done.stderr}", pytrace=False)
    sys.stderr.write(done.stderr[-3000:])  # the timing table, for the CI log
    return site


@pytest.fixture(scope="session")
def chromium():
    """The system Chromium, driven by playwright; skips when either is missing."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: the browser tests need it (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"no playwright to drive the Chromium at {CHROMIUM} (pip install playwright)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
