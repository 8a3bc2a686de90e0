"""Benchmark of a newcomer's first `bash scripts/serve.sh`: a fresh clone, set up, then served.

    python benchmarks/bench_first_serve.py                 # 3 rounds: seconds to the first page served
    python benchmarks/bench_first_serve.py --complete      # … and, in the last round, until no page is pending
    python benchmarks/bench_first_serve.py --rounds 5 --port 8790

The repository is cloned (its committed state) into a temporary folder and set up once with
`bash scripts/setup.sh` (not timed). Each round then starts from what a fresh clone has after set-up (no
`.book-cache/`, no `site/`) and times `bash scripts/serve.sh` from its start until the first page
(§2 of lecture 7) is answered. With --complete, the last round goes on polling every page until none shows a
pending result ("being recomputed"). Prints figures (median and range of the rounds); asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_PAGE = "lecture07/s02-self-attention/"
PENDING = "book-pending"  # the class of a placeholder that waits for the background build


def page_urls(clone: Path) -> list[str]:
    docs = clone / "docs"
    urls = []
    for path in sorted(docs.rglob("*.md")) + sorted(docs.rglob("*.ipynb")):
        rel = path.relative_to(docs).with_suffix("")
        if rel.name == "index":
            urls.append("" if rel.parent == Path(".") else f"{rel.parent.as_posix()}/")
        else:
            urls.append(f"{rel.as_posix()}/")
    return urls


def get(port: int, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/{path}", timeout=30) as r:
        return r.read().decode("utf-8", "replace")


def one_round(clone: Path, port: int, complete: bool) -> tuple[float, float | None, int]:
    for name in (".book-cache", "site"):
        shutil.rmtree(clone / name, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOOK_")}
    t0 = time.perf_counter()
    proc = subprocess.Popen(["bash", "scripts/serve.sh", "-a", f"127.0.0.1:{port}"], cwd=clone, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    log: list[str] = []
    threading.Thread(target=lambda: log.extend(proc.stdout), daemon=True).start()  # type: ignore[arg-type]
    try:
        while True:
            if proc.poll() is not None:
                raise SystemExit("serve.sh ended:\n" + "".join(log[-30:]))
            try:
                get(port, FIRST_PAGE)
                break
            except OSError:
                time.sleep(0.05)
        first = time.perf_counter() - t0
        urls = page_urls(clone)
        pending_at_first = sum(PENDING in get(port, u) for u in urls)
        done = None
        if complete:
            while any(PENDING in get(port, u) for u in urls):
                if proc.poll() is not None:
                    raise SystemExit("serve.sh ended:\n" + "".join(log[-30:]))
                time.sleep(2)
            done = time.perf_counter() - t0
        return first, done, pending_at_first
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=8790)
    parser.add_argument("--complete", action="store_true", help="in the last round, wait until every page is complete")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        t = time.perf_counter()
        subprocess.run(["bash", "scripts/setup.sh"], cwd=clone, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        print(f"set-up (not timed below): {time.perf_counter() - t:.1f} s", flush=True)
        firsts = []
        for k in range(1, args.rounds + 1):
            first, done, pending = one_round(clone, args.port, args.complete and k == args.rounds)
            firsts.append(first)
            print(f"round {k}: first page served after {first:.2f} s; {pending} of {len(page_urls(clone))} pages "
                  f"showed pending results then" + (f"; every page complete after {done:.1f} s" if done else ""),
                  flush=True)
        print(f"first page served: median {statistics.median(firsts):.2f} s "
              f"(min {min(firsts):.2f}, max {max(firsts):.2f}; {len(firsts)} rounds, {os.cpu_count()} cores)")


if __name__ == "__main__":
    sys.exit(main())
