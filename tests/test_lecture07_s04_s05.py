"""第 7 讲第 4–5 节的断言：置换等变、因果掩码、正弦编码的相对位置性质、可学习位置表的上限、RoPE。

每个测试对应书中的一句话；“det” 的数（正弦编码的点积、RoPE 演示的打分）必须与讲义印出的值在印出的精度上相同。
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest

from transformer_book.attention_numpy import causal_mask, self_attention
from transformer_book.diagrams import Box, draw_skip, draw_stack, finish_diagram, new_diagram
from transformer_book.lecture07.positions import (
    added_pe_scores,
    frequencies,
    half_split_to_interleaved,
    outputs_by_word,
    pe_dot_product_formula,
    pe_dot_products,
    pe_shift_matrix,
    pe_shift_max_error,
    rope_interleaved,
    rope_norms,
    rope_rotate,
    rope_scores,
    sinusoidal_table,
)
from transformer_book.transformer import LearnedPositionEmbedding

RNG_SEED = 0


# ------------------------------------------------------------------ 第 4 节


def _dog_bites_man(seed=RNG_SEED):
    rng = np.random.default_rng(seed)
    emb = {w: rng.standard_normal(4) for w in ("dog", "bites", "man")}
    W = [rng.standard_normal((4, 3)) for _ in range(3)]
    return emb, W


def test_without_positions_dog_bites_man_and_man_bites_dog_give_each_word_the_same_output():
    emb, W = _dog_bites_man()
    a = outputs_by_word(["dog", "bites", "man"], emb, *W)
    b = outputs_by_word(["man", "bites", "dog"], emb, *W)
    for w in a:
        np.testing.assert_allclose(a[w], b[w], atol=1e-12)


def test_with_position_vectors_the_output_of_dog_depends_on_where_it_stands():
    emb, W = _dog_bites_man()
    pe = sinusoidal_table(3, 4)
    a = outputs_by_word(["dog", "bites", "man"], emb, *W, positions=pe)
    b = outputs_by_word(["man", "bites", "dog"], emb, *W, positions=pe)
    assert np.abs(a["dog"] - b["dog"]).max() > 0.1


def test_causal_mask_changing_the_last_word_leaves_every_earlier_output_exactly_unchanged():
    rng = np.random.default_rng(RNG_SEED)
    X = rng.standard_normal((5, 4))
    W = [rng.standard_normal((4, 3)) for _ in range(3)]
    mask = causal_mask(5)
    before = self_attention(X, *W, mask=mask)
    X[-1] = rng.standard_normal(4)
    after = self_attention(X, *W, mask=mask)
    assert np.array_equal(before.output[:-1], after.output[:-1])
    assert np.all(before.weights[np.triu_indices(5, k=1)] == 0.0)


# ------------------------------------------------------------------ 第 4.4 节的示意图


@pytest.mark.parametrize("direction", ["up", "down"])
def test_draw_stack_places_boxes_in_data_flow_order_and_skip_arrows_fit(direction):
    fig, ax = new_diagram(width=4.0)
    layout = draw_stack(ax, [Box("输入", kind="text"), Box("注意力", color="attention"), Box("前馈网络", note="说明")],
                        direction=direction, repeat=[(1, 2, "× N")])
    draw_skip(ax, layout, 1, 1)
    finish_diagram(ax)
    ys = [c[1] for c in layout.centers]
    assert ys == sorted(ys, reverse=(direction == "down"))
    assert layout.top(1)[1] - layout.bottom(1)[1] == pytest.approx(layout.height)
    with pytest.raises(ValueError, match="direction"):
        draw_stack(ax, [Box("x")], direction="sideways")


# ------------------------------------------------------------------ 第 5.2 节：正弦位置编码

# 讲义第 5.2 节（d = 64）印出的点积，保留 1 位小数
LECTURE_DOTS = {0: "32.0", 1: "30.9", 2: "28.3", 4: "23.9", 8: "22.4", 16: "19.4", 32: "19.6", 64: "13.9"}


@pytest.mark.parametrize("start", [0, 20, 100])
def test_sinusoidal_dot_products_equal_the_lectures_values_for_every_start(start):
    dots = pe_dot_products(64, list(LECTURE_DOTS), [start])[0]
    assert [f"{x:.1f}" for x in dots] == list(LECTURE_DOTS.values())


def test_sinusoidal_dot_product_equals_the_sum_of_cosines_of_k_omega():
    for k in LECTURE_DOTS:
        assert pe_dot_products(64, [k], [37])[0, 0] == pytest.approx(pe_dot_product_formula(64, k), abs=1e-4)


def test_shifting_by_k_positions_is_the_same_matrix_m_k_for_every_position():
    assert pe_shift_max_error(64, [1, 3, 10, 50], range(200)) < 1e-4
    M = pe_shift_matrix(5, 16)
    np.testing.assert_allclose(M @ M.T, np.eye(16), atol=1e-12)  # 旋转块：正交
    np.testing.assert_allclose(pe_shift_matrix(2, 16), pe_shift_matrix(1, 16) @ pe_shift_matrix(1, 16), atol=1e-12)


def test_fastest_pair_turns_once_in_about_six_positions_and_all_values_are_bounded():
    assert 2 * np.pi / frequencies(16)[0] == pytest.approx(6.283, abs=1e-3)
    assert np.abs(sinusoidal_table(1000, 16)).max() <= 1.0


# ------------------------------------------------------------------ 第 5.3 节


def test_learned_table_beyond_l_max_raises_a_message_naming_the_limit():
    table = LearnedPositionEmbedding(max_len=512, d_model=16)
    with pytest.raises(ValueError, match=r"L_max = 512.*请求的长度是 513"):
        table(513)


# ------------------------------------------------------------------ 第 5.4 节：RoPE

PAIRS = [(5, 2), (10, 7), (100, 97), (5, 5), (50, 50), (2, 5), (60, 63)]


def _qk():
    rng = np.random.default_rng(RNG_SEED)
    return rng.standard_normal(8), rng.standard_normal(8)


def test_rope_demo_scores_equal_the_lectures_values():
    """讲义演示用的也是 default_rng(0) 的两个 8 维向量：两行打分与讲义印出的值（3 位小数）相同。"""
    q, k = _qk()
    assert [f"{x:.3f}" for x in rope_scores(q, k, PAIRS)] == ["-3.724"] * 3 + ["-1.468"] * 2 + ["-3.823"] * 2
    assert [f"{x:.3f}" for x in added_pe_scores(q, k, PAIRS)] == [
        "1.177", "2.000", "-2.135", "3.041", "0.331", "0.829", "0.842"]
    assert [f"{x:.4f}" for x in rope_norms(q, [0, 1, 10, 100, 1000])] == ["1.8627"] * 5


def test_rope_score_depends_only_on_m_minus_n_and_added_pe_score_does_not():
    q, k = _qk()
    rope, added = rope_scores(q, k, PAIRS), added_pe_scores(q, k, PAIRS)
    for group in ([0, 1, 2], [3, 4], [5, 6]):
        assert np.ptp(rope[group]) < 1e-4
        assert np.ptp(added[group]) > 1e-3


def test_rope_rotation_preserves_the_norm():
    q, _ = _qk()
    np.testing.assert_allclose(rope_norms(q, [0, 1, 10, 100, 1000]), np.linalg.norm(q), atol=1e-5)


def test_half_split_and_interleaved_pairing_differ_only_by_the_order_of_dimensions():
    q, k = _qk()
    perm = half_split_to_interleaved(8)
    assert sorted(perm) == list(range(8))
    np.testing.assert_allclose(rope_interleaved(q[perm], [0, 7, 300]), rope_rotate(q, [0, 7, 300])[:, perm], atol=1e-4)
    np.testing.assert_allclose(rope_scores(q[perm], k[perm], PAIRS, interleaved=True), rope_scores(q, k, PAIRS), atol=1e-4)


def test_rope_in_two_dimensions_turns_the_vector_by_one_radian_per_position():
    turned = rope_rotate(np.array([1.0, 0.0]), [0, 1, 2])
    np.testing.assert_allclose(turned, [[1, 0], [np.cos(1), np.sin(1)], [np.cos(2), np.sin(2)]], atol=1e-6)
