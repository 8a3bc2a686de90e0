"""第 15 节练习 7：d = 4096 时，注意力矩阵从多长开始超过线性层；128K 上下文时它占多少。

用第 10.1 节的计数约定（``transformer_book.cost``）。
"""

from transformer_book.book import Claim, Value, below
from transformer_book.cost import attention_share, crossover_length

D, CONTEXT = 4096, 131_072


def compute():
    crossover = crossover_length(D)
    ratio = CONTEXT / crossover
    return {
        "equal_at_6d": Claim("T = 6d 时，注意力矩阵与线性层的计算量正好相等", below(abs(attention_share(crossover, D) - 0.5), 1e-12, name="份额与一半之差")),

        "crossover": Value(crossover, "d"),
        "ratio": Value(ratio, ".2f"),
        "ratio_plus_one": Value(ratio + 1, ".2f"),
        "share": Value(attention_share(CONTEXT, D), ".0%"),
        "share_precise": Value(attention_share(CONTEXT, D), ".1%"),
    }
