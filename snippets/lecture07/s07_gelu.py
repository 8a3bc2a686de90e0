"""第 7.3 节：参考实现的前馈网络用的是哪一种 GELU？

GELU 有两种写法：精确形式 x·Φ(x)（Φ 是标准正态分布的累积分布函数），以及 GPT-2 用的 tanh 近似
0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))。这里不看注释，直接让 FeedForward 算一次，与两种写法手算的
结果对照；再在 [−6, 6] 上量一量两种 GELU 最多差多少。
"""

import torch
import torch.nn.functional as F

from transformer_book.book import Claim, Table, Value, above, all_of, below
from transformer_book.transformer import FeedForward


def compute():
    torch.manual_seed(0)
    ffn = FeedForward(d_model=16)
    x = torch.randn(4, 16)  # 4 个位置，d = 16
    with torch.no_grad():
        ours = ffn(x)
        diffs = {name: float((ours - ffn.fc2(F.gelu(ffn.fc1(x), approximate=name))).abs().max())
                 for name in ("none", "tanh")}
    grid = torch.linspace(-6, 6, 12001)
    gap = float((F.gelu(grid) - F.gelu(grid, approximate="tanh")).abs().max())
    return {
        "variants": Table(
            columns=["用哪种 GELU 重算", "与 FeedForward 输出的最大差"],
            rows=[["精确形式 $x\\,\\Phi(x)$", diffs["none"]], ["tanh 近似（GPT-2）", diffs["tanh"]]],
            formats=["", ".2g"],
            kind="trained",  # 舍入误差本身：取决于求和顺序
        ),
        "max_gap": Value(gap, ".1e", kind="trained"),  # 两种函数真实的差（不是舍入），末位取决于求和顺序
        "uses_exact": Claim("FeedForward 用的是精确形式的 GELU：与精确形式重算只差舍入（小于 10⁻⁶），与 tanh 近似的差更大",
                            all_of(below(diffs["none"], 1e-6, name="与精确形式之差"), above(diffs["tanh"], 1e-6, name="与 tanh 近似之差"))),
        "variants_close": Claim("两种 GELU 在 [−6, 6] 上相差不到 10⁻³", below(gap, 1e-3, name="最大差")),
    }

