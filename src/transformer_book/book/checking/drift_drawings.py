"""Small SVG drawings of a figure's recorded and fresh numbers (lines, images, bars) for the drift report.

A record holds what a figure plots — each line's x and y, each image's array, each bar's height — not its
rendering: numbers are what the drift check compares, they are platform-independent and diff as text, while
the SVG bytes of one figure change with matplotlib's version and the fonts of the machine. So the report
redraws both sides from those numbers, with one style and one scale, and a third panel of their difference.
Pure Python writing SVG text: the report needs no matplotlib in the process that builds the site.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any, Sequence

W, H = 320, 200  # viewBox of one panel
PAD = 34
OLD_COLOUR = "#9e9e9e"
NEW_COLOUR = "#1565c0"


def _finite(values: Sequence[Any]) -> list[float]:
    out = []
    for v in values:
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            out.append(float(v))
    return out


def _span(values: list[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 1.0
    lo, hi = min(values), max(values)
    if hi == lo:
        pad = abs(lo) * 0.05 or 1.0
        return lo - pad, hi + pad
    return lo, hi


def _fmt(v: float) -> str:
    return f"{v:.3g}".replace("-", "−")


def _frame(title: str, body: str, x_span: tuple[float, float] | None, y_span: tuple[float, float] | None) -> str:
    ticks = []
    if y_span is not None:
        ticks.append(f'<text x="{PAD - 4}" y="{PAD + 4}" text-anchor="end">{_fmt(y_span[1])}</text>')
        ticks.append(f'<text x="{PAD - 4}" y="{H - PAD + 4}" text-anchor="end">{_fmt(y_span[0])}</text>')
    if x_span is not None:
        ticks.append(f'<text x="{PAD}" y="{H - PAD + 14}">{_fmt(x_span[0])}</text>')
        ticks.append(f'<text x="{W - PAD}" y="{H - PAD + 14}" text-anchor="end">{_fmt(x_span[1])}</text>')
    return (f'<svg class="panel" viewBox="0 0 {W} {H}" role="img" aria-label="{escape(title)}" '
            f'xmlns="http://www.w3.org/2000/svg" font-size="10" font-family="Book CJK, sans-serif">'
            f'<title>{escape(title)}</title>'
            f'<rect x="{PAD}" y="{PAD}" width="{W - 2 * PAD}" height="{H - 2 * PAD}" fill="none" stroke="#ccc"/>'
            f'<text x="{W / 2}" y="16" text-anchor="middle" font-size="12">{escape(title)}</text>'
            + "".join(ticks) + body + "</svg>")


def _scale(v: float, span: tuple[float, float], lo: float, hi: float) -> float:
    return lo + (v - span[0]) / (span[1] - span[0]) * (hi - lo)


def _polyline(xs: Sequence[Any], ys: Sequence[Any], xspan: tuple[float, float], yspan: tuple[float, float],
              colour: str, dashed: bool = False) -> str:
    points = []
    for x, y in zip(xs, ys):
        if not (isinstance(x, (int, float)) and isinstance(y, (int, float)) and math.isfinite(x) and math.isfinite(y)):
            continue
        px = _scale(float(x), xspan, PAD, W - PAD)
        py = _scale(float(y), yspan, H - PAD, PAD)
        points.append(f"{px:.1f},{py:.1f}")
    dash = ' stroke-dasharray="5 3"' if dashed else ""
    return f'<polyline points="{" ".join(points)}" fill="none" stroke="{colour}" stroke-width="1.6"{dash}/>'


def lines(old: dict[str, Any] | None, new: dict[str, Any] | None, title: str) -> list[str]:
    """Recorded (grey, dashed) and fresh (blue) line on one scale, and their difference where x matches."""
    old = old or {"x": [], "y": []}
    new = new or {"x": [], "y": []}
    xspan = _span(_finite([*old["x"], *new["x"]]))
    yspan = _span(_finite([*old["y"], *new["y"]]))
    body = (_polyline(old["x"], old["y"], xspan, yspan, OLD_COLOUR, dashed=True)
            + _polyline(new["x"], new["y"], xspan, yspan, NEW_COLOUR))
    legend = (f'<text x="{PAD}" y="{H - 6}" fill="{OLD_COLOUR}">- - 记录</text>'
              f'<text x="{PAD + 60}" y="{H - 6}" fill="{NEW_COLOUR}">—— 现在</text>')
    panels = [_frame(f"{title}：记录与现在", body + legend, xspan, yspan)]
    if list(old["x"]) == list(new["x"]) and old["x"]:
        diff = [(n - o) if isinstance(n, (int, float)) and isinstance(o, (int, float)) else math.nan
                for o, n in zip(old["y"], new["y"])]
        dspan = _span(_finite(diff) + [0.0])
        zero = _scale(0.0, dspan, H - PAD, PAD)
        body = (f'<line x1="{PAD}" x2="{W - PAD}" y1="{zero:.1f}" y2="{zero:.1f}" stroke="#bbb"/>'
                + _polyline(new["x"], diff, xspan, dspan, "#c62828"))
        panels.append(_frame(f"{title}：差（现在 − 记录）", body, xspan, dspan))
    return panels


def _colour(v: float, span: tuple[float, float], diverging: bool) -> str:
    if not math.isfinite(v):
        return "#ffffff"
    if diverging:  # blue (below zero) – white – red (above), symmetric
        m = max(abs(span[0]), abs(span[1])) or 1.0
        t = max(-1.0, min(1.0, v / m))
        if t >= 0:
            return f"rgb(255,{int(255 * (1 - t))},{int(255 * (1 - t))})"
        return f"rgb({int(255 * (1 + t))},{int(255 * (1 + t))},255)"
    t = (v - span[0]) / ((span[1] - span[0]) or 1.0)
    t = max(0.0, min(1.0, t))  # white → dark blue
    return f"rgb({int(255 - 230 * t)},{int(255 - 180 * t)},{int(255 - 60 * t)})"


def _grid(matrix: Sequence[Sequence[Any]], span: tuple[float, float], diverging: bool) -> str:
    rows = len(matrix)
    cols = max((len(r) for r in matrix), default=0)
    if not rows or not cols:
        return ""
    cw, ch = (W - 2 * PAD) / cols, (H - 2 * PAD) / rows
    cells = []
    for i, row in enumerate(matrix):
        for j, v in enumerate(row):
            value = float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan
            cells.append(f'<rect x="{PAD + j * cw:.2f}" y="{PAD + i * ch:.2f}" width="{cw + 0.05:.2f}" '
                         f'height="{ch + 0.05:.2f}" fill="{_colour(value, span, diverging)}"/>')
    return "".join(cells)


def _matrix(data: Any) -> list[list[Any]]:
    if isinstance(data, list) and data and not isinstance(data[0], list):
        return [data]  # a 1-d image: one row
    return data if isinstance(data, list) else []


def image(old: Any, new: Any, title: str) -> list[str]:
    """Recorded and fresh image on one colour scale, and their difference (red: larger now; blue: smaller)."""
    om, nm = _matrix(old), _matrix(new)
    span = _span(_finite([v for r in om + nm for v in r]))
    signed = span[0] < 0 < span[1]  # values of both signs: blue–white–red around zero, as the book draws them
    panels = [_frame(f"{title}：记录", _grid(om, span, signed), None, span),
              _frame(f"{title}：现在", _grid(nm, span, signed), None, span)]
    if om and nm and len(om) == len(nm) and all(len(a) == len(b) for a, b in zip(om, nm)):
        diff = [[(b - a) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else math.nan
                 for a, b in zip(ra, rb)] for ra, rb in zip(om, nm)]
        flat = _finite([v for r in diff for v in r])
        m = max((abs(v) for v in flat), default=0.0) or 1.0
        panels.append(_frame(f"{title}：差（红：现在更大）", _grid(diff, (-m, m), True), None, (-m, m)))
    return panels


def bars(old: Sequence[Any] | None, new: Sequence[Any] | None, title: str) -> list[str]:
    """Recorded (grey) and fresh (blue) bar heights side by side, bar by bar."""
    old, new = list(old or []), list(new or [])
    n = max(len(old), len(new))
    span = _span(_finite(old + new) + [0.0])
    slot = (W - 2 * PAD) / max(n, 1)
    zero = _scale(0.0, span, H - PAD, PAD)
    body = [f'<line x1="{PAD}" x2="{W - PAD}" y1="{zero:.1f}" y2="{zero:.1f}" stroke="#bbb"/>']
    for i in range(n):
        for k, (values, colour) in enumerate(((old, OLD_COLOUR), (new, NEW_COLOUR))):
            if i >= len(values) or not isinstance(values[i], (int, float)):
                continue
            top = _scale(float(values[i]), span, H - PAD, PAD)
            x = PAD + i * slot + slot * (0.1 + 0.4 * k)
            body.append(f'<rect x="{x:.1f}" y="{min(top, zero):.1f}" width="{slot * 0.38:.1f}" '
                        f'height="{abs(zero - top):.1f}" fill="{colour}"/>')
    legend = (f'<text x="{PAD}" y="{H - 6}" fill="{OLD_COLOUR}">■ 记录</text>'
              f'<text x="{PAD + 50}" y="{H - 6}" fill="{NEW_COLOUR}">■ 现在</text>')
    return [_frame(f"{title}：记录与现在", "".join(body) + legend, None, span)]


def element(name: str, old: Any, new: Any, title: str) -> list[str]:
    """The panels of one plotted element, by the kind its name says (``line3``, ``image0``, ``bars1``)."""
    if name.startswith("line"):
        return lines(old, new, title)
    if name.startswith("image"):
        return image(old, new, title)
    if name.startswith("bars"):
        return bars(old, new, title)
    return []
