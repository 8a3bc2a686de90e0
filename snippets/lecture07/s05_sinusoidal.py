"""第 5.2 节：d = 16 的正弦位置编码——前几个位置的数值，以及位置 0–49 的热图。

编码表来自参考实现的 ``sinusoidal_encoding``：第 2s 维是 sin(p·ω_s)，第 2s+1 维是 cos(p·ω_s)，
ω_s = 10000^(−2s/d)。一对维度转一整圈需要 2π/ω_s 个位置（“周期”）。
"""

import math

import numpy as np

from transformer_book.book import Claim, Figure, Table, Value, above, all_of, at_most, below
from transformer_book.plotting import new_figure
from transformer_book.lecture07.positions import frequencies, sinusoidal_table

D = 16
SHOWN_POSITIONS = [0, 1, 2, 3, 4, 5]
HEATMAP_LENGTH = 50


def compute():
    pe = sinusoidal_table(HEATMAP_LENGTH, D)  # (50, d)
    omega = frequencies(D)  # (d/2,)
    rows = []
    for dim in range(D):
        w = omega[dim // 2]
        rows.append([dim, "sin" if dim % 2 == 0 else "cos", w, 2 * math.pi / w, *pe[SHOWN_POSITIONS, dim]])
    table = Table(
        columns=["维度", "函数", "角速度 ω", "周期（位置数）", *[f"$p = {p}$" for p in SHOWN_POSITIONS]],
        rows=rows,
        formats=["d", "", ".3g", ",.1f", *[".3f"] * len(SHOWN_POSITIONS)],
    )

    fig, ax = new_figure(width=6.4, height=4.2)
    image = ax.imshow(pe, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax.set(xlabel="维度", ylabel="位置 p", xticks=range(0, D, 2))
    fig.colorbar(image, ax=ax, label="编码值")

    last_two = pe[:, -2:]  # 最后一对维度在 50 个位置内的取值
    return {
        "bounded": Claim("所有值都落在 [−1, 1] 之内", at_most(float(np.abs(pe).max()), 1.0, name="最大绝对值")),
        "last_pair_still": Claim("最后一对维度在 50 个位置之内几乎不动（正弦的绝对值小于 0.02，余弦大于 0.999）",
                                 all_of(below(float(np.abs(last_two[:, 0]).max()), 0.02, name="正弦的最大绝对值"),
                                        above(float(last_two[:, 1].min()), 0.999, name="余弦的最小值"))),

        "table": table,
        "heatmap": Figure(fig),
        "fastest_period": Value(2 * math.pi / omega[0], ".1f"),
        "slowest_period": Value(2 * math.pi / omega[-1], ",.0f"),
        "last_sin_max": Value(np.abs(last_two[:, 0]).max(), ".4f"),
        "last_cos_min": Value(last_two[:, 1].min(), ".5f"),
    }
