"""第 8.3 节：训练一个编码器—解码器把 4–8 个数字倒过来写，再看它的交叉注意力怎样对齐源句。

模型是参考实现的 ``EncoderDecoder``（d = 32，2 个头，编码器、解码器各 2 层），训练 500 步、每步 64 串随机数字；
测试用另一个种子抽的 500 串。热图是一串测试数字在 teacher forcing 下，解码器每层每个头的交叉注意力。
表、图和数来自种子 0 的训练；另两个种子（初始化和取批次的顺序不同）只为核对说法：每个种子都要成立。
"""

from dataclasses import replace

from transformer_book.book import Claim, Figure, Table, Value, at_least, every_seed
from transformer_book.lecture07 import reversal
from transformer_book.plotting import new_figure

CONFIG = reversal.ReversalConfig()
SEEDS = (0, 1, 2)


def compute():
    model, losses = reversal.train(CONFIG)  # 模型已切到 eval 模式
    tests = reversal.test_set(CONFIG)
    accuracy = reversal.sequence_accuracy(model, tests, CONFIG)
    shares = reversal.mirrored_share(model, tests, CONFIG)  # (L, h)
    seen = {0: (accuracy, float(shares.max()))}  # 每个种子：整串正确的比例、最好的头落在镜像位置的比例
    for s in SEEDS[1:]:
        other, _ = reversal.train(replace(CONFIG, seed=s))
        seen[s] = (reversal.sequence_accuracy(other, tests, CONFIG), float(reversal.mirrored_share(other, tests, CONFIG).max()))

    example = next(d for d in tests if len(d) == 7 and len(set(d)) == 7)  # 7 个互不相同的数字：行列一眼对得上
    weights = reversal.cross_attention(model, example, CONFIG)  # (L, h, 8, 7)
    written = [str(d) for d in example[::-1]] + ["</s>"]
    fig, axes = new_figure(ncols=CONFIG.n_heads, nrows=CONFIG.n_layers, width=6.4, height=6.0)
    for layer in range(CONFIG.n_layers):
        for head in range(CONFIG.n_heads):
            ax = axes[layer][head]
            image = ax.imshow(weights[layer, head].numpy(), cmap="Blues", vmin=0.0, vmax=1.0)
            ax.set_title(f"第 {layer + 1} 层 · 头 {head + 1}", fontsize=10)
            ax.set_xticks(range(len(example)), [str(d) for d in example])
            ax.set_yticks(range(len(written)), written)
            ax.set_xlabel("源句的数字")
            ax.set_ylabel("正在写的数字")
    fig.colorbar(image, ax=axes, shrink=0.6, label="交叉注意力权重")

    best = float(shares.max())
    return {
        "accuracy": Value(accuracy, ".1%", kind="trained"),
        "n_test": Value(len(tests), ",d"),
        "steps": Value(CONFIG.steps, ",d"),
        "first_loss": Value(losses[0], ".2f", kind="trained"),
        "last_loss": Value(losses[-1], ".3f", kind="trained"),
        "example": Value(" ".join(str(d) for d in example)),
        "heads": Table(columns=["层", "头", "最大权重落在镜像位置的比例"],
                       rows=[[layer + 1, head + 1, float(shares[layer, head])]
                             for layer in range(CONFIG.n_layers) for head in range(CONFIG.n_heads)],
                       formats=["d", "d", ".1%"], kind="trained", kinds={"层": "exact", "头": "exact"}),
        "best_share": Value(best, ".1%", kind="trained"),
        "cross_attention": Figure(fig, kind="trained", grid_labels=("正在写的数字", "源句的数字")),
        "learns": Claim("训练几秒钟之后，测试集里 95% 以上的数字串整串倒写正确",
                        every_seed({s: at_least(a, 0.95, name="整串正确的比例") for s, (a, _) in seen.items()})),
        "mirror_head": Claim("有一个头在 95% 以上的输出位置把最大的权重给了源句里的镜像位置",
                             every_seed({s: at_least(b, 0.95, name="最好的头落在镜像位置的比例") for s, (_, b) in seen.items()})),
        "seeds": Value(len(SEEDS), "d"),
    }
