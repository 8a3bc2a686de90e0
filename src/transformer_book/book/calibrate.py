"""Calibrated tolerances: how far each trained number moves when the arithmetic is done another way.

``python -m transformer_book calibrate [snippet …]`` re-executes the snippets (with everything they
require) once per *perturbation* — each a stand-in for another machine — in a separate process and cache:

- ``threads-2-reversed``: torch uses 2 threads instead of 1 (another split of every parallel reduction),
  and the workers take the snippets in the opposite order;
- ``aten-<isa>``: torch's own kernels take the code path of an older CPU (AVX2 instead of AVX-512, or
  the scalar one), as on a typical laptop;
- ``blas-compatible``: MKL's matrix products take their "compatible" path and numpy's OpenBLAS is told the
  CPU is a Haswell — another BLAS.

For every *trained* series it writes into the record the largest difference from the recorded value seen
in any run (the spread) and a tolerance of ``3 × spread`` (the tight default where the spread is zero);
strings that change are marked ``varies`` and are no longer compared. It reports what calibration exists
to find: exact numbers that moved (they are really trained, or the code has a race), and claims that flip
under a perturbation (the sentence depends on noise and must be rephrased).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import records
from .environment import default_workers, machine
from .results import DEFAULT_ABS, DEFAULT_TOLERANCE, EXACT, MEASURED, TRAINED, Claim, Number, Tolerance, from_data
from .session import BookSession, closure

FACTOR = records.CALIBRATION_FACTOR


@dataclass(frozen=True)
class Perturbation:
    name: str
    description: str
    env: dict[str, str]


def _older_isa() -> str:
    try:
        import torch

        return "avx2" if torch.backends.cpu.get_cpu_capability().upper().startswith("AVX512") else "default"
    except Exception:  # noqa: BLE001 - without torch the variable is harmless
        return "default"


def perturbations() -> list[Perturbation]:
    isa = _older_isa()
    return [
        Perturbation("threads-2-reversed", "torch 用 2 个线程，工作进程按相反的顺序领取片段",
                     {"BOOK_THREADS": "2", "BOOK_ORDER": "reverse"}),
        Perturbation(f"aten-{isa}", f"torch 自己的算子走 {isa.upper()} 的代码路径（另一种 CPU）", {"ATEN_CPU_CAPABILITY": isa}),
        Perturbation("blas-compatible", "MKL 走兼容路径、OpenBLAS 按 Haswell 运行（另一种 BLAS）",
                     {"MKL_CBWR": "COMPATIBLE", "OPENBLAS_CORETYPE": "Haswell"}),
    ]


@dataclass
class SeriesSpread:
    spread: float = 0.0  # largest |new − recorded| over the series' numbers and the runs
    rel: float = 0.0  # the same, relative to |recorded|
    varies: bool = False  # a string or boolean changed


@dataclass
class SnippetCalibration:
    snippet: str
    series: dict[str, SeriesSpread] = field(default_factory=dict)  # trained series only
    exact_moved: list[str] = field(default_factory=list)  # "path under perturbation: old → new"
    flipped_claims: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def largest(self) -> tuple[str, SeriesSpread] | None:
        if not self.series:
            return None
        return max(self.series.items(), key=lambda kv: (kv[1].varies, kv[1].rel))


def perturbed_workers(perturbation: Perturbation, workers: int = 0) -> int:
    """Worker processes for a perturbed run: with torch on n threads, one process per n cores."""
    return workers or default_workers(int(perturbation.env.get("BOOK_THREADS", "1") or 1))


def run_perturbed(root: Path, snippets: list[str], perturbation: Perturbation, workers: int = 0,
                  fresh: bool = False) -> dict[str, Any]:
    """Results of ``snippets`` under ``perturbation``, computed in a separate process with a cache of its own.

    The perturbation's settings are part of every cache key (:mod:`.environment`), so a cached perturbed
    result is exactly what a rerun would give: calibrating again after editing one snippet reruns only the
    snippets whose sources changed (``fresh=True`` reruns everything)."""
    cache = root / ".book-cache" / "calibrate" / perturbation.name
    env = {**os.environ, **perturbation.env, "BOOK_CACHE_DIR": str(cache)}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        cmd = [sys.executable, "-m", "transformer_book", "results", "--json", str(out), *snippets,
               "--workers", str(perturbed_workers(perturbation, workers))]
        if fresh:
            cmd.append("--fresh")
        done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        if not out.exists():
            raise RuntimeError(f"the {perturbation.name} run failed:\n{done.stdout}\n{done.stderr}")
        return json.loads(out.read_text(encoding="utf-8"))


def _numbers(key: str, data: dict[str, Any]) -> dict[str, Number]:
    return {n.path: n for n in from_data({**data, "tolerance": None}).numbers(key)} if data.get("type") not in ("claim", "block") else {}


def measure(record: dict[str, Any], runs: dict[str, dict[str, Any]], sid: str) -> SnippetCalibration:
    """Compare each perturbed run's results of ``sid`` with its record."""
    cal = SnippetCalibration(sid)
    recorded = record.get("results", {})
    for name, payload in runs.items():
        got = payload.get("results", {}).get(sid)
        if got is None:
            cal.errors.append(f"{name}: {payload.get('errors', {}).get(sid, 'no results')}")
            continue
        for key, data in got.items():
            if data.get("type") == "claim":
                claim = Claim.from_data(data)
                if not claim.holds:
                    cal.flipped_claims.append(f"{key} under {name}: «{claim.statement}» ({claim.describe_inputs()})")
                continue
            rec = recorded.get(key)
            if rec is None:
                continue
            old = _numbers(key, rec)
            tolerance = Tolerance.from_record(data.get("tolerance")) if data.get("tolerance") else DEFAULT_TOLERANCE
            for path, new in _numbers(key, data).items():
                o = old.get(path)
                if o is None or new.kind == MEASURED:
                    continue
                if new.kind == TRAINED:
                    s = cal.series.setdefault(new.series, SeriesSpread())
                    if isinstance(new.value, (int, float)) and not isinstance(new.value, bool) \
                            and isinstance(o.value, (int, float)) and not isinstance(o.value, bool):
                        d = abs(float(new.value) - float(o.value))
                        s.spread = max(s.spread, d)
                        s.rel = max(s.rel, d / abs(float(o.value)) if o.value else (0.0 if d == 0 else float("inf")))
                    elif new.value != o.value:
                        s.varies = True
                elif new.kind == EXACT:
                    same = (new.value == o.value) if isinstance(new.value, (str, bool, type(None))) \
                        else tolerance.allows(float(o.value), float(new.value))
                    if not same:
                        cal.exact_moved.append(f"{path} under {name}: {o.value!r} → {new.value!r}")
    for key, rec in recorded.items():  # trained series that never differed still get a calibration
        if rec.get("type") not in ("claim", "block"):
            for n in _numbers(key, rec).values():
                if n.kind == TRAINED:
                    cal.series.setdefault(n.series, SeriesSpread())
    return cal


def write(record: dict[str, Any], cal: SnippetCalibration, used: list[Perturbation], command: str) -> dict[str, Any]:
    """The record with this calibration in it."""
    rec = dict(record)
    if not cal.series:
        rec.pop("calibration", None)
        return rec
    rec["calibration"] = {
        "provenance": {
            "date": _dt.date.today().isoformat(),
            "machine": machine(),
            "runs": len(used),
            "perturbations": {p.name: " ".join(f"{k}={v}" for k, v in p.env.items()) for p in used},
            "factor": FACTOR,
            "command": command,
        },
        "series": {
            name: {"spread": s.spread, "abs": max(FACTOR * s.spread, DEFAULT_ABS), **({"varies": True} if s.varies else {})}
            for name, s in sorted(cal.series.items())
        },
    }
    return rec


def calibrate(session: BookSession, only: list[str] | None, workers: int = 0,
              chosen: list[Perturbation] | None = None, log: Any = print, fresh: bool = False) -> list[SnippetCalibration]:
    found = session.discover()
    targets = list(found) if not only else only
    unknown = [s for s in targets if s not in found]
    if unknown:
        raise KeyError(f"unknown snippet(s): {', '.join(unknown)}")
    requires = {sid: snip.requires() for sid, snip in found.items()}
    run_ids = sorted(closure(set(targets), requires))
    used = chosen or perturbations()
    runs = {}
    for p in used:
        log(f"calibrate: {p.name} ({p.description}): running {len(run_ids)} snippet(s) …")
        runs[p.name] = run_perturbed(session.project_root, run_ids, p, workers, fresh)
    command = "python -m transformer_book calibrate" + ("" if not only else " " + " ".join(only))
    out = []
    for sid in targets:
        record = records.load(found[sid].record_path)
        if record is None:
            raise SystemExit(f"{sid} has no record yet: build or accept it first, then calibrate")
        cal = measure(record, runs, sid)
        if not cal.errors:
            records.save(found[sid].record_path, write(record, cal, used, command))
        out.append(cal)
    return out


def summary(cals: list[SnippetCalibration]) -> str:
    lines = ["snippet | trained series | largest relative spread (series) | exact moved | claims flipped"]
    for c in cals:
        big = c.largest()
        spread = "—" if big is None else ("varies" if big[1].varies else f"{big[1].rel:.2e}") + (f" ({big[0]})" if big else "")
        lines.append(f"{c.snippet} | {len(c.series)} | {spread} | {len(c.exact_moved)} | {len(c.flipped_claims)}")
    for c in cals:
        for text in c.errors:
            lines.append(f"ERROR {c.snippet}: {text}")
        for text in c.exact_moved[:10]:
            lines.append(f"EXACT VALUE MOVED {c.snippet}: {text}  (declare it kind='trained', or find the race)")
        for text in c.flipped_claims:
            lines.append(f"CLAIM FLIPPED {c.snippet}: {text}  (the sentence depends on noise: rephrase it)")
    return "\n".join(lines)
