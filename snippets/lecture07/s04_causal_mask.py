"""第 4.3 节：因果掩码。

沿用第 2.3 节 the cat sat down 的词向量和投影矩阵（同一个种子），加上因果掩码重算注意力权重；
然后把最后一个词的向量换成另一个随机向量，检查前面各位置的输出是否一点都不变。
"""

import numpy as np

from transformer_book.attention_numpy import causal_mask, self_attention
from transformer_book.book import Claim, Figure, Table, Value, above, at_most, below
from transformer_book.plotting import attention_heatmap, new_figure

WORDS = ["the", "cat", "sat", "down"]
D, D_K = 4, 3


def compute():
    rng = np.random.default_rng(0)  # 与第 2.3 节的片段相同的种子和抽取顺序
    X = rng.standard_normal((len(WORDS), D))  # (T, d) 词向量
    W_q, W_k, W_v = (rng.standard_normal((D, D_K)) for _ in range(3))  # (d, d_k)
    mask = causal_mask(len(WORDS))  # (T, T)，True = 可以关注
    trace = self_attention(X, W_q, W_k, W_v, mask=mask)

    X_changed = X.copy()
    X_changed[-1] = rng.standard_normal(D)  # 把最后一个词换成另一个词
    changed = self_attention(X_changed, W_q, W_k, W_v, mask=mask)
    earlier_diff = float(np.abs(trace.output[:-1] - changed.output[:-1]).max())
    last_diff = float(np.abs(trace.output[-1] - changed.output[-1]).max())
    unmasked = self_attention(X, W_q, W_k, W_v)
    masked_weight = float(np.abs(trace.weights[~mask]).max())
    last_row_diff = float(np.abs(trace.weights[-1] - unmasked.weights[-1]).max())

    def words_table(matrix, fmt):
        return Table(columns=["", *WORDS], rows=[[w, *row] for w, row in zip(WORDS, matrix)],
                     formats=["", *[fmt] * len(WORDS)])

    fig, (ax_all, ax_causal) = new_figure(ncols=2, width=7.2, height=3.4)
    attention_heatmap(ax_all, unmasked.weights, WORDS, WORDS, title="不加掩码")
    attention_heatmap(ax_causal, trace.weights, WORDS, WORDS, title="加上因果掩码")

    return {
        "heatmap": Figure(fig),
        "mask": words_table(mask.astype(int), "d"),
        "weights": words_table(trace.weights, ".3f"),
        "earlier_outputs_max_diff": Value(earlier_diff, ".1f"),
        "last_output_max_diff": Value(last_diff, ".3f"),
        "masked_weights_zero": Claim("被挡住的位置，权重恰好是 0", at_most(masked_weight, 0.0, name="被挡住位置的最大权重")),
        "last_row_unchanged": Claim("最后一行什么都看得见，与不加掩码时相同", below(last_row_diff, 1e-12, name="最大差")),
        "earlier_outputs_unchanged": Claim("换掉最后一个词，前三个位置的输出恰好不变", at_most(earlier_diff, 0.0, name="前三个位置的最大差")),
        "last_output_changes": Claim("最后一个位置自己的输出变了", above(last_diff, 1e-3, name="最后一个位置的最大差")),
    }

