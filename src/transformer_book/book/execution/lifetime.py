"""A snippet process ends when the process it works for ends.

A stopped build (Ctrl-C, a cancelled CI job, a restarted ``serve``) must not leave a training running for
minutes on cores nobody waits for. Local workers are forked by the forkserver, not by the build, and each
holds the forkserver's "alive" pipe open, so neither side notices on its own; a snippet forked by a Dask
worker's zygote (:mod:`.zygote`) has the same problem with the zygote. So every snippet
process watches the process it works for and kills itself when that one is gone.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time


def _wait_for_end(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
        select.select([fd], [], [])  # readable once the process has ended
        return
    except (AttributeError, OSError):  # no pidfd (not Linux ≥ 5.3), or it has ended already
        pass
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)


def end_with(pid: int) -> None:
    """From now on, this process is killed as soon as process ``pid`` ends (a daemon thread waits for it)."""

    def watch() -> None:
        _wait_for_end(pid)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name=f"end-with-{pid}", daemon=True).start()
