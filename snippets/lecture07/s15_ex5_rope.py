"""第 15 节练习 5：二维 RoPE，θ = π/6，用 ``apply_rope`` 把 q、k 转到各自的位置再求点积。

二维时只有一对维度，``apply_rope`` 的半分配对就是把 (a, b) 当成平面上的一个向量旋转 m·θ。
cos / sin 表按 θ = π/6 自己构造（``rope_tables`` 的频率固定为 10000^(−2i/d_h)，这里要的是练习给定的 θ）。
最后两行是补充：q 与 k 方向不同时，位置差 +1 与 −1 的分数不同。
"""

import math

import torch

from transformer_book.book import Claim, Table, Value, above, all_of, below
from transformer_book.transformer import apply_rope

THETA = math.pi / 6
CASES = [  # (情形, q, k, m, n)
    ("(a)", (1.0, 0.0), (1.0, 0.0), 2, 1),
    ("(b)", (1.0, 0.0), (1.0, 0.0), 5, 4),
    ("(c)", (1.0, 0.0), (1.0, 0.0), 1, 2),
    ("补充：k 换成 (0, 1)", (1.0, 0.0), (0.0, 1.0), 2, 1),
    ("补充：k 换成 (0, 1)", (1.0, 0.0), (0.0, 1.0), 1, 2),
]


def rotate(vector, position):
    """把二维向量转到位置 position（转过 position·θ）。"""
    angle = torch.full((1, 2), position * THETA, dtype=torch.float64)  # (T, d_h) = (1, 2)，两维共用一个角度
    x = torch.tensor([vector], dtype=torch.float64)  # (T, d_h) = (1, 2)
    return apply_rope(x, angle.cos(), angle.sin())[0]


def compute():
    rows = []
    for label, q, k, m, n in CASES:
        q_rot, k_rot = rotate(q, m), rotate(k, n)
        rows.append([label, m, n, *q_rot.tolist(), *k_rot.tolist(), float(q_rot @ k_rot)])
    a = rows[0]
    return {
        "abc_equal": Claim("(a)(b)(c) 三种情形的点积相同", all_of(*(below(abs(r[-1] - a[-1]), 1e-12, name=f"({'abc'[i]}) 与 (a) 之差") for i, r in enumerate(rows[:3]) if i > 0))),
        "sign_matters": Claim("q 与 k 方向不同时，位置差 +1 与 −1 的分数不同", above(abs(rows[3][-1] - rows[4][-1]), 0.5, name="两个分数之差")),

        "table": Table(
            columns=["情形", "$m$", "$n$", "$\\tilde q$ 第 1 维", "$\\tilde q$ 第 2 维", "$\\tilde k$ 第 1 维",
                     "$\\tilde k$ 第 2 维", "$\\tilde q \\cdot \\tilde k$"],
            rows=rows,
            formats=["", "d", "d", ".3f", ".3f", ".3f", ".3f", ".3f"],
        ),
        "q_rot_1": Value(a[3], ".1f"),
        "q_rot_2": Value(a[4], ".3f"),
        "k_rot_1": Value(a[5], ".3f"),
        "k_rot_2": Value(a[6], ".1f"),
        "half_product": Value(a[3] * a[5], ".3f"),
        "dot_a": Value(a[-1], ".3f"),
        "dot_b": Value(rows[1][-1], ".3f"),
        "dot_c": Value(rows[2][-1], ".3f"),
        "dot_ahead": Value(rows[3][-1], ".3f"),
        "dot_behind": Value(rows[4][-1], ".3f"),
    }
