"""第 11.1 节：在玩具语言上训练迷你 GPT 和 RNN（LSTM），比较参数个数、每轮的验证集困惑度和测试集困惑度。

迷你 GPT：d = 64，4 个头，2 层，可学习的位置嵌入，Pre-LN，权重共享。RNN：第 5 讲的单层 LSTM，d = 64，权重共享。
两者用同一份数据（20,000 个训练句子）和同一套设置（8 轮，批量 64，AdamW，最大学习率 3e-3，预热 200 步，
余弦衰减）。每种模型用 3 个种子各训练一次（种子决定初始化和打乱数据的顺序）：比较两种模型的说法在每个种子上
都要成立；表和图画的是种子 0。种子 0 的两个模型交给第 11.2、11.3、11.4 节的片段，迷你 GPT 的三个种子也是第 11.3 节
“可学习的位置嵌入”的前三个种子。
"""

from dataclasses import replace


from transformer_book import toy_language as tl
from transformer_book.book import Artifact, Claim, Figure, Table, Value, all_of, below, every_seed, less
from transformer_book.lecture07.experiments import GPT_SPEC, RNN_SPEC, TRAIN_CONFIG, load_toy_data, package, train
from transformer_book.plotting import new_figure

BUDGET_SECONDS = 150
SEEDS = (0, 1, 2)


def compute():
    data = load_toy_data()
    gpts = {s: train(replace(GPT_SPEC, seed=s), data) for s in SEEDS}
    rnns = {s: train(replace(RNN_SPEC, seed=s), data) for s in SEEDS}
    gpt, rnn = gpts[0], rnns[0]  # 表和图画种子 0
    floor_dev = tl.language_perplexity(data.dev_sentences)
    floor_test = tl.language_perplexity(data.test_sentences)

    epochs = range(1, TRAIN_CONFIG.epochs + 1)
    dev_table = Table(
        columns=["轮次", "迷你 GPT", "RNN"],
        rows=[[e, g, r] for e, g, r in zip(epochs, gpt.dev_perplexity, rnn.dev_perplexity)],
        formats=["d", ".3f", ".3f"],
        kind="trained", kinds={"轮次": "exact"},
    )
    summary = Table(
        columns=["模型", "参数个数", "测试集困惑度"],
        rows=[["迷你 GPT", gpt.n_parameters, gpt.test_perplexity],
              ["RNN（LSTM）", rnn.n_parameters, rnn.test_perplexity],
              ["语言本身（下限）", "—", floor_test]],
        formats=["", ",d", ".3f"],
        kinds={"测试集困惑度": "trained"},
    )

    fig, ax = new_figure(width=5.6, height=3.4)
    ax.plot(epochs, gpt.dev_perplexity, "o-", label="迷你 GPT")
    ax.plot(epochs, rnn.dev_perplexity, "s--", label="RNN（LSTM）")
    ax.axhline(floor_dev, color="gray", linestyle=":", label="语言本身的下限")
    ax.set(xlabel="轮次", ylabel="验证集困惑度", xticks=list(epochs))
    ax.legend()

    gd, rd = gpt.dev_perplexity, rnn.dev_perplexity

    def per_seed(check):  # 同一个比较，在每个种子上各做一次：每个种子都成立才算成立
        return every_seed({s: check(gpts[s].dev_perplexity, rnns[s].dev_perplexity, gpts[s], rnns[s]) for s in SEEDS})

    return {
        "close_after_1": Claim("第 1 轮结束时，两个模型的验证集困惑度相差不到 0.5",
                               per_seed(lambda g, r, *_: below(abs(g[0] - r[0]), 0.5, name="相差")),
                               uncertain="句中说明迷你 GPT 第 1 轮的数换一种舍入重算就会变，变化可达零点几"),
        "gpt_ahead_at_end": Claim("最后两轮，迷你 GPT 的验证集困惑度都低于 RNN",
                                  per_seed(lambda g, r, *_: all_of(*(less(**{f"迷你GPT第{e}轮": a, f"RNN第{e}轮": b})
                                                                     for e, a, b in zip(epochs[-2:], g[-2:], r[-2:]))))),
        "gpt_slightly_lower": Claim("测试集上：语言本身的下限 < 迷你 GPT < RNN",
                                    per_seed(lambda g, r, gm, rm: all_of(less(下限=floor_test, 迷你GPT=gm.test_perplexity),
                                                                         less(迷你GPT=gm.test_perplexity, RNN=rm.test_perplexity)))),
        "both_near_floor": Claim("两个模型的测试集困惑度都在下限之上 3% 以内",
                                 per_seed(lambda g, r, gm, rm: all_of(below(rm.test_perplexity / floor_test, 1.03, name="RNN÷下限"),
                                                                      below(gm.test_perplexity / floor_test, 1.03, name="迷你GPT÷下限")))),
        "flat_from_6": Claim("第 6 轮起，两条验证集曲线的起伏都不到 0.1",
                             per_seed(lambda g, r, *_: all_of(*(below(max(c[5:]) - min(c[5:]), 0.1, name=f"{n}第 6~8 轮的起伏")
                                                                for n, c in (("迷你GPT", g), ("RNN", r)))))),
        "seeds": Value(len(SEEDS), "d"),
        **{f"gpt_test_seed{s}": Value(gpts[s].test_perplexity, ".3f", kind="trained") for s in SEEDS},
        **{f"rnn_test_seed{s}": Value(rnns[s].test_perplexity, ".3f", kind="trained") for s in SEEDS},
        "dev_perplexity": dev_table,
        "summary": summary,
        "curve": Figure(fig, kind="trained"),
        "gpt_parameters": Value(gpt.n_parameters, ",d"),
        "rnn_parameters": Value(rnn.n_parameters, ",d"),
        "parameter_ratio": Value(gpt.n_parameters / rnn.n_parameters, ".1f"),
        "steps": Value(gpt.steps, ",d"),
        "gpt_dev_1": Value(gpt.dev_perplexity[0], ".2f", kind="trained"),
        "rnn_dev_1": Value(rnn.dev_perplexity[0], ".2f", kind="trained"),
        "gpt_dev_2": Value(gpt.dev_perplexity[1], ".2f", kind="trained"),
        "rnn_dev_2": Value(rnn.dev_perplexity[1], ".2f", kind="trained"),
        "gpt_above_floor": Value(gpt.test_perplexity / floor_test - 1, ".1%", kind="trained"),
        "rnn_above_floor": Value(rnn.test_perplexity / floor_test - 1, ".1%", kind="trained"),
        "gpt_test": Value(gpt.test_perplexity, ".3f", kind="trained"),
        "rnn_test": Value(rnn.test_perplexity, ".3f", kind="trained"),

        "floor_test": Value(floor_test, ".3f"),
        "floor_dev": Value(floor_dev, ".3f"),
        "gpt": Artifact(package(GPT_SPEC, gpt)),
        **{f"gpt_seed{s}": Artifact(package(replace(GPT_SPEC, seed=s), gpts[s])) for s in SEEDS[1:]},
        "rnn": Artifact(package(RNN_SPEC, rnn)),
        **{f"rnn_seed{s}": Artifact(package(replace(RNN_SPEC, seed=s), rnns[s])) for s in SEEDS[1:]},
    }
