"""第 8 节：三种结构各自能“看到”哪些位置——用改动输入、看输出变不变的办法测出来。

同一个随机初始化的小模型（V = 20，d = 32，4 个头，2 层），只改 ``causal``：
``TransformerLM(causal=False)`` 是编码器，``causal=True`` 是解码器。再搭一个 ``EncoderDecoder``。
每次只改动一个词元，记录位置 0 的输出（logits）变了多少：变了说明位置 0 “看得到”被改的位置。
模型没有训练，变化的大小没有意义，只看它是不是恰好为 0。
"""

import torch

from transformer_book.book import Claim, Table, above, all_of, at_most
from transformer_book.transformer import EncoderDecoder, TransformerLM

CONFIG = dict(d_model=32, n_heads=4, n_layers=2, max_len=16)
VOCAB, T = 20, 8


def change_at(idx, position):
    """把第 position 个词元换成另一个词元（编号加 1，取模）。"""
    changed = idx.clone()
    changed[:, position] = (changed[:, position] + 1) % VOCAB
    return changed


def first_position_change(before, after):
    """位置 0 的输出最多变了多少（所有 logits 中差的绝对值的最大值）。"""
    return float((before[:, 0] - after[:, 0]).abs().max())


def lm_row(name, causal, idx):
    torch.manual_seed(0)  # 两个模型的参数完全相同，只差掩码
    model = TransformerLM(vocab_size=VOCAB, causal=causal, **CONFIG).eval()
    with torch.no_grad():
        logits, attention = model.forward_with_attention(idx)
        change = first_position_change(logits, model(change_at(idx, T - 1)))
    future_weight = float(attention[0][0, :, 0, 1:].sum(-1).mean())  # 第 1 层，位置 0 分给位置 1…T−1 的权重，各头平均
    return [name, "最后一个词元", future_weight, change]


def compute():
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, VOCAB, (1, T), generator=g)  # (B, T) = (1, 8)
    src = torch.randint(0, VOCAB, (1, T), generator=g)  # 编码器—解码器的源句 (1, 8)
    rows = [
        lm_row("编码器 `TransformerLM(causal=False)`", False, idx),
        lm_row("解码器 `TransformerLM(causal=True)`", True, idx),
    ]

    torch.manual_seed(0)
    seq2seq = EncoderDecoder(src_vocab=VOCAB, tgt_vocab=VOCAB, **CONFIG).eval()
    with torch.no_grad():
        base = seq2seq(src, idx)  # (1, T, V)
        src_change = first_position_change(base, seq2seq(change_at(src, T - 1), idx))
        tgt_change = first_position_change(base, seq2seq(src, change_at(idx, T - 1)))
        # 说法要的是“整个源句”与“目标句的全部后文”：逐个位置改一遍
        every_src = min(first_position_change(base, seq2seq(change_at(src, p), idx)) for p in range(T))
        every_tgt = max(first_position_change(base, seq2seq(src, change_at(idx, p))) for p in range(1, T))
    rows += [
        ["编码器—解码器 `EncoderDecoder`", "源句最后一个词元", float("nan"), src_change],
        ["编码器—解码器 `EncoderDecoder`", "目标句最后一个词元", float("nan"), tgt_change],
    ]

    encoder, decoder = rows[0], rows[1]
    for row in rows:
        row.append("看得到" if row[3] > 0 else "看不到")
    return {
        "table": Table(
            columns=["模型", "改动的词元", "第 1 层位置 0 分给右侧位置的注意力（各头平均）", "位置 0 的输出最多变了", "位置 0 能否看到被改的词元"],
            rows=rows,
            formats=["", "", ".3f", ".1e", ""],
            # 权重与输出的变化取决于浮点求和顺序；“恰好为 0”不受它影响，由下面的说法核对
            kinds={"第 1 层位置 0 分给右侧位置的注意力（各头平均）": "trained", "位置 0 的输出最多变了": "trained"},
        ),
        "encoder_sees_right": Claim("编码器的位置 0 把大部分注意力分给右边的位置，改动最后一个词元，它的输出随之改变",
                                    all_of(above(encoder[2], 0.5, name="分给右边的权重"), above(encoder[3], 0.0, name="输出的变化"))),
        "decoder_blind_to_right": Claim("解码器的位置 0 分给右边的权重恰好是 0，输出也逐位不变",
                                        all_of(at_most(decoder[2], 0.0, name="分给右边的权重"), at_most(decoder[3], 0.0, name="输出的变化"))),
        "seq2seq_visibility": Claim("编码器—解码器里，解码器看得到整个源句，看不到目标句的后文",
                                    all_of(above(every_src, 0.0, name="逐个改源句的词元，最小的变化"),
                                           at_most(every_tgt, 0.0, name="逐个改目标句后文的词元，最大的变化"))),
    }

