"""What the tests share: small throw-away books for the engine's tests, and the suite's one build of the whole book.

**Small books.** :data:`MKDOCS_YML`, :func:`write`, :func:`session`, :func:`statuses`, :func:`mkdocs_build` and
:func:`output` make and build a book of a few snippets in a temporary folder. Every test runs without the
caller's build settings (``BOOK_CI``, ``BOOK_CACHE_DIR``, ``BOOK_JITTER`` … are removed from its environment),
so a small book never reads a shared cache or runs under a perturbation it did not ask for.

**The whole book, built once, in the background.** The suite builds the whole book exactly once (``built_site``),
and that one build carries every guarantee the suite once spread over two whole-book builds:

- as CI builds it: ``mkdocs build --strict`` with ``BOOK_CI=1`` — every snippet executed afresh (a cache of its
  own, empty), every result checked against its record, every claim decided, the print edition printed;
- on a machine calibration never saw (:func:`held_out_settings`: torch's kernels on the AVX2 path of a laptop, or
  a noise seed outside the ensemble where the CPU has no such path) — what a contributor's machine does to the
  trained numbers;
- on a loaded machine: the build starts as soon as the tests are collected and runs beside the rest of the suite;
  the tests that need the site run last. While the rest of the suite runs, :class:`Load` keeps at least ``cores - 1`` runnable
  processes beside the build's own at every moment — the other tests where they compute, spinning processes where
  they do not — which is the load ``cores - 1`` spinners gave before, with the spinners' time spent on tests. Once
  the rest of the suite is done, the build finishes on the free machine (:meth:`Load.release`).

``BOOK_SITE_DIR=/path/to/site`` reuses a site built beforehand instead (while writing site tests); the tests of
the build itself (fresh, perturbed, loaded) then skip, saying so.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

ROOT = Path(__file__).resolve().parents[1]

# The browser tests drive the system Chromium through playwright; they never download a browser.
CHROMIUM = Path(os.environ.get("BOOK_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
PREBUILT = os.environ.get("BOOK_SITE_DIR", "")  # read once, before any test's environment is cleaned


# -- small throw-away books ------------------------------------------------------------------------------------

MKDOCS_YML = """site_name: t
docs_dir: docs
plugins:
  - book:
      preload: []
      mathjax: false
markdown_extensions:
  - admonition
  - pymdownx.details
  - pymdownx.superfences
  - md_in_html
  - tables
"""

# What changes what a build does: removed from every test's environment (a test sets what it means to test).
NUMERICAL = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "MKL_ENABLE_INSTRUCTIONS", "OPENBLAS_CORETYPE")
KEPT = ("BOOK_CHROMIUM",)  # where the browser is, not how to build


def build_variables(environ: dict[str, str] | os._Environ) -> list[str]:
    return [k for k in environ if (k.startswith("BOOK_") and k not in KEPT) or k in NUMERICAL]


CALLERS_SETTINGS = {k: os.environ[k] for k in build_variables(os.environ) if k != "BOOK_SITE_DIR"}


@pytest.fixture(autouse=True)
def _no_build_settings_from_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in build_variables(os.environ):
        monkeypatch.delenv(name)


def write(path: Path, text: str) -> None:
    """Write ``text`` (dedented, without its leading newline) to ``path``, making its folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def session(project: Path, cache: str | Path | None = None) -> Any:
    """A build session on a small book, with its cache in the book's folder (or ``cache``)."""
    from transformer_book.book.session import BookSession

    return BookSession(project, project / "snippets", cache or project / ".book-cache", project / ".book-cache" / "report")


def statuses(state: Any) -> dict[str, str]:
    return {sid: st.status for sid, st in state.snippets.items()}


def book_env(**settings: str) -> dict[str, str]:
    """This process's environment without any build setting, plus ``settings``: what a build or command started
    by a test sees."""
    env = {k: v for k, v in os.environ.items() if k not in build_variables(os.environ)}
    env.update(NO_MKDOCS_2_WARNING="1", **settings)
    return env


def mkdocs_build(project: Path, *args: str, timeout: float = 300, **settings: str) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of a small book, with only the build settings given."""
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", *args], cwd=project,
                          env=book_env(**settings), capture_output=True, text=True, timeout=timeout)


def output(done: subprocess.CompletedProcess) -> str:
    return done.stdout + done.stderr


# The engine's small book (tests/test_engine.py, test_engine_keys.py, test_dirty_rebuild.py): two snippets, each
# reading a value from its own helper module (so a test can edit "the code" without touching the snippet), and
# a page that shows a value, a table and a value with its own format.
SNIPPET_A = '''
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import helper_a
from transformer_book.book import Table, Value


def compute():
    return {
        "answer": Value(helper_a.VALUE, ".2f"),
        "grid": Table(columns=["x", "y"], rows=[[1, helper_a.VALUE], [2, 2 * helper_a.VALUE]], formats=["d", ".3f"]),
    }
'''

SNIPPET_B = '''
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import helper_b
from transformer_book.book import Value


def compute():
    return {"other": Value(helper_b.VALUE, ".1f")}
'''

PAGE = """# 测试页

答案是 {{ a:answer }}。

{{ table a:grid "表 1　网格" }}

另一个数：{{ b:other | .3f }}。
"""

# A snippet that trains a "model" (an artifact) and one that REQUIRES it.
PRODUCER = '''
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import helper_a
from transformer_book.book import Artifact, Value


def compute():
    weights = {"w": [helper_a.VALUE] * 3}
    return {"model": Artifact(weights), "trained_value": Value(helper_a.VALUE)}
'''

CONSUMER = '''
from transformer_book.book import Value, artifact

REQUIRES = ["part/train"]


def compute():
    weights = artifact("part/train", "model")
    return {"total": Value(sum(weights["w"]), ".2f")}
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """The engine's small book in a temporary folder (a test file may define its own ``project``)."""
    write(tmp_path / "mkdocs.yml", MKDOCS_YML)
    write(tmp_path / "lib" / "helper_a.py", "VALUE = 1.5\n")
    write(tmp_path / "lib" / "helper_b.py", "VALUE = 7.0\n")
    write(tmp_path / "snippets" / "part" / "a.py", SNIPPET_A)
    write(tmp_path / "snippets" / "part" / "b.py", SNIPPET_B)
    write(tmp_path / "docs" / "part" / "page.md", PAGE)
    write(tmp_path / "docs" / "index.md", "# 首页\n")
    return tmp_path


ORIGIN_SPAN = re.compile(r'<span class="book-origin" [^>]*>([^<]*)</span>')


def unwrap_origins(markdown: str) -> str:
    """A rendered page without the origin markup around inline values (tested on its own in test_engine.py)."""
    return ORIGIN_SPAN.sub(r"\1", markdown)


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread_in_the_test_process() -> Iterator[None]:
    """The test process computes on one torch thread, as every snippet does (a test that means to compare
    thread counts sets its own and restores this). Measured, not assumed: with torch's default of one thread
    per core, every small operation in the test process is a parallel region that waits until both its threads
    have a core — and beside the whole book's build both cores are taken, so each waits for the scheduler
    (a 30-token generation test: 0.06 s alone, 10 s in the suite), while the waiting threads spin on a core the
    build needs."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def one_torch_thread():
    """Training tests run on 1 thread, as the book's snippets do (tiny models are faster and reproducible)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# -- a loaded machine --------------------------------------------------------------------------------------------

SPIN = "import time\nend = time.time() + {seconds}\nwhile time.time() < end:\n    pass\n"


def _ends_with_the_suite() -> None:
    """In a child about to start: the kernel kills it when the test run's process dies (a ``timeout``, a
    SIGKILL: no pytest hook runs then), so a build or a spinner the suite started never outlives it."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG (Linux)
    except (OSError, AttributeError):
        pass


@contextlib.contextmanager
def busy_cores(n: int | None = None, seconds: float = 3600) -> Iterator[None]:
    """Keep ``n`` cores (default: all) busy with spinning processes that stop by themselves after ``seconds``
    (and are stopped when the block ends): the load of a shared CI runner or of an author's other work."""
    procs = [subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=seconds)])
             for _ in range(n or os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(timeout=30)


def _processes() -> dict[int, tuple[int, str]]:
    """pid → (parent pid, state letter) of every process, from /proc."""
    out = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, …
        out[int(entry.name)] = (int(fields[1]), fields[0])
    return out


def _descendants(root: int, procs: dict[int, tuple[int, str]]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in out:
            out.add(pid)
            todo.extend(children.get(pid, []))
    return out


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process, from /proc (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().decode(errors="replace").rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime (fields 14, 15)


class Load:
    """Keeps ``want`` runnable processes beside a build (default ``cores - 1``: the build has one core to itself).

    Every ``period`` seconds it counts the runnable processes that are not the build's (the rest of the test suite,
    anything else on the machine) and lets as many spinning processes run (``SIGCONT``) as are missing, stopping
    the others (``SIGSTOP``). The count is averaged over the last second, so a test that computes in short bursts
    counts for what it uses. ``loaded()`` is the mean number of runnable processes beside the build, spinners
    included, until :meth:`release`: ``want`` or more means the build never had the machine to itself while the
    rest of the suite ran."""

    def __init__(self, build_pid: int, want: int | None = None, period: float = 0.2) -> None:
        self.build_pid, self.period = build_pid, period
        self.want = max(1, (os.cpu_count() or 1) - 1) if want is None else want
        self.spinners = [subprocess.Popen([sys.executable, "-c", SPIN.format(seconds=7200)], preexec_fn=_ends_with_the_suite)
                         for _ in range(self.want)]
        for p in self.spinners:
            os.kill(p.pid, signal.SIGSTOP)
        self.running = 0
        self._started = time.perf_counter()
        self.shared = 0.0  # seconds the build ran beside the rest of the suite (until release)
        self.spun = 0.0  # CPU seconds the spinners used (where the rest of the suite waited instead of computing)
        self.samples: list[float] = []  # runnable beside the build, spinners included, one per period
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._keep, name="load", daemon=True)
        self._thread.start()

    def _keep(self) -> None:
        recent: list[int] = []
        spinners = {p.pid for p in self.spinners}
        while not self._stop.wait(self.period):
            procs = _processes()
            build = _descendants(self.build_pid, procs)
            if self.build_pid not in procs:
                break
            others = sum(1 for pid, (_, state) in procs.items()
                         if state == "R" and pid not in build and pid not in spinners and pid != os.getpid())
            # the test suite's own process: running unless its main thread waits (this thread is not it)
            if procs.get(os.getpid(), (0, "S"))[1] == "R":
                others += 1
            recent = (recent + [others])[-max(1, round(1 / self.period)):]
            missing = max(0, min(self.want, round(self.want - sum(recent) / len(recent) + 0.49)))
            self._run(missing)
            self.samples.append(others + self.running)

    def _run(self, n: int) -> None:
        for i, p in enumerate(self.spinners):
            should = i < n
            if should != (i < self.running):
                os.kill(p.pid, signal.SIGCONT if should else signal.SIGSTOP)
        self.running = n

    def release(self) -> None:
        """From now on nothing is added beside the build: the rest of the suite is done, and the build finishes on
        the machine the site tests then need. (Spinning beside it to the end cost the suite about a core for
        the last third of the build, minutes over its budget, and proved nothing the loaded part did not:
        a snippet's timeout is ten times its budget.)"""
        self._stop.set()
        self._thread.join()
        self._run(0)
        self.shared = time.perf_counter() - self._started
        self.spun = sum(_cpu_seconds(p.pid) for p in self.spinners)

    def loaded(self) -> float:
        return sum(self.samples) / len(self.samples) if self.samples else float(self.running)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for p in self.spinners:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p.pid, signal.SIGCONT)
            p.kill()
            p.wait(timeout=30)


# -- the whole book ----------------------------------------------------------------------------------------------

# The machine the suite builds on that calibration never saw (calibrate's ensemble: threads-2-reversed,
# aten-default, blas-compatible and the noise seeds 1 … JITTER_RUNS). On an AVX-512 CPU it is torch's own kernels
# on the AVX2 path: an ordinary laptop, the machine most contributors have — and no slower than this CPU's own
# path, where the path without vector instructions (which calibration runs, a CPU without AVX) costs 1.7× on every
# training. A CPU with no path between its own and calibration's has no unseen machine to offer: a noise seed far
# outside the ensemble's stands in. (MKL_ENABLE_INSTRUCTIONS and MKL_CBWR=AVX2 were tried: on this machine
# torch's products come out bit-identical under them, so they would hold out nothing.)
HELD_OUT_MACHINE = {"ATEN_CPU_CAPABILITY": "avx2"}
HELD_OUT_NOISE = {"BOOK_JITTER": "1000"}
HELD_OUT = {**HELD_OUT_MACHINE, **HELD_OUT_NOISE}  # the small books' held-out runs: both at once (they cost nothing)


def held_out_settings() -> dict[str, str]:
    """What the whole book is built under: :data:`HELD_OUT_MACHINE` where this CPU has that path and it is not
    its own, else :data:`HELD_OUT_NOISE`."""
    from transformer_book.book.checking.calibrate import native_isa, perturbations

    used = {(k, v) for p in perturbations() for k, v in p.env.items()}
    if native_isa().startswith("AVX512") and not set(HELD_OUT_MACHINE.items()) & used:
        return dict(HELD_OUT_MACHINE)
    return dict(HELD_OUT_NOISE)


@dataclass
class WholeBook:
    """The suite's one build of the whole book: started when the tests are collected, finished when a test first
    needs the site. ``env`` holds the settings it ran under that a process reading its cache must share."""

    folder: Path
    env: dict[str, str] = field(default_factory=dict)
    prebuilt: bool = False
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    loaded: float = 0.0  # mean runnable processes beside the build (see Load) while the rest of the suite ran
    shared: float = 0.0  # seconds of the build that ran beside the rest of the suite
    spun: float = 0.0  # CPU seconds spent by Load's spinners
    _proc: subprocess.Popen | None = None
    _load: Load | None = None
    _started: float = 0.0

    @property
    def site(self) -> Path:
        return self.folder if self.prebuilt else self.folder / "site"

    @property
    def cache(self) -> Path:
        return self.folder / "cache"

    def start(self) -> None:
        self.env = {"BOOK_CACHE_DIR": str(self.cache), **held_out_settings()}
        self._started = time.perf_counter()
        self._proc = subprocess.Popen(  # the print edition too: mkdocs.yml says pdf: true
            [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(self.site)], cwd=ROOT,
            env=book_env(BOOK_CI="1", **self.env), preexec_fn=_ends_with_the_suite,
            stdout=open(self.folder / "stdout.txt", "wb"), stderr=open(self.folder / "stderr.txt", "wb"))
        self._load = Load(self._proc.pid)

    def finish(self, timeout: float = 3600) -> "WholeBook":
        """Wait for the build (the rest of the suite is done: the build has the machine from now on)."""
        if self._proc is None or self.returncode is not None:
            return self
        assert self._load is not None
        self._load.release()
        try:
            self.returncode = self._proc.wait(timeout=max(1.0, timeout - (time.perf_counter() - self._started)))
        except subprocess.TimeoutExpired:
            self.kill()
            self.returncode = -1
        self.seconds = time.perf_counter() - self._started
        self.loaded = self._load.loaded()
        self.shared = self._load.shared
        self.spun = self._load.spun
        self._load.stop()
        self.stdout = (self.folder / "stdout.txt").read_text(encoding="utf-8", errors="replace")
        self.stderr = (self.folder / "stderr.txt").read_text(encoding="utf-8", errors="replace")
        return self

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(timeout=60)
        if self._load is not None:
            self._load.stop()


_WHOLE_BOOK: list[WholeBook] = []


def _needs_the_book(item: pytest.Item) -> bool:
    return "whole_book" in getattr(item, "fixturenames", ())


# Work on the built site that a test module reads later (the page notebooks: minutes of kernels). It starts in one
# background thread as soon as the site exists, so it runs on one core while the browser tests use the other,
# instead of after them. Registered by the module at import; started only if one of its tests was selected.
# (Visiting every page in a second browser in the background as well was tried: the site tests then keep both
# cores busy from start to end, and took 207 s instead of 167 s.)
_SITE_JOBS: dict[str, Callable[["WholeBook"], Any]] = {}
_SITE_FUTURES: dict[str, Future] = {}
_SELECTED: set[str] = set()
_SITE_POOL: list[ThreadPoolExecutor] = []


def when_the_site_is_built(module: str, job: Callable[["WholeBook"], Any]) -> None:
    """Run ``job(whole_book)`` in the background once the whole book has built (see :func:`site_job`)."""
    _SITE_JOBS[module] = job


def site_job(module: str) -> Any:
    """The result of ``module``'s background job (waiting for it if it still runs); None if it never started."""
    future = _SITE_FUTURES.get(module)
    return future.result() if future is not None else None


_SITE_LOCK = threading.Lock()


def _start_site_jobs(book: "WholeBook") -> None:
    with _SITE_LOCK:  # from the test that first needs the site, or earlier from the watcher below
        for module, job in _SITE_JOBS.items():
            if module in _SELECTED and module not in _SITE_FUTURES:
                if not _SITE_POOL:
                    _SITE_POOL.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="site-job"))
                _SITE_FUTURES[module] = _SITE_POOL[0].submit(job, book)


def _start_site_jobs_while_it_prints(book: "WholeBook") -> None:
    """The site's pages and notebooks are complete before the build prints its PDF (about 20 s of one core at its
    end, ``site/finish.py`` says when it starts): the site jobs begin then, on the core the printing leaves free.
    A build that prints nothing (no Chromium) starts them when a test first needs the site, as before."""
    from transformer_book.book.site.finish import PRINTING

    def watch() -> None:
        while book._proc is not None and book._proc.poll() is None:
            try:
                if PRINTING in (book.folder / "stderr.txt").read_text(encoding="utf-8", errors="replace"):
                    _start_site_jobs(book)
                    return
            except OSError:
                pass
            time.sleep(1.0)

    threading.Thread(target=watch, name="site-jobs-watch", daemon=True).start()


@pytest.hookimpl(trylast=True)  # after -k / -m have deselected: the order of what will run
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """The tests that need the whole book run last: the build runs beside all the others."""
    items[:] = [i for i in items if not _needs_the_book(i)] + [i for i in items if _needs_the_book(i)]
    _SELECTED.update(i.module.__name__ for i in items if getattr(i, "module", None) is not None)


def pytest_collection_finish(session: pytest.Session) -> None:
    if PREBUILT or session.config.option.collectonly or not any(_needs_the_book(i) for i in session.items):
        return
    book = WholeBook(Path(tempfile.mkdtemp(prefix="book-whole-")))
    book.start()
    _WHOLE_BOOK.append(book)
    _start_site_jobs_while_it_prints(book)


def pytest_sessionfinish(session: pytest.Session) -> None:
    for pool in _SITE_POOL:
        pool.shutdown(wait=True, cancel_futures=True)
    for book in _WHOLE_BOOK:  # interrupted, or no test asked for it in the end
        book.kill()
        shutil.rmtree(book.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def whole_book() -> WholeBook:
    """The suite's build of the whole book, finished (see the module's docstring)."""
    if PREBUILT:  # built by the caller, with the caller's settings (its cache, for the notebooks' trainings)
        return WholeBook(Path(PREBUILT), env=dict(CALLERS_SETTINGS), prebuilt=True)
    if not _WHOLE_BOOK:  # e.g. a test that asked for it through request.getfixturevalue
        book = WholeBook(Path(tempfile.mkdtemp(prefix="book-whole-")))
        book.start()
        _WHOLE_BOOK.append(book)
    book = _WHOLE_BOOK[0].finish()
    _SUMMARY.append(f"the whole book: {book.seconds:.0f} s, the first {book.shared:.0f} s beside the rest of the suite "
                    f"with {book.loaded:.2f} runnable processes beside it on average ({book.spun:.0f} CPU s of them "
                    f"spinners)")
    sys.stderr.write(f"\n{_SUMMARY[-1]}\n" + book.stderr[-3000:])  # the timing table, for the CI log
    return book


_SUMMARY: list[str] = []


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Where the suite's time went, at the end of every run that built the whole book (the CI log shows it)."""
    for line in _SUMMARY:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def built_site(whole_book: WholeBook) -> Path:
    """The built site; a build that failed fails every test that needs it, with the build's output (and its drift
    report kept under ``artifacts/`` for whoever reads the CI run)."""
    if whole_book.returncode not in (0, None):
        report = ROOT / ".book-cache" / "report" / "drift.html"
        if report.exists():
            (ROOT / "artifacts").mkdir(exist_ok=True)
            shutil.copyfile(report, ROOT / "artifacts" / "drift-report.html")
        pytest.fail(f"the whole book does not build (fresh, perturbed, on a loaded machine):\n"
                    f"{whole_book.stdout[-4000:]}\n{whole_book.stderr[-8000:]}", pytrace=False)
    _start_site_jobs(whole_book)
    return whole_book.site


class InFlight:
    """The requests a browser context has started and not yet finished (its pages' and its workers').

    ``settle(page)`` returns once none has been in flight for ``quiet`` seconds: what a page fetches after "load"
    (fonts, figures, an explorable's states) has arrived. Playwright's ``networkidle`` waits for 500 ms without a
    request on every page; this waits only as long as the requests do (the site is on 127.0.0.1), which took
    about 50 s off the visits to every page at two sizes."""

    def __init__(self, context: Any) -> None:
        self.open: set[Any] = set()
        context.on("request", lambda r: self.open.add(r))  # playwright takes functions, not built-in methods
        context.on("requestfinished", lambda r: self.open.discard(r))
        context.on("requestfailed", lambda r: self.open.discard(r))

    def settle(self, page: Any, timeout: float = 15.0, quiet: float = 0.06) -> None:
        deadline = time.monotonic() + timeout
        calm_since = None
        while True:
            now = time.monotonic()
            if self.open:
                calm_since = None
            elif calm_since is None:
                calm_since = now
            elif now - calm_since >= quiet:
                return
            if now > deadline:
                raise TimeoutError(f"requests still in flight after {timeout:g} s: {[r.url for r in self.open][:5]}")
            page.wait_for_timeout(20)  # lets playwright deliver the events meanwhile


@pytest.fixture(scope="session")
def chromium():
    """The system Chromium, driven by playwright; skips when either is missing."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: the browser tests need it (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"no playwright to drive the Chromium at {CHROMIUM} (pip install playwright)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()
