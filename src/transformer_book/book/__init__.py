"""The book engine: a MkDocs plugin that runs snippets and places their results in pages.

This module is what snippets import (``Table``, ``Figure``, ``Value``, ``Claim``, ``Artifact``, ``artifact``,
the comparisons, and ``record``/``claim`` for notebook pages). The engine is laid out by job:

- top level – what every room shares: ``results`` (what a snippet returns, the four kinds of number),
  ``compare`` (the comparisons that decide a claim, with margins), ``plain`` (numpy/torch scalars → JSON
  values), ``artifacts`` (data handed between snippets, never pickles), ``types`` (``Task``, ``Outcome``,
  ``SnippetError``: what goes to an executor and comes back), ``discover`` (finding snippets and what they
  declare), ``graph`` (the REQUIRES graph), ``environment`` (versions and numerical settings: cache keys and
  provenance), ``files`` (atomic writes, hashing), ``memo`` (every remembered computation, by key and version),
  ``html_edit`` (editing HTML by its parse: the site fixes, the print edition, the API pages' back-links),
  ``static_imports`` (which libraries the snippets reach, read from their source),
  ``state`` (a build's options and what it found), and ``session`` (one build: plan, cache, execute, check);
- ``execution/`` – running snippets, one process per file: ``worker`` (the snippet process: fixed seeds and
  threads, the exact bytes it ran), ``pool`` (the build's local executor and its forkserver), ``dask_executor``
  (the build's cluster executor), ``dask_worker`` (a task on a Dask worker), ``zygote`` (the worker's preloaded
  forking process), ``identity`` (a worker like the build machine), ``lifetime``, ``notebook`` (notebook pages
  as snippets), ``preload``/``forkserver_exit``;
- ``storage/`` – keeping results: ``cache`` (content-addressed entries and blobs), ``store`` (a folder or an
  fsspec URL);
- ``checking/`` – ``records`` (committed beside each snippet), ``drift`` (fresh against recorded, by kind),
  ``calibrate`` (tolerances from an ensemble of perturbations, validated held out), ``drift_page`` (the drift
  report);
- ``rendering/`` – ``pages`` (the page syntax), ``render`` (results into Markdown), ``origin`` (where a shown
  result comes from), ``page_notebook`` (a runnable notebook per page), ``claim_index`` (every claim beside its
  sentence);
- ``site/`` – MkDocs: ``plugin`` (event wiring), ``config`` (options, and the one place a session is opened),
  ``report`` (what the terminal says), ``background`` (the build behind ``serve``), ``dirty_pages``, and the
  site fixes ``fix_search``, ``fix_notebook_html``, ``mathjax``, ``webfont``, ``print_edition``;
- ``cli/`` – ``main`` (``python -m transformer_book``), ``show``, ``project``, ``in_jupyter``.

Rooms import downwards only (``tests/test_layout.py`` fails on any import cycle between modules or rooms).
The data flow of one build is in the authors' guide (``docs/authoring.md``, “引擎的结构”). The engine knows
nothing about Transformers, and imports nothing from the rest of ``transformer_book``.
"""

from transformer_book.book.artifacts import artifact, provided
from transformer_book.book.execution.notebook import claim, record
from transformer_book.book.compare import (above, all_of, any_of, at_least, at_most, below, between, decreasing, equal, greater,
                      every_seed, increasing, largest, less, non_decreasing, smallest, true)
from transformer_book.book.results import (EXACT, MEASURED, ROUNDING, TRAINED, Artifact, Bars, Block, Claim, Control, Explorable,
                                          Figure, SiteFile, Table, Text, Tolerance, Value)

__all__ = ["EXACT", "MEASURED", "ROUNDING", "TRAINED", "Artifact", "Block", "Claim", "Figure", "SiteFile", "Table",
           "Tolerance", "Value", "artifact", "claim", "provided", "record",
           # an explorable: controls over states the snippet computed (results.py)
           "Bars", "Control", "Explorable", "Text",
           # comparisons that decide a claim (compare.py)
           "above", "all_of", "any_of", "at_least", "at_most", "below", "between", "decreasing", "equal", "greater",
           "every_seed", "increasing", "largest", "less", "non_decreasing", "smallest", "true"]
