"""第 11.2 节：主谓一致——修饰语越多，主语离主动词越远；迷你 GPT 和 RNN 还能选对动词形式吗？

每个修饰语个数 1000 道题，修饰语里的每个名词都和主语单复数相反（最难的情形）；11.1 节三个种子的两种模型
做的是同一批题，说法要在每个种子上都成立。
训练语料最多 3 个修饰语。模型在训练中读进去的片段最长多少个词元，由训练语料算出（``training_positions``）：
4 个修饰语的题，前缀大多仍在这个长度之内；6 个及以上的题，前缀全都超出了它。
"""

from statistics import mean

from transformer_book import toy_language as tl
from transformer_book.lecture07.agreement import agreement_table
from transformer_book.checkpoint import unpack
from transformer_book.book import Claim, Table, Value, above, all_of, artifact, at_least, at_most, every_seed
from transformer_book.lecture07.experiments import (AGREEMENT_COUNTS, AGREEMENT_SEED, N_AGREEMENT, TRAIN_MAX_MODIFIERS,
                                                    load_toy_data, training_positions)

REQUIRES = ["lecture07/s11_train"]
SEEDS = (0, 1, 2)  # 11.1 节每个模型训练的三个种子（s11_train 的 SEEDS；少一个，这里取模型时就报错）


def compute():
    data = load_toy_data()
    vocab = data.vocab
    read = training_positions(data.train_sentences).longest_input  # 训练中读进去的最长片段（词元）
    within_read = {k: mean(it.verb_pos <= read for it in tl.agreement_test_set(k, N_AGREEMENT, seed=AGREEMENT_SEED))
                   for k in AGREEMENT_COUNTS}  # 前缀不超出这个长度的题所占的比例
    # 11.1 节的三个种子：种子 0 的模型叫 gpt / rnn，种子 1、2 的叫 gpt_seed1 / rnn_seed1 ……
    name = {0: ""} | {s: f"_seed{s}" for s in SEEDS[1:]}
    kwargs = dict(n=N_AGREEMENT, seed=AGREEMENT_SEED)
    gpt = {s: agreement_table(unpack(artifact("lecture07/s11_train", "gpt" + name[s])), vocab, AGREEMENT_COUNTS, **kwargs)
           for s in SEEDS}
    rnn = {s: agreement_table(unpack(artifact("lecture07/s11_train", "rnn" + name[s])), vocab, AGREEMENT_COUNTS, **kwargs)
           for s in SEEDS}
    gpt_rows = gpt[0]

    table = Table(
        columns=["修饰语个数", "平均距离", "最长前缀（含 `<s>`）", "RNN（三个种子中最低）",
                 *(f"迷你 GPT 种子 {s}" for s in SEEDS)],
        rows=[[g.n_modifiers, g.mean_distance, g.longest_prefix, min(rnn[s][i].accuracy for s in SEEDS),
               *(gpt[s][i].accuracy for s in SEEDS)]
              for i, g in enumerate(gpt_rows)],
        formats=["d", ".1f", "d", ".1%", *(".1%" for _ in SEEDS)],
        kinds={"RNN（三个种子中最低）": "trained", **{f"迷你 GPT 种子 {s}": "trained" for s in SEEDS}},
    )

    def per_seed(check):  # 同一个判断，在每个种子的两个模型上各做一次：每个种子都成立才算成立
        return every_seed({s: check(gpt[s], rnn[s]) for s in SEEDS})

    def seen(rows):  # 训练时见过的修饰语个数
        return [r for r in rows if r.n_modifiers <= TRAIN_MAX_MODIFIERS]

    def unseen(rows):
        return [r for r in rows if r.n_modifiers > TRAIN_MAX_MODIFIERS]

    by_k = {g.n_modifiers: g for g in gpt_rows}
    return {
        "seen_lengths_perfect": Claim("训练时见过的长度上，两个模型都全对",
                                      per_seed(lambda g, r: all_of(*(at_least(x.accuracy, 1.0, name=f"{n}，{x.n_modifiers} 个修饰语")
                                                                     for n, rows in (("迷你GPT", g), ("RNN", r))
                                                                     for x in seen(rows))))),
        "rnn_perfect_longer": Claim("更长的句子上，RNN 仍然全对",
                                    per_seed(lambda g, r: all_of(*(at_least(x.accuracy, 1.0, name=f"{x.n_modifiers} 个修饰语")
                                                                   for x in unseen(r))))),
        "gpt_only_dips_at_4": Claim("迷你 GPT 在更长的句子上只有 4 个修饰语一格可能掉下去，其余都在 98% 以上",
                                    per_seed(lambda g, r: all_of(*(at_least(x.accuracy, 0.98, name=f"{x.n_modifiers} 个修饰语")
                                                                   for x in unseen(g)
                                                                   if x.n_modifiers != TRAIN_MAX_MODIFIERS + 1)))),

        "mostly_read_at_4": Claim("4 个修饰语的题，大多数前缀没有超出训练中读过的最长片段",
                                  above(within_read[4], 0.5, name="不超出的比例")),
        "beyond_read_from_6": Claim("6 个及以上修饰语的题，前缀全都超出训练中读过的最长片段",
                                    all_of(*(at_most(within_read[k], 0.0, name=f"{k} 个修饰语不超出的比例")
                                             for k in AGREEMENT_COUNTS if k >= 6))),
        "train_longest_input": Value(read, "d"),
        "n_items": Value(N_AGREEMENT, ",d"),
        "share_read_4": Value(within_read[4], ".1%"),
        "table": table,
        "distance_per_modifier": Value(by_k[8].mean_distance / 8, ".1f"),
        "longest_prefix_4": Value(by_k[4].longest_prefix, "d"),
        "longest_prefix_8": Value(by_k[8].longest_prefix, "d"),
        "distance_8": Value(by_k[8].mean_distance, ".1f"),
        "seeds": Value(len(SEEDS), "d"),
    }
