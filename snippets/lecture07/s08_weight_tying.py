"""第 8.2 节：权重共享（weight tying）——输出层与词嵌入是同一个张量，参数因此少 V·d 个。

小模型（V = 30，d = 64，4 个头，2 层，T_max = 64）真的建出来：共享时 ``head.weight is tok_emb.weight``，
按对象身份去重计数（``count_parameters``）后恰好少 V·d 个参数。GPT-2 small（V = 50257，T_max = 1024，
d = 768，12 层）只用公式数：词嵌入 V·d + 位置表 T_max·d + 12 个块 ×（12d² + 13d）+ 最后的层归一化 2d
（第 7.5 节用真实模块核对过这个公式），不共享时再加一个 V·d 的输出层。
"""

import torch

from transformer_book.book import Claim, Table, Value, equal, true
from transformer_book.transformer import TransformerLM, block_parameters, count_parameters

SMALL = dict(vocab_size=30, d_model=64, n_heads=4, n_layers=2, max_len=64)
GPT2 = dict(vocab_size=50257, d_model=768, n_layers=12, max_len=1024)


def compute():
    torch.manual_seed(0)
    tied = TransformerLM(tie_weights=True, **SMALL)
    untied = TransformerLM(tie_weights=False, **SMALL)
    same_tensor = tied.head.weight is tied.tok_emb.weight
    small_vd = SMALL["vocab_size"] * SMALL["d_model"]
    saved = count_parameters(untied) - count_parameters(tied)
    # 共享时，对输出层做的任何改动都落在词嵌入上：两者是同一块内存
    with torch.no_grad():
        tied.head.weight[0, 0] = 1.0
    follows = tied.tok_emb.weight[0, 0].item() == 1.0

    V, d, N, L = GPT2["vocab_size"], GPT2["d_model"], GPT2["n_layers"], GPT2["max_len"]
    gpt2_tied = V * d + L * d + N * block_parameters(d).total + 2 * d
    gpt2_vd = V * d
    rows = [
        ["小模型（V = 30，d = 64，2 层）：真实模块", "是" if same_tensor else "否",
         count_parameters(untied), count_parameters(tied), saved],
        ["GPT-2 small（V = 50257，d = 768，12 层）：按公式", "—", gpt2_tied + gpt2_vd, gpt2_tied, gpt2_vd],
    ]
    return {
        "table": Table(
            columns=["配置", "`head.weight is tok_emb.weight`", "不共享", "共享", "省下（$V \\cdot d$）"],
            rows=rows,
            formats=["", "", ",d", ",d", ",d"],
        ),
        "gpt2_saved": Value(gpt2_vd, ",d"),
        "gpt2_saved_wan": Value(gpt2_vd / 1e4, ".0f"),
        "gpt2_saved_share_of_untied": Value(gpt2_vd / (gpt2_tied + gpt2_vd), ".1%"),
        "same_memory": Claim("共享时输出层与词嵌入是同一个张量（不共享时不是），改动一个，另一个跟着变",
                             true(same_tensor and untied.head.weight is not untied.tok_emb.weight and follows, name="共享且跟着变")),
        "saves_vd": Claim("权重共享省下的参数恰好是 V·d", equal(省下的参数=saved, Vd=small_vd)),
    }

