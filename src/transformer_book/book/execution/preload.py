"""Imported once by the forkserver, so that every snippet process starts with the heavy libraries loaded.

Thread counts are fixed here, before torch starts its thread pools (the variables torch reads when it starts
them): a snippet's numbers must not depend on how many cores the machine has or how many snippets run side by
side. numpy and matplotlib are imported here; the modules named by the plugin's ``preload`` option after this
one (:func:`.pool.configure`; by default :data:`..environment.HEAVY_MODULES`, torch and what a first optimiser
step imports). A book whose snippets never touch torch sets ``preload: []``: every build starts about 2 s sooner.
"""

import os

from transformer_book.book.environment import threads

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ[_var] = str(threads())

import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot  # noqa: E402,F401
import numpy  # noqa: E402,F401

from transformer_book.book.execution import worker  # noqa: E402

worker.snapshot_engine()  # the engine code every process forked from here runs, hashed before any file is saved
