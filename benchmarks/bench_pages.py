"""Benchmark of what a reader on a phone meets: Lighthouse (mobile) on seven pages, the site before and after.

    python benchmarks/bench_pages.py                                   # main's 73441e3 vs the working tree
    python benchmarks/bench_pages.py --before /tmp/site-a --after /tmp/site-b --runs 3
    python benchmarks/bench_pages.py --before-ref 73441e3 --after /tmp/site-b
    python benchmarks/bench_pages.py --only after --runs 1             # one site only
    python benchmarks/bench_pages.py --only after --after /tmp/site --pages "chapter20 playground"

Each site is served the way a static host serves it (a small Python server: gzip on for text, every file
as it is on disk), and Lighthouse runs on the home page, §2 and §11 of lecture 7, c13 of chapter 20, the P08
notebook page, one API page and the playground of chapter 20 (its model is fetched as the page loads: the
playground is on the first screen), with its default mobile settings (form factor, simulated slow 4G and 4×
slower CPU) in the system Chromium (``CHROME_PATH``, default /usr/bin/chromium). Runs alternate between the
sites (before, after, before, …) so that both meet the same load on a shared machine; each metric is the
median of ``--runs`` (3). Printed side by side, one block per page: performance score, first contentful
paint, largest contentful paint, total blocking time, cumulative layout shift and bytes transferred
(compressed, as Lighthouse counts them). Prints figures; asserts nothing.

A site not given as a folder is built: ``--after`` from the working tree, ``--before`` from a commit
(``--before-ref``, default main's 73441e3, the last commit before issue 32) checked out in a temporary git
worktree whose engine is put first on ``PYTHONPATH``. Both builds use the shared result cache
(``BOOK_CACHE_DIR``, else ``.book-cache``) and skip the PDF.

Lighthouse comes from the npm registry, installed on first use into ``.book-cache/npm`` (never committed).
"""

from __future__ import annotations

import argparse
import functools
import gzip
import http.server
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NPM_DIR = ROOT / ".book-cache" / "npm"
CHROME = os.environ.get("CHROME_PATH", "/usr/bin/chromium")
BEFORE_REF = "73441e3"
PAGES = {  # label → URL path in the site
    "home": "",
    "lecture07 §2": "lecture07/s02-self-attention/",
    "lecture07 §11": "lecture07/s11-experiments/",
    "chapter20 c13": "chapter20/c13-attention-weights/",
    "P08 notebook": "chapter20/p08-practice/",
    "api/transformer": "api/transformer/",
    "chapter20 playground": "chapter20/p08b-playground/",  # its model (~0.8 MB gzipped) loads with the page
}
METRICS = [  # (label, how to read it from a report, how to print it)
    ("performance", lambda r: r["categories"]["performance"]["score"], "{:.2f}"),
    ("FCP s", lambda r: r["audits"]["first-contentful-paint"]["numericValue"] / 1000, "{:.2f}"),
    ("LCP s", lambda r: r["audits"]["largest-contentful-paint"]["numericValue"] / 1000, "{:.2f}"),
    ("TBT ms", lambda r: r["audits"]["total-blocking-time"]["numericValue"], "{:.0f}"),
    ("CLS", lambda r: r["audits"]["cumulative-layout-shift"]["numericValue"], "{:.3f}"),
    ("transfer KiB", lambda r: r["audits"]["total-byte-weight"]["numericValue"] / 1024, "{:,.0f}"),
]
COMPRESSED = {".html", ".css", ".js", ".json", ".svg", ".xml", ".txt", ".map", ".ipynb"}


# ------------------------------------------------------------------------------------------------ serving


class StaticHost(http.server.SimpleHTTPRequestHandler):
    """Files as they are on disk; text compressed with gzip when the browser accepts it (as hosts do)."""

    extensions_map = {
        **http.server.SimpleHTTPRequestHandler.extensions_map,
        ".woff2": "font/woff2", ".svg": "image/svg+xml", ".js": "text/javascript", ".json": "application/json",
    }
    _gz: dict[str, bytes] = {}

    def log_message(self, *args) -> None:
        pass

    def send_head(self):  # type: ignore[override]
        path = Path(self.translate_path(self.path))
        if path.is_dir():
            if not self.path.split("?", 1)[0].endswith("/"):
                return super().send_head()  # the redirect to the folder's URL
            path = path / "index.html"
        if (path.suffix not in COMPRESSED or not path.is_file()
                or "gzip" not in self.headers.get("Accept-Encoding", "")):
            return super().send_head()
        key = f"{path}:{path.stat().st_mtime_ns}"
        body = self._gz.get(key)
        if body is None:
            body = self._gz[key] = gzip.compress(path.read_bytes(), compresslevel=6)
        self.send_response(200)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        import io

        return io.BytesIO(body)


def serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(StaticHost, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


# ------------------------------------------------------------------------------------------------ lighthouse


def lighthouse_cli() -> Path:
    """Lighthouse's command line, installed from the npm registry into .book-cache/npm on first use."""
    cli = NPM_DIR / "node_modules" / "lighthouse" / "cli" / "index.js"
    if not cli.exists():
        if not shutil.which("npm"):
            raise SystemExit("npm (Node.js) is needed to install Lighthouse")
        NPM_DIR.mkdir(parents=True, exist_ok=True)
        subprocess.run(["npm", "install", "--prefix", str(NPM_DIR), "--no-audit", "--no-fund", "--loglevel=error",
                        "lighthouse@12"], check=True)
    return cli


def lighthouse(cli: Path, url: str) -> dict:
    done = subprocess.run(
        ["node", str(cli), url, "--output=json", "--output-path=stdout", "--quiet",
         "--only-categories=performance", "--max-wait-for-load=60000",
         "--chrome-flags=--headless=new --no-sandbox --disable-gpu --no-first-run "
         "--disable-background-networking --disable-component-update --disable-sync"],
        env={**os.environ, "CHROME_PATH": CHROME}, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not done.stdout.strip():
        raise RuntimeError(f"lighthouse failed on {url}:\n{done.stderr[-2000:]}")
    report = json.loads(done.stdout)
    if report.get("runtimeError"):
        raise RuntimeError(f"lighthouse on {url}: {report['runtimeError']}")
    return report


# ------------------------------------------------------------------------------------------------ building


def build(project: Path, site: Path, engine: Path | None = None) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "BOOK_PDF": "0",
           "BOOK_CACHE_DIR": os.environ.get("BOOK_CACHE_DIR") or str(ROOT / ".book-cache")}
    for var in ("BOOK_CI", "BOOK_FRESH", "BOOK_EXECUTE", "BOOK_ONLY"):
        env.pop(var, None)
    if engine is not None:  # the commit's own engine, not the one installed (editable) from this tree
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(engine), env.get("PYTHONPATH")]))
    print(f"building {project} → {site} …", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(site)], cwd=project, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the build of {project} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def build_ref(ref: str, site: Path, scratch: Path) -> None:
    tree = scratch / f"tree-{ref}"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), ref], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        build(tree, site, engine=tree / "src")
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)


# ------------------------------------------------------------------------------------------------ the run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, help="a built site (default: build --before-ref)")
    ap.add_argument("--before-ref", default=BEFORE_REF, help=f"the commit to build as 'before' ({BEFORE_REF})")
    ap.add_argument("--after", type=Path, help="a built site (default: build the working tree)")
    ap.add_argument("--only", choices=["before", "after"], help="measure one site only")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--pages", nargs="+", choices=list(PAGES), metavar="LABEL",
                    help=f"measure these pages only (labels: {', '.join(PAGES)})")
    ap.add_argument("--json", type=Path, help="also write every report's metrics here")
    args = ap.parse_args()

    cli = lighthouse_cli()
    scratch = Path(tempfile.mkdtemp(prefix="bench-pages-"))
    try:
        sites: dict[str, Path] = {}
        if args.only != "after":
            sites["before"] = args.before or scratch / "before"
            if args.before is None:
                build_ref(args.before_ref, sites["before"], scratch)
        if args.only != "before":
            sites["after"] = args.after or scratch / "after"
            if args.after is None:
                build(ROOT, sites["after"])
        servers = {name: serve(site) for name, site in sites.items()}
        runs: dict[tuple[str, str], list[dict[str, float]]] = {}
        for label, path in PAGES.items():
            if args.pages and label not in args.pages:
                continue
            for i in range(args.runs):
                for name, (_, base) in servers.items():
                    report = lighthouse(cli, base + path)
                    values = {m: read(report) for m, read, _ in METRICS}
                    runs.setdefault((label, name), []).append(values)
                    print(f"  {label:<16} {name:<6} run {i + 1}: "
                          + "  ".join(f"{m} {fmt.format(values[m])}" for m, _, fmt in METRICS),
                          file=sys.stderr, flush=True)
        for server, _ in servers.values():
            server.shutdown()
        print_table(runs, list(sites), args.runs)
        if args.json:
            args.json.write_text(json.dumps({f"{k[0]}|{k[1]}": v for k, v in runs.items()}, indent=1))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def print_table(runs: dict[tuple[str, str], list[dict[str, float]]], names: list[str], n: int) -> None:
    print(f"\nLighthouse {lighthouse_version()} mobile (simulated throttling), gzip on, median of {n} runs\n")
    header = "| page | " + " | ".join(f"{m} {name}" for m, _, _ in METRICS for name in names) + " |"
    cols = ["page"] + [m for m, _, _ in METRICS]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for label in PAGES:
        if not any(key[0] == label for key in runs):
            continue
        cells = [label]
        for m, _, fmt in METRICS:
            parts = []
            for name in names:
                values = [r[m] for r in runs.get((label, name), [])]
                parts.append(fmt.format(statistics.median(values)) if values else "–")
            cells.append(" → ".join(parts))
        print("| " + " | ".join(cells) + " |")
    del header
    if len(names) == 2:
        print(f"\n(each cell: {names[0]} → {names[1]})")


def lighthouse_version() -> str:
    try:
        return json.loads((NPM_DIR / "node_modules" / "lighthouse" / "package.json").read_text())["version"]
    except (OSError, ValueError, KeyError):
        return "?"


if __name__ == "__main__":
    main()
