"""第 11.1 节：在玩具语言上训练迷你 GPT 和 RNN（LSTM），比较参数个数、每轮的验证集困惑度和测试集困惑度。

迷你 GPT：d = 64，4 个头，2 层，可学习的位置嵌入，Pre-LN，权重共享。RNN：第 5 讲的单层 LSTM，d = 64，权重共享。
两者用同一份数据（20,000 个训练句子）和同一套设置（8 轮，批量 64，AdamW，最大学习率 3e-3，预热 200 步，
余弦衰减），种子都是 0。训练好的两个模型交给第 11.2、11.3、11.4 节的片段。
"""

from transformer_book import toy_language as tl
from transformer_book.book import Artifact, Claim, Figure, Table, Value, all_of, below, less
from transformer_book.lecture07.experiments import GPT_SPEC, RNN_SPEC, TRAIN_CONFIG, load_toy_data, package, train
from transformer_book.plotting import new_figure

BUDGET_SECONDS = 90


def compute():
    data = load_toy_data()
    gpt = train(GPT_SPEC, data)
    rnn = train(RNN_SPEC, data)
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
    return {
        "close_after_1": Claim("第 1 轮结束时，两个模型的验证集困惑度相差不到 0.5", below(abs(gd[0] - rd[0]), 0.5, name="相差")),
        "gpt_ahead_from_3": Claim("第 3 轮起，迷你 GPT 的验证集困惑度一直低于 RNN",
                                  all_of(*(less(**{f"迷你GPT第{e}轮": g, f"RNN第{e}轮": r})
                                           for e, g, r in zip(epochs[2:], gd[2:], rd[2:]))),
                                  uncertain="句中说明这在各次扰动重算里都成立，但最接近的一轮差距与浮动同一量级"),
        "gpt_slightly_lower": Claim("测试集上：语言本身的下限 < 迷你 GPT < RNN",
                                    all_of(less(下限=floor_test, 迷你GPT=gpt.test_perplexity),
                                           less(迷你GPT=gpt.test_perplexity, RNN=rnn.test_perplexity))),
        "both_near_floor": Claim("两个模型的测试集困惑度都在下限之上 3% 以内",
                                 all_of(below(rnn.test_perplexity / floor_test, 1.03, name="RNN÷下限"),
                                        below(gpt.test_perplexity / floor_test, 1.03, name="迷你GPT÷下限"))),
        "flat_from_4": Claim("第 4 轮起，两条验证集曲线的起伏都不到 0.1",
                             all_of(*(below(max(c[3:]) - min(c[3:]), 0.1, name=f"{n}第 4~8 轮的起伏")
                                      for n, c in (("迷你GPT", gd), ("RNN", rd))))),
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
        "rnn": Artifact(package(RNN_SPEC, rnn)),
    }
