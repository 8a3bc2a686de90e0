"""What a snippet returns: tables, figures, values, claims and blocks — with their kind and tolerance.

A snippet's ``compute()`` returns a dict ``{key: Table | Figure | Value | Claim | Block | Artifact}``. These
classes are the whole interface between a snippet and the book: the engine records every number they hold,
checks it against the committed record, and renders them into pages.

Every number is flattened to a *path* (``"lookup[1].输出"``, ``"max_weight"``, ``"figure.ax0.line1.y[3]"``)
so that a drift report can name exactly which cell changed, and belongs to a *series* (the path without its
indices: ``"lookup.输出"``, ``"figure.ax0.line1.y"``): the unit whose spread calibration measures.

Each number is of one of four kinds, declared by the snippet:

``exact``
    deterministic arithmetic; the same code gives the same number anywhere (up to the tight default
    tolerance, or a tolerance widened with a written reason, e.g. a platform's ``sin``);
``trained``
    depends on the order of floating-point operations — anything trained or sampled from a trained model,
    and rounding residuals such as ``max |a − b|`` of two float32 computations. Its tolerance is not chosen
    by hand: ``python -m transformer_book calibrate`` measures how far it moves under an ensemble of
    perturbations that stand in for other machines, and writes a band validated on runs it was not fitted to;
``rounding``
    a residual at the level of float rounding (``max |a − b|`` of two float32 computations of the same thing,
    an orthogonality defect): it changes discretely with every library and CPU, so it is recorded and shown
    as computed, never compared as a number — the :class:`Claim` that bounds it ("小于 10⁻⁵") is checked;
``measured``
    depends on the machine (wall-clock or CPU time, speed-ups, memory): recorded with its provenance, shown on
    the page as measured on the build machine, never compared as a number. What the build checks instead is
    the :class:`Claim` the text makes about it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from transformer_book.book.compare import Comparison
from transformer_book.book.plain import plain

EXACT, TRAINED, MEASURED, ROUNDING = "exact", "trained", "measured", "rounding"
KINDS = (EXACT, TRAINED, MEASURED, ROUNDING)
NOT_COMPARED = (MEASURED, ROUNDING)  # recorded and shown, never compared as numbers: their claims are checked

# Default tolerance: tight. Same machine, same thread count and same seeds give bit-identical results;
# the slack only absorbs float printing and summation-order noise between library builds.
DEFAULT_REL = 1e-6
DEFAULT_ABS = 1e-9


@dataclass(frozen=True)
class Tolerance:
    """How far a recomputed *exact* number may move from its record before it counts as drift.

    ``|new - old| <= abs + rel * |old|``. Widening beyond the default needs a ``reason`` (it is written into
    the record so that a reviewer sees why the value may move). Trained numbers get theirs from calibration.
    """

    rel: float = DEFAULT_REL
    abs: float = DEFAULT_ABS
    reason: str = ""

    def __post_init__(self) -> None:
        if self.widened and not self.reason.strip():
            raise ValueError(
                f"Tolerance(rel={self.rel}, abs={self.abs}) is wider than the default "
                f"(rel={DEFAULT_REL}, abs={DEFAULT_ABS}); give a reason=…"
            )

    @property
    def widened(self) -> bool:
        return self.rel > DEFAULT_REL or self.abs > DEFAULT_ABS

    def allows(self, old: float, new: float) -> bool:
        if math.isnan(old) or math.isnan(new):
            return math.isnan(old) and math.isnan(new)
        if math.isinf(old) or math.isinf(new):
            return old == new
        return abs(new - old) <= self.abs + self.rel * abs(old)

    def describe(self) -> str:
        return f"rel {self.rel:g}, abs {self.abs:g}"

    def as_record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"rel": self.rel, "abs": self.abs}
        if self.reason:
            out["reason"] = self.reason
        return out

    @classmethod
    def from_record(cls, rec: dict[str, Any] | None) -> "Tolerance":
        rec = rec or {}
        return cls(float(rec.get("rel", DEFAULT_REL)), float(rec.get("abs", DEFAULT_ABS)), str(rec.get("reason", "")))


DEFAULT_TOLERANCE = Tolerance()


@dataclass(frozen=True)
class Number:
    """One recorded number (or string, or boolean) of a result."""

    path: str  # "lookup[1].输出"
    value: Any
    kind: str  # EXACT | TRAINED | MEASURED
    series: str  # "lookup.输出": the numbers that are calibrated together


_INDEX = re.compile(r"\[\d+\]")


def series_of(path: str) -> str:
    return _INDEX.sub("", path)


def format_number(value: Any, fmt: str | None) -> str:
    """Format one value with a format spec (``".3f"``, ``",d"``, ``".1%"``); strings pass through."""
    if isinstance(value, str) or fmt is None or fmt == "":
        return str(value)
    if isinstance(value, float) and math.isnan(value):
        return "—"
    text = format(value, fmt)
    # A true minus sign reads better in Chinese typesetting than a hyphen.
    return text.replace("-", "−") if text.startswith("-") else text


def _check_kind(kind: str, tolerance: Tolerance, what: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"{what}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    if kind != EXACT and tolerance != DEFAULT_TOLERANCE:
        raise ValueError(
            f"{what}: a {kind} value takes no hand-set tolerance — "
            + ("trained values are calibrated (python -m transformer_book calibrate)" if kind == TRAINED
               else f"{kind} values are never compared; check the bound the text promises with a Claim")
        )


def _flatten(prefix: str, obj: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(f"{prefix}.{k}", v)
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _flatten(f"{prefix}[{i}]", v)
    else:
        yield prefix, obj


def _width(s: str) -> int:
    """Columns a string takes in a terminal (a CJK character takes two)."""
    return sum(2 if ord(ch) > 0x2E80 else 1 for ch in s)


class Result:
    """What every result can do: list its numbers, and turn into data (cache) or a record (committed).

    A *result kind* is one subclass, registered (:func:`register`) under its ``type_name``: it owns its data
    round-trip (``to_data``, ``to_record``, ``from_data``), the numbers the drift check compares (``numbers``),
    what the snippet may put in it (``validate``), where and how a page shows it (``placement``, ``render``)
    and how a terminal prints it (``terminal``). The engine asks the kind; it does not test for classes. A kind
    from outside the engine is a subclass registered by a module the book names in its ``result_kinds``
    option, or by an installed package's entry point in the group :data:`ENTRY_POINTS`.
    """

    type_name = ""
    recorded = True  # kept in cache entries and records as data (an Artifact is a blob: False)
    placement = "block"  # "block": a directive on a line of its own; "inline": in a sentence; "": never shown
    word = ""  # what a reader calls it, in the drift report ("表", "图" …); the type_name if empty
    banded = True  # calibration measures a band for its trained numbers (a block's hash has none to measure)
    # The first result of a snippet placed on a page with this flag gets the snippet's code folded after it
    # (tables, figures, blocks); an explorable's page shows its code where the author puts ``{{ source … }}``.
    folds_code = False
    # A verdict (a claim): the build decides whether its ``statement`` holds, and calibration measures its
    # margins; it is checked by holding, not by comparing numbers, and listed by ``python -m transformer_book claims``.
    decided = False

    def numbers(self, key: str) -> Iterator[Number]:
        return iter(())

    @classmethod
    def numbers_of_record(cls, key: str, rec: dict[str, Any]) -> dict[str, Number]:
        """The numbers of a recorded result (or a cache entry's data), by path, as the drift check compares them
        with :meth:`numbers` of a fresh one (the tolerances are the fresh result's: the snippet owns them)."""
        return {n.path: n for n in cls.from_data({**rec, "tolerance": None}).numbers(key)}

    @classmethod
    def without_measured(cls, rec: dict[str, Any]) -> None:
        """Blank, in the record ``rec``, what a run measured (times, speed-ups): what is left two fresh runs
        on one machine must agree on. Only kinds that can hold measured numbers need to."""

    def validate(self, snippet: str, key: str) -> None:
        """Raise ``TypeError`` naming ``snippet`` and ``key`` if what the snippet put in the result cannot be
        recorded or shown (called in the snippet's process, before the result leaves it)."""

    def finalize(self) -> "Result":
        """Called once in the process that computed the result, after ``validate``: turn what cannot leave the
        process into data (a figure's live matplotlib object into its SVG and plotted numbers)."""
        return self

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "Result | None":
        """The result as its committed record keeps it, where that is enough to show it again (a value, a table
        with its formats): shown, marked as recorded, while ``mkdocs serve`` recomputes it. None where the
        record keeps less than the page shows (a figure's record has no SVG)."""
        return None

    def site_files(self) -> dict[str, str | bytes]:
        """Files the site serves beside the pages that show the result, by suffix (a figure: ``{"svg": …}``),
        written as ``generated/<snippet>/<key>.<suffix>``."""
        return {}

    def detach(self) -> tuple[bytes, "Result"] | None:
        """For a kind kept beside the results rather than in them (``recorded = False``, an artifact): the
        bytes to store as a blob and the placeholder that stays in the results. None for every other kind."""
        return None

    def render(self, renderer: Any, ref: Any, caption: str, badge: str) -> str:
        """The Markdown that places the result on a page at ``ref`` (a :class:`~.rendering.pages.Ref`), with
        its ``caption`` and origin ``badge``; ``renderer`` (:class:`~.rendering.render.Renderer`) has the
        book's ways to draw tables, figures and the rest. Inline kinds get ``caption`` and ``badge`` empty."""
        raise NotImplementedError(f"the result kind {self.type_name!r} cannot be shown on a page")

    def text(self, fmt: str | None = None) -> str:
        """An inline result as plain words in a sentence (a page's notebook), in the page's format ``fmt`` if it
        gives one; "" for a kind that shows no words of its own there (a claim shows its ✓ beside the sentence)."""
        return ""

    def terminal(self, key: str) -> str:
        """What ``python -m transformer_book run`` prints for the result."""
        return f"{key}: {self.type_name}"

    def summary(self) -> str:
        """One line on what the result holds, for the popover that says where a shown result comes from."""
        return f"{self.word or self.type_name}：每个数都在完整记录里"

    def notebook(self, key: str, fmt: str | None, draw: Any) -> dict[str, Any]:
        """The MIME bundle a page's notebook shows for the result (``text/plain`` and the richest of
        ``text/markdown``, ``text/html``, ``image/svg+xml``); ``fmt`` is the page's format for an inline value,
        ``draw`` the module with the page's drawings (:mod:`~.rendering.interactive`)."""
        return {"text/plain": self.terminal(key).strip()}

    def notebook_record(self) -> dict[str, Any]:
        """What a notebook's output carries to be compared with the record (the record's own form)."""
        return self.to_record()

    def to_data(self) -> dict[str, Any]:
        """Everything needed to render the result again (cache entries; JSON)."""
        raise NotImplementedError

    def to_record(self) -> dict[str, Any]:
        """What the committed record keeps (no SVG text, no blobs)."""
        return self.to_data()

    @property
    def kinds(self) -> set[str]:
        return {n.kind for n in self.numbers("x")}


@dataclass
class Value(Result):
    """One number (or short string / boolean) to be placed inline in a sentence.

    Parameters
    ----------
    value : number, str or bool
    fmt : str
        Default format spec used when the page does not give one, e.g. ``".3f"``.
    kind : ``"exact"`` (default), ``"trained"`` or ``"measured"``
    tolerance : Tolerance, optional
        Only for exact values, and only with a reason.
    """

    value: Any
    fmt: str = ""
    tolerance: Tolerance = field(default_factory=Tolerance)
    kind: str = EXACT
    type_name = "value"
    word = "数值"
    placement = "inline"

    def __post_init__(self) -> None:
        self.value = plain(self.value)
        _check_kind(self.kind, self.tolerance, "Value")

    def numbers(self, key: str) -> Iterator[Number]:
        yield Number(key, self.value, self.kind, key)

    def to_data(self) -> dict[str, Any]:
        return {"type": "value", "kind": self.kind, "value": self.value, "fmt": self.fmt,
                "tolerance": self.tolerance.as_record()}

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> "Value":
        return cls(d["value"], d.get("fmt", ""), Tolerance.from_record(d.get("tolerance")), d.get("kind", EXACT))

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "Value":
        return cls.from_data({**rec, "tolerance": None})

    def validate(self, snippet: str, key: str) -> None:
        if not isinstance(self.value, (bool, int, float, str)):
            raise TypeError(f"{snippet}: Value {key!r} holds a {type(self.value).__name__} ({self.value!r:.60}); "
                            "a Value is one number, string or boolean in a sentence — use a Table for several")

    def text(self, fmt: str | None = None) -> str:
        return format_number(self.value, fmt if fmt is not None else self.fmt)

    def render(self, renderer: Any, ref: Any, caption: str, badge: str) -> str:
        return renderer.value(ref, self)

    def terminal(self, key: str) -> str:
        mark = f"  （{self.kind}）" if self.kind != "exact" else ""
        return f"{key} = {format_number(self.value, self.fmt)}{mark}"

    def summary(self) -> str:
        return repr(self.value)

    @classmethod
    def without_measured(cls, rec: dict[str, Any]) -> None:
        if rec.get("kind") == MEASURED:
            rec.pop("value", None)

    def notebook(self, key: str, fmt: str | None, draw: Any) -> dict[str, Any]:
        text = format_number(self.value, fmt if fmt is not None else self.fmt)
        mark = "（实测，随机器而变）" if self.kind == MEASURED else ""
        return {"text/plain": f"{key} = {text}{mark}", "text/markdown": f"`{key}` = **{text}**{mark}"}


@dataclass
class Table(Result):
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
    kind : str
        The kind of every cell (``"exact"`` by default) …
    kinds : dict, optional
        … unless its column is named here, e.g. ``{"用时（秒）": "measured"}``.
    tolerance : Tolerance, optional
        For the exact cells.
    """

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    formats: dict[str, str] | Sequence[str] | None = None
    caption: str = ""
    tolerance: Tolerance = field(default_factory=Tolerance)
    kind: str = EXACT
    kinds: dict[str, str] | None = None
    type_name = "table"
    folds_code = True
    word = "表"

    def __post_init__(self) -> None:
        self.columns = [str(c) for c in self.columns]
        self.rows = [[plain(v) for v in row] for row in self.rows]
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
        self.kinds = dict(self.kinds or {})
        unknown = set(self.kinds) - set(self.columns)
        if unknown:
            raise ValueError(f"kinds name unknown columns: {sorted(unknown)}")
        _check_kind(self.kind, DEFAULT_TOLERANCE, "Table")
        for col, k in self.kinds.items():
            _check_kind(k, DEFAULT_TOLERANCE, f"Table column {col!r}")
        if self.tolerance != DEFAULT_TOLERANCE and EXACT not in {self.column_kind(c) for c in self.columns}:
            _check_kind(self.kind, self.tolerance, "Table")

    def column_kind(self, column: str) -> str:
        return self.kinds.get(column, self.kind)

    def numbers(self, key: str) -> Iterator[Number]:
        for i, row in enumerate(self.rows):
            for col, v in zip(self.columns, row):
                yield Number(f"{key}[{i}].{col}", v, self.column_kind(col), f"{key}.{col}")

    def to_data(self) -> dict[str, Any]:
        out = {"type": "table", "kind": self.kind, "columns": list(self.columns), "rows": self.rows,
               "formats": list(self.formats), "caption": self.caption, "tolerance": self.tolerance.as_record()}
        if self.kinds:
            out["kinds"] = dict(self.kinds)
        return out

    def to_record(self) -> dict[str, Any]:
        out = self.to_data()
        del out["caption"]  # the formats stay: a page can be rendered from its record while the snippet reruns
        return out

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> "Table":
        return cls(d["columns"], d["rows"], d.get("formats"), d.get("caption", ""),
                   Tolerance.from_record(d.get("tolerance")), d.get("kind", EXACT), d.get("kinds"))

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> "Table | None":
        return cls.from_data({**rec, "tolerance": None}) if rec.get("formats") else None

    def render(self, renderer: Any, ref: Any, caption: str, badge: str) -> str:
        return renderer.table(self, caption, badge, renderer.measured_on(ref.snippet))

    def terminal(self, key: str) -> str:
        cells = [list(self.columns)] + [[format_number(v, f) for v, f in zip(row, self.formats)] for row in self.rows]
        widths = [max(_width(row[j]) for row in cells) for j in range(len(self.columns))]
        lines = [f"\n{key}:" + (f" {self.caption}" if self.caption else "")]
        for i, row in enumerate(cells):
            lines.append("  " + "  ".join(v + " " * (w - _width(v)) for v, w in zip(row, widths)))
            if i == 0:
                lines.append("  " + "  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def notebook(self, key: str, fmt: str | None, draw: Any) -> dict[str, Any]:
        md = self.to_markdown()
        return {"text/plain": md, "text/markdown": (f"**{self.caption}**\n\n" if self.caption else "") + md}

    def summary(self) -> str:
        return f"{len(self.rows)} 行 × {len(self.columns)} 列；每个数的全部位数见完整记录"

    @classmethod
    def without_measured(cls, rec: dict[str, Any]) -> None:
        cols = [i for i, c in enumerate(rec["columns"]) if (rec.get("kinds") or {}).get(c, rec["kind"]) == MEASURED]
        rec["rows"] = [[None if i in cols else v for i, v in enumerate(row)] for row in rec["rows"]]

    def measured_columns(self) -> list[str]:
        return [c for c in self.columns if self.column_kind(c) == MEASURED]

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


# What a figure says besides the numbers it plots (recorded by the engine, :func:`.figure_data.drawn_words`):
# the words and numbers drawn as text, legend entries, categorical tick labels, and each colour map's name.
_FIGURE_WORDS = re.compile(r"\.(texts|legend|xticklabels|yticklabels|cmap)$")
_FIGURE_SCALE = re.compile(r"\.(mesh)?scale(\d+)\.v(?:min|max)$")


@dataclass
class Figure(Result):
    """A matplotlib figure, written into the site as SVG.

    The numbers it plots (line data, bar heights, image arrays) are extracted from the axes and recorded,
    so a figure drifts like a table does. So is what it says besides them: every text drawn on it (a step
    picture's numbers, annotations), its legend entries and categorical tick labels, and for every image its
    colour map by name (reversed maps end in ``_r``) and the values at the map's two ends — the words and the
    colour map exactly, whatever the figure's kind; the ends like the image they scale. ``data`` may add
    further named numbers.

    Every image the figure draws with ``imshow`` is a *heatmap* a reader can read cell by cell: the engine
    keeps, beside the recorded array, its row and column labels (the axes' tick labels where there is one per
    cell, the index otherwise — recorded as exact strings), the axes' names and title, and its colour scale
    (``grids``). On the page, pointing at a cell (mouse, tap, or the arrow keys) shows its row label, column
    label and value in ``cell_format``; without JavaScript and on paper the SVG is the figure.
    ``grid_labels=("查询", "键")`` names the rows and columns where the axes have no label of their own;
    ``heatmaps=False`` says the images are parts of a picture (a diagram drawn with coloured blocks), not
    heatmaps to read. A figure with one heatmap is replaced on screen by its cells; with several, the static
    figure stays as the overview and the reader picks one panel at a time to read large below it.
    """

    figure: Any
    caption: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    tolerance: Tolerance = field(default_factory=Tolerance)
    kind: str = EXACT
    cell_format: str = ".2f"  # how a heatmap cell's value is shown when a reader points at it
    grid_labels: tuple[str, str] | None = None  # (rows, columns) where the axes carry no label
    heatmaps: bool = True  # False: the images are parts of a diagram, not heatmaps to read cell by cell
    alt: str = ""  # the figure in words for a reader who cannot see it (default: its caption)
    # Filled in by the engine in the worker (the matplotlib object does not cross processes).
    svg: str = ""
    plotted: dict[str, Any] = field(default_factory=dict)
    grids: list[dict[str, Any]] = field(default_factory=list)  # one per imshow image: labels and colour scale
    type_name = "figure"
    folds_code = True
    word = "图"

    def site_files(self) -> dict[str, str]:
        return {"svg": self.svg}

    def finalize(self) -> "Figure":
        from transformer_book.book import figure_data

        if self.figure is not None:
            figure_data.finalize(self)
        return self

    def __post_init__(self) -> None:
        _check_kind(self.kind, self.tolerance, "Figure")
        self.data = plain(dict(self.data))
        format_number(0.5, self.cell_format)  # a bad format fails in the snippet, not in a page
        if self.grid_labels is not None:
            self.grid_labels = (str(self.grid_labels[0]), str(self.grid_labels[1]))

    @property
    def kinds(self) -> set[str]:
        """Every number of a figure has the figure's kind (none if it plots no number)."""
        return {self.kind} if next(iter(self.numbers("x")), None) is not None else set()

    def numbers(self, key: str) -> Iterator[Number]:
        merged = {**self.plotted, **{f"data.{k}": v for k, v in self.data.items()}}
        for path, v in _flatten(key, merged):
            series = series_of(path)
            words = _FIGURE_WORDS.search(series)
            if words:  # what the figure says in words and which colour map it uses: exact, whatever its kind
                yield Number(path, v, EXACT, series)
                continue
            scale = _FIGURE_SCALE.search(series)
            if scale:  # a colour scale's ends move with the image they scale: one series for calibration
                series = series[:scale.start()] + f".{scale.group(1) or 'image'}{scale.group(2)}"
            yield Number(path, v, self.kind, series)
        for g, grid in enumerate(self.grids):  # what a reader is told a cell is: exact, whatever the figure's kind
            for axis in ("rows", "cols"):
                for i, label in enumerate(grid.get(axis, [])):
                    yield Number(f"{key}.grids[{g}].{axis}[{i}]", label, EXACT, f"{key}.grids.{axis}")

    def to_data(self) -> dict[str, Any]:
        out = {"type": "figure", "kind": self.kind, "svg": self.svg, "plotted": self.plotted, "data": self.data,
               "caption": self.caption, "tolerance": self.tolerance.as_record()}
        if self.grids:
            out.update(grids=self.grids, cell_format=self.cell_format)
        if self.alt:
            out["alt"] = self.alt
        return out

    def to_record(self) -> dict[str, Any]:
        out = self.to_data()
        del out["svg"], out["caption"]
        if self.grids:  # the colours are the colour map's, not results
            out["grids"] = [{k: v for k, v in g.items() if k != "colors"} for g in self.grids]
        return out

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> "Figure":
        return cls(None, caption=d.get("caption", ""), data=d.get("data", {}),
                   tolerance=Tolerance.from_record(d.get("tolerance")), kind=d.get("kind", EXACT),
                   cell_format=d.get("cell_format", ".2f"), heatmaps=bool(d.get("grids")), svg=d.get("svg", ""),
                   plotted=d.get("plotted", {}), grids=d.get("grids", []), alt=d.get("alt", ""))

    def render(self, renderer: Any, ref: Any, caption: str, badge: str) -> str:
        return renderer.figure(ref, caption, badge, self)

    def terminal(self, key: str) -> str:
        n = sum(1 for _ in self.numbers(key))
        where = " (SVG rendered)" if self.svg else ""
        return f"\n{key}: figure{where}, {n} plotted numbers" + (f" — {self.caption}" if self.caption else "")

    def notebook(self, key: str, fmt: str | None, draw: Any) -> dict[str, Any]:
        return {"text/plain": key, "image/svg+xml": self.svg}

    def summary(self) -> str:
        return "图中画出的数据见完整记录"

    @classmethod
    def without_measured(cls, rec: dict[str, Any]) -> None:
        if rec.get("kind") == MEASURED:
            rec.pop("plotted", None), rec.pop("data", None)


class Claim(Result):
    """A statement the prose makes about results, decided by a comparison and recorded with its margin.

    ``Claim("上下文 256 时，KV 缓存至少快 1.5 倍", at_least(speedup_256, 1.5, name="加速比"))``

    The second argument is a :class:`~.compare.Comparison` (``greater``, ``below``, ``all_of`` … from
    :mod:`.compare`), never a bare boolean: the engine records what was compared and how far the claim is
    from flipping (its *margin*), and calibration measures how much that margin moves under perturbations.
    A page cites the claim next to the sentence that makes it (``{{ claim c11_kv_cache:cache_faster }}``); a
    build in which it no longer holds fails, naming the claim, the comparison and every page:line that states
    it. A claim whose margin lies inside its calibrated noise fails the strict build too, unless the
    sentence states that uncertainty and ``uncertain`` says how (e.g. ``uncertain="四个种子里有一个例外"``).
    Keep ``assert`` for programming errors only.
    """

    type_name = "claim"
    word = "说法"
    decided = True
    placement = "inline"

    def __init__(self, statement: str, check: Any, uncertain: str = "") -> None:

        if not isinstance(statement, str) or not statement.strip():
            raise ValueError("Claim: the first argument is the statement, in the words of the page")
        if not isinstance(check, Comparison):
            raise TypeError(
                f"Claim {statement!r}: the second argument must be a comparison (greater, less, above, below, "
                f"at_least, at_most, between, increasing, smallest, equal, true, all_of … from "
                f"transformer_book.book), not {type(check).__name__}: the engine records its inputs and margin")
        self.statement = statement
        self.check = check
        self.uncertain = str(uncertain or "")

    @property
    def holds(self) -> bool:
        return self.check.holds

    @property
    def inputs(self) -> dict[str, Any]:
        return self.check.flat_inputs()

    def __repr__(self) -> str:
        return f"Claim({self.statement!r}, {self.check.describe()})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Claim) and self.to_data() == other.to_data()

    def describe_inputs(self) -> str:
        return self.check.describe()

    @classmethod
    def numbers_of_record(cls, key: str, rec: dict[str, Any]) -> dict[str, Number]:
        return {}  # a claim is checked by its verdict and margin (drift.compare), not as numbers

    def to_data(self) -> dict[str, Any]:
        out = {"type": "claim", "statement": self.statement, "holds": self.holds, "check": self.check.to_data()}
        if self.uncertain:
            out["uncertain"] = self.uncertain
        return out

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> "Claim":

        if "check" not in d:
            raise ValueError("a claim recorded without its comparison (an older record: accept it again)")
        return cls(d["statement"], Comparison.from_data(d["check"]), d.get("uncertain", ""))

    def render(self, renderer: Any, ref: Any, caption: str, badge: str) -> str:
        return renderer.claim(ref, self)

    def terminal(self, key: str) -> str:
        inputs = self.describe_inputs()
        return f"{key}: {'成立' if self.holds else '不成立！'} — {self.statement}" + (f"（{inputs}）" if inputs else "")

    def notebook(self, key: str, fmt: str | None, draw: Any) -> dict[str, Any]:
        text = ("✓ " if self.holds else "✗ 不成立：") + self.statement
        return {"text/plain": text, "text/markdown": text}

    def summary(self) -> str:
        return ("成立" if self.holds else "不成立") + f"：{self.describe_inputs()}"


@dataclass
class Block(Result):
    """A ready-made block of HTML or Markdown (an SVG drawn by another library, a table it renders …),
    placed with ``{{ block snippet:key }}``. Recorded by its hash, not as text."""

    text: str
    markdown: bool = False  # False: raw HTML, placed as it is
    kind: str = EXACT
    caption: str = ""
    type_name = "block"
    folds_code = True
    word = "文本块"
    banded = False

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise TypeError("Block: text must be a string")
        _check_kind(self.kind, DEFAULT_TOLERANCE, "Block")

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()

    def numbers(self, key: str) -> Iterator[Number]:
        yield Number(f"{key}.sha256", self.sha256, self.kind, f"{key}.sha256")

    def to_data(self) -> dict[str, Any]:
        return {"type": "block", "kind": self.kind, "text": self.text, "markdown": self.markdown, "caption": self.caption}

    def to_record(self) -> dict[str, Any]:
        return {"type": "block", "kind": self.kind, "sha256": self.sha256, "chars": len(self.text)}

    @classmethod
    def numbers_of_record(cls, key: str, rec: dict[str, Any]) -> dict[str, Number]:
        path = f"{key}.sha256"
        digest = rec["sha256"] if "sha256" in rec else cls.from_data(rec).sha256  # a record, or a cache entry
        return {path: Number(path, digest, rec.get("kind", EXACT), path)}

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> "Block":
        return cls(d["text"], d.get("markdown", False), d.get("kind", EXACT), d.get("caption", ""))

    def render(self, renderer: Any, ref: Any, caption: str, badge: str) -> str:
        return renderer.block(self, caption, badge)

    def terminal(self, key: str) -> str:
        return f"\n{key}: block of {len(self.text)} characters (sha256 {self.sha256[:12]}…)"

    def notebook(self, key: str, fmt: str | None, draw: Any) -> dict[str, Any]:
        return {"text/plain": self.text, "text/markdown" if self.markdown else "text/html": self.text}

    def notebook_record(self) -> dict[str, Any]:
        return self.to_data()  # the text itself: its record is only a hash

    def summary(self) -> str:
        return f"{len(self.text)} 个字符，记录的是它的 sha256"


@dataclass
class SiteFile(Result):
    """A file the site serves beside the pages, for a page's own script to fetch (a trained model's weights),
    placed with ``{{ file snippet:key "caption" }}`` as a link to download it (its size and hash beside it).
    The engine writes it as ``assets/generated/<snippet>/<key>.<suffix>``; the cache keeps its bytes, the record
    its sha256 and size. ``kind`` is the kind of what the bytes hold: ``trained`` for weights — their hash moves
    with the arithmetic, like a sampled text, so calibration sees it as a discrete result (measured like any
    trained series: on another machine it is not compared, the snippet's claims are checked instead); the size
    is exact whatever the kind (the shapes and the header fix it)."""

    data: bytes
    suffix: str = "bin"
    caption: str = ""
    kind: str = EXACT
    # (sha256, size) of a file known only from its record (a page notebook's output carries the record's form,
    # not a megabyte of base64): it is compared like the file itself, and cannot be served
    known: tuple[str, int] | None = None
    type_name = "file"
    word = "文件"

    def __post_init__(self) -> None:
        if not isinstance(self.data, (bytes, bytearray)):
            raise TypeError(f"SiteFile: data must be bytes, not {type(self.data).__name__}")
        self.data = bytes(self.data)
        if not re.fullmatch(r"[a-z0-9]{1,8}", self.suffix):
            raise ValueError(f"SiteFile: suffix must be 1–8 lowercase letters or digits, not {self.suffix!r}")
        _check_kind(self.kind, DEFAULT_TOLERANCE, "SiteFile")

    @property
    def sha256(self) -> str:
        return self.known[0] if self.known else hashlib.sha256(self.data).hexdigest()

    @property
    def size(self) -> int:
        return self.known[1] if self.known else len(self.data)

    def numbers(self, key: str) -> Iterator[Number]:
        yield Number(f"{key}.sha256", self.sha256, self.kind, f"{key}.sha256")
        yield Number(f"{key}.bytes", self.size, EXACT, f"{key}.bytes")

    def to_data(self) -> dict[str, Any]:
        import base64

        return {"type": "file", "kind": self.kind, "suffix": self.suffix, "caption": self.caption,
                "base64": base64.b64encode(self.data).decode("ascii")}

    def to_record(self) -> dict[str, Any]:
        return {"type": "file", "kind": self.kind, "suffix": self.suffix, "sha256": self.sha256, "bytes": self.size}

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> "SiteFile":
        """From a cache entry (the bytes, base64) or from a record (only the hash and size)."""
        import base64

        if "base64" not in d:
            return cls(b"", d.get("suffix", "bin"), d.get("caption", ""), d.get("kind", EXACT), (d["sha256"], int(d["bytes"])))
        return cls(base64.b64decode(d["base64"]), d.get("suffix", "bin"), d.get("caption", ""), d.get("kind", EXACT))

    def site_files(self) -> dict[str, bytes]:
        if self.known:
            raise ValueError("a file known only from its record has no bytes to serve")
        return {self.suffix: self.data}

    def render(self, renderer: Any, ref: Any, caption: str, badge: str) -> str:
        return renderer.site_file(ref, self, caption, badge)

    def terminal(self, key: str) -> str:
        return f"\n{key}: file of {self.size:,} bytes (sha256 {self.sha256[:12]}…)"

    def notebook(self, key: str, fmt: str | None, draw: Any) -> dict[str, Any]:
        return {"text/plain": f"{key}：{self.size:,} 字节的文件（sha256 {self.sha256[:12]}…），网站上供下载"}

    def summary(self) -> str:
        return f"{self.size:,} 字节，记录的是它的 sha256"


@dataclass(frozen=True)
class Control:
    """One control of an :class:`Explorable`: a name and the values a reader can choose between.

    ``Control("温度", [0.5, 1.0, 1.5], default=1.0)``; ``labels`` are what the page shows for each value
    (default: the value in ``fmt``). A control with up to six values is a row of options, a longer one a slider.
    """

    name: str
    values: Sequence[Any]
    default: Any = None  # one of the values; the first if None
    labels: Sequence[str] | None = None
    fmt: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", [plain(v) for v in self.values])
        if not self.values:
            raise ValueError(f"Control {self.name!r}: give at least one value")
        labels = [str(x) for x in self.labels] if self.labels is not None else [format_number(v, self.fmt) for v in self.values]
        if len(labels) != len(self.values) or len(set(labels)) != len(labels):
            raise ValueError(f"Control {self.name!r}: one distinct label per value")
        object.__setattr__(self, "labels", labels)
        default = self.values[0] if self.default is None else plain(self.default)
        if default not in self.values:
            raise ValueError(f"Control {self.name!r}: the default {default!r} is not one of its values")
        object.__setattr__(self, "default", default)
        if any(c in self.name for c in "[]=,") or any(c in label for label in labels for c in "[]=,"):
            raise ValueError(f"Control {self.name!r}: names and labels name a state in the record; no [ ] = or ,")

    @property
    def default_index(self) -> int:
        return self.values.index(self.default)

    def to_data(self) -> dict[str, Any]:
        return {"name": self.name, "values": list(self.values), "labels": list(self.labels), "default": self.default}


@dataclass(frozen=True)
class Bars:
    """What an explorable shows: one horizontal bar per item of a list field (a distribution, several scores).

    ``values`` names a field holding a list of numbers; ``labels`` a field holding the items' names (a list of
    strings that may change with the state, e.g. the most likely next characters) or a fixed list. Bars are
    drawn to ``scale`` (default: the largest absolute value over every state, so that switching states compares
    lengths honestly)."""

    values: str
    labels: str | Sequence[str]
    title: str = ""
    fmt: str = ".3f"
    scale: float | None = None


@dataclass(frozen=True)
class Text:
    """What an explorable shows: one field as a labelled line — a number in ``fmt``, or a string."""

    field: str
    label: str
    fmt: str = ""


VIEWS = {"bars": Bars, "text": Text}


class Explorable(Result):
    """A result a reader plays with: controls, and what the page shows for every combination of their values.

    The snippet computes every state at build time; the engine records every number of every state (path
    ``key[温度=0.8, top-k=5].probs[2]``, so a drift names the state) and the page switches between the recorded
    states — the browser computes nothing. ``states`` is a function called with one value per control (in the
    controls' order) that returns a dict of fields (numbers, strings, or lists of them), or a dict from such
    tuples to those dicts. ``show`` lists what is drawn for the chosen state (:class:`Bars`, :class:`Text`).
    Without JavaScript and on paper the page shows the default state and says what the controls vary.
    """

    type_name = "explorable"
    word = "可操作的图"

    def __init__(self, controls: Sequence[Control], states: Any, show: Sequence[Bars | Text], *, caption: str = "",
                 kind: str = EXACT, kinds: dict[str, str] | None = None,
                 tolerance: Tolerance | None = None) -> None:
        import itertools

        self.controls = list(controls)
        if not self.controls or not all(isinstance(c, Control) for c in self.controls):
            raise TypeError("Explorable: controls is a list of Control")
        if len({c.name for c in self.controls}) != len(self.controls):
            raise ValueError("Explorable: two controls with one name")
        self.show = list(show)
        if not self.show or not all(isinstance(v, (Bars, Text)) for v in self.show):
            raise TypeError("Explorable: show is a list of Bars and Text")
        self.caption = caption
        self.kind = kind
        self.field_kinds = dict(kinds or {})  # field → kind, where it differs from ``kind``
        self.tolerance = tolerance or Tolerance()
        _check_kind(kind, self.tolerance, "Explorable")
        for f, k in self.field_kinds.items():
            _check_kind(k, DEFAULT_TOLERANCE, f"Explorable field {f!r}")
        combos = list(itertools.product(*(c.values for c in self.controls)))
        self.states: list[dict[str, Any]] = []  # in the order of itertools.product over the controls' values
        for combo in combos:
            fields = states(*combo) if callable(states) else states.get(tuple(combo))
            if fields is None:
                raise ValueError(f"Explorable: no state for {self.state_name(combo)}")
            self.states.append(plain(dict(fields)))
        names = set(self.states[0])
        for combo, fields in zip(combos, self.states):
            if set(fields) != names:
                raise ValueError(f"Explorable: the state {self.state_name(combo)} has the fields {sorted(fields)}, "
                                 f"the first has {sorted(names)}")
        for v in self.show:
            needed = [v.values] + ([v.labels] if isinstance(v.labels, str) else []) if isinstance(v, Bars) else [v.field]
            missing = [n for n in needed if n not in names]
            if missing:
                raise ValueError(f"Explorable: {type(v).__name__} shows fields {missing} that no state has")
        unknown = set(self.field_kinds) - names
        if unknown:
            raise ValueError(f"Explorable: kinds name unknown fields {sorted(unknown)}")

    def state_name(self, combo: Sequence[Any]) -> str:
        """``温度=0.8, top-k=5``: how the record, the drift report and the page name a state."""
        return ", ".join(f"{c.name}={c.labels[c.values.index(v)]}" for c, v in zip(self.controls, combo))

    def combos(self) -> list[tuple[Any, ...]]:
        import itertools

        return list(itertools.product(*(c.values for c in self.controls)))

    @property
    def default_state(self) -> int:
        """Index (in :attr:`states`) of the state every control's default picks."""
        return self.combos().index(tuple(c.default for c in self.controls))

    def field_kind(self, name: str) -> str:
        return self.field_kinds.get(name, self.kind)

    def numbers(self, key: str) -> Iterator[Number]:
        for combo, fields in zip(self.combos(), self.states):
            base = f"{key}[{self.state_name(combo)}]"
            for name, v in fields.items():
                for path, x in _flatten(f"{base}.{name}", v):
                    yield Number(path, x, self.field_kind(name), series_of(path))

    def to_data(self) -> dict[str, Any]:
        out = {"type": "explorable", "kind": self.kind, "controls": [c.to_data() for c in self.controls],
               "states": self.states,
               "show": [{"view": name, **plain(dataclasses.asdict(v))}
                        for v in self.show for name, cls in VIEWS.items() if isinstance(v, cls)],
               "caption": self.caption, "tolerance": self.tolerance.as_record()}
        if self.field_kinds:
            out["kinds"] = dict(self.field_kinds)
        return out

    def to_record(self) -> dict[str, Any]:
        out = self.to_data()
        del out["caption"]
        return out

    @classmethod
    def from_data(cls, d: dict[str, Any]) -> "Explorable":
        controls = [Control(c["name"], c["values"], c.get("default"), c.get("labels")) for c in d["controls"]]
        show = [VIEWS[v["view"]](**{k: x for k, x in v.items() if k != "view"}) for v in d.get("show", [])]
        table = dict(zip([tuple(x) for x in _product(controls)], d["states"]))
        return cls(controls, table, show, caption=d.get("caption", ""), kind=d.get("kind", EXACT),
                   kinds=d.get("kinds"), tolerance=Tolerance.from_record(d.get("tolerance")))

    def render(self, renderer: Any, ref: Any, caption: str, badge: str) -> str:
        return renderer.explorable(ref, self, caption, badge)

    def terminal(self, key: str) -> str:
        sizes = " × ".join(f"{c.name}（{len(c.values)} 个取值）" for c in self.controls)
        return f"\n{key}: explorable, {len(self.states)} states ({sizes})" + (f" — {self.caption}" if self.caption else "")

    def notebook(self, key: str, fmt: str | None, draw: Any) -> dict[str, Any]:
        """Every state as a list (what the page's controls switch between), and the page's drawing of the
        default state."""
        lines = [f"{self.state_name(c)}：" + "；".join(f"{k} = {v}" for k, v in s.items())
                 for c, s in zip(self.combos(), self.states)]
        return {"text/plain": "\n".join(lines), "text/markdown": "\n".join(f"- {line}" for line in lines),
                "text/html": (f"<p>{self.state_name(self.combos()[self.default_state])}</p>"
                              + draw.state_html(self, self.default_state))}

    def summary(self) -> str:
        return f"{len(self.states)} 个状态，每个状态的每个数都在完整记录里"


def _product(controls: Sequence[Control]) -> list[tuple[Any, ...]]:
    import itertools

    return list(itertools.product(*(c.values for c in controls)))


@dataclass
class Artifact(Result):
    """An object another snippet needs (a trained model's weights …): cached, never recorded or shown.

    The producing snippet returns ``{"model": Artifact(state_dict)}``; a consumer declares
    ``REQUIRES = ["lecture07/train_models"]`` and calls ``artifact("lecture07/train_models", "model")``.
    The value must be data: tensors, numbers, strings, and lists, tuples and dicts of them — it is stored in a
    format that cannot run code when it is loaded (see :mod:`.artifacts`).
    """

    value: Any = None
    type_name = "artifact"
    word = "交给其他片段的对象"
    recorded = False
    placement = ""

    def detach(self) -> tuple[bytes, "Artifact"]:
        from transformer_book.book import artifacts

        return artifacts.encode(self.value), Artifact()

    def to_data(self) -> dict[str, Any]:
        raise TypeError("artifacts are stored by the cache as blobs, not as data")


# -- the registry of result kinds --------------------------------------------------------------------------------

ENTRY_POINTS = "transformer_book.result_kinds"  # an installed package's kinds: each entry point names a class
_KINDS: dict[str, type[Result]] = {}
_ENTRY_POINTS_LOADED: list[bool] = []


def register(cls: type[Result]) -> type[Result]:
    """Make ``cls`` a result kind under its ``type_name`` (usable as a class decorator). Registering the same
    class again does nothing; another class under a name already taken is refused, naming both."""
    if not (isinstance(cls, type) and issubclass(cls, Result)) or not cls.type_name:
        raise TypeError(f"a result kind is a subclass of Result with a type_name, not {cls!r}")
    if cls.placement not in ("block", "inline", ""):
        raise ValueError(f"{cls.__qualname__}.placement must be 'block', 'inline' or '', not {cls.placement!r}")
    have = _KINDS.get(cls.type_name)
    if have is not None and (have.__module__, have.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"the result kind {cls.type_name!r} is {have.__module__}.{have.__qualname__} already; "
                         f"{cls.__module__}.{cls.__qualname__} needs another type_name")
    _KINDS[cls.type_name] = cls
    return cls


def _load_entry_points() -> None:
    if _ENTRY_POINTS_LOADED:
        return
    _ENTRY_POINTS_LOADED.append(True)
    from importlib.metadata import entry_points

    for ep in entry_points(group=ENTRY_POINTS):
        register(ep.load())


def result_kinds() -> dict[str, type[Result]]:
    """Every registered kind, by ``type_name``: the engine's and those registered from outside it."""
    _load_entry_points()
    return dict(_KINDS)


def result_kind(name: str) -> type[Result] | None:
    return result_kinds().get(name)


def from_data(d: dict[str, Any]) -> Result:
    """Rebuild a result from :meth:`Result.to_data` (a cache entry) or, where it can, a record."""
    cls = result_kind(d.get("type", ""))
    if cls is None or not cls.recorded:
        raise ValueError(f"unknown result type {d.get('type')!r}")
    return cls.from_data(d)


def recorded_numbers(key: str, rec: dict[str, Any]) -> dict[str, Number]:
    """The numbers of the recorded result ``rec`` (its kind's :meth:`Result.numbers_of_record`)."""
    cls = result_kind(rec.get("type", ""))
    if cls is None or not cls.recorded:
        raise ValueError(f"unknown result type {rec.get('type')!r}")
    return cls.numbers_of_record(key, rec)


for _cls in (Value, Table, Figure, Claim, Block, SiteFile, Explorable, Artifact):
    register(_cls)
