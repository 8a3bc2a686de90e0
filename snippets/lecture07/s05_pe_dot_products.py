"""第 5.2 节：正弦位置编码的点积 PE_p · PE_{p+k} 只取决于距离 k（d = 64）。

对三个起点 p = 0、20、100 分别计算，并与闭式 Σ_s cos(k·ω_s) 对照。
"""

import numpy as np

from transformer_book.book import Claim, Table, Tolerance, Value, below, greater
from transformer_book.lecture07.positions import pe_dot_product_formula, pe_dot_products

D = 64
DISTANCES = [0, 1, 2, 4, 8, 16, 32, 64]
STARTS = [0, 20, 100]
FLOAT32 = Tolerance(abs=1e-5, reason="编码表是 float32 算出的，不同平台的 sin/cos 在末位可能不同")


def compute():
    dots = pe_dot_products(D, DISTANCES, STARTS)  # (起点数, 距离数)
    formula = np.array([pe_dot_product_formula(D, k) for k in DISTANCES])  # (距离数,)
    spread = float(np.abs(dots - formula).max())  # 三个起点与闭式之间的最大差
    k_index = {k: j for j, k in enumerate(DISTANCES)}
    rows = [[f"$p = {p}$", *row] for p, row in zip(STARTS, dots)]
    rows.append(["闭式 $\\sum_s \\cos(k\\omega_s)$", *formula])
    return {
        "table": Table(columns=["", *[f"$k = {k}$" for k in DISTANCES]], rows=rows,
                       formats=["", *[".1f"] * len(DISTANCES)], tolerance=FLOAT32),
        "max_deviation": Value(spread, ".1e", kind="rounding"),  # 舍入误差本身：取决于求和顺序
        "start_does_not_matter": Claim("三个起点的点积与闭式 Σ cos(kωᵢ) 只差 float32 的舍入（小于 10⁻⁴）",
                                       below(spread, 1e-4, name="最大偏差")),
        "not_monotonic": Claim("点积随距离并不严格单调：k = 32 时比 k = 16 时大",
                               greater(k32=dots[0, k_index[32]], k16=dots[0, k_index[16]])),

        "k0": Value(formula[k_index[0]], ".1f"),
        "k1": Value(formula[k_index[1]], ".1f"),
        "k16": Value(formula[k_index[16]], ".1f"),
        "k32": Value(formula[k_index[32]], ".1f"),
        "k64": Value(formula[k_index[64]], ".1f"),
    }
