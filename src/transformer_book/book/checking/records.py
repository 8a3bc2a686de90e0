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

In the engine a record is a :class:`Record` (its :class:`Provenance`, its results, its :class:`Calibration` of
:class:`SeriesCalibration` and :class:`ClaimCalibration`), read, validated and written here and nowhere else:
``Record.from_json`` / ``to_json`` are the only code that knows the file's layout. A result's own recorded form
belongs to its kind (``results.from_record`` turns it into the kind's typed object), so ``Record.results`` keeps
each one as its kind wrote it. The free-form parts the schema leaves open (the versions in the provenance,
calibration's own provenance and held-out counts) stay mappings, with properties for what the engine reads.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from transformer_book.book.checking import record_schema
from transformer_book.book.environment import SEED, arithmetic, machine, numerical_settings, threads, versions
from transformer_book.book.files import atomic_write_text
from transformer_book.book.memo import Memo, file_version
from transformer_book.book.results import DEFAULT_ABS, DEFAULT_REL, TRAINED, Result, Tolerance

FORMAT = 2
CALIBRATION_FACTOR = 3.0  # a calibrated tolerance is this many times the observed spread


# -- the record, typed -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Provenance:
    """When, where and with what the results were computed: versions, machine, arithmetic, seed, threads, date,
    settings, seconds, and which results an ``accept`` took from a later run (free-form beyond these)."""

    fields: Mapping[str, Any]

    @property
    def seconds(self) -> float:
        """How long the run took (0 where it does not say): the scheduler runs long snippets first."""
        return float(self.fields.get("seconds") or 0.0)

    @property
    def arithmetic(self) -> str | None:
        """The arithmetic the results were computed with (:func:`.environment.arithmetic`); None when the record
        mixes two runs' (an accept from another machine)."""
        return self.fields.get("arithmetic")

    @property
    def date(self) -> str | None:
        return self.fields.get("date")

    @property
    def accepted(self) -> dict[str, str]:
        """Result key → the date an ``accept`` took it from a later run."""
        return dict(self.fields.get("accepted") or {})

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    def __bool__(self) -> bool:
        return bool(self.fields)

    def to_json(self) -> dict[str, Any]:
        return dict(self.fields)


@dataclass(frozen=True)
class SeriesCalibration:
    """What calibration measured of one trained series: the largest move of any perturbed run (``spread``), the
    band derived from it (``abs``), how it is checked (``band``: as a number within ``abs``; ``claims`` or
    ``varies``: through its claims only) and why, where it is not banded or its band is wide."""

    spread: float
    abs: float
    check: str = "band"
    why: str | None = None

    @property
    def compared(self) -> bool:
        return self.check == "band"

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "SeriesCalibration":
        check = data.get("check") or ("varies" if data.get("varies") else "band")  # records before "check"
        return cls(data["spread"], data["abs"], check, data.get("why"))  # as written: a record reads back byte for byte

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"spread": self.spread, "abs": self.abs, "check": self.check}
        if self.why is not None:
            out["why"] = self.why
        return out


@dataclass(frozen=True)
class AtomCalibration:
    """One comparison inside a claim: its recorded margin, how far the perturbed runs moved it, its smallest
    margin among them, and in how many it held (``"5/5"``)."""

    margin: float | None
    spread: float
    worst: float | None
    held: str

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "AtomCalibration":
        return cls(data.get("margin"), data.get("spread", 0.0), data.get("worst"), str(data.get("held", "")))

    def to_json(self) -> dict[str, Any]:
        return {"margin": self.margin, "spread": self.spread, "worst": self.worst, "held": self.held}

    @property
    def always_held(self) -> bool:
        held, _, runs = self.held.partition("/")
        return held == runs


@dataclass(frozen=True)
class ClaimCalibration:
    """What calibration measured of a claim: whether its margin is far outside its noise (``robust``), per atom
    (``·`` for a claim of one comparison)."""

    robust: bool
    atoms: dict[str, AtomCalibration] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "ClaimCalibration":
        return cls(bool(data.get("robust", True)),
                   {path: AtomCalibration.from_json(a) for path, a in (data.get("atoms") or {}).items()})

    def to_json(self) -> dict[str, Any]:
        return {"robust": self.robust, "atoms": {path: a.to_json() for path, a in self.atoms.items()}}


@dataclass(frozen=True)
class Calibration:
    """A record's calibration: its own provenance (date, machine, runs, perturbations, rule, factor, command), the
    held-out counts, and what it measured per trained series and per claim."""

    provenance: Mapping[str, Any]
    held_out: Mapping[str, Any] | None  # None: calibrated before held-out runs were counted
    series: dict[str, SeriesCalibration]
    claims: dict[str, ClaimCalibration] | None  # None: calibrated before claims were

    @property
    def runs(self) -> int | None:
        """How many perturbed runs it compared."""
        return self.provenance.get("runs")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Calibration":
        claims = data.get("claims")
        held_out = data.get("held_out")
        return cls(dict(data.get("provenance") or {}), None if held_out is None else dict(held_out),
                   {name: SeriesCalibration.from_json(e) for name, e in (data.get("series") or {}).items()},
                   None if claims is None else {k: ClaimCalibration.from_json(c) for k, c in claims.items()})

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provenance": dict(self.provenance)}
        if self.held_out is not None:
            out["held_out"] = dict(self.held_out)
        out["series"] = {name: e.to_json() for name, e in self.series.items()}
        if self.claims is not None:
            out["claims"] = {k: c.to_json() for k, c in self.claims.items()}
        return out


@dataclass(frozen=True)
class Record:
    """Everything committed about one snippet's results (see the module's docstring)."""

    snippet: str
    provenance: Provenance
    results: dict[str, dict[str, Any]]  # key → the result as its kind records it
    calibration: Calibration | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "Record":
        cal = data.get("calibration")
        return cls(data["snippet"], Provenance(dict(data.get("provenance") or {})),
                   dict(data["results"]), Calibration.from_json(cal) if cal else None)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": FORMAT, "snippet": self.snippet, "provenance": self.provenance.to_json(),
                               "results": json.loads(json.dumps(self.results))}
        if self.calibration is not None:
            out["calibration"] = self.calibration.to_json()
        return out

    def with_calibration(self, calibration: Calibration | None) -> "Record":
        return replace(self, calibration=calibration)


_LOADED: Memo[Record] = Memo("records read")  # record file → its validated record, by file version


def load(path: Path) -> Record | None:
    """The record at ``path``, or None if there is none. A malformed record is an error, not a miss.

    Parsed and validated once per version of the file (a build reads each record from several places:
    scheduling, the drift check, the pages); callers get their own copy."""
    found = read(path)
    return None if found is None else Record.from_json(found.to_json())


def read(path: Path) -> Record | None:
    """Like :func:`load`, but the one validated record every reader shares — to look at, never to change (the
    pages ask for every record on every rebuild under ``serve``, and copying them all took a tenth of a second)."""
    version = file_version(path)
    if version is None:
        return None
    try:
        return _LOADED.get(path, version, lambda: _parse(path))
    except FileNotFoundError:
        return None


def _parse(path: Path) -> Record:
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
    return Record.from_json(data)


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
                 previous: Record | None = None) -> Record:
    """A record of fresh results. The calibration of ``previous`` is kept for the series that still exist
    (accepting a deliberate change does not throw away what calibration measured)."""
    rec = Record(snippet, Provenance(provenance(seconds)),
                 {key: r.to_record() for key, r in results.items() if r.recorded})
    cal = previous.calibration if previous is not None else None
    if cal is not None:
        trained = {n.series for key, r in results.items() for n in r.numbers(key) if n.kind == TRAINED}
        kept = {s: v for s, v in cal.series.items() if s in trained}
        claims = None if cal.claims is None else {k: v for k, v in cal.claims.items() if k in results}
        if kept or claims:
            rec = rec.with_calibration(replace(cal, series=kept, claims=claims))
    return rec


def accept_keys(old: Record | None, new: Record, keys: set[str]) -> Record:
    """``new`` for the results named in ``keys`` only: every other result, and the calibration, as ``old``
    had them (so their drift is still reported). A named result that is no longer produced is dropped."""
    if old is None:
        return new
    recorded = dict(old.results)
    for key in keys:
        if key in new.results:
            recorded[key] = new.results[key]
        else:
            recorded.pop(key, None)
    # The other results still come from the run the old provenance describes; say which ones are newer.
    accepted = {**old.provenance.accepted, **{k: new.provenance.date for k in sorted(keys)}}
    prov = {**old.provenance.fields, "accepted": accepted}
    if prov.get("arithmetic") != new.provenance.arithmetic:
        prov.pop("arithmetic", None)  # results from two arithmetics: none of them is checked bit for bit
    return replace(old, results=recorded, provenance=Provenance(prov))


def same_arithmetic(record: Record | None) -> bool:
    """Whether this process does the arithmetic the record's results were computed with
    (:func:`.environment.arithmetic`): then its trained numbers must come out bit for bit."""
    recorded = record.provenance.arithmetic if record is not None else None
    return bool(recorded) and recorded == arithmetic()


# Replicates of one experiment: series whose names differ only in a trailing seed number
# (``test_perplexity_seed0`` … ``_seed3``). Each is one seed's training, which on another machine is another draw:
# the held-out build moved s11_positions_rope's seed 3 outside its own band, and a laptop moved seed 2 by twice the
# range of the four seeds. Calibration checks them through their claims (:func:`.calibrate.unbandable`).
SEED_FAMILY = re.compile(r"seed\d+$")


def family(series: str) -> str:
    """The name a series shares with its seed replicates (itself when it has none)."""
    return SEED_FAMILY.sub("seed*", series)


def calibrated_tolerance(record: Record | None, series: str) -> tuple[Tolerance | None, bool]:
    """(tolerance, not compared) of a trained series from the record's calibration; (None, False) if
    uncalibrated. A series that calibration could not band (``check`` is ``claims`` or ``varies``) is not
    compared as a number: its claims are (a seed replicate, :data:`SEED_FAMILY`, always is: calibration
    does not band one seed's training)."""
    entry = series_calibration(record, series)
    if entry is None:
        return None, False
    return Tolerance(abs=max(entry.abs, DEFAULT_ABS), reason="calibrated"), not entry.compared


# -- reading a record that may not exist (a new snippet has none) ------------------------------------------------


def results(record: Record | None) -> dict[str, dict[str, Any]]:
    """The recorded results by key (empty for no record)."""
    return record.results if record is not None else {}


def results_as_written(record: Record | None, new: Record) -> bool:
    """Whether ``new`` records the results exactly as ``record`` has them, order included: a claim's inputs are
    shown in the order they are stored ("省下的参数 = … == Vd = …"), so a record that holds them in another order than
    its snippet now gives them is rewritten, though the two compare equal as mappings."""
    return dumps(results(record)) == dumps(new.results)


def made_with(record: Record | None) -> Provenance:
    """The record's provenance: when, on what machine and with which library versions it was made."""
    return record.provenance if record is not None else Provenance({})


def calibration(record: Record | None) -> Calibration | None:
    """The record's calibration (None where the snippet was never calibrated)."""
    return record.calibration if record is not None else None


def series_calibration(record: Record | None, series: str) -> SeriesCalibration | None:
    """What calibration measured of one trained series, or None."""
    cal = calibration(record)
    return cal.series.get(series) if cal is not None else None


def calibration_runs(record: Record | None) -> int | None:
    """How many perturbed runs the calibration compared (None: not calibrated)."""
    cal = calibration(record)
    return cal.runs if cal is not None else None


def seconds(record: Record | None) -> float:
    """How long the run that made the record took (0 where it does not say)."""
    return made_with(record).seconds


def claim_calibration(record: Record | None, key: str) -> ClaimCalibration | None:
    """What calibration measured of a claim's margin (robust, and per atom margin, spread, worst, held)."""
    cal = calibration(record)
    return (cal.claims or {}).get(key) if cal is not None else None


def problems(path: Path, record: Record) -> list[str]:
    """What makes a record untrustworthy: widened tolerances with neither a reason nor a calibration."""
    out = []
    for key, rec in record.results.items():
        tol = rec.get("tolerance") or {}
        widened = float(tol.get("rel", DEFAULT_REL)) > DEFAULT_REL or float(tol.get("abs", DEFAULT_ABS)) > DEFAULT_ABS
        if widened and not str(tol.get("reason", "")).strip():
            out.append(f"{path}: result {key!r} has a tolerance wider than the default and no reason")
    cal = record.calibration
    if cal is not None:
        if not cal.provenance.get("date") or not cal.runs:
            out.append(f"{path}: the calibration block has no provenance (date, runs); rerun calibrate")
        for series, entry in cal.series.items():
            if entry.abs > max(CALIBRATION_FACTOR * entry.spread, DEFAULT_ABS) * (1 + 1e-9):
                out.append(f"{path}: series {series!r} has a tolerance ({entry.abs:g}) wider than "
                           f"{CALIBRATION_FACTOR:g} × its calibrated spread ({entry.spread:g})")
    return out


def deterministic_part(record: Record | Mapping[str, Any]) -> dict[str, Any]:
    """What two fresh runs on one machine must agree on: the record without what is measured (the run's
    duration in the provenance, and the numbers of measured results). Takes a record or its file's JSON."""
    from transformer_book.book.results import MEASURED, result_kind

    out = json.loads(json.dumps(record.to_json() if isinstance(record, Record) else record))
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


def save(path: Path, record: Record) -> None:
    atomic_write_text(path, dumps(record.to_json()) + "\n")


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
