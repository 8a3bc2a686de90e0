"""第 20 章第三步：正弦位置编码的取值，以及位置向量怎样加到词向量上。

用参考实现的 ``sinusoidal_encoding`` 算出 d = 128 时位置 0–6（“春风又绿江南岸”的七个位置）的编码，
挑出频率最高的一对维度（第 0、1 维）、中间一对和频率最低的一对（第 126、127 维）；
再看位置向量加到一批词向量上时的形状，以及我们的 P08 模型实际用的可学习位置表有多大。
"""

import math

import torch

from transformer_book.chapter20 import p08
from transformer_book.book import Claim, Table, Value, below
from transformer_book.transformer import sinusoidal_encoding

LINE = "春风又绿江南岸"
D = 128
DIMS = [0, 1, 64, 65, 126, 127]


def compute():
    pe = sinusoidal_encoding(len(LINE), D)  # (T, d)
    deviation = max(  # 与公式逐项核对：sin 用在偶数维，cos 用在奇数维
        abs(float(pe[pos, dim]) - (math.sin if dim % 2 == 0 else math.cos)(pos / 10000 ** ((dim - dim % 2) / D)))
        for pos in range(len(LINE)) for dim in DIMS)
    table = Table(
        columns=["位置", "字", *[f"第 {d} 维" for d in DIMS]],
        rows=[[pos, ch, *[float(pe[pos, d]) for d in DIMS]] for pos, ch in enumerate(LINE)],
        formats=["d", "", *[".3f"] * len(DIMS)],
    )
    x = torch.zeros(2, len(LINE), D)  # 一批词向量 (B, T, d)，这里只关心形状
    summed = x + pe  # (T, d) 广播到 (B, T, d)

    config = p08.P08Config()
    model = p08.build_model(config, vocab_size=10)
    learned = model.pos_emb.table.weight  # (T_max, d)
    shapes = Table(
        columns=["张量", "形状"],
        rows=[["词向量 $X$", " × ".join(map(str, x.shape))],
              ["位置编码 $\\mathrm{PE}$（前 T 行）", " × ".join(map(str, pe.shape))],
              ["相加之后 $X + \\mathrm{PE}$", " × ".join(map(str, summed.shape))]],
    )
    return {
        "matches_formula": Claim("表中每个数都与公式逐项相符（差别小于 10⁻⁶）", below(deviation, 1e-6, name="最大偏差")),

        "pe_values": table,
        "shapes": shapes,
        "slowest_period": Value(2 * math.pi * 10000 ** ((D - 2) / D), ",.0f"),
        "fastest_period": Value(2 * math.pi, ".2f"),
        "learned_rows": Value(learned.shape[0], "d"),
        "learned_params": Value(learned.numel(), ",d"),
    }
