"""Committed records of every number a snippet produces, and the drift check against them.

A record lives beside its snippet (``snippets/lecture07/scaling_study.py`` →
``snippets/lecture07/scaling_study.record.json``): human-readable JSON with the provenance of the run
(versions, platform, seed, threads, date), every result's numbers, and the tolerance each may move by.
Records change only through ``python -m transformer_book accept`` (or, outside CI, when a snippet is new).
"""

from __future__ import annotations

import datetime as _dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from .cache import atomic_write_text
from .discover import environment
from .execute import SEED, THREADS
from .results import Artifact, Figure, Table, Tolerance, Value

FORMAT = 1


@dataclass
class Change:
    """One number that differs between the record and a fresh run."""

    snippet: str
    result: str  # the result's name, e.g. "lookup"
    path: str  # the number inside it, e.g. "lookup[0].输出"
    old: Any
    new: Any
    tolerance: Tolerance | None  # None for a number that appeared or disappeared
    kind: str = "drift"  # "drift" | "added" | "removed"

    def describe(self) -> str:
        if self.kind == "added":
            return f"{self.path}: new value {self.new!r} (not in the record)"
        if self.kind == "removed":
            return f"{self.path}: recorded {self.old!r}, no longer produced"
        tol = self.tolerance
        tol_text = f"rel {tol.rel:g}, abs {tol.abs:g}" if tol else "exact"
        return f"{self.path}: recorded {self.old!r}, now {self.new!r} (tolerance {tol_text})"


def result_to_record(result: Any) -> dict[str, Any]:
    rec = result.to_record()
    rec["tolerance"] = result.tolerance.as_record()
    return rec


def numbers_of_record(key: str, rec: dict[str, Any]) -> Iterator[tuple[str, Any]]:
    kind = rec.get("kind")
    if kind == "value":
        yield from Value(rec["value"]).numbers(key)
    elif kind == "table":
        yield from Table(rec["columns"], rec["rows"]).numbers(key)
    elif kind == "figure":
        yield from Figure(None, plotted=rec.get("plotted", {}), data=rec.get("data", {})).numbers(key)
    else:
        raise ValueError(f"unknown result kind {kind!r} in record for {key!r}")


def _same(old: Any, new: Any, tol: Tolerance) -> bool:
    """Numbers within tolerance; strings, booleans and None must be identical."""
    exact = (str, bool, type(None))
    if isinstance(old, exact) or isinstance(new, exact):
        return type(old) is type(new) and old == new
    return tol.allows(float(old), float(new))


def compare(snippet: str, record: dict[str, Any] | None, results: dict[str, Any]) -> list[Change]:
    """Every difference between a record and fresh results (empty list: no drift)."""
    changes: list[Change] = []
    recorded = (record or {}).get("results", {})
    for key, result in results.items():
        if isinstance(result, Artifact):
            continue
        new_numbers = dict(result.numbers(key))
        old_numbers = dict(numbers_of_record(key, recorded[key])) if key in recorded else {}
        for path, new in new_numbers.items():
            if path not in old_numbers:
                changes.append(Change(snippet, key, path, None, new, None, "added"))
            elif not _same(old_numbers[path], new, result.tolerance):
                changes.append(Change(snippet, key, path, old_numbers[path], new, result.tolerance))
        for path, old in old_numbers.items():
            if path not in new_numbers:
                changes.append(Change(snippet, key, path, old, None, None, "removed"))
    for key, rec in recorded.items():
        if key not in results:
            for path, old in numbers_of_record(key, rec):
                changes.append(Change(snippet, key, path, old, None, None, "removed"))
    return changes


def load(path: Path) -> dict[str, Any] | None:
    """The record at ``path``, or None if there is none. A malformed record is an error, not a miss."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: the record is not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict) or "results" not in data:
        raise ValueError(f"{path}: not a snippet record (no 'results')")
    return data


def build_record(snippet: str, results: dict[str, Any]) -> dict[str, Any]:
    provenance = {**environment(), "seed": SEED, "threads": THREADS, "date": _dt.date.today().isoformat()}
    return {
        "format": FORMAT,
        "snippet": snippet,
        "provenance": provenance,
        "results": {key: result_to_record(r) for key, r in results.items() if not isinstance(r, Artifact)},
    }


def save(path: Path, record: dict[str, Any]) -> None:
    atomic_write_text(path, dumps(record) + "\n")


def dumps(obj: Any, indent: int = 0) -> str:
    """JSON with lists of scalars kept on one line, so that a table row or a curve reads as one line."""
    pad = "  " * indent
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        items = [f'{pad}  {json.dumps(k, ensure_ascii=False)}: {dumps(v, indent + 1)}' for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(obj, list):
        if all(not isinstance(v, (dict, list)) for v in obj):
            return "[" + ", ".join(json.dumps(v, ensure_ascii=False) for v in obj) + "]"
        items = [f"{pad}  {dumps(v, indent + 1)}" for v in obj]
        return "[\n" + ",\n".join(items) + f"\n{pad}]"
    return json.dumps(obj, ensure_ascii=False)
