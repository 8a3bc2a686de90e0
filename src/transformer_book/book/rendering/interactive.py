"""What a reader can point at and play with: heatmaps read cell by cell, and explorables' recorded states.

Both are written into the page as finished HTML and data, from the recorded results; ``static/explore.js``
only shows and switches what is written here — it formats no number and computes no state:

- a figure that draws heatmaps (``imshow``) keeps its SVG (what a reader without JavaScript, and the print
  edition, see) and gets a ``<script type="application/json" class="book-grid-data">`` after it: per image its
  row and column labels, every cell's value already formatted in the figure's ``cell_format``, the shade of
  the colour map each cell takes, and the colour bar's ends. The script turns it into a table of cells that
  mouse, tap and arrow keys read out ("查询「sat」，键「cat」：0.41"), one panel at a time;
- an :class:`~transformer_book.book.results.Explorable` becomes its controls (radio buttons, or a slider for
  more than six values), the default state drawn as HTML, and every other state drawn the same way in a JSON
  script; the controls swap the drawing. Without JavaScript (and on paper) the default state is shown, with a
  sentence saying what the controls vary.
"""

from __future__ import annotations

import html
import json
import math
from typing import Any

from transformer_book.book.results import Bars, Explorable, Figure, Text, format_number

SLIDER_ABOVE = 6  # a control with more values than this is a slider, otherwise a row of options


def _script_json(data: Any) -> str:
    """JSON safe inside ``<script>``: ``</`` cannot end the element early."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")


def _get(plotted: dict[str, Any], path: str) -> Any:
    node: Any = plotted
    for part in path.split("."):
        node = node[part]
    return node


def grid_payload(figure: Figure) -> list[dict[str, Any]]:
    """Each heatmap of a figure as the page's script reads it (values formatted, shades chosen here)."""
    out = []
    for grid in figure.grids:
        values = _get(figure.plotted, grid["plotted"])
        colors = grid.get("colors") or ["#f7fbff", "#08306b"]
        vmin, vmax = float(grid["vmin"]), float(grid["vmax"])
        top = len(colors) - 1

        def shade(v: float) -> int:
            if v is None or (isinstance(v, float) and math.isnan(v)):
                return -1
            if vmax == vmin:
                return 0
            return max(0, min(top, round((float(v) - vmin) / (vmax - vmin) * top)))

        rows = list(range(len(values)))
        if grid.get("origin") == "lower":  # drawn bottom-up: the page lists the rows as the figure shows them
            rows.reverse()
        item = {
            "title": grid.get("title", ""), "row_name": grid.get("row_name", ""), "col_name": grid.get("col_name", ""),
            "rows": [grid["rows"][i] for i in rows], "cols": grid["cols"], "colors": colors,
            "values": [[format_number(v, figure.cell_format) for v in values[i]] for i in rows],
            "shades": [[shade(v) for v in values[i]] for i in rows],
            "low": format_number(vmin, figure.cell_format), "high": format_number(vmax, figure.cell_format),
        }
        for axis in ("row_colors", "col_colors"):
            if grid.get(axis):
                item[axis] = grid[axis] if axis == "col_colors" else [grid[axis][i] for i in rows]
        out.append(item)
    return out


def heatmap_script(figure: Figure, anchor: str) -> str:
    """The data block placed right after a heatmap figure (empty if the figure draws no image)."""
    if not figure.grids:
        return ""
    data = {"for": anchor, "grids": grid_payload(figure)}
    return f'<script type="application/json" class="book-grid-data">{_script_json(data)}</script>\n'


# -- explorables -------------------------------------------------------------------------------------------

def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _bars(view: Bars, fields: dict[str, Any], scale: float) -> str:
    values = fields[view.values]
    labels = fields[view.labels] if isinstance(view.labels, str) else list(view.labels)
    if len(labels) != len(values):
        raise ValueError(f"Bars: {len(labels)} labels for {len(values)} values")
    out = [f'<div class="book-ex-bars" role="list" aria-label="{_e(view.title or view.values)}">']
    if view.title:
        out.append(f'<div class="book-ex-title">{_e(view.title)}</div>')
    for label, v in zip(labels, values):
        width = 0.0 if scale == 0 or v is None else max(0.0, min(100.0, abs(float(v)) / scale * 100))
        neg = " book-ex-neg" if v is not None and float(v) < 0 else ""
        out.append(f'<div class="book-ex-bar" role="listitem"><span class="book-ex-bar-label">{_e(label)}</span>'
                   f'<span class="book-ex-bar-track"><span class="book-ex-bar-fill{neg}" style="width:{width:.1f}%">'
                   f'</span></span><span class="book-ex-bar-value">{_e(format_number(v, view.fmt))}</span></div>')
    out.append("</div>")
    return "".join(out)


def _text(view: Text, fields: dict[str, Any]) -> str:
    return (f'<p class="book-ex-text"><span class="book-ex-text-label">{_e(view.label)}：</span>'
            f'<span class="book-ex-text-value">{_e(format_number(fields[view.field], view.fmt))}</span></p>')


def _scales(result: Explorable) -> list[float]:
    scales = []
    for view in result.show:
        if isinstance(view, Bars):
            if view.scale is not None:
                scales.append(float(view.scale))
            else:
                scales.append(max((abs(float(v)) for s in result.states for v in s[view.values] if v is not None),
                                  default=1.0))
        else:
            scales.append(0.0)
    return scales


def state_html(result: Explorable, index: int, scales: list[float] | None = None) -> str:
    """How one state is drawn (the same for the default drawing and for every state the controls pick)."""
    scales = scales if scales is not None else _scales(result)
    fields = result.states[index]
    parts = [_bars(v, fields, s) if isinstance(v, Bars) else _text(v, fields) for v, s in zip(result.show, scales)
             if isinstance(v, (Bars, Text))]
    return "".join(parts)


def _control(i: int, control: Any, uid: str) -> str:
    name = f"{uid}-c{i}"
    legend = _e(control.name)
    if len(control.values) > SLIDER_ABOVE:
        d = control.default_index
        return (f'<div class="book-ex-control book-ex-slider"><label for="{name}">{legend}</label>'
                f'<input type="range" id="{name}" name="{name}" min="0" max="{len(control.values) - 1}" step="1" '
                f'value="{d}" data-control="{i}" aria-valuetext="{_e(control.labels[d])}">'
                f'<output for="{name}" class="book-ex-output">{_e(control.labels[d])}</output></div>')
    options = "".join(
        f'<label class="book-ex-option"><input type="radio" name="{name}" value="{j}" data-control="{i}"'
        f'{" checked" if j == control.default_index else ""}><span>{_e(label)}</span></label>'
        for j, label in enumerate(control.labels))
    return f'<fieldset class="book-ex-control"><legend>{legend}</legend>{options}</fieldset>'


def explorable_html(result: Explorable, uid: str) -> str:
    """The explorable as raw HTML: controls (hidden until the script runs), the default state, the states."""
    scales = _scales(result)
    default = result.default_state
    combos = result.combos()
    counts = "、".join(f"{c.name}（{len(c.values)} 个取值）" for c in result.controls)
    # The first sentence names the state drawn: the script keeps its name in step with the controls, and on
    # screen, where the line above the drawing already names the current state, hides it (engine.css).
    note = (f'<span class="book-ex-note-shown">这里显示的是 <span class="book-ex-note-state">'
            f"{_e(result.state_name(combos[default]))}</span> 时的结果。</span>在网页上可以改变 {_e(counts)}，"
            f"共 {len(result.states)} 个状态；每一个都由构建时的代码算出，并像书里其他的数一样记录、核对。")
    data = {"labels": [c.labels for c in result.controls],
            "names": [c.name for c in result.controls],
            "states": [state_html(result, i, scales) for i in range(len(result.states))],
            "state_names": [result.state_name(c) for c in combos]}
    controls = "".join(_control(i, c, uid) for i, c in enumerate(result.controls))
    return (f'<div class="book-explorable" id="{_e(uid)}" markdown="0">\n'
            f'<form class="book-ex-controls" hidden aria-label="改变参数">{controls}</form>'
            f'<p class="book-ex-state" aria-live="polite">{_e(result.state_name(combos[default]))}</p>'
            f'<div class="book-ex-view">{state_html(result, default, scales)}</div>'
            f'<p class="book-ex-note">{note}</p>'
            f'<script type="application/json" class="book-ex-data">{_script_json(data)}</script>\n'
            "</div>\n")
