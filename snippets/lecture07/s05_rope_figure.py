"""第 5.4 节：二维情形下的 RoPE——位置每增加 1，向量就转过同一个角度 θ。

d_k = 2 时只有一对维度，θ = 10000⁰ = 1 弧度。左图：同一个查询放在位置 0…5；
右图：两组 (m, n) 的 m − n 相同，旋转之后查询与键的夹角相同，所以点积相同。
所有旋转都由参考实现的 ``apply_rope`` 完成。
"""

import numpy as np

from transformer_book.book import Claim, Figure, below
from transformer_book.plotting import new_figure
from transformer_book.lecture07.positions import rope_rotate

Q = np.array([1.0, 0.0])
K = 0.7 * np.array([np.cos(-1.2), np.sin(-1.2)])  # 长度 0.7、方向 −1.2 弧度
POSITIONS = [0, 1, 2, 3, 4, 5]
PAIRS = [(1, 0), (4, 3)]  # m − n 都是 1


def arrow(ax, tip, color, style="-"):
    ax.annotate("", xy=tip, xytext=(0, 0),
                arrowprops=dict(arrowstyle="-|>", color=color, lw=1.6, linestyle=style, shrinkA=0, shrinkB=0))


def compute():
    fig, (ax_left, ax_right) = new_figure(ncols=2, width=7.2, height=3.7)

    rotated = rope_rotate(Q, POSITIONS)  # (6, 2)：位置 m 处的查询
    colors = [f"C{i}" for i in range(len(POSITIONS))]
    for m, tip, color in zip(POSITIONS, rotated, colors):
        arrow(ax_left, tip, color)
        ax_left.text(*(1.27 * tip), f"m = {m}", ha="center", va="center", fontsize=9, color=color)
    ax_left.plot(rotated[:, 0], rotated[:, 1], "o", color="#888888", markersize=3)
    ax_left.set_title("同一个向量放在位置 0–5：每步转 1 弧度", fontsize=10)

    dots = []
    for (m, n), color, radius in zip(PAIRS, ["C0", "C3"], [0.25, 0.35]):
        q_m, k_n = rope_rotate(Q, [m])[0], rope_rotate(K, [n])[0]  # 各 (2,)
        dots.append(float(q_m @ k_n))
        a_k, a_q = np.arctan2(k_n[1], k_n[0]), np.arctan2(q_m[1], q_m[0])
        a_q = a_q if a_q >= a_k else a_q + 2 * np.pi  # 从键的方向逆时针量到查询的方向
        arc = np.linspace(a_k, a_q, 50)
        ax_right.plot(radius * np.cos(arc), radius * np.sin(arc), color=color, lw=1.0)
        arrow(ax_right, q_m, color)
        arrow(ax_right, k_n, color, style="--")
        ax_right.plot([q_m[0], k_n[0]], [q_m[1], k_n[1]], "o", color=color, markersize=3,
                      label=f"(m, n) = ({m}, {n})：点积 {dots[-1]:.3f}".replace("-", "−"))

    ax_right.set_title("实线：位置 m 的查询；虚线：位置 n 的键", fontsize=10)
    ax_right.legend(loc="lower left", fontsize=8)

    for ax in (ax_left, ax_right):
        circle = np.linspace(0, 2 * np.pi, 200)
        ax.plot(np.cos(circle), np.sin(circle), color="#dddddd", lw=0.8, zorder=0)
        ax.axhline(0, color="#cccccc", lw=0.6, zorder=0)
        ax.axvline(0, color="#cccccc", lw=0.6, zorder=0)
        ax.set(xlim=(-1.45, 1.45), ylim=(-1.45, 1.45), aspect="equal", xticks=[], yticks=[])
    return {
        "figure": Figure(fig, data={"dot_products": dots}),
        "same_dot_product": Claim("m − n 相同的两组，旋转后的点积相同", below(abs(dots[0] - dots[1]), 1e-6, name="两组点积之差")),
    }

