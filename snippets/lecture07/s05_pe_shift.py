"""第 5.2 节：往后挪 k 个位置是一个线性变换——存在只依赖 k 的矩阵 M_k，使 PE_{p+k} = M_k · PE_p。

M_k 由 2 × 2 旋转块组成（见 ``pe_shift_matrix``）；对 d = 64、几个距离 k 和位置 p = 0…199
逐一核对，报告最大误差。
"""

import numpy as np

from transformer_book.book import Claim, Table, Value, all_of, at_most, below
from transformer_book.lecture07.positions import pe_shift_matrix, pe_shift_max_error

D = 64
DISTANCES = [1, 3, 10, 50]
POSITIONS = range(200)



def compute():
    errors = [pe_shift_max_error(D, [k], POSITIONS) for k in DISTANCES]  # 误差本身就是 float32 的舍入误差
    matrices = [pe_shift_matrix(k, D) for k in DISTANCES]
    orthogonal = max(float(np.abs(M @ M.T - np.eye(D)).max()) for M in matrices)
    in_blocks = np.kron(np.eye(D // 2), np.ones((2, 2))) > 0  # 对角线上一个个 2×2 块的位置
    off_blocks = max(float(np.abs(M[~in_blocks]).max()) for M in matrices)
    # 旋转块 [[cos, sin], [−sin, cos]]：两个对角元相等，两个非对角元互为相反数
    not_rotation = max(float(max(abs(M[i, i] - M[i + 1, i + 1]), abs(M[i, i + 1] + M[i + 1, i])))
                       for M in matrices for i in range(0, D, 2))
    return {
        "table": Table(columns=["距离 $k$", "最大误差 $\\max_p \\lVert \\mathrm{PE}_{p+k} - M_k \\mathrm{PE}_p \\rVert_\\infty$"],
                       rows=[[k, e] for k, e in zip(DISTANCES, errors)], formats=["d", ".1e"],
                       kinds={"最大误差 $\\max_p \\lVert \\mathrm{PE}_{p+k} - M_k \\mathrm{PE}_p \\rVert_\\infty$": "rounding"}),
        "max_error": Value(max(errors), ".1e", kind="rounding"),
        "shift_is_linear": Claim("PE_{p+k} 与 M_k·PE_p 只差 float32 的舍入误差（小于 10⁻⁴）", below(max(errors), 1e-4, name="最大误差")),
        "rotation_blocks": Claim("M_k 由对角线上的 2×2 旋转块组成（块外全是 0），是正交矩阵",
                                 all_of(at_most(off_blocks, 0.0, name="块外元素的最大绝对值"),
                                        below(not_rotation, 1e-12, name="与旋转块形式的最大偏差"),
                                        below(orthogonal, 1e-12, name="与正交的最大偏差"))),
    }

