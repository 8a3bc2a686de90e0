"""第 3.3 节：点积除不除以 √d_k，对 softmax 饱和与梯度的影响。

每个 d_k 做 2000 次试验：1 个查询、10 个键，每一维都是标准正态随机数。
"""

import numpy as np

from transformer_book.attention_numpy import scaling_study
from transformer_book.book import Figure, Table, Value
from transformer_book.plotting import new_figure

D_KS = [4, 16, 64, 256, 1024]


def compute():
    rows = scaling_study(D_KS, n_trials=2000, n_keys=10, rng=np.random.default_rng(0))
    by_dk = {r.d_k: r for r in rows}
    table = Table(
        columns=["$d_k$", "点积的标准差", "不缩放：最大权重", "不缩放：梯度范数", "缩放：最大权重", "缩放：梯度范数"],
        rows=[[r.d_k, r.dot_std, r.max_weight_unscaled, r.grad_norm_unscaled, r.max_weight_scaled, r.grad_norm_scaled] for r in rows],
        formats=["d", ".1f", ".3f", ".3f", ".3f", ".3f"],
    )

    fig, (ax_w, ax_g) = new_figure(ncols=2, width=7.2, height=3.2)
    d = [r.d_k for r in rows]
    ax_w.plot(d, [r.max_weight_unscaled for r in rows], "o-", label="不缩放")
    ax_w.plot(d, [r.max_weight_scaled for r in rows], "s--", label="除以 √dₖ")
    ax_w.set(xscale="log", xlabel="dₖ", ylabel="最大注意力权重（平均）", ylim=(0, 1.05))
    ax_g.plot(d, [r.grad_norm_unscaled for r in rows], "o-", label="不缩放")
    ax_g.plot(d, [r.grad_norm_scaled for r in rows], "s--", label="除以 √dₖ")
    ax_g.set(xscale="log", xlabel="dₖ", ylabel="softmax 雅可比矩阵的范数（平均）", ylim=(0, 0.4))
    for ax in (ax_w, ax_g):
        ax.set_xticks(d, [str(x) for x in d])
        ax.legend()

    small, large = by_dk[D_KS[0]], by_dk[D_KS[-1]]
    return {
        "table": table,
        "figure": Figure(fig),
        "max_weight_unscaled_largest": Value(large.max_weight_unscaled, ".3f"),
        "grad_norm_unscaled_smallest": Value(small.grad_norm_unscaled, ".3f"),
        "grad_norm_unscaled_largest": Value(large.grad_norm_unscaled, ".3f"),
        "grad_shrink_factor": Value(small.grad_norm_unscaled / large.grad_norm_unscaled, ".1f"),
        "max_weight_scaled_largest": Value(large.max_weight_scaled, ".3f"),
        "dot_std_64": Value(by_dk[64].dot_std, ".1f"),
        "dot_std_1024": Value(by_dk[1024].dot_std, ".1f"),
    }
