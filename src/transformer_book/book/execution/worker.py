"""The snippet process: one snippet run in a fresh process of its own, with fixed seeds and threads; never raises.

A fresh process per snippet is what lets us see exactly which project modules it imported (``sys.modules``
after the run) and keeps one snippet's global state (seeds, rcParams, caches) away from the next. The process
is forked from a server that has the heavy libraries loaded already, so it starts in milliseconds: locally
the build's forkserver (:mod:`.pool`), which starts :func:`run_in_pipe_process`; on a Dask worker the worker's
zygote (:mod:`.zygote`), whose child runs :func:`run_forked`. Both run :func:`run_snippet`, and both stop the
snippet's Python code at the task's timeout (SIGALRM); the process's owner kills it if that does not stop it.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.abc
import importlib.machinery
import importlib.util
import io
import logging
import os
import pickle
import random
import signal
import sys
import threading
import time
import traceback
import warnings
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, Iterable

from transformer_book.book import artifacts
from transformer_book.book.storage.cache import write_blob
from transformer_book.book.environment import SEED, jitter_seed, measured_here, numerical_settings, threads
from transformer_book.book.execution.lifetime import end_with
from transformer_book.book.files import ENGINE_DIR, atomic_write_bytes, code_digest, dependency_digest
from transformer_book.book.results import Artifact, Result, result_kinds
from transformer_book.book.types import NOTEBOOK_OUTPUT, Outcome, SnippetError, Task


class SnippetTimeout(BaseException):
    """Raised inside a snippet that ran past its timeout (a BaseException: ``except Exception`` in the
    snippet cannot swallow it)."""


# --------------------------------------------------------------------------------------------------


def seed_everything() -> None:
    random.seed(SEED)
    try:
        import numpy as np

        np.random.seed(SEED)
    except ImportError:
        pass
    torch = sys.modules.get("torch")
    if torch is None:  # not preloaded (the book's preload option): seeded when the snippet has imported it
        return
    _prepare_torch(torch)


def _prepare_torch(torch: Any) -> None:
    """Seed, thread count and (in a calibration run) jitter: before any snippet code uses torch."""
    torch.manual_seed(SEED)
    n = threads()
    torch.set_num_threads(n)
    if "BOOK_THREADS" in numerical_settings():
        # A perturbed run (calibration): the thread count holds even against code that sets its own,
        # as the P08 notebook does for its Jupyter readers.
        original = torch.set_num_threads
        torch.set_num_threads = lambda _n: original(n)  # type: ignore[assignment]
    if jitter_seed() is not None:
        install_jitter(jitter_seed())


def install_jitter(seed: int) -> Any:
    """A calibration perturbation (``BOOK_JITTER=<seed>``): before every optimiser step, every parameter
    element moves by one ulp, up or down at random (a generator of its own, seeded by ``seed``). Returns the
    hook's handle (``.remove()`` takes it off again).

    That is what another reduction order does to a training — the same arithmetic rounded differently, by
    about an ulp, at every step — and the training amplifies it exactly as it would amplify a platform's
    difference. Unlike naming a machine, each seed is an independent draw, so an ensemble of them measures
    the spread instead of sampling it once. It touches no random stream the snippet uses (data order, dropout,
    sampling keep their seeds), only the parameters' last bits.

    The nudge is defined one parameter at a time — draw ``torch.rand(p.shape) < 0.5`` for each floating
    parameter in the optimiser's order, move ``p`` one ulp towards +inf where the draw says up, towards -inf
    elsewhere — and computed all at once: the CPU generator fills a tensor element by element, so one draw for
    every element is the same stream, and ``where`` on a boolean mask is 4× slower than the arithmetic that builds
    the same ±inf targets. Same bits, half the cost: one epoch of a §11 training (106,624 parameters, 313 steps,
    one idle core) takes 6.1 s, 7.2 s under the per-parameter nudge and 6.6 s under this one, of which the draws
    themselves are 0.42 ms a step. It matters because the suite's whole book is built under a noise seed on a CPU
    without AVX-512. ``tests/test_calibration.py`` holds the two to the same bits."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    generator = torch.Generator().manual_seed(seed)

    def nudge(optimizer: Any, args: Any, kwargs: Any) -> None:
        params = [p for group in optimizer.param_groups for p in group["params"] if p.is_floating_point()]
        sizes = [p.numel() for p in params]
        up = torch.rand(sum(sizes), generator=generator) < 0.5  # (Σ numel,) one draw per element, in order
        ups = up.split(sizes)
        with torch.no_grad():
            for dtype in dict.fromkeys(p.dtype for p in params):
                members = [i for i, p in enumerate(params) if p.dtype == dtype]
                flat = torch.cat([params[i].reshape(-1) for i in members])
                towards = torch.cat([ups[i] for i in members]).to(dtype).mul_(2).sub_(1).mul_(float("inf"))  # ±inf
                for i, moved in zip(members, torch.nextafter(flat, towards).split([sizes[i] for i in members])):
                    params[i].copy_(moved.view_as(params[i]))

    return register_optimizer_step_pre_hook(nudge)


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


# What this process executed or read, hashed when it was read: {resolved path: digest}. Filled by the
# loader of project modules (the code it compiled), by the snapshot of modules already loaded when a task
# starts (the engine, preloaded by the forkserver), and by data files hashed before ``compute()`` reads them.
# A file changed while a snippet runs therefore no longer matches its entry, and the next build reruns it.
# Project modules are recorded by their code, everything else by its bytes (:func:`..files.dependency_digest`).
_EXECUTED: dict[str, str] = {}


def _remember(path: Path, data: bytes | None = None, digest: str | None = None) -> None:
    key = str(path)
    if key in _EXECUTED:
        return
    if digest is not None:
        _EXECUTED[key] = digest
        return
    try:
        _EXECUTED[key] = dependency_digest(path, data if data is not None else path.read_bytes())
    except OSError:
        _EXECUTED[key] = "missing"


def _module_files(root: Path | None) -> Iterable[tuple[Path, Any]]:
    """(file, module) of every loaded module whose code shapes a result: the project's and the engine's
    (only the engine's when ``root`` is None: the forkserver knows no project yet)."""
    for name, mod in list(sys.modules.items()):
        if name == "__main__":
            continue  # the program that started the run (``python -m transformer_book run``), not the snippet's
        f = getattr(mod, "__file__", None)
        if not isinstance(f, str) or not os.path.isabs(f):
            continue  # some extension modules report a bare file name
        p = Path(f).resolve()
        if p.suffix == ".py" and (p.is_relative_to(ENGINE_DIR) or (root is not None and _is_tracked(p, root))):
            yield p, mod


def _snapshot_loaded(root: Path) -> None:
    """Hash the modules already loaded before the snippet starts (the forkserver preloads the engine): what
    they are now is what this process runs."""
    for p, _ in _module_files(root):
        _remember(p)


def _is_tracked(path: Path, root: Path) -> bool:
    if path.is_relative_to(ENGINE_DIR) or path.is_relative_to(root / ".venv") or "site-packages" in path.parts:
        return False
    return path.is_relative_to(root)


def _declared_data(mod: Any) -> list[Path]:
    """A project module may declare the data files it reads (fonts, corpora) in ``BOOK_DATA_FILES``."""
    declared = mod.__dict__.get("BOOK_DATA_FILES", ())
    if not isinstance(declared, (list, tuple)):
        return []
    return [Path(extra).resolve() for extra in declared if isinstance(extra, str)]


def _dependencies(task: Task, data_files: Iterable[str]) -> dict[str, str]:
    """Every project and engine source file the snippet ran, plus the data files declared, each with the hash
    of the bytes that were used (:data:`_EXECUTED`); a file first seen here is hashed now."""
    root = Path(task.project_root).resolve()
    files: set[Path] = set()
    for p, mod in _module_files(root):
        if p != Path(task.path).resolve():
            files.add(p)
        files.update(_declared_data(mod))
    files.update((root / d).resolve() for d in data_files)
    deps = {}
    for p in sorted(files):
        _remember(p)
        rel = p.relative_to(root).as_posix() if p.is_relative_to(root) else str(p)
        deps[rel] = _EXECUTED[str(p)]
    return deps


def _locate(exc: BaseException, snippet_path: Path, project_root: Path) -> SnippetError:
    """Where in the snippet an error happened: the line of a syntax error, the innermost frame of the snippet
    in the traceback, or — for a result found wrong after compute() returned — the line that made it."""
    tb = traceback.extract_tb(exc.__traceback__)
    text = "".join(traceback.format_exception(exc))
    message = "".join(traceback.format_exception_only(exc)).strip()
    snippet_frames = [f for f in tb if Path(f.filename).resolve() == snippet_path]
    if isinstance(exc, SyntaxError) and exc.filename and Path(exc.filename).resolve() == snippet_path:
        line = exc.lineno or 0
    elif isinstance(exc, ResultError) and exc.line:
        line = exc.line
    elif snippet_frames:
        line = snippet_frames[-1].lineno or 0
    else:
        line = 0
    deepest = ""
    project_frames = [
        f for f in tb if Path(f.filename).resolve().is_relative_to(project_root) and Path(f.filename).resolve() != snippet_path
    ]
    if project_frames and snippet_frames and tb[-1] is not snippet_frames[-1]:
        f = project_frames[-1]
        deepest = f"{Path(f.filename).resolve().relative_to(project_root).as_posix()}:{f.lineno}"
    rel = snippet_path.relative_to(project_root).as_posix() if snippet_path.is_relative_to(project_root) else str(snippet_path)
    return SnippetError(message=message, file=rel, line=line, traceback=text, deepest=deepest)


class _MissingGlyphs(logging.Handler):
    """Collects mathtext's "Font 'default' does not have a glyph" messages (logged, not warned)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "does not have a glyph" in msg:
            self.messages.append(msg)


class _FreshSourceLoader(importlib.machinery.SourceFileLoader):
    """Loads a module from its source, ignoring any .pyc, and writes none (see :func:`_compile_from_source`)."""

    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        data = self.get_data(path)
        tree = compile(data, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)  # parsed once, for both:
        code = compile(tree, path, "exec", dont_inherit=True)
        _remember(Path(path).resolve(), digest=code_digest(tree))  # the code of exactly what was compiled
        return code

    def exec_module(self, module: Any) -> None:
        super().exec_module(module)
        for extra in _declared_data(module):  # hashed as soon as they are known, before compute() reads them
            _remember(extra)


class _ProjectSourceFinder(importlib.abc.MetaPathFinder):
    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not spec.origin or not spec.origin.endswith(".py"):
            return None
        if not _is_tracked(Path(spec.origin).resolve(), self.root):
            return None
        spec.loader = _FreshSourceLoader(fullname, spec.origin)
        return spec


def _compile_from_source(task: Task) -> None:
    """A .pyc is trusted if the source's mtime (whole seconds) and size match, so an edit that keeps the
    size within the same second would run stale code; and a .pyc written next to a watched source makes
    ``mkdocs serve`` rebuild twice. Project modules are small: compile them from source, write no bytecode;
    libraries keep their bytecode caches."""
    sys.dont_write_bytecode = True
    sys.meta_path.insert(0, _ProjectSourceFinder(Path(task.project_root).resolve()))


def _run_script(task: Task, path: Path) -> tuple[dict[str, Any], list[str]]:
    """Import a snippet file and call its compute(); returns the results and its DATA_FILES.

    Like ``python snippet.py``, the snippet's folder comes first on ``sys.path``: a snippet can import a
    helper module that sits beside it (files beginning with ``_`` are helpers, not snippets)."""
    sys.path.insert(0, str(path.parent))
    torch_prepared = "torch" in sys.modules  # seed_everything() prepared it
    spec = importlib.util.spec_from_file_location(f"book_snippet_{task.snippet.replace('/', '_')}", path)

    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    source = task.source or path.read_bytes()
    exec(compile(source, str(path), "exec", dont_inherit=True), module.__dict__)  # the bytes the key hashed
    if "torch" in sys.modules and not torch_prepared:  # imported by the snippet itself (not preloaded)
        _prepare_torch(sys.modules["torch"])
    data_files = [str(d) for d in getattr(module, "DATA_FILES", [])]
    root = Path(task.project_root).resolve()
    for d in data_files:  # hashed before compute() reads them
        _remember((root / d).resolve())
    compute: Callable[[], Any] | None = getattr(module, "compute", None)
    if not callable(compute):
        raise TypeError(f"{task.snippet}: a snippet must define compute() returning a dict of results")
    results = compute()
    try:
        check_results(task.snippet, results)
    except ResultError as exc:  # found after compute() returned: point at the line that made the result
        exc.line = _result_line(source, str(path), exc.key)
        raise
    return results, data_files


def _result_line(source: bytes, filename: str, key: str | None) -> int:
    """Where in the snippet a returned result was made: the ``"key": …`` entry of a dict written in compute(),
    else compute()'s last ``return``, else its ``def`` line (0 if the source has no compute() to point at)."""
    try:
        tree = ast.parse(source, filename)
    except (SyntaxError, ValueError):
        return 0
    compute = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "compute"), None)
    if compute is None:
        return 0
    nodes = list(ast.walk(compute))
    if key is not None:
        for node in nodes:
            if isinstance(node, ast.Dict):
                for k in node.keys:
                    if isinstance(k, ast.Constant) and k.value == key:
                        return k.lineno
    returns = [n.lineno for n in nodes if isinstance(n, ast.Return)]
    return max(returns) if returns else compute.lineno


class _Alarm:
    """The snippet's own stop: SIGALRM ``seconds`` after the task started raises :class:`SnippetTimeout` in the
    snippet's Python code (in the main thread; elsewhere nothing — the process's owner still kills it)."""

    def __init__(self, seconds: float, started: float) -> None:
        self.seconds, self.started = seconds, started

    def __enter__(self) -> "_Alarm":
        if self.seconds > 0 and self._can():
            signal.signal(signal.SIGALRM, self._stop)
            signal.setitimer(signal.ITIMER_REAL, max(0.001, self.seconds - (time.perf_counter() - self.started)))
        return self

    def __exit__(self, *exc: object) -> None:
        if self.seconds > 0 and self._can():
            signal.setitimer(signal.ITIMER_REAL, 0)

    @staticmethod
    def _can() -> bool:
        return threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")

    def _stop(self, signum: int, frame: Any) -> None:
        raise SnippetTimeout(f"the snippet ran longer than its timeout of {self.seconds:g} s "
                             f"(TIMEOUT_SECONDS; stopped after {time.perf_counter() - self.started:.1f} s)")


def _run_notebook(path: Path, source: bytes) -> dict[str, Any]:
    """Execute a notebook page; its recorded values plus the executed notebook as an artifact."""
    from transformer_book.book.execution.notebook import execute as execute_notebook

    recorded, executed = execute_notebook(path, source.decode("utf-8") if source else None)
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
    from transformer_book.book.execution.notebook import NotebookCellError

    path = Path(task.path).resolve()
    root = Path(task.project_root).resolve()
    out = Outcome(snippet=task.snippet)
    start = time.perf_counter()
    _snapshot_loaded(root)
    data_files: list[str] = []
    glyphs = _MissingGlyphs()
    logging.getLogger("matplotlib").addHandler(glyphs)
    _compile_from_source(task)
    provided: dict[str, dict[str, str]] = {}
    for sid, name, file in task.requires:
        provided.setdefault(sid, {})[name] = file
    artifacts.provide(provided)
    try:
        seed_everything()
        _prepare_matplotlib()
        with _Alarm(task.timeout, start), warnings.catch_warnings():
            # A Chinese label drawn in a font without the glyph would show as a box: fail instead.
            warnings.filterwarnings("error", message=r"Glyph \d+ .*missing from font")
            with contextlib.redirect_stdout(io.StringIO()) if capture else contextlib.nullcontext():
                if path.suffix == ".ipynb":
                    results = _run_notebook(path, task.source)
                else:
                    results, data_files = _run_script(task, path)
                for key, value in results.items():
                    value.finalize()
                    if (detached := value.detach()) is not None:
                        blob, results[key] = detached
                        out.artifacts[key] = write_blob(Path(task.blob_dir), blob)
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
    out.measured_on = measured_here()
    try:
        out.deps = _dependencies(task, data_files)
    except Exception as exc:  # noqa: BLE001
        out.error = out.error or SnippetError(f"cannot hash dependencies: {exc}", task.snippet, 0, "")
    return out


class ResultError(TypeError):
    """What compute() returned is not a dict of results; ``key`` names the bad result (None: the whole return
    value), ``line`` is where the snippet made it (filled in by :func:`_run_script`)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key
        self.line = 0


def check_results(snippet: str, results: Any) -> None:
    if not isinstance(results, dict) or not results:
        raise ResultError(f"{snippet}: compute() must return a non-empty dict {{name: Table | Figure | Value | Claim}}")
    kinds = result_kinds()
    for key, value in results.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ResultError(f"{snippet}: result names must be identifiers, got {key!r}", str(key))
        if not isinstance(value, Result) or kinds.get(value.type_name) is not type(value):
            names = ", ".join(t.__name__ for t in kinds.values())
            raise ResultError(f"{snippet}: result {key!r} is a {type(value).__name__}, not one of {names}"
                              + (" (a Result subclass that nobody registered: results.register)"
                                 if isinstance(value, Result) else ""), key)
        try:
            value.validate(snippet, key)
        except TypeError as exc:
            raise ResultError(str(exc), key) from None


def snapshot_engine() -> None:
    """Called by :mod:`.preload` in the forkserver (and a fresh process): hash the engine modules loaded so far
    now, for they are the code every snippet process forked from it runs — even if a file is saved later.
    (Not at import: the build's own process imports this module too and has no use for the hashes.)"""
    for p, _ in _module_files(None):
        _remember(p)


# -- the two ways a snippet process starts ----------------------------------------------------------------------

def run_in_pipe_process(task: Task, send: Connection, parent: int) -> None:
    """A local snippet process (started by :class:`.pool.LocalExecutor` from the forkserver): run the task and
    send its outcome through the pipe."""
    end_with(parent)  # a build that ends (or is killed) takes its snippets with it
    outcome = run_snippet(task)
    try:
        send.send(outcome)
    except Exception as exc:  # noqa: BLE001 - e.g. a result that cannot be pickled
        send.send(Outcome(snippet=task.snippet, error=SnippetError(
            f"the snippet's results cannot be sent back: {type(exc).__name__}: {exc}", task.path, 0, "")))
    send.close()


def run_forked(request: dict[str, Any]) -> None:
    """A snippet process forked by a Dask worker's zygote (:mod:`.zygote`), right after the fork: a session of its
    own (the worker kills it with its whole process group), output into the log the worker shows if it dies,
    the task read from ``request["task"]``, the outcome written whole to ``request["outcome"]``. Never returns."""
    code = 1
    try:
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        log = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(log, 1)
        os.dup2(log, 2)
        end_with(os.getppid())  # nobody waits for this snippet once its zygote (and so its worker) is gone
        task: Task = pickle.loads(Path(request["task"]).read_bytes())
        outcome = run_snippet(task)
        atomic_write_bytes(Path(request["outcome"]), pickle.dumps(outcome))  # the worker reads it
        code = 0
    except BaseException:  # noqa: BLE001 - shown in the log the worker reads when no outcome came back
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)
