#!/usr/bin/env bash
# The side-by-side benchmark of book tools: the same 8-page Chinese book built by plain MkDocs, markdown-exec,
# mkdocs-jupyter (with and without its cache) and this project's engine; every figure is a median of rounds.
#   bash benchmarks/peers/run.sh              # sets up its own venv (.venv-peers) the first time, then measures
#   PEERS_VENV  a venv that already has the packages (see README.md)   (default: .venv-peers, made here)
#   PEERS_WORK  where the generated projects, logs and results go      (default: peers-work in the temp dir)
#   PEERS_REPS  rounds per figure, at least 3 on a noisy machine       (default 3)
# Extra arguments go to measure.py (e.g. --no-serve).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${PEERS_VENV:-$root/.venv-peers}"
work="${PEERS_WORK:-${TMPDIR:-$(python3 -c "import tempfile;print(tempfile.gettempdir())")}/peers-work}"
reps="${PEERS_REPS:-3}"

py="$venv/bin/python"
if [[ -z "${PEERS_VENV:-}" && ! -x "$py" ]]; then
  echo "run.sh: making $venv (pip only; torch is the CPU wheel pinned by the project)" >&2
  python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check torch==2.13.0 mkdocs==1.6.1 mkdocs-material==9.8.2 \
      mkdocs-jupyter==0.26.3 markdown-exec==1.12.6 jupytext ipykernel numpy matplotlib -e "$root"
fi
if [[ ! -x "$py" || ! -x "$venv/bin/mkdocs" ]]; then
  echo "run.sh: no venv with mkdocs at $venv (set PEERS_VENV); see README.md" >&2
  exit 2
fi
if ! "$py" -c 'import mkdocs, material, mkdocs_jupyter, markdown_exec, jupytext, ipykernel, torch, numpy, matplotlib, transformer_book.book' 2>/dev/null; then
  echo "run.sh: $venv lacks one of mkdocs-material, mkdocs-jupyter, markdown-exec, jupytext, ipykernel, torch, numpy, matplotlib, transformer_book (the book engine)" >&2
  exit 2
fi

# Every tool is measured as installed: pip byte-compiled the peers into site-packages; the book engine is an
# editable install, so compile its source the same way (scripts/setup.sh does it too). Without this, each build
# of `ours` would compile the engine from source, since the builds run with PYTHONDONTWRITEBYTECODE.
"$py" -m compileall -q "$root/src/transformer_book" >/dev/null
export PYTHONDONTWRITEBYTECODE=1   # keep __pycache__ out of this folder
mkdir -p "$work"
"$py" "$here/make_variants.py" --out "$work" >&2
exec "$py" "$here/measure.py" --venv "$venv" --work "$work" --reps "$reps" "$@"
