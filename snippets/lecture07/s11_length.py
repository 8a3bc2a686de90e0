"""第 11.3 节：四种位置编码 × 三个种子，在比训练时更长的句子上还能做对主谓一致吗？

模型来自 s11_positions_* 四个片段（训练集最多 3 个修饰语）。每个修饰语个数 0~10 各 1000 道题，所有模型做同一批题；
同一批题再按前缀长度（主动词的位置）分组，看错误出在哪些位置上。单个训练在长句上的结果会因为浮点运算顺序
这样的小差别而翻转，所以表里给的是三个种子的平均和每个模型各自的结果；正文只说在各次重算里都成立的结论，并注明它说的是平均还是每个种子。
"""

from statistics import mean

from transformer_book import toy_language as tl
from transformer_book.book import (Claim, Figure, Table, Value, above, all_of, artifact, at_least, below, between, equal,
                                   largest, less, smallest)
from transformer_book.checkpoint import unpack
from transformer_book.lecture07.agreement import longest_prefix
from transformer_book.lecture07.untrained_rows import untrained_rows
from transformer_book.lecture07.experiments import (AGREEMENT_SEED, LENGTH_COUNTS, N_AGREEMENT, POSITION_SCHEMES, POSITION_SEEDS,
                                                    SCHEME_NAMES, TRAIN_MAX_MODIFIERS, length_generalisation,
                                                    load_toy_data, training_positions)
from transformer_book.plotting import new_figure

REQUIRES = ["lecture07/s11_positions_learned", "lecture07/s11_positions_sinusoidal",
            "lecture07/s11_positions_rope", "lecture07/s11_positions_none"]  # 引擎要求写成字面量
BUDGET_SECONDS = 90
SEEN = range(TRAIN_MAX_MODIFIERS + 1)  # 0~3 个修饰语：训练时见过的长度
LONGER = [k for k in LENGTH_COUNTS if k > TRAIN_MAX_MODIFIERS]
MIN_ITEMS = 20  # 按前缀长度作图时，题数少于它的前缀长度不画（比例太不稳定）


def compute():
    data = load_toy_data()
    prefix = {k: longest_prefix(tl.agreement_test_set(k, N_AGREEMENT, seed=AGREEMENT_SEED)) for k in LENGTH_COUNTS}
    ppl, res = {}, {}
    for scheme in POSITION_SCHEMES:
        for seed in POSITION_SEEDS:
            packed = artifact(f"lecture07/s11_positions_{scheme}", f"model_seed{seed}")
            ppl[scheme, seed] = packed["test_perplexity"]
            res[scheme, seed] = length_generalisation(unpack(packed), data.vocab)
    acc = {key: r.by_count for key, r in res.items()}  # (做法, 种子) → {修饰语个数: 准确率}

    # 表 1：三个种子的平均
    avg_acc = {s: {k: mean(acc[s, seed][k] for seed in POSITION_SEEDS) for k in LENGTH_COUNTS} for s in POSITION_SCHEMES}
    avg_ppl = {s: mean(ppl[s, seed] for seed in POSITION_SEEDS) for s in POSITION_SCHEMES}
    columns = ["位置编码", "测试集困惑度", "0~3 个（最低）"] + [f"{k} 个（≤{prefix[k]}）" for k in LONGER]
    mean_table = Table(
        columns=columns, formats=["", ".3f"] + [".1%"] * (1 + len(LONGER)), kind="trained", kinds={"位置编码": "exact"},
        rows=[[SCHEME_NAMES[s], avg_ppl[s], min(avg_acc[s][k] for k in SEEN), *[avg_acc[s][k] for k in LONGER]]
              for s in POSITION_SCHEMES])

    # 表 2：十二个模型各自的结果
    longer_mean = {key: mean(a[k] for k in LONGER) for key, a in acc.items()}
    worst_k = {key: min(LONGER, key=a.get) for key, a in acc.items()}
    per_model = Table(
        columns=["位置编码", "种子", "测试集困惑度", "4~10 个修饰语的平均", "最差的一格", "出现在几个修饰语"],
        formats=["", "d", ".3f", ".1%", ".1%", "d"], kind="trained", kinds={"位置编码": "exact", "种子": "exact"},
        rows=[[SCHEME_NAMES[s], seed, ppl[s, seed], longer_mean[s, seed], acc[s, seed][worst_k[s, seed]],
               worst_k[s, seed]] for s in POSITION_SCHEMES for seed in POSITION_SEEDS])

    # 图：左，按修饰语个数（实线 = 三个种子的平均，空心点 = 单个种子）；右，可学习的位置嵌入按前缀长度
    pos = training_positions(data.train_sentences)
    fig, (ax_k, ax_t) = new_figure(ncols=2, width=9.0, height=3.6)
    markers = dict(learned="o", sinusoidal="s", rope="^", none="D")
    for i, s in enumerate(POSITION_SCHEMES):
        color = f"C{i}"
        ax_k.plot(LENGTH_COUNTS, [avg_acc[s][k] for k in LENGTH_COUNTS], "-", marker=markers[s], color=color,
                  label=SCHEME_NAMES[s])
        for seed in POSITION_SEEDS:
            ax_k.plot(LENGTH_COUNTS, [acc[s, seed][k] for k in LENGTH_COUNTS], linestyle="none",
                      marker=markers[s], markerfacecolor="none", color=color, alpha=0.5, markersize=4)
    ax_k.axvspan(-0.3, TRAIN_MAX_MODIFIERS + 0.3, color="0.9", zorder=0)
    ax_k.set(xlabel="修饰语个数（灰底：训练时见过）", ylabel="主谓一致准确率", ylim=(-0.03, 1.03),
             xticks=list(LENGTH_COUNTS))
    ax_k.legend(fontsize=8, loc="lower left")
    styles = ["o-", "s--", "^-.", "D:"]
    for seed, style in zip(POSITION_SEEDS, styles):
        by_prefix = res["learned", seed].by_prefix
        ts = [t for t, (n, _) in by_prefix.items() if n >= MIN_ITEMS]
        ax_t.plot(ts, [by_prefix[t][1] for t in ts], style, markersize=3, label=f"可学习的位置嵌入，种子 {seed}")
    ax_t.axvspan(pos.longest_prefix + 0.5, pos.longest_input + 0.5, color="C3", alpha=0.15, zorder=0,
                 label="预测主动词的位置：训练中读到它时，主动词就是它或已经出现")
    ax_t.set(xlabel="前缀长度（含 <s>）", ylabel="主谓一致准确率", ylim=(-0.03, 1.03))
    ax_t.legend(fontsize=7, loc="lower right")

    # ---- 正文依赖的说法，逐条判定 ----
    with_pos = [s for s in POSITION_SCHEMES if s != "none"]
    in_dist = min(acc[key][k] for key in acc for k in SEEN)
    learned_far = min(acc["learned", seed][k] for seed in POSITION_SEEDS for k in LONGER if k >= 6)
    zone = range(pos.longest_prefix + 1, pos.longest_input + 1)  # 训练中只出现在主动词之后的前缀长度

    def zone_accuracy(inside):  # 可学习的位置嵌入：落在（或不落在）这个区间的题，三个种子合起来的准确率
        cells = [(n, a) for seed in POSITION_SEEDS for t, (n, a) in res["learned", seed].by_prefix.items()
                 if (t in zone) == inside]
        return sum(n * a for n, a in cells) / sum(n for n, _ in cells)

    share_in_zone = {k: mean(it.verb_pos in zone for it in tl.agreement_test_set(k, N_AGREEMENT, seed=AGREEMENT_SEED))
                     for k in (4, 5)}
    scheme_avg = {s: mean(longer_mean[s, seed] for seed in POSITION_SEEDS) for s in POSITION_SCHEMES}
    # 可学习的位置表里训练中从没读到过的行：收不到梯度，只被 AdamW 的权重衰减一步步缩小
    never_read = [untrained_rows(artifact("lecture07/s11_positions_learned", f"model_seed{seed}"), pos.longest_input, seed)
                  for seed in POSITION_SEEDS]
    spread = {s: max(max(acc[s, seed][k] for seed in POSITION_SEEDS) - min(acc[s, seed][k] for seed in POSITION_SEEDS)
                     for k in LONGER) for s in POSITION_SCHEMES}
    lowest = min(acc, key=lambda key: acc[key][worst_k[key]])
    ppl_spread = max(avg_ppl[s] for s in with_pos) - min(avg_ppl[s] for s in with_pos)
    rope_collapsed = sum(acc["rope", seed][max(LONGER)] < 0.5 for seed in POSITION_SEEDS)

    results = {
        "mean": mean_table,
        "per_model": per_model,
        "figure": Figure(fig, kind="trained"),
        "n_seeds": Value(len(POSITION_SEEDS), "d"),
        "n_models": Value(len(acc), "d"),
        "ppl_none_mean": Value(avg_ppl["none"], ".3f", kind="trained"),
        "lowest_scheme": Value(SCHEME_NAMES[lowest[0]], kind="trained"),
        "lowest_seed": Value(lowest[1], "d", kind="trained"),
        "lowest_count": Value(worst_k[lowest], "d", kind="trained"),
        "lowest_accuracy": Value(acc[lowest][worst_k[lowest]], ".1%", kind="trained"),
        "rope_collapsed": Value(rope_collapsed, "d", kind="trained"),
        "train_longest_prefix": Value(pos.longest_prefix, "d"),
        "train_longest_input": Value(pos.longest_input, "d"),
        "error_zone_first": Value(pos.longest_prefix + 1, "d"),
        "never_read_first": Value(pos.longest_input + 1, "d"),  # 前缀长度从它起，主动词落在训练中从没读到过的位置
        "never_read_initial_std": Value(mean(r.initial_std for r in never_read), ".3f"),
        "never_read_ratio": Value(mean(r.ratio for r in never_read), ".0%", kind="trained"),
        "never_read_shrunk_a_little": Claim("这些行的标准差比初始化时小，但三个种子都还在初始化时的 90% 以上",
                                            all_of(*(between(r.ratio, 0.9, 1.0, name=f"种子 {seed}：训练后÷初始化")
                                                     for seed, r in zip(POSITION_SEEDS, never_read)))),
        "share_in_zone_4": Value(share_in_zone[4], ".1%"),
        "share_in_zone_5": Value(share_in_zone[5], ".1%"),
        "learned_zone_inside": Value(zone_accuracy(True), ".1%", kind="trained"),
        "learned_zone_outside": Value(zone_accuracy(False), ".1%", kind="trained"),
        "seen_lengths_perfect": Claim("所有位置编码、所有种子在 0~3 个修饰语上都有 99% 以上",
                                      at_least(in_dist, 0.99, name="最低的一格")),
        "ppl_close": Claim("三种带位置信息的做法，测试集困惑度（三个种子的平均）相差不到 0.02",
                           below(ppl_spread, 0.02, name="最大差")),
        "none_ppl_highest": Claim("不加位置信息的模型困惑度最高", largest(avg_ppl, "none"),
                                  uncertain="句中说明差距与扰动带来的浮动同一量级，下面的解释以“如果这点差距是真的”为前提"),
        "learned_far_recovers": Claim("可学习的位置嵌入：三个种子在 6~10 个修饰语上都回到 85% 以上",
                                      at_least(learned_far, 0.85, name="最低的一格")),
        "learned_worst_at_4": Claim("可学习的位置嵌入：三个种子都在 4 个修饰语时最差",
                                    all_of(*(equal(**{f"种子{seed}最差的修饰语个数": worst_k["learned", seed],
                                                      "期望": TRAIN_MAX_MODIFIERS + 1}) for seed in POSITION_SEEDS))),
        "learned_errors_in_zone": Claim("可学习的位置嵌入：落在这个区间里的题，准确率低于区间之外的题",
                                        less(区间内=zone_accuracy(True), 区间外=zone_accuracy(False)),
                                        uncertain="句中说明区间内的准确率在重算之间浮动不小，只说每一次都低于区间之外"),
        "zone_explains_4_vs_5": Claim("4 个修饰语的题大多落在这个区间，5 个的大多越过了它",
                                      all_of(above(share_in_zone[4], 0.5, name="4 个修饰语落在区间里的比例"),
                                             below(share_in_zone[5], 0.5, name="5 个修饰语落在区间里的比例"))),
        "rope_lowest": Claim("4~10 个修饰语的平均准确率：RoPE 是四种做法里最低的", smallest(scheme_avg, "rope"),
                             uncertain="句中说明这个排名在各次扰动重算里没有变，但差距与扰动带来的浮动同一量级"),
        "rope_often_collapses": Claim("RoPE 的几个种子里，多数在 10 个修饰语时跌到随机猜测的 50% 以下",
                                      at_least(rope_collapsed, len(POSITION_SEEDS) // 2 + 1, name="跌到 50% 以下的种子数"),
                                      uncertain="句中说明跌破的种子数随扰动而变"),
        "seeds_disagree": Claim("至少有一种做法，几个种子在同一个修饰语个数上相差 20 个百分点以上",
                                above(max(spread.values()), 0.2, name="最大的种子间差"),
                                uncertain="句中说明各做法的差距本身随扰动而变"),
        "lowest_below_chance": Claim("最差的一格远低于随机猜测的 50%（不到 25%）",
                                     below(acc[lowest][worst_k[lowest]], 0.25, name="最差的一格")),
    }
    for s in POSITION_SCHEMES:
        results[f"longer_avg_{s}"] = Value(scheme_avg[s], ".1%", kind="trained")
        results[f"seed_spread_{s}"] = Value(spread[s], ".0%", kind="trained")
    return results
