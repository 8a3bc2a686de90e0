"""Imported once by the forkserver, so that every snippet process starts with the heavy libraries loaded.

Thread counts are fixed here, before torch starts its thread pools: a snippet's numbers must not depend on
how many cores the machine has or how many snippets run side by side. The modules named by the plugin's
``preload`` option are imported after this one (:func:`.pool.configure`).
"""

import os

from transformer_book.book.environment import threads

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = str(threads())

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402,F401
import numpy  # noqa: E402,F401

try:
    import torch  # noqa: E402

    torch.set_num_threads(threads())
except ImportError:  # pragma: no cover - torch is a dependency of the book, not of the engine
    pass

from transformer_book.book.execution import worker  # noqa: E402

worker.snapshot_engine()  # the engine code every process forked from here runs, hashed before any file is saved
