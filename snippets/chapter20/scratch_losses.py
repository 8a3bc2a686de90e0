"""从零搭一个小 GPT：五个阶段的验证损失放在一起比较（训练在 scratch_bigram … scratch_block 五个片段里，
每个阶段三个种子）。比较两个阶段的说法在每个种子上各核对一次：每个种子都成立才算成立。"""

import numpy as np

from transformer_book.book import Claim, Figure, Table, Value, all_of, artifact, between, every_seed, less, smallest
from transformer_book.chapter20 import scratch
from transformer_book.plotting import new_figure

REQUIRES = ["chapter20/scratch_bigram", "chapter20/scratch_average", "chapter20/scratch_head",
            "chapter20/scratch_heads", "chapter20/scratch_block"]
NAMES = {"bigram": "二元", "average": "前文平均", "head": "一个头", "heads": "四个头", "block": "一个块"}
ADDED = {"bigram": "词嵌入、层归一化、输出层", "average": "用 tril 求前文的平均，加回当前字（残差连接）",
         "head": "位置嵌入、一个注意力头", "heads": "拆成四个头，加上输出投影",
         "block": "块内的两个层归一化、前馈网络、子层输出上的 dropout"}
NEAR = 0.05  # 第三、四步与第二步“相差不到”的界
MARGIN = 0.05  # 第五步比第一步至少低这么多


def compute():
    runs = {s: [scratch.StageResult.from_data(d) for d in artifact(f"chapter20/scratch_{s}", "result")] for s in NAMES}
    seeds = list(scratch.SEEDS)
    final = {s: [r.val_loss[-1] for r in rs] for s, rs in runs.items()}  # 阶段 → 每个种子训练结束时的验证损失
    mean = {s: float(np.mean(v)) for s, v in final.items()}
    gap = {s: float(np.max(v) - np.min(v)) for s, v in final.items()}  # 种子之间最多相差多少

    fig, (curves, last) = new_figure(ncols=2, width=7.2, height=3.4, width_ratios=[3, 2])
    for s, rs in runs.items():
        steps = rs[0].steps[1:]
        ys = np.array([r.val_loss[1:] for r in rs])  # (种子数, 记录点数)
        line, = curves.plot(steps, ys.mean(0), "o-", markersize=3, label=NAMES[s])
        curves.fill_between(steps, ys.min(0), ys.max(0), color=line.get_color(), alpha=0.2, lw=0)
    curves.set(xlabel="训练步数", ylabel="验证损失（奈特 / 字）", title="三个种子的平均（阴影：最低到最高）")
    curves.legend()
    xs = range(len(NAMES))
    for k, seed in enumerate(seeds):
        last.plot(xs, [final[s][k] for s in NAMES], "o-", color="black", alpha=0.35 + 0.2 * k, lw=1,
                  markersize=3, label=f"种子 {seed}")
    last.set_xticks(xs, list(NAMES.values()), rotation=30)
    last.set(ylabel="训练结束时的验证损失")
    last.legend(fontsize=7)

    per_seed = lambda check: every_seed({seed: check(k) for k, seed in enumerate(seeds)})  # noqa: E731
    return {
        "figure": Figure(fig, kind="trained"),
        "table": Table(
            columns=["模型", "比上一步多了什么", "参数个数", "验证损失（三个种子的平均）", "种子之间最多相差"],
            rows=[[NAMES[s], ADDED[s], rs[0].n_parameters, mean[s], gap[s]] for s, rs in runs.items()],
            formats=["", "", ",d", ".3f", ".3f"], kinds={"验证损失（三个种子的平均）": "trained", "种子之间最多相差": "trained"},
        ),
        "average_beats_bigram": Claim("加上前文的平均，验证损失比二元模型低",
                                      per_seed(lambda k: less(前文平均=final["average"][k], 二元=final["bigram"][k]))),
        "heads_near_average": Claim(
            f"换成一个头、再换成四个头，每个种子上验证损失与前文平均相差都不到 {NEAR}",
            per_seed(lambda k: all_of(between(final["head"][k] - final["average"][k], -NEAR, NEAR, name="一个头 − 前文平均"),
                                      between(final["heads"][k] - final["average"][k], -NEAR, NEAR, name="四个头 − 前文平均")))),
        "block_beats_heads": Claim("装进块之后，验证损失比四个头低",
                                   per_seed(lambda k: less(一个块=final["block"][k], 四个头=final["heads"][k]))),
        "block_lowest": Claim("装进块之后，验证损失是五个模型里最低的",
                              per_seed(lambda k: smallest({NAMES[s]: final[s][k] for s in NAMES}, "一个块"))),
        "block_beats_bigram": Claim(f"一个块比二元模型的验证损失低 {MARGIN} 以上",
                                    per_seed(lambda k: less(一个块=final["block"][k], 二元减去界=final["bigram"][k] - MARGIN))),
        "near": Value(NEAR, ".2f"),
        "margin": Value(MARGIN, ".2f"),
        "seeds": Value(len(seeds), "d"),
    }
