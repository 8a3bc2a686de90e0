"""第 6.2 节与第 20 章的多头注意力步骤图（snippets/lecture07/s06_heads_picture.py）画的是真实的数据流。

常见的误解是“输入 X 按列切成 h 份，各交给一个头”。实际上每个头都用自己的 W^Q_r（d × d_h）读入整个 X；
按列切开的是投影之后的 Q、K、V（``in_proj`` 之后再 ``view``）。这里直接导入片段、调用它的 compute()
（不需要构建整本书），检查图上画的与记录的：

- X 画成一整块（T × d），外面只有一圈框，没有按头着色的分段；
- Q、K、V 各画成 h 块、每块 d_h 列、描着第 r 个头的颜色，第 r 块等于 X 乘 W^Q 的第 r 个列块；
- 各头的输出按列拼起来正是“拼接”那一块，再乘 W^O 就是输出；
- 每种量一个颜色刻度（X；Q、K、V 及以下；权重 0 到 1），各配一根颜色条；权重的数值写在格里；
- 两幅步骤图的文字版说出了每一步和关键的数。
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.patches import Rectangle

from transformer_book.step_pictures import HEAD_COLORS, INK

SNIPPETS = Path(__file__).resolve().parents[1] / "snippets" / "lecture07"


def load_snippet(name: str):
    """导入 snippets/lecture07/<name>.py，返回模块。"""
    spec = importlib.util.spec_from_file_location(f"test_snippet_{name}", SNIPPETS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def snippet():
    return load_snippet("s06_heads_picture")


@pytest.fixture(scope="module")
def result(snippet):
    return snippet.compute()


@pytest.fixture(scope="module")
def data(result):
    d = result["picture"].data
    for key in ("X", "Q", "K", "V", "weights", "head_outputs", "concat", "output"):
        assert key in d, f"图的数据里没有 {key}：图上画的每一个矩阵都要按名字记录"
    return {k: (np.asarray(v, float) if k not in ("tokens", "d_h") else v) for k, v in d.items()}


@pytest.fixture(scope="module")
def drawn(result):
    """图的主坐标轴上画的东西：每个色块（数组、范围、颜色刻度）、每个框（范围、颜色）、每段字。"""
    fig = result["picture"].figure
    assert fig is not None, "compute() 返回的 Figure 应当还带着 matplotlib 的图"
    ax = fig.axes[0]
    images = [(np.asarray(im.get_array(), float), tuple(im.get_extent()), (im.norm.vmin, im.norm.vmax))
              for im in ax.get_images()]
    frames = [((p.get_x(), p.get_x() + p.get_width(), p.get_y(), p.get_y() + p.get_height()), to_hex(p.get_edgecolor()))
              for p in ax.patches if isinstance(p, Rectangle) and not p.get_fill()]
    texts = [t.get_text() for t in ax.texts]
    return {"fig": fig, "images": images, "frames": frames, "texts": texts}


def images_showing(drawn, matrix) -> list:
    m = np.asarray(matrix, float)
    return [im for im in drawn["images"] if im[0].shape == m.shape and np.allclose(im[0], m, rtol=0, atol=1e-12)]


def same_extent(a, b) -> bool:
    return np.allclose(a, b, atol=1e-9)


def inside(inner, outer) -> bool:
    (x0, x1, y0, y1), (X0, X1, Y0, Y1) = inner, outer
    return X0 - 1e-9 <= x0 and x1 <= X1 + 1e-9 and Y0 - 1e-9 <= y0 and y1 <= Y1 + 1e-9


def test_every_drawn_matrix_is_recorded_with_its_shape(snippet, data):
    T, d, h = snippet.T, snippet.D, snippet.H
    d_h = d // h
    assert data["tokens"] == ["the", "cat", "sat", "down"] and data["d_h"] == d_h
    for key in ("X", "Q", "K", "V", "concat", "output"):
        assert data[key].shape == (T, d), key
    assert data["weights"].shape == (h, T, T)
    assert data["head_outputs"].shape == (h, T, d_h)
    assert np.allclose(data["weights"].sum(axis=-1), 1.0)


def test_x_is_drawn_as_one_undivided_block(snippet, data, drawn):
    T, d = data["X"].shape
    shown = images_showing(drawn, data["X"])
    assert len(shown) == 1, "X 应当画成一整块（T × d），且只画一次"
    extent = shown[0][1]
    for array, _, _ in drawn["images"]:  # X 的任何一段列都不单独画出来
        if array.shape[0] == T and array.shape[1] < d:
            for start in range(d - array.shape[1] + 1):
                assert not np.allclose(array, data["X"][:, start:start + array.shape[1]]), "X 被切成几段画了出来"
    around = [(e, c) for e, c in drawn["frames"] if inside(e, extent)]
    assert len(around) == 1 and same_extent(around[0][0], extent), "X 外面只有一圈框，没有分段"
    assert around[0][1] == to_hex(INK), "X 的框不用头的颜色：它整块交给每一个头"
    assert not any(c in {to_hex(k) for k in HEAD_COLORS} for e, c in drawn["frames"] if inside(e, extent))


def test_q_k_v_are_split_into_h_blocks_each_equal_to_x_times_that_heads_own_projection(snippet, data, drawn, result):
    mha, x = snippet.build()
    X = x[0].numpy()
    assert np.array_equal(data["X"], X)
    d, h = snippet.D, snippet.H
    d_h = d // h
    W = mha.in_proj.weight.detach().numpy().T  # (d, 3d)：[W^Q, W^K, W^V]
    for n, name in enumerate("QKV"):
        W_n = W[:, n * d:(n + 1) * d]  # (d, d)
        assert np.allclose(data[name], X @ W_n, rtol=0, atol=1e-12), f"{name} = X W^{name}"
        assert not images_showing(drawn, data[name]), f"{name} 应当按头切开来画，而不是一整块"
        for r in range(h):
            own = X @ W_n[:, r * d_h:(r + 1) * d_h]  # (T, d_h)：第 r 个头用自己的 W_r 读入整个 X
            block = data[name][:, r * d_h:(r + 1) * d_h]
            assert np.allclose(block, own, rtol=0, atol=1e-12), f"{name} 的第 {r + 1} 块 ≠ X W^{name}_{r + 1}"
            shown = images_showing(drawn, own)
            assert len(shown) == 1, f"{name} 的第 {r + 1} 块（{own.shape[0]} × {d_h}）应当单独画成一块"
            framed = [c for e, c in drawn["frames"] if same_extent(e, shown[0][1])]
            assert to_hex(HEAD_COLORS[r]) in framed, f"{name} 的第 {r + 1} 块描着第 {r + 1} 个头的颜色"
    claim = result["heads_read_all_of_x"]
    assert claim.check.op == "below" and claim.check.holds


def test_the_head_outputs_concatenate_to_the_concat_block_and_w_o_gives_the_output(snippet, data, drawn, result):
    mha, _ = snippet.build()
    assert np.array_equal(np.concatenate(list(data["head_outputs"]), axis=1), data["concat"])
    W_O = mha.out_proj.weight.detach().numpy().T  # (d, d)
    assert np.allclose(data["concat"] @ W_O, data["output"], rtol=0, atol=1e-12)
    for r, out in enumerate(data["head_outputs"]):
        assert len(images_showing(drawn, out)) == 1, f"第 {r + 1} 个头的输出画成一块"
    for key in ("concat", "output"):
        assert len(images_showing(drawn, data[key])) == 1, f"{key} 画成一整块"
    assert result["concat_then_project"].check.holds


def test_one_colour_scale_per_kind_of_quantity_each_with_a_colour_bar(data, drawn):
    def scale(matrix):
        (shown,) = images_showing(drawn, matrix)
        return shown[2]

    d_h = data["d_h"]
    x_scale = scale(data["X"])
    assert x_scale[0] == -x_scale[1] and x_scale[1] >= np.abs(data["X"]).max()
    later = [data[n][:, r * d_h:(r + 1) * d_h] for n in "QKV" for r in range(data["weights"].shape[0])]
    later += [*data["head_outputs"], data["concat"], data["output"]]
    scales = {scale(m) for m in later}
    assert len(scales) == 1, "Q、K、V、各头输出、拼接、输出共用一个颜色刻度：同一个数在哪一块里颜色都一样"
    (shared,) = scales
    assert shared[0] == -shared[1] and shared[1] >= max(np.abs(m).max() for m in later)
    assert {scale(w) for w in data["weights"]} == {(0.0, 1.0)}
    every_axes = [*drawn["fig"].axes, *(c for a in drawn["fig"].axes for c in a.child_axes)]  # 颜色条是插入的小坐标轴
    bars = [a for a in every_axes if getattr(a, "_colorbar", None) is not None]
    assert len(bars) == 3, "三个颜色刻度，各配一根颜色条"


def test_the_weights_and_the_words_are_written_on_the_figure(data, drawn):
    texts = drawn["texts"]
    for w in data["weights"]:
        for value in w.ravel():
            assert f"{value:.2f}" in texts, f"权重 {value:.2f} 没写在格里"
    for token in data["tokens"]:
        assert texts.count(token) >= 2, f"{token}：每个矩阵的行、权重的列都标着词"


def test_the_text_alternative_of_the_multihead_picture_names_each_step_and_its_numbers(data, result):
    alt = result["picture"].alt  # the figure's text alternative (the page's <img alt>)
    assert isinstance(alt, str) and alt
    for words in ("整块", "W^Q_r", "按列拼接", "W^O", "4 × 8", "4 × 4", *data["tokens"]):
        assert words in alt, words
    for w in data["weights"]:
        for row in w:
            assert f"{row.max():.2f}" in alt  # 每一行最大的权重


def test_the_text_alternative_of_the_query_picture_holds_every_number_it_shows():
    result = load_snippet("cat_sat_down").compute()
    alt = result["query_path"].alt
    shown = result["query_path"].data
    for key in ("dots", "scaled", "weights", "output", "q"):
        for value in shown[key]:
            text = f"{value:.2f}"
            text = text.lstrip("-") if float(text) == 0 else text.replace("-", "−")  # 图上的写法：负号用 −
            assert text in alt, (key, text)
