"""第 7 讲第 11 节实验定义（transformer_book.lecture07.experiments）的测试：每个测试对应书里的一个说法或一条约定。"""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from transformer_book import checkpoint
from transformer_book.lecture07 import experiments as ex
from transformer_book import toy_language as tl
from transformer_book.rnn import RNNLM
from transformer_book.transformer import TransformerLM, count_parameters

VOCAB = tl.build_vocab()
TINY = replace(ex.TRAIN_CONFIG, epochs=1, batch_size=32, optim=replace(ex.TRAIN_CONFIG.optim, warmup_steps=2))


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def book_data() -> ex.ToyData:
    return ex.load_toy_data()


@pytest.fixture(scope="module")
def small_data() -> ex.ToyData:
    return ex.load_toy_data(n_train=200)


def test_book_data_sizes_and_determinism(book_data):
    assert (len(book_data.train), len(book_data.dev), len(book_data.test)) == (20_000, 2_000, 2_000)
    assert ex.load_toy_data() is book_data  # 同一个进程里只生成一次
    assert book_data.train_sentences == tl.generate_corpus(ex.N_TRAIN, seed=ex.CORPUS_SEEDS["train"])
    assert book_data.train_sentences[0] != book_data.dev_sentences[0] != book_data.test_sentences[0]


def test_training_positions_verb_at_most_16_inputs_at_most_position_18(book_data):
    """书（第 11.3 节）：训练时主动词最远在位置 16（前缀 16 个词元）；最长的句子 20 个词元，模型最远读到位置 18。
    所以前缀长度 17~19 的位置在训练中出现过，但只出现在主动词之后。"""
    pos = ex.training_positions(book_data.train_sentences)
    assert (pos.longest_prefix, pos.longest_input) == (16, 19)


def test_book_models_have_the_stated_architecture():
    gpt = ex.GPT_SPEC.build(len(VOCAB))
    assert isinstance(gpt, TransformerLM) and gpt.pos == "learned" and gpt.max_len == ex.MAX_LEN
    assert len(gpt.blocks) == 2 and gpt.blocks[0].attn.n_heads == 4 and gpt.tok_emb.embedding_dim == 64
    assert gpt.blocks[0].norm == "pre" and gpt.head.weight is gpt.tok_emb.weight
    rnn = ex.RNN_SPEC.build(len(VOCAB))
    assert isinstance(rnn, RNNLM) and rnn.d_model == 64 and rnn.head.weight is rnn.embed.weight


def test_parameter_counts_follow_from_the_architecture():
    """迷你 GPT：词嵌入 V·d + 位置表 L_max·d + 2 个块 × (12d² + 13d) + 最后的 LN 2d（输出层共享）；
    LSTM：V·d + 4d(d + d) + 8d + 输出层偏置 V。没有位置表的变体少 L_max·d。"""
    v, d = len(VOCAB), 64
    gpt = v * d + ex.MAX_LEN * d + 2 * (12 * d * d + 13 * d) + 2 * d
    assert count_parameters(ex.GPT_SPEC.build(v)) == gpt
    assert count_parameters(ex.ModelSpec(pos="rope").build(v)) == gpt - ex.MAX_LEN * d
    assert count_parameters(ex.RNN_SPEC.build(v)) == v * d + 4 * d * 2 * d + 8 * d + v


def test_position_specs_three_seeds_each_and_the_learned_ones_are_the_books_three_gpts():
    """第 11.3 节每种位置编码 3 个种子（比较训练结果的说法至少要 3 个种子）；“可学习的位置嵌入”的三个模型
    就是第 11.1 节的三个迷你 GPT（s11_positions_learned 直接取来，不重训）。"""
    from dataclasses import replace

    for scheme in ex.POSITION_SCHEMES:
        specs = ex.position_specs(scheme)
        assert [s.seed for s in specs] == [0, 1, 2] and {s.pos for s in specs} == {scheme}
    assert ex.position_specs("learned") == [replace(ex.GPT_SPEC, seed=s) for s in (0, 1, 2)]


def test_spec_rejects_unknown_kind_and_position():
    with pytest.raises(ValueError, match="kind"):
        ex.ModelSpec(kind="lstm")
    with pytest.raises(ValueError, match="pos"):
        ex.ModelSpec(pos="alibi")


def test_max_len_covers_ten_modifiers():
    assert max(it.verb_pos for it in tl.agreement_test_set(10, 1000, seed=ex.AGREEMENT_SEED)) < ex.MAX_LEN


def test_training_is_reproducible_and_the_seed_matters(small_data):
    a = ex.train(ex.ModelSpec(seed=0), small_data, config=TINY)
    b = ex.train(ex.ModelSpec(seed=0), small_data, config=TINY)
    c = ex.train(ex.ModelSpec(seed=1), small_data, config=TINY)
    assert a.dev_perplexity == b.dev_perplexity and a.test_perplexity == b.test_perplexity
    assert all(torch.equal(a.state_dict[k], b.state_dict[k]) for k in a.state_dict)
    assert a.dev_perplexity != c.dev_perplexity


@pytest.mark.parametrize("spec", [ex.ModelSpec(pos="sinusoidal"), ex.RNN_SPEC])
def test_package_and_unpack_give_the_same_model_through_a_data_only_round_trip(small_data, spec):
    """打包的模型只含数据：用 torch.save 存下、用 weights_only=True 读回（片段之间的 Artifact 就是这样存的）。"""
    import io

    trained = ex.train(spec, small_data, config=TINY)
    buf = io.BytesIO()
    torch.save(ex.package(spec, trained), buf)
    packed = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    model = checkpoint.unpack(packed)
    assert ex.ModelSpec(**packed["spec"]) == spec
    assert not model.training and packed["test_perplexity"] == trained.test_perplexity
    x = torch.tensor([VOCAB.encode("<s> the cat near the trees sees".split())])
    assert torch.equal(model(x), trained.model.eval()(x))


def test_progress_bar_only_when_the_command_line_asks(monkeypatch):
    monkeypatch.delenv("BOOK_PROGRESS", raising=False)
    assert not ex.show_progress()
    monkeypatch.setenv("BOOK_PROGRESS", "1")
    assert ex.show_progress()


class SubjectOracle(torch.nn.Module):
    """看第一个名词（主语）的单复数，给一致的动词形式更高的打分；另给出“全部看主语”的注意力。"""

    def __init__(self, wrong_from: int = 10**9) -> None:
        super().__init__()
        self.wrong_from = wrong_from  # 前缀长度 ≥ wrong_from 时故意答错

    def _subject(self, idx):
        nouns = torch.tensor([tl.noun_number(w) is not None for w in VOCAB.tokens])[idx]  # (B, T)
        return nouns.float().argmax(1)  # (B,)

    def forward(self, idx, pad_mask=None):
        b, t = idx.shape
        plural = torch.tensor([bool(tl.noun_number(w)) for w in VOCAB.tokens])[idx[torch.arange(b), self._subject(idx)]]
        lengths = pad_mask.sum(1) if pad_mask is not None else torch.full((b,), t)
        plural = plural ^ (lengths >= self.wrong_from)
        logits = torch.zeros(b, t, len(VOCAB))
        for pair in tl.TRANSITIVE_VERBS + tl.INTRANSITIVE_VERBS:
            logits[..., VOCAB.id(pair[1])] = plural.float()[:, None]
            logits[..., VOCAB.id(pair[0])] = (~plural).float()[:, None]
        return logits

    def forward_with_attention(self, idx, pad_mask=None):
        b, t = idx.shape
        w = torch.zeros(1, b, 2, t, t)
        w[0, torch.arange(b), 0, :, self._subject(idx)] = 1.0  # 头 0：主语
        w[0, :, 1, :, 0] = 1.0  # 头 1：<s>
        return self(idx, pad_mask), w


def test_length_generalisation_counts_and_prefix_groups_agree():
    res = ex.length_generalisation(SubjectOracle(), VOCAB, counts=(0, 4))
    assert res.by_count == {0: 1.0, 4: 1.0}
    assert sum(n for n, _ in res.by_prefix.values()) == 2 * ex.N_AGREEMENT
    assert all(acc == 1.0 for _, acc in res.by_prefix.values())


def test_length_generalisation_locates_errors_by_prefix_length():
    res = ex.length_generalisation(SubjectOracle(wrong_from=18), VOCAB, counts=(3, 4))
    assert all((acc == 0.0) == (t >= 18) for t, (_, acc) in res.by_prefix.items())
    assert res.by_count[3] == 1.0 and 0 < res.by_count[4] < 1


def test_attention_by_kinds_and_example_selection():
    from transformer_book.lecture07.agreement import verb_position_attention

    items = tl.agreement_test_set(2, 200, seed=0)
    per_item = verb_position_attention(SubjectOracle(), items, VOCAB)
    groups = ex.attention_by_kinds(per_item, items)
    assert set(groups) == {("pp", "pp"), ("pp", "rc"), ("rc", "pp"), ("rc", "rc")}
    assert all(torch.equal(w, torch.tensor([[1.0, 0.0]])) for w in groups.values())
    first = ex.first_item_with_kinds(items, ("rc", "rc"))
    assert first.modifier_kinds == ("rc", "rc") and items.index(first) == min(
        i for i, it in enumerate(items) if it.modifier_kinds == ("rc", "rc"))
    with pytest.raises(LookupError):
        ex.first_item_with_kinds(items, ("pp",))


def test_head_labels_count_from_one():
    assert ex.head_label(0, 3) == "1.4" and ex.head_label(1, 0) == "2.1"


def test_agreement_accuracy_is_an_exact_fraction_of_the_items():
    """表里的 85.6% 就是 856/1000：准确率按整数计数再相除，不带 float32 求平均的舍入误差。"""
    from transformer_book.lecture07.agreement import agreement_accuracy

    items = tl.agreement_test_set(4, ex.N_AGREEMENT, seed=ex.AGREEMENT_SEED)
    expected = sum(it.verb_pos < 18 for it in items) / len(items)
    assert agreement_accuracy(SubjectOracle(wrong_from=18), items, VOCAB) == expected
    assert ex.length_generalisation(SubjectOracle(wrong_from=18), VOCAB, counts=(4,)).by_count[4] == expected
