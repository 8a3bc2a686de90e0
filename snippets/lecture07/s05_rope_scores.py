"""第 5.4 节：RoPE 的注意力分数只取决于相对位置 m − n，而且旋转不改变向量的长度。

同一个查询 q 和同一个键 k（d_k = 8，固定种子的随机数）放在不同的位置 (m, n)：
RoPE 把 q 转 m 个“步长”、把 k 转 n 个“步长”再做点积；对照组把正弦位置编码加到 q、k 上再做点积。
最后用原论文的“相邻两维配对”重算一遍，确认它与参考实现的“半分配对”只差维度顺序。
"""

import numpy as np

from transformer_book.book import Claim, Table, Tolerance, Value, above, all_of, below
from transformer_book.lecture07.positions import (
    added_pe_scores,
    half_split_to_interleaved,
    rope_norms,
    rope_scores,
)

D_K = 8
PAIRS = [(5, 2), (10, 7), (100, 97), (5, 5), (50, 50), (2, 5), (60, 63)]
NORM_POSITIONS = [0, 1, 10, 100, 1000]
FLOAT32 = Tolerance(abs=1e-6, reason="RoPE 的 cos/sin 表是 float32 算出的：各平台的 sin/cos 实现在末位可能不同")


def compute():
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal(D_K), rng.standard_normal(D_K)  # 各 (d_k,)
    rope = rope_scores(q, k, PAIRS)  # (7,)
    added = added_pe_scores(q, k, PAIRS)  # (7,)

    offsets = sorted({m - n for m, n in PAIRS})
    groups = {o: [i for i, (m, n) in enumerate(PAIRS) if m - n == o] for o in offsets}
    rope_spread = max(np.ptp(rope[idx]) for idx in groups.values())
    added_spread = {o: float(np.ptp(added[idx])) for o, idx in groups.items()}
    asymmetry = abs(float(rope[groups[3][0]] - rope[groups[-3][0]]))

    q_norms, k_norms = rope_norms(q, NORM_POSITIONS), rope_norms(k, NORM_POSITIONS)  # 各 (5,)
    norm_change = float(max(np.abs(q_norms - np.linalg.norm(q)).max(), np.abs(k_norms - np.linalg.norm(k)).max()))

    perm = half_split_to_interleaved(D_K)  # 半分排列 → 相邻排列
    interleaved = rope_scores(q[perm], k[perm], PAIRS, interleaved=True)
    pairing_diff = float(np.abs(interleaved - rope).max())

    return {
        "scores": Table(
            columns=["$(m, n)$", "$m - n$", "RoPE 的分数", "加正弦编码后的分数"],
            rows=[[f"({m}, {n})", m - n, r, a] for (m, n), r, a in zip(PAIRS, rope, added)],
            formats=["", "d", ".3f", ".3f"],
            tolerance=FLOAT32,
        ),
        "norms": Table(
            columns=["位置 $m$", "$\\lVert \\tilde q_m \\rVert$", "$\\lVert \\tilde k_m \\rVert$"],
            rows=[[m, a, b] for m, a, b in zip(NORM_POSITIONS, q_norms, k_norms)],
            formats=["d", ".4f", ".4f"],
            tolerance=FLOAT32,
        ),
        "rope_spread": Value(rope_spread, ".1e", kind="rounding"),  # 舍入误差本身：取决于求和顺序
        "added_spread_offset3": Value(added_spread[3], ".3f"),
        "added_spread_offset0": Value(added_spread[0], ".3f"),
        "added_spread_offset_minus3": Value(added_spread[-3], ".3f"),
        "q_norm": Value(np.linalg.norm(q), ".4f"),
        "norm_change": Value(norm_change, ".1e", kind="rounding"),
        "pairing_diff": Value(pairing_diff, ".1e", kind="rounding"),
        "relative_only": Claim("用 RoPE 时，m − n 相同的几组分数只差 float32 的舍入（小于 10⁻⁴）", below(rope_spread, 1e-4, name="最大差")),
        "tells_sign_apart": Claim("RoPE 的分数区分 m − n = 3 与 m − n = −3", above(asymmetry, 1e-2, name="两者之差")),
        "added_depends_on_position": Claim("加上正弦编码后，m − n 相同的几组分数随绝对位置变化；m − n = 3 与 0 "
                                           "的两组变化都超过 1",
                                           all_of(above(min(added_spread.values()), 1e-3, name="最小的变化"),
                                                  above(added_spread[3], 1.0, name="m−n=3 的变化"),
                                                  above(added_spread[0], 1.0, name="m−n=0 的变化"))),
        "length_kept": Claim("旋转不改变向量的长度（差别小于 10⁻⁵）", below(norm_change, 1e-5, name="长度的最大变化")),
        "pairings_agree": Claim("两种配对方式在重排维度之后给出相同的分数（差别小于 10⁻⁴）", below(pairing_diff, 1e-4, name="最大差")),
    }

