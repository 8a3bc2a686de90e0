"""Calibration as an estimate: bands from an ensemble of perturbations, kept only where they hold out; claims
as comparisons whose margins calibration measures. Unit tests of the rule on made-up runs, then the whole
loop on a throw-away project with a real (tiny) training: calibrate, build under a held-out perturbation,
plant a claim inside the noise, change the computation by 1 %."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from transformer_book.book import Claim, Value, above, all_of, at_least, below, equal, greater, smallest
from transformer_book.book.checking.calibrate import FACTOR, measure, write
from transformer_book.book.checking.records import Provenance, Record

from conftest import MKDOCS_YML, HELD_OUT, mkdocs_build as build, output, write as write_file


def _record(results: dict) -> Record:
    return Record("part/a", Provenance({}), {k: r.to_record() for k, r in results.items()})


def _runs(values: dict[str, dict]) -> dict:
    return {name: {"results": {"part/a": {k: r.to_data() for k, r in res.items()}}} for name, res in values.items()}


def test_a_band_is_kept_when_every_run_is_covered_by_the_band_of_the_others() -> None:
    rec = _record({"loss": Value(2.0, kind="trained")})
    runs = _runs({f"jitter-{i}": {"loss": Value(2.0 + d, kind="trained")} for i, d in enumerate([1e-4, -2e-4, 1.5e-4, 3e-4])})
    cal = measure(rec, runs, "part/a")
    s = cal.series["loss"]
    assert s.spread == pytest.approx(3e-4)
    assert s.check == "band" and s.band() == pytest.approx(FACTOR * 3e-4)
    assert cal.coverage() == (4, 4)


def test_a_run_that_jumps_far_beyond_the_others_makes_the_series_unbanded_and_checked_by_its_claims() -> None:
    """An accuracy that is 1.0 in every run but one (a threshold crossing): no band fitted without that run
    covers it, so the number is not compared — a band of 1e-9 would be a false alarm on the next machine."""
    rec = _record({"acc": Value(1.0, kind="trained")})
    runs = _runs({"jitter-1": {"acc": Value(1.0, kind="trained")}, "jitter-2": {"acc": Value(1.0, kind="trained")},
                  "aten-default": {"acc": Value(0.896, kind="trained")}})
    cal = measure(rec, runs, "part/a")
    assert cal.series["acc"].check == "claims"
    assert cal.coverage() == (2, 3)
    entry = write(rec, cal, [], "test").calibration.series["acc"]
    assert entry.check == "claims" and "aten-default" in entry.why


def test_seed_replicates_are_checked_through_their_claims_and_a_look_alike_keeps_its_band() -> None:
    """Four seeds of one experiment: on another machine each seed's training is another draw (a laptop moved one
    seed by twice the range of four), so no replicate is banded — what the seeds say together is checked (their
    mean, the claims over them). A series that only looks similar (no seed suffix) keeps its own band."""
    from transformer_book.book.checking.records import calibrated_tolerance

    rec = _record({f"ppl_seed{i}": Value(4.0, kind="trained") for i in range(3)} | {"ppl": Value(4.0, kind="trained")})
    moves = {"ppl_seed0": 1e-3, "ppl_seed1": 4e-3, "ppl_seed2": 2e-3, "ppl": 1e-3}
    runs = _runs({f"jitter-{j}": {k: Value(4.0 + d * (j % 2 * 2 - 1) * j / 4, kind="trained") for k, d in moves.items()}
                  for j in range(1, 5)})
    record = write(rec, measure(rec, runs, "part/a"), [], "test")
    for i in range(3):
        assert calibrated_tolerance(record, f"ppl_seed{i}")[1], "a seed replicate is not compared as a number"
    tol, not_compared = calibrated_tolerance(record, "ppl")
    assert tol.abs == pytest.approx(FACTOR * 1e-3) and not not_compared


def test_a_claim_margin_inside_its_spread_is_not_robust_and_one_with_room_is() -> None:
    def results(loss: float) -> dict:
        return {"loss": Value(loss, kind="trained"),
                "tight": Claim("损失低于 2.0001", below(loss, 2.0001, name="损失")),
                "roomy": Claim("损失低于 3", below(loss, 3.0, name="损失")),
                "which": Claim("RoPE 最低", smallest({"rope": loss, "none": 5.0}, "rope"))}

    rec = _record(results(2.0))
    runs = _runs({f"jitter-{i}": results(2.0 + d) for i, d in enumerate([5e-5, -5e-5, 8e-5])})
    cal = measure(rec, runs, "part/a")
    assert not cal.claims["tight"].robust  # margin 1e-4 against a spread of 8e-5
    assert cal.claims["roomy"].robust and cal.claims["which"].robust
    assert cal.claims["tight"].ratio == pytest.approx(1e-4 / 8e-5, rel=1e-3)
    block = write(rec, cal, [], "test").calibration.claims["tight"]
    assert block.robust is False and block.atoms["·"].held == "3/3"


def test_all_of_needs_every_part_robust_and_a_discrete_part_must_hold_in_every_run() -> None:
    def results(head: int, acc: float) -> dict:
        return {"acc": Value(acc, kind="trained"),
                "c": Claim("第 3 个头最专注，准确率高于 0.9", all_of(equal(头=head, 期望=3), above(acc, 0.9, name="准确率")))}

    rec = _record(results(3, 0.95))
    cal = measure(rec, _runs({"jitter-1": results(3, 0.951), "jitter-2": results(2, 0.949)}), "part/a")
    assert not cal.claims["c"].robust, "the head flipped in one run"
    assert any("jitter-2" in f for f in cal.flipped_claims)


def test_a_claim_is_a_comparison_not_a_boolean() -> None:
    with pytest.raises(TypeError, match="must be a comparison"):
        Claim("快 1.5 倍", True)
    with pytest.raises(TypeError, match="compares numbers"):
        above(True, 0.5)
    assert greater(gpt=4.8, rnn=4.4).margin == pytest.approx(0.4)
    assert at_least(1.5, 1.5).holds and not above(1.5, 1.5).holds


def test_a_comparison_reads_the_same_after_the_cache_stores_it() -> None:
    """A claim read back from its cache entry says its inputs in the order the snippet gave them (a warm build
    shows the popover a fresh one shows): a threshold's value before its bound, either side of a comparison
    first or second, and an equality's two sides (which nothing but the stored order can tell apart)."""
    from transformer_book.book import Claim, equal, less
    from transformer_book.book.storage.cache import Entry

    for made, text in ((below(5.96e-08, 1e-06, name="行和与 1 的最大差"), "行和与 1 的最大差 = 5.96e-08 < 1e-06"),
                       (at_least(2, 4, name="说话动作"), "说话动作 = 2 ≥ 4"),
                       (greater(rnn=4.43, gpt=4.819), "rnn = 4.43 > gpt = 4.819"),
                       (less(甲=1.0, 乙=2.0), "甲 = 1 < 乙 = 2"),
                       (less(乙=1.0, 甲=2.0), "乙 = 1 < 甲 = 2"),
                       (equal(输出形状=[2, 6], 输入形状=[2, 6]), "输出形状 = [2, 6] == 输入形状 = [2, 6]")):
        entry = Entry("k", "part/a", {}, {"c": Claim("一个说法", made)}, 0.0)
        read = Entry.from_json(entry.to_json())
        assert read is not None
        assert read.results["c"].check.describe().startswith(text), made.describe()



def test_a_noise_seed_nudges_exactly_as_its_one_parameter_at_a_time_definition() -> None:
    """``BOOK_JITTER=<seed>`` is defined parameter by parameter (the draws that fitted the committed bands); the
    nudge computes it all at once. Both on the same seed must leave the same bits — on a non-contiguous
    parameter, a float64 one, signed zeros and a frozen one — or a recalibration would measure another ensemble."""
    import torch
    from torch import nn

    from transformer_book.book.execution.worker import install_jitter

    def by_definition(params: list[torch.Tensor], generator: torch.Generator) -> None:
        for p in params:
            up = torch.rand(p.shape, generator=generator) < 0.5
            target = torch.where(up, torch.tensor(float("inf"), dtype=p.dtype), torch.tensor(float("-inf"), dtype=p.dtype))
            p.copy_(torch.nextafter(p, target))

    torch.manual_seed(0)
    made = [torch.randn(4, 3).t(), torch.randn(5, dtype=torch.float64), torch.tensor([0.0, -0.0, 1e-45, -1e-45]),
            torch.randn(2, 2, 3), torch.randn(7)]
    mine = [nn.Parameter(t.clone(), requires_grad=i != 3) for i, t in enumerate(made)]
    assert not mine[0].is_contiguous()
    expected = [t.clone() for t in made]
    optimizer = torch.optim.SGD([{"params": mine[:2]}, {"params": mine[2:]}], lr=0.0)  # no gradients: only the nudge moves them
    handle = install_jitter(17)
    try:
        reference = torch.Generator().manual_seed(17)
        for _ in range(3):
            optimizer.step()
            by_definition(expected, reference)
    finally:
        handle.remove()
    for got, want, before in zip(mine, expected, made):
        assert got.dtype == want.dtype and torch.equal(got.detach().view(torch.int64 if got.dtype == torch.float64 else torch.int32),
                                                       want.view(torch.int64 if want.dtype == torch.float64 else torch.int32))
        assert not torch.equal(got.detach(), before)

# ------------------------------------------------------------------------------------------------ whole loop

TRAINING = '''
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import knobs
import torch
from transformer_book.book import Claim, Figure, Value, below
from transformer_book.plotting import new_figure


def compute():
    torch.manual_seed(0)
    x, y = torch.randn(1024, 16), torch.randn(1024, 1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    curve = []
    for step in range(150):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        if step % 10 == 0:
            curve.append(float(loss) * knobs.CURVE_SCALE)
    final = float(loss) * knobs.SCALE
    fig, ax = new_figure(width=3, height=2)
    ax.plot(range(0, 150, 10), curve)
    return {
        "loss": Value(final, ".6f", kind="trained"),
        "curve": Figure(fig, kind="trained"),
        "low": Claim("训练后的损失低于 1", below(final, 1.0, name="损失")),
        "tight": Claim("训练后的损失低于门槛", below(final, knobs.THRESHOLD, name="损失"), uncertain=knobs.UNCERTAIN),
    }
'''

PAGE = ("# 页\n\n损失是 {{ a:loss }}。{{ claim a:low }}\n\n它还低于门槛。{{ claim a:tight }}\n\n"
        '{{ figure a:curve "图 1　损失" }}\n')


def _knobs(project: Path, **values: object) -> None:
    base = {"SCALE": 1.0, "CURVE_SCALE": 1.0, "THRESHOLD": 10.0, "UNCERTAIN": ""}
    base.update(values)
    write_file(project / "lib" / "knobs.py", "".join(f"{k} = {v!r}\n" for k, v in base.items()))


def _calibrate(project: Path, jitter: int = 5) -> str:
    code = textwrap.dedent(f"""
        from transformer_book.book.checking.calibrate import calibrate, jitters, summary
        from transformer_book.book.cli.project import open_session
        session = open_session()
        print(summary(calibrate(session.project_root, session.discover(), ["part/a"], chosen=jitters({jitter}))))
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def _trained_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The throw-away project, built once for the module; each test works on its own copy (``trained_project``)."""
    root = tmp_path_factory.mktemp("trained")
    write_file(root / "mkdocs.yml", MKDOCS_YML)
    _knobs(root)
    write_file(root / "snippets" / "part" / "a.py", TRAINING)
    write_file(root / "docs" / "part" / "page.md", PAGE)
    write_file(root / "docs" / "index.md", "# 首页\n")
    assert build(root).returncode == 0
    return root


def _copy(project: Path, to: Path) -> Path:
    shutil.copytree(project, to / "project")
    return to / "project"


@pytest.fixture
def trained_project(_trained_once: Path, tmp_path: Path) -> Path:
    return _copy(_trained_once, tmp_path)


@pytest.fixture(scope="module")
def _planted_once(_trained_once: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, int]:
    """The project with a second claim planted a few ulps inside its threshold, built, then calibrated on three
    nudged runs (shared by the test of the planted claim and the test of the ``claims`` command, on copies)."""
    root = _copy(_trained_once, tmp_path_factory.mktemp("planted"))
    final = _record_of(root)["results"]["loss"]["value"]
    _knobs(root, THRESHOLD=final * (1 + 2e-7))  # holds here, by less than a few ulps
    returncode = build(root).returncode
    _calibrate(root, jitter=3)  # three nudged runs already move the loss by more than the margin
    return root, final, returncode


@pytest.fixture
def planted_project(_planted_once: tuple[Path, float, int], tmp_path: Path) -> tuple[Path, float, int]:
    root, final, returncode = _planted_once
    return _copy(root, tmp_path), final, returncode


def _record_of(project: Path) -> dict:
    return json.loads((project / "snippets" / "part" / "a.record.json").read_text(encoding="utf-8"))


def test_the_ensemble_bands_a_training_a_held_out_seed_passes_and_a_one_percent_change_fails(trained_project: Path) -> None:
    out = _calibrate(trained_project)
    cal = _record_of(trained_project)["calibration"]
    assert cal["provenance"]["runs"] == 5 and "leave-one-out" in cal["provenance"]["rule"]
    loss = cal["series"]["loss"]
    assert loss["check"] == "band" and 0 < loss["spread"] < 1e-3, "one ulp per step moves the loss, a little"
    assert cal["series"]["curve.ax0.line0.y"]["check"] == "band"
    assert cal["held_out"]["covered"] == cal["held_out"]["trials"]
    # the curve's x (step numbers: integers no run moves) is a discrete result, checked through the claims
    assert cal["series"]["curve.ax0.line0.x"]["check"] == "claims" and cal["held_out"]["unbanded_series"] == 1
    assert cal["claims"]["low"]["robust"] is True
    assert "part/a | 5 | 2 / 1 | 15/15" in out  # the loss and the curve's y banded; the curve's x not

    held_out = build(trained_project, BOOK_CI="1", **HELD_OUT)
    assert held_out.returncode == 0, "a noise seed and a kernel path calibration never saw: " + output(held_out)

    _knobs(trained_project, SCALE=1.01)  # a deliberate 1 % change of the computation, seen from another machine
    done = build(trained_project, BOOK_CI="1", **HELD_OUT)
    assert done.returncode != 0 and "loss: recorded" in output(done) and "calibrated abs" in output(done)

    _knobs(trained_project, CURVE_SCALE=1.01)  # the figure changes, the value does not
    done = build(trained_project, BOOK_CI="1")
    assert done.returncode != 0 and "curve.ax0.line0.y[" in output(done) and "loss: recorded" not in output(done)
    assert "shown at: part/page.md:7" in output(done)


def test_a_claim_planted_inside_the_noise_fails_the_strict_build_naming_page_line_unless_it_says_so(
        planted_project: tuple[Path, float, int]) -> None:
    trained_project, final, first = planted_project
    assert first == 0, "the planted claim holds on this machine's run"
    assert _record_of(trained_project)["calibration"]["claims"]["tight"]["robust"] is False
    done = build(trained_project)  # --strict: a warning fails it
    assert done.returncode != 0
    out = output(done)
    assert "claim 'tight' is decided inside its noise" in out and "stated at: part/page.md:5" in out
    assert "claim 'low'" not in out, "the claim with room to spare is robust"

    _knobs(trained_project, THRESHOLD=final * (1 + 2e-7), UNCERTAIN="正文说明这只在本机的这次运行里成立")
    # the snippet's source is unchanged; the knob module changed, so it reruns and says how the sentence hedges
    done = build(trained_project)
    assert "inside its noise" not in output(done), output(done)


def test_the_claims_command_lists_each_claim_with_its_page_line_sentence_comparison_and_margin(
        planted_project: tuple[Path, float, int]) -> None:
    trained_project = planted_project[0]  # calibrated on three nudged runs
    done = subprocess.run([sys.executable, "-m", "transformer_book", "claims"], cwd=trained_project,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "part/page.md:3  part/a:low  [稳健]" in out
    assert "句子：损失是 ⟨loss⟩。" in out and "说法：训练后的损失低于 1" in out
    assert "比较：损失 = " in out and " < 1（余量 " in out
    assert "校准：·: 余量 " in out and "成立 3/3" in out
    assert "part/page.md:5  part/a:tight" in out and "句子：它还低于门槛。" in out
    table = subprocess.run([sys.executable, "-m", "transformer_book", "claims", "--markdown"], cwd=trained_project,
                           capture_output=True, text=True, timeout=120).stdout
    assert table.startswith("| 位置 | 句子 | 说法 | 比较 | 效应与种子间的差 | 判定 |") and "part/page.md:3" in table
    assert "单次运行" in table, "a claim about one trained run says so beside its sentence"


def test_workers_asked_for_never_oversubscribe_the_cores_of_a_run_with_more_threads() -> None:
    import os

    from transformer_book.book.checking.calibrate import Perturbation, perturbed_workers

    two_threads = Perturbation("threads-2", "", {"BOOK_THREADS": "2"})
    one_thread = Perturbation("jitter-1", "", {"BOOK_JITTER": "1"})
    cores = os.cpu_count() or 1
    assert perturbed_workers(two_threads, workers=cores) == max(1, cores // 2)
    assert perturbed_workers(two_threads) == max(1, cores // 2)
    assert perturbed_workers(one_thread, workers=1) == 1 and perturbed_workers(one_thread) == cores
