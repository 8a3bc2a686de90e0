"""Human-readable reports: drift and false claims, snippet errors, record problems, and the timing table —
and what a build does with them once its snippets have run (:func:`after_snippets`)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from transformer_book.book.checking import drift_page
from transformer_book.book.checking.drift import Change
from transformer_book.book.state import BuildState, Options

ACCEPT = "python -m transformer_book accept"
RUN = "python -m transformer_book run"
CALIBRATE = "python -m transformer_book calibrate"

Usage = dict[tuple[str, str], list[str]]  # (snippet, result key) -> ["page.md:12", …]


@dataclass
class Verdict:
    """What the build says once its snippets have run: ``stop`` (the build fails with it) or what it logs."""

    stop: str = ""
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    infos: list[str] = field(default_factory=list)


def after_snippets(state: BuildState, usage: Usage, options: Options, serving: bool, report_dir: Path,
                   project_root: Path, docs_dir: Path, font: Path | None) -> Verdict:
    """The build's policy on what its snippets did. A snippet that failed stops ``mkdocs build`` (``serve`` shows
    the error on the page and goes on); drift, false claims and record problems stop a CI build and are warnings
    otherwise (``--strict`` fails on them); the HTML drift report is written unless the build ran only some
    snippets (``BOOK_ONLY``: it sees part of the drift, so the last report stays); claims no page cites warn."""
    said = Verdict()
    errors = error_report(state, usage)
    if errors and not serving:
        return Verdict(stop="A snippet failed; the build stops.\n" + errors)
    if errors:
        said.errors.append(errors)
    said.infos += [f"new record written: snippets/{sid}.record.json (commit it with the snippet)" for sid in state.new_records]
    drift_text = drift_report(state, usage)
    if not options.select:
        shown = drift_page.write(report_dir, state.drift, state.snippets, usage, project_root, docs_dir, font)
        if shown is not None:  # printed last: the page to open before deciding anything
            drift_text += f"\nDrift report (figures, tables and claims, recorded vs now): {shown}"
    texts = [t for t in (records_report(state, options.ci), drift_text) if t]
    if texts and options.ci:
        said.stop = "\n".join(texts)
        return said
    said.warnings += texts
    uncited = uncited_claims(state, usage)
    if uncited and not options.select:
        said.warnings.append(uncited)
    return said


def _pages(usage: Usage, snippet: str, key: str | None = None) -> list[str]:
    if key is not None:
        return usage.get((snippet, key), [])
    return sorted({w for (s, _), ws in usage.items() if s == snippet for w in ws})


def drift_report(state: BuildState, usage: Usage) -> str:
    if not state.drift:
        return ""
    by_snippet: dict[str, list[Change]] = defaultdict(list)
    for ch in state.drift:
        by_snippet[ch.snippet].append(ch)
    claims = [ch for ch in state.drift if ch.kind == "claim"]
    noisy = [ch for ch in state.drift if ch.kind == "noisy"]
    values = len(state.drift) - len(claims) - len(noisy)
    head = []
    if values:
        head.append(f"{values} recorded value(s) changed")
    if claims:
        head.append(f"{len(claims)} claim(s) no longer hold")
    if noisy:
        head.append(f"{len(noisy)} claim(s) decided inside their calibrated noise")
    lines = [f"Drift: {' and '.join(head)} in {len(by_snippet)} snippet(s)."]
    for sid, changes in by_snippet.items():
        snip = state.snippets[sid].snippet
        lines.append(f"  {snip.path.as_posix()}  (record {snip.record_path.name})")
        for ch in changes[:20]:
            lines.append(f"    {ch.describe()}")
            pages = _pages(usage, sid, ch.result)
            where = "stated at" if ch.kind in ("claim", "noisy") else "shown at"
            lines.append(f"      {where}: {', '.join(pages) if pages else '(no page shows it)'}")
        if len(changes) > 20:
            lines.append(f"    … and {len(changes) - 20} more")
    lines.append("Inspect a snippet's fresh results with:  " + f"{RUN} <snippet>")
    if claims:
        lines.append("A claim that no longer holds means the sentence at that page:line is no longer true: fix the "
                     "code or the sentence (and the claim with it).")
    if noisy:
        lines.append("A claim inside its noise may turn false on another machine: its margin is within what "
                     "calibration saw the perturbations move it. Say only what holds with room to spare, or say in "
                     "the sentence how sure it is (and Claim(…, uncertain=\"…\") says how).")
    if values:
        lines.append("If the change is deliberate, rewrite the records (prints old → new):  "
                     + f"{ACCEPT} {' '.join(by_snippet)}")
    return "\n".join(lines)


def error_report(state: BuildState, usage: Usage) -> str:
    lines = []
    for sid, st in state.snippets.items():
        if st.error is None:
            continue
        err = st.error
        inside = f" (raised in {err.deepest})" if err.deepest else ""
        lines.append(f"{err.location()}: snippet {sid} failed{inside}: {err.message}")
        pages = _pages(usage, sid)
        lines.append(f"  used by: {', '.join(pages) if pages else '(no page)'}")
        tail = err.traceback.strip().splitlines()[-12:]
        lines.extend("  | " + t for t in tail)
    return "\n".join(lines)


def records_report(state: BuildState, ci: bool) -> str:
    lines = list(state.record_errors)
    if ci and state.missing_records:
        lines.append(
            "Results with no record (run the build locally, or `"
            + ACCEPT
            + " <snippet>`, and commit the .record.json): "
            + ", ".join(state.missing_records)
        )
    if state.orphan_records:
        lines.append(
            "Records that no snippet produces any more (delete them, or `" + ACCEPT + "` to clean up): "
            + ", ".join(p.as_posix() for p in state.orphan_records)
        )
    if ci and state.uncalibrated:
        lines.append(
            "Trained values without a calibrated tolerance (run `" + CALIBRATE + " "
            + " ".join(state.uncalibrated) + "` and commit the records): "
            + "; ".join(f"{sid}: {', '.join(series[:4])}{' …' if len(series) > 4 else ''}"
                        for sid, series in state.uncalibrated.items())
        )
    return "\n".join(lines)


def uncited_claims(state: BuildState, usage: Usage) -> str:
    """Claims that no page states: a claim belongs beside its sentence (a check nobody reads is a test)."""
    missing = [
        f"{sid}:{key}"
        for sid, st in state.snippets.items()
        if not st.snippet.is_notebook
        for key, r in st.results.items()
        if r.decided and (sid, key) not in usage
    ]
    if not missing:
        return ""
    return ("Claims that no page cites (put {{ claim snippet:key }} after the sentence that makes each one, "
            "or move the check into tests/): " + ", ".join(missing))


def log_timing(rows: list[dict[str, Any]], report_dir: Path, log: Any) -> None:
    """The snippet timing table, written to ``report_dir/timing.txt`` and logged, with the snippets over budget."""
    from transformer_book.book.files import atomic_write_text

    table = timing_table(rows)
    atomic_write_text(report_dir / "timing.txt", table + "\n")
    log.info("snippet timing (also in %s):\n%s", (report_dir / "timing.txt").as_posix(), table)
    for line in over_budget(rows):
        log.info("over budget: " + line)


def timing_table(rows: Iterable[dict[str, Any]]) -> str:
    rows = list(rows)
    if not rows:
        return "No snippets."
    width = max(len(r["snippet"]) for r in rows)
    out = [f"{'snippet':<{width}}  status   seconds  budget"]
    total_ran = 0.0
    for r in rows:
        budget = r.get("budget")
        over = ""
        if budget is not None and r["status"] == "ran" and r["seconds"] > budget:
            over = "  OVER BUDGET"
        if r["status"] == "ran":
            total_ran += r["seconds"]
        b = f"{budget:g}" if budget is not None else "-"
        out.append(f"{r['snippet']:<{width}}  {r['status']:<7} {r['seconds']:8.2f}  {b:>6}{over}")
    count = {status: sum(r["status"] == status for r in rows) for status in ("ran", "cached", "error", "skipped")}
    summary = f"{len(rows)} snippets: {count['ran']} executed ({total_ran:.1f} s of compute), {count['cached']} from cache"
    summary += "".join(f", {count[s]} {s}" for s in ("error", "skipped") if count[s])
    out.append(summary)
    return "\n".join(out)


def over_budget(rows: Iterable[dict[str, Any]]) -> list[str]:
    return [
        f"{r['snippet']} took {r['seconds']:.1f} s, over its budget of {r['budget']:g} s"
        for r in rows
        if r.get("budget") is not None and r["status"] == "ran" and r["seconds"] > r["budget"]
    ]
