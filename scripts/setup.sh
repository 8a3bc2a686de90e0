#!/usr/bin/env bash
# Sets up (or refreshes) the project's virtual environment in .venv: Python packages only, no apt.
#   bash scripts/setup.sh        what building and serving the book need
#   bash scripts/setup.sh print  … and what prints the PDF edition (playwright; Chromium itself is the system's)
#   bash scripts/setup.sh test   … and what the tests need (playwright, nbclient, dask, s3fs, moto)
# Idempotent: reinstalls only when pyproject.toml changed since the last successful set-up (or when the
# tests' packages are wanted and only the book's were installed).
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
extras=${1:-}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.book-setup
sha=$(sha256sum pyproject.toml | cut -d' ' -f1)
have=$(cat "$stamp" 2>/dev/null || true)
# The stamp is "<sha of pyproject.toml> <extras>"; a test set-up also serves the book.
if [ "$have" != "$sha test" ] && [ "$have" != "$sha $extras" ]; then
  # torch is pinned to 2.13.0 in pyproject.toml: the CPU wheel; an unpinned torch would pull CUDA builds.
  target="."
  if [ -n "$extras" ]; then target=".[$extras]"; fi
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$target"
  echo "$sha $extras" > "$stamp"
fi
# Byte-compile the project's own code (pip compiles what it installs into site-packages, but not an editable
# install's source). Where PYTHONDONTWRITEBYTECODE is set, as on this project's machines, Python would
# otherwise compile the engine's 7 k lines anew in every build, every serve and every snippet process (≈ 0.1 s
# each). A stale .pyc is never used: Python checks each against its source's size and time.
.venv/bin/python -m compileall -q src/transformer_book >/dev/null || true  # a syntax error shows when the code is imported
