"""第 11.2 节：主谓一致——修饰语越多，主语离主动词越远；迷你 GPT 和 RNN 还能选对动词形式吗？

每个修饰语个数 1000 道题，修饰语里的每个名词都和主语单复数相反（最难的情形）；两个模型做的是同一批题。
训练语料最多 3 个修饰语。模型在训练中读进去的片段最长多少个词元，由训练语料算出（``training_positions``）：
4 个修饰语的题，前缀大多仍在这个长度之内；6 个及以上的题，前缀全都超出了它。
"""

from statistics import mean


from transformer_book import toy_language as tl
from transformer_book.lecture07.agreement import agreement_table
from transformer_book.checkpoint import unpack
from transformer_book.book import Claim, Table, Value, above, all_of, artifact, at_least, at_most
from transformer_book.lecture07.experiments import (AGREEMENT_COUNTS, AGREEMENT_SEED, N_AGREEMENT, TRAIN_MAX_MODIFIERS,
                                                    load_toy_data, training_positions)

REQUIRES = ["lecture07/s11_train"]


def compute():
    data = load_toy_data()
    vocab = data.vocab
    read = training_positions(data.train_sentences).longest_input  # 训练中读进去的最长片段（词元）
    within_read = {k: mean(it.verb_pos <= read for it in tl.agreement_test_set(k, N_AGREEMENT, seed=AGREEMENT_SEED))
                   for k in AGREEMENT_COUNTS}  # 前缀不超出这个长度的题所占的比例
    gpt = unpack(artifact("lecture07/s11_train", "gpt"))
    rnn = unpack(artifact("lecture07/s11_train", "rnn"))
    kwargs = dict(n=N_AGREEMENT, seed=AGREEMENT_SEED)
    gpt_rows = agreement_table(gpt, vocab, AGREEMENT_COUNTS, **kwargs)
    rnn_rows = agreement_table(rnn, vocab, AGREEMENT_COUNTS, **kwargs)

    table = Table(
        columns=["修饰语个数", "平均距离", "最长前缀（含 `<s>`）", "RNN", "迷你 GPT"],
        rows=[[g.n_modifiers, g.mean_distance, g.longest_prefix, r.accuracy, g.accuracy]
              for g, r in zip(gpt_rows, rnn_rows)],
        formats=["d", ".1f", "d", ".1%", ".1%"],
        kinds={"RNN": "trained", "迷你 GPT": "trained"},
    )
    seen = [(g, r) for g, r in zip(gpt_rows, rnn_rows) if g.n_modifiers <= TRAIN_MAX_MODIFIERS]
    unseen = [(g, r) for g, r in zip(gpt_rows, rnn_rows) if g.n_modifiers > TRAIN_MAX_MODIFIERS]
    worst = min(unseen, key=lambda gr: gr[0].accuracy)[0]
    by_k = {g.n_modifiers: g for g in gpt_rows}
    return {
        "seen_lengths_perfect": Claim("训练时见过的长度上，两个模型都全对",
                                      all_of(*(at_least(a, 1.0, name=f"{n}，{g.n_modifiers} 个修饰语")
                                               for g, r in seen for n, a in (("迷你GPT", g.accuracy), ("RNN", r.accuracy))))),
        "rnn_perfect_longer": Claim("更长的句子上，RNN 仍然全对",
                                    all_of(*(at_least(r.accuracy, 1.0, name=f"{g.n_modifiers} 个修饰语") for g, r in unseen))),
        "gpt_only_dips_at_4": Claim("迷你 GPT 在更长的句子上只有 4 个修饰语一格可能掉下去，其余都在 98% 以上",
                                    all_of(*(at_least(g.accuracy, 0.98, name=f"{g.n_modifiers} 个修饰语")
                                             for g, _ in unseen if g.n_modifiers != TRAIN_MAX_MODIFIERS + 1))),

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
        "longest_prefix_seen": Value(by_k[TRAIN_MAX_MODIFIERS].longest_prefix, "d"),
        "longest_prefix_4": Value(by_k[4].longest_prefix, "d"),
        "longest_prefix_8": Value(by_k[8].longest_prefix, "d"),
        "distance_8": Value(by_k[8].mean_distance, ".1f"),
        "gpt_worst_accuracy": Value(worst.accuracy, ".1%", kind="trained"),
        "gpt_worst_modifiers": Value(worst.n_modifiers, "d", kind="trained"),
        "gpt_accuracy_8": Value(by_k[8].accuracy, ".1%", kind="trained"),

    }
