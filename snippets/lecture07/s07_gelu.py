"""第 7.3 节：参考实现的前馈网络用的是哪一种 GELU？

GELU 有两种写法：精确形式 x·Φ(x)（Φ 是标准正态分布的累积分布函数），以及 GPT-2 用的 tanh 近似
0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))。这里不看注释，直接让 FeedForward 算一次，与两种写法手算的
结果对照；再在 [−6, 6] 上量一量两种 GELU 最多差多少。
"""

import torch
import torch.nn.functional as F

from transformer_book.book import Table, Tolerance, Value
from transformer_book.transformer import FeedForward

EPS_FLOAT32 = Tolerance(abs=1e-6, reason="float32 舍入误差的具体大小取决于 CPU 与 BLAS 的求和顺序")


def compute():
    torch.manual_seed(0)
    ffn = FeedForward(d_model=16)
    x = torch.randn(4, 16)  # 4 个位置，d = 16
    with torch.no_grad():
        ours = ffn(x)
        diffs = {name: float((ours - ffn.fc2(F.gelu(ffn.fc1(x), approximate=name))).abs().max())
                 for name in ("none", "tanh")}
    assert diffs["none"] < 1e-6 < diffs["tanh"], "FeedForward 应当用精确的 GELU"
    grid = torch.linspace(-6, 6, 12001)
    gap = (F.gelu(grid) - F.gelu(grid, approximate="tanh")).abs()
    assert float(gap.max()) < 1e-3
    return {
        "variants": Table(
            columns=["用哪种 GELU 重算", "与 FeedForward 输出的最大差"],
            rows=[["精确形式 $x\\,\\Phi(x)$", diffs["none"]], ["tanh 近似（GPT-2）", diffs["tanh"]]],
            formats=["", ".2g"],
            tolerance=EPS_FLOAT32,
        ),
        "max_gap": Value(float(gap.max()), ".1e", tolerance=EPS_FLOAT32),
    }


if __name__ == "__main__":
    from transformer_book.book.show import main

    main(compute)
