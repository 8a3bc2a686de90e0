"""The book engine: a MkDocs plugin that runs snippets and places their results in pages.

Modules, one job each:

- ``results``     – what a snippet returns (``Table``, ``Figure``, ``Value``, ``Claim``, ``Block``, ``Artifact``)
                    and the four kinds of number (exact, trained, measured, rounding);
- ``compare``     – the comparisons that decide a claim (``greater``, ``below``, ``all_of`` …), with margins;
- ``discover``    – finding snippets and notebook pages;
- ``environment`` – versions, platform and numerical settings: cache keys and provenance;
- ``artifacts``   – handing data (trained weights …) from one snippet to another, never as pickles;
- ``notebook``    – notebook pages executed as snippets (``record()`` and ``claim()``);
- ``worker``      – running one snippet in a fresh process with fixed seeds and threads;
- ``pool``        – the worker processes (a forkserver with the heavy libraries loaded);
- ``lifetime``    – a snippet process ends when the build (or worker) it works for ends;
- ``cache``       – content-addressed, checksummed, data-only cache entries;
- ``store``       – where the cache keeps its files: a local folder or a shared fsspec URL (``s3://…``);
- ``dask_executor`` – snippets on a Dask cluster; ``identity`` – what a worker must share with the build;
  ``fresh_process`` – one snippet in a new interpreter (for cluster workers);
- ``files``       – atomic writes with ordinary permissions; file hashing;
- ``records``     – committed records beside the snippets;
- ``drift``       – the check of fresh results against records, by kind;
- ``calibrate``   – tolerances for trained values, measured under perturbations;
- ``pages``       – the page syntax: finding references;
- ``render``      – results into Markdown; ``origin`` – where each shown result comes from (its popover);
- ``page_notebook`` – a runnable notebook for every page; ``in_jupyter`` – what those notebooks call;
- ``report``      – what the build says: drift, errors, record problems, timing;
- ``session``     – one build: scheduling, cache, execution, checks;
- ``project``     – the project's root and the one way to open a session on it;
- ``config``      – the plugin's options and the Markdown extensions it needs;
- ``plugin``      – the MkDocs events;
- ``fix_notebook_html``, ``fix_search``, ``mathjax``, ``webfont`` – fixes and additions to the built site;
- ``show``, ``cli`` – the terminal.

The engine knows nothing about Transformers, and imports nothing from the rest of ``transformer_book``.
"""

from .artifacts import artifact
from .notebook import claim, record
from .compare import (above, all_of, any_of, at_least, at_most, below, between, decreasing, equal, greater,
                      increasing, largest, less, non_decreasing, smallest, true)
from .results import EXACT, MEASURED, ROUNDING, TRAINED, Artifact, Block, Claim, Figure, Table, Tolerance, Value

__all__ = ["EXACT", "MEASURED", "ROUNDING", "TRAINED", "Artifact", "Block", "Claim", "Figure", "Table", "Tolerance",
           "Value", "artifact", "claim", "record",
           # comparisons that decide a claim (compare.py)
           "above", "all_of", "any_of", "at_least", "at_most", "below", "between", "decreasing", "equal", "greater",
           "increasing", "largest", "less", "non_decreasing", "smallest", "true"]
