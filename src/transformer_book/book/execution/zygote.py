"""A preloaded interpreter on a Dask worker that forks one process per snippet, as the local forkserver does.

A Dask worker is a daemon process and may not start ``multiprocessing`` children, so a cluster task used to
start a new interpreter for every snippet: ``import torch, numpy, matplotlib`` again, 2–3 s a snippet, which
made the whole book 1.28 × slower on a cluster of two single-thread workers than in the local pool of two
processes. The zygote is started once per worker with ``subprocess`` (which a daemon may use), imports what
the forkserver imports (:mod:`.preload`), and then forks a process per snippet on request: the snippet starts
with its libraries loaded, as a local one does.

Protocol, on the zygote's stdin/stdout (one line each way per snippet): the worker writes the JSON of
``{"args": [task file, outcome file, deadline file], "log": file, "status": file}``; the zygote forks, answers
the child's pid, and when the child ends writes its exit code (negative: the signal) to ``status``. The child
runs :func:`.fresh_process.main` in a session of its own (``killpg`` reaches it alone), with its output in
``log``. The zygote is single-threaded (fork is safe). It is replaced when the build's numerical settings or
any engine source file differ from its start; the old one lets the snippets it started finish, then ends. When
its worker dies, it ends at once, and its snippets with it (:func:`.lifetime.end_with`).
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from transformer_book.book.environment import NUMERICAL_VARIABLES
from transformer_book.book.files import ENGINE_DIR, atomic_write_text

# Set by Dask's nanny in every worker (``distributed.nanny.pre-spawn-environ``) so that the worker gives freed
# memory back to the system: glibc then trims its heap above 64 KiB on every free. A training allocates and
# frees tensors of that size at every step, so a snippet that inherited it ran each step about 1.35 × slower.
# A snippet process gets the allocator a local one has.
NOT_INHERITED = ("MALLOC_TRIM_THRESHOLD_",)


def _engine_state() -> tuple[tuple[str, int, int], ...]:
    """(file, mtime, size) of every engine source: a saved engine file means a new zygote."""
    out = []
    for p in sorted(ENGINE_DIR.rglob("*.py")):
        try:
            st = p.stat()
        except OSError:
            continue
        out.append((str(p), st.st_mtime_ns, st.st_size))
    return tuple(out)


LOST = -1_000  # the exit code of a snippet process whose zygote died before it could report it


class Child:
    """A snippet process forked by the zygote (not this process's child: its exit code comes as a file)."""

    def __init__(self, pid: int, status_file: Path, zygote: subprocess.Popen[bytes]) -> None:
        self.pid, self.status_file, self.zygote = pid, status_file, zygote

    def poll(self) -> int | None:
        """Its exit code (negative: killed by that signal; :data:`LOST`: ended with its zygote), or None while
        it runs."""
        try:
            return int(self.status_file.read_text(encoding="ascii"))
        except (OSError, ValueError):
            pass
        if self.zygote.poll() is None:
            return None
        # The zygote died (the snippet killed it, or it ran out of memory): the snippet ends with it, and is
        # reaped by whoever adopts it — a zombie no one reaps has ended too.
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return LOST
        return LOST if state in ("Z", "X") else None

    def wait(self, timeout: float, step: float = 0.02) -> int | None:
        end = time.monotonic() + timeout
        while (code := self.poll()) is None and time.monotonic() < end:
            time.sleep(step)
        return code


class Zygote:
    """The worker's side: starts the zygote when needed and asks it for snippet processes (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._errors: Any = None
        self._key: tuple[object, ...] = ()

    def fork(self, args: list[str], log_file: Path, status_file: Path, settings: dict[str, str]) -> Child:
        key = (tuple(sorted(settings.items())), _engine_state())
        request = json.dumps({"args": args, "log": str(log_file), "status": str(status_file)}) + "\n"
        with self._lock:
            for _ in (1, 2):  # a zygote that died (killed, out of memory) is started again, once
                if self._proc is None or self._proc.poll() is not None or key != self._key:
                    self._start(settings, key)
                assert self._proc is not None and self._proc.stdin is not None and self._proc.stdout is not None
                try:
                    self._proc.stdin.write(request.encode())
                    self._proc.stdin.flush()
                    answer = self._proc.stdout.readline()
                except (BrokenPipeError, OSError):
                    answer = b""
                if answer.strip().isdigit():
                    return Child(int(answer), status_file, self._proc)
                self._stop()
        raise RuntimeError("the worker's preloaded snippet starter (zygote) could not start a process: "
                           + (self._said() or "it ended without a word"))

    def _start(self, settings: dict[str, str], key: tuple[object, ...]) -> None:
        if self._proc is not None and self._proc.poll() is None and self._proc.stdin is not None:
            self._proc.stdin.close()  # retired: it lets the snippets it started finish, then ends
        self._proc = None
        if self._errors is not None:
            self._errors.close()
        env = {k: v for k, v in os.environ.items() if k not in NUMERICAL_VARIABLES and k not in NOT_INHERITED}
        env.update(settings)
        self._errors = tempfile.TemporaryFile()  # what it says if it cannot start (an import that fails)
        self._proc = subprocess.Popen([sys.executable, "-m", __name__], env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=self._errors, start_new_session=True)
        self._key = key

    def _said(self) -> str:
        if self._errors is None:
            return ""
        self._errors.seek(0)
        return self._errors.read().decode(errors="replace").strip()[-2000:]

    def _stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()  # its snippet processes end with it (:func:`.lifetime.end_with`)
            self._proc.wait()
        self._proc = None


ZYGOTE = Zygote()  # one per worker process


# -- the zygote process ----------------------------------------------------------------------------------------

def _child(request: dict[str, object]) -> None:
    """In the forked process: a session of its own, output to the log, then the snippet. Never returns."""
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        from transformer_book.book.execution.fresh_process import main

        main(*[str(a) for a in request["args"]])  # type: ignore[union-attr]
        code = 0
    except BaseException:  # noqa: BLE001 - shown in the log the worker reads when no outcome came back
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def _write_status(path: str, code: int) -> None:
    atomic_write_text(Path(path), str(code))  # the worker reads it: whole or absent


def serve() -> None:
    import importlib

    importlib.import_module(f"{__package__}.preload")  # torch, numpy, matplotlib; engine hashed (as the forkserver)
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
                    _child(request)
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
            if pid in status_of:
                _write_status(status_of.pop(pid), os.waitstatus_to_exitcode(status))
    os._exit(0)  # no interpreter teardown of torch (as :mod:`.forkserver_exit`)


if __name__ == "__main__":
    serve()
