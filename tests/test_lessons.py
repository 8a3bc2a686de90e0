"""What keeps the book's lessons true, not only its numbers: claims over seeds, bands that can fail, what a figure
says (its words and its colour map), sentences that point the way their claims do, and trained numbers checked
bit for bit on the arithmetic that recorded them. Each check is shown failing on the change it exists to catch,
on a small throw-away book."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transformer_book.book import Value, every_seed, less
from transformer_book.book.checking import wording
from transformer_book.book.checking.calibrate import measure, too_wide, write
from transformer_book.book.checking.records import Provenance, Record

from conftest import HELD_OUT, MKDOCS_YML, mkdocs_build as build, output, write as write_file

ROOT = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------------------------------------ seeds

def test_a_claim_over_seeds_holds_only_if_every_seed_holds_and_says_its_effect_and_spread() -> None:
    held = every_seed({s: less(块=1.0 + 0.1 * s, 二元=2.0) for s in range(3)})
    assert held.holds and held.effect == pytest.approx(0.9) and held.seed_spread == pytest.approx(0.2)
    flipped = every_seed({s: less(块=1.0 + 0.6 * s, 二元=2.0) for s in range(3)})
    assert not flipped.holds
    assert "种子 2【不成立】" in flipped.describe() and "3 个种子中 2 个成立" in flipped.describe()
    with pytest.raises(ValueError, match="at least 3 seeds"):
        every_seed({0: less(a=1, b=2), 1: less(a=1, b=2)})


SEEDED = '''
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import knobs
from transformer_book.book import Claim, Value, every_seed, less


def compute():
    block = {s: 1.0 + 0.01 * s for s in range(3)}
    bigram = {s: 1.2 + knobs.BIGRAM_SHIFT.get(s, 0.0) for s in range(3)}
    return {
        "block": Value(sum(block.values()) / 3, ".3f"),
        "better": Claim("一个块的验证损失低于二元模型", every_seed({s: less(块=block[s], 二元=bigram[s]) for s in range(3)})),
    }
'''

SEEDED_PAGE = "# 页\n\n三个种子的平均损失是 {{ a:block }}，每个种子上都低于二元模型。{{ claim a:better }}\n"


@pytest.fixture
def seeded_book(tmp_path: Path) -> Path:
    write_file(tmp_path / "mkdocs.yml", MKDOCS_YML)
    write_file(tmp_path / "lib" / "knobs.py", "BIGRAM_SHIFT = {}\n")
    write_file(tmp_path / "snippets" / "part" / "a.py", SEEDED)
    write_file(tmp_path / "docs" / "part" / "page.md", SEEDED_PAGE)
    write_file(tmp_path / "docs" / "index.md", "# 首页\n")
    assert build(tmp_path).returncode == 0
    return tmp_path


def test_a_seed_that_flips_a_claim_fails_the_build_naming_the_claim_the_seed_and_the_page_line(seeded_book: Path) -> None:
    record = json.loads((seeded_book / "snippets" / "part" / "a.record.json").read_text(encoding="utf-8"))
    check = record["results"]["better"]["check"]
    assert check["op"] == "seeds" and check["inputs"]["种子"] == [0, 1, 2] and len(check["parts"]) == 3

    write_file(seeded_book / "lib" / "knobs.py", "BIGRAM_SHIFT = {1: -0.25}\n")  # seed 1's bigram now wins
    done = build(seeded_book, BOOK_CI="1")
    out = output(done)
    assert done.returncode != 0
    assert "claim 'better' no longer holds" in out and "种子 1【不成立】" in out
    assert "part/page.md:3" in out


# ------------------------------------------------------------------------------------------------ bands

def _record(results: dict) -> Record:
    return Record("part/a", Provenance({}), {k: r.to_record() for k, r in results.items()})


def _runs(values: dict[str, dict]) -> dict:
    return {name: {"results": {"part/a": {k: r.to_data() for k, r in res.items()}}} for name, res in values.items()}


def test_calibration_refuses_a_band_as_wide_as_what_it_guards() -> None:
    """A weight in [0, 1] that moves by 0.3 in some run gets a band of 0.9: no change could ever fail it. The
    series is then checked through its claims, and the record says why."""
    rec = _record({"w": Value(0.4, kind="trained"), "loss": Value(2.0, kind="trained")})
    runs = _runs({f"jitter-{i}": {"w": Value(0.4 + d, kind="trained"), "loss": Value(2.0 + d / 100, kind="trained")}
                  for i, d in enumerate([0.3, -0.25, 0.28, 0.2])})
    cal = measure(rec, runs, "part/a")
    assert cal.series["w"].check == "claims" and cal.series["loss"].check == "band"
    entry = write(rec, cal, [], "test").calibration.series["w"]
    assert entry.check == "claims" and "核对不出任何改动" in entry.why
    assert too_wide(3.0, 2.5, -2.5) and not too_wide(0.4, 1.0, 0.0) and too_wide(0.6, 1.0, 0.0)


def test_one_seed_and_a_discrete_result_that_no_run_moved_are_checked_through_their_claims() -> None:
    """Seen as false alarms on machines calibration never saw: one seed's perplexity moved by twice the range of
    the four seeds, and an accuracy of exactly 1.0 in every run became 0.99975. Neither can be banded from an
    ensemble of perturbations; the seed mean and a continuous loss can."""
    rec = _record({"ppl_seed2": Value(4.26, kind="trained"), "ppl_mean": Value(4.27, kind="trained"),
                   "acc": Value(1.0, kind="trained"), "loss": Value(2.0, kind="trained")})
    runs = _runs({f"jitter-{i}": {"ppl_seed2": Value(4.26 + d, kind="trained"), "ppl_mean": Value(4.27 + d / 4, kind="trained"),
                                  "acc": Value(1.0, kind="trained"), "loss": Value(2.0 + d, kind="trained")}
                  for i, d in enumerate([1e-3, -2e-3, 1.5e-3, 2e-3])})
    cal = measure(rec, runs, "part/a")
    assert cal.series["ppl_seed2"].check == "claims" and cal.series["acc"].check == "claims"
    assert cal.series["ppl_mean"].check == "band" and cal.series["loss"].check == "band"
    series = write(rec, cal, [], "test").calibration.series
    assert "一个种子" in series["ppl_seed2"].why and "离散" in series["acc"].why


def test_no_committed_band_is_as_wide_as_what_it_guards() -> None:
    """Over every record of the book: a banded trained series has a band narrower than its largest |value|,
    and at most 0.5 when its values lie in [0, 1]."""
    from transformer_book.book.checking.records import family
    from transformer_book.book.results import TRAINED, recorded_numbers

    wide = []
    for path in sorted((ROOT / "snippets").rglob("*.record.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        series = (record.get("calibration") or {}).get("series", {})
        values: dict[str, list[float]] = {}
        for key, rec in record["results"].items():
            if rec.get("type") == "claim":
                continue
            for n in recorded_numbers(key, rec).values():  # each kind reads its own record (a file or block: its hash)
                if n.kind == TRAINED and isinstance(n.value, (int, float)) and not isinstance(n.value, bool):
                    values.setdefault(n.series, []).append(float(n.value))
        for name, entry in series.items():
            xs = values.get(name)
            if entry.get("check", "band") != "band" or not xs:
                continue
            if too_wide(float(entry["abs"]), max(abs(x) for x in xs), min(xs)):
                wide.append(f"{path.name}: {name} ±{entry['abs']:.3g} guarding {min(xs):.3g} … {max(xs):.3g}")
            elif family(name) != name:
                wide.append(f"{path.name}: {name} is one seed of a family, banded")
    assert not wide, "bands that cannot fail, or that an unseen machine breaks:\n" + "\n".join(wide)


def test_every_recorded_comparison_names_its_inputs_in_the_order_its_snippet_gave() -> None:
    """A record is read as it is written (no store reorders it any more): ``less(自由生成=2, 教师强制=7)`` must not
    come back as "教师强制 = 7 < 自由生成 = 2" — two records once written from key-sorted cache entries did. The margin
    says the order: first − second for ``greater``, second − first for ``less``; a threshold's bound comes last; an
    equality has no margin, so its two names are read against the ``equal(…)`` calls in the snippet's own source."""
    import ast
    import math

    from transformer_book.book.compare import Comparison

    turned, checked = [], 0
    for path in sorted((ROOT / "snippets").rglob("*.record.json")):
        code = path.with_name(path.name[:-len(".record.json")] + ".py")  # a notebook page's record has none
        source = ast.parse(code.read_text(encoding="utf-8") if code.exists() else "")
        written = {tuple(k.arg for k in call.keywords) for call in ast.walk(source) if isinstance(call, ast.Call)
                   and getattr(call.func, "id", getattr(call.func, "attr", None)) == "equal"}
        for key, rec in json.loads(path.read_text(encoding="utf-8"))["results"].items():
            if rec.get("type") != "claim":
                continue
            for _, atom in Comparison.from_data(rec["check"]).atoms():
                names, values = list(atom.inputs), list(atom.inputs.values())
                if atom.op in ("greater", "less") and atom.margin is not None and len(values) == 2 \
                        and all(isinstance(v, (int, float)) for v in values):
                    checked += 1
                    first_minus_second = atom.margin if atom.op == "greater" else -atom.margin
                    if not math.isclose(values[0] - values[1], first_minus_second, rel_tol=1e-9, abs_tol=1e-12):
                        turned.append(f"{path.name}:{key}: {atom.describe()}")
                elif atom.op in ("above", "at_least", "below", "at_most") and "界" in names:
                    checked += 1
                    if names[-1] != "界":
                        turned.append(f"{path.name}:{key}: {atom.describe()}")
                elif atom.op == "equal" and (tuple(names) in written or tuple(reversed(names)) in written):
                    checked += 1
                    if tuple(names) not in written:
                        turned.append(f"{path.name}:{key}: {atom.describe()}")
    assert checked > 100
    assert not turned, "recorded comparisons whose inputs read the wrong way round:\n" + "\n".join(turned)


# ------------------------------------------------------------------------------------------------ wording

@pytest.mark.parametrize("sentence, statement, opposite", [
    ("装进块之后，验证损失比二元模型低。", "一个块比二元模型的验证损失低 0.05 以上", False),
    ("装进块之后，验证损失比二元模型高。", "一个块比二元模型的验证损失低 0.05 以上", True),
    ("训练后的损失低于只看字频的基线。", "训练后的验证损失低于只看字频的基线", False),
    ("训练后的损失高于只看字频的基线。", "训练后的验证损失低于只看字频的基线", True),
    ("训练后的损失并不高于基线。", "训练后的验证损失低于基线", False),
    ("头越多，最差的目标越好。", "头越多，最差的目标越好（1 → 2 → 3 个头）", False),
    ("最大差别只是浮点舍入的量级。", "只差浮点舍入（小于 10⁻⁴）", False),
])
def test_a_sentence_is_read_for_the_direction_of_its_comparison(sentence: str, statement: str, opposite: bool) -> None:
    assert wording.opposite(sentence, statement) is opposite


TURNED = '''
from transformer_book.book import Claim, Value, less


def compute():
    return {"loss": Value(1.0, ".1f"), "lower": Claim("训练后的损失低于基线", less(损失=1.0, 基线=2.0))}
'''


def test_a_sentence_turned_round_against_its_claim_fails_the_strict_build_naming_page_line(tmp_path: Path) -> None:
    write_file(tmp_path / "mkdocs.yml", MKDOCS_YML)
    write_file(tmp_path / "snippets" / "part" / "a.py", TURNED)
    write_file(tmp_path / "docs" / "index.md", "# 首页\n")
    page = tmp_path / "docs" / "part" / "page.md"
    write_file(page, "# 页\n\n损失是 {{ a:loss }}。\n\n训练后的损失低于基线。{{ claim a:lower }}\n")
    assert build(tmp_path).returncode == 0
    write_file(page, "# 页\n\n损失是 {{ a:loss }}。\n\n训练后的损失高于基线。{{ claim a:lower }}\n")
    done = build(tmp_path)
    assert done.returncode != 0
    assert "part/page.md:5: the sentence points the other way from the claim it cites (part/a:lower)" in output(done)


def test_in_a_sentence_that_compares_several_things_the_clause_at_the_citation_is_held_to_the_claim() -> None:
    claim = "前文平均的验证损失比二元模型低"
    right = "每往上添一步，损失在每个种子上都比上一步低：前文的平均比二元模型低"
    assert not wording.opposite(right, claim)
    assert wording.opposite(right.replace("比二元模型低", "比二元模型高"), claim)  # the last clause turned round
    assert not wording.opposite("C 比 D 低，A 比 B 高", "A 比 B 高")  # the clause at the citation agrees
    assert not wording.opposite("C 比 D 低，A 比 B 高，这一点不宜多说", "A 比 B 高")  # its last clause compares nothing
    assert not wording.opposite("损失先升高、后下降", claim)  # one clause, both ways: a reviewer reads it


def test_no_sentence_in_the_book_points_against_its_claim() -> None:
    from transformer_book.book.rendering import claim_index

    found = {p.relative_to(ROOT / "snippets").as_posix()[:-len(".record.json")]: p
             for p in (ROOT / "snippets").rglob("*.record.json")}
    cited = claim_index.index(ROOT / "docs", found)
    assert sum(1 for c in cited if c.claim is not None and wording.directions(c.claim.statement)) > 30
    assert not [c.describe() for c in wording.conflicts(cited)]


# ------------------------------------------------------------------------------------------------ figures

PICTURE = '''
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import knobs
import numpy as np
from transformer_book.book import Figure
from transformer_book.plotting import new_figure


def compute():
    w = np.array([[1.0, 0.0], [0.3, 0.7]])
    fig, ax = new_figure(width=3, height=3)
    ax.imshow(w, cmap=knobs.CMAP, vmin=0.0, vmax=1.0)
    for i in range(2):
        for j in range(2):
            ax.text(j, i, f"{knobs.SHOWN(w[i, j]):.2f}", ha="center", va="center")
    return {"weights": Figure(fig)}
'''


@pytest.fixture
def picture_book(tmp_path: Path) -> Path:
    write_file(tmp_path / "mkdocs.yml", MKDOCS_YML)
    write_file(tmp_path / "lib" / "knobs.py", 'CMAP = "Blues"\nSHOWN = lambda x: x\n')
    write_file(tmp_path / "snippets" / "part" / "a.py", PICTURE)
    write_file(tmp_path / "docs" / "part" / "page.md", '# 页\n\n颜色越深，权重越大。\n\n{{ figure a:weights "图 1　权重" }}\n')
    write_file(tmp_path / "docs" / "index.md", "# 首页\n")
    assert build(tmp_path).returncode == 0
    return tmp_path


def test_a_figure_records_the_numbers_it_draws_as_text_and_its_colour_map(picture_book: Path) -> None:
    record = json.loads((picture_book / "snippets" / "part" / "a.record.json").read_text(encoding="utf-8"))
    plotted = record["results"]["weights"]["plotted"]["ax0"]
    assert plotted["texts"] == ["1.00", "0.00", "0.30", "0.70"]
    assert plotted["scale0"] == {"cmap": "Blues", "vmin": 0.0, "vmax": 1.0}


def test_a_reversed_colour_map_fails_the_build_naming_it(picture_book: Path) -> None:
    write_file(picture_book / "lib" / "knobs.py", 'CMAP = "Blues_r"\nSHOWN = lambda x: x\n')
    done = build(picture_book, BOOK_CI="1")
    assert done.returncode != 0 and "weights.ax0.scale0.cmap: recorded 'Blues', now 'Blues_r'" in output(done)


def test_numbers_drawn_wrong_on_a_figure_fail_the_build_naming_them(picture_book: Path) -> None:
    write_file(picture_book / "lib" / "knobs.py", 'CMAP = "Blues"\nSHOWN = lambda x: x ** 0.5\n')
    done = build(picture_book, BOOK_CI="1")
    assert done.returncode != 0 and "weights.ax0.texts[2]: recorded '0.30', now '0.55'" in output(done)


# ------------------------------------------------------------------------------------------------ same arithmetic

TRAINED = '''
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
import knobs
import torch
from transformer_book.book import Value


def compute():
    torch.manual_seed(0)
    x, y = torch.randn(256, 8), torch.randn(256, 1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(50):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    return {"loss": Value(float(loss.detach()) * knobs.SCALE, ".4f", kind="trained")}
'''


def test_a_trained_number_is_checked_bit_for_bit_on_the_arithmetic_that_recorded_it(tmp_path: Path) -> None:
    """A band (here one written by hand, as calibration would) lets a small real change through on another
    machine; on the machine whose arithmetic made the record, the same change fails."""
    write_file(tmp_path / "mkdocs.yml", MKDOCS_YML)
    write_file(tmp_path / "lib" / "knobs.py", "SCALE = 1.0\n")
    write_file(tmp_path / "snippets" / "part" / "a.py", TRAINED)
    write_file(tmp_path / "docs" / "part" / "page.md", "# 页\n\n损失是 {{ a:loss }}。\n")
    write_file(tmp_path / "docs" / "index.md", "# 首页\n")
    assert build(tmp_path).returncode == 0
    path = tmp_path / "snippets" / "part" / "a.record.json"
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["provenance"]["arithmetic"]
    record["calibration"] = {"provenance": {"runs": 8, "date": "2026-12-05"}, "series": {"loss": {"spread": 0.01, "abs": 0.03, "check": "band"}},
                             "claims": {}}
    path.write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")
    write_file(tmp_path / "lib" / "knobs.py", "SCALE = 1.0001\n")  # a real change, inside the band
    here = build(tmp_path, BOOK_CI="1")
    assert here.returncode != 0 and "loss: recorded" in output(here) and "bit for bit" in output(here)
    elsewhere = build(tmp_path, BOOK_CI="1", **HELD_OUT)  # other arithmetic: the calibrated band applies
    assert elsewhere.returncode == 0, output(elsewhere)


# The claims that compare trained runs — which model or setting is better, "learns", "beats", "no visible difference" —
# and so must hold on every seed. A claim about one trained model's insides (which head looks where) is not here;
# the claims listing marks those "单次运行".
COMPARES_TRAINED_RUNS = {
    "chapter20/scratch_losses": ["average_lower_than_bigram", "head_lower_than_average", "heads_lower_than_head",
                                 "block_lower_than_heads", "bigram_cannot_count", "average_cannot_count",
                                 "head_counts_better", "heads_count_better", "block_keeps_five"],
    "chapter20/p08_train": ["beats_unigram", "overfits", "plateau"],
    "lecture07/s07_depth": ["no_residual_collapsed", "collapse_is_fast", "no_residual_stuck", "residual_distinct",
                            "residual_learns", "slow_start"],
    "lecture07/s08_reversal": ["learns", "mirror_head"],
    "lecture07/s11_train": ["close_after_1", "gpt_ahead_at_end", "gpt_slightly_lower", "both_near_floor", "flat_from_6"],
    "lecture07/s11_agreement": ["seen_lengths_perfect", "rnn_perfect_longer", "gpt_only_dips_at_4"],
}


@pytest.mark.parametrize("snippet", sorted(COMPARES_TRAINED_RUNS))
def test_a_claim_comparing_trained_runs_is_decided_on_every_one_of_at_least_three_seeds(snippet: str) -> None:
    record = json.loads((ROOT / "snippets" / f"{snippet}.record.json").read_text(encoding="utf-8"))
    for key in COMPARES_TRAINED_RUNS[snippet]:
        check = record["results"][key]["check"]
        assert check["op"] == "seeds", f"{snippet}:{key} rests on one training"
        assert len(check["inputs"]["种子"]) >= 3 and len(check["parts"]) == len(check["inputs"]["种子"])
        assert check["holds"] == all(part["holds"] for part in check["parts"])
