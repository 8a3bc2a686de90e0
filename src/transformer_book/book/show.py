"""Printing a snippet's results in a terminal (``python snippets/…/x.py`` and ``… run <snippet>``)."""

from __future__ import annotations

from typing import Any, Callable

from .results import Figure, Table, Value, format_number


def show(results: dict[str, Any]) -> None:
    for key, r in results.items():
        if isinstance(r, Value):
            print(f"{key} = {format_number(r.value, r.fmt)}")
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
    print()


def _width(s: str) -> int:
    return sum(2 if ord(ch) > 0x2E80 else 1 for ch in s)


def _pad(s: str, w: int) -> str:
    return s + " " * (w - _width(s))


def main(compute: Callable[[], dict[str, Any]]) -> None:
    """``if __name__ == "__main__": main(compute)`` at the end of a snippet: run it as the engine would."""
    import inspect
    from pathlib import Path

    from .execute import Task, run_snippet

    path = Path(inspect.getfile(compute)).resolve()
    root = next((p for p in path.parents if (p / "mkdocs.yml").exists()), path.parent)
    import transformer_book

    from .session import BookSession

    sid = path.relative_to(root / "snippets").with_suffix("").as_posix() if path.is_relative_to(root / "snippets") else path.stem
    artifacts = ()
    if (root / "snippets").is_dir() and path.is_relative_to(root / "snippets"):
        session = BookSession(root, root / "snippets", root / ".book-cache", root / ".book-cache" / "report")
        artifacts = session.requirements(sid)
    task = Task(sid, str(path), str(root), str(Path(transformer_book.__file__).resolve().parent), artifacts)
    out = run_snippet(task, capture=False)
    if out.error is not None:
        print(out.error.traceback)
        raise SystemExit(f"{out.error.location()}: {out.error.message}")
    show(out.results)
    print(f"({out.seconds:.2f} s)")
