"""第 20 章：一次完整的数据流核对——每一步的输入形状、输出形状与参数个数。

在 P08 结构的模型上跑一次前向计算和交叉熵，用前向钩子与 ``shape_trace.trace_ops`` 记下每一步的真实形状，
按对象身份数参数（权重共享只算一次），再把数字换回记号。为此各尺寸取两两不同的值：
B = 2，T = 16，d = 128，h = 4，d_h = 32，V = P08 的词表大小。
"""

import torch

from transformer_book.chapter20 import analysis, p08
from transformer_book.book import Claim, Table, Value, all_of, below, equal
from transformer_book.shape_trace import symbolic_shape
from transformer_book.transformer import block_parameters, count_parameters

B, T = 2, 16


def compute():
    config = p08.P08Config()
    vocab = p08.prepare_data(val_fraction=config.val_fraction).tokenizer.vocab_size
    torch.manual_seed(0)
    model = p08.build_model(config, vocab).eval()  # 形状与参数个数与训练无关
    D, H = config.d_model, config.n_heads
    symbols = {B: "B", T: "T", D: "d", H: "h", D // H: "d_h", vocab: "V", 4 * D: "4d"}
    if len(symbols) != 7:
        raise ValueError("各尺寸必须两两不同，才能把数字换回记号：换一个 B 或 T")
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, vocab, (B, T), generator=g)  # (B, T)
    target = torch.randint(0, vocab, (B, T), generator=g)  # (B, T)
    flow = analysis.dataflow(model, idx, target)

    def math(shape):
        text = symbolic_shape(shape, symbols)
        return text if text == "标量" else f"${text}$"

    def shapes(items, n=1):
        text = [math(s) for s in items]
        if len(set(text)) == 1 and len(text) > 1:
            return f"{len(text)} 个 {text[0]}"
        return "、".join(text) if n == 1 else f"{n} 个 {text[0]}"

    rows = [[r.step, shapes(r.inputs), shapes([r.output], r.n_outputs), r.params, r.n_params] for r in flow.rows]
    total = sum(r.n_params for r in flow.rows)
    rows.append(["合计", "", "", "", total])
    emb = flow.rows[0].n_params
    by_step = {r.step: r.n_params for r in flow.rows}
    block = sum(r.n_params for r in flow.rows[2:10])  # 第 1 个块：层归一化 1 到第二次残差相加
    per_block = [sum(p.numel() for p in b.parameters()) for b in model.blocks]  # 逐个块数出的参数个数
    attention = by_step["Q/K/V 投影，拆成多头"] + by_step["合并各头，输出投影"]
    ffn_ratio = by_step["前馈网络"] / attention
    return {
        "total_is_count": Claim("全表合计与 count_parameters 相等", equal(全表合计=total, count_parameters=count_parameters(model))),
        "block_formula": Claim("一个块的参数合计与 12d² + 13d 相符，其余的块与第一个块完全相同",
                               all_of(equal(一个块=block, 公式=block_parameters(D).total),
                                      equal(第一个块=block, 表中其余的块=by_step[f"其余 {config.n_layers - 1} 个块"] / (config.n_layers - 1)),
                                      *(equal(第一个块=block, **{f"第 {i + 1} 个块": n}) for i, n in enumerate(per_block)))),
        "ffn_twice_attention": Claim("一个块里，前馈网络的参数约是注意力投影的两倍", below(abs(ffn_ratio - 2), 0.05, name="与 2 之差")),

        "dataflow": Table(columns=["步骤", "输入形状", "输出形状", "学习参数", "参数个数"], rows=rows,
                          formats=["", "", "", "", ",d"]),
        "scores_shape": Value(f"${symbolic_shape(flow.scores_shape, symbols)}$"),
        "ffn_hidden_shape": Value(f"${symbolic_shape(flow.ffn_hidden_shape, symbols)}$"),
        "total_params": Value(total, ",d"),
        "embedding_share": Value(emb / total, ".0%"),
        "block_params": Value(block, ",d"),
        "vocab_size": Value(vocab, ",d"),
    }
