"""第 4.1 节：不加位置信息的自注意力是置换等变的。

“dog bites man” 和 “man bites dog” 用同一组词向量和同一组投影矩阵（固定种子的随机数，d = 4，
d_k = d_v = 3）各做一次自注意力，比较同一个词在两句里的输出；再给每个位置加上正弦位置向量，重做一遍。
"""

import numpy as np

from transformer_book.book import Claim, Table, Value, above, below
from transformer_book.lecture07.positions import outputs_by_word, sinusoidal_table

WORDS = ["dog", "bites", "man"]
SENTENCE_A = ["dog", "bites", "man"]
SENTENCE_B = ["man", "bites", "dog"]
D, D_K = 4, 3


def compute():
    rng = np.random.default_rng(0)
    embeddings = {w: rng.standard_normal(D) for w in WORDS}  # 每个词一个 (d,) 向量
    W_q, W_k, W_v = (rng.standard_normal((D, D_K)) for _ in range(3))  # (d, d_k)
    positions = sinusoidal_table(len(WORDS), D)  # (T, d)：位置 0、1、2 的向量

    plain = [outputs_by_word(s, embeddings, W_q, W_k, W_v) for s in (SENTENCE_A, SENTENCE_B)]
    with_pos = [outputs_by_word(s, embeddings, W_q, W_k, W_v, positions) for s in (SENTENCE_A, SENTENCE_B)]

    def diff(outs, w):  # 同一个词在两句里的输出之差
        return float(np.abs(outs[0][w] - outs[1][w]).max())

    vector_rows = []
    for w in WORDS:
        for sentence, outs in zip((SENTENCE_A, SENTENCE_B), plain):
            vector_rows.append([w, " ".join(sentence), *outs[w]])
    diff_rows = [[w, diff(plain, w), diff(with_pos, w)] for w in WORDS]

    max_diff_plain = max(r[1] for r in diff_rows)
    min_diff_with_pos = min(r[2] for r in diff_rows)
    dims = [f"第 {i + 1} 维" for i in range(D_K)]
    return {
        "vectors": Table(columns=["词", "句子", *dims], rows=vector_rows, formats=["", "", *[".4f"] * D_K]),
        "differences": Table(
            columns=["词", "不加位置：两句输出的最大差", "加位置向量：两句输出的最大差"],
            rows=diff_rows,
            formats=["", ".1e", ".3f"], kinds={"不加位置：两句输出的最大差": "rounding"},  # 只是舍入误差
        ),
        "max_diff_plain": Value(max_diff_plain, ".1e", kind="rounding"),
        "same_without_positions": Claim("不加位置时，同一个词在两句里的输出只差浮点舍入（小于 10⁻¹²）",
                                        below(max_diff_plain, 1e-12, name="最大差")),
        "different_with_positions": Claim("加上位置向量之后，每个词的输出都随句子改变（差都大于 0.01）",
                                          above(min_diff_with_pos, 1e-2, name="最小差")),

        "dog_diff_with_pos": Value(diff(with_pos, "dog"), ".3f"),
    }
