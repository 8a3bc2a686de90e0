#!/usr/bin/env bash
# Sets up (or refreshes) the project's virtual environment in .venv: Python packages only, no apt.
# Idempotent: reinstalls only when pyproject.toml changed since the last successful set-up.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.book-setup
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  # torch is pinned to 2.13.0 in pyproject.toml: the CPU wheel; an unpinned torch would pull CUDA builds.
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
  echo "$want" > "$stamp"
fi
