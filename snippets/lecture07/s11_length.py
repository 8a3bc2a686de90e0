"""第 11.3 节：四种位置编码 × 两个种子，在比训练时更长的句子上还能做对主谓一致吗？

模型来自 s11_positions_* 四个片段（训练集最多 3 个修饰语）。每个修饰语个数 0~10 各 1000 道题，所有模型做同一批题；
同一批题再按前缀长度（主动词的位置）分组，看错误出在哪些位置上。
"""

from statistics import mean

from transformer_book.agreement import longest_prefix
from transformer_book import toy_language as tl
from transformer_book.book import Claim, Figure, Table, Value, artifact
from transformer_book.experiments import (AGREEMENT_SEED, LENGTH_COUNTS, POSITION_SCHEMES, POSITION_SEEDS,
                                          SCHEME_NAMES, TRAIN_MAX_MODIFIERS, length_generalisation, load_toy_data,
                                          restore, training_positions)
from transformer_book.plotting import new_figure

REQUIRES = ["lecture07/s11_positions_learned", "lecture07/s11_positions_sinusoidal",
            "lecture07/s11_positions_rope", "lecture07/s11_positions_none"]  # 引擎要求写成字面量
BUDGET_SECONDS = 45
SEEN = range(TRAIN_MAX_MODIFIERS + 1)  # 0~3 个修饰语：训练时见过的长度
LONGER = [k for k in LENGTH_COUNTS if k > TRAIN_MAX_MODIFIERS]
MIN_ITEMS = 20  # 按前缀长度作图时，题数少于它的前缀长度不画（比例太不稳定）


def compute():
    data = load_toy_data()
    prefix = {k: longest_prefix(tl.agreement_test_set(k, 1000, seed=AGREEMENT_SEED)) for k in LENGTH_COUNTS}
    ppl, res = {}, {}
    for scheme in POSITION_SCHEMES:
        for seed in POSITION_SEEDS:
            snippet = f"lecture07/s11_positions_{scheme}"
            packed = artifact(snippet, f"model_seed{seed}")
            ppl[scheme, seed] = packed["test_perplexity"]
            res[scheme, seed] = length_generalisation(restore(packed), data.vocab)

    columns = ["位置编码", "测试集困惑度", "0~3 个（最低）"] + [f"{k} 个（≤{prefix[k]}）" for k in LONGER]
    formats = ["", ".3f"] + [".1%"] * (1 + len(LONGER))

    def row(name, p, acc):
        return [name, p, min(acc[k] for k in SEEN)] + [acc[k] for k in LONGER]

    results = {}
    for seed in POSITION_SEEDS:
        results[f"seed{seed}"] = Table(
            columns=columns, formats=formats, kind="trained", kinds={"位置编码": "exact"},
            rows=[row(SCHEME_NAMES[s], ppl[s, seed], res[s, seed].by_count) for s in POSITION_SCHEMES])
    avg_acc = {s: {k: mean(res[s, seed].by_count[k] for seed in POSITION_SEEDS) for k in LENGTH_COUNTS}
               for s in POSITION_SCHEMES}
    avg_ppl = {s: mean(ppl[s, seed] for seed in POSITION_SEEDS) for s in POSITION_SCHEMES}
    results["mean"] = Table(columns=columns, formats=formats, kind="trained", kinds={"位置编码": "exact"},
                            rows=[row(SCHEME_NAMES[s], avg_ppl[s], avg_acc[s]) for s in POSITION_SCHEMES])

    # 图：左，按修饰语个数（实线 = 两个种子的平均，空心点 = 单个种子）；右，可学习的位置嵌入按前缀长度
    pos = training_positions(data.train_sentences)
    fig, (ax_k, ax_t) = new_figure(ncols=2, width=9.0, height=3.6)
    markers = dict(learned="o", sinusoidal="s", rope="^", none="D")
    for i, s in enumerate(POSITION_SCHEMES):
        color = f"C{i}"
        ax_k.plot(LENGTH_COUNTS, [avg_acc[s][k] for k in LENGTH_COUNTS], "-", marker=markers[s], color=color,
                  label=SCHEME_NAMES[s])
        for seed in POSITION_SEEDS:
            ax_k.plot(LENGTH_COUNTS, [res[s, seed].by_count[k] for k in LENGTH_COUNTS], linestyle="none",
                      marker=markers[s], markerfacecolor="none", color=color, alpha=0.5, markersize=4)
    ax_k.axvspan(-0.3, TRAIN_MAX_MODIFIERS + 0.3, color="0.9", zorder=0)
    ax_k.set(xlabel="修饰语个数（灰底：训练时见过）", ylabel="主谓一致准确率", ylim=(-0.03, 1.03),
             xticks=list(LENGTH_COUNTS))
    ax_k.legend(fontsize=8, loc="lower left")
    for seed in POSITION_SEEDS:
        by_prefix = res["learned", seed].by_prefix
        ts = [t for t, (n, _) in by_prefix.items() if n >= MIN_ITEMS]
        ax_t.plot(ts, [by_prefix[t][1] for t in ts], "o-" if seed == 0 else "s--", markersize=3,
                  label=f"可学习的位置嵌入，种子 {seed}")
    ax_t.axvspan(pos.longest_prefix + 0.5, pos.longest_input + 0.5, color="C3", alpha=0.15, zorder=0,
                 label="训练中只出现在主动词之后的位置")
    ax_t.set(xlabel="前缀长度（含 <s>）", ylabel="主谓一致准确率", ylim=(-0.03, 1.03))
    ax_t.legend(fontsize=8, loc="lower right")

    # ---- 正文依赖的说法，逐条判定 ----
    in_dist = [res[s, seed].by_count[k] for s in POSITION_SCHEMES for seed in POSITION_SEEDS for k in SEEN]
    with_pos = [s for s in POSITION_SCHEMES if s != "none"]
    learned_far = [res["learned", seed].by_count[k] for seed in POSITION_SEEDS for k in LENGTH_COUNTS if k >= 6]
    zone = range(pos.longest_prefix + 1, pos.longest_input + 1)  # 训练中只出现在主动词之后的前缀长度
    zone_only = []
    for seed in POSITION_SEEDS:  # 可学习的位置嵌入：错误集中在这几个前缀长度上
        by_prefix = res["learned", seed].by_prefix
        inside = [acc for t, (n, acc) in by_prefix.items() if t in zone]
        outside = [acc for t, (n, acc) in by_prefix.items() if t not in zone]
        zone_only.append(min(outside) >= 0.99 and max(inside) < 0.99)
    worst_k = [min(LONGER, key=res["learned", seed].by_count.get) for seed in POSITION_SEEDS]
    share_in_zone = {k: mean(it.verb_pos in zone for it in tl.agreement_test_set(k, 1000, seed=AGREEMENT_SEED))
                     for k in (4, 5)}
    split = {s: [min(res[s, seed].by_count[k] for k in LONGER) for seed in POSITION_SEEDS] for s in ("sinusoidal", "none")}
    longer_avg = {s: mean(avg_acc[s][k] for k in LONGER) for s in POSITION_SCHEMES}
    ranking = sorted(POSITION_SCHEMES, key=longer_avg.get, reverse=True)
    seed_gap = {s: max(abs(res[s, 0].by_count[k] - res[s, 1].by_count[k]) for k in LENGTH_COUNTS)
                for s in POSITION_SCHEMES}
    widest = max(POSITION_SCHEMES, key=seed_gap.get)
    lowest = min(((s, seed, k) for s in POSITION_SCHEMES for seed in POSITION_SEEDS for k in LENGTH_COUNTS),
                 key=lambda c: res[c[0], c[1]].by_count[c[2]])
    lowest_accuracy = res[lowest[0], lowest[1]].by_count[lowest[2]]
    ppl_spread = max(avg_ppl[s] for s in with_pos) - min(avg_ppl[s] for s in with_pos)

    results.update({
        "figure": Figure(fig, kind="trained"),
        "ppl_with_pos_min": Value(min(ppl[s, seed] for s in with_pos for seed in POSITION_SEEDS), ".3f", kind="trained"),
        "ppl_with_pos_max": Value(max(ppl[s, seed] for s in with_pos for seed in POSITION_SEEDS), ".3f", kind="trained"),
        "ppl_none_mean": Value(avg_ppl["none"], ".3f", kind="trained"),
        "ranking": Value(" > ".join(SCHEME_NAMES[s] for s in ranking), kind="trained"),
        "lowest_scheme": Value(SCHEME_NAMES[lowest[0]], kind="trained"),
        "lowest_seed": Value(lowest[1], "d", kind="trained"),
        "lowest_count": Value(lowest[2], "d", kind="trained"),
        "lowest_accuracy": Value(lowest_accuracy, ".1%", kind="trained"),
        "widest_seed_gap_scheme": Value(SCHEME_NAMES[widest], kind="trained"),
        "widest_seed_gap": Value(seed_gap[widest], ".1%", kind="trained"),
        "train_longest_prefix": Value(pos.longest_prefix, "d"),
        "train_longest_input": Value(pos.longest_input, "d"),
        "error_zone_first": Value(pos.longest_prefix + 1, "d"),
        "share_in_zone_4": Value(share_in_zone[4], ".1%"),
        "share_in_zone_5": Value(share_in_zone[5], ".1%"),
        "learned_4_seed0": Value(res["learned", 0].by_count[4], ".1%", kind="trained"),
        "learned_4_seed1": Value(res["learned", 1].by_count[4], ".1%", kind="trained"),
        "seen_lengths_perfect": Claim("所有位置编码、所有种子在 0~3 个修饰语上都有 99% 以上", min(in_dist) >= 0.99,
                                      lowest=min(in_dist)),
        "ppl_close": Claim("三种带位置信息的做法，测试集困惑度相差不到 0.02", ppl_spread < 0.02, spread=ppl_spread),
        "none_ppl_highest": Claim("不加位置信息的模型困惑度最高", avg_ppl["none"] > max(avg_ppl[s] for s in with_pos)),
        "learned_far_perfect": Claim("可学习的位置嵌入：两个种子在 6~10 个修饰语上都有 99% 以上", min(learned_far) >= 0.99,
                                     lowest=min(learned_far)),
        "learned_errors_in_zone": Claim("可学习的位置嵌入：错误只出现在训练中只在主动词之后出现过的那几个前缀长度上",
                                        all(zone_only)),
        "learned_worst_at_4": Claim("可学习的位置嵌入：两个种子都在 4 个修饰语时最差",
                                    all(k == TRAIN_MAX_MODIFIERS + 1 for k in worst_k), worst=worst_k),
        "zone_explains_4_vs_5": Claim("4 个修饰语的题大多落在这个区间，5 个的大多越过了它",
                                      share_in_zone[4] > 0.5 > share_in_zone[5], **{f"k{k}": v for k, v in share_in_zone.items()}),
        "sinusoidal_seed0_perfect": Claim("正弦位置编码的种子 0 在所有长度上都有 99% 以上",
                                          min(res["sinusoidal", 0].by_count.values()) >= 0.99),
        "seeds_disagree": Claim("正弦编码与无位置信息各有一个种子在 4~10 个修饰语上都有 90% 以上，另一个种子掉到 80% 以下",
                                all(good >= 0.9 and bad < 0.8 for good, bad in split.values()),
                                **{f"{s}_seed{i}": v for s, vs in split.items() for i, v in enumerate(vs)}),
        "none_seed1_near_chance": Claim("无位置信息的种子 1 在 6 个以上修饰语时跌到接近随机猜测（60% 以下）",
                                        min(res["none", 1].by_count[k] for k in LONGER if k >= 6) <= 0.6),
        "learned_best_rope_worst": Claim("4~10 个修饰语的平均准确率：可学习的位置嵌入最高，RoPE 最低",
                                         ranking[0] == "learned" and ranking[-1] == "rope",
                                         **{f"avg_{s}": v for s, v in longer_avg.items()}),
        "seed_gaps_large": Claim("每种做法的两个种子都在某个长度上相差 20 个百分点以上，RoPE 相差超过 50 个百分点",
                                 min(seed_gap.values()) >= 0.2 and seed_gap["rope"] > 0.5, **seed_gap),
        "lowest_below_chance": Claim("最差的一格远低于随机猜测的 50%（不到 25%）", lowest_accuracy < 0.25,
                                     lowest=lowest_accuracy),
    })
    for s in POSITION_SCHEMES:
        results[f"longer_avg_{s}"] = Value(longer_avg[s], ".1%", kind="trained")
    return results

