"""What a matplotlib figure shows, as data: its SVG, the numbers it plots, the words it draws, and what a reader
is told about each heatmap cell. The figure kind (:class:`.results.Figure`) calls :func:`finalize` once, in the
process that drew the figure, before the result leaves it (the live matplotlib object cannot be pickled or recorded).
"""

from __future__ import annotations

import io
from typing import Any

def finalize(fig: Any) -> None:
    """Render the matplotlib figure to SVG and extract the numbers it plots; drop the live object."""
    import matplotlib.pyplot as plt
    import numpy as np

    mfig = fig.figure
    buf = io.StringIO()
    mfig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    fig.svg = buf.getvalue()
    plotted: dict[str, Any] = {}
    fig.grids = []
    for a, ax in enumerate(mfig.axes):
        axd: dict[str, Any] = {}
        for i, line in enumerate(ax.get_lines()):
            x, y = np.asarray(line.get_xdata(), float), np.asarray(line.get_ydata(), float)
            axd[f"line{i}"] = {"x": x.tolist(), "y": y.tolist()}
        for i, container in enumerate(getattr(ax, "containers", [])):
            heights = [p.get_height() for p in container.patches] if hasattr(container, "patches") else []
            if heights:
                axd[f"bars{i}"] = [float(h) for h in heights]
        for i, img in enumerate(ax.get_images()):
            axd[f"image{i}"] = np.asarray(img.get_array(), float).tolist()
            axd[f"scale{i}"] = colour_scale(img)
            if fig.heatmaps:
                fig.grids.append(heatmap_grid(ax, img, f"ax{a}.image{i}", fig.grid_labels))
        for i, coll in enumerate(ax.collections):
            arr = getattr(coll, "get_array", lambda: None)()
            offs = coll.get_offsets() if hasattr(coll, "get_offsets") else None
            if arr is not None:
                axd[f"mesh{i}"] = np.asarray(arr, float).tolist()
                axd[f"meshscale{i}"] = colour_scale(coll)
            elif offs is not None and len(offs):
                axd[f"points{i}"] = np.asarray(offs, float).tolist()
        axd.update(drawn_words(ax))
        if axd:
            plotted[f"ax{a}"] = axd
    words = [t.get_text() for t in mfig.texts if t.get_text().strip()]
    if words:
        plotted["fig"] = {"texts": words}
    fig.plotted = plotted
    plt.close(mfig)
    fig.figure = None


def colour_scale(mappable: Any) -> dict[str, Any]:
    """What a colour means in a drawn image or mesh: the colour map by name (a reversed map is ``…_r``, so
    "darker = larger" turned round is a change) and the values at its two ends."""
    norm = mappable.norm
    return {"cmap": str(mappable.get_cmap().name), "vmin": float(norm.vmin), "vmax": float(norm.vmax)}


def drawn_words(ax: Any) -> dict[str, list[str]]:
    """The words and numbers an axes draws as text: its annotations (``ax.text``; a step picture's numbers),
    its legend's entries, and the tick labels of a categorical axis (set with ``set_xticks(…, labels)``) —
    what a reader reads off the figure besides its lines and colours. Read after ``savefig``."""
    from matplotlib.ticker import FixedFormatter

    out: dict[str, list[str]] = {}
    texts = [t.get_text() for t in ax.texts if t.get_visible() and t.get_text().strip()]
    if texts:
        out["texts"] = texts
    legend = ax.get_legend()
    if legend is not None:
        entries = [t.get_text() for t in legend.get_texts()]
        if entries:
            out["legend"] = entries
    for name, axis in (("xticklabels", ax.xaxis), ("yticklabels", ax.yaxis)):
        if isinstance(axis.get_major_formatter(), FixedFormatter):
            labels = [t.get_text() for t in axis.get_ticklabels()]
            if any(labels):
                out[name] = labels
    return out


GRID_COLORS = 64  # colours sampled from a heatmap's colour map for the page (a cell takes the nearest)


def heatmap_grid(ax: Any, img: Any, plotted: str, names: tuple[str, str] | None = None) -> dict[str, Any]:
    """What a reader is told about each cell of an ``imshow`` image: the row and column labels (the tick
    labels where the axis has one per cell at 0, 1, 2 …, otherwise the index), the axes' names and title,
    the colour scale; ``plotted`` is where the values are in the figure's record. Read after ``savefig``,
    when the tick labels have their text."""
    import numpy as np
    from matplotlib.colors import to_hex

    arr = np.asarray(img.get_array(), float)
    n_rows, n_cols = arr.shape[:2]

    def labels(ticks: Any, texts: list[Any], n: int) -> tuple[list[str], list[str] | None]:
        pos = [float(t) for t in ticks]
        words = [t.get_text() for t in texts]
        if len(pos) == n and all(abs(p - k) < 1e-9 for k, p in enumerate(pos)) and all(words):
            default = to_hex(texts[0].get_color()) if texts else "#000000"
            colors = [to_hex(t.get_color()) for t in texts]
            return words, (colors if any(c != default for c in colors) else None)
        return [str(k) for k in range(n)], None

    rows, row_colors = labels(ax.get_yticks(), ax.get_yticklabels(), n_rows)
    cols, col_colors = labels(ax.get_xticks(), ax.get_xticklabels(), n_cols)
    row_name, col_name = ax.get_ylabel(), ax.get_xlabel()
    if names is not None:
        row_name, col_name = row_name or names[0], col_name or names[1]
    vmin, vmax = img.norm.vmin, img.norm.vmax
    grid: dict[str, Any] = {
        "plotted": plotted, "title": ax.get_title() or ax.get_title("left"), "row_name": row_name,
        "col_name": col_name, "rows": rows, "cols": cols, "vmin": float(vmin), "vmax": float(vmax),
        "origin": img.origin,
        "colors": [to_hex(c) for c in img.get_cmap()(np.linspace(0.0, 1.0, GRID_COLORS))],
    }
    if row_colors:
        grid["row_colors"] = row_colors
    if col_colors:
        grid["col_colors"] = col_colors
    return grid
