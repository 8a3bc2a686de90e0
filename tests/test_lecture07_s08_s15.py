"""第 7 讲第 8、9、10、15 节的断言：计算量公式（``transformer_book.cost``）与练习 1、5、6、7 的数值答案。

讲义印出的确定性数值（注意力占比 2.7 % … 93.4 %、练习的参考答案）按印出的精度逐个比较：
先用库函数算，再把页面上显示这些数的片段跑一遍，确认读者看到的就是它们。
"""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from transformer_book.cost import (
    attention_share,
    counted_block_flops,
    crossover_length,
    layer_flops,
    score_matrix_bytes,
)
from transformer_book.transformer import TransformerLM, block_parameters, count_parameters, warmup_cosine

SNIPPETS = Path(__file__).resolve().parents[1] / "snippets" / "lecture07"

# 讲义第 10.1 节（代码 01 演示 6，d = 768）印出的注意力矩阵计算占比
SEED_SHARES_D768 = {128: "2.7%", 512: "10.0%", 1024: "18.2%", 4096: "47.1%", 16384: "78.0%", 65536: "93.4%"}


def run_snippet(name: str) -> dict:
    """导入 snippets/lecture07/<name>.py 并调用它的 compute()，返回结果字典。"""
    spec = importlib.util.spec_from_file_location(f"test_snippet_{name}", SNIPPETS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute()


# ------------------------------------------------------------------ 第 10 节：计算量


@pytest.mark.parametrize("n, printed", SEED_SHARES_D768.items())
def test_attention_share_at_d768_equals_the_lectures_percentages(n, printed):
    assert f"{attention_share(n, 768):.1%}" == printed


def test_attention_share_table_on_the_page_shows_the_lectures_percentages():
    table = run_snippet("s10_attention_share")["table"]
    shown = {row[0]: f"{row[3]:.1%}" for row in table.rows}
    assert sorted(shown) == [2**k for k in range(7, 17)]
    for n, printed in SEED_SHARES_D768.items():
        assert shown[n] == printed


@pytest.mark.parametrize("n, d", [(1, 1), (128, 768), (1000, 64), (65536, 4096)])
def test_layer_flops_are_4nd2_plus_8nd2_plus_2n2d_and_the_share_is_n_over_n_plus_6d(n, d):
    f = layer_flops(n, d)
    assert (f.projections, f.ffn, f.attention_matrix) == (4 * n * d * d, 8 * n * d * d, 2 * n * n * d)
    assert f.total == 12 * n * d * d + 2 * n * n * d
    assert math.isclose(f.attention_share, n / (n + 6 * d), rel_tol=1e-12)


@pytest.mark.parametrize("d", [64, 768, 4096])
def test_attention_matrix_equals_the_rest_at_n_equal_6d(d):
    n = crossover_length(d)
    assert n == 6 * d
    f = layer_flops(n, d)
    assert f.attention_matrix == f.linear
    assert attention_share(n - 1, d) < 0.5 < attention_share(n + 1, d)


@pytest.mark.parametrize(
    "n, d, heads", [(16, 64, 4), (128, 768, 12), (1024, 768, 12), (65536, 768, 12), (300, 256, 8)]
)
def test_the_formula_counts_exactly_the_matrix_multiplications_of_our_block(n, d, heads):
    """FlopCounterMode 数出的 TransformerBlock 前向乘加次数 = 12nd²（线性层）+ 2n²d（QKᵀ 与 AV）。"""
    f = layer_flops(n, d)
    assert counted_block_flops(n, d, heads) == {"linear": f.linear, "attention_matrix": f.attention_matrix}


def test_one_float32_score_matrix_at_65536_tokens_takes_16_gib():
    assert score_matrix_bytes(65536) == 16 * 2**30
    assert score_matrix_bytes(1024) == 4 * 2**20


def test_layer_flops_rejects_empty_sizes():
    with pytest.raises(ValueError, match="T ≥ 1"):
        layer_flops(0, 768)


# ------------------------------------------------------------------ 第 8、9 节


def test_weight_tying_saves_v_times_d_which_is_38_6_million_for_gpt2_small():
    """讲义：共享省下 Vd 个参数，GPT-2 small 里是 3860 万个。"""
    results = run_snippet("s08_weight_tying")
    assert results["gpt2_saved"].value == 50257 * 768
    assert f"{results['gpt2_saved_wan'].value:.0f}" == "3860"
    small = results["table"].rows[0]
    assert small[1] == "是" and small[2] - small[3] == 30 * 64


def test_tied_model_shares_one_parameter_and_counts_it_once():
    torch.manual_seed(0)
    config = dict(vocab_size=30, d_model=16, n_heads=2, n_layers=1, max_len=8)
    tied, untied = TransformerLM(**config), TransformerLM(tie_weights=False, **config)
    assert tied.head.weight is tied.tok_emb.weight
    assert count_parameters(untied) - count_parameters(tied) == 30 * 16


def test_encoder_position_0_sees_the_future_and_decoder_position_0_does_not():
    rows = run_snippet("s08_visibility")["table"].rows
    verdicts = [row[-1] for row in rows]
    assert verdicts == ["看得到", "看不到", "看得到", "看不到"]


def test_schedule_figure_uses_the_section_11_step_count_and_halves_at_the_middle():
    results = run_snippet("s09_schedule")
    total = results["total_steps"].value
    assert total == 8 * math.ceil(20_000 / 64)
    assert results["lr_middle_milli"].value == pytest.approx(1.5)
    assert warmup_cosine(total, warmup_steps=200, total_steps=total, max_lr=3e-3) == 0.0


# ------------------------------------------------------------------ 第 15 节：练习的参考答案


def test_exercise_1_scores_weights_and_outputs_match_the_reference_answer():
    r = run_snippet("s15_ex1_attention")
    rows = r["table"].rows
    fmt = lambda row: [f"{x:.3f}" for x in row[1:]]  # noqa: E731
    assert fmt(rows[0]) == ["0.707", "0.707", "0.500", "0.500", "0.500", "0.500"]
    assert fmt(rows[1]) == ["0.707", "-0.707", "0.804", "0.196", "0.804", "0.196"]
    assert f"{r['score_gap'].value:.3f}" == "1.414"
    # 讲义的化简：第 2 行的权重 = 1 / (1 + e^(−1.414))
    assert f"{1 / (1 + math.exp(-math.sqrt(2))):.3f}" == "0.804"


def test_exercise_5_rope_dot_product_depends_only_on_the_offset():
    r = run_snippet("s15_ex5_rope")
    a, b, c, ahead, behind = r["table"].rows
    assert [f"{x:.3f}" for x in a[3:]] == ["0.500", "0.866", "0.866", "0.500", "0.866"]
    assert f"{r['half_product'].value:.3f}" == "0.433"
    for row in (b, c):
        assert f"{row[-1]:.3f}" == "0.866"
    assert math.isclose(a[-1], math.cos(math.pi / 6), rel_tol=1e-12)
    # 方向不同的 q、k：位置差 +1 与 −1 的打分是 ±sin(π/6)，RoPE 能分清前后
    assert math.isclose(ahead[-1], 0.5, abs_tol=1e-12) and math.isclose(behind[-1], -0.5, abs_tol=1e-12)


def test_exercise_6_parameter_estimate_matches_the_reference_answer():
    per_block = block_parameters(4096).total
    assert per_block == 12 * 4096**2 + 13 * 4096
    # 讲义写作 “≈ 2.013 × 10⁸”：是截断，不是四舍五入（201,379,840 四舍五入到三位小数是 2.014）
    assert math.floor(per_block / 1e5) / 1e3 == 2.013
    r = run_snippet("s15_ex6_parameters")
    assert f"{r['per_block_e8'].value:.2f}" == "2.01"
    assert f"{r['blocks_e9'].value:.2f}" == "6.44"
    assert f"{r['embedding_e8'].value:.2f}" == "1.31"
    assert f"{r['embeddings_e8'].value:.2f}" == "2.62"
    assert f"{r['total_e9'].value:.1f}" == "6.7"
    assert f"{r['total_yi'].value:.0f}" == "67"


def test_exercise_7_crossover_at_6d_and_84_percent_at_128k():
    r = run_snippet("s15_ex7_flops")
    assert r["crossover"].value == 24576
    assert f"{r['ratio'].value:.2f}" == "5.33"
    assert f"{r['ratio_plus_one'].value:.2f}" == "6.33"
    assert f"{r['share'].value:.0%}" == "84%"
    assert f"{attention_share(131072, 4096):.0%}" == "84%"
