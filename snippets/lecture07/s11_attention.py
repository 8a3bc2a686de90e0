"""第 11.4 节：在预测主动词的位置上，迷你 GPT 的每个头把注意力分给了谁？

1000 道含 2 个修饰语的主谓一致题（修饰语里的名词都和主语单复数相反，即都是干扰名词）。
对每层每个头，统计前缀最后一个位置分给主语名词、每个干扰名词和 <s> 的平均权重；再看两个例句。
"""

import numpy as np

from transformer_book import toy_language as tl
from transformer_book.lecture07.agreement import attention_to_subject, verb_position_attention
from transformer_book.checkpoint import unpack
from transformer_book.book import Claim, Figure, Table, Value, above, all_of, artifact, below, equal, less, true
from transformer_book.lecture07.experiments import (AGREEMENT_SEED, ATTENTION_MODIFIERS, N_AGREEMENT, attention_by_kinds,
                                          first_item_with_kinds, head_label, load_toy_data)
from transformer_book.plotting import new_figure

REQUIRES = ["lecture07/s11_train"]
EXAMPLES = {"pp": ("pp", "pp"), "rc": ("rc", "rc")}  # 例句 1：两个介词短语；例句 2：两个主语关系从句


def compute():
    vocab = load_toy_data().vocab
    gpt = unpack(artifact("lecture07/s11_train", "gpt"))
    items = tl.agreement_test_set(ATTENTION_MODIFIERS, N_AGREEMENT, seed=AGREEMENT_SEED)
    summary = attention_to_subject(gpt, items, vocab)
    per_item = verb_position_attention(gpt, items, vocab)  # 每题 (L, h, T_i)
    to_bos = np.mean([w[..., 0].numpy() for w in per_item], axis=0)  # (L, h)
    last_starts = [tl.parse(it.tokens).modifiers[-1].start for it in items]  # 最后一个修饰语的首词（介词或 that）
    to_last_start = np.mean([w[..., t].numpy() for w, t in zip(per_item, last_starts)], axis=0)  # (L, h)
    subject, distractor = summary.subject.numpy(), summary.distractor.numpy()
    n_layers, n_heads = subject.shape
    heads = [(layer, h) for layer in range(n_layers) for h in range(n_heads)]

    table = Table(
        columns=["头（层.头）", "主语", "每个干扰名词", "主语 ÷ 均匀", "`<s>`", "最后一个修饰语的首词"],
        rows=[[head_label(layer, h), subject[layer, h], distractor[layer, h], subject[layer, h] / summary.uniform,
               to_bos[layer, h], to_last_start[layer, h]] for layer, h in heads],
        formats=["", ".3f", ".3f", ".1f", ".3f", ".3f"],
        kind="trained", kinds={"头（层.头）": "exact"},
    )

    # 最关注主语的头；按修饰语种类（介词短语 / 关系从句的四种组合）分别看它
    best = max(heads, key=lambda lh: subject[lh])
    by_kinds = attention_by_kinds(per_item, items)
    best_by_kinds = {kinds: float(w[best]) for kinds, w in by_kinds.items()}
    second_layer = [lh for lh in heads if lh[0] == n_layers - 1]
    # 分给 <s> 最多的头：只是这一次训练的现象。校准时的扰动重算里，它分给 <s> 的权重在均匀分配的 0.8~5 倍之间，
    # 没有哪一句“有一个头专看 <s>”的说法在所有重算里都成立，所以正文只把它当作这一次的观察，不给它说法。
    sink = max(heads, key=lambda lh: to_bos[lh])
    structure = max(heads, key=lambda lh: to_last_start[lh])

    results = {
        "heads": table,
        "uniform": Value(summary.uniform, ".3f"),
        "n_items": Value(summary.n_items, ",d"),
        "subject_head": Value(head_label(*best), kind="trained"),
        "subject_head_weight": Value(subject[best], ".3f", kind="trained"),
        "subject_head_distractor": Value(distractor[best], ".3f", kind="trained"),
        "subject_head_min_by_kind": Value(min(best_by_kinds.values()), ".3f", kind="trained"),
        "layer2_max_subject": Value(max(subject[lh] for lh in second_layer), ".3f", kind="trained"),
        "structure_head": Value(head_label(*structure), kind="trained"),
        "structure_head_weight": Value(to_last_start[structure], ".3f", kind="trained"),
        "sink_head": Value(head_label(*sink), kind="trained"),
        "sink_head_weight": Value(to_bos[sink], ".3f", kind="trained"),
        "subject_head_found": Claim("第 1 层有一个头几乎只看主语：分给主语的权重是均匀分配的 5 倍以上，"
                                    "分给每个干扰名词的不到均匀分配的三分之一",
                                    all_of(above(float(subject[best]) / summary.uniform, 5.0, name="主语权重÷均匀分配"),
                                           below(float(distractor[best]) / summary.uniform, 1 / 3, name="干扰名词权重÷均匀分配"),
                                           equal(所在的层=best[0] + 1, 期望=1))),
        "subject_head_all_kinds": Claim("这个头在四种句型上都把 90% 以上的权重给主语",
                                        all_of(*(above(v, 0.9, name="+".join(k)) for k, v in best_by_kinds.items()))),
        "layer2_no_subject_head": Claim("第 2 层没有同样专注主语的头（最多不到那个头的 90%）",
                                        less(第2层最多=max(float(subject[lh]) for lh in second_layer),
                                             那个头的90百分比=0.9 * float(subject[best]))),
        "structure_head_found": Claim("另有一个头大多只看最后一个修饰语的首词（80% 以上）",
                                      all_of(true(structure != best, name="不是同一个头"),
                                             above(float(to_last_start[structure]), 0.8, name="分给首词的权重"))),
    }

    # 两个例句：每个头在预测主动词的位置上分给前缀每个词的权重
    fig, axes = new_figure(nrows=2, width=7.2, height=5.6)
    for ax, (name, kinds) in zip(axes, EXAMPLES.items()):
        item = first_item_with_kinds(items, kinds)
        w = per_item[items.index(item)].reshape(n_layers * n_heads, -1).numpy()  # (L·h, T)
        results[f"example_{name}"] = Table(
            columns=["位置", "词"] + [head_label(*lh) for lh in heads],
            rows=[[t, f"`{tok}`"] + [w[i, t] for i in range(len(heads))] for t, tok in enumerate(item.prefix)],
            formats=["d", ""] + [".2f"] * len(heads),
            kind="trained", kinds={"位置": "exact", "词": "exact"},
        )
        results[f"example_{name}_sentence"] = Value(" ".join(item.prefix[1:]) + " ___")
        results[f"example_{name}_subject_weight"] = Value(w[heads.index(best), item.subject_pos], ".2f", kind="trained")
        results[f"example_{name}_distractor_max"] = Value(max(w[heads.index(best), list(item.distractor_pos)]),
                                                          ".2f", kind="trained")
        rc_verbs = [m.verb_pos for m in tl.parse(item.tokens).modifiers if m.verb_pos is not None]
        if rc_verbs:  # 从句动词同样“泄露”主语的单复数：分给它们最多的那个头给了多少？
            results[f"example_{name}_verb_max"] = Value(float(w[:, rc_verbs].max()), ".2f", kind="trained")
        image = ax.imshow(w, cmap="Blues", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(item.prefix)), item.prefix, rotation=45, ha="right")
        ax.set_yticks(range(len(heads)), [f"头 {head_label(*lh)}" for lh in heads])
        for t in (item.subject_pos, *item.distractor_pos):  # 主语和干扰名词用颜色标出
            ax.get_xticklabels()[t].set_color("C3" if t == item.subject_pos else "C1")
        ax.set_title(f"例句 {1 if name == 'pp' else 2}：预测主动词时各头的注意力（红：主语，橙：干扰名词）", fontsize=9)
    fig.colorbar(image, ax=axes, shrink=0.6, label="注意力权重")
    results["heatmap"] = Figure(fig, kind="trained", grid_labels=("头", "前缀里的词"))

    return results
