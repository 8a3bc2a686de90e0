#!/usr/bin/env bash
# Set up if needed, then build the book into site/ (strict: any warning fails), with its print edition
# site/transformer-book.pdf when Chromium is installed (without it the build says so and skips the PDF).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh print
export NO_MKDOCS_2_WARNING=1
exec .venv/bin/mkdocs build --strict "$@"
