"""第 7.5 节：一个 Transformer 块的参数量 12d² + 13d，以及 GPT-2 small 大小的模型。

对 d = 64、128、768，搭一个真实的 TransformerBlock（Pre-LN，含偏置），按部分数参数，与公式对照。
再用同一份代码搭一个 GPT-2 small 大小的 TransformerLM：V = 50257，T_max = 1024，d = 768，12 层，12 个头，
可学习的位置嵌入，输出层与词嵌入共享。模型搭在 meta 设备上，只有形状、不占内存。
"""

from transformer_book.book import Claim, Table, Value, below, equal, true
from transformer_book.lecture07.depth import block_parameter_breakdown, gpt2_small_breakdown
from transformer_book.transformer import block_parameters

WIDTHS = [64, 128, 768]
PARTS = {"attention": "注意力", "ffn": "前馈网络", "layer_norms": "两个层归一化", "total": "整个块（数出）"}


def compute():
    rows, every_part = [], True
    for d in WIDTHS:
        counted, formula = block_parameter_breakdown(d), block_parameters(d)
        every_part = every_part and counted == formula  # 各部分逐一与公式核对
        rows.append([d, *[getattr(counted, p) for p in PARTS], formula.total, counted.total == formula.total])
    per_block = Table(
        columns=["$d$", *PARTS.values(), "公式 $12d^2+13d$", "一致"],
        rows=[[*r[:-1], "是" if r[-1] else "否"] for r in rows],
        formats=["d", ",d", ",d", ",d", ",d", ",d", ""],
    )

    gpt2 = gpt2_small_breakdown()
    parts = ["token_embedding", "position_embedding", "blocks", "final_norm"]
    share = {p: gpt2[p] / gpt2["total"] for p in parts}
    names = {"token_embedding": "词嵌入 $Vd$（与输出层共享）", "position_embedding": r"位置嵌入 $T_{\max} d$",
             "blocks": "12 个块", "final_norm": "最后的层归一化 $2d$"}
    gpt2_table = Table(
        columns=["部分", "参数个数", "占比"],
        rows=[*[[names[p], gpt2[p], share[p]] for p in parts], ["合计", gpt2["total"], 1.0]],
        formats=["", ",d", ".2%"],
    )
    ffn_share = block_parameters(768).ffn / block_parameters(768).total
    return {
        "per_block": per_block,
        "gpt2": gpt2_table,
        "gpt2_total": Value(gpt2["total"], ",d"),
        "gpt2_embedding_share": Value(share["token_embedding"], ".1%"),
        "gpt2_blocks_share": Value(share["blocks"], ".1%"),
        "ffn_share_768": Value(ffn_share, ".1%"),
        "ffn_two_thirds": Claim("d = 768 时，前馈网络约占整个块参数的三分之二（相差不到 1 个百分点）",
                                below(abs(ffn_share - 2 / 3), 0.01, name="与三分之二之差")),
        "formula_holds": Claim("三个宽度下，块的每一部分数出的参数都与公式相同", true(every_part, name="每一部分都相符")),
        "head_is_embedding": Claim("输出层与词嵌入是同一个矩阵，不另外占参数", true(gpt2["head_is_embedding"], name="同一个矩阵")),
        "parts_add_up": Claim("各部分加起来等于总数", equal(各部分之和=sum(gpt2[p] for p in parts), 总数=gpt2["total"])),
    }

