"""Committed records of every number a snippet produces, beside the snippet.

A record lives beside its snippet (``snippets/lecture07/scaling_study.py`` →
``snippets/lecture07/scaling_study.record.json``): human-readable JSON with

- ``provenance`` — versions, platform, build machine, seed, threads, date, and how long the run took;
- ``results`` — every result's numbers with its kind (exact / trained / measured) and, for exact numbers,
  the tolerance the snippet declared (a widened one always with its reason); claims with the numbers they
  were decided on;
- ``calibration`` — for trained numbers, per series: the spread observed when the snippet was re-executed
  under an ensemble of perturbations, the band derived from it and whether the band held out
  (``check``: ``band``, or ``claims``/``varies`` when the series is checked only through its claims); per
  claim, its margin's spread and whether it is robust; the calibration's own provenance and rule.

Records change only through ``python -m transformer_book accept`` / ``calibrate`` (or, outside CI, when a
snippet is new). The drift check against them is :mod:`.drift`.
"""

from __future__ import annotations

import copy
import datetime as _dt
import json
import re
from pathlib import Path
from typing import Any

from transformer_book.book.checking import record_schema
from transformer_book.book.environment import SEED, arithmetic, machine, numerical_settings, threads, versions
from transformer_book.book.files import atomic_write_text
from transformer_book.book.memo import Memo, file_version
from transformer_book.book.results import DEFAULT_ABS, DEFAULT_REL, TRAINED, Result, Tolerance

FORMAT = 2
CALIBRATION_FACTOR = 3.0  # a calibrated tolerance is this many times the observed spread


_LOADED: Memo[dict[str, Any]] = Memo("records read")  # record file → its validated contents, by file version


def load(path: Path) -> dict[str, Any] | None:
    """The record at ``path``, or None if there is none. A malformed record is an error, not a miss.

    Parsed and validated once per version of the file (a build reads each record from several places:
    scheduling, the drift check, the pages); callers get their own copy."""
    found = read(path)
    return None if found is None else copy.deepcopy(found)


def read(path: Path) -> dict[str, Any] | None:
    """Like :func:`load`, but the one validated record every reader shares — to look at, never to change (the
    pages ask for every record on every rebuild under ``serve``, and copying them all took a tenth of a second)."""
    version = file_version(path)
    if version is None:
        return None
    try:
        return _LOADED.get(path, version, lambda: _parse(path))
    except FileNotFoundError:
        return None


def _parse(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}:{exc.lineno}: the record is not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict) or "results" not in data:
        raise ValueError(f"{path}: not a snippet record (no 'results')")
    if data.get("format") != FORMAT:
        raise ValueError(f"{path}: record format {data.get('format')!r}, expected {FORMAT} (rewrite it with accept)")
    record_schema.validate(path, data)  # the shape drift and render read, checked here, naming file and key
    return data


def provenance(seconds: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {**versions(), "machine": machine(), "arithmetic": arithmetic(), "seed": SEED,
                           "threads": threads(), "date": _dt.date.today().isoformat()}
    settings = {k: v for k, v in numerical_settings().items() if k != "BOOK_THREADS"}
    if settings:
        out["settings"] = settings
    if seconds is not None:
        out["seconds"] = round(seconds, 2)  # measured; used to schedule long snippets first
    return out


def build_record(snippet: str, results: dict[str, Result], seconds: float | None = None,
                 previous: dict[str, Any] | None = None) -> dict[str, Any]:
    """A record of fresh results. The calibration of ``previous`` is kept for the series that still exist
    (accepting a deliberate change does not throw away what calibration measured)."""
    rec: dict[str, Any] = {
        "format": FORMAT,
        "snippet": snippet,
        "provenance": provenance(seconds),
        "results": {key: r.to_record() for key, r in results.items() if r.recorded},
    }
    cal = (previous or {}).get("calibration")
    if cal:
        trained = {n.series for key, r in results.items() for n in r.numbers(key) if n.kind == TRAINED}
        kept = {s: v for s, v in cal.get("series", {}).items() if s in trained}
        claims = {k: v for k, v in (cal.get("claims") or {}).items() if k in results}
        if kept or claims:
            rec["calibration"] = {**cal, "series": kept, **({"claims": claims} if "claims" in cal else {})}
    return rec


def accept_keys(old: dict[str, Any] | None, new: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    """``new`` for the results named in ``keys`` only: every other result, and the calibration, as ``old``
    had them (so their drift is still reported). A named result that is no longer produced is dropped."""
    if old is None:
        return new
    recorded = dict(old.get("results", {}))
    for key in keys:
        if key in new["results"]:
            recorded[key] = new["results"][key]
        else:
            recorded.pop(key, None)
    # The other results still come from the run the old provenance describes; say which ones are newer.
    accepted = {**(old["provenance"].get("accepted") or {}), **{k: new["provenance"].get("date") for k in sorted(keys)}}
    prov = {**old["provenance"], "accepted": accepted}
    if prov.get("arithmetic") != new["provenance"].get("arithmetic"):
        prov.pop("arithmetic", None)  # results from two arithmetics: none of them is checked bit for bit
    return {**old, "results": recorded, "provenance": prov}


def same_arithmetic(record: dict[str, Any] | None) -> bool:
    """Whether this process does the arithmetic the record's results were computed with
    (:func:`.environment.arithmetic`): then its trained numbers must come out bit for bit."""
    recorded = ((record or {}).get("provenance") or {}).get("arithmetic")
    return bool(recorded) and recorded == arithmetic()


# Replicates of one experiment: series whose names differ only in a trailing seed number
# (``test_perplexity_seed0`` … ``_seed3``). Each is one seed's training, which on another machine is another draw:
# the held-out build moved s11_positions_rope's seed 3 outside its own band, and a laptop moved seed 2 by twice the
# range of the four seeds. Calibration checks them through their claims (:func:`.calibrate.unbandable`).
SEED_FAMILY = re.compile(r"seed\d+$")


def family(series: str) -> str:
    """The name a series shares with its seed replicates (itself when it has none)."""
    return SEED_FAMILY.sub("seed*", series)


def calibrated_tolerance(record: dict[str, Any] | None, series: str) -> tuple[Tolerance | None, bool]:
    """(tolerance, not compared) of a trained series from the record's calibration; (None, False) if
    uncalibrated. A series that calibration could not band (``check`` is ``claims`` or ``varies``) is not
    compared as a number: its claims are (a seed replicate, :data:`SEED_FAMILY`, always is: calibration
    does not band one seed's training)."""
    entry = series_calibration(record, series)
    if entry is None:
        return None, False
    check = entry.get("check", "varies" if entry.get("varies") else "band")
    width = float(entry.get("abs", 0.0))
    tol = Tolerance(abs=max(width, DEFAULT_ABS), reason="calibrated")
    return tol, check != "band"


# -- reading a record: the only place that knows its layout (docs/authoring.md, checking/record_schema.py) --------


def results(record: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """The recorded results by key (empty for no record)."""
    return (record or {}).get("results") or {}


def made_with(record: dict[str, Any] | None) -> dict[str, Any]:
    """The record's provenance: when, on what machine and with which library versions it was made."""
    return (record or {}).get("provenance") or {}


def calibration(record: dict[str, Any] | None) -> dict[str, Any]:
    """The record's calibration block (empty where the snippet was never calibrated)."""
    return (record or {}).get("calibration") or {}


def series_calibration(record: dict[str, Any] | None, series: str) -> dict[str, Any] | None:
    """What calibration measured of one trained series (``spread``, ``abs``, ``check``, ``why``), or None."""
    return (calibration(record).get("series") or {}).get(series)


def calibration_runs(record: dict[str, Any] | None) -> int | None:
    """How many perturbed runs the calibration compared (None: not calibrated)."""
    return (calibration(record).get("provenance") or {}).get("runs")


def seconds(record: dict[str, Any] | None) -> float:
    """How long the run that made the record took (0 where it does not say)."""
    return float(made_with(record).get("seconds") or 0.0)


def claim_calibration(record: dict[str, Any] | None, key: str) -> dict[str, Any] | None:
    """What calibration measured of a claim's margin (``robust``, and per atom margin, spread, worst, held)."""
    return (calibration(record).get("claims") or {}).get(key)


def problems(path: Path, record: dict[str, Any]) -> list[str]:
    """What makes a record untrustworthy: widened tolerances with neither a reason nor a calibration."""
    out = []
    for key, rec in record.get("results", {}).items():
        tol = rec.get("tolerance") or {}
        widened = float(tol.get("rel", DEFAULT_REL)) > DEFAULT_REL or float(tol.get("abs", DEFAULT_ABS)) > DEFAULT_ABS
        if widened and not str(tol.get("reason", "")).strip():
            out.append(f"{path}: result {key!r} has a tolerance wider than the default and no reason")
    cal = record.get("calibration")
    if cal:
        prov = cal.get("provenance") or {}
        if not prov.get("date") or not prov.get("runs"):
            out.append(f"{path}: the calibration block has no provenance (date, runs); rerun calibrate")
        for series, entry in cal.get("series", {}).items():
            if not isinstance(entry, dict):
                out.append(f"{path}: calibration of series {series!r} is not an object")
                continue
            spread, tol = float(entry.get("spread", 0.0)), float(entry.get("abs", 0.0))
            if tol > max(CALIBRATION_FACTOR * spread, DEFAULT_ABS) * (1 + 1e-9):
                out.append(f"{path}: series {series!r} has a tolerance ({tol:g}) wider than "
                           f"{CALIBRATION_FACTOR:g} × its calibrated spread ({spread:g})")
    return out


def deterministic_part(record: dict[str, Any]) -> dict[str, Any]:
    """What two fresh runs on one machine must agree on: the record without what is measured (the run's
    duration in the provenance, and the numbers of measured results)."""
    from transformer_book.book.results import MEASURED, result_kind

    out = json.loads(json.dumps(record))
    out.get("provenance", {}).pop("seconds", None)
    for key, rec in out.get("results", {}).items():
        kind = result_kind(rec.get("type", ""))
        if kind is None:
            continue  # a kind this process has not loaded: compared as recorded
        measured = sorted(n.path for n in kind.numbers_of_record(key, rec).values() if n.kind == MEASURED)
        if measured:
            rec["measured"] = measured
            kind.without_measured(rec)
    return out


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
