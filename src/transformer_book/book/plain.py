"""Plain Python values from numpy and torch scalars: what a record (JSON) and a comparison can hold."""

from __future__ import annotations

from typing import Any


def plain(x: Any) -> Any:
    """Turn numpy / torch scalars into plain Python values (records are JSON)."""
    if x is None or type(x) in (bool, int, float, str):
        return x
    for kind in (bool, int, float, str):  # subclasses such as numpy.float64 become the plain type
        if isinstance(x, kind):
            return kind(x)
    item = getattr(x, "item", None)
    if callable(item):
        try:
            return plain(item())
        except (TypeError, ValueError):
            pass
    if isinstance(x, (list, tuple)):
        return [plain(v) for v in x]
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    raise TypeError(f"cannot record a value of type {type(x).__name__}: {x!r}")
