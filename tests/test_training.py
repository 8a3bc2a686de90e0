"""共用训练循环、困惑度和 RNN 语言模型的测试。"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from transformer_book import toy_language as tl
from transformer_book.rnn import RNNLM, count_parameters
from transformer_book.training import OptimConfig, TokenData, TrainConfig, lm_loss, perplexity, train_language_model

VOCAB = tl.build_vocab()


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _data(n: int, seed: int) -> list[list[int]]:
    return tl.encode_corpus(tl.generate_corpus(n, seed=seed), VOCAB)


@pytest.fixture(scope="module")
def tiny():
    return _data(400, 1), _data(100, 2), _data(100, 3)


TINY_CONFIG = TrainConfig(epochs=3, batch_size=32, seed=0,
                          optim=OptimConfig(lr=1e-2, warmup_steps=5, weight_decay=0.01, betas=(0.9, 0.99), grad_clip=1.0))


def _tiny_rnn() -> RNNLM:
    return RNNLM(vocab_size=len(VOCAB), d_model=16)


# ---------------------------------------------------------------------------
# 分批与困惑度
# ---------------------------------------------------------------------------


def test_each_epoch_visits_every_sentence_once_in_length_buckets():
    data = TokenData(_data(1000, 0), pad_id=0)
    batches = data.batches(64, torch.Generator().manual_seed(0))
    assert sorted(torch.cat(batches).tolist()) == list(range(1000))
    spreads = [int(data.lengths[b].max() - data.lengths[b].min()) for b in batches]
    assert sum(s == 0 for s in spreads) >= len(batches) - 16  # 几乎每批长度都相同；最多 16 种长度，交界处才混长度


def test_batch_order_depends_only_on_the_generator_seed():
    data = TokenData(_data(300, 0), pad_id=0)
    a = data.batches(32, torch.Generator().manual_seed(1))
    b = data.batches(32, torch.Generator().manual_seed(1))
    c = data.batches(32, torch.Generator().manual_seed(2))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))


def test_batch_pads_on_the_right_with_a_mask():
    data = TokenData([[1, 5, 2], [1, 5, 6, 7, 2]], pad_id=0)
    x, mask = data.batch(torch.tensor([0, 1]))
    assert x.tolist() == [[1, 5, 2, 0, 0], [1, 5, 6, 7, 2]]
    assert mask.tolist() == [[True, True, True, False, False], [True] * 5]
    assert data.batch(torch.tensor([1]))[1] is None  # 没有填充时不传掩码
    assert data.n_predicted == 2 + 4


def test_uniform_model_has_perplexity_equal_to_vocab_size():
    """困惑度 = exp(平均负对数似然)：均匀猜测 V 个词的模型困惑度恰好是 V。"""

    class Uniform(torch.nn.Module):
        def forward(self, idx, pad_mask=None):
            return torch.zeros(*idx.shape, len(VOCAB))

    assert perplexity(Uniform(), _data(50, 0)) == pytest.approx(len(VOCAB))


def test_perplexity_ignores_padding(tiny):
    """一句一批（没有填充）和混合长度的大批（有填充）得到同一个困惑度。"""
    model = _tiny_rnn()
    _, dev, _ = tiny
    assert perplexity(model, dev, batch_size=1) == pytest.approx(perplexity(model, dev, batch_size=100), rel=1e-5)


def test_perplexity_counts_eos_but_not_bos():
    """只有 </s> 可预测时（<s> 后面就是 </s>），完美预测 </s> 的模型困惑度为 1。"""

    class SaysEos(torch.nn.Module):
        def forward(self, idx, pad_mask=None):
            logits = torch.full((*idx.shape, len(VOCAB)), -30.0)
            logits[..., VOCAB.eos_id] = 0.0
            return logits

    assert perplexity(SaysEos(), [[1, 2], [1, 2]]) == pytest.approx(1.0)
    assert perplexity(SaysEos(), [[1, 5, 2]]) > 1e6  # 第一个词预测错了（概率约 e^−30），困惑度巨大


# ---------------------------------------------------------------------------
# 训练循环
# ---------------------------------------------------------------------------


def test_loss_decreases_on_a_tiny_corpus(tiny):
    train, dev, test = tiny
    before = perplexity(_tiny_rnn(), dev)
    result = train_language_model(_tiny_rnn, train, dev, test, TINY_CONFIG)
    assert result.train_loss[-1] < result.train_loss[0]
    assert result.dev_perplexity[-1] < result.dev_perplexity[0] < before
    assert len(result.dev_perplexity) == TINY_CONFIG.epochs
    assert result.steps == TINY_CONFIG.epochs * math.ceil(400 / 32)
    assert result.test_perplexity < before


def test_same_seed_gives_identical_result(tiny):
    a = train_language_model(_tiny_rnn, *tiny, TINY_CONFIG)
    b = train_language_model(_tiny_rnn, *tiny, TINY_CONFIG)
    assert a.dev_perplexity == b.dev_perplexity and a.test_perplexity == b.test_perplexity
    assert a.state_dict.keys() == b.state_dict.keys()
    assert all(torch.equal(a.state_dict[k], b.state_dict[k]) for k in a.state_dict)
    c = train_language_model(_tiny_rnn, *tiny, replace(TINY_CONFIG, seed=1))
    assert c.dev_perplexity != a.dev_perplexity


def test_dropout_is_deterministic_given_the_seed(tiny):
    def make():
        return RNNLM(vocab_size=len(VOCAB), d_model=16, dropout=0.3)

    cfg = replace(TINY_CONFIG, epochs=1)
    assert (train_language_model(make, *tiny, cfg).dev_perplexity
            == train_language_model(make, *tiny, cfg).dev_perplexity)


def test_result_holds_the_trained_model_and_a_detached_state(tiny):
    result = train_language_model(_tiny_rnn, *tiny, TINY_CONFIG)
    assert not result.model.training
    assert perplexity(result.model, tiny[2]) == pytest.approx(result.test_perplexity)
    fresh = _tiny_rnn()
    fresh.load_state_dict(result.state_dict)
    assert perplexity(fresh, tiny[2]) == pytest.approx(result.test_perplexity)
    assert result.n_parameters == count_parameters(result.model)


def test_training_is_silent_by_default(tiny, capsys):
    train_language_model(_tiny_rnn, *tiny, replace(TINY_CONFIG, epochs=1))
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_learning_rate_follows_warmup_then_cosine(tiny, monkeypatch):
    """每步的学习率：线性升到 max_lr，再余弦降到 min_lr。"""
    seen: list[float] = []
    real_step = torch.optim.AdamW.step

    def spy(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return real_step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.AdamW, "step", spy)
    cfg = replace(TINY_CONFIG, optim=replace(TINY_CONFIG.optim, warmup_steps=10, min_lr=1e-4))
    train_language_model(_tiny_rnn, *tiny, cfg)
    peak = seen.index(max(seen))
    assert max(seen) == pytest.approx(cfg.optim.lr, rel=0.11)
    assert 8 <= peak <= 11
    assert all(a <= b for a, b in zip(seen[:peak], seen[1:peak + 1]))
    assert all(a >= b for a, b in zip(seen[peak:], seen[peak + 1:]))
    assert seen[-1] == pytest.approx(cfg.optim.min_lr, abs=2e-4)


# ---------------------------------------------------------------------------
# RNN 语言模型
# ---------------------------------------------------------------------------


def test_rnn_shapes_and_tied_weights():
    model = RNNLM(vocab_size=len(VOCAB), d_model=64)
    assert model(torch.ones(3, 7, dtype=torch.long)).shape == (3, 7, len(VOCAB))
    assert model.head.weight is model.embed.weight
    v, d = len(VOCAB), 64
    # 嵌入 V·d（与输出层共享）+ LSTM 4d(d + d) + 8d + 输出层偏置 V
    assert count_parameters(model) == v * d + 4 * d * 2 * d + 8 * d + v
    untied = RNNLM(vocab_size=v, d_model=d, tie_weights=False)
    assert count_parameters(untied) == count_parameters(model) + v * d


def test_rnn_outputs_at_real_positions_ignore_right_padding():
    model = RNNLM(vocab_size=len(VOCAB), d_model=16).eval()
    x = torch.tensor([[1, 3, 5, 24, 3, 7, 2]])
    padded = torch.cat([x, torch.zeros(1, 3, dtype=torch.long)], dim=1)
    mask = torch.arange(10)[None] < 7
    assert torch.allclose(model(x), model(padded, pad_mask=mask)[:, :7], atol=1e-6)


def test_rnn_rejects_left_padding():
    model = RNNLM(vocab_size=len(VOCAB), d_model=8)
    with pytest.raises(ValueError, match="右侧填充"):
        model(torch.ones(1, 4, dtype=torch.long), pad_mask=torch.tensor([[False, True, True, True]]))


def test_rnn_is_causal():
    """改变最后一个词，前面位置的输出不变。"""
    model = RNNLM(vocab_size=len(VOCAB), d_model=16).eval()
    a = torch.tensor([[1, 3, 5, 24]])
    b = torch.tensor([[1, 3, 5, 26]])
    assert torch.equal(model(a)[:, :3], model(b)[:, :3])


# ---------------------------------------------------------------------------
# 同一个训练循环训练 TransformerLM
# ---------------------------------------------------------------------------


def test_same_loop_trains_the_transformer(tiny):
    from transformer_book.transformer import TransformerLM

    def make():
        return TransformerLM(vocab_size=len(VOCAB), d_model=16, n_heads=2, n_layers=1, max_len=32)

    result = train_language_model(make, *tiny, TINY_CONFIG)
    assert result.dev_perplexity[-1] < result.dev_perplexity[0]
    assert result.train_loss[-1] < result.train_loss[0]
    again = train_language_model(make, *tiny, TINY_CONFIG)
    assert again.dev_perplexity == result.dev_perplexity
    dev = tiny[1]
    assert perplexity(result.model, dev, batch_size=1) == pytest.approx(perplexity(result.model, dev), rel=1e-5)


def test_untrained_transformer_attends_almost_uniformly():
    """初始化时（权重 N(0, 0.02)）注意力几乎均匀：分给主语的权重约等于 1 / 前缀长度。"""
    from transformer_book.lecture07.agreement import attention_to_subject
    from transformer_book.transformer import TransformerLM

    torch.manual_seed(0)
    model = TransformerLM(vocab_size=len(VOCAB), d_model=32, n_heads=4, n_layers=2, max_len=48)
    s = attention_to_subject(model, tl.agreement_test_set(2, 100, seed=0), VOCAB, batch_size=32)
    assert s.subject.shape == s.distractor.shape == (2, 4)
    assert torch.allclose(s.subject, torch.full((2, 4), s.uniform), atol=0.01)
    assert torch.allclose(s.distractor, torch.full((2, 4), s.uniform), atol=0.01)


def test_lm_loss_mean_is_sum_over_predicted_tokens():
    model = _tiny_rnn()
    data = TokenData(_data(20, 0), pad_id=0)
    x, mask = data.batch(torch.arange(20))
    assert mask is not None
    with torch.no_grad():
        mean = lm_loss(model, x, mask)
        total = lm_loss(model, x, mask, reduction="sum")
    assert float(total) / data.n_predicted == pytest.approx(float(mean), rel=1e-5)
