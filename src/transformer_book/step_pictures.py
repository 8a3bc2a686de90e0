"""把注意力的每一步画成图，图上写的是书里算出来的数（第 2.3 节、第 6 节与第 20 章的“步骤图”）。

- :func:`query_path`：一个查询走过的全部步骤——与每个键做点积、除以 √d_k、softmax 成权重、
  按权重把值向量加起来。每个键占一列，每一步占一行，从上往下读；
- :func:`multihead_flow`：多头注意力的数据流——输入 X 整块交给每个头；投影出的 Q、K、V 按列切成 h 块，
  第 r 块就是第 r 个头用自己的 W^Q_r 读入整个 X 的结果；每个头各算一张 T × T 的权重，各头的输出拼回
  T × d，再乘 W^O。每一块都是真实的矩阵，格里写着数值，同一种量共用一个颜色刻度，旁边写着形状。

两幅图都画得窄而高，手机屏幕上（375 像素宽）缩小后字仍然看得清。图上的每个数都由调用者传入
（片段把它们同时放进 ``Figure(data=…)``，于是和表格一样被记录、核对）。
:func:`describe_multihead`、:func:`describe_query_path` 给出两幅图的文字版：每一步是什么、形状和关键的数。
"""

from __future__ import annotations

import re
from typing import Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.font_manager import FontProperties
from matplotlib.patches import FancyArrowPatch, Rectangle
from matplotlib.textpath import text_to_path

from transformer_book.plotting import new_figure

INK = "#222222"
SOFT = "#666666"
HEAD_COLORS = ["#e6550d", "#3182bd", "#31a354", "#756bb1"]  # 第 r 个头的颜色（多头图里）
_MIN_FONT = 10.5  # pt：图宽 4.8 英寸、在手机上缩到约 326 像素宽时，10.5 磅约 9.5 像素——图上最小的字


def _num(x: float, fmt: str = ".2f") -> str:
    text = format(x, fmt)
    if float(text) == 0.0:  # 舍入成 0 的负数不带负号
        return text.lstrip("-")
    return text.replace("-", "−") if text.startswith("-") else text


def _arrow(ax, x0: float, y0: float, x1: float, y1: float) -> None:
    ax.add_patch(FancyArrowPatch((x0, y0), (x1, y1), arrowstyle="-|>", mutation_scale=10, color=SOFT, lw=1.0,
                                 shrinkA=0, shrinkB=0))


def query_path(words: Sequence[str], i: int, q: np.ndarray, raw: np.ndarray, scaled: np.ndarray,
               weights: np.ndarray, V: np.ndarray, output: np.ndarray, d_k: int):
    """第 i 个词的查询走过自注意力的每一步，返回 matplotlib 的 Figure。

    Parameters
    ----------
    words : 长度 T 的字符串序列
        每个位置的词（也是每个键的名字）。
    i : int
        画哪一个查询（从 0 数起）。
    q : array (d_k,)
        这个查询向量。
    raw, scaled, weights : array (T,)
        它与每个键的点积 q·k_j、除以 √d_k 之后的分数、softmax 之后的权重 α_j。
    V : array (T, d_v)
        值向量，每行一个词。
    output : array (d_v,)
        输出 o_i = Σ_j α_j v_j。
    d_k : int
        键的维数（标题里写出 √d_k）。
    """
    T, d_v = V.shape
    fig, ax = new_figure(width=4.8, height=6.6)
    ax.set_axis_off()
    ax.set_xlim(-1.55, T - 0.4)
    ax.set_ylim(-10.2, 1.6)
    fs, small = 11, _MIN_FONT  # 数字 11 磅；旁注 10.5 磅：手机上缩到约 326 像素宽时仍不小于 9.5 像素
    vec = "(" + ", ".join(_num(x) for x in q) + ")"
    ax.text(-1.5, 1.25, f"查询：位置 {i} 的词「{words[i]}」", fontsize=fs + 1, color=INK, va="center")
    ax.text(-1.5, 0.6, f"q = {vec}，与每个位置的键 kⱼ 比较", fontsize=fs, color=INK, va="center")
    for j, w in enumerate(words):  # 每个键一列
        ax.text(j, -0.15, f"位置 {j}\n「{w}」", ha="center", va="center", fontsize=fs, color=INK)
    rows = [(-1.2, "① 点积\nq·kⱼ", raw), (-2.3, f"② 除以 √{d_k}", scaled)]
    for y, label, values in rows:
        ax.text(-1.5, y, label, fontsize=small, color=SOFT, va="center")
        for j, x in enumerate(values):
            ax.text(j, y, _num(x), ha="center", va="center", fontsize=fs, color=INK)
    _arrow(ax, -0.95, -1.55, -0.95, -1.95)
    # ③ softmax：每列一根竖条，高度就是权重（记录在图的数据里）
    ax.text(-1.5, -3.6, "③ softmax\n权重 αⱼ", fontsize=small, color=SOFT, va="center")
    base, height = -4.5, 1.7
    ax.bar(range(T), weights * height, bottom=base, width=0.55, color="#6baed6", edgecolor="#2171b5")
    for j, a in enumerate(weights):
        ax.text(j, base + a * height + 0.15, _num(a), ha="center", va="bottom", fontsize=fs, color=INK)
    _arrow(ax, -0.95, -2.65, -0.95, -3.05)
    # ④ 每个值向量乘上自己的权重
    ax.text(-1.5, -6.1, "④ αⱼ·vⱼ", fontsize=small, color=SOFT, va="center")
    for j in range(T):
        for c in range(d_v):
            ax.text(j, -5.2 - 0.55 * c, _num(weights[j] * V[j, c]), ha="center", va="center", fontsize=small,
                    color=INK)
        ax.add_patch(Rectangle((j - 0.38, -5.2 - 0.55 * (d_v - 1) - 0.3), 0.76, 0.55 * (d_v - 1) + 0.6,
                               fill=False, edgecolor="#bbbbbb", lw=0.8))
    _arrow(ax, -0.95, -4.75, -0.95, -5.05)
    # ⑤ 加起来就是输出
    y = -5.2 - 0.55 * d_v - 0.7
    ax.text(-1.5, y, "⑤ 相加", fontsize=small, color=SOFT, va="center")
    _arrow(ax, (T - 1) / 2, y + 0.45, (T - 1) / 2, y + 0.1)
    ax.text((T - 1) / 2, y - 0.2, f"o = ({', '.join(_num(x) for x in output)})", ha="center", va="center",
            fontsize=fs + 1, color=INK)
    ax.text(-1.5, y - 1.1, f"{T} 个权重加起来是 1；o 就是输出矩阵里「{words[i]}」那一行。", fontsize=small,
            color=SOFT, va="center")
    ax.set_ylim(y - 1.5, 1.6)
    return fig


def _pieces(text: str) -> list[str]:
    """把一行字拆成普通文字和 ``$…$`` 公式两种片段（公式用 mathtext 排，汉字不能进公式）。"""
    return [p for p in re.split(r"(\$[^$]+\$)", text) if p]


def _line(ax, x: float, y: float, text: str, *, size: float = _MIN_FONT, color: str = INK, ha: str = "left") -> float:
    """在 (x, y)（基线）写一行可以夹着 ``$…$`` 公式的字，返回这一行的宽度（英寸）。

    汉字和公式分成几段文字依次排开：每段量出宽度，下一段接在后面。坐标以英寸为单位
    （见 :func:`multihead_flow`），宽度按字形的轮廓量（与 SVG 里画出的一样，不受屏幕像素取整的影响），
    单位是磅，除以 72 就是前进的距离。"""
    prop = FontProperties(size=size)
    space = 0.25 * size / 72  # 片段两头的空格换成四分之一个字宽
    texts, width = [], 0.0
    for piece in _pieces(text):
        math = piece.startswith("$")
        if not math and piece.startswith(" "):
            width += space
        if not math and piece.strip(" "):
            t = ax.text(x + width, y, piece.strip(" "), fontsize=size, color=color, va="baseline", ha="left")
        elif math:
            t = ax.text(x + width, y, piece, fontsize=size, color=color, va="baseline", ha="left")
        else:
            continue
        texts.append(t)
        width += text_to_path.get_text_width_height_descent(t.get_text(), prop, ismath=math)[0] / 72
        if not math and piece.endswith(" "):
            width += space
    if ha == "center":  # 整行居中：各段一起往左挪半个行宽
        for t in texts:
            t.set_x(t.get_position()[0] - width / 2)
    return width


def _cell_text_color(rgba) -> str:
    r, g, b = rgba[:3]
    return "white" if 0.299 * r + 0.587 * g + 0.114 * b < 0.5 else INK


def _matrix(ax, x: float, top: float, matrix: np.ndarray, cw: float, ch: float, *, cmap, norm, fmt: str,
            frame: str, size: float = _MIN_FONT) -> None:
    """以 (x, top) 为左上角画一个矩阵：每格的颜色由 ``norm``、``cmap`` 决定（同一种量用同一个刻度），
    格里写上数值，外面描一圈 ``frame`` 颜色的框。"""
    rows, cols = matrix.shape
    ax.imshow(matrix, cmap=cmap, norm=norm, extent=(x, x + cols * cw, top - rows * ch, top), aspect="auto",
              interpolation="nearest", zorder=1)
    for i in range(rows):
        for j in range(cols):
            v = float(matrix[i, j])
            ax.text(x + (j + 0.5) * cw, top - (i + 0.5) * ch, _num(v, fmt), ha="center", va="center", fontsize=size,
                    color=_cell_text_color(cmap(norm(v))), zorder=3)
    ax.add_patch(Rectangle((x, top - rows * ch), cols * cw, rows * ch, fill=False, edgecolor=frame, lw=1.8, zorder=4))


def _colorbar(ax, x: float, y: float, width: float, cmap, norm, ticks: Sequence[float], fmt: str,
              label: str) -> float:
    """在 (x, y)（上沿）画一根横放的颜色条，刻度写在下面、``label`` 写在右边；返回它连同刻度占的高度（英寸）。"""
    fig = ax.figure
    height = 0.11
    _line(ax, x + width + 0.12, y - height / 2 - 0.35 * _MIN_FONT / 72, label, color=SOFT)
    cax = ax.inset_axes((x, y - height, width, height), transform=ax.transData)
    bar = fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), cax=cax, orientation="horizontal")
    bar.set_ticks(list(ticks), labels=[_num(t, fmt) for t in ticks])
    bar.ax.tick_params(labelsize=_MIN_FONT, length=3, pad=2, colors=INK)
    bar.outline.set_linewidth(0.6)
    return height + 0.24


def multihead_flow(tokens: Sequence[str], X: np.ndarray, Q: np.ndarray, K: np.ndarray, V: np.ndarray,
                   head_weights: Sequence[np.ndarray], head_outputs: Sequence[np.ndarray], concat: np.ndarray,
                   output: np.ndarray):
    """多头注意力的数据流，返回 matplotlib 的 Figure。

    从上往下：① 输入 X，整块不切；② 投影出 Q、K、V，再把它们的列按头切开——第 r 块就是第 r 个头
    用自己的 W^Q_r 读入整个 X 的结果；③ 每个头的权重；④ 每个头的输出；⑤ 按列拼接；⑥ 乘 W^O。
    每格写着数值。颜色刻度按量的种类只有三个，各配一根颜色条：X 一个；Q、K、V 以及之后的头输出、
    拼接、输出共用一个（同一个数在哪一块里都是同一种颜色）；权重一个（0 到 1）。

    Parameters
    ----------
    tokens : 长度 T 的字符串序列
        每个位置的词（每一行的名字，也是权重矩阵每一列的名字）。
    X : array (T, d)
        输入，每行一个位置。
    Q, K, V : array (T, d)
        X 乘 W^Q、W^K、W^V 的结果，还没有按头切开。
    head_weights : h 个 array (T, T)
        每个头的注意力权重（行是查询，列是键）。
    head_outputs : h 个 array (T, d_h)
        每个头的输出（权重乘这个头的值）。
    concat : array (T, d)
        各头输出按列拼接。
    output : array (T, d)
        乘以 W^O 之后的输出。
    """
    T, d = X.shape
    h = len(head_weights)
    d_h = d // h
    colors = HEAD_COLORS[:h]
    width = 4.8  # 英寸；坐标轴铺满整张图、x 与 y 都以英寸为单位，字号（磅）和位置可以直接对照
    left, gap = 0.62, 0.14  # 左边一栏写词；切开的各块之间留一道缝
    cw = (width - left - gap * (h - 1) - 0.04) / d  # 每格宽
    ch = 0.28  # 每格高
    line, big = 0.25, 11.5  # 一行字的高度；步骤标题的字号
    fig, ax = new_figure(width=width, height=10.0)
    fig.set_layout_engine("none")
    ax.set_position((0.0, 0.0, 1.0, 1.0))
    ax.set_axis_off()
    real = plt.get_cmap("RdBu_r")
    blues = plt.get_cmap("Blues")
    x_max = float(np.abs(X).max())
    later = [Q, K, V, *head_outputs, concat, output]
    p_max = float(max(np.abs(m).max() for m in later))
    x_norm, p_norm, w_norm = Normalize(-x_max, x_max), Normalize(-p_max, p_max), Normalize(0.0, 1.0)
    real_fmt = ".1f"  # 4 × 8 的矩阵格子窄，实数写一位小数；权重写两位

    def head_x(r: int) -> float:  # 第 r 个头（从 0 数）那一块的左边
        return left + r * (d_h * cw + gap)

    def row_labels(top: float) -> None:
        for i, tok in enumerate(tokens):
            ax.text(left - 0.08, top - (i + 0.5) * ch, tok, ha="right", va="center", fontsize=_MIN_FONT, color=INK)

    def text(y: float, s: str, *, size: float = _MIN_FONT, color: str = SOFT, x: float = 0.0) -> float:
        _line(ax, x, y - size / 72, s, size=size, color=color)
        return y - line * size / _MIN_FONT

    def split(top: float, matrices: Sequence[np.ndarray], captions: Sequence[str]) -> float:
        """h 块（各 T × d_h）并排、各描一圈头的颜色，上面写每块的名字；用 Q、K、V 及以下共用的颜色刻度。
        返回下一处的 y。"""
        for r, m in enumerate(matrices):
            _line(ax, head_x(r) + d_h * cw / 2, top - _MIN_FONT / 72, captions[r], color=colors[r], ha="center")
            _matrix(ax, head_x(r), top - line, m, cw, ch, cmap=real, norm=p_norm, fmt=real_fmt, frame=colors[r])
        row_labels(top - line)
        return top - line - T * ch - 0.14

    y = -0.04
    # ① 输入：整块，不切
    y = text(y, f"① 输入 $X$：{T} × {d}，每行一个位置上的词", size=big, color=INK)
    y = text(y, "整块交给每一个头，不按列切开")
    y -= 0.04
    row_labels(y)
    _matrix(ax, left, y, X, cw, ch, cmap=real, norm=x_norm, fmt=real_fmt, frame=INK)
    y -= T * ch + 0.1
    y -= _colorbar(ax, left, y, 2.0, real, x_norm, (-x_max, 0.0, x_max), real_fmt, "$X$ 的颜色刻度") + 0.14
    # ② 投影，再把 Q、K、V 的列按头切开
    y = text(y, "② 投影：$Q = XW^Q$，$K = XW^K$，$V = XW^V$", size=big, color=INK)
    y = text(y, f"三个 $W$ 都是 {d} × {d}，$Q$、$K$、$V$ 各 {T} × {d}，每一格都用到 $X$ 的一整行")
    y = text(y, "$Q$ 的列按头切开 = 每个头用自己的 $W^Q_r$ 读入整个 $X$", color=INK)
    y = text(y, f"$W^Q_r$ 是 $W^Q$ 的第 $r$ 个列块（{d} × {d_h}）；$K$、$V$ 同样切开")
    y -= 0.06
    for name, M in (("Q", Q), ("K", K), ("V", V)):
        blocks = [M[:, r * d_h:(r + 1) * d_h] for r in range(h)]
        head = [f"头 {r + 1}：" if name == "Q" else "" for r in range(h)]  # 第一行写明颜色是哪个头
        captions = [f"{head[r]}${name}_{r + 1} = XW^{name}_{r + 1}$" for r in range(h)]
        y = split(y, blocks, captions)
    y -= _colorbar(ax, left, y + 0.04, 2.0, real, p_norm, (-p_max, 0.0, p_max), real_fmt,
                   "$Q$、$K$、$V$ 及以下各块的刻度") + 0.1
    # ③ 每个头的权重
    y = text(y, r"③ 每个头的权重 $\mathrm{softmax}(Q_r K_r^{\top} / \sqrt{d_h})$", size=big, color=INK)
    y = text(y, f"{T} × {T}：行是查询、列是键，每行加起来是 1")
    y -= 0.04
    for r in range(h):
        _line(ax, head_x(r) + d_h * cw / 2, y - _MIN_FONT / 72, f"头 {r + 1}", color=colors[r], ha="center")
    y -= line
    for r in range(h):  # 列名：键所在位置的词
        for j, tok in enumerate(tokens):
            ax.text(head_x(r) + (j + 0.5) * (d_h * cw / T), y - 0.02, tok, ha="center", va="top", fontsize=_MIN_FONT,
                    color=SOFT)
    y -= line
    row_labels(y)
    for r, w in enumerate(head_weights):
        _matrix(ax, head_x(r), y, w, d_h * cw / T, ch, cmap=blues, norm=w_norm, fmt=".2f", frame=colors[r])
    y -= T * ch + 0.1
    y -= _colorbar(ax, left, y, 2.0, blues, w_norm, (0.0, 0.5, 1.0), ".1f", "权重的颜色刻度") + 0.14
    # ④ 每个头的输出
    y = text(y, f"④ 每个头的输出 $\\mathrm{{head}}_r$ = 权重 × $V_r$：{T} × {d_h}", size=big, color=INK)
    y = split(y, head_outputs, [f"$\\mathrm{{head}}_{r + 1}$" for r in range(h)])
    # ⑤ 按列拼接
    y = text(y, f"⑤ 按列拼接：{T} × ({h}·{d_h}) = {T} × {d}", size=big, color=INK)
    y = text(y, "数值不变，各头的输出并排放")
    y -= 0.04
    row_labels(y)
    _matrix(ax, left, y, concat, cw, ch, cmap=real, norm=p_norm, fmt=real_fmt, frame=INK)
    for r in range(h):
        ax.add_patch(Rectangle((left + r * d_h * cw, y - T * ch), d_h * cw, T * ch, fill=False, edgecolor=colors[r],
                               lw=1.8, zorder=5))
    y -= T * ch + 0.14
    # ⑥ 输出投影
    y = text(y, f"⑥ 乘输出投影 $W^O$（{d} × {d}）：{T} × {d}", size=big, color=INK)
    y = text(y, "各头的结果在这里混合")
    y -= 0.04
    row_labels(y)
    _matrix(ax, left, y, output, cw, ch, cmap=real, norm=p_norm, fmt=real_fmt, frame=INK)
    y -= T * ch + 0.06
    ax.set_xlim(0.0, width)
    ax.set_ylim(y, 0.0)
    fig.set_size_inches(width, -y)
    return fig


def _vector(values) -> str:
    return "(" + ", ".join(_num(float(v)) for v in values) + ")"


def describe_multihead(tokens: Sequence[str], X: np.ndarray, Q: np.ndarray, K: np.ndarray, V: np.ndarray,
                       head_weights: Sequence[np.ndarray], head_outputs: Sequence[np.ndarray], concat: np.ndarray,
                       output: np.ndarray) -> str:
    """:func:`multihead_flow` 那幅图的文字版（给读屏软件和看不到图的读者）：每一步是什么、形状，以及关键的数。

    参数与 :func:`multihead_flow` 相同。权重只说每一行最大的那一个（查询 → 键，权重）。"""
    T, d = X.shape
    h = len(head_weights)
    d_h = d // h
    x_max = float(np.abs(X).max())
    p_max = float(max(np.abs(m).max() for m in [Q, K, V, *head_outputs, concat, output]))
    parts = [
        f"多头注意力的数据流，一次真实的计算：T = {T} 个位置上的词（{'、'.join(tokens)}），d = {d}，h = {h}，"
        f"每个头宽 d_h = d / h = {d_h}。",
        f"① 输入 X：{T} × {d}，每行一个位置上的词；整块交给每一个头，不按列切开。",
        f"② 投影：Q = XW^Q，K = XW^K，V = XW^V，三个 W 都是 {d} × {d}，Q、K、V 各 {T} × {d}。"
        f"再把 Q、K、V 的列按头切成 {h} 块，每块 {d_h} 列：第 r 块正是第 r 个头用自己的 W^Q_r"
        f"（W^Q 的第 r 个列块，{d} × {d_h}）读入整个 X 的结果，K、V 也一样。",
        f"③ 每个头算一张 {T} × {T} 的权重 softmax(Q_r K_rᵀ / √d_h)，行是查询、列是键，每行加起来是 1。"
        "每一行最大的权重：",
    ]
    for r, w in enumerate(head_weights):
        best = [f"{tokens[i]} → {tokens[int(np.argmax(w[i]))]}（{_num(float(np.max(w[i])))}）" for i in range(T)]
        parts.append(f"头 {r + 1}：" + "，".join(best) + ("；" if r < h - 1 else "。"))
    parts += [
        f"④ 每个头的输出 head_r = 权重 × V_r，{T} × {d_h}。",
        f"⑤ {h} 个头的输出按列拼接成 {T} × {d}，数值不变。",
        f"⑥ 乘输出投影 W^O（{d} × {d}），得到 {T} × {d} 的输出；各头的结果在这里混合。",
        f"每一格都写着数值（权重两位小数，其余一位）。颜色刻度三个：X 从 {_num(-x_max, '.1f')} 到 {_num(x_max, '.1f')}；"
        f"Q、K、V 及以下各块共用一个，从 {_num(-p_max, '.1f')} 到 {_num(p_max, '.1f')}；权重从 0 到 1。",
    ]
    return "".join(parts)


def describe_query_path(words: Sequence[str], i: int, q: np.ndarray, raw: np.ndarray, scaled: np.ndarray,
                        weights: np.ndarray, V: np.ndarray, output: np.ndarray, d_k: int) -> str:
    """:func:`query_path` 那幅图的文字版：每一步是什么，以及图上的每个数（参数与 :func:`query_path` 相同）。"""
    T = len(words)
    each = lambda values: "，".join(f"{w} {_num(float(v))}" for w, v in zip(words, values))  # noqa: E731
    weighted = "，".join(f"{w} {_vector(weights[j] * V[j])}" for j, w in enumerate(words))
    return "".join([
        f"一个查询走过自注意力的每一步：位置 {i}（从 0 数起）的词「{words[i]}」，查询 q = {_vector(q)}，"
        f"依次与 {T} 个位置的键 k_j 比较。",
        f"① 点积 q·k_j：{each(raw)}。",
        f"② 除以 √{d_k}：{each(scaled)}。",
        f"③ softmax 成权重 α_j（画成竖条，{T} 个权重加起来是 1）：{each(weights)}。",
        f"④ 每个值向量乘上自己的权重，α_j·v_j：{weighted}。",
        f"⑤ 相加得到输出 o = {_vector(output)}，就是输出矩阵里「{words[i]}」那一行。",
    ])
