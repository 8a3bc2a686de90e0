"""第 15 节练习 1：两个词的自注意力，手算的每一步用代码再算一遍。

位置从 0 数起：q₀ = (1, 0)，q₁ = (0, 1)；k₀ = (1, 1)，k₁ = (1, −1)；v₀ = (1, 0)，v₁ = (0, 1)；d_k = 2。
"""

import numpy as np

from transformer_book.attention_numpy import attention
from transformer_book.book import Table, Value

Q = np.array([[1.0, 0.0], [0.0, 1.0]])
K = np.array([[1.0, 1.0], [1.0, -1.0]])
V = np.array([[1.0, 0.0], [0.0, 1.0]])


def compute():
    output, weights, scores = attention(Q, K, V)  # 分数已除以 √d_k
    rows = [[f"$q_{i}$", *scores[i], *weights[i], *output[i]] for i in range(2)]
    return {
        "table": Table(
            columns=["查询", "对 $k_0$ 的分数", "对 $k_1$ 的分数", "$k_0$ 的权重", "$k_1$ 的权重", "输出第 1 维", "输出第 2 维"],
            rows=rows,
            formats=["", ".3f", ".3f", ".3f", ".3f", ".3f", ".3f"],
        ),
        "scaled_score": Value(scores[0, 0], ".3f"),
        "score_gap": Value(scores[1, 0] - scores[1, 1], ".3f"),
        "w1_row1": Value(weights[0, 0], ".1f"),
        "w1_row2": Value(weights[1, 0], ".3f"),
        "w2_row2": Value(weights[1, 1], ".3f"),
        "o1_first": Value(output[0, 0], ".1f"),
        "o1_second": Value(output[0, 1], ".1f"),
        "o2_first": Value(output[1, 0], ".3f"),
        "o2_second": Value(output[1, 1], ".3f"),
    }
