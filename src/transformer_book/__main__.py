"""Command line of the book: ``python -m transformer_book <command>``.

- ``run SNIPPET``          run one snippet (or experiment) as the build would, show its results and a
                           progress bar; nothing is cached or recorded
- ``accept [SNIPPET …]``   re-execute (fresh) and rewrite the records, printing old → new
- ``timing``               show the timing table of the last build
- ``list``                 list the snippets
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def _project_root() -> Path:
    here = Path.cwd().resolve()
    for p in (here, *here.parents):
        if (p / "mkdocs.yml").exists() and (p / "snippets").is_dir():
            return p
    raise SystemExit("run this inside the book's project (a folder with mkdocs.yml and snippets/)")


def _session(root: Path):
    from transformer_book.book.session import BookSession

    return BookSession(root, root / "snippets", root / ".book-cache", root / ".book-cache" / "report", root / "docs")


def _normalise(ids: list[str]) -> list[str]:
    out = []
    for s in ids:
        s = s.removeprefix("snippets/").removesuffix(".py")
        out.append(s)
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from transformer_book.book.execute import Task, run_snippet
    from transformer_book.book.show import show

    root = _project_root()
    found = _session(root).discover()
    (sid,) = _normalise([args.snippet])
    if sid not in found:
        raise SystemExit(f"unknown snippet {sid!r}; known: {', '.join(found)}")
    import transformer_book

    os.environ["BOOK_PROGRESS"] = "1"  # long experiments show a progress bar here, never in the build
    artifacts = _session(root).requirements(sid)  # trained models etc. from the snippets it REQUIRES
    task = Task(sid, str(found[sid].path), str(root), str(Path(transformer_book.__file__).resolve().parent), artifacts)
    out = run_snippet(task, capture=False)
    if out.error is not None:
        print(out.error.traceback, file=sys.stderr)
        print(f"{out.error.location()}: {out.error.message}", file=sys.stderr)
        return 1
    show(out.results)
    print(f"{sid}: {out.seconds:.2f} s; depends on {len(out.deps)} project file(s): {', '.join(out.deps)}")
    return 0


def cmd_accept(args: argparse.Namespace) -> int:
    from transformer_book.book import report

    root = _project_root()
    only = _normalise(args.snippets) or None
    state, diffs = _session(root).accept(only, workers=args.workers)
    errors = report.error_report(state, {})
    for sid, changes in diffs.items():
        if not changes:
            print(f"{sid}: unchanged")
            continue
        print(f"{sid}: {len(changes)} change(s) written to snippets/{sid}.record.json")
        for ch in changes:
            if ch.kind == "added":
                print(f"  + {ch.path} = {ch.new!r}")
            elif ch.kind == "removed":
                print(f"  - {ch.path} (was {ch.old!r})")
            else:
                print(f"  ~ {ch.path}: {ch.old!r} → {ch.new!r}")
    if only is None:
        for path in state.orphan_records:
            print(f"removed orphaned record {path.relative_to(root).as_posix()}")
    if errors:
        print(errors, file=sys.stderr)
        return 1
    return 0


def cmd_timing(args: argparse.Namespace) -> int:
    path = _project_root() / ".book-cache" / "report" / "timing.txt"
    if not path.exists():
        raise SystemExit("no timing report yet: build the book first (mkdocs build)")
    print(path.read_text(encoding="utf-8"), end="")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    for sid, snip in _session(_project_root()).discover().items():
        print(f"{sid}\t{snip.path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_book", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run one snippet and show its results")
    p.add_argument("snippet", help="e.g. lecture07/soft_lookup")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("accept", help="re-execute and rewrite records (all, or the snippets named)")
    p.add_argument("snippets", nargs="*")
    p.add_argument("--workers", type=int, default=0)
    p.set_defaults(func=cmd_accept)
    sub.add_parser("timing", help="show the last build's timing table").set_defaults(func=cmd_timing)
    sub.add_parser("list", help="list the snippets").set_defaults(func=cmd_list)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    raise SystemExit(main())
