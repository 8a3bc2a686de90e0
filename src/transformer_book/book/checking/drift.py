"""The drift check: fresh results against their committed record, by kind.

- *exact* numbers must stay within the tolerance the snippet declares (tight by default);
- *trained* numbers within the band their calibration wrote into the record (never a guess); a trained
  series that calibration could not band (its text changes, or a held-out run jumped outside the band of
  the others: ``check`` ``varies``/``claims``) is not compared — the claims about it are;
- *measured* and *rounding* numbers are never compared (only their presence); their claims are;
- every *claim* must hold; and a claim that calibration found inside its noise (not robust) is reported
  unless it says how its sentence states the uncertainty.
Strings, booleans and ``None`` must be identical. A number that appears or disappears is a change too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from transformer_book.book.checking import records
from transformer_book.book.results import (DEFAULT_TOLERANCE, EXACT, NOT_COMPARED, TRAINED, Claim, Result, Tolerance,
                                           recorded_numbers, result_kind)


@dataclass
class Change:
    """One difference between the record and a fresh run."""

    snippet: str
    result: str  # the result's name, e.g. "lookup"
    path: str  # the number inside it, e.g. "lookup[0].输出"
    old: Any
    new: Any
    tolerance: Tolerance | None = None
    kind: str = "drift"  # "drift" | "added" | "removed" | "claim" | "noisy" | "kind"
    value_kind: str = EXACT
    claim: Claim | None = None

    def describe(self) -> str:
        if self.kind == "added":
            return f"{self.path}: new value {self.new!r} (not in the record)"
        if self.kind == "removed":
            return f"{self.path}: recorded {self.old!r}, no longer produced"
        if self.kind == "kind":
            return f"{self.path}: recorded as {self.old}, now declared {self.new}"
        if self.kind == "claim":
            assert self.claim is not None
            return f"claim {self.result!r} no longer holds: «{self.claim.statement}» ({self.claim.describe_inputs()})"
        if self.kind == "noisy":
            assert self.claim is not None
            return (f"claim {self.result!r} is decided inside its noise: «{self.claim.statement}» — {self.new}; "
                    "narrow the sentence to what holds robustly, or state the uncertainty in it and say how "
                    "with Claim(…, uncertain=\"…\")")
        tol = self.tolerance
        if self.value_kind == TRAINED and tol is SAME_ARITHMETIC:
            tol_text = "trained, but this machine does the arithmetic that recorded it: bit for bit"
        elif self.value_kind == TRAINED:
            tol_text = f"calibrated abs {tol.abs:g}" if tol else "trained, not calibrated: exact default"
        else:
            tol_text = tol.describe() if tol else "exact"
        return f"{self.path}: recorded {self.old!r}, now {self.new!r} (tolerance {tol_text})"


# A trained number checked on the arithmetic that recorded it (same CPU flags, versions and settings: bit-identical
# runs) — a band calibrated for other machines would let a real change through, e.g. a heatmap drawn as √w
# inside a band as wide as the weights. The default's slack only absorbs JSON's float printing.
SAME_ARITHMETIC = Tolerance(reason="same arithmetic as the record")


def _same(old: Any, new: Any, tol: Tolerance) -> bool:
    """Numbers within tolerance; strings, booleans and None must be identical."""
    exact = (str, bool, type(None))
    if isinstance(old, exact) or isinstance(new, exact):
        return type(old) is type(new) and old == new
    if not isinstance(old, (int, float)) or not isinstance(new, (int, float)):
        return old == new  # a record that holds something else is compared as data, never crashes the build
    return tol.allows(float(old), float(new))


def _noise(record: records.Record | None, key: str, claim: Claim) -> str:
    """Why calibration found this claim inside its noise ("" if it is robust or was never calibrated)."""
    cal = records.claim_calibration(record, key)
    if cal is None or cal.robust or claim.uncertain:
        return ""
    if not cal.atoms:
        return "calibration found its margin inside the noise"

    def weakness(a: records.AtomCalibration) -> tuple[int, float]:
        spread = float(a.spread or 0.0)
        return (-int(not a.always_held), float("inf") if a.margin is None or spread == 0 else float(a.margin) / spread)

    worst = min(cal.atoms.values(), key=weakness)
    return (f"margin {worst.margin!r}, spread under calibration {float(worst.spread or 0):.3g}, worst margin "
            f"{worst.worst!r}, held in {worst.held} runs")


def compare(snippet: str, record: records.Record | None, results: dict[str, Result]) -> list[Change]:
    """Every difference between a record and fresh results (empty list: no drift)."""
    changes: list[Change] = []
    recorded = records.results(record)
    here = records.same_arithmetic(record)
    for key, result in results.items():
        if not result.recorded:
            continue
        rec = recorded.get(key)
        if result.decided:
            if not result.holds:
                changes.append(Change(snippet, key, key, True, False, kind="claim", claim=result))
            elif (noise := _noise(record, key, result)):
                changes.append(Change(snippet, key, key, None, noise, kind="noisy", claim=result))
            elif rec is None:
                changes.append(Change(snippet, key, key, None, result.statement, kind="added"))
            elif rec.get("type") != result.type_name or rec.get("statement") != result.statement:
                changes.append(Change(snippet, key, key, rec.get("statement", rec.get("type")), result.statement))
            continue
        old_numbers = recorded_numbers(key, rec) if rec is not None else {}
        tolerance = getattr(result, "tolerance", DEFAULT_TOLERANCE)
        new_numbers = {n.path: n for n in result.numbers(key)}
        for path, new in new_numbers.items():
            old = old_numbers.get(path)
            if old is None:
                changes.append(Change(snippet, key, path, None, new.value, kind="added", value_kind=new.kind))
                continue
            if old.kind != new.kind:
                changes.append(Change(snippet, key, path, old.kind, new.kind, kind="kind", value_kind=new.kind))
                continue
            if new.kind in NOT_COMPARED:
                continue
            tol: Tolerance | None = tolerance
            if new.kind == TRAINED:
                if here:  # the arithmetic that recorded it: any difference is a change to the code or data
                    tol = SAME_ARITHMETIC
                else:
                    tol, not_compared = records.calibrated_tolerance(record, new.series)
                    if not_compared:
                        continue
            if not _same(old.value, new.value, tol or DEFAULT_TOLERANCE):
                changes.append(Change(snippet, key, path, old.value, new.value, tol, value_kind=new.kind))
        for path, old in old_numbers.items():
            if path not in new_numbers:
                changes.append(Change(snippet, key, path, old.value, None, kind="removed", value_kind=old.kind))
    for key, rec in recorded.items():
        if key not in results:
            if getattr(result_kind(rec.get("type", "")), "decided", False):
                changes.append(Change(snippet, key, key, rec.get("statement"), None, kind="removed"))
            for path, old in recorded_numbers(key, rec).items():
                changes.append(Change(snippet, key, path, old.value, None, kind="removed", value_kind=old.kind))
    return changes


def uncalibrated(record: records.Record | None, results: dict[str, Result]) -> list[str]:
    """Trained series that the record holds no calibration for."""
    series = {n.series for key, r in results.items() for n in r.numbers(key) if n.kind == TRAINED}
    cal = records.calibration(record)
    missing = sorted(s for s in series if cal is None or s not in cal.series)
    if series and cal is not None and cal.claims is not None:  # a calibrated snippet: its claims' margins too
        missing += sorted(f"claim {k}" for k, r in results.items() if r.decided and k not in cal.claims)
    return missing
