"""What a page's notebook calls in Jupyter (the notebooks are written by :mod:`.page_notebook`).

A page's notebook runs the page's snippets in one kernel, in page order, with what the build gives each
snippet: the same seeds and thread count (reset before every snippet), the snippet's folder on ``sys.path``
(for its ``_*.py`` helpers), and the trained models of the snippets it ``REQUIRES``, taken from the book's
result cache (or trained, if this machine has not built the book) by :func:`built`::

    from transformer_book.book.cli.in_jupyter import built, run, setup, show

    setup("lecture07")
    results = {}
    results["soft_lookup"] = run(compute)         # compute() as defined by the snippet's cell above
    show(results["soft_lookup"], "lookup")        # the table, as on the page

Every shown result also carries its data under :data:`RESULT_MIME` (``{"snippet", "key", "result"}``, the
result's record as JSON text), so a test — or a reader's script — can compare what the notebook showed with
the book's records.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

from transformer_book.book import artifacts
from transformer_book.book.results import MEASURED, Block, Claim, Explorable, Figure, Result, Table, Value, format_number

RESULT_MIME = "application/vnd.transformer-book.result+json"

_ROOT: list[Path] = []
_PROVIDED: dict[str, dict[str, str]] = {}


def _find_root() -> Path:
    candidates = []
    if os.environ.get("BOOK_ROOT"):
        candidates.append(Path(os.environ["BOOK_ROOT"]))
    candidates += [Path.cwd(), Path(__file__).resolve()]
    for start in candidates:
        for p in (start, *start.parents):
            if (p / "mkdocs.yml").is_file() and (p / "snippets").is_dir():
                return p
    raise RuntimeError("找不到本书的项目目录：请在项目目录（有 mkdocs.yml 的那个文件夹）里打开这个 notebook，"
                       "或者把环境变量 BOOK_ROOT 设成它的路径")


def setup(part: str) -> Path:
    """Find the book's project, put ``snippets/<part>`` on ``sys.path``; returns the project root."""
    root = _find_root()
    folder = str(root / "snippets" / part)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    _ROOT[:] = [root]
    return root


def _root() -> Path:
    return _ROOT[0] if _ROOT else setup("")


def run(compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Call a snippet's ``compute()`` as the build does: fixed seeds and threads first; figures are turned
    into SVG (and closed, so Jupyter does not show them a second time)."""
    import matplotlib

    from transformer_book.book.execution.worker import finalize_figure, seed_everything

    seed_everything()
    matplotlib.rcdefaults()  # keeps the notebook's backend; resets what an earlier snippet changed
    matplotlib.rcParams["svg.hashsalt"] = "transformer-book"
    matplotlib.rcParams["svg.fonttype"] = "path"
    results = compute()
    for value in results.values():
        if isinstance(value, Figure) and value.figure is not None:
            finalize_figure(value)
    return results


def built(snippets: Iterable[str], retrain: bool = False) -> dict[str, dict[str, Result]]:
    """The results of whole snippets as the book's build has them: from the result cache when this machine
    has built the book with the same sources, computed here otherwise (``retrain=True``: always computed,
    e.g. to train the models yourself). Their trained models become available to :func:`artifact` calls of
    the snippets that come after."""
    from transformer_book.book.cli.project import open_session

    wanted = list(snippets)
    session = open_session(_root())
    state = session.build(session.command_options(fresh=retrain), only=wanted)
    failed = [f"{sid}: {st.error.message if st.error else st.status}"
              for sid, st in state.snippets.items() if st.status not in ("cached", "ran")]
    if failed:
        raise RuntimeError("这些片段没能算出结果：" + "；".join(failed))
    for sid, st in state.snippets.items():
        entry = state.entries.get(sid)
        if entry is not None:
            _PROVIDED[sid] = session.cache.artifact_files(entry)
    artifacts.provide(dict(_PROVIDED))
    return {sid: state.snippets[sid].results for sid in wanted}


class Shown:
    """One result as Jupyter displays it: the page's rendering (Markdown, SVG) and its data."""

    def __init__(self, snippet: str, key: str, result: Result, fmt: str | None = None) -> None:
        self.snippet, self.key, self.result, self.fmt = snippet, key, result, fmt

    def _text(self) -> tuple[str, str]:
        r = self.result
        if isinstance(r, Value):
            text = format_number(r.value, self.fmt if self.fmt is not None else r.fmt)
            mark = "（实测，随机器而变）" if r.kind == MEASURED else ""
            return f"{self.key} = {text}{mark}", f"`{self.key}` = **{text}**{mark}"
        if isinstance(r, Table):
            md = r.to_markdown()
            return md, (f"**{r.caption}**\n\n" if r.caption else "") + md
        if isinstance(r, Claim):
            text = ("✓ " if r.holds else "✗ 不成立：") + r.statement
            return text, text
        if isinstance(r, Block):
            return r.text, r.text
        if isinstance(r, Explorable):  # every state, as the page's controls would show them
            lines = [f"{r.state_name(c)}：" + "；".join(f"{k} = {v}" for k, v in s.items())
                     for c, s in zip(r.combos(), r.states)]
            return "\n".join(lines), "\n".join(f"- {line}" for line in lines)
        return self.key, self.key

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        plain, markdown = self._text()
        bundle: dict[str, Any] = {"text/plain": plain}
        if isinstance(self.result, Figure):
            bundle["image/svg+xml"] = self.result.svg
        elif isinstance(self.result, Explorable):  # the page's drawing of the default state, and the list
            from transformer_book.book.rendering.interactive import state_html

            r = self.result
            bundle["text/html"] = (f"<p>{r.state_name(r.combos()[r.default_state])}</p>"
                                   + state_html(r, r.default_state))
            bundle["text/markdown"] = markdown
        elif isinstance(self.result, Block) and not self.result.markdown:
            bundle["text/html"] = self.result.text
        else:
            bundle["text/markdown"] = markdown
        # The record as JSON text: Jupyter's own JSON would turn NaN (a legitimate result) into "nan".
        bundle[RESULT_MIME] = {"snippet": self.snippet, "key": self.key,
                               "result": json.dumps(self.result.to_data() if isinstance(self.result, Block)
                                                    else self.result.to_record(), ensure_ascii=False)}
        return bundle


def show(results: dict[str, Result], *keys: str, snippet: str = "", fmt: dict[str, str] | None = None) -> None:
    """Display ``results[key]`` for each key, in order, as the page shows it."""
    from IPython.display import display

    for key in keys:
        if key not in results:
            raise KeyError(f"没有结果 {key!r}（有：{', '.join(results)}）")
        display(Shown(snippet, key, results[key], (fmt or {}).get(key)))
