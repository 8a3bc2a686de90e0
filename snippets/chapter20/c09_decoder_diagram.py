"""第 20 章图 3：仅解码器（decoder-only）Transformer 的结构，按 P08 模型的实际层次画出。

数据从下往上流：词元编号查表成向量并加上位置向量，经过 L 个 Pre-LN 解码器块（每块两条残差支路：
层归一化 → 因果多头自注意力，层归一化 → 前馈网络），再经最后的层归一化和输出层，softmax 之后得到
下一个词元的概率。右侧灰字是每一步输出的形状；左侧的回路表示生成时把选出的词元接回输入。
方框的顺序与 P08 模型各子模块在前向计算中的顺序逐一核对过。
"""

import torch

from transformer_book.chapter20 import p08
from transformer_book.book import Claim, Figure, Value, non_decreasing
from transformer_book.diagrams import Box, draw_arrow, draw_skip, draw_stack, finish_diagram, new_diagram

# 方框 → P08 模型里对应的子模块名（只列有参数的模块，用来核对画的顺序就是代码执行的顺序）
MODULE_OF_BOX = {1: "tok_emb", 2: "blocks.0.ln1", 3: "blocks.0.attn", 4: "blocks.0.ln2", 5: "blocks.0.ffn",
                 6: "ln_f", 7: "head"}


def forward_order(model, idx):
    """前向计算中各子模块第一次被调用的先后（用前向钩子记录）。"""
    order, handles = [], []
    for name, module in model.named_modules():
        if name:
            handles.append(module.register_forward_pre_hook(lambda m, a, name=name: order.append(name)))
    with torch.no_grad():
        model(idx)
    for h in handles:
        h.remove()
    return order


def compute():
    config = p08.P08Config()
    torch.manual_seed(0)
    model = p08.build_model(config, vocab_size=50).eval()
    order = forward_order(model, torch.zeros(1, 4, dtype=torch.long))
    positions = [order.index(MODULE_OF_BOX[i]) for i in sorted(MODULE_OF_BOX)]

    fig, ax = new_diagram(width=7.0)
    boxes = [
        Box("词元编号", kind="text", note="[B, T]"),
        Box("词嵌入 + 位置向量", color="input", note="[B, T, d]"),
        Box("层归一化", color="norm"),
        Box("因果多头自注意力", color="attention"),
        Box("层归一化", color="norm"),
        Box("前馈网络（逐位置）", color="ffn"),
        Box("最后的层归一化", color="norm", note="[B, T, d]"),
        Box("输出层（线性）", color="output", note="[B, T, V]"),
        Box("softmax", color="output"),
        Box("下一个词元的概率", kind="text", note="每个位置一个分布"),
    ]
    layout = draw_stack(ax, boxes, direction="up", repeat=[(2, 5, "解码器块\n× L")])
    draw_skip(ax, layout, 2, 3, label="残差")
    draw_skip(ax, layout, 4, 5, label="残差")
    # 生成：从最后一个位置的分布里选出一个词元，接到输入末尾，再算一遍
    x_loop = -layout.width / 2 - 2.1
    (x_out, y_out), (x_in, y_in) = layout.left(9), layout.left(0)
    ax.plot([x_out - 0.1, x_loop, x_loop], [y_out, y_out, y_in], color="#b05a00", lw=1.2, ls="--")
    draw_arrow(ax, (x_loop, y_in), (x_in - 0.1, y_in), color="#b05a00")
    ax.text(x_loop - 0.12, (y_out + y_in) / 2, "生成：选出一个词元，\n接到输入末尾，再算一遍",
            rotation=90, ha="right", va="center", fontsize=9, color="#b05a00")
    ax.text(layout.centers[9][0], layout.centers[9][1] + 0.55, "训练：所有位置的损失一次并行算出",
            ha="center", va="bottom", fontsize=9, color="#1f4e96")
    ax.update_datalim([(x_loop - 0.8, y_in), (0.0, layout.centers[9][1] + 0.95)])
    finish_diagram(ax)
    return {
        "figure": Figure(fig),
        "n_layers": Value(config.n_layers, "d"),
        "order_matches_code": Claim("图中方框的先后与 P08 模型各子模块在前向计算中被调用的先后一致",
                                    non_decreasing(positions, name="按调用先后排列的方框位置")),
    }

