"""The environment a result depends on: library versions, platform, and the numerical settings of a run.

The same dictionary enters every cache key (so a result computed under other settings is never reused),
every record's provenance, and — for distributed builds — the check that a worker matches the build.

Numerical settings are what the calibration perturbs (:mod:`.calibrate`): the torch thread count of each
snippet (``BOOK_THREADS``, default 1), the order in which workers take snippets (``BOOK_ORDER``), one-ulp
noise in every training step (``BOOK_JITTER``, a noise seed), and the
variables that choose other code paths of the same libraries — ``ATEN_CPU_CAPABILITY`` (torch's own
kernels), ``MKL_CBWR`` (MKL's matrix products), ``OPENBLAS_CORETYPE`` (numpy's BLAS).
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
from functools import lru_cache
from pathlib import Path

# The engine's code is in every entry's dependencies (the worker hashes the engine modules it ran), so an
# edit to results.py or finalize_figure reruns what it shapes without this number. It names the engine in a
# record's provenance; bump it only when what a *record* means changes.
ENGINE_VERSION = "3"  # 3: claims are comparisons with margins; the rounding kind

# Libraries whose version can change a snippet's numbers or figures.
VERSIONED_PACKAGES = ("torch", "numpy", "matplotlib")

# Environment variables that change floating-point code paths, and so may change trained numbers.
# What the worker forkserver imports besides numpy and matplotlib unless the book's ``preload`` option says
# otherwise: torch, and what a first optimiser step imports (torch._dynamo, ~1 s a process otherwise).
HEAVY_MODULES = ("torch", "torch.optim", "torch._dynamo")

NUMERICAL_VARIABLES = ("BOOK_THREADS", "BOOK_JITTER", "ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS",
                       "OPENBLAS_CORETYPE")

SEED = 0


def threads() -> int:
    """Torch threads per snippet: 1, so that a result does not depend on how many cores the machine has."""
    try:
        return max(1, int(os.environ.get("BOOK_THREADS", "1")))
    except ValueError:
        raise SystemExit(f"BOOK_THREADS must be a whole number, not {os.environ['BOOK_THREADS']!r}") from None


def jitter_seed() -> int | None:
    """``BOOK_JITTER=<seed>``: a calibration run whose trainings are nudged by one ulp per step (see
    :func:`.worker.install_jitter`); None in an ordinary build."""
    value = os.environ.get("BOOK_JITTER", "")
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise SystemExit(f"BOOK_JITTER must be a whole number (a noise seed), not {value!r}") from None


def default_workers(threads_per_snippet: int | None = None) -> int:
    """Snippet processes side by side on this machine: one per ``threads_per_snippet`` cores (default
    :func:`threads`). More would oversubscribe the cores, and OpenMP threads that wait for each other on a
    shared core slow a training many times over (a whole-book build on 2 threads took over 20 minutes with
    two processes on 2 cores)."""
    return max(1, (os.cpu_count() or 1) // (threads_per_snippet or threads()))


def numerical_settings() -> dict[str, str]:
    """The settings of this run that differ from the defaults (empty for an ordinary build)."""
    out = {}
    for name in NUMERICAL_VARIABLES:
        value = os.environ.get(name, "")
        if value and not (name == "BOOK_THREADS" and value == "1"):
            out[name] = value
    return out


@lru_cache(maxsize=1)
def versions() -> dict[str, str]:
    env = {
        "engine": ENGINE_VERSION,
        "python": platform.python_version(),
        "platform": f"{platform.system()}-{platform.machine()}",
    }
    for name in VERSIONED_PACKAGES:
        try:
            env[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            env[name] = "absent"
    return env


def fingerprint() -> dict[str, str]:
    """What a cache key hashes besides the snippet's own sources: versions plus numerical settings."""
    return {**versions(), **{f"setting:{k}": v for k, v in numerical_settings().items()}}


@lru_cache(maxsize=1)
def arithmetic() -> str:
    """Which arithmetic this process does, as a short hash: the CPU (model and instruction-set flags, which
    choose torch's and the BLAS's code paths, and the core count, which sets a thread pool's default size), the
    platform, the library versions and the numerical settings.
    Two runs with the same arithmetic give bit-identical results (fixed seeds and threads): a trained number
    recorded under this arithmetic is checked exactly here, and within its calibrated band anywhere else
    (:func:`.checking.drift.compare`)."""
    import hashlib

    model, flags = "", ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            low = line.lower()
            if not model and low.startswith("model name"):
                model = line.split(":", 1)[1].strip()
            elif not flags and (low.startswith("flags") or low.startswith("features")):
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
    except OSError:
        pass
    parts = [model or platform.processor(), flags, f"cores={os.cpu_count()}", platform.platform(terse=True), platform.machine(),
             *(f"{k}={v}" for k, v in sorted(fingerprint().items()))]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


@lru_cache(maxsize=1)
def machine() -> str:
    """The build machine in a few words, for measured values: ``AMD EPYC，2 核，Linux-x86_64``."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    model = model or platform.processor() or platform.machine() or "未知 CPU"
    cores = os.cpu_count() or 1
    return f"{model}，{cores} 核，{platform.system()}-{platform.machine()}"


def measured_here() -> str:
    """Where and when a result is measured, as pages label it: ``AMD EPYC，2 核，Linux-x86_64，2026-12-03``."""
    import datetime

    return f"{machine()}，{datetime.date.today().isoformat()}"
