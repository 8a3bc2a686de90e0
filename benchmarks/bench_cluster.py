"""The whole book's snippets on this machine's local pool and on a Dask LocalCluster, in the same run.

    PYTHONPATH=src python benchmarks/bench_cluster.py             # local pool, then the cluster (2 × 1 thread)
    PYTHONPATH=src python benchmarks/bench_cluster.py --only 'lecture07/s11_*'

Each build starts from an empty cache in a temporary folder and executes every selected snippet (what a cold
build computes; MkDocs itself is not run). The cluster has as many single-thread workers as the local pool has
processes (``--workers``, default 2), started with Dask's defaults (a nanny per worker). Prints the wall time of
each, their ratio, and the snippets whose time differs most; asserts nothing. One round each: a round is
minutes long.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def build(cache: Path, workers: int, executor: str, select: tuple[str, ...]) -> tuple[float, dict[str, float]]:
    from transformer_book.book.session import BookSession
    from transformer_book.book.state import Options

    session = BookSession(ROOT, ROOT / "snippets", cache, cache / "report", ROOT / "docs")
    start = time.perf_counter()
    state = session.build(Options(fresh=True, workers=workers, executor=executor, select=select,
                                  write_missing_records=False))
    wall = time.perf_counter() - start
    failed = {sid: st.error.message for sid, st in state.snippets.items() if st.error is not None}
    if failed:
        raise SystemExit(f"{executor}: snippets failed: {failed}")
    return wall, {sid: st.seconds for sid, st in state.snippets.items() if st.status == "ran"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", action="append", default=[], help="glob of snippet ids (repeatable)")
    args = parser.parse_args()
    from distributed import LocalCluster

    select = tuple(args.only)
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        local_wall, local = build(Path(tmp) / "local", args.workers, "local", select)
        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None) as lc:
            address = lc.scheduler_address.replace("tcp://", "dask://")
            cluster_wall, remote = build(Path(tmp) / "cluster", args.workers, address, select)
    print(f"{len(local)} snippets, {args.workers} workers")
    print(f"  local pool       {local_wall:7.1f} s wall   {sum(local.values()):7.1f} s of snippet time")
    print(f"  Dask LocalCluster {cluster_wall:6.1f} s wall   {sum(remote.values()):7.1f} s of snippet time")
    print(f"  cluster ÷ local  {cluster_wall / local_wall:5.2f} × (wall)")
    rows = sorted(local, key=lambda s: -local[s])[:8]
    print("  longest snippets: local s → cluster s (ratio)")
    for sid in rows:
        print(f"    {sid:40s} {local[sid]:6.1f} → {remote.get(sid, float('nan')):6.1f}  ({remote.get(sid, 0) / local[sid]:.2f} ×)")


if __name__ == "__main__":
    main()
