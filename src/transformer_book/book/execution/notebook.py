"""Notebook pages as snippets: the engine executes a notebook's code cells and records its numbers.

A notebook page (``docs/**/*.ipynb``, rendered by mkdocs-jupyter) is a plain-Python notebook a reader can
run in Jupyter. In the build it is executed here instead of by a Jupyter kernel, which gives it everything
a snippet has: content-addressed caching (its source, the project modules it imports, its data files),
fixed seeds and threads, errors that fail the build with ``notebook:cell N:line M``, and records of its
numbers with drift checks. A cell states the numbers to record with :func:`record`, and the statements
about them that the page makes with :func:`claim`::

    from transformer_book.book import claim, record
    val_loss = record("val_loss", val_loss, ".3f", kind="trained")  # in Jupyter: returns the value
    claim("beats_unigram", less(val_loss=val_loss, unigram=unigram), "训练后的模型比只看字频的基线好")

The executed notebook (with outputs: printed text, the last expression, matplotlib figures as PNG) is what
mkdocs-jupyter renders and what readers download.
"""

from __future__ import annotations

import ast
import base64
import contextlib
import io
import json
from pathlib import Path
from typing import Any

from transformer_book.book.results import EXACT, Claim, Result, Tolerance, Value

# Set by the engine while a notebook runs: name -> result. None in Jupyter.
_RECORDED: dict[str, Any] | None = None


def _keep(what: str, name: str, result: Any) -> None:
    if _RECORDED is None:
        return
    if not name.isidentifier():
        raise ValueError(f"{what}(): name must be an identifier, got {name!r}")
    if name in _RECORDED:
        raise ValueError(f"{what}(): {name!r} recorded twice")
    _RECORDED[name] = result


def record(name: str, value: Any, fmt: str = "", tolerance: Tolerance | None = None, kind: str = EXACT) -> Any:
    """Record a number (or a result of any kind, e.g. a ``Table``) that this notebook shows; returns ``value`` unchanged.

    ``kind`` as for :class:`~.results.Value` (``"trained"`` for anything that depends on float order).
    Outside the book's build (in Jupyter) this does nothing else, so a notebook runs as-is.
    """
    if _RECORDED is not None:
        _keep("record", name, value if isinstance(value, Result) else Value(value, fmt, tolerance or Tolerance(), kind))
    return value


def claim(name: str, check: Any, statement: str, uncertain: str = "") -> bool:
    """Record a statement the notebook's text makes about its results, decided by a comparison
    (:mod:`.compare`); returns whether it holds.

    In the build a claim that does not hold fails the build with the notebook's name; in Jupyter a claim
    that does not hold prints a warning, so the reader sees which sentence their run contradicts.
    """
    result = Claim(statement, check, uncertain)
    if _RECORDED is not None:
        _keep("claim", name, result)
    elif not result.holds:
        print(f"注意：本次运行与正文的这句话不符——{statement}（{result.describe_inputs()}）")
    return result.holds


class NotebookCellError(Exception):
    """An exception raised by a cell, with the cell number (1-based, counting code cells) and line."""

    def __init__(self, cell: int, line: int, original: BaseException) -> None:
        super().__init__(f"cell {cell}, line {line}: {type(original).__name__}: {original}")
        self.cell, self.line, self.original = cell, line, original


def _cell_filename(path: Path, n: int) -> str:
    return f"{path}#cell{n}"


def _figure_outputs() -> list[dict[str, Any]]:
    import matplotlib.pyplot as plt

    outputs = []
    for num in plt.get_fignums():
        buf = io.BytesIO()
        plt.figure(num).savefig(buf, format="png", dpi=96, bbox_inches="tight", metadata={"Software": None})
        outputs.append({
            "output_type": "display_data",
            "data": {"image/png": base64.b64encode(buf.getvalue()).decode("ascii"), "text/plain": ["<Figure>"]},
            "metadata": {},
        })
    plt.close("all")
    return outputs


def execute(path: Path, text: str | None = None) -> tuple[dict[str, Any], str]:
    """Run every code cell of the notebook at ``path`` (its JSON ``text``, if given: the bytes the cache key
    hashed) in one namespace.

    Returns the recorded results and the executed notebook (JSON text with outputs). Raises
    :class:`NotebookCellError` for the first failing cell.
    """
    global _RECORDED
    nb = json.loads(path.read_text(encoding="utf-8") if text is None else text)
    namespace: dict[str, Any] = {"__name__": "__main__", "__file__": str(path)}
    _RECORDED = {}
    count = 0
    try:
        for cell in nb.get("cells", []):
            if cell.get("cell_type") != "code":
                continue
            count += 1
            source = "".join(cell.get("source", []))
            outputs: list[dict[str, Any]] = []
            stdout = io.StringIO()
            try:
                tree = ast.parse(source, filename=_cell_filename(path, count))
                last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                with contextlib.redirect_stdout(stdout):
                    exec(compile(tree, _cell_filename(path, count), "exec"), namespace)
                    value = None
                    if last is not None:
                        expr = ast.Expression(last.value)
                        value = eval(compile(expr, _cell_filename(path, count), "eval"), namespace)
            except BaseException as exc:  # noqa: BLE001 - located and re-raised
                line = getattr(exc, "lineno", None) if isinstance(exc, SyntaxError) else None
                if line is None:
                    tb = exc.__traceback__
                    while tb is not None:
                        if tb.tb_frame.f_code.co_filename == _cell_filename(path, count):
                            line = tb.tb_lineno
                        tb = tb.tb_next
                raise NotebookCellError(count, line or 0, exc) from exc
            if stdout.getvalue():
                outputs.append({"output_type": "stream", "name": "stdout", "text": stdout.getvalue().splitlines(True)})
            outputs.extend(_figure_outputs())
            if value is not None:
                outputs.append({
                    "output_type": "execute_result",
                    "execution_count": count,
                    "data": {"text/plain": repr(value).splitlines(True)},
                    "metadata": {},
                })
            cell["outputs"] = outputs
            cell["execution_count"] = count
        return dict(_RECORDED), json.dumps(nb, ensure_ascii=False, indent=1)
    finally:
        _RECORDED = None
