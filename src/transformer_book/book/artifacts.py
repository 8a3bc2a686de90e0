"""Objects handed from one snippet to another (``REQUIRES`` + :func:`artifact`), stored as data only.

Training a model once and reading it in several snippets keeps each snippet small and the build fast:
the producer's artifacts are cached with its results; a consumer's cache key includes the fingerprint of
every snippet it requires, so retraining invalidates exactly its consumers.

An artifact is stored in a format that cannot run code when it is read — a cache may be shared between
machines, and whoever can write one entry must not be able to run code on every machine that builds the
book: JSON when the value is plain JSON data, otherwise ``torch.save`` read back with
``torch.load(weights_only=True)`` (tensors, numbers, strings, lists, tuples and dicts of them).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

JSON_MAGIC = b"TBJSON1\n"
TORCH_MAGIC = b"TBTORCH1"

# Set by the worker before a snippet runs: required snippet id -> {artifact name -> blob file}.
_PROVIDED: dict[str, dict[str, str]] = {}


def _is_json_data(v: Any) -> bool:
    if v is None or type(v) in (bool, int, str):
        return True
    if type(v) is float:
        return v == v and v not in (float("inf"), float("-inf"))
    if type(v) is list:
        return all(_is_json_data(x) for x in v)
    if type(v) is dict:
        return all(type(k) is str and _is_json_data(x) for k, x in v.items())
    return False


def encode(value: Any) -> bytes:
    """The bytes of an artifact value; raises TypeError for anything that is not plain data."""
    if _is_json_data(value):
        return JSON_MAGIC + json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency of the book, not of the engine
        raise TypeError("an artifact that is not JSON data needs torch to be stored") from None
    buf = io.BytesIO()
    torch.save(value, buf)
    blob = buf.getvalue()
    try:
        torch.load(io.BytesIO(blob), weights_only=True)
    except Exception as exc:  # noqa: BLE001 - the message names what to change
        raise TypeError(
            "an artifact must be data (tensors, numbers, strings, and lists, tuples and dicts of them) so that "
            f"reading it cannot run code; {type(value).__name__} is not: {exc}"
        ) from None
    return TORCH_MAGIC + blob


def is_known_format(blob: bytes) -> bool:
    """Whether this engine knows the blob's format (another version of the engine may write others)."""
    return blob.startswith((JSON_MAGIC, TORCH_MAGIC))


def decode(blob: bytes) -> Any:
    """The value of :func:`encode`'s bytes, without ever unpickling arbitrary objects."""
    if blob.startswith(JSON_MAGIC):
        return json.loads(blob[len(JSON_MAGIC):].decode("utf-8"))
    if blob.startswith(TORCH_MAGIC):
        import torch

        return torch.load(io.BytesIO(blob[len(TORCH_MAGIC):]), weights_only=True)
    raise ValueError("not an artifact blob")


def provide(mapping: dict[str, dict[str, str]]) -> None:
    """Called by the worker: which blob files hold the artifacts of the snippets this one requires."""
    _PROVIDED.clear()
    _PROVIDED.update(mapping)


def provided(snippet: str, name: str) -> Any:
    """The artifact ``name`` of ``snippet`` when the build provides it, else None.

    For a notebook page that readers also run by themselves in Jupyter: in the build (which lists ``snippet``
    under ``"requires"`` in the notebook's ``"book"`` metadata) it takes what that snippet already computed;
    in a reader's Jupyter nothing is provided, and the notebook computes it itself."""
    files = _PROVIDED.get(snippet)
    if files is None or name not in files:
        return None
    return decode(Path(files[name]).read_bytes())


def artifact(snippet: str, name: str) -> Any:
    """The object that snippet ``snippet`` returned as ``name: Artifact(...)``.

    The calling snippet must list ``snippet`` in its module-level ``REQUIRES``.
    """
    files = _PROVIDED.get(snippet)
    if files is None:
        raise LookupError(f"artifact({snippet!r}, …): add REQUIRES = [{snippet!r}] at the top of the snippet")
    if name not in files:
        raise KeyError(f"snippet {snippet!r} has no artifact {name!r} (it has: {', '.join(files) or 'none'})")
    return decode(Path(files[name]).read_bytes())
