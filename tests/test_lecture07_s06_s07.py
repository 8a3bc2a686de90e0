"""第 7 讲第 6、7 节的测试：多头检索任务、形状追踪、深度实验、层归一化与参数量。

每个测试对应书里的一句断言；讲义印出的确定性数值（层归一化的结果、GPT-2 small 的参数量与占比）
在这里按印出的精度核对。
"""

import pytest
import torch
import torch.nn as nn

from transformer_book.lecture07 import depth as ds
from transformer_book.lecture07 import retrieval as rt
from transformer_book.lecture07.mha_vs_torch import compare_with_torch_mha
from transformer_book.shape_trace import symbolic_shape, trace_module
from transformer_book.transformer import MultiHeadAttention, TransformerBlock, block_parameters, count_parameters

# ------------------------------------------------------------------ 7.2 层归一化（讲义印出的数值）

SEED_LAYER_NORM = (-1.342, -0.447, 0.447, 1.342)


@pytest.mark.parametrize("x", [(2.0, 4.0, 6.0, 8.0), (100.0, 101.0, 102.0, 103.0)])
def test_layer_norm_of_both_inputs_is_the_seed_vector(x):
    y, _, _ = ds.layer_norm_by_hand(torch.tensor(x))
    assert tuple(round(v, 3) for v in y.tolist()) == SEED_LAYER_NORM


def test_layer_norm_by_hand_equals_nn_layernorm_with_gamma_and_beta():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 8)
    ln = nn.LayerNorm(8, eps=1e-5)
    with torch.no_grad():
        ln.weight.normal_()
        ln.bias.normal_()
        y, mu, var = ds.layer_norm_by_hand(x, ln.weight, ln.bias, eps=1e-5)
        assert (y - ln(x)).abs().max() < 1e-5
    assert torch.allclose(var, x.var(dim=-1, unbiased=False, keepdim=True))  # 有偏方差：除以 d


# ------------------------------------------------------------------ 7.5 参数量


@pytest.mark.parametrize("d", [64, 128, 768])
def test_block_has_12d2_plus_13d_parameters_part_by_part(d):
    counted = ds.block_parameter_breakdown(d)
    assert counted == block_parameters(d)
    assert counted.total == 12 * d * d + 13 * d


def test_block_breakdown_on_meta_equals_a_real_block():
    real = TransformerBlock(d_model=64, n_heads=4)
    assert count_parameters(real) == ds.block_parameter_breakdown(64, n_heads=4).total


def test_gpt2_small_has_124_439_808_parameters_embeddings_31_0_blocks_68_3_percent():
    gpt2 = ds.gpt2_small_breakdown()
    assert gpt2["total"] == 124_439_808
    assert gpt2["head_is_embedding"]
    assert f"{gpt2['token_embedding'] / gpt2['total']:.1%}" == "31.0%"
    assert f"{gpt2['blocks'] / gpt2['total']:.1%}" == "68.3%"
    parts = gpt2["token_embedding"] + gpt2["position_embedding"] + gpt2["blocks"] + gpt2["final_norm"]
    assert parts == gpt2["total"]


# ------------------------------------------------------------------ 7.1 深度实验


def test_mean_pairwise_cosine_is_one_for_identical_positions_and_zero_for_orthogonal():
    same = torch.ones(2, 4, 3)
    assert ds.mean_pairwise_cosine(same) == pytest.approx(1.0)
    assert ds.relative_spread(same) == pytest.approx(0.0, abs=1e-7)
    orthogonal = torch.eye(4).expand(2, 4, 4)
    assert ds.mean_pairwise_cosine(orthogonal) == pytest.approx(0.0, abs=1e-7)


def test_states_by_layer_reads_input_and_every_block_output():
    config = ds.DepthConfig(n_layers=3)
    model = ds.build_model("pre", config, seed=0).eval()
    tokens, _ = ds.make_batch(2, config, torch.Generator().manual_seed(0))
    states = ds.states_by_layer(model, tokens)
    assert len(states) == config.n_layers + 1
    x = model.tok_emb(tokens) + model.pos_emb(tokens.size(1))
    assert torch.allclose(states[0], x)
    mask = model.causal_mask[: tokens.size(1), : tokens.size(1)]
    with torch.no_grad():
        for block, before, after in zip(model.blocks, states[:-1], states[1:]):
            assert torch.allclose(block(before, mask=mask)[0], after, atol=1e-6)


def test_without_residual_all_positions_collapse_at_initialisation():
    config = ds.DepthConfig()
    tokens, _ = ds.make_batch(64, config, torch.Generator().manual_seed(1))
    cos = {}
    for variant in ds.VARIANTS:
        model = ds.build_model(variant, config, seed=0).eval()
        cos[variant] = ds.mean_pairwise_cosine(ds.states_by_layer(model, tokens)[-1])
    assert cos["pre_no_residual"] > 0.99
    assert max(cos["pre"], cos["post"]) < 0.5


def test_depth_targets_are_tokens_k_positions_back():
    config = ds.DepthConfig()
    tokens, targets = ds.make_batch(3, config, torch.Generator().manual_seed(0))
    assert torch.equal(targets[:, 5], tokens[:, 5])  # 位置 5 + k 的目标是 x_5
    assert targets.shape == (3, config.seq_len - config.offset)


def test_train_depth_variant_reports_windows_of_the_loss_curve():
    config = ds.DepthConfig(n_layers=2, steps=6, window=3, eval_sequences=8)
    run = ds.train_depth_variant("post", config)
    assert len(run.losses) == 6
    assert run.first_loss == pytest.approx(sum(run.losses[:3]) / 3)
    assert run.last_loss == pytest.approx(sum(run.losses[-3:]) / 3)
    assert 0.0 <= run.accuracy <= 1.0
    assert len(run.init_cosine_by_layer) == 3


# ------------------------------------------------------------------ 6.1 检索任务


def test_retrieval_targets_are_the_tokens_at_the_offsets():
    config = rt.RetrievalConfig()
    tokens, targets = rt.make_batch(4, config, torch.Generator().manual_seed(0))
    first = max(config.offsets)
    for i in range(config.seq_len - first):
        t = first + i
        for j, k in enumerate(config.offsets):
            assert torch.equal(targets[:, i, j], tokens[:, t - k])


@pytest.mark.parametrize("heads", [(1, 2, 3, 6)])
def test_parameter_count_does_not_depend_on_the_number_of_heads(heads):
    config = rt.RetrievalConfig()
    counts = {count_parameters(rt.build_model(h, config, seed=0)) for h in heads}
    assert len(counts) == 1


def test_retrieval_model_is_causal():
    config = rt.RetrievalConfig()
    model = rt.build_model(2, config, seed=0).eval()
    tokens, _ = rt.make_batch(2, config, torch.Generator().manual_seed(0))
    changed = tokens.clone()
    changed[:, -1] = (changed[:, -1] + 1) % config.vocab_size
    with torch.no_grad():
        assert torch.allclose(model(tokens)[:, :-1], model(changed)[:, :-1])


def test_attention_by_offset_is_a_share_of_each_heads_weight():
    config = rt.RetrievalConfig(eval_sequences=16)
    model = rt.build_model(3, config, seed=0)
    profile = rt.attention_by_offset(model, config, torch.Generator().manual_seed(0), max_offset=6)
    assert profile.shape == (3, 7)
    assert (profile >= 0).all() and (profile.sum(dim=1) <= 1 + 1e-6).all()


def test_guessing_the_dominant_token_gets_only_the_heaviest_target_right():
    config = rt.RetrievalConfig(eval_sequences=2000)
    acc = rt.dominant_token_accuracy([0.0, 1.0, 0.0], config, torch.Generator().manual_seed(0))
    assert acc[1] == 1.0
    assert acc[0] == pytest.approx(0.1, abs=0.02) and acc[2] == pytest.approx(0.1, abs=0.02)  # 只有碰巧相同时才对


def test_train_retrieval_is_deterministic_given_the_seed():
    config = rt.RetrievalConfig(steps=5, eval_sequences=16)
    a, b = rt.train_retrieval(2, 0, config), rt.train_retrieval(2, 0, config)
    assert a.target_accuracy == b.target_accuracy and a.final_loss == b.final_loss
    assert len(a.target_accuracy) == 3 and len(a.attention) == 2


# ------------------------------------------------------------------ 6.2 形状与 nn.MultiheadAttention


def test_trace_module_splits_heads_into_b_h_t_dh():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=12, n_heads=3)
    out, steps = trace_module(mha, torch.randn(2, 5, 12))
    assert out[0].shape == (2, 5, 12)
    shapes = [s.shapes[0] for s in steps]
    assert (2, 3, 5, 4) in shapes  # (B, h, T, d_h)
    assert (2, 3, 5, 5) in shapes  # (B, h, T, T)
    assert steps[0].name == "linear" and steps[0].shapes == ((2, 5, 36),)
    assert steps[-1].name == "linear" and steps[-1].shapes == ((2, 5, 12),)


def test_symbolic_shape_names_each_size():
    assert symbolic_shape((2, 3, 5, 4), {2: "B", 3: "h", 5: "T", 4: "d_h"}, brackets="()") == "(B, h, T, d_h)"
    assert symbolic_shape((7,), {}, brackets="()") == "(7)"


@pytest.mark.parametrize("causal", [False, True])
def test_our_multihead_attention_equals_torch_with_copied_weights(causal):
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=32, n_heads=4)
    mask = torch.ones(6, 6, dtype=torch.bool).tril() if causal else None
    out_diff, weight_diff = compare_with_torch_mha(mha, torch.randn(3, 6, 32), mask)
    assert out_diff < 1e-5 and weight_diff < 1e-6

