"""第 7.2 节：手算层归一化，并与 PyTorch 的 nn.LayerNorm 对照。

两个输入 (2, 4, 6, 8) 与 (100, 101, 102, 103)：均值、方差（除以 d 的有偏估计）都不同，
各自减去均值、除以标准差之后却得到同一个向量。γ = 1、β = 0（nn.LayerNorm 初始化时的值），ε = 1e-5，
用 PyTorch 默认的 float32 计算。
"""

import torch

from transformer_book.book import Claim, Table, Tolerance, Value, below
from transformer_book.lecture07.depth import layer_norm_by_hand

INPUTS = [(2.0, 4.0, 6.0, 8.0), (100.0, 101.0, 102.0, 103.0)]
EPS_FLOAT32 = Tolerance(abs=1e-6, reason="float32 的归一化结果，末位随 CPU 的求和顺序不同")


def compute():
    x = torch.tensor(INPUTS)  # (2, 4)：两个位置，每个 d = 4
    y, mu, var = layer_norm_by_hand(x, eps=1e-5)
    with torch.no_grad():
        reference = torch.nn.LayerNorm(4, eps=1e-5)(x)
    diffs = (y - reference).abs().amax(dim=-1)  # (2,)
    between = float((y[0] - y[1]).abs().max())
    rows = [[f"$({', '.join(f'{v:g}' for v in xi)})$", float(m), float(v), *yi.tolist(), float(dd)]
            for xi, m, v, yi, dd in zip(INPUTS, mu[:, 0], var[:, 0], y, diffs)]
    return {
        "table": Table(
            columns=["输入 $x$", r"均值 $\mu$", r"方差 $\sigma^2$", "第 1 维", "第 2 维", "第 3 维", "第 4 维",
                     "与 nn.LayerNorm 的最大差"],
            rows=rows,
            formats=["", ".2f", ".2f", ".3f", ".3f", ".3f", ".3f", ".2g"],
            tolerance=EPS_FLOAT32, kinds={"与 nn.LayerNorm 的最大差": "rounding"},
        ),
        "max_diff": Value(float(diffs.max()), ".2g", kind="rounding"),  # 舍入误差本身：取决于求和顺序
        "matches_torch": Claim("手算的结果与 nn.LayerNorm 只差舍入（小于 10⁻⁵）", below(float(diffs.max()), 1e-5, name="最大差")),
        "same_output": Claim("两个输入归一化之后得到同一个向量（差别小于 10⁻⁵）", below(between, 1e-5, name="最大差")),
    }

