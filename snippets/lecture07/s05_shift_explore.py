"""第 5.4 节（可调的图）：把查询和键的位置同时往后挪 Δ 个位置，RoPE 的分数不变，加正弦编码的分数跟着变。

沿用表 5-4 的查询 q 和键 k（d_k = 8，同一个种子），三组起点 (m_q, m_k) = (5, 2)、(3, 3)、(2, 5)，
位置差分别是 3、0、−3；滑块把两个位置同时加上 Δ（m、n 已经是查询和键的位置）。
"""

import numpy as np

from transformer_book.book import Bars, Claim, Control, Explorable, Text, Tolerance, above, all_of, below
from transformer_book.lecture07.positions import added_pe_scores, rope_scores

D_K = 8
STARTS = [(5, 2), (3, 3), (2, 5)]
SHIFTS = [0, 1, 2, 5, 10, 20, 50, 100]
FLOAT32 = Tolerance(abs=1e-6, reason="RoPE 的 cos/sin 表是 float32 算出的：各平台的 sin/cos 实现在末位可能不同")


def compute():
    rng = np.random.default_rng(0)  # 与表 5-4 相同的 q、k
    q, k = rng.standard_normal(D_K), rng.standard_normal(D_K)  # 各 (d_k,)
    base_rope, base_added = rope_scores(q, k, STARTS), added_pe_scores(q, k, STARTS)  # 各 (3,)

    def state(m):
        pairs = [(a + m, b + m) for a, b in STARTS]
        rope, added = rope_scores(q, k, pairs), added_pe_scores(q, k, pairs)  # 各 (3,)
        return {"pairs": [f"({a}, {b})" for a, b in pairs], "rope": rope.tolist(), "added": added.tolist(),
                "rope_moved": float(np.abs(rope - base_rope).max()),
                "added_moved": float(np.abs(added - base_added).max())}

    states = {(m,): state(m) for m in SHIFTS}
    explore = Explorable(
        [Control("两个位置同时加上 Δ", SHIFTS, default=0)],
        states,
        show=[Bars("rope", "pairs", title="RoPE 的分数（查询位置，键位置）", fmt=".3f"),
              Bars("added", "pairs", title="加正弦编码后的分数（查询位置，键位置）", fmt=".3f"),
              Text("rope_moved", "RoPE：与 Δ = 0 时最多相差", ".3f"),
              Text("added_moved", "加正弦编码：与 Δ = 0 时最多相差", ".3f")],
        caption="图 5-3　可调：把查询和键一起往后挪 Δ 个位置",
        tolerance=FLOAT32,
    )
    rope_most = max(s["rope_moved"] for s in states.values())
    added_least = min(s["added_moved"] for (m,), s in states.items() if m != 0)
    return {
        "explore": explore,
        "shift_invariant": Claim("无论挪多少，RoPE 的三个分数都不变（最多差 10⁻⁴，float32 的舍入），"
                                 "加正弦编码的分数每挪一次都变（至少变 0.05）",
                                 all_of(below(rope_most, 1e-4, name="RoPE 的最大变化"),
                                        above(added_least, 0.05, name="加正弦编码时最小的最大变化"))),
    }
