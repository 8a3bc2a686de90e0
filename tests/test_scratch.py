"""The from-scratch path (chapter20/scratch.py): five small models, each a few lines more than the last.

The stages are written for reading, not reuse; these tests hold them to what the page says of them: every
stage is causal, the averaging is an average of each prefix, one head is the reference attention, several heads
and the block are the reference implementation's multi-head attention and Pre-LN block (same weights, same
outputs), and the training records the curves the page plots.
"""

from __future__ import annotations

import math

import pytest
import torch

from transformer_book import transformer as ref
from transformer_book.chapter20 import poems, scratch

D, H, T, V = 16, 4, 8, 23


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_causal_average_is_the_mean_of_each_prefix() -> None:
    x = torch.randn(2, T, D)
    out = scratch.causal_average(x)
    for t in range(T):
        assert torch.allclose(out[:, t], x[:, : t + 1].mean(dim=1), atol=1e-6)


@pytest.mark.parametrize("stage", list(scratch.STAGES))
def test_every_stage_is_causal_and_maps_ids_to_logits(stage: str) -> None:
    model = scratch.build(stage, V, scratch.ScratchConfig(d_model=D, n_heads=H, context=T)).eval()
    idx = torch.randint(0, V, (3, T))
    logits = model(idx)
    assert logits.shape == (3, T, V)
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % V  # only the last token differs
    after = model(changed)
    assert torch.equal(after[:, :-1], logits[:, :-1]), "an earlier position saw a later token"
    assert not torch.equal(after[:, -1], logits[:, -1])  # the last position sees it


def test_each_stage_keeps_the_one_before_and_adds_a_few_parts() -> None:
    names = {s: {n.split(".")[0] for n, _ in scratch.build(s, V, scratch.ScratchConfig(d_model=D, n_heads=H, context=T))
                 .named_parameters()} for s in scratch.STAGES}
    assert names["bigram"] == {"tok_emb", "ln_f", "lm_head"}
    assert names["average"] == names["bigram"]  # averaging has no parameters
    assert names["head"] == names["bigram"] | {"pos_emb", "attn"}
    assert names["heads"] == names["head"]
    assert names["block"] == names["bigram"] | {"pos_emb", "block"}


def test_one_head_is_the_reference_attention_with_a_causal_mask() -> None:
    head = scratch.Head(D, D // H).eval()
    x = torch.randn(2, T, D)
    q, k, v = head.query(x), head.key(x), head.value(x)
    expected, _ = ref.scaled_dot_product_attention(q, k, v, torch.ones(T, T, dtype=torch.bool).tril())
    assert torch.allclose(head(x), expected, atol=1e-6)


def _packed(mha: scratch.MultiHead) -> ref.MultiHeadAttention:
    """The reference multi-head attention with the same weights: the heads' W^Q (W^K, W^V) stacked."""
    theirs = ref.MultiHeadAttention(d_model=D, n_heads=H)
    with torch.no_grad():
        for i, part in enumerate(("query", "key", "value")):
            theirs.in_proj.weight[i * D:(i + 1) * D] = torch.cat([getattr(h, part).weight for h in mha.heads])
        theirs.in_proj.bias.zero_()
        theirs.out_proj.load_state_dict(mha.proj.state_dict())
    return theirs


def test_several_heads_are_the_reference_multi_head_attention() -> None:
    mha = scratch.MultiHead(D, H).eval()
    x = torch.randn(2, T, D)
    expected, _ = _packed(mha)(x, mask=torch.ones(T, T, dtype=torch.bool).tril())
    assert torch.allclose(mha(x), expected, atol=1e-6)


def test_the_block_is_the_reference_pre_ln_block() -> None:
    ours = scratch.Block(D, H, dropout=0.0).eval()
    theirs = ref.TransformerBlock(d_model=D, n_heads=H, norm="pre").eval()
    with torch.no_grad():
        theirs.ln1.load_state_dict(ours.ln1.state_dict())
        theirs.ln2.load_state_dict(ours.ln2.state_dict())
        theirs.attn.load_state_dict(_packed(ours.attn).state_dict())
        theirs.ffn.fc1.load_state_dict(ours.ffn.net[0].state_dict())
        theirs.ffn.fc2.load_state_dict(ours.ffn.net[2].state_dict())
    x = torch.randn(2, T, D)
    expected, _, _ = theirs(x, mask=torch.ones(T, T, dtype=torch.bool).tril())
    assert torch.allclose(ours(x), expected, atol=1e-5)


POEMS = ["春山一夜雨，秋水满前溪。明月来相照，清风去不迷。", "白日依山尽，长河入海流。孤舟千里外，明月满江楼。",
         "山中春草绿，江上白云飞。一别千年后，相逢是旧归。"] * 20


def test_training_a_stage_records_its_curves_and_they_round_trip_as_data() -> None:
    data = poems.prepare_poems(POEMS)
    config = scratch.ScratchConfig(d_model=D, n_heads=H, context=T, batch_size=4, steps=6, eval_every=3,
                                   warmup_steps=2)
    result = scratch.train_stage("block", config, data)
    assert result.steps == [0, 3, 6]
    assert len(result.train_loss) == len(result.val_loss) == 3
    assert all(math.isfinite(v) for v in result.train_loss + result.val_loss)
    assert abs(result.val_loss[0] - math.log(data.tokenizer.vocab_size)) < 0.1  # untrained: a uniform guess
    assert result.n_parameters == sum(p.numel() for p in scratch.build("block", data.tokenizer.vocab_size, config).parameters())
    assert scratch.StageResult.from_data(result.data()) == result
    again = scratch.train_stage("block", config, data)  # same data, order and seed: the same numbers
    assert again.val_loss == result.val_loss


def test_the_shipped_corpus_is_the_one_its_readme_describes() -> None:
    import hashlib
    import re

    readme = (poems.CORPUS.parent / "README.md").read_text(encoding="utf-8")
    assert hashlib.sha256(poems.CORPUS.read_bytes()).hexdigest() == poems.CORPUS_SHA256
    assert re.findall(r"\b[0-9a-f]{64}\b", readme) == [poems.CORPUS_SHA256], "the README names another file"
    assert "The MIT License" in (poems.CORPUS.parent / "LICENSE").read_text(encoding="utf-8")
    corpus = poems.load_poems()
    assert all(poems.is_wuyan(p) for p in corpus), "every poem in the corpus is a 五言绝句 or 律诗"
    assert f"{len(corpus)} 首" in readme


def test_a_changed_corpus_is_refused(tmp_path, monkeypatch) -> None:
    changed = tmp_path / "wuyan.txt"
    changed.write_bytes(poems.CORPUS.read_bytes().replace("月".encode(), "日".encode(), 1))
    monkeypatch.setattr(poems, "CORPUS", changed)
    with pytest.raises(ValueError, match="sha256"):
        poems.load_poems(changed)


def test_the_form_measures_count_five_character_lines_and_whole_poems() -> None:
    jueju = "白日依山尽，黄河入海流。欲穷千里目，更上一层楼。"
    assert poems.is_wuyan(jueju) and poems.is_wuyan(jueju * 2)
    assert not poems.is_wuyan(jueju[:-1])  # 最后一句没有句号
    assert not poems.is_wuyan(jueju * 3)  # 12 句
    assert not poems.is_wuyan("白日依山，黄河入海流。欲穷千里目，更上一层楼。")  # 一句四个字
    assert not poems.is_wuyan("白日依山尽。黄河入海流，欲穷千里目，更上一层楼。")  # 逗号句号颠倒
    assert poems.five_char_share([jueju]) == 1.0
    assert poems.five_char_share(["白日依山，黄河入海流。欲穷"]) == 0.5  # 没写完的半句不算
    assert poems.five_char_share([jueju], skip="白日依山尽，") == 1.0
    assert poems.five_char_share(["白日依山尽，一二三。"], skip="白日依山尽，") == 0.0
    assert poems.form_share([jueju, jueju[:-1]]) == 0.5


def test_writing_poems_is_repeatable_and_stops_at_the_end_of_a_poem() -> None:
    data = poems.prepare_poems(POEMS)
    config = scratch.ScratchConfig(d_model=D, n_heads=H, context=T, batch_size=4, steps=30, eval_every=30,
                                   warmup_steps=2)
    model = scratch.train_stage("heads", config, data).model
    first = poems.write_poems(model, data.tokenizer, "春山", 5, context=T, seed=3)
    assert first == poems.write_poems(model, data.tokenizer, "春山", 5, context=T, seed=3)
    assert len(first) == 5 and all(p.startswith("春山") and "\n" not in p for p in first)
    assert all(len(p) <= poems.MAX_POEM_CHARS for p in first)


# -- the page's notebook: the reader edits the model classes -------------------------------------------------------

@pytest.fixture
def restored_modules():
    """The package's modules as they were, whatever a test redefined in them."""
    saved = {m: dict(vars(m)) for m in (scratch, poems)}
    stages = dict(scratch.STAGES)
    yield
    for m, names in saved.items():
        for name in [n for n in vars(m) if n not in names]:
            delattr(m, name)
        for name, value in names.items():
            setattr(m, name, value)
    scratch.STAGES.clear()
    scratch.STAGES.update(stages)


def test_a_class_redefined_in_the_notebook_is_the_one_the_package_builds_and_its_subclasses_follow(restored_modules) -> None:
    """``%%define transformer_book.chapter20.scratch`` (in_jupyter.define) above the page's BigramLM: the reader's
    version replaces the package's — in the module, in its table of stages — so ``train_stage`` trains it; a
    later cell that redefines AverageLM builds on the reader's BigramLM."""
    import inspect

    from transformer_book.book.cli.in_jupyter import define

    source = inspect.getsource(scratch.BigramLM)
    silenced = source.replace("return self.lm_head(self.ln_f(x))  # (B, T, V)", "return 0 * self.lm_head(self.ln_f(x))")
    assert silenced != source
    kernel: dict = {}
    assert define("transformer_book.chapter20.scratch", silenced, kernel) == ["BigramLM"]
    assert kernel["BigramLM"] is scratch.BigramLM is scratch.STAGES["bigram"]
    model = scratch.build("bigram", V, scratch.ScratchConfig(d_model=D, n_heads=H, context=T))
    assert torch.count_nonzero(model(torch.randint(0, V, (2, T)))) == 0, "the reader's forward, not the package's"
    old_average = scratch.AverageLM
    assert not issubclass(old_average, scratch.BigramLM)  # the package's AverageLM still builds on the old one
    define("transformer_book.chapter20.scratch", inspect.getsource(old_average))
    assert issubclass(scratch.AverageLM, kernel["BigramLM"]) and scratch.STAGES["average"] is scratch.AverageLM


def test_a_function_redefined_in_its_module_replaces_it_where_another_module_imported_it(restored_modules) -> None:
    """scratch.py does ``from …poems import write_poems``: the reader's write_poems (defined in poems) is what
    ``train_seeds`` calls. The cell keeps the module's ``from __future__ import annotations`` (an annotation
    naming what only a type checker knows stays a string)."""
    from transformer_book.book.cli.in_jupyter import define, module

    assert define("transformer_book.chapter20.poems",
                  "def write_poems(model, tokenizer, prompt, n, *, context, seed=0) -> NotDefinedAnywhere:\n"
                  "    return ['读者写的']\n") == ["write_poems"]
    assert scratch.write_poems is poems.write_poems and scratch.write_poems(None, None, "", 1, context=T) == ["读者写的"]
    helper = module("_helper_for_a_test", "from transformer_book.chapter20 import scratch\nSEEDS = scratch.SEEDS\n")
    import _helper_for_a_test  # noqa: F401 - importable by name, as a snippet imports its helper

    assert _helper_for_a_test is helper and helper.SEEDS == scratch.SEEDS
    import sys

    del sys.modules["_helper_for_a_test"]
