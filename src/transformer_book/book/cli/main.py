"""Command line of the book engine: ``python -m transformer_book <command>``.

- ``run SNIPPET``              run one snippet as the build would, show its results and a progress bar;
                               nothing is recorded (what it requires comes from the cache, or runs first)
- ``accept [SNIPPET[:KEY] …]`` re-execute (fresh) and rewrite the records, printing old → new; with
                               ``:KEY`` only that result is rewritten
- ``calibrate [SNIPPET …]``    re-execute under perturbations and write calibrated tolerances for trained values
- ``results --json FILE …``    compute results and write them as JSON (used by ``calibrate``)
- ``timing``                   show the timing table of the last build
- ``list``                     list the snippets
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from transformer_book.book.cli.project import find_root, open_session


def _normalise(ids: list[str]) -> list[str]:
    """``snippets/part/a.py`` → ``part/a``; a ``:KEY`` suffix is kept (``part/a:key``)."""
    out = []
    for item in ids:
        sid, colon, key = item.partition(":")
        sid = sid.removeprefix("snippets/").removesuffix(".py").removesuffix(".ipynb").removeprefix("docs/")
        out.append(sid + colon + key)
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from transformer_book.book.cli.show import show
    from transformer_book.book.execution.worker import run_snippet
    from transformer_book.book.types import Task

    session = open_session()
    found = session.discover()
    (sid,) = _normalise([args.snippet])
    if sid not in found:
        raise SystemExit(f"unknown snippet {sid!r}; known: {', '.join(found)}")
    os.environ["BOOK_PROGRESS"] = "1"  # long experiments show a progress bar here, never in the build
    requires = session.requirements(sid)  # trained models etc. from the snippets it REQUIRES
    import tempfile

    with tempfile.TemporaryDirectory() as blobs:
        task = Task(sid, str(found[sid].path), str(session.project_root), blobs, requires,
                    timeout=found[sid].timeout(session.options.timeout))
        out = run_snippet(task, capture=False)
    if out.error is not None:
        print(out.error.traceback, file=sys.stderr)
        print(f"{out.error.location()}: {out.error.message}", file=sys.stderr)
        return 1
    show(out.results)
    print(f"{sid}: {out.seconds:.2f} s; depends on {len(out.deps)} project file(s): {', '.join(out.deps)}")
    return 0


def cmd_accept(args: argparse.Namespace) -> int:
    from transformer_book.book.site import report

    session = open_session()
    named = _normalise(args.snippets)
    keys: dict[str, set[str]] = {}
    for item in named:  # "lecture07/s11_train:dev_perplexity": just that result of the snippet
        sid, _, key = item.partition(":")
        if key:
            keys.setdefault(sid, set()).add(key)
    whole = {item for item in named if ":" not in item}
    for sid in whole & set(keys):  # a snippet named whole as well is accepted whole
        del keys[sid]
    only = list(dict.fromkeys(item.partition(":")[0] for item in named)) or None
    try:
        state, diffs = session.accept(only, workers=args.workers, keep_requirements=args.keep_requirements,
                                      keys=keys)
    except ValueError as exc:
        raise SystemExit(f"accept: {exc}") from None
    errors = report.error_report(state, {})
    false_claims = []
    for sid, changes in diffs.items():
        if not changes:
            print(f"{sid}: unchanged")
            continue
        only_keys = f" (only {', '.join(sorted(keys[sid]))}; the other results keep their record)" if sid in keys else ""
        print(f"{sid}: {len(changes)} change(s) written to {state.snippets[sid].snippet.record_path.relative_to(session.project_root).as_posix()}{only_keys}")
        for ch in changes:
            if ch.kind == "claim":
                false_claims.append(f"{sid}:{ch.result}")
                print(f"  ! {ch.describe()}")
            elif ch.kind == "added":
                print(f"  + {ch.path} = {ch.new!r}")
            elif ch.kind == "removed":
                print(f"  - {ch.path} (was {ch.old!r})")
            else:
                print(f"  ~ {ch.path}: {ch.old!r} → {ch.new!r}")
    if only is None:
        for path in state.orphan_records:
            print(f"removed orphaned record {path.relative_to(session.project_root).as_posix()}")
    if state.uncalibrated:
        print("trained values without calibration (run calibrate): " + ", ".join(state.uncalibrated))
    if errors:
        print(errors, file=sys.stderr)
        return 1
    if false_claims:
        print("claims that do not hold (the build will fail until the code or the sentence changes): "
              + ", ".join(false_claims), file=sys.stderr)
        return 1
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from transformer_book.book.checking.calibrate import calibrate, perturbations, summary

    session = open_session()
    ensemble = perturbations() if args.jitter is None else perturbations(args.jitter)
    chosen = ensemble
    if args.only_perturbation:
        chosen = [p for p in ensemble if p.name in args.only_perturbation]
        unknown = set(args.only_perturbation) - {p.name for p in chosen}
        if unknown:
            raise SystemExit(f"unknown perturbation(s): {', '.join(sorted(unknown))}; the ensemble is "
                             + ", ".join(p.name for p in ensemble))
    cals = calibrate(session.project_root, session.discover(), _normalise(args.snippets) or None,
                     workers=args.workers, chosen=chosen, fresh=args.fresh)
    print(summary(cals))
    return 1 if any(c.errors or c.exact_moved or c.flipped_claims for c in cals) else 0


def cmd_results(args: argparse.Namespace) -> int:
    session = open_session()
    only = _normalise(args.snippets) or None
    state = session.build(session.command_options(fresh=args.fresh, workers=args.workers), only)
    payload = {
        "results": {
            sid: {k: r.to_data() for k, r in st.results.items() if r.recorded}
            for sid, st in state.snippets.items() if st.status in ("ran", "cached")
        },
        "errors": {sid: f"{st.error.location()}: {st.error.message}" for sid, st in state.snippets.items() if st.error},
        "seconds": {sid: st.seconds for sid, st in state.snippets.items()},
    }
    Path(args.json).write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
    return 1 if payload["errors"] else 0


def cmd_claims(args: argparse.Namespace) -> int:
    from transformer_book.book.rendering.claim_index import as_markdown, as_text, index

    session = open_session()
    found = session.discover()
    docs = session.notebooks_dir or session.project_root / "docs"
    claims = index(Path(docs), {sid: snip.record_path for sid, snip in found.items()})
    print(as_markdown(claims) if args.markdown else as_text(claims))
    return 0


def cmd_timing(args: argparse.Namespace) -> int:
    path = open_session().report_dir / "timing.txt"
    if not path.exists():
        raise SystemExit("no timing report yet: build the book first (mkdocs build)")
    print(path.read_text(encoding="utf-8"), end="")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    root = find_root()
    for sid, snip in open_session(root).discover().items():
        print(f"{sid}\t{snip.path.relative_to(root).as_posix()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m transformer_book", description=(__doc__ or "").split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("run", help="run one snippet and show its results")
    p.add_argument("snippet", help="e.g. lecture07/soft_lookup")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("accept", help="re-execute and rewrite records (all, or the snippets named)")
    p.add_argument("snippets", nargs="*", help="SNIPPET, or SNIPPET:KEY to accept just that result")
    p.add_argument("--keep-requirements", action="store_true",
                   help="rerun only the snippets named; what they REQUIRE comes from the cache where it is there")
    p.add_argument("--workers", type=int, default=0)
    p.set_defaults(func=cmd_accept)
    p = sub.add_parser("calibrate", help="re-execute under perturbations; write calibrated tolerances")
    p.add_argument("snippets", nargs="*")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--jitter", type=int, default=None,
                   help="how many one-ulp noise seeds join the three platform paths (default: calibrate.JITTER_RUNS, 5)")
    p.add_argument("--only-perturbation", action="append", help="run just this perturbation (repeatable)")
    p.add_argument("--fresh", action="store_true", help="rerun every perturbed snippet, ignoring the calibration caches")
    p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser("results", help="compute results and write them as JSON")
    p.add_argument("snippets", nargs="*")
    p.add_argument("--json", required=True)
    p.add_argument("--fresh", action="store_true")
    p.add_argument("--workers", type=int, default=0)
    p.set_defaults(func=cmd_results)
    p = sub.add_parser("claims", help="list every claim: page:line, its sentence, statement, comparison and margin")
    p.add_argument("--markdown", action="store_true", help="as a Markdown table")
    p.set_defaults(func=cmd_claims)
    sub.add_parser("timing", help="show the last build's timing table").set_defaults(func=cmd_timing)
    sub.add_parser("list", help="list the snippets").set_defaults(func=cmd_list)
    args = parser.parse_args(argv)
    return args.func(args)
