from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def one_torch_thread():
    """Training tests run on 1 thread, as the book's snippets do (tiny models are faster and reproducible)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole book, built once per test run exactly as CI builds it: every snippet executed afresh,
    every result checked against its record, strict (any warning fails).

    ``BOOK_SITE_DIR=/path/to/site`` reuses a site built beforehand instead (while writing site tests)."""
    prebuilt = os.environ.get("BOOK_SITE_DIR")
    if prebuilt:  # for working on the site tests: reuse a site you built (never set in CI)
        return Path(prebuilt)
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "BOOK_CI": "1", "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600,
    )
    if done.returncode != 0:
        pytest.fail(f"the book does not build:\n{done.stdout}\n{done.stderr}", pytrace=False)
    sys.stderr.write(done.stderr[-3000:])  # the timing table, for the CI log
    return site
