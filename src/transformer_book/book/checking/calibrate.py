"""Calibrated tolerances: how far each trained number and each claim's margin move when the arithmetic is
done another way — estimated from an ensemble, and validated on runs the estimate was not fitted to.

``python -m transformer_book calibrate [snippet …]`` re-executes the snippets (with everything they
require) once per *perturbation*, each in a separate process and cache:

- three *platform paths*, each a stand-in for a kind of machine: ``threads-2-reversed`` (torch on 2 threads,
  another split of every parallel reduction, and the workers taking the snippets in the opposite order),
  ``aten-default`` (torch's own kernels without vector instructions: a CPU without AVX), ``blas-compatible`` (MKL's compatible
  path, OpenBLAS as a Haswell);
- ``jitter-1`` … ``jitter-N``: every training step nudges every parameter by one ulp up or down, with its own
  noise seed (``BOOK_JITTER``, :func:`.worker.install_jitter`). Another reduction order amounts to exactly
  that — an ulp of difference at every step, amplified by the same training dynamics — and unlike a named
  machine, the seeds are independent draws, so the ensemble *samples* the spread instead of naming it.

**The rule.** For a trained series, each run ``k`` moves it by ``d_k`` (the largest ``|new − recorded|`` over
the series' numbers). Its band is ``FACTOR × max_k d_k`` (at least the tight default). The band is kept only
if it generalises: for every ``k``, the band fitted to the *other* runs must cover run ``k`` (leave-one-out).
A series that fails that test — one run moved it far more than all the others, as a count or a threshold
crossing does (an accuracy that is exactly 1.0 in all runs but one) — cannot be banded: it is recorded
``check: claims`` and is not compared as a number; the claims made about it are. So is a series whose band
would be as wide as what it guards (:func:`too_wide`: at least its largest |value|, or over 0.5 for a series in
[0, 1]) — a check that cannot fail; its pages say that its numbers vary between machines. A series whose text
changes is ``check: varies``, likewise. Rounding residuals are never calibrated (kind ``rounding``). On the
arithmetic that made the record, the drift check compares trained numbers exactly (:func:`.drift.compare`):
the bands are for other machines.

**Claims.** Each atom of a claim's comparison (:mod:`.compare`) has a margin in every run. Calibration
records the recorded margin, its spread (largest move), the worst margin seen and in how many runs it held.
A claim is *robust* when every atom (as its ``all_of``/``any_of`` combine them) held in every run and its
margin is more than ``FACTOR ×`` its spread. A claim that is not robust fails the strict build, naming the
page:line of its sentence, unless the claim says how its sentence states the uncertainty (``uncertain=…``).

It also reports what calibration exists to find: exact numbers that moved (they are really trained, or the
code has a race), and claims that flip under a perturbation (the sentence depends on noise).
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

from transformer_book.book.checking import records
from transformer_book.book.environment import default_workers, machine
from transformer_book.book.results import (DEFAULT_ABS, DEFAULT_TOLERANCE, EXACT, NOT_COMPARED, TRAINED, Claim, Number, Tolerance,
                                           from_data, recorded_numbers, result_kind)
from transformer_book.book.discover import Snippet
from transformer_book.book.graph import closure

FACTOR = records.CALIBRATION_FACTOR
JITTER_RUNS = 5  # with the three platform paths: an ensemble of 8 runs


@dataclass(frozen=True)
class Perturbation:
    name: str
    description: str
    env: dict[str, str]


def native_isa() -> str:
    """The code path torch's own kernels take on this CPU ("AVX512", "AVX2", "DEFAULT" …; "" without torch)."""
    try:
        import torch

        return torch.backends.cpu.get_cpu_capability().upper()
    except Exception:  # noqa: BLE001 - without torch the variable is harmless
        return ""


def platform_paths() -> list[Perturbation]:
    # The ISA path is the farthest one: torch's kernels without any vector instruction (a CPU without AVX).
    # The paths between it and this CPU's own (AVX2 on an AVX-512 machine: an ordinary laptop) are left to the
    # test suite's held-out build, a machine calibration never saw, and the cheapest one to build on.
    return [
        Perturbation("threads-2-reversed", "torch 用 2 个线程，工作进程按相反的顺序领取片段",
                     {"BOOK_THREADS": "2", "BOOK_ORDER": "reverse"}),
        Perturbation("aten-default", "torch 自己的算子不用任何向量指令（没有 AVX 的 CPU）", {"ATEN_CPU_CAPABILITY": "default"}),
        Perturbation("blas-compatible", "MKL 走兼容路径、OpenBLAS 按 Haswell 运行（另一种 BLAS）",
                     {"MKL_CBWR": "COMPATIBLE", "OPENBLAS_CORETYPE": "Haswell"}),
    ]


def jitters(n: int = JITTER_RUNS) -> list[Perturbation]:
    return [Perturbation(f"jitter-{i}", f"训练的每一步把每个参数随机挪动一个 ulp（噪声种子 {i}）", {"BOOK_JITTER": str(i)})
            for i in range(1, n + 1)]


def perturbations(jitter: int = JITTER_RUNS) -> list[Perturbation]:
    """The ensemble calibration runs: the platform paths and ``jitter`` noise seeds (1 … jitter)."""
    return platform_paths() + jitters(jitter)


RULE = (f"band = {FACTOR:g} × the largest move from the record over the ensemble (at least {DEFAULT_ABS:g}); kept "
        "only if, for every run, the band fitted to the other runs covers it (leave-one-out), it is narrower "
        "than what it guards (below the largest |value|, and at most 0.5 for a series in [0, 1]), and the series "
        "is reproducible on another machine (not one seed of a seed family, not a discrete result that no run "
        "moved); otherwise the series is checked through its claims")


def too_wide(band: float, scale: float, low: float) -> bool:
    """A band that cannot fail: as wide as the largest |value| it guards, or wider than half the range of a
    series that lives in [0, 1] (a weight, a probability, an accuracy). Such a band is refused: the series is
    checked through its claims and the page says that its numbers vary between machines."""
    if scale > 0 and band >= scale:
        return True
    return 0.0 <= low and scale <= 1.0 and band > 0.5


def unbandable(name: str, spread: float, values: list[Any], anything_moved: bool) -> str:
    """Why a trained series that calibration could band is still not to be compared as a number on another
    machine ("" if it can be). Two kinds, both seen as false alarms on machines calibration never saw:

    - *one seed's training*: a series of a seed family (``…_seed2``) — on another CPU a training is another
      draw, and a laptop moved one seed's perplexity by twice the range of the four seeds; what is checked is
      what the seeds say together (their mean, the claims over them);
    - *a discrete result no perturbation moved*: a count, a proportion, a text, exactly the same in every run
      while the snippet's other trained numbers moved — eight runs say nothing about the next machine, where
      one test item or one sampled character flips it by a whole step (an accuracy of 1.0 became 0.99975)."""
    if records.family(name) != name:
        return "一个种子的一次训练：换一台机器就像换了一次抽样，核对的是几个种子合起来的结论（平均、说法）"
    if spread == 0.0 and anything_moved and values and (
            any(isinstance(v, str) for v in values)
            or all(_is_number(v) and float(v).is_integer() for v in values)
            or all(_is_number(v) and 0.0 <= float(v) <= 1.0 for v in values)):
        return ("离散的结果（计数、比例、文字）：几次扰动都没动它，却说明不了别的机器——一道题、一个字翻转，"
                "它就跳一格；只核对关于它的说法")
    return ""


def wide_reason(band: float, scale: float, low: float) -> str:
    within = "它的数都在 0 到 1 之间，带宽超过 0.5" if 0.0 <= low and scale <= 1.0 and band > 0.5 else \
        f"带宽不小于它守护的最大绝对值 {scale:.3g}"
    return f"带宽 {band:.3g} 核对不出任何改动（{within}）：这组数在机器之间会变，只核对关于它的说法"


@dataclass
class SeriesSpread:
    moves: dict[str, float] = field(default_factory=dict)  # run -> largest |new − recorded| in the series
    varies: bool = False  # a string or boolean changed in some run
    scale: float = 0.0  # largest |recorded| in the series (for the relative width)
    low: float = float("inf")  # smallest recorded value (a series in [0, 1] is a weight, probability or accuracy)
    values: list[Any] = field(default_factory=list)  # the recorded values
    name: str = ""
    anything_moved: bool = False  # whether any trained series of the snippet moved in some run (set by measure)

    @property
    def not_reproducible(self) -> str:
        return unbandable(self.name, self.spread, self.values, self.anything_moved)

    @property
    def wide(self) -> bool:
        return too_wide(self.band(), self.scale, self.low)

    @property
    def spread(self) -> float:
        return max(self.moves.values(), default=0.0)

    def band(self, without: str | None = None) -> float:
        others = [d for k, d in self.moves.items() if k != without]
        return max(FACTOR * max(others, default=0.0), DEFAULT_ABS)

    def uncovered(self) -> list[str]:
        """The runs that the band fitted to the other runs does not cover (leave-one-out)."""
        return [k for k, d in self.moves.items() if d > self.band(without=k)]

    @property
    def check(self) -> str:
        if self.varies:
            return "varies"
        return "claims" if self.uncovered() or self.wide or self.not_reproducible else "band"

    @property
    def rel(self) -> float:
        return self.band() / self.scale if self.scale else 0.0


@dataclass
class AtomSpread:
    margin: float | None  # recorded
    margins: dict[str, float | None] = field(default_factory=dict)  # run -> margin
    held: dict[str, bool] = field(default_factory=dict)

    @property
    def spread(self) -> float:
        if self.margin is None:
            return 0.0
        return max((abs(m - self.margin) for m in self.margins.values() if m is not None), default=0.0)

    @property
    def worst(self) -> float | None:
        values = [m for m in self.margins.values() if m is not None]
        return min(values) if values else self.margin

    @property
    def robust(self) -> bool:
        if not all(self.held.values()):
            return False
        if self.margin is None or self.spread == 0.0:
            return True
        return self.margin > FACTOR * self.spread

    @property
    def ratio(self) -> float:
        """Recorded margin ÷ its spread (inf where it does not move)."""
        if self.margin is None or self.spread == 0.0:
            return float("inf")
        return self.margin / self.spread


@dataclass
class ClaimSpread:
    claim: Claim
    atoms: dict[str, AtomSpread] = field(default_factory=dict)

    @property
    def robust(self) -> bool:
        return self.claim.check.decide({p: a.robust for p, a in self.atoms.items()})

    @property
    def ratio(self) -> float:
        return min((a.ratio for a in self.atoms.values()), default=float("inf"))


@dataclass
class SnippetCalibration:
    snippet: str
    runs: list[str] = field(default_factory=list)
    series: dict[str, SeriesSpread] = field(default_factory=dict)  # trained series only
    claims: dict[str, ClaimSpread] = field(default_factory=dict)
    exact_moved: list[str] = field(default_factory=list)  # "path under perturbation: old → new"
    flipped_claims: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def largest(self) -> tuple[str, SeriesSpread] | None:
        banded = {k: s for k, s in self.series.items() if s.check == "band"}
        if not banded:
            return None
        return max(banded.items(), key=lambda kv: kv[1].rel)

    def coverage(self) -> tuple[int, int]:
        """(covered, total) leave-one-out trials over every numeric trained series: a trial is one run held
        out, covered when the band fitted to the other runs contains its move. The banded series are the ones
        covered in every trial; the others are checked through their claims."""
        numeric = [s for s in self.series.values() if not s.varies]
        return (sum(len(s.moves) - len(s.uncovered()) for s in numeric), sum(len(s.moves) for s in numeric))

    def noisy_claims(self) -> list[str]:
        return [k for k, c in self.claims.items() if not c.robust]


def perturbed_workers(perturbation: Perturbation, workers: int = 0) -> int:
    """Worker processes for a perturbed run: with torch on n threads, one process per n cores. ``--workers`` is
    an upper bound, not a request to oversubscribe: ``--workers 2`` on two cores ran the two-thread run with two
    processes of two threads each, and its trainings took several times as long."""
    fitting = default_workers(int(perturbation.env.get("BOOK_THREADS", "1") or 1))
    return min(workers, fitting) if workers else fitting


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
    """The numbers calibration bands: those of every kind that has bands (a claim has none; its margin is
    measured instead)."""
    cls = result_kind(data.get("type", ""))
    return recorded_numbers(key, data) if cls is not None and cls.banded else {}


def _decided(rec: dict[str, Any]) -> bool:
    """A recorded verdict (a claim): calibration measures its margins, not a band."""
    return getattr(result_kind(rec.get("type", "")), "decided", False)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def measure(record: records.Record, runs: dict[str, dict[str, Any]], sid: str) -> SnippetCalibration:
    """Compare each perturbed run's results of ``sid`` with its record."""
    cal = SnippetCalibration(sid, runs=list(runs))
    recorded = records.results(record)
    for key, rec in recorded.items():  # every trained series and every claim gets a calibration
        if _decided(rec):
            try:
                claim = from_data(rec)
            except ValueError as exc:
                cal.errors.append(f"{key}: {exc}")
                continue
            cal.claims[key] = ClaimSpread(claim, {p: AtomSpread(a.margin) for p, a in claim.check.atoms()})
        else:
            for n in _numbers(key, rec).values():
                if n.kind == TRAINED:
                    s = cal.series.setdefault(n.series, SeriesSpread(name=n.series))
                    s.values.append(n.value)
                    if _is_number(n.value):
                        s.scale = max(s.scale, abs(float(n.value)))
                        s.low = min(s.low, float(n.value))
    for name, payload in runs.items():
        got = payload.get("results", {}).get(sid)
        if got is None:
            cal.errors.append(f"{name}: {payload.get('errors', {}).get(sid, 'no results')}")
            continue
        for s in cal.series.values():
            s.moves.setdefault(name, 0.0)
        for key, data in got.items():
            if _decided(data):
                claim = from_data(data)
                if not claim.holds:
                    cal.flipped_claims.append(f"{key} under {name}: «{claim.statement}» ({claim.describe_inputs()})")
                spread = cal.claims.get(key)
                if spread is None:
                    continue
                for path, atom in claim.check.atoms():
                    a = spread.atoms.get(path)
                    if a is not None:
                        a.margins[name] = atom.margin
                        a.held[name] = atom.holds
                continue
            rec = recorded.get(key)
            if rec is None:
                continue
            old = _numbers(key, rec)
            tolerance = Tolerance.from_record(data.get("tolerance")) if data.get("tolerance") else DEFAULT_TOLERANCE
            for path, new in _numbers(key, data).items():
                o = old.get(path)
                if o is None or new.kind in NOT_COMPARED:
                    continue
                if new.kind == TRAINED:
                    s = cal.series.setdefault(new.series, SeriesSpread(name=new.series))
                    if _is_number(new.value) and _is_number(o.value):
                        d = abs(float(new.value) - float(o.value))
                        s.moves[name] = max(s.moves.get(name, 0.0), d)
                    elif new.value != o.value:
                        s.varies = True
                elif new.kind == EXACT:
                    same = (new.value == o.value) if not (_is_number(new.value) and _is_number(o.value)) \
                        else tolerance.allows(float(o.value), float(new.value))
                    if not same:
                        cal.exact_moved.append(f"{path} under {name}: {o.value!r} → {new.value!r}")
    moved = any(s.spread > 0 for s in cal.series.values())
    for s in cal.series.values():
        s.anything_moved = moved
    return cal


def write(record: records.Record, cal: SnippetCalibration, used: list[Perturbation], command: str) -> records.Record:
    """The record with this calibration in it."""
    if not cal.series and not cal.claims:
        return record.with_calibration(None)
    covered, total = cal.coverage()
    return record.with_calibration(records.Calibration(
        provenance={
            "date": _dt.date.today().isoformat(),
            "machine": machine(),
            "runs": len(used),
            "perturbations": {p.name: " ".join(f"{k}={v}" for k, v in p.env.items()) for p in used},
            "rule": RULE,
            "factor": FACTOR,
            "command": command,
        },
        held_out={"banded_series": sum(1 for s in cal.series.values() if s.check == "band"),
                  "unbanded_series": sum(1 for s in cal.series.values() if s.check != "band"),
                  "covered": covered, "trials": total},
        series={name: _series_entry(s) for name, s in sorted(cal.series.items())},
        claims={key: _claim_entry(c) for key, c in cal.claims.items()},
    ))


def _series_entry(s: SeriesSpread) -> records.SeriesCalibration:
    why = None
    uncovered = s.uncovered()
    if s.wide and not s.varies:
        why = wide_reason(s.band(), s.scale, s.low)
    elif s.not_reproducible and not s.varies and not uncovered:
        why = s.not_reproducible
    elif uncovered and not s.varies:
        worst = max(uncovered, key=lambda k: s.moves[k])
        why = (f"留一法：不用 {worst} 拟合的带宽 {s.band(without=worst):.3g} 盖不住它的偏离 "
               f"{s.moves[worst]:.3g}——离散地跳变，只核对关于它的说法")
    return records.SeriesCalibration(s.spread, s.band(), s.check, why)


def _claim_entry(c: ClaimSpread) -> records.ClaimCalibration:
    atoms = {path or "·": records.AtomCalibration(a.margin, a.spread, a.worst, f"{sum(a.held.values())}/{len(a.held)}")
             for path, a in c.atoms.items()}
    return records.ClaimCalibration(c.robust, atoms)


def calibrate(project_root: Path, found: dict[str, Snippet], only: list[str] | None, workers: int = 0,
              chosen: list[Perturbation] | None = None, log: Any = print, fresh: bool = False) -> list[SnippetCalibration]:
    """Rerun ``only`` (default: every snippet of ``found``) and what they require under each perturbation, and
    write each record's calibration; returns what was measured per snippet."""
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
        runs[p.name] = run_perturbed(project_root, run_ids, p, workers, fresh)
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
    """Per snippet: runs, the rule's outcome (banded series and leave-one-out coverage), the widest band
    relative to its value, and the smallest claim margin ÷ its spread."""
    lines = ["snippet | runs | trained series banded / checked by claims | leave-one-out coverage | "
             "widest band ÷ value (series) | smallest claim margin ÷ spread (claim) | noisy claims | exact moved | claims flipped"]
    for c in cals:
        banded = sum(1 for s in c.series.values() if s.check == "band")
        covered, total = c.coverage()
        big = c.largest()
        widest = "—" if big is None else f"{big[1].rel:.2e} ({big[0]})"
        ratios = [(cs.ratio, k) for k, cs in c.claims.items()]
        low = min(ratios, default=None)
        smallest = "—" if low is None else ("∞" if low[0] == float("inf") else f"{low[0]:.3g}") + f" ({low[1]})"
        cov = f"{covered}/{total}" if total else "—"
        lines.append(f"{c.snippet} | {len(c.runs)} | {banded} / {len(c.series) - banded} | {cov} | {widest} | "
                     f"{smallest} | {len(c.noisy_claims())} | {len(c.exact_moved)} | {len(c.flipped_claims)}")
    for c in cals:
        for text in c.errors:
            lines.append(f"ERROR {c.snippet}: {text}")
        for text in c.exact_moved[:10]:
            lines.append(f"EXACT VALUE MOVED {c.snippet}: {text}  (declare it kind='trained' or 'rounding', or find the race)")
        for text in c.flipped_claims:
            lines.append(f"CLAIM FLIPPED {c.snippet}: {text}  (the sentence depends on noise: rephrase it)")
        for key in c.noisy_claims():
            cs = c.claims[key]
            if cs.claim.uncertain:
                continue
            worst = min(cs.atoms.items(), key=lambda kv: kv[1].ratio)
            lines.append(f"NOISY CLAIM {c.snippet}:{key}: margin {worst[1].margin} vs spread {worst[1].spread:.3g} "
                         f"(held {sum(worst[1].held.values())}/{len(worst[1].held)}): state the uncertainty or "
                         "compare something robust")
        for name, s in c.series.items():
            if s.check == "claims":
                lines.append(f"UNBANDED {c.snippet}: {name}: {_series_entry(s).why or ''}")
    return "\n".join(lines)
