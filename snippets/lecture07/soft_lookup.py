"""第 2.1 节：注意力是“软的”字典查找。

三个键 (1,0)、(0,1)、(0.7,0.7) 对应的值是 10、20、30。三个查询各自与键做点积（不缩放），
softmax 成权重，输出值的加权平均。
"""

import numpy as np

from transformer_book.attention_numpy import soft_lookup
from transformer_book.book import Table, Value

KEYS = np.array([[1.0, 0.0], [0.0, 1.0], [0.7, 0.7]])
VALUES = np.array([10.0, 20.0, 30.0])
QUERIES = [(10.0, 0.0), (1.0, 0.0), (0.5, 0.5)]


def compute():
    rows = []
    for q in QUERIES:
        weights, output = soft_lookup(np.array(q), KEYS, VALUES)
        rows.append([f"$({q[0]:g}, {q[1]:g})$", *weights, output])
    first_weights, first_output = soft_lookup(np.array(QUERIES[0]), KEYS, VALUES)
    return {
        "lookup": Table(
            columns=["查询", "键 1 的权重", "键 2 的权重", "键 3 的权重", "输出"],
            rows=rows,
            formats={"键 1 的权重": ".3f", "键 2 的权重": ".3f", "键 3 的权重": ".3f", "输出": ".2f"},
        ),
        "long_query_top_weight": Value(first_weights[0], ".3f"),
        "long_query_output": Value(first_output, ".2f"),
    }
