"""Printing a snippet's results in a terminal (``python -m transformer_book run <snippet>``)."""

from __future__ import annotations

from typing import Any

from transformer_book.book.results import Block, Claim, Figure, Table, Value, format_number


def show(results: dict[str, Any]) -> None:
    for key, r in results.items():
        if isinstance(r, Value):
            mark = f"  （{r.kind}）" if r.kind != "exact" else ""
            print(f"{key} = {format_number(r.value, r.fmt)}{mark}")
        elif isinstance(r, Claim):
            verdict = "成立" if r.holds else "不成立！"
            inputs = r.describe_inputs()
            print(f"{key}: {verdict} — {r.statement}" + (f"（{inputs}）" if inputs else ""))
        elif isinstance(r, Table):
            print(f"\n{key}:" + (f" {r.caption}" if r.caption else ""))
            cells = [list(r.columns)] + [[format_number(v, f) for v, f in zip(row, r.formats)] for row in r.rows]
            widths = [max(_width(row[j]) for row in cells) for j in range(len(r.columns))]
            for i, row in enumerate(cells):
                print("  " + "  ".join(_pad(v, w) for v, w in zip(row, widths)))
                if i == 0:
                    print("  " + "  ".join("-" * w for w in widths))
        elif isinstance(r, Figure):
            n = sum(1 for _ in r.numbers(key))
            where = " (SVG rendered)" if r.svg else ""
            print(f"\n{key}: figure{where}, {n} plotted numbers" + (f" — {r.caption}" if r.caption else ""))
        elif isinstance(r, Block):
            print(f"\n{key}: block of {len(r.text)} characters (sha256 {r.sha256[:12]}…)")
    print()


def _width(s: str) -> int:
    return sum(2 if ord(ch) > 0x2E80 else 1 for ch in s)


def _pad(s: str, w: int) -> str:
    return s + " " * (w - _width(s))
