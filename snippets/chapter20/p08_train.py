"""实践 P08：在随书的中文语料上训练一个字符级、仅解码器的迷你 Transformer。

种子 0 的训练给出损失曲线和训练前后的样本，它训练好的参数和分词器交给第 20 章的其他片段
（解码策略、KV 缓存、注意力热力图……），它们用 ``REQUIRES = ["chapter20/p08_train"]`` 取用。
整个训练结果（``result``）也交给实践 P08 的笔记本页：同样的数据、设置和种子，构建时笔记本不必再训练一遍。
另外两个种子（初始化和取批次的顺序不同）只为核对正文的说法：每个说法在每个种子上都要成立。
"""

from dataclasses import replace

import math

from transformer_book.chapter20 import p08
from transformer_book.book import Artifact, Claim, Figure, Table, Value, all_of, below, every_seed, less
from transformer_book.plotting import new_figure

DATA_FILES = ["src/transformer_book/data/p08/explanations.txt", "src/transformer_book/data/p08/letters.txt", "src/transformer_book/data/p08/notes.txt", "src/transformer_book/data/p08/stories.txt"]
BUDGET_SECONDS = 150
SEEDS = (0, 1, 2)
PROMPTS = ["一月", "天空为什么", "妈妈："]


def compute():
    config = p08.P08Config()
    data = p08.prepare_data(val_fraction=config.val_fraction)
    result = p08.train_p08(config, data, prompts=PROMPTS, sample_tokens=40)
    others = {s: p08.train_p08(replace(config, seed=s), data) for s in SEEDS[1:]}
    curves = {0: (result.train_loss, result.val_loss, result.steps),
              **{s: (r.train_loss, r.val_loss, r.steps) for s, r in others.items()}}  # 每个种子的训练、验证损失
    uniform = math.log(data.tokenizer.vocab_size)  # 完全随机地猜：每个字符的概率都是 1/V
    unigram = p08.unigram_loss(data)
    val, train = result.val_loss, result.train_loss

    fig, ax = new_figure(width=6.4, height=3.6)
    ax.plot(result.steps, result.train_loss, "o-", markersize=3, label="训练损失（这一段的平均）")
    ax.plot(result.steps, result.val_loss, "s-", markersize=3, label="验证损失")
    ax.axhline(uniform, color="gray", linestyle=":", label="均匀猜测 ln V")
    ax.axhline(unigram, color="gray", linestyle="--", label="只看字频的基线")
    ax.set(xlabel="训练步数", ylabel="交叉熵（奈特 / 字符）", ylim=(0, uniform + 0.8))
    ax.legend(loc="lower left")

    shown = [i for i, s in enumerate(result.steps) if s % 100 == 0]
    return {
        "loss_curve": Figure(fig, kind="trained"),
        "loss_table": Table(
            columns=["训练步数", "训练损失", "验证损失"],
            rows=[[result.steps[i], result.train_loss[i], result.val_loss[i]] for i in shown],
            formats=["d", ".3f", ".3f"],
            kind="trained", kinds={"训练步数": "exact"},
        ),
        "samples": Table(
            columns=["提示", "训练前的续写", "训练后的续写"],
            rows=[[p, p08.visible(result.samples_before[p]), p08.visible(result.samples_after[p])] for p in PROMPTS],
            kinds={"训练后的续写": "trained"},
        ),
        "starts_at_uniform": Claim("训练前的验证损失与均匀猜测相当（相差不到 0.1）", below(abs(val[0] - uniform), 0.1, name="与均匀猜测之差")),
        "beats_unigram": Claim("训练后的验证损失低于只看字频的基线",
                               every_seed({s: all_of(less(训练后=v[-1], 字频基线=unigram), less(字频基线=unigram, 训练前=v[0]))
                                           for s, (t, v, _) in curves.items()})),
        "overfits": Claim("训练损失比验证损失低得多（至少低 0.5）",
                          every_seed({s: less(训练损失=t[-1], 验证损失减05=v[-1] - 0.5) for s, (t, v, _) in curves.items()})),
        "plateau": Claim("验证损失在后半程下降得很少：不到前半程下降的十分之一",
                         every_seed({s: below((v[st.index(config.steps // 2)] - v[-1]) / (v[0] - v[st.index(config.steps // 2)]),
                                              0.1, name="后半程的下降 ÷ 前半程的下降")
                                     for s, (t, v, st) in curves.items()})),
        "seeds": Value(len(SEEDS), "d"),
        "vocab_size": Value(data.tokenizer.vocab_size, ",d"),
        "train_chars": Value(len(data.train_ids), ",d"),
        "val_chars": Value(len(data.val_ids), ",d"),
        "n_parameters": Value(result.n_parameters, ",d"),
        "steps": Value(config.steps, "d"),
        "tokens_seen": Value(config.steps * config.batch_size * config.context, ",d"),
        "uniform_loss": Value(uniform, ".2f"),
        "unigram_loss": Value(unigram, ".2f"),
        "val_loss_initial": Value(result.val_loss[0], ".2f", kind="trained"),
        "val_loss_final": Value(result.val_loss[-1], ".2f", kind="trained"),
        "train_loss_final": Value(result.train_loss[-1], ".2f", kind="trained"),
        "val_perplexity_final": Value(math.exp(result.val_loss[-1]), ".0f", kind="trained"),

        "model": Artifact(p08.pack_model(result.model, config, data.tokenizer)),  # 交给第 20 章的其他片段
        "result": Artifact(p08.result_data(result)),  # 交给实践 P08 的笔记本（docs/chapter20/p08-practice.ipynb）

    }
