"""The zygote: a preloaded interpreter on a Dask worker that forks one snippet process per request.

A Dask worker is a daemon process and may not start ``multiprocessing`` children, so a cluster task used to
start a new interpreter for every snippet: ``import torch, numpy, matplotlib`` again, 2–3 s a snippet, which
made the whole book 1.28 × slower on a cluster of two single-thread workers than in the local pool of two
processes. The worker (:class:`.dask_worker.Zygote`) starts this process once with ``subprocess`` (which a daemon
may use); it imports what the local forkserver imports (:mod:`.preload`), then forks a process per snippet on
request: the snippet starts with its libraries loaded, as a local one does.

This file is the zygote's whole life: read a request line from stdin, fork, answer the child's pid, and write
each child's exit code (negative: the signal) to the status file its request named, whole or absent. The child
runs :func:`.worker.run_forked`. The zygote is single-threaded (fork is safe). Replaced by a new one (its stdin
closed), it lets the snippets it started finish, then ends; when its worker dies, it ends at once.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import sys
from pathlib import Path

from transformer_book.book.environment import HEAVY_MODULES
from transformer_book.book.files import atomic_write_text


def serve() -> None:
    importlib.import_module(f"{__package__}.preload")  # numpy, matplotlib; engine hashed (as the forkserver)
    for name in HEAVY_MODULES:  # torch: what the book's forkserver imports by default (its preload option)
        try:
            importlib.import_module(name)
        except ImportError:  # pragma: no cover - torch is a dependency of the book, not of the engine
            pass
    from transformer_book.book.execution.worker import run_forked

    status_of: dict[int, str] = {}
    worker = os.getppid()
    stdin = sys.stdin.buffer
    buffered = b""
    retired = False
    while not (retired and not status_of):
        if retired and os.getppid() != worker:
            break
        readable, _, _ = select.select([] if retired else [stdin.fileno()], [], [], 0.05)
        if readable:
            chunk = os.read(stdin.fileno(), 65536)
            if not chunk:
                if os.getppid() != worker:
                    break  # the worker is gone: so are its snippets
                retired = True  # replaced by a new zygote: finish what runs
                continue
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                request = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    run_forked(request)  # never returns
                status_of[pid] = str(request["status"])
                sys.stdout.write(f"{pid}\n")
                sys.stdout.flush()
        while status_of:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in status_of:  # the worker reads it: whole or absent
                atomic_write_text(Path(status_of.pop(pid)), str(os.waitstatus_to_exitcode(status)))
    os._exit(0)  # no interpreter teardown of torch (as :mod:`.forkserver_exit`)


if __name__ == "__main__":
    serve()
