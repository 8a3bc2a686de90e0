"""把注意力的每一步画成图，图上写的是书里算出来的数（第 2.3 节、第 6 节与第 20 章的“步骤图”）。

- :func:`query_path`：一个查询走过的全部步骤——与每个键做点积、除以 √d_k、softmax 成权重、
  按权重把值向量加起来。每个键占一列，每一步占一行，从上往下读；
- :func:`multihead_flow`：多头注意力的数据流——输入按列切成 h 份，每个头各算一张 T × T 的权重，
  各头的输出拼回 T × d，再乘 W^O。每一块都是真实的矩阵（颜色 = 数值），旁边写着形状。

两幅图都画得窄而高，手机屏幕上（375 像素宽）缩小后字仍然看得清。图上的每个数都由调用者传入
（片段把它们同时放进 ``Figure(data=…)``，于是和表格一样被记录、核对）。
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from matplotlib.patches import FancyArrowPatch, Rectangle

from transformer_book.plotting import new_figure

INK = "#222222"
SOFT = "#666666"
HEAD_COLORS = ["#e6550d", "#3182bd", "#31a354", "#756bb1"]  # 第 r 个头的颜色（多头图里）


def _num(x: float) -> str:
    text = f"{x:.2f}"
    if text == "-0.00":  # 舍入成 0 的负数不带负号
        return "0.00"
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
    fs = 10
    vec = "(" + ", ".join(_num(x) for x in q) + ")"
    ax.text(-1.5, 1.25, f"查询：位置 {i} 的词「{words[i]}」", fontsize=fs + 1, color=INK, va="center")
    ax.text(-1.5, 0.6, f"q = {vec}，与每个位置的键 kⱼ 比较", fontsize=fs, color=INK, va="center")
    for j, w in enumerate(words):  # 每个键一列
        ax.text(j, -0.15, f"位置 {j}\n「{w}」", ha="center", va="center", fontsize=fs, color=INK)
    rows = [(-1.2, "① 点积\nq·kⱼ", raw), (-2.3, f"② 除以 √{d_k}", scaled)]
    for y, label, values in rows:
        ax.text(-1.5, y, label, fontsize=fs - 1, color=SOFT, va="center")
        for j, x in enumerate(values):
            ax.text(j, y, _num(x), ha="center", va="center", fontsize=fs, color=INK)
    _arrow(ax, -0.95, -1.55, -0.95, -1.95)
    # ③ softmax：每列一根竖条，高度就是权重（记录在图的数据里）
    ax.text(-1.5, -3.6, "③ softmax\n权重 αⱼ", fontsize=fs - 1, color=SOFT, va="center")
    base, height = -4.5, 1.7
    ax.bar(range(T), weights * height, bottom=base, width=0.55, color="#6baed6", edgecolor="#2171b5")
    for j, a in enumerate(weights):
        ax.text(j, base + a * height + 0.15, _num(a), ha="center", va="bottom", fontsize=fs, color=INK)
    _arrow(ax, -0.95, -2.65, -0.95, -3.05)
    # ④ 每个值向量乘上自己的权重
    ax.text(-1.5, -6.1, "④ αⱼ·vⱼ", fontsize=fs - 1, color=SOFT, va="center")
    for j in range(T):
        for c in range(d_v):
            ax.text(j, -5.2 - 0.55 * c, _num(weights[j] * V[j, c]), ha="center", va="center", fontsize=fs - 1,
                    color=INK)
        ax.add_patch(Rectangle((j - 0.38, -5.2 - 0.55 * (d_v - 1) - 0.3), 0.76, 0.55 * (d_v - 1) + 0.6,
                               fill=False, edgecolor="#bbbbbb", lw=0.8))
    _arrow(ax, -0.95, -4.75, -0.95, -5.05)
    # ⑤ 加起来就是输出
    y = -5.2 - 0.55 * d_v - 0.7
    ax.text(-1.5, y, "⑤ 相加", fontsize=fs - 1, color=SOFT, va="center")
    _arrow(ax, (T - 1) / 2, y + 0.45, (T - 1) / 2, y + 0.1)
    ax.text((T - 1) / 2, y - 0.2, f"o = ({', '.join(_num(x) for x in output)})", ha="center", va="center",
            fontsize=fs + 1, color=INK)
    ax.text(-1.5, y - 1.1, f"{T} 个权重加起来是 1；o 就是输出矩阵里「{words[i]}」那一行。", fontsize=fs - 2,
            color=SOFT, va="center")
    ax.set_ylim(y - 1.5, 1.6)
    return fig


def _block(ax, x: float, y: float, matrix: np.ndarray, cell: float, *, cmap: str = "RdBu_r",
           vmax: float | None = None, split: Sequence[int] = (), colors: Sequence[str] = ()) -> tuple[float, float]:
    """在 (x, y)（左上角）画一个矩阵：每格的颜色是它的值。返回宽和高。``split`` 给出竖向分隔线所在的列，
    ``colors`` 给每一段描上边框颜色（多头图里每个头一种颜色）。"""
    rows, cols = matrix.shape
    w, h = cols * cell, rows * cell
    vmax = vmax if vmax is not None else float(np.abs(matrix).max()) or 1.0
    ax.imshow(matrix, cmap=cmap, vmin=-vmax if cmap == "RdBu_r" else 0.0, vmax=vmax,
              extent=(x, x + w, y - h, y), interpolation="nearest", zorder=1)
    edges = [0, *split, cols]
    for k, (a, b) in enumerate(zip(edges, edges[1:])):
        color = colors[k] if k < len(colors) else INK
        ax.add_patch(Rectangle((x + a * cell, y - h), (b - a) * cell, h, fill=False, edgecolor=color, lw=1.6, zorder=2))
    return w, h


def multihead_flow(X: np.ndarray, head_weights: Sequence[np.ndarray], head_outputs: Sequence[np.ndarray],
                   concat: np.ndarray, output: np.ndarray):
    """多头注意力的数据流，返回 matplotlib 的 Figure。

    Parameters
    ----------
    X : array (T, d)
        输入，每行一个位置。
    head_weights : h 个 array (T, T)
        每个头的注意力权重。
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
    fig, ax = new_figure(width=4.8, height=8.0)
    ax.set_axis_off()
    cell, small = 0.32, 0.27
    fs = 10
    colors = HEAD_COLORS[:h]
    width = d * cell
    slot = width / h

    def label(y: float, *lines: str) -> float:
        for k, line in enumerate(lines):
            ax.text(0.0, y - 0.27 * k, line, fontsize=fs if k == 0 else fs - 1, color=INK if k == 0 else SOFT,
                    va="top")
        return y - 0.27 * len(lines) - 0.08

    y = label(0.0, f"① 输入 X：T × d = {T} × {d}", f"按列切成 {h} 份，每份 dₕ = d / h = {d_h} 列")
    _block(ax, 0.0, y, X, cell, split=[d_h * r for r in range(1, h)], colors=colors)
    y -= T * cell + 0.35
    y = label(y, f"② 每个头 r：Qᵣ、Kᵣ、Vᵣ 各 {T} × {d_h}", f"权重 softmax(Qᵣ Kᵣᵀ / √dₕ)：{T} × {T}")
    for r, w in enumerate(head_weights):
        x0 = r * slot + (slot - T * small) / 2
        ax.text(x0 + T * small / 2, y, f"头 {r + 1}", ha="center", va="top", fontsize=fs, color=colors[r])
        _block(ax, x0, y - 0.32, w, small, cmap="Blues", vmax=1.0, colors=[colors[r]])
    y -= 0.32 + T * small + 0.35
    y = label(y, f"③ 每个头的输出 = 权重 × Vᵣ：{T} × {d_h}")
    for r, o in enumerate(head_outputs):
        x0 = r * slot + (slot - d_h * small) / 2
        _block(ax, x0, y, o, small, colors=[colors[r]])
    y -= T * small + 0.35
    y = label(y, f"④ 按列拼接：T × (h·dₕ) = {T} × {d}")
    _block(ax, 0.0, y, concat, cell, split=[d_h * r for r in range(1, h)], colors=colors)
    y -= T * cell + 0.35
    y = label(y, f"⑤ 乘输出投影 Wᴼ（{d} × {d}）：{T} × {d}", "各头的结果在这里混合")
    _block(ax, 0.0, y, output, cell)
    y -= T * cell
    right = max(width, 4.1)
    ax.set_xlim(-0.05, right)
    ax.set_ylim(y - 0.1, 0.15)
    ax.set_aspect("equal")
    fig.set_figheight(4.8 * (0.25 - y) / (right + 0.05))
    return fig
