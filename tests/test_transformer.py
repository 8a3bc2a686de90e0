"""``transformer_book.transformer`` 的测试：每个测试对应书里的一句断言，断言写在测试名里。"""

import ast
import inspect
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_book import transformer as tb
from transformer_book.transformer import (
    EncoderDecoder,
    LearnedPositionEmbedding,
    MultiHeadAttention,
    TransformerBlock,
    TransformerLM,
    apply_rope,
    block_parameters,
    count_parameters,
    generate,
    generate_with_logits,
    rope_tables,
    scaled_dot_product_attention,
    sinusoidal_encoding,
    warmup_cosine,
)

TOL = 1e-6  # float32 下与 PyTorch 自带实现对照的容差


def small_lm(**overrides):
    """测试用的小模型：d = 32，4 个头，2 层。"""
    torch.manual_seed(0)
    config = dict(vocab_size=23, d_model=32, n_heads=4, n_layers=2, max_len=24)
    config.update(overrides)
    return TransformerLM(**config).eval()


def random_mask(*shape, seed):
    """随机的布尔掩码（True = 可以关注），保证每行至少有一个 True。"""
    g = torch.Generator().manual_seed(seed)
    mask = torch.rand(*shape, generator=g) > 0.4
    mask[..., 0] = True
    return mask


# ------------------------------------------------------------------ 注意力


@pytest.mark.parametrize("case", ["no_mask", "bool_mask", "causal"])
def test_manual_attention_equals_torch_sdpa(case):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 8) for _ in range(3))
    mask = {"no_mask": None, "bool_mask": random_mask(2, 3, 7, 7, seed=1),
            "causal": torch.ones(7, 7, dtype=torch.bool).tril()}[case]
    ours, weights = scaled_dot_product_attention(q, k, v, mask)
    theirs = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    assert (ours - theirs).abs().max() <= TOL
    assert torch.allclose(weights.sum(-1), torch.ones(2, 3, 7))


def test_fully_masked_row_gives_zero_weights_and_output_without_nan():
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 1, 3, 4, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[True, False, False], [False, False, False], [True, True, True]])
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.equal(weights[0, 0, 1], torch.zeros(3)) and torch.equal(out[0, 0, 1], torch.zeros(4))
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))


def copy_into_torch_mha(ours, d, h):
    theirs = nn.MultiheadAttention(d, h, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(ours.in_proj.weight)
        theirs.in_proj_bias.copy_(ours.in_proj.bias)
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
    return theirs.eval()


@pytest.mark.parametrize("case", ["no_mask", "causal", "key_padding"])
def test_multi_head_attention_equals_nn_multihead_attention_with_copied_weights(case):
    torch.manual_seed(0)
    d, h, B, T = 32, 4, 2, 6
    ours = MultiHeadAttention(d_model=d, n_heads=h).eval()
    theirs = copy_into_torch_mha(ours, d, h)
    x = torch.randn(B, T, d)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    pad = torch.tensor([[True] * T, [True] * 4 + [False] * 2])
    if case == "no_mask":
        our_mask, kwargs = None, {}
    elif case == "causal":  # 极性相反：我们 True = 可以关注，nn.MultiheadAttention 的 True = 屏蔽
        our_mask, kwargs = causal, {"attn_mask": ~causal}
    else:
        our_mask, kwargs = pad[:, None, None, :], {"key_padding_mask": ~pad}
    out, w = ours(x, mask=our_mask, need_weights=True)
    ref, ref_w = theirs(x, x, x, need_weights=True, average_attn_weights=False, **kwargs)
    assert (out - ref).abs().max() <= TOL
    assert (w - ref_w).abs().max() <= TOL


def test_cross_attention_equals_nn_multihead_attention_with_copied_weights():
    torch.manual_seed(0)
    d, h = 32, 4
    ours = MultiHeadAttention(d_model=d, n_heads=h).eval()
    theirs = copy_into_torch_mha(ours, d, h)
    x, memory = torch.randn(2, 5, d), torch.randn(2, 9, d)
    pad = torch.tensor([[True] * 9, [True] * 6 + [False] * 3])
    out, w = ours(x, memory, mask=pad[:, None, None, :], need_weights=True)
    ref, ref_w = theirs(x, memory, memory, key_padding_mask=~pad, average_attn_weights=False)
    assert (out - ref).abs().max() <= TOL and (w - ref_w).abs().max() <= TOL


def test_sdpa_switch_gives_same_model_output_as_readable_attention():
    idx = torch.randint(0, 23, (3, 12), generator=torch.Generator().manual_seed(1))
    pad = torch.ones(3, 12, dtype=torch.bool)
    pad[1, 8:] = False
    manual, fused = small_lm(attn_impl="manual"), small_lm(attn_impl="sdpa")
    assert (manual(idx, pad) - fused(idx, pad)).abs().max() <= 1e-5


# ------------------------------------------------------------------ 块


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_block_equals_nn_transformer_encoder_layer_with_copied_weights(norm):
    torch.manual_seed(0)
    d, h, T = 32, 4, 7
    ours = TransformerBlock(d_model=d, n_heads=h, norm=norm).eval()
    theirs = nn.TransformerEncoderLayer(d, h, dim_feedforward=4 * d, dropout=0.0, activation="gelu",
                                        batch_first=True, norm_first=(norm == "pre")).eval()
    with torch.no_grad():
        for ln in (ours.ln1, ours.ln2):  # 随机化 γ、β，让对照不依赖 LayerNorm 的默认初始值
            ln.weight.add_(0.1 * torch.randn(d))
            ln.bias.add_(0.1 * torch.randn(d))
        theirs.self_attn.in_proj_weight.copy_(ours.attn.in_proj.weight)
        theirs.self_attn.in_proj_bias.copy_(ours.attn.in_proj.bias)
    theirs.self_attn.out_proj.load_state_dict(ours.attn.out_proj.state_dict())
    theirs.linear1.load_state_dict(ours.ffn.fc1.state_dict())
    theirs.linear2.load_state_dict(ours.ffn.fc2.state_dict())
    theirs.norm1.load_state_dict(ours.ln1.state_dict())
    theirs.norm2.load_state_dict(ours.ln2.state_dict())
    x = torch.randn(2, T, d)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    # 参数 requires_grad 且梯度开启时，nn.TransformerEncoderLayer 不走 eval 下的融合“快速路径”，比较的是同一套数学
    assert torch.is_grad_enabled()
    ours_out, _, _ = ours(x, mask=causal)
    ref = theirs(x, src_mask=~causal)
    assert (ours_out - ref).abs().max() <= TOL


def test_a_cross_attention_block_refuses_to_run_without_memory():
    """交叉注意力块没有 memory 时不能悄悄退化成自注意力；没有交叉注意力的块也不能接收 memory。"""
    block = TransformerBlock(d_model=16, n_heads=2, cross_attention=True)
    x = torch.randn(1, 5, 16)
    with pytest.raises(ValueError, match="memory"):
        block(x)
    with pytest.raises(ValueError, match="memory"):
        TransformerBlock(d_model=16, n_heads=2)(x, memory=torch.randn(1, 3, 16))
    out, _, cross = block(x, memory=torch.randn(1, 3, 16), need_weights=True)
    assert out.shape == (1, 5, 16) and cross.shape == (1, 2, 5, 3)


# ------------------------------------------------------------------ 位置编码


def test_rope_score_depends_only_on_offset():
    torch.manual_seed(0)
    d_h = 16
    cos, sin = rope_tables(200, d_h)
    q, k = torch.randn(d_h), torch.randn(d_h)

    def score(m, n):
        return apply_rope(q, cos[m], sin[m]) @ apply_rope(k, cos[n], sin[n])

    assert torch.allclose(score(5, 2), score(10, 7), atol=1e-5)
    assert torch.allclose(score(5, 2), score(100, 97), atol=1e-5)
    assert torch.allclose(score(2, 5), score(60, 63), atol=1e-5)
    assert not torch.allclose(score(5, 2), score(2, 5), atol=1e-3)


def test_rope_preserves_norm():
    torch.manual_seed(0)
    cos, sin = rope_tables(1001, 16)
    x = torch.randn(16)
    for m in (0, 1, 10, 100, 1000):
        assert torch.allclose(apply_rope(x, cos[m], sin[m]).norm(), x.norm(), atol=1e-5)


def test_sinusoidal_dot_product_depends_only_on_distance():
    pe = sinusoidal_encoding(200, 64)
    for k in (1, 4, 16):
        dots = torch.stack([pe[p] @ pe[p + k] for p in (0, 20, 100)])
        assert torch.allclose(dots, dots[0].expand(3), atol=1e-4)
    assert torch.isclose(pe[7] @ pe[7], torch.tensor(32.0))


def test_learned_position_table_beyond_its_length_raises_naming_the_limit():
    table = LearnedPositionEmbedding(max_len=8, d_model=4)
    assert table(8).shape == (8, 4)
    with pytest.raises(ValueError, match=r"L_max = 8.*请求的长度是 9"):
        table(9)
    with pytest.raises(ValueError, match=r"L_max = 8.*请求的长度是 10"):
        table(3, offset=7)
    model = small_lm(max_len=8)
    with pytest.raises(ValueError, match=r"L_max = max_len = 8"):
        model(torch.zeros(1, 9, dtype=torch.long))


# ------------------------------------------------------------------ 掩码：因果与填充


@pytest.mark.parametrize("pos", ["learned", "sinusoidal", "rope", "none"])
def test_changing_token_t_leaves_every_earlier_output_unchanged(pos):
    model = small_lm(pos=pos)
    idx = torch.randint(0, 23, (2, 10), generator=torch.Generator().manual_seed(1))
    changed = idx.clone()
    changed[:, 6] = (changed[:, 6] + 1) % 23
    a, b = model(idx), model(changed)
    assert (a[:, :6] - b[:, :6]).abs().max() == 0
    assert (a[:, 6:] - b[:, 6:]).abs().max() > 1e-4


@pytest.mark.parametrize("causal", [True, False])
def test_padded_keys_change_nothing_for_real_tokens(causal):
    model = small_lm(causal=causal)
    g = torch.Generator().manual_seed(2)
    real = torch.randint(0, 23, (1, 6), generator=g)
    padded = torch.cat([real, torch.randint(0, 23, (1, 4), generator=g)], dim=1)  # 右侧填充任意词元
    pad_mask = torch.tensor([[True] * 6 + [False] * 4])
    alone, batch = model(real), model(padded, pad_mask)
    assert (alone - batch[:, :6]).abs().max() <= 1e-5


@pytest.mark.parametrize("attn_impl", ["manual", "sdpa"])
@pytest.mark.parametrize("causal", [True, False])
def test_fully_padded_rows_give_no_nan(causal, attn_impl):
    model = small_lm(causal=causal, attn_impl=attn_impl).train()
    idx = torch.randint(0, 23, (3, 8), generator=torch.Generator().manual_seed(3))
    pad_mask = torch.ones(3, 8, dtype=torch.bool)
    pad_mask[1] = False  # 整个序列都是填充
    pad_mask[2, :3] = False  # 左侧填充：因果时前 3 行的查询一个真实键也看不到
    logits = model(idx, pad_mask)
    assert torch.isfinite(logits).all()
    logits.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())
    _, attention = model.forward_with_attention(idx, pad_mask)
    assert all(torch.isfinite(w).all() for w in attention)


def test_attention_weights_are_returned_per_layer_and_head():
    model = small_lm()
    idx = torch.randint(0, 23, (2, 9), generator=torch.Generator().manual_seed(4))
    logits, attention = model.forward_with_attention(idx)
    assert len(attention) == 2 and attention[0].shape == (2, 4, 9, 9)
    assert torch.allclose(attention[1].sum(-1), torch.ones(2, 4, 9), atol=1e-6)
    assert attention[0][0, 0].triu(diagonal=1).abs().max() == 0  # 因果：看不到右边
    assert torch.equal(logits, model(idx))


# ------------------------------------------------------------------ 参数量、初始化、权重共享


@pytest.mark.parametrize("d", [64, 128, 768])
def test_block_parameter_formula_matches_real_blocks(d):
    with torch.device("meta"):  # 只数参数，不分配内存
        block = TransformerBlock(d_model=d, n_heads=4)
    assert count_parameters(block) == block_parameters(d).total == 12 * d * d + 13 * d


def test_gpt2_small_sized_model_has_exactly_124_439_808_parameters():
    with torch.device("meta"):
        model = TransformerLM(vocab_size=50257, d_model=768, n_heads=12, n_layers=12, max_len=1024,
                              pos="learned", tie_weights=True)
    assert count_parameters(model) == 50257 * 768 + 1024 * 768 + 12 * block_parameters(768).total + 2 * 768
    assert count_parameters(model) == 124_439_808


def test_weight_tying_holds_by_identity_and_is_counted_once():
    tied, untied = small_lm(tie_weights=True), small_lm(tie_weights=False)
    assert tied.head.weight is tied.tok_emb.weight
    assert untied.head.weight is not untied.tok_emb.weight
    assert count_parameters(untied) - count_parameters(tied) == 23 * 32


def test_gpt2_initialisation_scales_residual_projections_by_one_over_sqrt_2n():
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=100, d_model=256, n_heads=4, n_layers=8, max_len=16)
    block = model.blocks[0]
    assert abs(block.attn.in_proj.weight.std().item() - 0.02) < 1e-3
    assert abs(block.ffn.fc2.weight.std().item() - 0.02 / math.sqrt(16)) < 2e-4
    assert abs(block.attn.out_proj.weight.std().item() - 0.02 / math.sqrt(16)) < 2e-4
    assert block.attn.in_proj.bias.abs().max() == 0


# ------------------------------------------------------------------ 生成与 KV 缓存


@pytest.mark.parametrize("pos", ["learned", "sinusoidal", "rope", "none"])
def test_kv_cache_greedy_generation_gives_same_tokens_and_logits_as_uncached(pos):
    model = small_lm(pos=pos)
    prompt = torch.randint(0, 23, (2, 5), generator=torch.Generator().manual_seed(5))
    # 30 个新词元：超过 max_len = 24 后两条路径都裁剪上下文
    cached, cached_logits = generate_with_logits(model, prompt, 30, temperature=0, use_cache=True)
    plain, plain_logits = generate_with_logits(model, prompt, 30, temperature=0, use_cache=False)
    assert torch.equal(cached, plain)
    assert (cached_logits - plain_logits).abs().max() <= 1e-5


def test_kv_cache_forward_matches_full_forward_logits():
    model = small_lm(pos="rope")
    idx = torch.randint(0, 23, (2, 12), generator=torch.Generator().manual_seed(6))
    cache = model.new_kv_cache()
    pieces = [model(idx[:, :7], kv_cache=cache)]  # 先整段喂 7 个，再逐个喂
    pieces += [model(idx[:, t:t + 1], kv_cache=cache) for t in range(7, 12)]
    assert (torch.cat(pieces, dim=1) - model(idx)).abs().max() <= 1e-5


def test_sampling_is_reproducible_with_a_seeded_generator_and_restores_training_mode():
    model = small_lm().train()
    prompt = torch.zeros(2, 1, dtype=torch.long)
    runs = [generate(model, prompt, 15, temperature=0.8, top_k=5, top_p=0.9,
                     generator=torch.Generator().manual_seed(7)) for _ in range(2)]
    assert torch.equal(runs[0], runs[1]) and model.training


def test_temperature_zero_top_k_one_and_tiny_top_p_are_all_greedy():
    model = small_lm()
    prompt = torch.zeros(1, 2, dtype=torch.long)
    greedy = generate(model, prompt, 10, temperature=0)
    assert torch.equal(generate(model, prompt, 10, top_k=1), greedy)
    assert torch.equal(generate(model, prompt, 10, top_p=1e-9), greedy)
    generate(model, prompt, 3, top_k=10_000)  # k 大于词表：截到整个词表，不报错


# ------------------------------------------------------------------ 编码器—解码器


def test_encoder_decoder_decoder_is_causal_and_reads_the_source():
    torch.manual_seed(0)
    model = EncoderDecoder(src_vocab=19, tgt_vocab=17, d_model=32, n_heads=4, n_layers=2, max_len=16).eval()
    g = torch.Generator().manual_seed(8)
    src, tgt = torch.randint(0, 19, (2, 9), generator=g), torch.randint(0, 17, (2, 7), generator=g)
    logits, attention = model.forward_with_attention(src, tgt)
    assert logits.shape == (2, 7, 17) and attention["cross"][0].shape == (2, 4, 7, 9)
    changed_tgt = tgt.clone()
    changed_tgt[:, 4] = (changed_tgt[:, 4] + 1) % 17
    assert (model(src, changed_tgt)[:, :4] - logits[:, :4]).abs().max() == 0
    changed_src = src.clone()
    changed_src[:, 0] = (changed_src[:, 0] + 1) % 19
    assert (model(changed_src, tgt) - logits).abs().max() > 0  # 解码器通过交叉注意力读到了源句


# ------------------------------------------------------------------ 学习率与模块边界


def test_warmup_cosine_is_zero_at_start_max_after_warmup_and_min_at_end():
    kw = dict(warmup_steps=100, total_steps=1000, max_lr=3e-3, min_lr=1e-4)
    assert warmup_cosine(0, **kw) == 0.0
    assert warmup_cosine(50, **kw) == pytest.approx(1.5e-3)
    assert warmup_cosine(100, **kw) == pytest.approx(3e-3)
    assert warmup_cosine(550, **kw) == pytest.approx((3e-3 + 1e-4) / 2)
    assert warmup_cosine(1000, **kw) == pytest.approx(1e-4)
    assert warmup_cosine(5000, **kw) == pytest.approx(1e-4)


def test_model_module_imports_only_torch_and_the_standard_library():
    tree = ast.parse(inspect.getsource(tb))
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= {"math", "dataclasses", "typing", "torch"}


def test_sinusoidal_model_scales_token_embeddings_by_sqrt_d_before_adding_the_table() -> None:
    """正弦位置编码的模型：词嵌入乘以 √d 后再加正弦表（Vaswani 等 §3.4），位置信号才不会淹没词。"""
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=11, d_model=16, n_heads=2, n_layers=1, max_len=8, pos="sinusoidal")
    idx = torch.tensor([[1, 2, 3]])
    captured = {}
    model.drop.register_forward_hook(lambda m, inp, out: captured.setdefault("x", inp[0]))
    model(idx)
    expected = model.tok_emb(idx) * 16 ** 0.5 + sinusoidal_encoding(8, 16)[:3]
    torch.testing.assert_close(captured["x"], expected)
