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

A long snippet's cell defines its ``compute()`` too, then takes its results from the book's cache with
:func:`computed` (or computes them here: outside a checkout of the book, or with ``retrain=True``).

Two cell magics make the package's code something the reader edits (registered by :func:`setup`):

- ``%%define transformer_book.chapter20.scratch`` above a class or function the page shows: the cell runs in that
  module's namespace, so the new definition replaces the package's — in that module, in every module of the
  package that imported it by name, and in the module-level tables that list it. What the snippets call next
  (a training, a sampler) uses the reader's version;
- ``%%module _helper`` above a snippet's helper module (``snippets/<part>/_helper.py``): the module, made from
  the cell, so the notebook needs nothing of the book's project — with the package installed it runs anywhere.

Every shown result also carries its data under :data:`RESULT_MIME` (``{"snippet", "key", "result"}``, the
result's record as JSON text), so a test — or a reader's script — can compare what the notebook showed with
the book's records.
"""

from __future__ import annotations

import __future__
import importlib
import json
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any, Callable, Iterable

from transformer_book.book import artifacts
from transformer_book.book.results import Result

RESULT_MIME = "application/vnd.transformer-book.result+json"

_ROOT: list[Path] = []
_PROVIDED: dict[str, dict[str, str]] = {}
_COMPUTED: set[str] = set()  # snippets whose artifacts this kernel computed (run(…, snippet))


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


def setup(part: str) -> Path | None:
    """Find the book's project and put ``snippets/<part>`` on ``sys.path``; returns the project root, or None
    when the notebook runs outside a checkout of the book (then every snippet is computed in this kernel: the
    package holds the code and data, the notebook the snippets and their helpers). Registers the cell magics."""
    _register_magics()
    try:
        root = _find_root()
    except RuntimeError:
        _ROOT.clear()
        return None
    folder = str(root / "snippets" / part)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    _ROOT[:] = [root]
    return root


def _root() -> Path:
    return _ROOT[0] if _ROOT else _find_root()


def _register_magics() -> None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - a notebook always has IPython
        return
    shell = get_ipython()
    if shell is not None:
        shell.register_magic_function(lambda line, cell: define(line.strip(), cell, shell.user_ns), "cell", "define")
        shell.register_magic_function(lambda line, cell: module(line.strip(), cell), "cell", "module")


def define(module_name: str, source: str, namespace: dict[str, Any] | None = None) -> list[str]:
    """Run ``source`` in the namespace of ``module_name`` (a module of the package) and let what it defines
    replace the old objects wherever the package's modules hold them: as a module attribute of the same name
    (``from … import name`` made one in the importing module) or as a value of a module-level dict (a table of
    classes by name). Returns the names it (re)defined; ``namespace`` (the kernel's) gets them too.

    The source is compiled with the module's own ``from __future__`` features (its annotations stay
    unevaluated, as in the file)."""
    target = importlib.import_module(module_name)
    flags = sum(f.compiler_flag for name in __future__.all_feature_names
                if (f := getattr(__future__, name)) is vars(target).get(name))
    before = dict(vars(target))
    exec(compile(source, f"<{module_name}>", "exec", flags=flags, dont_inherit=True), vars(target))  # noqa: S102
    changed = [n for n, v in vars(target).items() if not n.startswith("__") and before.get(n) is not v]
    package = module_name.split(".", 1)[0] + "."
    holders = [m for k, m in list(sys.modules.items()) if k.startswith(package) and m is not None]
    for name in [n for n in changed if before.get(n) is not None]:
        old, new = before[name], vars(target)[name]
        for m in holders:
            if m is not target and vars(m).get(name) is old:
                setattr(m, name, new)
            for table in [v for v in vars(m).values() if type(v) is dict]:
                for key in [k for k, v in table.items() if v is old]:
                    table[key] = new
    if namespace is not None:
        namespace.update({n: vars(target)[n] for n in changed})
    return changed


def module(name: str, source: str) -> types.ModuleType:
    """The module ``name`` made from ``source`` (a snippet's helper, as its file has it), importable from now on."""
    made = types.ModuleType(name)
    made.__file__ = f"<{name}>"
    sys.modules[name] = made
    exec(compile(source, f"<{name}>", "exec", dont_inherit=True), vars(made))  # noqa: S102
    return made


def run(compute: Callable[[], dict[str, Any]], snippet: str = "") -> dict[str, Any]:
    """Call a snippet's ``compute()`` as the build does: fixed seeds and threads first; figures are turned
    into SVG (and closed, so Jupyter does not show them a second time). The artifacts it returns are handed to
    the snippets after it that ``REQUIRES`` ``snippet``, as the build hands them over."""
    import matplotlib

    from transformer_book.book.execution.worker import seed_everything

    seed_everything()
    matplotlib.rcdefaults()  # keeps the notebook's backend; resets what an earlier snippet changed
    matplotlib.rcParams["svg.hashsalt"] = "transformer-book"
    matplotlib.rcParams["svg.fonttype"] = "path"
    results = compute()
    for value in results.values():
        value.finalize()
    made = {k: detached[0] for k, v in results.items() if (detached := v.detach()) is not None}
    if snippet and made:
        folder = Path(tempfile.mkdtemp(prefix="book-artifacts-"))
        files = {}
        for key, blob in made.items():
            files[key] = str(folder / key)
            Path(files[key]).write_bytes(blob)
        _PROVIDED[snippet] = files
        _COMPUTED.add(snippet)
        artifacts.provide(dict(_PROVIDED))
    return results


def computed(snippet: str, compute: Callable[[], dict[str, Any]], retrain: bool = False) -> dict[str, Result]:
    """A long snippet's results: from the book's result cache, as :func:`built` gives them, in a checkout of the
    book; computed in this kernel by :func:`run` outside one, or with ``retrain=True`` — then with the
    definitions of the cells above, e.g. a model class the reader changed."""
    if retrain or not _ROOT:
        return run(compute, snippet)
    return built([snippet])[snippet]


def require(snippets: Iterable[str]) -> None:
    """Make the artifacts of ``snippets`` available to the snippet below: those computed in this kernel as
    they are, the others from the book's result cache (:func:`built`)."""
    missing = [s for s in snippets if s not in _COMPUTED]
    if missing and not _ROOT:
        raise RuntimeError("下面的片段要用 " + "、".join(missing) + " 的结果：先运行本 notebook 里算它们的那几格")
    if missing:
        built(missing)


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
            _COMPUTED.discard(sid)
    artifacts.provide(dict(_PROVIDED))
    return {sid: state.snippets[sid].results for sid in wanted}


class Shown:
    """One result as Jupyter displays it: the page's rendering (Markdown, SVG) and its data."""

    def __init__(self, snippet: str, key: str, result: Result, fmt: str | None = None) -> None:
        self.snippet, self.key, self.result, self.fmt = snippet, key, result, fmt

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        from transformer_book.book.rendering import interactive

        bundle = dict(self.result.notebook(self.key, self.fmt, interactive))  # as the result's kind shows it
        # The record as JSON text: Jupyter's own JSON would turn NaN (a legitimate result) into "nan".
        bundle[RESULT_MIME] = {"snippet": self.snippet, "key": self.key,
                               "result": json.dumps(self.result.notebook_record(), ensure_ascii=False)}
        return bundle


def show(results: dict[str, Result], *keys: str, snippet: str = "", fmt: dict[str, str] | None = None) -> None:
    """Display ``results[key]`` for each key, in order, as the page shows it."""
    from IPython.display import display

    for key in keys:
        if key not in results:
            raise KeyError(f"没有结果 {key!r}（有：{', '.join(results)}）")
        display(Shown(snippet, key, results[key], (fmt or {}).get(key)))
