"""第 6.1 节：一个需要“同时看三个位置”的检索任务，比较 1、2、3、6 个头。

随机词序列（词表 10 个词，长度 16），在每个位置 t 同时预测 x_{t−1}、x_{t−2}、x_{t−4}。
模型：词嵌入 + 可学习的位置嵌入 → 一层带因果掩码的多头注意力（总宽度 24，d_h = 24 / h）→
三个线性分类器读同一个特征。每种头数用 3 个种子各训练 400 步（批量 64，AdamW，学习率 0.01 余弦衰减），
在 1000 条新序列上测每个目标的准确率。图里是种子 0 的模型：每个头平均把多少注意力放在往前第 k 个位置上。
"""

import torch

from transformer_book.book import Claim, Figure, Table, Value, above, all_of, below, equal, increasing, largest, less, true
from transformer_book.plotting import new_figure
from transformer_book.lecture07.retrieval import RetrievalConfig, dominant_token_accuracy, retrieval_study

BUDGET_SECONDS = 60

HEADS = [1, 2, 3, 6]
SEEDS = [0, 1, 2]
CONFIG = RetrievalConfig()  # V = 10，T = 16，偏移 (1, 2, 4)，d = 24，400 步


def mean(xs):
    return sum(xs) / len(xs)


def focus(head):
    """一个头权重最大的距离 k。"""
    return max(range(len(head)), key=lambda k: head[k])


def claims(study, worst):
    """正文对这个实验的每一条说法，由这次运行的结果判定。"""
    one_head = study[1][0]
    on_targets = [one_head.attention[0][k] for k in CONFIG.offsets]
    best = max(range(len(on_targets)), key=lambda j: one_head.target_accuracy[j])
    ranked = [sorted(r.target_accuracy, reverse=True) for r in study[1]]  # 每个种子三个目标的准确率，从高到低
    two = study[2][0].attention
    pairs = [set(sorted(CONFIG.offsets, key=lambda k: head[k])[-2:]) for head in two]  # 每个头权重最大的两个目标
    halves = min(head[k] for head, pair in zip(two, pairs) for k in pair)
    three = study[3][0].attention
    six = [focus(head) for head in study[6][0].attention]
    return {
        "same_parameters": Claim("四种头数的模型参数个数相同", equal(不同的参数个数=len({r.n_parameters for runs in study.values() for r in runs}), 期望=1)),
        "more_heads_better": Claim("头越多，最差的目标越好（1 → 2 → 3 个头）", increasing([worst[1], worst[2], worst[3]], name="1、2、3 个头最差的目标")),
        "three_heads_all_right": Claim("3 个和 6 个头几乎全对（最差的目标高于 99%）", all_of(above(worst[3], 0.99, name="3 个头最差的目标"), above(worst[6], 0.99, name="6 个头最差的目标"))),
        "one_head_learns_one": Claim("单头模型在每个种子里都只学会一个目标，另外两个只比瞎猜好一点",
                                     all_of(*(all_of(above(r[0], 0.8, name=f"种子 {i} 学会的目标"),
                                                     below(r[1], 0.3, name=f"种子 {i} 次好的目标"),
                                                     above(r[2], 1 / CONFIG.vocab_size, name=f"种子 {i} 最差的目标（高于瞎猜）"))
                                              for i, r in enumerate(ranked)))),
        "one_head_spreads": Claim("（种子 0）单头模型把权重分给三个目标位置（合计超过 0.85，每个都不到一半），"
                                  "学会的正是份量最大的那个",
                                  all_of(above(sum(on_targets), 0.85, name="三个目标的权重合计"),
                                         below(max(on_targets), 0.5, name="最大的一份"),
                                         largest({str(k): w for k, w in zip(CONFIG.offsets, on_targets)}, str(CONFIG.offsets[best])))),
        "two_heads_cover": Claim("（种子 0）2 个头时，每个头把权重大致平分给两个目标位置，合起来覆盖全部三个目标；"
                                 "两个头都取了 x_{t−1}",
                                 all_of(above(halves, 0.35, name="最小的一半"),
                                        equal(两个头覆盖=sorted(pairs[0] | pairs[1]), 全部目标=sorted(CONFIG.offsets)),
                                        equal(共同的目标=sorted(pairs[0] & pairs[1]), 期望=[1]))),
        "three_heads_one_each": Claim("（种子 0）3 个头时，每个头几乎只看一个目标位置，正好一人一个",
                                      all_of(equal(各头看的位置=sorted(map(focus, three)), 目标=sorted(CONFIG.offsets)),
                                             *(above(max(head), 0.9, name=f"头 {i} 的最大权重") for i, head in enumerate(three)))),
        "six_heads_repeat": Claim("（种子 0）6 个头时，有的头与别的头看同一个位置", less(不同的位置数=len(set(six)), 头数=len(six))),
    }


def compute():
    study = retrieval_study(HEADS, SEEDS, CONFIG)
    n_targets = len(CONFIG.offsets)
    targets = [f"$x_{{t-{k}}}$" for k in CONFIG.offsets]

    rows, worst = [], {}
    for h in HEADS:
        runs = study[h]
        per_target = [mean([r.target_accuracy[j] for r in runs]) for j in range(n_targets)]
        worst[h] = mean([r.worst for r in runs])  # 每次训练最差的目标，再对种子平均
        rows.append([h, CONFIG.d_model // h, runs[0].n_parameters, *per_target, worst[h]])
    table = Table(
        columns=["头数 $h$", "$d_h$", "参数个数", *targets, "最差的目标"],
        rows=rows,
        formats=["d", "d", ",d", *[".1%"] * n_targets, ".1%"],
        kind="trained", kinds={"头数 $h$": "exact", "$d_h$": "exact", "参数个数": "exact"},
    )

    # 单头（种子 0）：放在三个目标位置上的权重，以及“三个目标都猜混合里份量最大的词”这条规则的准确率
    one_head = study[1][0]
    on_targets = [one_head.attention[0][k] for k in CONFIG.offsets]
    rule = dominant_token_accuracy(on_targets, CONFIG, torch.Generator().manual_seed(10_000)).tolist()
    gap = max(abs(a - b) for a, b in zip(rule, one_head.target_accuracy))
    rule_table = Table(
        columns=["单头模型（种子 0）", *targets],
        rows=[["实测的准确率", *one_head.target_accuracy], ["规则“都猜份量最大的词”的准确率", *rule]],
        formats=["", *[".1%"] * n_targets],
        kind="trained",
    )

    fig, axes = new_figure(ncols=len(HEADS), width=8.0, height=2.6, sharey=True)
    for ax, h in zip(axes, HEADS):
        profile = study[h][0].attention  # h 行，每行是往前第 k = 0…6 个位置的平均权重
        ks = range(len(profile[0]))
        width = 0.8 / h
        for i, row in enumerate(profile):
            ax.bar([k - 0.4 + width * (i + 0.5) for k in ks], row, width=width)
        for k in CONFIG.offsets:
            ax.axvspan(k - 0.45, k + 0.45, color="#eeeeee", zorder=0)
        ax.set(title=f"{h} 个头", xticks=list(ks), xlabel="往前第 k 个位置", ylim=(0, 1.05))
    axes[0].set_ylabel("平均注意力权重")

    return {
        "table": table,
        "figure": Figure(fig, kind="trained"),
        "one_head_rule": rule_table,
        "n_parameters": Value(rows[0][2], ",d"),
        "one_head_best": Value(mean([max(r.target_accuracy) for r in study[1]]), ".1%", kind="trained"),
        "one_head_worst": Value(worst[1], ".1%", kind="trained"),
        "two_heads_worst": Value(worst[2], ".1%", kind="trained"),
        "one_head_weight_t1": Value(on_targets[0], ".2f", kind="trained"),
        "one_head_weight_t2": Value(on_targets[1], ".2f", kind="trained"),
        "one_head_weight_t4": Value(on_targets[2], ".2f", kind="trained"),
        "rule_explains_one_head": Claim("规则“都猜份量最大的词”算出的准确率与单头模型相差不到 3 个百分点",
                                        below(gap, 0.03, name="相差")),
        **claims(study, worst),
    }

