"""Printing a snippet's results in a terminal (``python -m transformer_book run <snippet>``): each result kind
says how it prints (:meth:`~transformer_book.book.results.Result.terminal`)."""

from __future__ import annotations

from typing import Any


def show(results: dict[str, Any]) -> None:
    for key, r in results.items():
        if r.recorded:
            print(r.terminal(key))
    print()
