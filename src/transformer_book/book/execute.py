"""Running snippets: one fresh process per snippet, in parallel, with fixed seeds and thread counts.

Processes come from a *forkserver* that has already imported torch, numpy and matplotlib, so a snippet
starts in milliseconds instead of paying two seconds of imports — yet every snippet gets a process of its
own, which is what lets us see exactly which project modules it imported (``sys.modules`` after the run)
and keeps one snippet's global state (seeds, rcParams, caches) away from the next.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import logging
import multiprocessing
import os
import random
import sys
import time
import traceback
import warnings
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from .results import RESULT_TYPES, Artifact, Figure

SEED = 0
THREADS = 1  # per snippet; results must not depend on how many workers ran side by side
ENGINE_DIR = Path(__file__).resolve().parent


@dataclass
class SnippetError:
    """Where and why a snippet failed: ``file:line`` of the innermost frame in the snippet itself."""

    message: str  # "ValueError: …"
    file: str
    line: int
    traceback: str
    deepest: str = ""  # innermost project frame, when the error was raised inside the library
    cell: int | None = None  # for a notebook: which code cell (1-based)

    def location(self) -> str:
        if self.cell is not None:
            return f"{self.file}:cell {self.cell}:{self.line}"
        return f"{self.file}:{self.line}"


@dataclass
class Outcome:
    snippet: str
    results: dict[str, Any] = field(default_factory=dict)
    deps: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    error: SnippetError | None = None
    budget: float | None = None
    stdout: str = ""


@dataclass(frozen=True)
class Task:
    snippet: str
    path: str
    project_root: str
    package_dir: str  # where transformer_book lives (tracked even if installed elsewhere)
    artifacts: tuple[tuple[str, str], ...] = ()  # (required snippet, its cache entry file)


# --------------------------------------------------------------------------------------------------
# In the worker
# --------------------------------------------------------------------------------------------------


def _seed_everything() -> None:
    random.seed(SEED)
    try:
        import numpy as np

        np.random.seed(SEED)
    except ImportError:
        pass
    try:
        import torch

        torch.manual_seed(SEED)
        torch.set_num_threads(THREADS)
    except ImportError:
        pass


def _prepare_matplotlib() -> None:
    try:
        import matplotlib
    except ImportError:
        return
    matplotlib.use("Agg", force=True)
    matplotlib.rcdefaults()
    # Deterministic SVG: fixed ids, no timestamp; text as paths so no font is needed in the browser.
    matplotlib.rcParams["svg.hashsalt"] = "transformer-book"
    matplotlib.rcParams["svg.fonttype"] = "path"


def _is_tracked(path: Path, roots: list[Path], excluded: list[Path]) -> bool:
    if any(path.is_relative_to(e) for e in excluded):
        return False
    return any(path.is_relative_to(r) for r in roots)


def _dependencies(task: Task, data_files: Iterable[str]) -> dict[str, str]:
    """Every project source file the snippet actually imported, plus the data files declared."""
    from .cache import sha256_bytes

    root = Path(task.project_root)
    roots = [root, Path(task.package_dir)]
    excluded = [ENGINE_DIR, root / ".venv"]
    files: set[Path] = set()
    for mod in list(sys.modules.values()):
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str) or not os.path.isabs(f):
            continue  # some extension modules report a bare file name
        p = Path(f).resolve()
        if p.suffix != ".py" or not _is_tracked(p, roots, excluded):
            continue
        if "site-packages" in p.parts and not p.is_relative_to(Path(task.package_dir)):
            continue
        if p != Path(task.path).resolve():
            files.add(p)
        # A project module may declare the data files it reads (fonts, corpora) in BOOK_DATA_FILES.
        declared = mod.__dict__.get("BOOK_DATA_FILES", ())
        if isinstance(declared, (list, tuple)):
            files.update(Path(extra).resolve() for extra in declared if isinstance(extra, str))
    for d in data_files:
        files.add((root / d).resolve())
    deps = {}
    for p in sorted(files):
        rel = p.relative_to(root).as_posix() if p.is_relative_to(root) else str(p)
        deps[rel] = sha256_bytes(p.read_bytes()) if p.exists() else "missing"
    return deps


def _locate(exc: BaseException, snippet_path: Path, project_root: Path) -> SnippetError:
    tb = traceback.extract_tb(exc.__traceback__)
    text = "".join(traceback.format_exception(exc))
    message = "".join(traceback.format_exception_only(exc)).strip()
    snippet_frames = [f for f in tb if Path(f.filename).resolve() == snippet_path]
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).resolve() == snippet_path:
        file, line = snippet_path, exc.lineno or 0
    elif snippet_frames:
        file, line = snippet_path, snippet_frames[-1].lineno or 0
    else:
        file, line = snippet_path, 0
    deepest = ""
    project_frames = [
        f for f in tb if Path(f.filename).resolve().is_relative_to(project_root) and Path(f.filename).resolve() != snippet_path
    ]
    if project_frames and snippet_frames and tb[-1] is not snippet_frames[-1]:
        f = project_frames[-1]
        deepest = f"{Path(f.filename).resolve().relative_to(project_root).as_posix()}:{f.lineno}"
    rel = file.relative_to(project_root).as_posix() if file.is_relative_to(project_root) else str(file)
    return SnippetError(message=message, file=rel, line=line, traceback=text, deepest=deepest)


def finalize_figure(fig: Figure) -> None:
    """Render the matplotlib figure to SVG and extract the numbers it plots; drop the live object."""
    import matplotlib.pyplot as plt
    import numpy as np

    mfig = fig.figure
    buf = io.StringIO()
    mfig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    fig.svg = buf.getvalue()
    plotted: dict[str, Any] = {}
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
        for i, coll in enumerate(ax.collections):
            arr = getattr(coll, "get_array", lambda: None)()
            offs = coll.get_offsets() if hasattr(coll, "get_offsets") else None
            if arr is not None:
                axd[f"mesh{i}"] = np.asarray(arr, float).tolist()
            elif offs is not None and len(offs):
                axd[f"points{i}"] = np.asarray(offs, float).tolist()
        if axd:
            plotted[f"ax{a}"] = axd
    fig.plotted = plotted
    plt.close(mfig)
    fig.figure = None


class _MissingGlyphs(logging.Handler):
    """Collects mathtext's "Font 'default' does not have a glyph" messages (logged, not warned)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "does not have a glyph" in msg:
            self.messages.append(msg)


NOTEBOOK_OUTPUT = "executed_notebook"  # the result that carries a notebook's executed copy


class _FreshSourceLoader(importlib.machinery.SourceFileLoader):
    """Loads a module from its source, ignoring any .pyc (see :func:`_compile_project_modules_from_source`)."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)


class _ProjectSourceFinder(importlib.abc.MetaPathFinder):
    def __init__(self, roots: list[Path], excluded: list[Path]) -> None:
        self.roots, self.excluded = roots, excluded

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        origin = Path(spec.origin).resolve()
        if "site-packages" in origin.parts or not _is_tracked(origin, self.roots, self.excluded):
            return None
        spec.loader = _FreshSourceLoader(fullname, spec.origin)
        return spec


def _compile_project_modules_from_source(task: Task) -> None:
    """A .pyc is trusted if the source's mtime (whole seconds) and size match, so an edit that keeps the
    size within the same second would run stale code. Project modules are small: compile them from source;
    libraries keep their bytecode caches."""
    root = Path(task.project_root).resolve()
    finder = _ProjectSourceFinder([root, Path(task.package_dir)], [ENGINE_DIR, root / ".venv"])
    sys.meta_path.insert(0, finder)


def _run_script(task: Task, path: Path, out: Outcome) -> tuple[dict[str, Any], list[str]]:
    """Import a snippet file and call its compute(); returns the results and its DATA_FILES."""
    spec = importlib.util.spec_from_file_location(f"book_snippet_{task.snippet.replace('/', '_')}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out.budget = getattr(module, "BUDGET_SECONDS", None)
    compute: Callable[[], Any] | None = getattr(module, "compute", None)
    if not callable(compute):
        raise TypeError(f"{task.snippet}: a snippet must define compute() returning a dict of results")
    results = compute()
    check_results(task.snippet, results)
    return results, list(getattr(module, "DATA_FILES", []))


def _run_notebook(path: Path) -> dict[str, Any]:
    """Execute a notebook page; its recorded values plus the executed notebook as an artifact."""
    from .notebook import execute as execute_notebook

    recorded, executed = execute_notebook(path)
    return {**recorded, NOTEBOOK_OUTPUT: Artifact(executed)}


def _notebook_error(exc: Any, path: Path, root: Path) -> SnippetError:
    orig = exc.original
    return SnippetError(
        message="".join(traceback.format_exception_only(orig)).strip(),
        file=path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path),
        line=exc.line,
        traceback="".join(traceback.format_exception(orig)),
        cell=exc.cell,
    )


def run_snippet(task: Task, capture: bool = True) -> Outcome:
    """Execute one snippet (or notebook page) in this (fresh) process and return its results — never raises.

    ``capture=False`` lets the snippet print to the terminal (``python -m transformer_book run``).
    """
    from . import artifacts
    from .notebook import NotebookCellError

    path = Path(task.path).resolve()
    root = Path(task.project_root).resolve()
    out = Outcome(snippet=task.snippet)
    captured = io.StringIO()
    start = time.perf_counter()
    data_files: list[str] = []
    glyphs = _MissingGlyphs()
    logging.getLogger("matplotlib").addHandler(glyphs)
    _compile_project_modules_from_source(task)
    artifacts._PATHS.clear()
    artifacts._PATHS.update(dict(task.artifacts))
    try:
        _seed_everything()
        _prepare_matplotlib()
        with warnings.catch_warnings():
            # A Chinese label drawn in a font without the glyph would show as a box: fail instead.
            warnings.filterwarnings("error", message=r"Glyph \d+ .*missing from font")
            with contextlib.redirect_stdout(captured) if capture else contextlib.nullcontext():
                if path.suffix == ".ipynb":
                    results = _run_notebook(path)
                else:
                    results, data_files = _run_script(task, path, out)
                for value in results.values():
                    if isinstance(value, Figure):
                        finalize_figure(value)
                    elif isinstance(value, Artifact):
                        value.pack()
                if glyphs.messages:
                    raise ValueError(
                        "a figure has characters no font can draw (mathtext cannot fall back to the Chinese "
                        "font: keep Chinese and $math$ in separate labels): " + "; ".join(sorted(set(glyphs.messages))[:5])
                    )
        out.results = results
    except NotebookCellError as exc:
        out.error = _notebook_error(exc, path, root)
    except BaseException as exc:  # noqa: BLE001 - everything is reported, with its location
        out.error = _locate(exc, path, root)
    finally:
        logging.getLogger("matplotlib").removeHandler(glyphs)
    out.seconds = time.perf_counter() - start
    out.stdout = captured.getvalue()
    try:
        out.deps = _dependencies(task, data_files)
    except Exception as exc:  # noqa: BLE001
        out.error = out.error or SnippetError(f"cannot hash dependencies: {exc}", task.snippet, 0, "")
    return out


def check_results(snippet: str, results: Any) -> None:
    if not isinstance(results, dict) or not results:
        raise TypeError(f"{snippet}: compute() must return a non-empty dict {{name: Table | Figure | Value}}")
    for key, value in results.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise TypeError(f"{snippet}: result names must be identifiers, got {key!r}")
        if not isinstance(value, RESULT_TYPES):
            raise TypeError(f"{snippet}: result {key!r} is a {type(value).__name__}, not a Table, Figure, Value or Artifact")


# --------------------------------------------------------------------------------------------------
# In the parent
# --------------------------------------------------------------------------------------------------

_CONTEXT: multiprocessing.context.BaseContext | None = None


def _context() -> multiprocessing.context.BaseContext:
    global _CONTEXT
    if _CONTEXT is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["transformer_book.book._preload"])
        else:  # pragma: no cover - not on Linux
            ctx = multiprocessing.get_context("spawn")
        _CONTEXT = ctx
    return _CONTEXT


def warm_up() -> None:
    """Start the forkserver (and its preloaded libraries) ahead of the first snippet run."""
    ctx = _context()
    if ctx.get_start_method() == "forkserver":
        from multiprocessing import forkserver

        forkserver.ensure_running()


def run_many(
    tasks: list[Task], workers: int | None = None, expected: dict[str, float] | None = None
) -> dict[str, Outcome]:
    """Run tasks in parallel, longest (by last known time) first; a crashed worker is reported, not fatal."""
    if not tasks:
        return {}
    expected = expected or {}
    order = sorted(tasks, key=lambda t: -expected.get(t.snippet, 1.0))
    n = max(1, min(workers or os.cpu_count() or 1, len(order)))
    outcomes: dict[str, Outcome] = {}
    with ProcessPoolExecutor(max_workers=n, mp_context=_context(), max_tasks_per_child=1) as pool:
        futures: dict[Future, Task] = {pool.submit(run_snippet, t): t for t in order}
        for fut, task in futures.items():
            try:
                outcomes[task.snippet] = fut.result()
            except BrokenProcessPool as exc:
                outcomes[task.snippet] = Outcome(
                    snippet=task.snippet,
                    error=SnippetError(f"worker process died: {exc}", task.path, 0, ""),
                )
    return outcomes
