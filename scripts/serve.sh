#!/usr/bin/env bash
# Set up if needed, then serve the book at http://127.0.0.1:8000 with live reload.
# --dirty: a rebuild re-renders only the pages whose Markdown changed, plus (the book plugin sees to it)
# every page that shows a snippet that just re-ran. The plugin gives the pages it skips their titles and
# anchors back (book/site/dirty_pages.py), so navigation and cross-references stay whole.
# Extra arguments go to `mkdocs serve` (e.g. `-a 0.0.0.0:8000`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export NO_MKDOCS_2_WARNING=1
export PYTHONDONTWRITEBYTECODE=1  # no .pyc beside watched sources: one edit, one rebuild
exec .venv/bin/mkdocs serve --dirty "$@"
