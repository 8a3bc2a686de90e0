"""Objects handed from one snippet to another (``REQUIRES`` + :func:`artifact`).

Training a model once and reading it in several snippets keeps each snippet small and the build fast:
the producer's results, artifacts included, are cached like any other; a consumer's cache key includes
the fingerprint of every snippet it requires, so retraining invalidates exactly its consumers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Filled in by the engine in the worker process: required snippet id -> its cache entry file.
_PATHS: dict[str, str] = {}


def artifact(snippet: str, name: str) -> Any:
    """The object that snippet ``snippet`` returned as ``name: Artifact(...)``.

    The calling snippet must list ``snippet`` in its module-level ``REQUIRES``.
    """
    from .cache import Cache
    from .results import Artifact

    path = _PATHS.get(snippet)
    if path is None:
        raise LookupError(f"artifact({snippet!r}, …): add REQUIRES = [{snippet!r}] at the top of the snippet")
    entry = Cache._decode(Path(path).read_bytes())
    if entry is None:
        raise RuntimeError(f"the cached results of {snippet} are unreadable; rebuild")
    result = entry.payload["results"].get(name)
    if not isinstance(result, Artifact):
        raise KeyError(f"snippet {snippet!r} has no artifact {name!r}")
    return result.load()
