"""从零写一个会写诗的 GPT：五个阶段放在一起比较（训练在 scratch_bigram … scratch_block 五个片段里，每个阶段
三个种子）。比的有两样：验证损失，和写出来的诗像不像五言诗。比较两个阶段的说法在每个种子上各核对一次：
每个种子都成立才算成立。"""

import statistics

import numpy as np

from transformer_book.book import Claim, Figure, Table, Value, all_of, artifact, at_least, at_most, every_seed, less
from transformer_book.chapter20 import poems, scratch
from transformer_book.plotting import new_figure

REQUIRES = ["chapter20/scratch_bigram", "chapter20/scratch_average", "chapter20/scratch_head",
            "chapter20/scratch_heads", "chapter20/scratch_block"]
NAMES = {"bigram": "二元", "average": "前文平均", "head": "一个头", "heads": "四个头", "block": "一个块"}
ADDED = {"bigram": "词嵌入、层归一化、输出层", "average": "用 tril 求前文的平均，加回当前字（残差连接）",
         "head": "位置嵌入、一个注意力头", "heads": "拆成四个头，加上输出投影",
         "block": "块内的两个层归一化、前馈网络（子层输出上的 dropout 本页设为 0）"}
FEW = 0.2  # 二元模型：恰好五个字的句子不到这个比例
MOST = 0.85  # 一个块：恰好五个字的句子超过这个比例


def compute():
    runs = {s: [scratch.StageResult.from_data(d) for d in artifact(f"chapter20/scratch_{s}", "result")] for s in NAMES}
    seeds = list(scratch.SEEDS)
    final = {s: [r.val_loss[-1] for r in rs] for s, rs in runs.items()}  # 阶段 → 每个种子训练结束时的验证损失
    five = {s: [poems.five_char_share(r.poems) for r in rs] for s, rs in runs.items()}  # 恰好五个字的句子占多少
    form = {s: [poems.form_share(r.poems) for r in rs] for s, rs in runs.items()}  # 整首合乎格式的诗占多少
    mean = {s: statistics.mean(v) for s, v in final.items()}  # 与各阶段的片段同一种平均：同一个数在页面上处处一样
    gap = {s: float(np.max(v) - np.min(v)) for s, v in final.items()}  # 种子之间最多相差多少

    fig, (curves, shape) = new_figure(ncols=2, width=7.2, height=3.4, width_ratios=[3, 2])
    for s, rs in runs.items():
        steps = rs[0].steps[1:]
        ys = np.array([r.val_loss[1:] for r in rs])  # (种子数, 记录点数)
        line, = curves.plot(steps, ys.mean(0), "o-", markersize=3, label=NAMES[s])
        curves.fill_between(steps, ys.min(0), ys.max(0), color=line.get_color(), alpha=0.2, lw=0)
    curves.set(xlabel="训练步数", ylabel="验证损失（奈特 / 字）", title="三个种子的平均（阴影：最低到最高）")
    curves.legend()
    xs = np.arange(len(NAMES))
    shape.bar(xs - 0.2, [statistics.mean(five[s]) for s in NAMES], width=0.4, color="#9ecae1", label="恰好五个字的句子")
    shape.bar(xs + 0.2, [statistics.mean(form[s]) for s in NAMES], width=0.4, color="#3182bd", label="整首合乎格式的诗")
    for k in range(len(seeds)):  # 每个种子一个点
        shape.plot(xs - 0.2, [five[s][k] for s in NAMES], "k.", markersize=4)
        shape.plot(xs + 0.2, [form[s][k] for s in NAMES], "k.", markersize=4)
    shape.set_xticks(xs, list(NAMES.values()), rotation=30)
    shape.set(ylim=(0, 1), ylabel="比例", title="写出的诗（柱：平均；点：每个种子）")
    shape.legend(fontsize=7, loc="upper left")

    per_seed = lambda check: every_seed({seed: check(k) for k, seed in enumerate(seeds)})  # noqa: E731
    step_claims = {}
    order = list(NAMES)
    for before, after in zip(order, order[1:]):
        step_claims[f"{after}_lower_than_{before}"] = Claim(
            f"{NAMES[after]}的验证损失比{NAMES[before]}低",
            per_seed(lambda k, a=after, b=before: less(**{NAMES[a]: final[a][k], NAMES[b]: final[b][k]})))
    return {
        "figure": Figure(fig, kind="trained"),
        "table": Table(
            columns=["模型", "比上一步多了什么", "参数个数", "验证损失（三个种子的平均）", "种子之间最多相差",
                     "恰好五个字的句子", "整首合乎格式"],
            rows=[[NAMES[s], ADDED[s], rs[0].n_parameters, mean[s], gap[s], statistics.mean(five[s]),
                   statistics.mean(form[s])] for s, rs in runs.items()],
            formats=["", "", ",d", ".3f", ".3f", ".0%", ".0%"],
            kinds={c: "trained" for c in ("验证损失（三个种子的平均）", "种子之间最多相差", "恰好五个字的句子", "整首合乎格式")},
        ),
        "samples": Table(
            columns=["模型", f"从「{scratch.PROMPT}」续写（种子 0 的模型）"],
            rows=[[NAMES[s], sample] for s, rs in runs.items() for sample in rs[0].samples],
            kinds={f"从「{scratch.PROMPT}」续写（种子 0 的模型）": "trained"},
        ),
        **step_claims,
        "bigram_cannot_count": Claim(f"二元模型写的句子，恰好五个字的不到 {FEW:.0%}，整首合乎格式的一首也没有",
                                     per_seed(lambda k: all_of(at_most(five["bigram"][k], FEW, name="恰好五个字的比例"),
                                                               at_most(form["bigram"][k], 0.0, name="合乎格式的比例")))),
        "average_cannot_count": Claim(f"前文的平均写的句子，恰好五个字的也不到 {FEW:.0%}，整首合乎格式的一首也没有",
                                      per_seed(lambda k: all_of(at_most(five["average"][k], FEW, name="恰好五个字的比例"),
                                                                at_most(form["average"][k], 0.0, name="合乎格式的比例")))),
        "head_counts_better": Claim("一个头写的句子里，恰好五个字的比前文的平均多",
                                    per_seed(lambda k: less(前文平均=five["average"][k], 一个头=five["head"][k]))),
        "heads_count_better": Claim("四个头写的句子里，恰好五个字的比一个头多",
                                    per_seed(lambda k: less(一个头=five["head"][k], 四个头=five["heads"][k]))),
        "block_keeps_five": Claim(f"一个块写的句子，恰好五个字的超过 {MOST:.0%}",
                                  per_seed(lambda k: at_least(five["block"][k], MOST, name="恰好五个字的比例"))),
        "few": Value(FEW, ".0%"),
        "most": Value(MOST, ".0%"),
        "n_poems": Value(scratch.N_POEMS, "d"),
        "seeds": Value(len(seeds), "d"),
    }
