"""第 7.1 节：8 层的网络，有残差与没有残差——初始化时的“坍缩”与训练 300 步的结果。

任务：随机词序列（词表 10 个词，长度 16），在每个位置 t 说出往前第 3 个词 x_{t−3}；瞎猜的准确率 10%，
损失 ln 10 ≈ 2.30。模型是参考实现的 TransformerLM（d = 32，4 个头，8 层，可学习的位置嵌入，GPT-2 初始化），
三种块：Pre-LN、Post-LN、去掉残差的 Pre-LN。AdamW，学习率 3e-3 固定不变、不预热，批量 32。每种块用 3 个种子
（初始化与取批次的顺序）各训练一次：正文的每个说法在每个种子上都要成立；表和图画的是种子 0。

坍缩程度用两个量衡量，都在初始化时、256 条新序列上测：
- 平均余弦相似度：最后一个块输出的隐藏状态里，同一序列不同位置的向量两两之间的余弦相似度的平均；
- 相对离散度 ‖Z − 𝟏z̄‖_F / ‖Z‖_F（z̄ 是各位置的平均向量，1 × d；𝟏 是 T 个 1 排成的列）：各位置的向量离它们的平均向量有多远（0 = 所有位置完全相同）。
"""

import math

from transformer_book.book import Claim, Figure, Table, Value, above, all_of, below, every_seed
from transformer_book.lecture07.depth import DepthConfig, depth_study
from transformer_book.plotting import new_figure

BUDGET_SECONDS = 90
SEEDS = (0, 1, 2)

CONFIG = DepthConfig()  # V = 10，T = 16，k = 3，d = 32，4 个头，8 层，300 步
NAMES = {"pre": "Pre-LN（有残差）", "post": "Post-LN（有残差）", "pre_no_residual": "Pre-LN 去掉残差"}

SMOOTH = 10  # 画损失曲线时取 10 步的滑动平均


def moving_average(xs, n):
    return [sum(xs[i:i + n]) / n for i in range(len(xs) - n + 1)]


def compute():
    by_seed = {seed: depth_study(tuple(NAMES), CONFIG, seed=seed) for seed in SEEDS}
    runs = by_seed[0]  # 表和图画种子 0
    chance_loss = math.log(CONFIG.vocab_size)

    def per_seed(check):  # 同一个说法，在每个种子上各核对一次
        return every_seed({seed: check(r["pre"], r["post"], r["pre_no_residual"], r) for seed, r in by_seed.items()})

    pre, post, plain = runs["pre"], runs["post"], runs["pre_no_residual"]
    claims = {
        "no_residual_collapsed": Claim("去掉残差，初始化时各位置就已几乎相同（余弦相似度高于 0.99，相对离散度低于 0.1）",
                                       per_seed(lambda pre, post, plain, r: all_of(above(plain.init_cosine, 0.99, name="余弦相似度"),
                                                                                   below(plain.init_spread, 0.1, name="相对离散度")))),
        "collapse_is_fast": Claim("去掉残差，两个块之后余弦相似度就已超过 0.9",
                                  per_seed(lambda pre, post, plain, r: above(plain.init_cosine_by_layer[2], 0.9, name="两个块之后的余弦相似度"))),
        "no_residual_stuck": Claim("去掉残差的网络学不动：损失停在 ln 10 附近，准确率和瞎猜差不多",
                                   per_seed(lambda pre, post, plain, r: all_of(below(abs(plain.last_loss - chance_loss), 0.05, name="损失与 ln 10 之差"),
                                                                               below(plain.accuracy, 0.15, name="准确率")))),
        "residual_distinct": Claim("有残差时，初始化时各位置的向量仍然各不相同（余弦相似度低于 0.3）",
                                   per_seed(lambda pre, post, plain, r: all_of(below(pre.init_cosine, 0.3, name="前置"),
                                                                               below(post.init_cosine, 0.3, name="后置")))),
        "residual_learns": Claim("有残差的两种块都学会了任务（损失接近 0，准确率高于 99%）",
                                 per_seed(lambda pre, post, plain, r: all_of(*(all_of(below(x.last_loss, 0.05, name=f"{n}的损失"),
                                                                                      above(x.accuracy, 0.99, name=f"{n}的准确率"))
                                                                               for n, x in (("前置", pre), ("后置", post)))))),
        # 右图第 40 步处的点：第 31~40 步损失的平均（图中 SMOOTH 步的滑动平均）
        "slow_start": Claim("到第 40 步，三种块的损失都还高于瞎猜损失的 80%（图中第 40 步处的滑动平均）",
                            per_seed(lambda pre, post, plain, r: all_of(*(above(sum(x.losses[40 - SMOOTH:40]) / SMOOTH, 0.8 * chance_loss, name=NAMES[v])
                                                                          for v, x in r.items())))),
    }

    table = Table(
        columns=["块的写法", "初始化时的平均余弦相似度", "初始化时的相对离散度", "前 50 步的平均损失",
                 "最后 50 步的平均损失", "训练后的准确率"],
        rows=[[NAMES[v], r.init_cosine, r.init_spread, r.first_loss, r.last_loss, r.accuracy]
              for v, r in runs.items()],
        formats=["", ".3f", ".3f", ".3f", ".3f", ".1%"],
        kind="trained",
    )

    fig, (ax_cos, ax_loss) = new_figure(ncols=2, width=7.6, height=3.2)
    styles = {"pre": "o-", "post": "s--", "pre_no_residual": "^:"}
    for v, r in runs.items():
        ax_cos.plot(range(CONFIG.n_layers + 1), r.init_cosine_by_layer, styles[v], label=NAMES[v], markersize=4)
        steps = range(SMOOTH, CONFIG.steps + 1)
        ax_loss.plot(steps, moving_average(r.losses, SMOOTH), styles[v][1:], label=NAMES[v])
    ax_cos.set(xlabel="经过的块数（初始化时）", ylabel="位置之间的平均余弦相似度", ylim=(0, 1.05),
               xticks=range(CONFIG.n_layers + 1))
    ax_loss.axhline(chance_loss, color="gray", lw=2.5, alpha=0.35, zorder=0)  # 粗而淡，去掉残差的那条线画在它上面也看得见
    ax_loss.text(CONFIG.steps / 2, chance_loss * 0.8, "瞎猜的损失 ln 10", ha="center", va="top", fontsize=8,
                 color="gray")
    ax_loss.set(xlabel="训练步数", ylabel=f"训练损失（{SMOOTH} 步滑动平均）", yscale="log")
    ax_cos.legend(fontsize=8)

    return {
        "table": table,
        "figure": Figure(fig, kind="trained"),
        "no_residual_cosine_after_1": Value(plain.init_cosine_by_layer[1], ".2f", kind="trained"),
        "no_residual_cosine_after_2": Value(plain.init_cosine_by_layer[2], ".2f", kind="trained"),
        "embedding_cosine": Value(plain.init_cosine_by_layer[0], ".2f", kind="trained"),
        "no_residual_cosine": Value(plain.init_cosine, ".3f", kind="trained"),
        "no_residual_accuracy": Value(plain.accuracy, ".1%", kind="trained"),
        "no_residual_last_loss": Value(plain.last_loss, ".3f", kind="trained"),
        "pre_cosine": Value(pre.init_cosine, ".3f", kind="trained"),
        "post_cosine": Value(post.init_cosine, ".3f", kind="trained"),
        "pre_accuracy": Value(pre.accuracy, ".1%", kind="trained"),
        "post_accuracy": Value(post.accuracy, ".1%", kind="trained"),
        "seeds": Value(len(SEEDS), "d"),
        **claims,
    }

