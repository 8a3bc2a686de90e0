"""The book engine: a MkDocs plugin that runs snippets and places their results in pages.

Modules, one job each:

- ``results``  – what a snippet returns (``Table``, ``Figure``, ``Value``, ``Tolerance``);
- ``discover`` – finding snippets and the part of the cache key known before running;
- ``artifacts`` – handing objects (trained models) from one snippet to another;
- ``notebook`` – notebook pages executed as snippets (``record()`` names the numbers they show);
- ``execute``  – running snippets in fresh worker processes with fixed seeds and threads;
- ``cache``    – content-addressed, atomic, checksummed cache entries;
- ``records``  – committed records beside the snippets, and the drift check against them;
- ``pages``    – the page syntax: finding references and rendering them;
- ``report``   – the timing table and the drift report;
- ``session``  – one build: which snippets to run, cache, execute, compare;
- ``plugin``   – the MkDocs glue.

The engine knows nothing about Transformers.
"""

from .artifacts import artifact
from .notebook import record
from .results import Artifact, Figure, Table, Tolerance, Value

__all__ = ["Artifact", "Figure", "Table", "Tolerance", "Value", "artifact", "record"]
