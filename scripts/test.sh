#!/usr/bin/env bash
# Set up if needed, then run every test, including one full build of the book that executes every
# snippet afresh and checks each result against its record (BOOK_CI=1), under a perturbation calibration never
# saw, beside the rest of the suite (tests/conftest.py: WholeBook). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
export NO_MKDOCS_2_WARNING=1
exec .venv/bin/python -m pytest "$@"
