"""第 20 章：注意力权重告诉了我们什么——P08 模型的热力图，以及一次干预实验。

1. 热力图：训练好的 P08 模型读一句验证集里的话，画出 2 层 × 4 个头的注意力权重（行 = 查询位置，
   列 = 被查看的位置；因果掩码使右上角全为 0）。
2. 统计：在验证集所有窗口上平均，每个头分给“自己”“前一个字”“标点”的权重，以及权重分布的熵；
   标点一栏附一个对照——若在看得见的位置上平均分配，标点应得多少。
3. 干预：把每个头的输出依次置零，看验证损失上升多少。权重描述“读了哪里”，干预才回答“去掉它要紧不要紧”。
"""

import torch

from transformer_book.chapter20 import analysis, p08
from transformer_book.book import (Claim, Figure, Table, Value, above, all_of, artifact, at_least, at_most, below,
                                   equal, less, true)
from transformer_book.plotting import new_figure

REQUIRES = ["chapter20/p08_train"]
LINE = "晚上包了一顿饺子，白菜猪肉馅的。"  # 出自 notes.txt 的验证部分
STRIPE = 0.25  # 一格的权重至少这么大，才算“深色”


def stripe_description(w, layer):
    """第 layer 层各头最醒目的一列：后面最多位置给它深色格子的那一列（并列的都列出）。"""
    parts = []
    for head in range(w.size(1)):
        ranked = analysis.attention_stripes(w[0, head], STRIPE)
        best = [c for c, n in ranked if n == ranked[0][1]]
        cols = "、".join(f"「{LINE[c]}」" for c in best)
        parts.append(f"头 {head + 1} 是{cols}（{ranked[0][1]} 个位置）")
    return f"第 {layer} 层：" + "，".join(parts)


def compute():
    model, config, tok = p08.unpack_model(artifact("chapter20/p08_train", "model"))  # 训练好的 P08 模型（eval 模式）
    data = p08.prepare_data(val_fraction=config.val_fraction)
    p08.require_validation_only(LINE, data)  # 例句必须是模型训练时没见过的

    with torch.no_grad():
        _, weights = model.forward_with_attention(torch.tensor([tok.encode(LINE)]))  # 每层 (1, h, T, T)
    fig, axes = new_figure(ncols=config.n_heads, nrows=config.n_layers, width=9.0, height=5.0)
    chars = list(LINE)
    for layer, w in enumerate(weights):
        for head in range(config.n_heads):
            ax = axes[layer][head]
            ax.imshow(w[0, head].numpy(), cmap="Blues", vmin=0.0, vmax=1.0)
            ax.set_title(f"第 {layer + 1} 层 · 头 {head + 1}", fontsize=9)
            ax.set_xticks(range(len(chars)), chars, fontsize=6)
            ax.set_yticks(range(len(chars)), chars, fontsize=6)
            ax.tick_params(length=0)
    comma = LINE.index("，")
    on_comma = [h + 1 for h in range(config.n_heads)
                if analysis.attention_stripes(weights[-1][0, h], STRIPE)[0][0] == comma]

    val_x, val_y = p08.eval_windows(data.val_ids, config.context)
    punctuation = torch.tensor([[tok.vocab[i] in analysis.PUNCTUATION for i in row] for row in val_x.tolist()])  # (N, T)
    stats = analysis.attention_statistics(model, val_x, marked=punctuation)
    base = p08.mean_loss(model, val_x, val_y)
    for s in stats:
        s["ablation"] = analysis.loss_without_head(model, val_x, val_y, s["layer"], s["head"]) - base
    uniform = analysis.uniform_attention_baseline(val_x, punctuation)
    rows = [[s["layer"], s["head"], s["self"], s["previous"], s["marked"], s["entropy"], s["ablation"]] for s in stats]
    rows.append(["对照", "平均分配", uniform["self"], uniform["previous"], uniform["marked"], uniform["entropy"], "—"])
    table = Table(
        columns=["层", "头", "给自己", "给前一个字", "给标点", "权重分布的熵（奈特）", "去掉这个头后验证损失的变化"],
        rows=rows,
        formats=["", "", ".2f", ".2f", ".2f", ".2f", "+.3f"],
        kind="trained", kinds={"层": "exact", "头": "exact"},
    )
    most_previous = max(stats, key=lambda s: s["previous"])
    most_punct = max(stats, key=lambda s: s["marked"])
    most_harmful = max(stats, key=lambda s: s["ablation"])
    layer1, layer2 = ([s for s in stats if s["layer"] == n] for n in (1, 2))
    name = lambda s: f"第 {s['layer']} 层的头 {s['head']}"  # noqa: E731
    return {
        "heatmap": Figure(fig, kind="trained", grid_labels=("查询（正在读的字）", "被查看的字")),
        "head_stats": table,
        "stripes_layer2": Value(stripe_description(weights[-1], config.n_layers), kind="trained"),
        "stripe_threshold": Value(STRIPE, ".2f"),
        "base_loss": Value(base, ".2f", kind="trained"),
        "punct_uniform": Value(uniform["marked"], ".2f"),
        "previous_uniform": Value(uniform["previous"], ".2f"),
        "most_punct_head": Value(name(most_punct), kind="trained"),
        "most_punct_weight": Value(most_punct["marked"], ".2f", kind="trained"),
        "most_previous_head": Value(name(most_previous), kind="trained"),
        "most_previous_weight": Value(most_previous["previous"], ".2f", kind="trained"),
        "most_previous_ablation": Value(most_previous["ablation"], "+.3f", kind="trained"),
        "most_harmful_head": Value(name(most_harmful), kind="trained"),
        "most_harmful_ablation": Value(most_harmful["ablation"], "+.3f", kind="trained"),
        "least_harmful_ablation": Value(min(s["ablation"] for s in stats), "+.3f", kind="trained"),
        "causal": Claim("所有小图的右上角权重都是 0",
                        at_most(max(float(w[0].triu(1).abs().max()) for w in weights), 0.0, name="右上角的最大权重")),
        "comma_stripes": Claim("第二层有头的竖条落在逗号上：逗号之后的许多位置都回头看它", at_least(len(on_comma), 1, name="竖条落在逗号上的头数")),
        "no_previous_head": Claim("没有哪个头特别盯着前一个字（都不到平均分配的 1.5 倍）",
                                  less(最多的头=max(s["previous"] for s in stats), 平均分配的1点5倍=1.5 * uniform["previous"])),
        "punct_heads": Claim("有的头分给标点的权重明显多于平均分配（超过 1.5 倍），第二层就有几个这样的头",
                             all_of(above(most_punct["marked"] / uniform["marked"], 1.5, name="最偏爱标点的头÷平均分配"),
                                    equal(它所在的层=most_punct["layer"], 期望=2),
                                    at_least(sum(s["marked"] > 1.5 * uniform["marked"] for s in layer2), 2,
                                             name="第二层这样的头数"))),
        "layer2_focused": Claim("第二层各头的熵都低于第一层各头和对照行",
                                less(第二层最大的熵=max(s["entropy"] for s in layer2),
                                     第一层和对照行最小的熵=min(min(s["entropy"] for s in layer1), uniform["entropy"]))),
        "weight_is_not_effect": Claim("去掉后损失上升最多的头，不是最偏爱标点的头", true(most_punct is not most_harmful, name="不是同一个头")),
        "redundant_heads": Claim("去掉任何一个头，验证损失都只变化很少（不到 0.1）", below(most_harmful["ablation"], 0.1, name="最大的损失变化")),
    }

