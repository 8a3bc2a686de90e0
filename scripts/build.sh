#!/usr/bin/env bash
# Set up if needed, then build the book into site/ (strict: any warning fails).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export NO_MKDOCS_2_WARNING=1
exec .venv/bin/mkdocs build --strict "$@"
