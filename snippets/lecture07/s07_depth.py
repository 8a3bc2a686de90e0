"""第 7.1 节：8 层的网络，有残差与没有残差——初始化时的“坍缩”与训练 300 步的结果。

任务：随机词序列（词表 10 个词，长度 16），在每个位置 t 说出往前第 3 个词 x_{t−3}；瞎猜的准确率 10%，
损失 ln 10 ≈ 2.30。模型是参考实现的 TransformerLM（d = 32，4 个头，8 层，可学习的位置嵌入，GPT-2 初始化），
三种块：Pre-LN、Post-LN、去掉残差的 Pre-LN。同一个种子，AdamW，学习率 3e-3 固定不变、不预热，批量 32。

坍缩程度用两个量衡量，都在初始化时、256 条新序列上测：
- 平均余弦相似度：最后一个块输出的隐藏状态里，同一序列不同位置的向量两两之间的余弦相似度的平均；
- 相对离散度 ‖H − 1·h̄ᵀ‖ / ‖H‖：各位置的向量离它们的平均向量有多远（0 = 所有位置完全相同）。
"""

import math

from transformer_book.book import Figure, Table, Tolerance, Value
from transformer_book.depth_study import DepthConfig, depth_study
from transformer_book.plotting import new_figure

BUDGET_SECONDS = 60

CONFIG = DepthConfig()  # V = 10，T = 16，k = 3，d = 32，4 个头，8 层，300 步
NAMES = {"pre": "Pre-LN（有残差）", "post": "Post-LN（有残差）", "pre_no_residual": "Pre-LN 去掉残差"}
TRAINED = Tolerance(rel=0.02, abs=1e-3, reason="300 步 float32 训练：换一台机器（SIMD 宽度、求和顺序不同）末位差异会累积")
SMOOTH = 10  # 画损失曲线时取 10 步的滑动平均


def moving_average(xs, n):
    return [sum(xs[i:i + n]) / n for i in range(len(xs) - n + 1)]


def compute():
    runs = depth_study(tuple(NAMES), CONFIG, seed=0)
    chance_loss = math.log(CONFIG.vocab_size)

    # 正文的结论，逐条核对
    pre, post, plain = runs["pre"], runs["post"], runs["pre_no_residual"]
    assert plain.init_cosine > 0.99 and plain.init_spread < 0.05, "去掉残差，初始化时各位置就已几乎相同"
    assert max(pre.init_cosine, post.init_cosine) < 0.3, "有残差时，初始化时各位置的向量仍然各不相同"
    for r in (pre, post):
        assert r.last_loss < 0.05 and r.accuracy > 0.99, f"{NAMES[r.variant]} 应当学会这个任务"
    assert abs(plain.last_loss - chance_loss) < 0.05 and plain.accuracy < 0.15, "去掉残差应当学不动（停在瞎猜）"
    assert plain.init_cosine_by_layer[2] > 0.9, "去掉残差，两层之后余弦相似度就已超过 0.9"
    assert min(pre.first_loss, post.first_loss) > 0.8 * chance_loss, "前 50 步的损失应当还没降多少"
    assert post.init_cosine < pre.init_cosine, "正文说：我们测到的 Post-LN 余弦相似度比 Pre-LN 低（与讲义相反）"

    table = Table(
        columns=["块的写法", "初始化时的平均余弦相似度", "初始化时的相对离散度", "前 50 步的平均损失",
                 "最后 50 步的平均损失", "训练后的准确率"],
        rows=[[NAMES[v], r.init_cosine, r.init_spread, r.first_loss, r.last_loss, r.accuracy]
              for v, r in runs.items()],
        formats=["", ".3f", ".3f", ".3f", ".3f", ".1%"],
        tolerance=TRAINED,
    )

    fig, (ax_cos, ax_loss) = new_figure(ncols=2, width=7.6, height=3.2)
    styles = {"pre": "o-", "post": "s--", "pre_no_residual": "^:"}
    for v, r in runs.items():
        ax_cos.plot(range(CONFIG.n_layers + 1), r.init_cosine_by_layer, styles[v], label=NAMES[v], markersize=4)
        steps = range(SMOOTH, CONFIG.steps + 1)
        ax_loss.plot(steps, moving_average(r.losses, SMOOTH), styles[v][1:], label=NAMES[v])
    ax_cos.set(xlabel="经过的块数（初始化时）", ylabel="位置之间的平均余弦相似度", ylim=(0, 1.05),
               xticks=range(CONFIG.n_layers + 1))
    ax_loss.axhline(chance_loss, color="gray", lw=0.8, linestyle=":")
    ax_loss.text(CONFIG.steps / 2, chance_loss * 0.8, "瞎猜的损失 ln 10", ha="center", va="top", fontsize=8,
                 color="gray")
    ax_loss.set(xlabel="训练步数", ylabel=f"训练损失（{SMOOTH} 步滑动平均）", yscale="log")
    ax_cos.legend(fontsize=8)

    return {
        "table": table,
        "figure": Figure(fig, tolerance=TRAINED),
        "no_residual_cosine_after_1": Value(plain.init_cosine_by_layer[1], ".2f", tolerance=TRAINED),
        "no_residual_cosine_after_2": Value(plain.init_cosine_by_layer[2], ".2f", tolerance=TRAINED),
        "embedding_cosine": Value(plain.init_cosine_by_layer[0], ".2f", tolerance=TRAINED),
        "no_residual_cosine": Value(plain.init_cosine, ".3f", tolerance=TRAINED),
        "no_residual_accuracy": Value(plain.accuracy, ".1%", tolerance=TRAINED),
        "no_residual_last_loss": Value(plain.last_loss, ".3f", tolerance=TRAINED),
        "pre_cosine": Value(pre.init_cosine, ".3f", tolerance=TRAINED),
        "post_cosine": Value(post.init_cosine, ".3f", tolerance=TRAINED),
        "pre_accuracy": Value(pre.accuracy, ".1%", tolerance=TRAINED),
        "post_accuracy": Value(post.accuracy, ".1%", tolerance=TRAINED),
    }


if __name__ == "__main__":
    from transformer_book.book.show import main

    main(compute)
