"""第 2.3 节：用 4 个词（the cat sat down）、d = 4、d_k = d_v = 3 一步一步算自注意力。

参数是随机的（固定种子），所以权重没有语言学含义；这里要看的是每个矩阵的形状和数值怎样
一步步得到，并验证“逐词循环”和“矩阵一次算完”的结果一致。
"""

import numpy as np

from transformer_book.attention_numpy import self_attention, self_attention_loop
from transformer_book.book import Claim, Figure, Table, Value, below
from transformer_book.step_pictures import describe_query_path, query_path

WORDS = ["the", "cat", "sat", "down"]
D, D_K = 4, 3
SHOWN_QUERY = 2  # 步骤图画“sat”这个查询


def matrix_table(matrix, row_names, col_names, fmt=".3f"):
    """把一个矩阵变成表：每行以一个词开头。"""
    rows = [[name, *values] for name, values in zip(row_names, matrix)]
    return Table(columns=["", *col_names], rows=rows, formats=["", *[fmt] * len(col_names)])


def compute():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((len(WORDS), D))  # (T, d) 词向量
    W_q, W_k, W_v = (rng.standard_normal((D, D_K)) for _ in range(3))  # (d, d_k)
    trace = self_attention(X, W_q, W_k, W_v)
    looped = self_attention_loop(X, W_q, W_k, W_v)
    max_diff = float(np.abs(trace.output - looped).max())
    dims = [f"第 {i + 1} 维" for i in range(D_K)]
    i = SHOWN_QUERY
    raw = trace.K @ trace.Q[i]  # (T,)：查询 i 与每个键的点积
    steps = (WORDS, i, trace.Q[i], raw, trace.scores[i], trace.weights[i], trace.V, trace.output[i], D_K)
    picture = query_path(*steps)
    return {
        "query_path": Figure(picture, data={"q": trace.Q[i].tolist(), "dots": raw.tolist(),
                                            "scaled": trace.scores[i].tolist(), "weights": trace.weights[i].tolist(),
                                            "weighted": (trace.weights[i][:, None] * trace.V).tolist(),
                                            "output": trace.output[i].tolist()},
                             alt=describe_query_path(*steps)),  # 步骤图的文字版：每一步是什么、图上的每个数
        "queries": matrix_table(trace.Q, WORDS, dims),
        "scores": matrix_table(trace.scores, WORDS, WORDS),
        "weights": matrix_table(trace.weights, WORDS, WORDS),
        "outputs": matrix_table(trace.output, WORDS, dims),
        "loop_matrix_max_diff": Value(max_diff, ".1e", kind="rounding"),  # 浮点舍入：取决于求和顺序
        "loop_equals_matrix": Claim("逐词循环与矩阵形式只差浮点舍入（最大差小于 10⁻¹²）", below(max_diff, 1e-12, name="最大差")),

    }
