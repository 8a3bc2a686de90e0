"""第 20 章与实践 P08 的测试：字符级分词器、P08 的配方、读形状与数参数的工具、代价的算术。

每个测试对应书里的一句话，写在测试名里。全部在 CPU 上几秒内跑完（训练只用很小的设置）。
"""

import math

import pytest
import torch

from transformer_book.chapter20 import analysis, p08
from transformer_book.cost import kv_cache_entries, score_matrix_entries
from transformer_book.shape_trace import symbolic_shape, trace_ops
from transformer_book.char_tokenizer import PAD_ID, UNK, UNK_ID, CharTokenizer, shift_pairs, train_val_split
from transformer_book.transformer import (MultiHeadAttention, TransformerLM, count_parameters, generate_with_logits,
                                          next_token_distribution)

TINY = p08.P08Config(d_model=16, n_heads=2, n_layers=1, context=8, batch_size=4, steps=6, eval_every=3,
                     warmup_steps=2, dropout=0.0)
TINY_TEXTS = {"a": "春风又绿江南岸。\n\n明月何时照我还。\n\n" * 4, "b": "一月二日，晴。\n\n一月三日，阴。\n\n" * 4}


# ------------------------------------------------------------------ 分词器


def test_special_tokens_come_first_then_characters_by_frequency_then_code_point():
    tok = CharTokenizer.from_text("bcab一a")
    assert tok.vocab[:2] == ("<pad>", "<unk>") and (PAD_ID, UNK_ID) == (0, 1)
    # a 出现 2 次、b 2 次、c 1 次、一 1 次：次数相同按码位
    assert tok.vocab[2:] == ("a", "b", "c", "一")


def test_vocabulary_does_not_depend_on_the_order_the_text_arrives_in():
    assert CharTokenizer.from_text(["春风", "又绿"]).vocab == CharTokenizer.from_text("又绿春风").vocab


def test_encode_decode_round_trip_and_unknown_characters_become_unk():
    tok = CharTokenizer.from_text("春风又绿江南岸")
    assert tok.decode(tok.encode("春风又绿江南岸")) == "春风又绿江南岸"
    assert tok.encode("春雨") == [tok.encode("春")[0], UNK_ID]
    assert tok.tokens("春雨") == ["春", UNK]
    assert tok.decode([PAD_ID, *tok.encode("春"), PAD_ID]) == "春"  # 填充在解码时略去


def test_tokenizer_state_round_trip():
    tok = CharTokenizer.from_text("人工智能正在")
    assert CharTokenizer.from_state(tok.state()) == tok


def test_tokenizer_rejects_a_vocabulary_without_the_special_tokens():
    with pytest.raises(ValueError):
        CharTokenizer(("a", "b"))


def test_train_val_split_keeps_all_text_and_cuts_at_a_paragraph():
    text = "第一段。\n\n第二段。\n\n第三段，比较长一些。\n\n第四段。"
    train, val = train_val_split(text, 0.15)
    assert train + val == text
    assert train.endswith("\n\n") and val == "第四段。"


def test_input_and_target_are_shifted_by_one():
    inp, tgt = shift_pairs([5, 6, 7, 8])
    assert inp == [5, 6, 7] and tgt == [6, 7, 8]


# ------------------------------------------------------------------ P08 的数据与训练


def test_the_corpus_files_are_declared_for_the_build_cache():
    assert len(p08.CORPUS_FILES) == 4
    assert all(str(f) in p08.BOOK_DATA_FILES for f in p08.CORPUS_FILES)


def test_tokenizer_is_built_from_the_training_split_only():
    data = p08.prepare_data(TINY_TEXTS, val_fraction=0.25)
    assert set(data.tokenizer.vocab[2:]) == set(data.train_text)
    assert data.tokenizer.decode(data.train_ids.tolist()) == data.train_text


def test_random_batch_targets_are_the_inputs_shifted_by_one():
    ids = torch.arange(100)
    x, y = p08.random_batch(ids, 5, 8, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (5, 8)
    assert torch.equal(y[:, :-1], x[:, 1:]) and torch.equal(y[:, -1], x[:, -1] + 1)


def test_eval_windows_cover_the_text_without_overlap():
    x, y = p08.eval_windows(torch.arange(20), 6)
    assert x.shape == (3, 6) and torch.equal(x.flatten(), torch.arange(18)) and torch.equal(y, x + 1)


def test_tiny_training_runs_records_the_curve_and_is_reproducible():
    data = p08.prepare_data(TINY_TEXTS, val_fraction=0.25)
    first = p08.train_p08(TINY, data, prompts=["一月"], sample_tokens=5)
    second = p08.train_p08(TINY, data, prompts=["一月"], sample_tokens=5)
    assert first.steps == [0, 3, 6]
    assert first.val_loss == second.val_loss and first.samples_after == second.samples_after
    assert first.train_loss[-1] < first.train_loss[0]
    assert len(first.samples_after["一月"]) == 5
    model, config, tok = p08.unpack_model(p08.pack_model(first.model, TINY, data.tokenizer))
    assert count_parameters(model) == first.n_parameters and config == TINY and tok.vocab == data.tokenizer.vocab
    x = torch.tensor([data.tokenizer.encode("一月")])
    assert torch.equal(model(x), first.model(x))


def test_initial_loss_is_close_to_uniform_guessing():
    data = p08.prepare_data(TINY_TEXTS, val_fraction=0.25)
    torch.manual_seed(0)
    model = p08.build_model(TINY, data.tokenizer.vocab_size)
    x, y = p08.eval_windows(data.train_ids, TINY.context)
    assert p08.mean_loss(model, x, y) == pytest.approx(math.log(data.tokenizer.vocab_size), abs=0.1)


def test_unigram_baseline_is_below_uniform_guessing():
    data = p08.prepare_data(TINY_TEXTS, val_fraction=0.25)
    assert p08.unigram_loss(data) < math.log(data.tokenizer.vocab_size)


def test_newlines_are_shown_as_a_visible_symbol():
    assert p08.visible("晴。\n\n") == "晴。↵↵"


# ------------------------------------------------------------------ 读形状、数参数


def test_trace_records_the_head_split_shapes_of_multihead_attention():
    mha = MultiHeadAttention(d_model=12, n_heads=3)
    x = torch.randn(2, 5, 12)
    _, ops = trace_ops(lambda: mha(x), ["linear", "transpose", "softmax", "reshape"])
    shapes = [(o.name, o.shapes[0]) for o in ops]
    assert shapes[0] == ("linear", (2, 5, 36))  # 打包的 Q、K、V
    assert ("transpose", (2, 3, 5, 4)) in shapes  # [B, h, T, d_h]
    assert ("softmax", (2, 3, 5, 5)) in shapes  # [B, h, T, T]
    assert shapes[-2:] == [("reshape", (2, 5, 12)), ("linear", (2, 5, 12))]


def test_symbolic_shape_maps_sizes_to_symbols():
    assert symbolic_shape((2, 16, 128), {2: "B", 16: "T", 128: "d"}) == "[B, T, d]"
    assert symbolic_shape((), {}) == "标量"


@pytest.mark.parametrize("pos", ["learned", "sinusoidal"])
def test_dataflow_parameters_add_up_to_the_model_and_shapes_follow_the_chapter(pos):
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=31, d_model=12, n_heads=3, n_layers=2, max_len=10, pos=pos).eval()
    idx, target = torch.randint(0, 31, (2, 7)), torch.randint(0, 31, (2, 7))
    flow = analysis.dataflow(model, idx, target)
    assert sum(r.n_params for r in flow.rows) == count_parameters(model)
    by_step = {r.step: r for r in flow.rows}
    assert by_step["词元查表"].output == (2, 7, 12)
    assert by_step["Q/K/V 投影，拆成多头"].output == (2, 3, 7, 4) and by_step["Q/K/V 投影，拆成多头"].n_outputs == 3
    assert by_step["输出到词表"].output == (2, 7, 31) and by_step["输出到词表"].n_params == 0  # 权重共享
    assert by_step["交叉熵"].output == ()
    assert flow.scores_shape == (2, 3, 7, 7) and flow.ffn_hidden_shape == (2, 7, 48)
    assert by_step["加入位置"].n_params == (10 * 12 if pos == "learned" else 0)


# ------------------------------------------------------------------ 代价


def test_four_tokens_give_a_score_matrix_of_16_entries():
    assert score_matrix_entries(4) == 16


def test_four_thousand_tokens_give_16_million_entries():
    assert score_matrix_entries(4_000) == 16_000_000


def test_doubling_the_context_quadruples_the_score_matrix():
    for T in (4, 1_000, 4_000):
        assert score_matrix_entries(2 * T) == 4 * score_matrix_entries(T)


def test_score_entries_multiply_with_batch_heads_and_layers():
    assert score_matrix_entries(64, batch=16, heads=4, layers=2) == 16 * 4 * 2 * 64 * 64


def test_kv_cache_grows_linearly_with_the_context():
    assert kv_cache_entries(128, d_model=128, layers=2) == 2 * kv_cache_entries(64, d_model=128, layers=2)
    assert kv_cache_entries(64, d_model=128, layers=2) == 2 * 2 * 64 * 128


# ------------------------------------------------------------------ 解码与注意力


def test_decoding_distribution_greedy_topk_topp_and_temperature():
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0, -3.0])
    assert torch.equal(next_token_distribution(logits, temperature=0), torch.tensor([1.0, 0, 0, 0, 0]))
    assert int((next_token_distribution(logits, top_k=2) > 0).sum()) == 2
    probs = torch.softmax(logits, -1)
    kept = next_token_distribution(logits, top_p=0.8) > 0
    assert kept.tolist() == [True, True, False, False, False] and float(probs[:2].sum()) >= 0.8
    cold, hot = (next_token_distribution(logits, temperature=t) for t in (0.5, 2.0))
    assert cold[0] > probs[0] > hot[0]


@pytest.mark.parametrize("kwargs", [dict(top_k=3), dict(top_p=0.6), dict(temperature=0.7, top_k=5, top_p=0.9)])
def test_generate_only_samples_tokens_the_decoding_distribution_allows(kwargs):
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=17, d_model=16, n_heads=2, n_layers=1, max_len=32).eval()
    prompt = torch.tensor([[1, 2, 3]])
    out, logits = generate_with_logits(model, prompt, 12, generator=torch.Generator().manual_seed(1), **kwargs)
    for step in range(12):
        allowed = next_token_distribution(logits[0, step], **kwargs) > 0
        assert allowed[out[0, 3 + step]]


def test_attention_statistics_of_a_uniform_baseline_and_a_model():
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=11, d_model=8, n_heads=2, n_layers=2, max_len=6).eval()
    x = torch.randint(0, 11, (3, 6))
    marked = torch.zeros(3, 6, dtype=torch.bool)
    marked[:, 0] = True
    stats = analysis.attention_statistics(model, x, marked)
    assert [(s["layer"], s["head"]) for s in stats] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    base = analysis.uniform_attention_baseline(x, marked)
    assert base["self"] == pytest.approx(sum(1 / (t + 1) for t in range(6)) / 6)
    assert base["marked"] == pytest.approx(base["self"])  # 第 1 个位置在平均分配时得到的份额与“给自己”相同
    # 未训练的模型打分接近 0，权重接近平均分配
    assert stats[0]["entropy"] == pytest.approx(base["entropy"], abs=0.05)


def test_removing_a_head_changes_the_loss_and_leaves_the_model_intact():
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=11, d_model=8, n_heads=2, n_layers=1, max_len=6).eval()
    for p in model.parameters():  # 放大权重，让每个头都有影响
        p.data.mul_(20)
    x, y = torch.randint(0, 11, (4, 6)), torch.randint(0, 11, (4, 6))
    before = p08.mean_loss(model, x, y)
    assert analysis.loss_without_head(model, x, y, 1, 1) != pytest.approx(before)
    assert p08.mean_loss(model, x, y) == before  # 钩子已经拿掉


def test_kv_cache_timing_helper_returns_the_same_tokens_both_ways():
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=11, d_model=8, n_heads=2, n_layers=1, max_len=12).eval()
    prompt = torch.tensor([[1, 2]])
    slow, _ = analysis.time_generation(model, prompt, 10, use_cache=False, repeats=1)
    fast, _ = analysis.time_generation(model, prompt, 10, use_cache=True, repeats=1)
    assert torch.equal(slow, fast)


def test_kv_cache_timing_runs_on_one_thread_whatever_the_build_uses(monkeypatch: pytest.MonkeyPatch):
    """On 2 threads the CPU time counts threads waiting for each other (in a build whose processes
    oversubscribed the cores the 64-vs-256 claim turned false). Outside a BOOK_THREADS-perturbed build,
    whose worker holds the thread count, the timing runs on one thread."""
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=11, d_model=8, n_heads=2, n_layers=1, max_len=12).eval()
    seen = []
    real = analysis.generate
    monkeypatch.setattr(analysis, "generate", lambda *a, **k: (seen.append(torch.get_num_threads()), real(*a, **k))[1])
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        analysis.time_generation(model, torch.tensor([[1, 2]]), 4, use_cache=True, repeats=2)
        assert seen == [1, 1] and torch.get_num_threads() == 2  # restored afterwards
    finally:
        torch.set_num_threads(before)


def test_a_stripe_counts_only_rows_where_even_attention_would_stay_under_the_threshold() -> None:
    """Uniform causal attention gives rows 1–3 shares of 1/2, 1/3, 1/4 — at least 0.25 without any head singling a
    column out: no stripe. A column that every row gives 0.5 is counted from row 4 on (rows 4 … T−1)."""
    T = 10
    uniform = torch.ones(T, T).tril()
    uniform = uniform / uniform.sum(-1, keepdim=True)
    assert all(n == 0 for _, n in analysis.attention_stripes(uniform, 0.25))
    striped = uniform.clone()
    striped[1:, 0] = 0.5
    assert analysis.attention_stripes(striped, 0.25)[0] == (0, T - 4)
