"""What a cached result is valid for, and a run that does not end: each a bad input from an author's day
(a save while a training runs, an engine edit, a producer trained again, a hang), with a clear answer and
nothing stale served afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from transformer_book.book.storage.cache import Entry
from transformer_book.book.state import Options

from conftest import CONSUMER, PRODUCER, SNIPPET_A, book_env, session, statuses, write

# compute() saves a new version of the module it imported — what an author does under ``serve`` while a
# two-minute training runs. The result was computed from VALUE = 1.5; the entry must not claim VALUE = 9.
SAVES_ITS_MODULE = '''
import sys
from pathlib import Path
LIB = Path(__file__).resolve().parents[2] / "lib"
sys.path.insert(0, str(LIB))
import helper_a
from transformer_book.book import Value


def compute():
    used = helper_a.VALUE
    (LIB / "helper_a.py").write_text("VALUE = 9.0\\n", encoding="utf-8")
    return {"answer": Value(used, ".2f")}
'''

# part/a runs first (one worker; equal priority goes by name) and saves a new version of part/b, which is
# already queued with the key of its old source: part/b must run the bytes its key was computed from.
SAVES_THE_NEXT_SNIPPET = '''
from pathlib import Path
from transformer_book.book import Value


def compute():
    b = Path(__file__).with_name("b.py")
    b.write_text(b.read_text(encoding="utf-8").replace("FACTOR = 1", "FACTOR = 2"), encoding="utf-8")
    return {"answer": Value(1, "d")}
'''

QUEUED = '''
from transformer_book.book import Value

FACTOR = 1


def compute():
    return {"other": Value(10 * FACTOR, "d")}
'''


def test_a_module_saved_while_its_snippet_runs_makes_the_next_build_rerun_it(project: Path) -> None:
    write(project / "snippets" / "part" / "a.py", SAVES_ITS_MODULE)
    s = session(project)
    first = s.build(Options(select=("part/a",)))
    assert first.snippets["part/a"].results["answer"].value == 1.5
    second = s.build(Options(select=("part/a",)))
    assert second.snippets["part/a"].status == "ran", "the entry held the new file's hash with the old code's result"
    assert second.snippets["part/a"].results["answer"].value == 9.0


def test_a_snippet_saved_after_it_was_queued_runs_the_version_its_key_was_made_from(project: Path) -> None:
    write(project / "snippets" / "part" / "a.py", SAVES_THE_NEXT_SNIPPET)
    write(project / "snippets" / "part" / "b.py", QUEUED)
    s = session(project)
    first = s.build(Options(workers=1))
    assert first.snippets["part/b"].results["other"].value == 10, "the entry of FACTOR = 1 holds FACTOR = 2's result"
    second = s.build(Options(workers=1, select=("part/b",)))
    assert second.snippets["part/b"].status == "ran" and second.snippets["part/b"].results["other"].value == 20


def test_the_engine_code_a_snippet_ran_is_part_of_what_its_entry_is_valid_for(project: Path) -> None:
    """Every engine module the worker ran (results, comparisons, figures, the worker itself) is hashed
    into the entry: an entry made by other engine code is rerun, without a version number to bump."""
    s = session(project)
    state = s.build(Options(select=("part/b",)))
    entry = state.entries["part/b"]
    engine = {dep for dep in entry.deps if "/transformer_book/book/" in dep}
    assert {"worker.py", "results.py", "compare.py"} <= {Path(dep).name for dep in engine}
    assert statuses(s.build(Options(select=("part/b",))))["part/b"] == "cached"

    # the same entry, as if made by an engine whose results.py was different
    results_py = next(dep for dep in engine if dep.endswith("/results.py"))
    other = Entry(entry.key, entry.snippet, {**entry.deps, results_py: "0" * 64}, entry.results, entry.seconds,
                  entry.budget, entry.artifacts)
    s.cache.store(other)
    assert statuses(s.build(Options(select=("part/b",))))["part/b"] == "ran"


NONDETERMINISTIC_PRODUCER = '''
import os
from transformer_book.book import Artifact, Value


def compute():
    # stands in for a training whose weights differ on another machine or another run
    noise = int.from_bytes(os.urandom(4), "little")
    return {"model": Artifact({"w": [noise, 1, 2]}), "size": Value(3, "d")}
'''

READS_FIRST_WEIGHT = '''
from transformer_book.book import Value, artifact

REQUIRES = ["part/train"]


def compute():
    return {"first": Value(artifact("part/train", "model")["w"][0], "d")}
'''


def test_a_producer_recomputed_with_other_weights_makes_its_consumers_rerun(project: Path) -> None:
    write(project / "snippets" / "part" / "train.py", NONDETERMINISTIC_PRODUCER)
    write(project / "snippets" / "part" / "use.py", READS_FIRST_WEIGHT)
    s = session(project)
    first = s.build(Options(select=("part/train", "part/use")))
    # the producer alone trained again (what ``accept --keep-requirements part/train`` or a CI run does)
    s.build(Options(fresh=True, fresh_only=("part/train",), select=("part/train",)))
    after = s.build(Options(select=("part/train", "part/use")))
    assert after.snippets["part/train"].status == "cached"
    assert after.snippets["part/use"].status == "ran", "the consumer kept a result made from the old weights"
    assert after.snippets["part/use"].results["first"].value != first.snippets["part/use"].results["first"].value


def test_a_value_holding_a_list_is_refused_naming_its_key(project: Path) -> None:
    write(project / "snippets" / "part" / "b.py", '''
        from transformer_book.book import Value


        def compute():
            return {"several": Value([1, 2], "d")}
    ''')
    state = session(project).build(Options(select=("part/b",)))
    error = state.snippets["part/b"].error
    assert error is not None and "'several'" in error.message and "Table" in error.message
    assert error.location() == "snippets/part/b.py:5"  # the line that made it, not line 0


def test_a_compute_that_returns_no_dict_is_named_at_its_return(project: Path) -> None:
    write(project / "snippets" / "part" / "listy.py", '''
        from transformer_book.book import Value


        def compute():
            values = [Value(1.0), Value(2.0)]
            return values
    ''')
    error = session(project).build(Options(select=("part/listy",))).snippets["part/listy"].error
    assert error is not None and "must return a non-empty dict" in error.message
    assert error.location() == "snippets/part/listy.py:6"


def test_an_error_raised_in_compute_names_the_line_of_the_raise_also_when_run_by_hand(project: Path) -> None:
    write(project / "snippets" / "part" / "b.py", '''
        def helper():
            raise KeyError("没有这个键")


        def compute():
            return {"x": helper()}
    ''')
    error = session(project).build(Options(select=("part/b",))).snippets["part/b"].error
    assert error is not None and error.location() == "snippets/part/b.py:2" and "KeyError" in error.message
    done = subprocess.run([sys.executable, "-m", "transformer_book", "run", "part/b"], cwd=project, env=book_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "snippets/part/b.py:2: KeyError: '没有这个键'" in done.stderr


HANGS = '''
import time
from transformer_book.book import Value

TIMEOUT_SECONDS = 2


def compute():
    while True:  # a deadlock, an input() nobody answers, a loop that never ends
        time.sleep(0.1)
    return {"never": Value(1, "d")}
'''


def test_a_snippet_that_hangs_past_its_timeout_is_stopped_and_named_and_the_others_keep_their_results(project: Path) -> None:
    write(project / "snippets" / "part" / "a.py", HANGS)
    start = time.perf_counter()
    state = session(project).build(Options(workers=2))
    took = time.perf_counter() - start
    error = state.snippets["part/a"].error
    assert error is not None and "timeout of 2 s" in error.message and "stopped after 2." in error.message
    assert error.location().startswith("snippets/part/a.py:")  # the line where it was when it was stopped
    assert state.snippets["part/b"].status == "ran" and state.snippets["part/b"].results["other"].value == 7.0
    assert took < 60, f"the build waited {took:.0f} s for a snippet with a 2 s timeout"


def test_a_snippet_that_declares_no_timeout_gets_the_builds_default(project: Path) -> None:
    write(project / "snippets" / "part" / "a.py", HANGS.replace("TIMEOUT_SECONDS = 2", ""))
    state = session(project).build(Options(select=("part/a",), timeout=1.5))
    error = state.snippets["part/a"].error
    assert error is not None and "timeout of 1.5 s" in error.message


def test_the_timeout_option_reaches_the_build(project: Path) -> None:
    from conftest import mkdocs_build

    write(project / "snippets" / "part" / "a.py", HANGS.replace("TIMEOUT_SECONDS = 2", ""))
    config = (project / "mkdocs.yml").read_text(encoding="utf-8").replace("mathjax: false", "mathjax: false\n      timeout: 1")
    (project / "mkdocs.yml").write_text(config, encoding="utf-8")
    done = mkdocs_build(project)
    assert done.returncode != 0 and "part/a" in done.stderr and "timeout of 1 s" in done.stderr
    assert not list((project / ".book-cache" / "entries").glob("part__a/*.json")), "a stopped run left an entry"
    json.dumps(done.stderr)  # the message is plain text


MEASURES = '''
import time
from transformer_book.book import Value


def compute():
    start = time.perf_counter()
    sum(range(1000))
    return {"seconds": Value(time.perf_counter() - start, ".1e", kind="measured")}
'''


def test_a_measured_value_names_the_machine_and_day_it_was_measured_on_not_the_renderers(project: Path) -> None:
    from conftest import mkdocs_build

    from transformer_book.book.environment import machine

    write(project / "snippets" / "part" / "b.py", MEASURES)
    write(project / "docs" / "part" / "page.md", "# 页\n\n用时 {{ b:seconds }}。\n")
    s = session(project)
    entry = s.build(Options(select=("part/b",))).entries["part/b"]
    assert entry.measured_on.startswith(machine()) and entry.measured_on.endswith(time.strftime("%Y-%m-%d"))

    # the same result, as a cluster worker or an earlier day would have left it in the cache
    s.cache.store(Entry(entry.key, entry.snippet, entry.deps, entry.results, entry.seconds, entry.budget,
                        entry.artifacts, "另一台机器，2026-11-30"))
    done = mkdocs_build(project)
    assert done.returncode == 0, done.stderr
    html = (project / "site" / "part" / "page" / "index.html").read_text(encoding="utf-8")
    assert "另一台机器，2026-11-30" in html


def test_an_annotated_requires_is_read_like_a_plain_one(project: Path) -> None:
    write(project / "snippets" / "part" / "train.py", PRODUCER)
    write(project / "snippets" / "part" / "use.py", CONSUMER.replace("REQUIRES = ", "REQUIRES: list[str] = "))
    state = session(project).build(Options(select=("part/use",)))
    assert statuses(state) == {"part/a": "skipped", "part/b": "skipped", "part/train": "ran", "part/use": "ran"}
    assert state.snippets["part/use"].results["total"].value == 4.5


def test_a_snippets_requires_is_read_again_after_every_edit_and_a_bad_one_fails_every_time(project: Path) -> None:
    """A session remembers what each source requires (``serve`` asks on every save): by its text, so an edit
    is seen at once, and a malformed ``REQUIRES`` is reported by every build, not only the first."""
    from transformer_book.book.discover import discover

    use = project / "snippets" / "part" / "use.py"
    write(use, CONSUMER)
    snippet = discover(project / "snippets")["part/use"]
    assert snippet.requires() == ["part/train"]
    use.write_text(CONSUMER.replace('["part/train"]', '["part/train", "part/a"]'), encoding="utf-8")
    assert snippet.requires() == ["part/train", "part/a"]
    use.write_text(CONSUMER.replace('["part/train"]', '"part/train"'), encoding="utf-8")
    for _ in range(2):
        with pytest.raises(ValueError, match="use.py:.*REQUIRES must be a literal list"):
            snippet.requires()
    use.write_text(CONSUMER, encoding="utf-8")
    assert snippet.requires() == ["part/train"]


def test_the_command_line_reads_mkdocs_yml_as_the_build_does_env_tags_included(project: Path) -> None:
    import os
    import subprocess
    import sys

    config = (project / "mkdocs.yml").read_text(encoding="utf-8")
    config = config.replace("mathjax: false", 'mathjax: false\n      snippets_dir: !ENV [BOOK_TEST_SNIPPETS, "snippets"]')
    (project / "mkdocs.yml").write_text(config, encoding="utf-8")
    write(project / "elsewhere" / "part" / "moved.py", 'from transformer_book.book import Value\n\n\ndef compute():\n    return {"x": Value(1)}\n')
    env = {**os.environ, "BOOK_TEST_SNIPPETS": "elsewhere"}
    done = subprocess.run([sys.executable, "-m", "transformer_book", "list"], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "part/moved" in done.stdout and "part/a" not in done.stdout


def test_an_error_of_the_background_build_itself_shows_on_the_waiting_pages_and_in_the_terminal(project: Path) -> None:
    from transformer_book.book.site.background import BackgroundBuild

    s = session(project)
    waiting = s.build(Options(), execute_missing=False)  # what the first serve build renders: placeholders
    assert set(statuses(waiting).values()) == {"pending"}
    stamp = project / ".book-cache" / "serve" / "landed"
    logged: list[str] = []
    background = BackgroundBuild(s, Options(), stamp, log=lambda message: None, log_error=logged.append)

    def broken(*args, **kwargs):
        raise OSError("No space left on device")

    s.build = broken  # type: ignore[method-assign]  # the engine fails, not a snippet
    background.release()
    background.ensure_running()
    background.wait(30)
    assert not background.running and stamp.exists(), "the server is told to rebuild"
    shown = background.merge(waiting)
    assert {sid: st.status for sid, st in shown.snippets.items()} == {"part/a": "error", "part/b": "error"}
    assert "No space left on device" in shown.snippets["part/a"].error.message
    assert logged and "the background build stopped: OSError" in logged[0] and "Traceback" in logged[0]


RECORDS_ITS_PID_AND_WAITS = '''
import os
import time
from pathlib import Path
from transformer_book.book import Value


def compute():
    (Path(__file__).resolve().parents[2] / "pid.txt").write_text(str(os.getpid()))
    time.sleep(120)  # a training the author stops waiting for
    return {"other": Value(1.0, ".1f")}
'''


def test_stopping_a_build_kills_its_running_snippet_and_starts_no_queued_one(project: Path) -> None:
    import os
    import threading

    write(project / "snippets" / "part" / "b.py", RECORDS_ITS_PID_AND_WAITS)
    s = session(project)
    found: dict = {}
    thread = threading.Thread(target=lambda: found.setdefault("state", s.build(Options(workers=1))))
    thread.start()
    pid_file = project / "pid.txt"
    for _ in range(300):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.1)
    pid = int(pid_file.read_text())
    start = time.perf_counter()
    s.stop()  # what on_shutdown does on Ctrl-C
    thread.join(30)
    assert not thread.is_alive() and time.perf_counter() - start < 20, "the build waited for the snippet"
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"snippet process {pid} is still running")
    state = found["state"]
    assert state.snippets["part/b"].status == "error" and "interrupted" in state.snippets["part/b"].error.message


def test_a_record_edited_into_the_wrong_shape_fails_naming_its_file_and_key(tmp_path: Path) -> None:
    """A record is JSON people edit and merge: a list where the drift check reads a number is refused when the
    record is loaded, naming the file and the key — not a TypeError in a later build."""
    import pytest

    from transformer_book.book.checking import records
    from transformer_book.book.results import Table, Value

    path = tmp_path / "x.record.json"
    records.save(path, records.build_record("part/x", {"n": Value(3, "d"), "t": Table(["a"], [[1.0]])}))
    assert records.load(path).results["n"]["value"] == 3
    data = json.loads(path.read_text(encoding="utf-8"))
    data["results"]["n"]["value"] = [1, 2]
    data["results"]["t"]["tolerance"] = {"rel": "wide"}
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ValueError) as err:
        records.load(path)
    message = str(err.value)
    assert str(path) in message
    assert "results → n → value: [1, 2] is not of type" in message
    assert "results → t → tolerance → rel: 'wide' is not of type 'number'" in message


# -- the local executor owns each snippet process -------------------------------------------------------

KILLS_ITSELF = '''
import os
import signal
from transformer_book.book import Value


def compute():
    os.kill(os.getpid(), signal.SIGKILL)  # a segfault, the OOM killer, an os._exit deep in a library
    return {"never": Value(1, "d")}
'''

IGNORES_SIGNALS = '''
import signal
import time
from transformer_book.book import Value

BUDGET_SECONDS = 0.1  # declares no timeout: 10 × its budget, 1 s


def compute():
    for sig in (signal.SIGALRM, signal.SIGTERM, signal.SIGINT):  # as a hang inside native code: no Python runs,
        signal.signal(sig, signal.SIG_IGN)                       # and whatever signal comes is ignored
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM, signal.SIGINT})
    time.sleep(120)
    return {"never": Value(1, "d")}
'''


def test_a_snippet_that_kills_its_own_process_fails_alone_named_and_the_queued_ones_still_run(project: Path) -> None:
    write(project / "snippets" / "part" / "a.py", KILLS_ITSELF)
    for name in ("c", "d"):  # queued behind it: one worker, three snippets
        write(project / "snippets" / "part" / f"{name}.py", f'''
            from transformer_book.book import Value


            def compute():
                return {{"x": Value({ord(name)}, "d")}}
        ''')
    state = session(project).build(Options(workers=1))
    error = state.snippets["part/a"].error
    assert error is not None and "process died while it ran" in error.message and "SIGKILL" in error.message
    assert error.file == str(project / "snippets" / "part" / "a.py")
    assert {sid: st.status for sid, st in state.snippets.items() if sid != "part/a"} == {
        "part/b": "ran", "part/c": "ran", "part/d": "ran"}
    assert state.snippets["part/d"].results["x"].value == ord("d")


def test_a_snippet_that_ignores_signals_is_killed_by_its_declared_timeout(project: Path) -> None:
    """The one deadline path: the declaration (here a budget, so 10 × 0.1 s) → the task → the executor that owns
    the process, which kills it (SIGKILL cannot be ignored) a grace period after the timeout."""
    from transformer_book.book.types import KILL_GRACE

    write(project / "snippets" / "part" / "a.py", IGNORES_SIGNALS)
    start = time.perf_counter()
    state = session(project).build(Options(workers=2))
    took = time.perf_counter() - start
    error = state.snippets["part/a"].error
    assert error is not None and "timeout of 1 s" in error.message and "did not stop" in error.message
    assert 1 + KILL_GRACE <= took < 1 + KILL_GRACE + 20, f"the build waited {took:.0f} s"
    assert state.snippets["part/b"].status == "ran"


def test_a_timeout_that_is_not_a_number_fails_its_snippet_naming_file_and_line(project: Path) -> None:
    write(project / "snippets" / "part" / "a.py", "import os\nTIMEOUT_SECONDS = int(os.environ.get('T', 5))\n"
          + SNIPPET_A)
    state = session(project).build(Options())
    error = state.snippets["part/a"].error
    assert error is not None and "snippets/part/a.py:2: TIMEOUT_SECONDS must be a positive number" in error.message
    assert state.snippets["part/b"].status == "ran"


def test_stopping_a_session_kills_the_snippet_processes_it_started(project: Path) -> None:
    import threading

    from transformer_book.book.execution import pool

    write(project / "snippets" / "part" / "a.py", IGNORES_SIGNALS.replace("BUDGET_SECONDS = 0.1", "TIMEOUT_SECONDS = 600"))
    book = session(project)
    started: list = []
    real_submit = pool.LocalExecutor.submit

    def submit(self, task):  # note each process as it starts
        future = real_submit(self, task)
        started.extend(self.processes())
        return future

    pool.LocalExecutor.submit = submit
    try:
        done: list = []
        thread = threading.Thread(target=lambda: done.append(book.build(Options(select=("part/a",)))))
        thread.start()
        deadline = time.monotonic() + 60
        while not started and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        book.stop()
        thread.join(timeout=30)
    finally:
        pool.LocalExecutor.submit = real_submit
    assert not thread.is_alive(), "the build went on waiting for its snippet"
    assert started and all(not p.is_alive() for p in started), "a snippet process outlived the stopped build"
    assert "interrupted" in done[0].snippets["part/a"].error.message


def test_a_notebook_page_takes_what_a_snippet_it_requires_computed_and_a_reader_computes_it_alone(project: Path) -> None:
    """A notebook page that a reader also runs in Jupyter: in the build, ``"requires"`` in its ``"book"``
    metadata hands it the producer's artifact (``provided``), so the build does not train twice; without the
    build (a reader's Jupyter), ``provided`` gives None and the notebook computes the value itself."""
    import nbformat

    from transformer_book.book import artifacts
    from transformer_book.book.session import BookSession

    write(project / "snippets" / "part" / "prod.py", '''
        from transformer_book.book import Artifact, Value


        def compute():
            return {"thing": Artifact({"x": 3}), "shown": Value(3, "d")}
    ''')
    nb = nbformat.v4.new_notebook()
    nb.metadata["book"] = {"requires": ["part/prod"]}
    nb.cells = [nbformat.v4.new_code_cell(
        'from transformer_book.book import provided, record\n'
        'shared = provided("part/prod", "thing")\n'
        'x = shared["x"] if shared is not None else 1 + 2  # a reader computes it\n'
        'record("x", x, "d")\n'
        'record("was_provided", shared is not None)')]
    nbformat.write(nb, project / "docs" / "part" / "nb.ipynb")
    book = BookSession(project, project / "snippets", project / ".book-cache", project / ".book-cache" / "report",
                       project / "docs")
    assert book.discover()["part/nb"].requires() == ["part/prod"]
    state = book.build(Options())
    assert state.snippets["part/nb"].status == "ran", state.snippets["part/nb"].error
    assert state.snippets["part/nb"].results["x"].value == 3
    assert state.snippets["part/nb"].results["was_provided"].value is True
    assert artifacts.provided("part/prod", "thing") is None  # outside the build: nothing is provided

    nb.metadata["book"] = {"requires": "part/prod"}
    nbformat.write(nb, project / "docs" / "part" / "nb.ipynb")
    state = book.build(Options())
    assert "must be a list of snippet ids" in state.snippets["part/nb"].error.message
