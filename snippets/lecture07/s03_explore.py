"""第 3.3 节（可调的图）：改变 d_k、打开或关掉缩放，看一次抽样里 10 个键的分数有多分散、softmax 有多尖。

每个 d_k 用同一个种子抽 1 个查询和 10 个键（每一维都是标准正态随机数），再分别按“除以 √d_k”和“不除”
算出 10 个权重。右边一栏是表 3-1 的 2000 次试验里最大权重的平均，与这一次抽样对照。
"""

import numpy as np

from transformer_book.attention_numpy import scaling_study, softmax
from transformer_book.book import Bars, Claim, Control, Explorable, Text, all_of, above, below

D_KS = [4, 16, 64, 256, 1024]
N_KEYS = 10


def one_draw(d_k, scaled):
    """一次抽样：1 个查询、10 个键的分数（缩放或不缩放）与 softmax 权重。"""
    rng = np.random.default_rng(d_k)  # 每个 d_k 一个固定的种子：缩放与否看的是同一组向量
    q = rng.standard_normal(d_k)  # (d_k,)
    K = rng.standard_normal((N_KEYS, d_k))  # (10, d_k)
    scores = K @ q / (np.sqrt(d_k) if scaled else 1.0)  # (10,)
    return scores, softmax(scores)


def compute():
    average = {r.d_k: r for r in scaling_study(D_KS, n_trials=2000, n_keys=N_KEYS, rng=np.random.default_rng(0))}

    def state(d_k, scaled):
        scores, weights = one_draw(d_k, scaled)
        r = average[d_k]
        return {"scores_std": float(scores.std()), "weights": weights.tolist(), "max_weight": float(weights.max()),
                "average_max_weight": r.max_weight_scaled if scaled else r.max_weight_unscaled}

    explore = Explorable(
        [Control("dₖ", D_KS, default=64), Control("点积", [True, False], labels=["除以 √dₖ", "不除"])],
        state,
        show=[Bars("weights", [f"键 {i}" for i in range(1, N_KEYS + 1)], title="这一次抽样：10 个键分到的权重", scale=1.0),
              Text("scores_std", "这 10 个分数的标准差", ".2f"),
              Text("max_weight", "其中最大的权重", ".3f"),
              Text("average_max_weight", "2000 次试验里最大权重的平均", ".3f")],
        caption="图 3-2　可调：改变 dₖ，比较除与不除 √dₖ",
    )
    big = average[D_KS[-1]]
    return {
        "explore": explore,
        "saturates_unscaled": Claim("dₖ = 1024 时，不除的话最大权重平均超过 0.9，除以 √dₖ 之后平均不到一半",
                                    all_of(above(big.max_weight_unscaled, 0.9, name="不除时最大权重的平均"),
                                           below(big.max_weight_scaled, 0.5, name="除以 √dₖ 时最大权重的平均"))),
    }
