#!/usr/bin/env bash
# Set up if needed, then serve the book at http://127.0.0.1:8000 with live reload.
# Extra arguments go to `mkdocs serve` (e.g. `-a 0.0.0.0:8000`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export NO_MKDOCS_2_WARNING=1
exec .venv/bin/mkdocs serve "$@"
