"""Scale-out, on real servers on 127.0.0.1: snippets on a Dask cluster, one result cache in an S3 bucket.

A ``distributed.LocalCluster`` (two worker processes) and moto's standalone S3 server start once for this
file and are shut down at its end. Each test builds a small throw-away book (the fixture-project pattern of
tests/test_engine.py) and shows one promise of docs/authoring-cluster.md.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import os
import pickle
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Iterator

import pytest

distributed = pytest.importorskip("distributed")
pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")

from transformer_book.book.storage import cache as cache_module  # noqa: E402
from transformer_book.book.checking import records  # noqa: E402
from transformer_book.book.artifacts import TORCH_MAGIC  # noqa: E402
from transformer_book.book.storage.cache import Cache, Entry, fetch_blob  # noqa: E402
from transformer_book.book.state import Options  # noqa: E402
from transformer_book.book.storage.store import FsspecStore, LocalStore, open_store  # noqa: E402

from conftest import MKDOCS_YML, mkdocs_build, session, statuses, write  # noqa: E402

TIMEOUT = 120  # seconds: the bound on any one build or server start in this file

TRAIN = '''
import torch
from transformer_book.book import Artifact, Value


def compute():
    w = torch.randn(8)
    return {"model": Artifact({"w": w}), "norm": Value(float(w.norm()), ".4f")}
'''

USE = '''
from transformer_book.book import Value, artifact

REQUIRES = ["part/train"]


def compute():
    model = artifact("part/train", "model")
    return {"total": Value(float(model["w"].sum()), ".4f")}
'''

PLAIN = '''
import matplotlib.pyplot as plt
import numpy as np
from transformer_book.book import Figure, Table


def compute():
    x = np.random.rand(4)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot(np.arange(4), x)
    return {"table": Table(columns=["i", "x"], rows=[[i, float(v)] for i, v in enumerate(x)], formats=["d", ".4f"]),
            "figure": Figure(fig)}
'''

PAGE = """# 测试页

范数是 {{ train:norm }}，总和是 {{ use:total }}。

{{ table plain:table "表 1　随机数" }}

{{ figure plain:figure "图 1　随机数" }}
"""


def make_project(root: Path, snippets: dict[str, str] | None = None) -> Path:
    write(root / "mkdocs.yml", MKDOCS_YML)
    for name, source in (snippets or {"train": TRAIN, "use": USE, "plain": PLAIN}).items():
        write(root / "snippets" / "part" / f"{name}.py", source)
    write(root / "docs" / "part" / "page.md", PAGE if snippets is None else "# 页\n")
    write(root / "docs" / "index.md", "# 首页\n")
    return root


def values(state) -> dict[str, object]:
    return {f"{sid}:{k}": getattr(r, "value", None) for sid, st in state.snippets.items() for k, r in st.results.items()}


def deterministic_records(project: Path) -> dict[str, dict]:
    return {p.name: records.deterministic_part(json.loads(p.read_text(encoding="utf-8")))
            for p in sorted((project / "snippets").rglob("*.record.json"))}


def timing_statuses(project: Path) -> dict[str, str]:
    """Snippet → status, from the timing report the build wrote (``.book-cache/report/timing.txt``)."""
    lines = (project / ".book-cache" / "report" / "timing.txt").read_text(encoding="utf-8").splitlines()
    return {line.split()[0]: line.split()[1] for line in lines[1:-1]}


def wait_until(condition, timeout: float = 30, what: str = "condition") -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


# -- the servers ------------------------------------------------------------------------------------------


AWS_ENV = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}


@pytest.fixture(scope="module")
def s3() -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (a free port); the usual AWS variables point every process at it — this one,
    the cluster's workers (started after it) and the ``mkdocs build`` subprocesses."""
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {**AWS_ENV, "AWS_ENDPOINT_URL_S3": f"http://{host}:{port}"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield f"http://{host}:{port}"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        import s3fs

        s3fs.S3FileSystem.clear_instance_cache()
        server.stop()


def new_bucket() -> str:
    """A fresh, empty bucket on the test server; returns the cache URL inside it."""
    import s3fs

    name = f"book-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem().mkdir(name)
    return f"s3://{name}/cache"


@pytest.fixture(scope="module")
def cluster(s3: str) -> Iterator[object]:
    """Two worker processes of one thread each; a worker that dies is restarted by its nanny, and a task whose
    worker died twice fails (``allowed-failures: 1``, the single retry the docs recommend).

    ``lost-worker-timeout``: a ``LocalCluster`` forgets (and closes the nanny of) a worker that has not come
    back 15 s after it died. Beside the whole book's build on two cores, a restarted worker took longer than
    that once in CI, and the cluster was left with one worker (``WorkerStartTimeoutError`` in the teardown of the
    test that kills both). The nanny restarts it; the cluster waits as long as the tests do."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": 1,
                          "distributed.deploy.lost-worker-timeout": f"{TIMEOUT}s"}):
        lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                      dashboard_address=None, silence_logs=50)
        try:
            with distributed.Client(lc, set_as_default=False, timeout=TIMEOUT) as client:
                client.wait_for_workers(2, timeout=TIMEOUT)
            yield lc
        finally:
            lc.close(timeout=60)


def executor_url(lc) -> str:
    return lc.scheduler_address.replace("tcp://", "dask://")


@pytest.fixture
def client(cluster) -> Iterator[object]:
    with distributed.Client(cluster, set_as_default=False, timeout=TIMEOUT) as c:
        yield c
        c.wait_for_workers(2, timeout=TIMEOUT)  # a test that killed a worker leaves the cluster whole again


# -- the cluster builds what a local build builds, and the shared cache makes the next clone free -----------


def test_a_cluster_build_with_an_s3_cache_gives_local_records_and_a_second_clone_reruns_nothing(cluster, s3, tmp_path):
    local = make_project(tmp_path / "local")
    t0 = time.perf_counter()
    state = session(local).build(Options())
    local_seconds = time.perf_counter() - t0
    assert statuses(state) == {"part/plain": "ran", "part/train": "ran", "part/use": "ran"}

    url = new_bucket()
    env = {"BOOK_EXECUTOR": executor_url(cluster), "BOOK_CACHE_DIR": url}
    a = make_project(tmp_path / "clone_a")
    t0 = time.perf_counter()
    done = mkdocs_build(a, **env)
    cluster_seconds = time.perf_counter() - t0
    assert done.returncode == 0, done.stderr
    assert timing_statuses(a) == {"part/plain": "ran", "part/train": "ran", "part/use": "ran"}
    assert deterministic_records(a) == deterministic_records(local), "a snippet's record depends on where it ran"
    assert not (a / ".book-cache" / "entries").exists(), "the results went to the shared cache, not the local one"

    b = make_project(tmp_path / "clone_b")
    done = mkdocs_build(b, **env)
    assert done.returncode == 0, done.stderr
    assert timing_statuses(b) == {"part/plain": "cached", "part/train": "cached", "part/use": "cached"}
    assert "3 snippets: 0 executed" in done.stderr
    page = Path("site") / "part" / "page" / "index.html"
    assert (b / page).read_text(encoding="utf-8") == (a / page).read_text(encoding="utf-8")
    assert deterministic_records(b) == deterministic_records(local)
    sys.stderr.write(f"\nfixture book, 3 snippets: local build {local_seconds:.1f} s (in-process session), "
                     f"cluster build {cluster_seconds:.1f} s (mkdocs build)\n")


def test_a_local_session_and_a_cluster_session_time_the_same_book(cluster, tmp_path):
    """The measured comparison for the report: the same three snippets, local pool vs two Dask workers."""
    seconds = {}
    for executor in ("local", executor_url(cluster)):
        project = make_project(tmp_path / executor.split(":")[0])
        t0 = time.perf_counter()
        state = session(project).build(Options(executor=executor))
        seconds[executor.split(":")[0]] = time.perf_counter() - t0
        assert set(statuses(state).values()) == {"ran"}
    assert deterministic_records(tmp_path / "local") == deterministic_records(tmp_path / "dask")
    sys.stderr.write(f"\nsame session API: local {seconds['local']:.1f} s, cluster {seconds['dask']:.1f} s\n")


# -- the shared cache: torn, truncated and planted entries -------------------------------------------------


def _entry_keys(storage: FsspecStore, snippet: str) -> list[str]:
    folder = f"entries/{snippet.replace('/', '__')}"
    return [f"{folder}/{n}" for n in storage.list(folder) if n.endswith(".json")]


def test_an_entry_or_blob_truncated_on_the_server_is_recomputed(s3, tmp_path):
    url = new_bucket()
    first = session(make_project(tmp_path / "a"), url).build(Options())
    storage = FsspecStore(url)
    (plain_entry,) = _entry_keys(storage, "part/plain")
    data = storage.get(plain_entry)
    storage.put(plain_entry, data[: len(data) // 2])
    (train_entry,) = _entry_keys(storage, "part/train")
    sha = Entry.from_json(storage.get(train_entry)).artifacts["model"]
    blob = storage.get(Cache.blob_key("part/train", sha))
    storage.put(Cache.blob_key("part/train", sha), blob[:-7])

    state = session(make_project(tmp_path / "b"), url).build(Options())
    assert statuses(state) == {"part/plain": "ran", "part/train": "ran", "part/use": "cached"}
    assert values(state) == values(first)
    state = session(make_project(tmp_path / "c"), url).build(Options())
    assert set(statuses(state).values()) == {"cached"}, "the recomputed entries replaced the damaged ones"


class _Payload:
    """Unpickling this creates ``marker``: the stand-in for any code an attacker would run."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').close()",))


def _torch_payload(marker: Path) -> bytes:
    import torch

    buf = io.BytesIO()
    torch.save({"w": _Payload(marker)}, buf)
    return TORCH_MAGIC + buf.getvalue()


def _runs_code_when_loaded(data: bytes, loader: str, marker: Path, tmp_path: Path) -> bool:
    """Proof that a payload is live: the unsafe loader, in a separate process, creates the marker."""
    path = tmp_path / f"payload-{uuid.uuid4().hex[:6]}"
    path.write_bytes(data)
    code = {"pickle": f"import pickle; pickle.loads(open({str(path)!r}, 'rb').read())",
            "torch": f"import io, torch; torch.load(io.BytesIO(open({str(path)!r}, 'rb').read()[{len(TORCH_MAGIC)}:]), "
                     "weights_only=False)"}[loader]
    subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=TIMEOUT)
    return marker.exists()


def test_a_planted_pickle_is_refused_never_run_and_recomputed(s3, tmp_path):
    url = new_bucket()
    first = session(make_project(tmp_path / "a"), url).build(Options())
    storage = FsspecStore(url)
    marker = tmp_path / "code-ran"
    proof = tmp_path / "payload-is-live"

    # As an entry: a pickle where the JSON of part/use's entry was.
    entry_attack = pickle.dumps(_Payload(marker))
    assert _runs_code_when_loaded(pickle.dumps(_Payload(proof)), "pickle", proof, tmp_path)
    (use_entry,) = _entry_keys(storage, "part/use")
    storage.put(use_entry, entry_attack)

    # As a blob: a torch file that runs code under a plain torch.load, named by its true hash, and an entry
    # for part/train that is otherwise intact (its checksum recomputed) — what a writer of the store can do.
    proof.unlink()
    assert _runs_code_when_loaded(_torch_payload(proof), "torch", proof, tmp_path)
    blob_attack = _torch_payload(marker)
    sha = hashlib.sha256(blob_attack).hexdigest()
    storage.put(Cache.blob_key("part/train", sha), blob_attack)
    (train_entry,) = _entry_keys(storage, "part/train")
    entry = Entry.from_json(storage.get(train_entry))
    entry.artifacts["model"] = sha
    storage.put(train_entry, entry.to_json())
    assert Entry.from_json(storage.get(train_entry)).artifacts["model"] == sha, "the planted entry is intact"

    # A worker that fetches the planted blob refuses it too (and removes it from the store).
    assert fetch_blob(open_store(url), Cache.blob_key("part/train", sha), sha) is None
    assert not marker.exists()
    storage.put(Cache.blob_key("part/train", sha), blob_attack)

    state = session(make_project(tmp_path / "b"), url).build(Options())
    assert not marker.exists(), "a planted pickle ran code"
    assert statuses(state) == {"part/plain": "cached", "part/train": "ran", "part/use": "ran"}
    assert values(state) == values(first)
    assert not storage.exists(Cache.blob_key("part/train", sha)), "the planted blob is deleted"
    assert Entry.from_json(storage.get(use_entry)) is not None, "the recomputed entry replaced the planted one"
    state = session(make_project(tmp_path / "c"), url).build(Options())
    assert set(statuses(state).values()) == {"cached"}
    assert not marker.exists()


# -- concurrent writers never leave a torn object -----------------------------------------------------------

WRITER = """
import hashlib, sys
from transformer_book.book.storage.store import open_store
store, tag, n = open_store(sys.argv[1]), sys.argv[2].encode(), int(sys.argv[3])
for i in range(n):
    body = (tag + b"%06d" % i) * (40000 + 997 * (i % 7))
    store.put("entries/x/same.json", hashlib.sha256(body).hexdigest().encode() + b"\\n" + body)
"""


def _intact(data: bytes | None) -> bool:
    if data is None:
        return True
    digest, _, body = data.partition(b"\n")
    return hashlib.sha256(body).hexdigest().encode() == digest


@pytest.mark.parametrize("where", ["file", "s3"])
def test_two_writers_of_one_entry_never_leave_a_torn_object(where, s3, tmp_path):
    location = (tmp_path / "shared").as_uri() if where == "file" else new_bucket()
    store = open_store(location)
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, location, tag, "60" if where == "file" else "15"])
               for tag in ("A", "B")]
    reads = torn = 0
    try:
        while any(w.poll() is None for w in writers):
            data = store.get("entries/x/same.json")
            reads += data is not None
            torn += not _intact(data)
    finally:
        for w in writers:
            w.wait(timeout=TIMEOUT)
    assert [w.returncode for w in writers] == [0, 0]
    assert _intact(store.get("entries/x/same.json")) and store.get("entries/x/same.json") is not None
    assert torn == 0, f"{torn} of {reads} reads saw a torn entry"
    assert reads > 0
    store.fs.invalidate_cache()
    left = [name.rsplit("/", 1)[-1] for name in store.fs.ls(store.path("entries/x"), detail=False)]
    assert left == ["same.json"], "no temporary file is left behind"


# -- pruning works on a shared store ------------------------------------------------------------------------


def test_a_shared_store_keeps_a_few_entries_per_snippet_and_prunes_blobs_nobody_needs(tmp_path, monkeypatch):
    storage = FsspecStore(f"memory://book-{uuid.uuid4().hex[:8]}/cache")
    cache = Cache(tmp_path / "local", tmp_path, storage=storage)
    blobs = []
    for i in range(cache_module.KEEP_PER_SNIPPET + 2):
        data = b"TBJSON1\n" + json.dumps([i]).encode()
        sha = hashlib.sha256(data).hexdigest()
        (cache.blob_dir("part/x")).mkdir(parents=True, exist_ok=True)
        (cache.blob_dir("part/x") / sha).write_bytes(data)
        blobs.append(sha)
        cache.store(Entry(f"key{i}", "part/x", {}, {}, 1.0, artifacts={"m": sha}))
        kept = storage.list("entries/part__x")
        assert f"key{i}.json" in kept, "the entry just written is kept"
        assert len(kept) == min(i + 1, cache_module.KEEP_PER_SNIPPET)
    # Blobs of pruned entries stay for a grace period (another build may be writing an entry that names them) …
    assert set(storage.list("entries/part__x/blobs")) == set(blobs)
    # … and go once they are older than that.
    monkeypatch.setattr(cache_module, "SHARED_BLOB_GRACE_SECONDS", -1)
    cache.store(Entry("key-last", "part/x", {}, {}, 1.0, artifacts={"m": blobs[-1]}))
    kept_entries = [Entry.from_json(storage.get(f"entries/part__x/{n}")) for n in storage.list("entries/part__x")]
    wanted = {e.artifacts["m"] for e in kept_entries}
    assert set(storage.list("entries/part__x/blobs")) == wanted
    assert {p.name for p in cache.blob_dir("part/x").iterdir()} == wanted, "the local copies follow"


def test_a_local_cache_folder_is_still_the_default_with_the_same_layout(tmp_path):
    project = make_project(tmp_path / "p", {"plain": PLAIN})
    s = session(project)
    assert isinstance(s.cache.storage, LocalStore)
    s.build(Options())
    assert len(list((project / ".book-cache" / "entries" / "part__plain").glob("*.json"))) == 1


# -- workers that die ---------------------------------------------------------------------------------------

DIES = '''
import os, signal
from transformer_book.book import Value

ATTEMPTS = {attempts!r}


def compute():
    with open(ATTEMPTS, "a") as f:
        f.write(f"{{os.getpid()}}\\n")
    if {always} or len(open(ATTEMPTS).read().split()) == 1:
        {kill}
    return {{"ok": Value(1)}}
'''

KILL_SELF = "os.killpg(0, signal.SIGKILL)  # the snippet's whole process group"
# The snippet's parent is the worker's zygote (execution/zygote.py); the zygote's parent is the Dask worker.
KILL_WORKER = ("worker = int(open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[1]); "
               "os.kill(worker, signal.SIGKILL); import time; time.sleep(60)  # the Dask worker itself")
KILL_ZYGOTE = "os.kill(os.getppid(), signal.SIGKILL); import time; time.sleep(60)  # the worker's zygote"


def _dies(tmp_path: Path, name: str, kill: str, always: bool) -> str:
    return DIES.format(attempts=str(tmp_path / f"{name}.attempts"), always=always, kill=kill)


def _attempts(tmp_path: Path, name: str) -> list[int]:
    return [int(p) for p in (tmp_path / f"{name}.attempts").read_text().split()]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _build_on_cluster(cluster, tmp_path: Path, name: str, snippets: dict[str, str]):
    project = make_project(tmp_path / name, snippets)
    return project, session(project).build(Options(executor=executor_url(cluster)))


def _errors(state) -> dict[str, str]:
    return {sid: st.error.message for sid, st in state.snippets.items() if st.error}


# A snippet that kills its Dask worker takes down whatever else that worker was given (Dask's semantics):
# such snippets are built alone, so that the count of attempts is theirs only.


def test_a_snippet_whose_process_or_worker_dies_once_is_retried_and_succeeds(client, cluster, tmp_path):
    _, state = _build_on_cluster(cluster, tmp_path, "p1", {
        "dies_once": _dies(tmp_path, "dies_once", KILL_SELF, False), "plain": PLAIN})
    assert statuses(state) == {"part/dies_once": "ran", "part/plain": "ran"}, _errors(state)
    assert len(_attempts(tmp_path, "dies_once")) == 2

    _, state = _build_on_cluster(cluster, tmp_path, "p2", {
        "kills_worker_once": _dies(tmp_path, "kills_worker_once", KILL_WORKER, False)})
    assert statuses(state) == {"part/kills_worker_once": "ran"}, _errors(state)
    assert len(_attempts(tmp_path, "kills_worker_once")) == 2
    orphan = _attempts(tmp_path, "kills_worker_once")[0]
    wait_until(lambda: _gone(orphan), 30, "the snippet process whose worker died to exit")

    _, state = _build_on_cluster(cluster, tmp_path, "p3", {
        "kills_zygote_once": _dies(tmp_path, "kills_zygote_once", KILL_ZYGOTE, False)})
    assert statuses(state) == {"part/kills_zygote_once": "ran"}, _errors(state)
    assert len(_attempts(tmp_path, "kills_zygote_once")) == 2, "a new zygote started the retry"
    orphan = _attempts(tmp_path, "kills_zygote_once")[0]
    wait_until(lambda: _gone(orphan), 30, "the snippet process whose zygote died to exit")


def test_a_snippet_that_always_kills_its_worker_fails_the_build_naming_it(client, cluster, tmp_path):
    p1, state = _build_on_cluster(cluster, tmp_path, "p1", {
        "always_dies": _dies(tmp_path, "always_dies", KILL_SELF, True), "plain": PLAIN})
    assert statuses(state) == {"part/always_dies": "error", "part/plain": "ran"}, _errors(state)
    assert "SIGKILL" in state.snippets["part/always_dies"].error.message
    p2, state2 = _build_on_cluster(cluster, tmp_path, "p2", {
        "always_kills_worker": _dies(tmp_path, "always_kills_worker", KILL_WORKER, True)})
    assert statuses(state2) == {"part/always_kills_worker": "error"}
    for project, st, sid in ((p1, state, "part/always_dies"), (p2, state2, "part/always_kills_worker")):
        message = st.snippets[sid].error.message
        assert sid in message and "died" in message and "retried" in message, message
        assert st.snippets[sid].error.file == f"snippets/{sid}.py"
        assert len(_attempts(tmp_path, sid.split("/")[1])) == 2, "one retry, no more"
        assert not list((project / ".book-cache" / "entries").glob(f"{sid.replace('/', '__')}/*.json")), \
            "a failed snippet leaves no entry"


SLEEPS = '''
import os, signal, time
from transformer_book.book import Value

TIMEOUT_SECONDS = {timeout}


def compute():
    with open({pid_file!r}, "w") as f:
        f.write(str(os.getpid()))
    for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT):  # as a hang in native code, ignoring every signal
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGALRM, signal.SIGTERM, signal.SIGINT}})
    time.sleep(600)
    return {{"never": Value(1)}}
'''


def test_a_snippet_on_the_cluster_runs_with_the_allocator_settings_of_a_local_one(client, cluster, tmp_path):
    """Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536 in its workers; inherited by a snippet it made every
    training step about a third slower (measured with and without it on one training)."""
    _, state = _build_on_cluster(cluster, tmp_path, "m", {"env": '''
import os
from transformer_book.book import Value


def compute():
    return {"trim": Value(os.environ.get("MALLOC_TRIM_THRESHOLD_", "unset"))}
'''})
    assert state.snippets["part/env"].results["trim"].value == "unset"
    on_workers = client.run(lambda: os.environ.get("MALLOC_TRIM_THRESHOLD_"))
    assert on_workers and all(v == "65536" for v in on_workers.values()), f"the workers keep Dask's setting: {on_workers}"


def test_a_snippet_on_the_cluster_starts_with_its_libraries_loaded_as_a_local_one(client, cluster, tmp_path):
    """Forked from the worker's preloaded zygote, not a fresh interpreter that imports torch again (2–3 s a
    snippet: the cluster's whole book took 1.28 × the local pool's time)."""
    _, state = _build_on_cluster(cluster, tmp_path, "z", {"loaded": '''
import os, sys
from transformer_book.book import Value


def compute():
    parent = open(f"/proc/{os.getppid()}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
    return {"torch": Value("torch" in sys.modules), "parent": Value(parent)}
'''})
    results = state.snippets["part/loaded"].results
    assert results["torch"].value is True, "torch was loaded before the snippet started"
    assert "transformer_book.book.execution.zygote" in results["parent"].value


def test_stopping_a_cluster_build_kills_the_snippet_process_running_on_a_worker(client, cluster, tmp_path):
    import threading

    pid_file = tmp_path / "sleeper.pid"
    project = make_project(tmp_path / "p", {"sleeper": SLEEPS.format(timeout=900, pid_file=str(pid_file))})
    book = session(project)
    done: list = []
    thread = threading.Thread(target=lambda: done.append(book.build(Options(executor=executor_url(cluster)))))
    thread.start()
    wait_until(pid_file.exists, 60, "the snippet to start on a worker")
    wait_until(lambda: pid_file.read_text().strip() != "", 10, "the snippet to write its pid")
    pid = int(pid_file.read_text())
    book.stop()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the stopped build went on waiting"
    wait_until(lambda: _gone(pid), 15, "the snippet process on the worker to be killed")
    assert "interrupted" in done[0].snippets["part/sleeper"].error.message


def test_a_snippet_that_ignores_signals_on_a_worker_is_killed_by_its_declared_timeout(client, cluster, tmp_path):
    pid_file = tmp_path / "hung.pid"
    project, state = _build_on_cluster(cluster, tmp_path, "h", {
        "hung": SLEEPS.format(timeout=1, pid_file=str(pid_file)), "plain": PLAIN})
    error = state.snippets["part/hung"].error
    assert error is not None and "timeout of 1 s" in error.message and "did not stop" in error.message, _errors(state)
    assert state.snippets["part/plain"].status == "ran"
    assert _gone(int(pid_file.read_text()))


# -- a worker unlike the build machine ----------------------------------------------------------------------


def _pretend_torch(version: str) -> None:
    from transformer_book.book import environment
    from transformer_book.book.execution import identity

    identity.versions = lambda: {**environment.versions(), "torch": version}


def _stop_pretending() -> None:
    from transformer_book.book import environment
    from transformer_book.book.execution import identity

    identity.versions = environment.versions


def test_a_worker_with_another_environment_refuses_naming_what_differs(client, cluster, tmp_path):
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ship the two helpers above to the workers
    project = make_project(tmp_path / "p", {"plain": PLAIN})
    try:
        client.run(_pretend_torch, "2.12.0")
        state = session(project).build(Options(executor=executor_url(cluster)))
    finally:
        client.run(_stop_pretending)
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    error = state.snippets["part/plain"].error
    assert statuses(state) == {"part/plain": "error"}
    assert "part/plain cannot run on worker tcp://127.0.0.1:" in error.message
    assert f"version torch: build {importlib.metadata.version('torch')}, worker 2.12.0" in error.message
    assert not list((project / ".book-cache").rglob("*.json"))


def test_the_fingerprint_names_a_source_file_that_differs(tmp_path):
    from transformer_book.book.execution.identity import differences, identity

    project = make_project(tmp_path / "p", {"plain": PLAIN})
    build = identity(project)
    assert "source snippets/part/plain.py" in build and "version torch" in build and "python cache tag" in build
    (project / "snippets" / "part" / "plain.py").write_text(PLAIN + "\n# edited\n", encoding="utf-8")
    write(project / "lib" / "extra.py", "X = 1\n")
    diff = differences(build, identity(project))
    assert len(diff) == 2
    assert diff[0] == "source lib/extra.py: build absent, worker " + hashlib.sha256(b"X = 1\n").hexdigest()[:12]
    assert diff[1].startswith("source snippets/part/plain.py: build ")


# -- choosing the executor and the cache --------------------------------------------------------------------


def test_the_executor_and_the_cache_are_chosen_by_mkdocs_yml_or_the_environment(tmp_path):
    from transformer_book.book.site import config

    cfg = config.BookConfig()
    cfg.load_dict({"executor": "dask://10.0.0.5:8786", "cache_dir": "s3://bucket/prefix/"})
    assert not cfg.validate()[0]
    assert config.options(cfg, {}).executor == "dask://10.0.0.5:8786"
    assert config.options(cfg, {"BOOK_EXECUTOR": "local"}).executor == "local"
    assert config.cache_dir(cfg, tmp_path, {}) == "s3://bucket/prefix"
    assert config.cache_dir(cfg, tmp_path, {"BOOK_CACHE_DIR": "cache"}) == tmp_path / "cache"
    default = config.BookConfig()
    default.load_dict({})
    default.validate()
    assert config.options(default, {}).executor == "local"
    assert config.cache_dir(default, tmp_path, {}) == tmp_path / ".book-cache"


def test_an_unknown_executor_is_named() -> None:
    from transformer_book.book.execution.dask_executor import ExecutorUnavailable, scheduler_address

    assert scheduler_address("dask://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    with pytest.raises(ExecutorUnavailable, match="unknown executor 'spark://x'"):
        scheduler_address("spark://x")


def test_without_dask_the_error_names_the_pip_command(tmp_path, monkeypatch):
    from transformer_book.book.execution.dask_executor import DaskExecutor, ExecutorUnavailable

    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed → ImportError
    project = make_project(tmp_path / "p", {"plain": PLAIN})
    with pytest.raises(ExecutorUnavailable, match=r"pip install 'dask\[distributed\]'"):
        DaskExecutor("dask://127.0.0.1:8786", session(project).cache, project)


def test_an_unreachable_scheduler_is_named(tmp_path):
    import socket

    from transformer_book.book.execution.dask_executor import DaskExecutor, ExecutorUnavailable

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    project = make_project(tmp_path / "p", {"plain": PLAIN})
    with pytest.raises(ExecutorUnavailable, match=f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}"):
        DaskExecutor(f"dask://127.0.0.1:{port}", session(project).cache, project, timeout=2)


# -- a shared store that fails now and then ---------------------------------------------------------------


def test_a_shared_store_that_times_out_once_is_retried_and_one_that_keeps_failing_is_named(monkeypatch):
    from transformer_book.book.storage import store as store_module

    monkeypatch.setattr(store_module, "RETRY_SECONDS", (0.01, 0.01))
    storage = FsspecStore(f"memory://book-{uuid.uuid4().hex[:8]}/cache")
    storage.put("entries/x/a.json", b"data")
    real = storage.fs.cat_file
    failures = iter([TimeoutError("read timed out")])

    def flaky(path, *args, **kwargs):
        for exc in failures:
            raise exc
        return real(path, *args, **kwargs)

    monkeypatch.setattr(storage.fs, "cat_file", flaky)
    assert storage.get("entries/x/a.json") == b"data"

    def down(path, *args, **kwargs):
        raise ConnectionError("connection reset by peer")

    monkeypatch.setattr(storage.fs, "cat_file", down)
    with pytest.raises(store_module.StoreUnavailable, match=r"memory://.*entries/x/a\.json.*3 attempts"):
        storage.get("entries/x/a.json")


def test_an_intact_entry_or_blob_of_another_engine_version_is_left_in_the_shared_store(tmp_path):
    storage = FsspecStore(f"memory://book-{uuid.uuid4().hex[:8]}/cache")
    cache = Cache(tmp_path / "local", tmp_path, storage=storage)
    body = json.dumps({"format": "transformer-book-cache/99", "key": "k1", "snippet": "part/x"})
    other = json.dumps({"checksum": hashlib.sha256(body.encode()).hexdigest(), "body": body}).encode()
    storage.put("entries/part__x/k1.json", other)
    assert cache.load("part/x", "k1") is None
    assert storage.get("entries/part__x/k1.json") == other, "a good entry of another version was deleted"

    storage.put("entries/part__x/k2.json", other[:-5])  # torn: deleted
    assert cache.load("part/x", "k2") is None and not storage.exists("entries/part__x/k2.json")

    future_blob = b"TBJSON9\n[1, 2]"
    sha = hashlib.sha256(future_blob).hexdigest()
    storage.put(f"entries/part__x/blobs/{sha}", future_blob)
    assert cache_module.fetch_blob(storage, f"entries/part__x/blobs/{sha}", sha) is None
    assert storage.exists(f"entries/part__x/blobs/{sha}")
    storage.put(f"entries/part__x/blobs/{'0' * 64}", future_blob)  # does not hash to its name: corrupt
    assert cache_module.fetch_blob(storage, f"entries/part__x/blobs/{'0' * 64}", "0" * 64) is None
    assert not storage.exists(f"entries/part__x/blobs/{'0' * 64}")
