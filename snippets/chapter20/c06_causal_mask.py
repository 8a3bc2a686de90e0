"""第 20 章：因果掩码。

1. 可见性表直接取自 P08 模型（``TransformerLM(causal=True)``）里登记的掩码 ``causal_mask`` 的左上角 4 × 4。
2. 沿用上一页四个词元的例子（同一个种子、同样的抽取顺序），加上这个掩码重算注意力权重；
   再演示“先 softmax、后把未来位置清零”这种错误顺序会让每行权重之和不再是 1。
3. 在一个 P08 结构的模型上检查两件事：换掉最后一个词元，前面各位置的输出一点不变；
   整段一次并行算出的每个位置，与只把前缀交给模型单独计算的结果相同。
"""

import math

import torch

from transformer_book.chapter20 import p08
from transformer_book.book import Claim, Table, Value, above, all_of, at_most, below
from transformer_book.transformer import scaled_dot_product_attention

TOKENS = "春风又绿"
D_MODEL, D_K = 8, 4
SENTENCE = "一月二日，晴。早上醒得比平时晚"



def compute():
    tok = p08.prepare_data().tokenizer
    torch.manual_seed(0)
    model = p08.build_model(p08.P08Config(), tok.vocab_size).eval()  # 未训练：这里只检查结构上的性质
    mask = model.causal_mask[: len(TOKENS), : len(TOKENS)]  # (T, T)，True = 可以关注
    visibility = Table(
        columns=["查询位置", *[f"位置 {j}（{ch}）" for j, ch in enumerate(TOKENS)]],
        rows=[[f"位置 {i}（{ch}）", *["可见" if ok else "–" for ok in row]] for i, (ch, row) in enumerate(zip(TOKENS, mask.tolist()))],
    )

    g = torch.Generator().manual_seed(0)  # 与上一页的片段相同
    X = torch.randn(len(TOKENS), D_MODEL, generator=g)  # (T, d)
    W_q, W_k, W_v = (torch.randn(D_MODEL, D_K, generator=g) / math.sqrt(D_MODEL) for _ in range(3))
    Q, K, V = X @ W_q, X @ W_k, X @ W_v  # 各 (T, d_k)
    _, weights = scaled_dot_product_attention(Q, K, V, mask)  # 掩码在 softmax 之前
    _, unmasked = scaled_dot_product_attention(Q, K, V)
    wrong = torch.softmax(Q @ K.T / math.sqrt(D_K), dim=-1).masked_fill(~mask, 0.0)  # 错误：softmax 之后才清零
    wrong_sums = wrong.sum(-1)

    ids = torch.tensor([tok.encode(SENTENCE)])  # (1, T)
    changed = ids.clone()
    changed[0, -1] = (changed[0, -1] + 1) % model.tok_emb.num_embeddings  # 只换掉最后一个词元
    with torch.no_grad():
        logits, logits_changed = model(ids), model(changed)  # 各 (1, T, V)
        earlier_diff = float((logits[0, :-1] - logits_changed[0, :-1]).abs().max())
        last_diff = float((logits[0, -1] - logits_changed[0, -1]).abs().max())
        # 逐个前缀单独计算：位置 t 只把位置 0…t 这 t + 1 个词元交给模型
        prefix = torch.stack([model(ids[:, : t + 1])[0, -1] for t in range(ids.size(1))])  # (T, V)
        prefix_diff = float((prefix - logits[0]).abs().max())

    return {
        "visibility": visibility,
        "weights": Table(columns=["查询 \\ 被查看", *TOKENS],
                         rows=[[q, *row] for q, row in zip(TOKENS, weights.tolist())],
                         formats=["", *[".3f"] * len(TOKENS)]),
        "wrong_order": Table(columns=["查询位置", "正确顺序：每行之和", "错误顺序：每行之和"],
                             rows=[[f"位置 {i}（{ch}）", float(weights[i].sum()), float(wrong_sums[i])] for i, ch in enumerate(TOKENS)],
                             formats=["", ".3f", ".3f"]),
        "sentence_length": Value(ids.size(1), "d"),
        "earlier_diff": Value(earlier_diff, ".1f"),
        "last_diff": Value(last_diff, ".3f", kind="trained"),  # float32 前向计算：末位取决于求和顺序
        "prefix_diff": Value(prefix_diff, ".1e", kind="rounding"),
        "masked_rows": Claim("加上掩码后右上角全部为 0，每行仍然加起来等于 1",
                             all_of(at_most(float(weights[~mask].abs().max()), 0.0, name="右上角的最大权重"),
                                    below(float((weights.sum(-1) - 1).abs().max()), 1e-5, name="行和与 1 的最大差"))),
        "last_row_same": Claim("最后一行能看到所有位置，与不加掩码时相同（差别小于 10⁻⁵）",
                               below(float((weights[-1] - unmasked[-1]).abs().max()), 1e-5, name="最大差")),
        "wrong_order_loses": Claim("softmax 之后才清零时，除最后一行外每行的权重之和都小于 1",
                                   below(float(wrong_sums[:-1].max()), 1 - 1e-3, name="除最后一行外最大的行和")),
        "no_leak": Claim("换掉最后一个字，前面各位置的输出一点没变，最后一个位置的输出变了",
                         all_of(at_most(earlier_diff, 0.0, name="前面各位置的最大差"), above(last_diff, 1e-4, name="最后一个位置的最大差"))),
        "parallel_equals_prefix": Claim("逐个前缀单独计算与整段并行计算只差浮点舍入（小于 10⁻⁴）", below(prefix_diff, 1e-4, name="最大差")),
    }

