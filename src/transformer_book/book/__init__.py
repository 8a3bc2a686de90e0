"""The book engine: a MkDocs plugin that runs snippets and places their results in pages.

Modules, one job each:

- ``results``  – what a snippet returns (``Table``, ``Figure``, ``Value``, ``Tolerance``);
- ``discover`` – finding snippets and the part of the cache key known before running;
- ``execute``  – running snippets in fresh worker processes with fixed seeds and threads;
- ``cache``    – content-addressed, atomic, checksummed cache entries;
- ``records``  – committed records beside the snippets, and the drift check against them;
- ``pages``    – the page syntax: finding references and rendering them;
- ``report``   – the timing table and the drift report;
- ``session``  – one build: which snippets to run, cache, execute, compare;
- ``plugin``   – the MkDocs glue.

The engine knows nothing about Transformers.
"""

from .results import Figure, Table, Tolerance, Value

__all__ = ["Figure", "Table", "Tolerance", "Value"]
