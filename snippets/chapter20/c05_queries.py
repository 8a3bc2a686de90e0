"""第 20 章第四步：一个注意力头在 4 个词元上的形状追踪。

模型宽度 d = 8，一个头的查询、键、值宽度都是 4。输入和三个投影矩阵是固定种子下的随机数
（没有训练过，数值本身没有含义）；表中的形状全部从计算出来的张量上读取，打分与加权求和
用的是参考实现里的 ``scaled_dot_product_attention``。
"""

import math

import torch

from transformer_book.book import Claim, Table, Value, below
from transformer_book.transformer import scaled_dot_product_attention

TOKENS = "春风又绿"
D_MODEL, D_K = 8, 4


def shape(t):
    return " × ".join(str(n) for n in t.shape)


def compute():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(len(TOKENS), D_MODEL, generator=g)  # (T, d)：暂时不管批次
    W_q, W_k, W_v = (torch.randn(D_MODEL, D_K, generator=g) / math.sqrt(D_MODEL) for _ in range(3))  # (d, d_k)
    Q, K, V = X @ W_q, X @ W_k, X @ W_v  # 各 (T, d_k)
    S = Q @ K.T / math.sqrt(D_K)  # (T, T)
    A = torch.softmax(S, dim=-1)  # (T, T)，每行和为 1
    out = A @ V  # (T, d_k)
    ref_out, ref_weights = scaled_dot_product_attention(Q, K, V)
    ref_diff = max((out - ref_out).abs().max().item(), (A - ref_weights).abs().max().item())  # 输出与权重的最大差
    row_sums = A.sum(dim=-1)
    row_error = float((row_sums - 1).abs().max())

    rows = [
        ["$X$", shape(X), "4 个位置，每个位置一个 8 维向量"],
        ["$Q = XW^Q$", shape(Q), "每个位置的查询：它在找什么"],
        ["$K = XW^K$", shape(K), "每个位置的键：它能怎样被匹配"],
        ["$V = XW^V$", shape(V), "每个位置的值：被选中时交出什么"],
        [r"$S = QK^\top / \sqrt{d_k}$", shape(S), "第 $i$ 行第 $j$ 列：位置 $i$ 的查询与位置 $j$ 的键有多契合"],
        [r"$A = \operatorname{softmax}(S)$", shape(A), "每行一组权重，和为 1"],
        ["$AV$", shape(out), "每个位置按权重汇总来的信息"],
    ]
    return {
        "trace": Table(columns=["张量", "形状", "含义"], rows=rows),
        "weights": Table(columns=["查询 \\ 被查看", *TOKENS], rows=[[q, *row] for q, row in zip(TOKENS, A.tolist())],
                         formats=["", *[".3f"] * len(TOKENS)]),
        "score_entries": Value(S.numel(), "d"),
        "rows_sum_to_one": Claim("权重矩阵每行加起来都是 1（误差小于 10⁻⁶）", below(row_error, 1e-6, name="行和与 1 的最大差")),
        "matches_reference": Claim("手写的打分、softmax 和加权求和与参考实现逐元素相同（误差小于 10⁻⁶）", below(ref_diff, 1e-6, name="输出与权重的最大差")),
    }

