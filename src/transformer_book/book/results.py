"""What a snippet returns: tables, figures and values, with their formats and tolerances.

A snippet's ``compute()`` returns a dict ``{key: Table | Figure | Value}``. These classes are the whole
interface between a snippet and the book: the engine records every number they hold, compares it with the
committed record, and renders them into pages.

Every number is flattened to a *path* (``"lookup[1].输出"``, ``"max_weight"``, ``"figure.ax0.line1.y[3]"``)
so that a drift report can name exactly which cell changed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

# Default tolerance: tight. Same machine, same thread count and same seeds give bit-identical results;
# the slack only absorbs float printing and summation-order noise between library builds.
DEFAULT_REL = 1e-6
DEFAULT_ABS = 1e-9


@dataclass(frozen=True)
class Tolerance:
    """How far a recomputed number may move from its record before it counts as drift.

    ``|new - old| <= abs + rel * |old|``. Widening beyond the default needs a ``reason`` (it is written into
    the record file so that a reviewer sees why the value may move).
    """

    rel: float = DEFAULT_REL
    abs: float = DEFAULT_ABS
    reason: str = ""

    def __post_init__(self) -> None:
        if (self.rel > DEFAULT_REL or self.abs > DEFAULT_ABS) and not self.reason.strip():
            raise ValueError(
                f"Tolerance(rel={self.rel}, abs={self.abs}) is wider than the default "
                f"(rel={DEFAULT_REL}, abs={DEFAULT_ABS}); give a reason=…"
            )

    def allows(self, old: float, new: float) -> bool:
        if math.isnan(old) or math.isnan(new):
            return math.isnan(old) and math.isnan(new)
        if math.isinf(old) or math.isinf(new):
            return old == new
        return abs(new - old) <= self.abs + self.rel * abs(old)

    def as_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rel": self.rel, "abs": self.abs}
        if self.reason:
            out["reason"] = self.reason
        return out


def _plain(x: Any) -> Any:
    """Turn numpy / torch scalars into plain Python values (records are JSON)."""
    if x is None or type(x) in (bool, int, float, str):
        return x
    for kind in (bool, int, float, str):  # subclasses such as numpy.float64 become the plain type
        if isinstance(x, kind):
            return kind(x)
    item = getattr(x, "item", None)
    if callable(item):
        try:
            return _plain(item())
        except (TypeError, ValueError):
            pass
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    raise TypeError(f"cannot record a value of type {type(x).__name__}: {x!r}")


def format_number(value: Any, fmt: str | None) -> str:
    """Format one value with a format spec (``".3f"``, ``",d"``, ``".1%"``); strings pass through."""
    if isinstance(value, str) or fmt is None or fmt == "":
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return "—"
    text = format(value, fmt)
    # A true minus sign reads better in Chinese typesetting than a hyphen.
    return text.replace("-", "−") if text.startswith("-") else text


@dataclass
class Value:
    """One number (or short string / boolean) to be placed inline in a sentence.

    Parameters
    ----------
    value : number, str or bool
    fmt : str
        Default format spec used when the page does not give one, e.g. ``".3f"``.
    tolerance : Tolerance, optional
    """

    value: Any
    fmt: str = ""
    tolerance: Tolerance = field(default_factory=Tolerance)

    def __post_init__(self) -> None:
        self.value = _plain(self.value)

    def numbers(self, key: str) -> Iterator[tuple[str, Any]]:
        yield key, self.value

    def to_record(self) -> dict[str, Any]:
        return {"kind": "value", "value": self.value, "fmt": self.fmt}


@dataclass
class Table:
    """A table: column names, rows, and one number format per column (declared once).

    Parameters
    ----------
    columns : list of str
        Column headers (Markdown and ``$math$`` allowed).
    rows : list of list
        Cells: numbers or strings.
    formats : dict or list, optional
        ``{column: fmt}`` or one fmt per column; strings are shown as they are.
    caption : str, optional
        Default caption; a page may give its own.
    tolerance : Tolerance, optional
        Applies to every cell of the table.
    """

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    formats: dict[str, str] | Sequence[str] | None = None
    caption: str = ""
    tolerance: Tolerance = field(default_factory=Tolerance)

    def __post_init__(self) -> None:
        self.columns = [str(c) for c in self.columns]
        self.rows = [[_plain(v) for v in row] for row in self.rows]
        for i, row in enumerate(self.rows):
            if len(row) != len(self.columns):
                raise ValueError(f"table row {i} has {len(row)} cells, expected {len(self.columns)}")
        if self.formats is None:
            fmts = [""] * len(self.columns)
        elif isinstance(self.formats, dict):
            unknown = set(self.formats) - set(self.columns)
            if unknown:
                raise ValueError(f"formats name unknown columns: {sorted(unknown)}")
            fmts = [self.formats.get(c, "") for c in self.columns]
        else:
            fmts = list(self.formats)
            if len(fmts) != len(self.columns):
                raise ValueError("one format per column")
        self.formats = fmts

    def numbers(self, key: str) -> Iterator[tuple[str, Any]]:
        for i, row in enumerate(self.rows):
            for col, v in zip(self.columns, row):
                yield f"{key}[{i}].{col}", v

    def to_record(self) -> dict[str, Any]:
        return {"kind": "table", "columns": list(self.columns), "rows": self.rows}

    def to_markdown(self) -> str:
        def cell(v: Any, fmt: str) -> str:
            return format_number(v, fmt).replace("|", "\\|")

        head = "| " + " | ".join(self.columns) + " |"
        aligns = []
        for j in range(len(self.columns)):
            numeric = all(isinstance(r[j], (int, float)) and not isinstance(r[j], bool) for r in self.rows)
            aligns.append("---:" if numeric and self.rows else "---")
        sep = "| " + " | ".join(aligns) + " |"
        body = ["| " + " | ".join(cell(v, f) for v, f in zip(r, self.formats)) + " |" for r in self.rows]
        return "\n".join([head, sep, *body])


@dataclass
class Figure:
    """A matplotlib figure, written into the site as SVG.

    The numbers it plots (line data, bar heights, image arrays) are extracted from the axes and recorded,
    so a figure drifts like a table does. ``data`` may add further named numbers.
    """

    figure: Any
    caption: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    tolerance: Tolerance = field(default_factory=Tolerance)
    # Filled in by the engine in the worker (the matplotlib object does not cross processes).
    svg: str = ""
    plotted: dict[str, Any] = field(default_factory=dict)

    def numbers(self, key: str) -> Iterator[tuple[str, Any]]:
        yield from _flatten(key, {**self.plotted, **{f"data.{k}": v for k, v in self.data.items()}})

    def to_record(self) -> dict[str, Any]:
        return {"kind": "figure", "plotted": self.plotted, "data": self.data}


@dataclass
class Artifact:
    """An object another snippet needs (a trained model's weights …): cached, never recorded or shown.

    The producing snippet returns ``{"model": Artifact(state_dict)}``; a consumer declares
    ``REQUIRES = ["lecture07/train_models"]`` and calls ``artifact("lecture07/train_models", "model")``.
    The value is pickled in the worker, so the build process never has to import what it contains.
    """

    value: Any = None
    blob: bytes = b""
    tolerance: Tolerance = field(default_factory=Tolerance)

    def pack(self) -> None:
        import pickle

        self.blob = pickle.dumps(self.value, protocol=pickle.HIGHEST_PROTOCOL)
        self.value = None

    def load(self) -> Any:
        import pickle

        return pickle.loads(self.blob)

    def numbers(self, key: str) -> Iterator[tuple[str, Any]]:
        return iter(())


def _flatten(prefix: str, obj: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(f"{prefix}.{k}", v)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _flatten(f"{prefix}[{i}]", v)
    else:
        yield prefix, obj


RESULT_TYPES = (Value, Table, Figure, Artifact)
