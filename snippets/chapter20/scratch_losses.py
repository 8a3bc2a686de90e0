"""从零搭一个小 GPT：五个阶段的验证损失放在一起比较（训练在 scratch_bigram … scratch_block 五个片段里）。"""

from transformer_book.book import Claim, Figure, Table, Value, all_of, artifact, between, less, smallest
from transformer_book.chapter20 import scratch
from transformer_book.plotting import new_figure

REQUIRES = ["chapter20/scratch_bigram", "chapter20/scratch_average", "chapter20/scratch_head",
            "chapter20/scratch_heads", "chapter20/scratch_block"]
NAMES = {"bigram": "二元", "average": "前文平均", "head": "一个头", "heads": "四个头", "block": "一个块"}
ADDED = {"bigram": "词嵌入、层归一化、输出层", "average": "用 tril 求前文的平均", "head": "位置嵌入、一个注意力头",
         "heads": "拆成四个头，加上输出投影", "block": "残差连接、块内的层归一化、前馈网络"}
NEAR = 0.05  # 第三、四步与第二步“几乎一样”的界
MARGIN = 0.05  # 第五步比第一步至少低这么多


def compute():
    runs = {s: scratch.StageResult.from_data(artifact(f"chapter20/scratch_{s}", "result")) for s in NAMES}
    final = {NAMES[s]: r.val_loss[-1] for s, r in runs.items()}
    bigram, average, head, heads, block = final.values()

    fig, (curves, last) = new_figure(ncols=2, width=7.2, height=3.4, width_ratios=[3, 2])
    for s, r in runs.items():
        curves.plot(r.steps[1:], r.val_loss[1:], "o-", markersize=3, label=NAMES[s])
    curves.set(xlabel="训练步数", ylabel="验证损失（奈特 / 字）")
    curves.legend()
    last.plot(range(len(final)), list(final.values()), "o-", color="black")
    last.set_xticks(range(len(final)), list(final), rotation=30)
    last.set(ylabel="训练结束时的验证损失")

    return {
        "figure": Figure(fig, kind="trained"),
        "table": Table(
            columns=["模型", "比上一步多了什么", "参数个数", "验证损失"],
            rows=[[NAMES[s], ADDED[s], r.n_parameters, r.val_loss[-1]] for s, r in runs.items()],
            formats=["", "", ",d", ".3f"], kinds={"验证损失": "trained"},
        ),
        "average_beats_bigram": Claim("加上前文的平均，验证损失比二元模型低", less(前文平均=average, 二元=bigram)),
        "heads_near_average": Claim(
            f"换成一个头、再换成四个头，验证损失与前文平均相差都不到 {NEAR}",
            all_of(between(head - average, -NEAR, NEAR, name="一个头 − 前文平均"),
                   between(heads - average, -NEAR, NEAR, name="四个头 − 前文平均"))),
        "block_lowest": Claim("装进块之后，验证损失是五个模型里最低的", smallest(final, "一个块")),
        "block_beats_bigram": Claim(f"一个块比二元模型的验证损失低 {MARGIN} 以上",
                                    less(一个块=block, 二元减去界=bigram - MARGIN)),
        "near": Value(NEAR, ".2f"),
        "margin": Value(MARGIN, ".2f"),
    }
