"""Benchmark of the book engine: cold, warm and plain builds, and `mkdocs serve` rebuild times.

    python benchmarks/bench_build.py            # all measurements
    python benchmarks/bench_build.py --no-serve # builds only

Prints figures; asserts nothing (speed goals are read off the output, not enforced by flaky tests).
- cold:  empty cache, every snippet runs (in parallel worker processes)
- warm:  everything cached
- plain: BOOK_EXECUTE=0, nothing runs (what MkDocs alone costs for these pages)
- serve: time from saving a file to "Documentation built" after a prose edit and after a snippet edit
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "BOOK_PDF": "0"}  # the build, not the print edition
for var in ("BOOK_CI", "BOOK_FRESH", "BOOK_EXECUTE"):
    ENV.pop(var, None)


def build(project: Path, site: Path, **env: str) -> float:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(site)],
        cwd=project, env={**ENV, **env}, capture_output=True, text=True,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    return elapsed


def copy_project(dst: Path) -> Path:
    """A copy of the book (docs, snippets, sources) so that edits and cache wipes do not touch the repo."""
    for name in ("docs", "snippets", "src", "data"):
        if (ROOT / name).exists():
            shutil.copytree(ROOT / name, dst / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("mkdocs.yml", "search-terms.txt"):
        shutil.copy2(ROOT / name, dst / name)
    return dst


class Server:
    """`mkdocs serve` in the background; reads its log to time rebuilds."""

    def __init__(self, project: Path, port: int, extra: tuple[str, ...] = ()) -> None:
        self.lines: list[tuple[float, str]] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mkdocs", "serve", "-a", f"127.0.0.1:{port}", *extra],
            cwd=project, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout
        for line in self.proc.stdout:
            self.lines.append((time.perf_counter(), line.rstrip()))

    def wait_for(self, pattern: str, after: float, timeout: float = 600) -> tuple[float, str]:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            for t, line in list(self.lines):
                if t >= after and re.search(pattern, line):
                    return t, line
            time.sleep(0.02)
        raise SystemExit(f"timed out waiting for {pattern!r}; log:\n" + "\n".join(l for _, l in self.lines[-40:]))

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def serve_rebuild(project: Path, edit: Path, append: str, port: int, extra: tuple[str, ...] = ()) -> tuple[float, float, str]:
    server = Server(project, port, extra)
    try:
        t0 = time.perf_counter()
        server.wait_for(r"Serving on", 0)
        startup = time.perf_counter() - t0
        time.sleep(1.0)
        t_edit = time.perf_counter()
        with edit.open("a", encoding="utf-8") as f:
            f.write(append)
        t_done, line = server.wait_for(r"Documentation built in|Reloading browsers", t_edit)
        m = re.search(r"built in ([0-9.]+) seconds", line)
        time.sleep(0.5)  # let the timing table that follows the build reach the log
        reran = [l.split()[0] for t, l in server.lines if t >= t_edit and re.match(r"^\S+/\S+\s+ran\s", l)]
        return startup, t_done - t_edit, f"MkDocs reports {m.group(1) if m else '?'} s; re-executed: {reran or 'nothing'}"
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-serve", action="store_true")
    parser.add_argument("--serve-only", action="store_true", help="reuse the repo's .book-cache; skip the build timings")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        project = copy_project(Path(tmp) / "book")
        site = Path(tmp) / "site"
        if args.serve_only:
            shutil.copytree(ROOT / ".book-cache", project / ".book-cache")
            measure_serve(project)
            return
        cold = build(project, site)
        timing = (project / ".book-cache" / "report" / "timing.txt").read_text(encoding="utf-8")
        warm = min(build(project, site) for _ in range(3))
        plain = min(build(project, site, BOOK_EXECUTE="0") for _ in range(3))
        compute = re.search(r"\(([0-9.]+) s of compute\)", timing)
        print(f"cores: {os.cpu_count()}")
        print(f"cold build (empty cache):   {cold:6.2f} s   (snippet compute in the cold run: {compute.group(1) if compute else '?'} s,"
              f" {os.cpu_count()} workers: ideal ≈ plain + compute / cores)")
        print(f"warm build (all cached):    {warm:6.2f} s")
        print(f"plain build (execution off): {plain:5.2f} s")
        print(f"warm / plain:               {warm / plain:6.2f}   (goal ≤ 1.2)")
        if args.no_serve:
            return
        measure_serve(project)


def measure_serve(project: Path) -> None:
    page = project / "docs" / "lecture07" / "s02-self-attention.md"
    snippet = project / "snippets" / "lecture07" / "soft_lookup.py"
    for label, extra, port in (("serve", (), 8765), ("serve --dirty", ("--dirty",), 8767)):
        startup, prose, detail = serve_rebuild(project, page, "\n一行新的正文。\n", port, extra)
        print(f"{label:<14} start-up:          {startup:6.2f} s")
        print(f"{label:<14} prose edit:        {prose:6.2f} s to rebuilt ({detail})")
        _, snip, detail = serve_rebuild(project, snippet, "\n# 一处改动\n", port + 1, extra)
        print(f"{label:<14} one-snippet edit:  {snip:6.2f} s to rebuilt ({detail})")
    print("\nlast timing table (after the snippet edit):")
    print((project / ".book-cache" / "report" / "timing.txt").read_text(encoding="utf-8"))


if __name__ == "__main__":
    main()
