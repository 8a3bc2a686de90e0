"""Imported last by the forkserver: when the build is over, the forkserver leaves at once.

The forkserver has torch, numpy and matplotlib loaded, and tearing them down at interpreter exit took about
a second, during which it still held the build's stdout: ``mkdocs build | tee log`` (CI) and any caller that
reads the build's output waited that second after "Documentation built". It owns no files and no shared
resources, so it flushes its streams and exits without the teardown. The snippet processes it forks never
run this handler (multiprocessing ends them with ``os._exit``), nor does any other process.
"""

import atexit
import os
import sys


def _leave_now() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a closed stream has nothing to flush
            pass
    os._exit(0)


atexit.register(_leave_now)  # registered last, so it runs first
