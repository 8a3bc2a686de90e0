"""The book's own model in the reader's browser (issue 40): the page's JavaScript (``docs/chapter20/p08b-playground/
gpt.js``) against torch, run in V8 as the build runs it; one operation of it changed in a scratch copy fails the
check and a build, naming the input and the tensor; the page's sampler and its Python twin agree; the exported
file reads back in Python. The models here are small and untrained (random weights made large, so that every
part of the computation matters): what is tested is the arithmetic, not what a training learned."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from transformer_book.char_tokenizer import CharTokenizer
from transformer_book.chapter20 import playground, scratch

from conftest import MKDOCS_YML, mkdocs_build as build, output, write

TEXT = "\n床前明月光，疑是地上霜。举头望明月，低头思故乡。\n春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。\n"
INPUTS = {"一句诗": "床前明月光，疑是地上霜。", "超过一个窗口": "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。床前明月光，疑是地上霜。",
          "一个字": "月", "夹着词表外的字": "Hello，明月😀"}


def _model(seed: int = 0) -> tuple[scratch.BlockLM, CharTokenizer, scratch.ScratchConfig]:
    torch.manual_seed(seed)
    tok, config = CharTokenizer.from_text(TEXT), scratch.ScratchConfig()
    model = scratch.build("block", tok.vocab_size, config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))  # biases and layer norms away from 0 and 1
    return model, tok, config


def test_the_page_script_computes_what_torch_computes_on_chinese_a_full_context_and_one_character() -> None:
    model, tok, config = _model()
    with playground.run_js(playground.SCRIPT, playground.export(model, config, tok)) as js:
        rows, close, same = playground.check(js, playground.rounded(model), tok, INPUTS)
    assert all(c.holds for c in close) and all(c.holds for c in same), [c for c in close + same if not c.holds]
    by_name = {r[0]: r for r in rows}
    assert by_name["超过一个窗口"][1] == config.context  # cut to exactly one context
    assert by_name["一个字"][1] == 2  # the poem's opening newline and the character
    assert by_name["夹着词表外的字"][2] == "H、e、l、o、😀"
    assert 0 < max(r[3] for r in rows) < playground.BOUND, "float64 against float32: close, but not bit for bit"


def test_a_page_script_with_one_operation_changed_fails_the_check_naming_the_input_and_the_tensor() -> None:
    model, tok, config = _model()
    broken = playground.without_scaling(playground.SCRIPT.read_text(encoding="utf-8"))  # no ÷ √d_h
    with playground.run_js(broken, playground.export(model, config, tok)) as js:
        _, close, _ = playground.check(js, playground.rounded(model), tok, {"一句诗": INPUTS["一句诗"]})
    failed = [c.describe() for c in close if not c.holds]
    assert any("「一句诗」的 logits 之差" in f for f in failed), failed
    assert any("「一句诗」头 1 的注意力权重之差" in f for f in failed), failed


def test_the_page_sampler_and_its_python_twin_write_the_same_characters() -> None:
    model, tok, config = _model(1)
    rounded = playground.rounded(model)
    settings = [{"temperature": 1.0, "top_k": 0, "top_p": 1.0}, {"temperature": 0.8, "top_k": 20, "top_p": 0.95},
                {"temperature": 1.5, "top_k": 3, "top_p": 0.5}, {"temperature": 1.0, "top_k": 5, "top_p": 0.3}]
    with playground.run_js(playground.SCRIPT, playground.export(model, config, tok)) as js:
        for seed in (0, 7):
            for s in settings:
                page = js.generate("床前", seed=seed, max_chars=12, **s)
                assert page == playground.sample(rounded, tok, "床前", seed=seed, max_chars=12, **s), (seed, s)
                assert page and "<" not in page  # never a special token


def test_the_exported_file_reads_back_in_python_as_the_rounded_model() -> None:
    model, tok, config = _model()
    back, tok_back = playground.load(playground.export(model, config, tok))
    assert tok_back.vocab == tok.vocab
    expected = playground.rounded(model).state_dict()
    assert all(torch.equal(v, expected[k]) for k, v in back.state_dict().items())
    with pytest.raises(ValueError, match="不认识的模型文件"):
        playground.load(playground.export(model, config, tok).replace(b"transformer-book-gpt/1", b"transformer-book-gpt/9"))


SNIPPET = '''
from pathlib import Path

import torch

from transformer_book.book import Claim, all_of
from transformer_book.char_tokenizer import CharTokenizer
from transformer_book.chapter20 import playground, scratch

DATA_FILES = ["gpt.js"]


def compute():
    torch.manual_seed(0)
    tok, config = CharTokenizer.from_text({text!r}), scratch.ScratchConfig()
    model = scratch.build("block", tok.vocab_size, config)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    script = (Path(__file__).resolve().parents[2] / "gpt.js").read_text(encoding="utf-8")
    with playground.run_js(script, playground.export(model, config, tok)) as js:
        _, close, _ = playground.check(js, playground.rounded(model), tok, {{"一句诗": "床前明月光，"}})
    return {{"matches": Claim("页面的 JavaScript 与 PyTorch 相差不到 10⁻⁴", all_of(*close))}}
'''


def test_a_build_whose_page_script_has_one_operation_changed_fails_naming_the_input_and_the_tensor(tmp_path: Path) -> None:
    write(tmp_path / "mkdocs.yml", MKDOCS_YML.replace("preload: []", "preload: [torch]"))
    write(tmp_path / "snippets" / "part" / "a.py", SNIPPET.format(text=TEXT))
    write(tmp_path / "docs" / "part" / "page.md", "# 页\n\n两边一致。{{ claim a:matches }}\n")
    write(tmp_path / "docs" / "index.md", "# 首页\n")
    shutil.copy(playground.SCRIPT, tmp_path / "gpt.js")
    done = build(tmp_path)
    assert done.returncode == 0, output(done)

    script = tmp_path / "gpt.js"
    script.write_text(script.read_text(encoding="utf-8").replace("w[t * T + s] = dot / scale;", "w[t * T + s] = dot;"),
                      encoding="utf-8")
    done = build(tmp_path)
    out = output(done)
    assert done.returncode != 0, out
    assert "part/page.md:3" in out and "「一句诗」的 logits 之差" in out, out
