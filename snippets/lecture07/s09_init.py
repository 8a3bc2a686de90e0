"""第 9 节：GPT-2 式初始化——线性层与嵌入 ~ N(0, 0.02²)，残差分支的最后一个线性层再缩小 1/√(2L)（nanoGPT 的写法）。

建一个 d = 256、4 个头、L = 6 层的 ``TransformerLM``（不训练），按参数的种类汇总实测的标准差，
和 ``_init_gpt2`` 规定的值对照。每个块往残差主干上加两个分支（注意力、前馈），6 层共 12 个。
"""

import math

import torch

from transformer_book.book import Claim, Table, Value, below
from transformer_book.transformer import TransformerLM

D, N_LAYERS = 256, 6


def pooled_std(tensors):
    """把同一种参数拼在一起算标准差。"""
    return float(torch.cat([t.detach().flatten() for t in tensors]).std())


def compute():
    torch.manual_seed(0)
    model = TransformerLM(vocab_size=64, d_model=D, n_heads=4, n_layers=N_LAYERS, max_len=64)
    params = dict(model.named_parameters())
    groups = {
        "词嵌入 `tok_emb`（也是输出层）": ["tok_emb.weight"],
        "位置表 `pos_emb`": ["pos_emb.table.weight"],
        "Q、K、V 投影 `attn.in_proj`": [n for n in params if n.endswith("attn.in_proj.weight")],
        "前馈第一层 `ffn.fc1`": [n for n in params if n.endswith("ffn.fc1.weight")],
        "注意力输出投影 `attn.out_proj`（残差分支的最后一层）": [n for n in params if n.endswith("attn.out_proj.weight")],
        "前馈第二层 `ffn.fc2`（残差分支的最后一层）": [n for n in params if n.endswith("ffn.fc2.weight")],
    }
    branches = 2 * N_LAYERS
    rows = []
    for name, names in groups.items():
        on_residual = "残差" in name
        target = 0.02 / math.sqrt(branches) if on_residual else 0.02
        rows.append([name, target, pooled_std(params[n] for n in names)])
    worst = max(abs(measured - target) / target for _, target, measured in rows)
    return {
        "within_2_percent": Claim("实测的标准差与规定值相差不到 2%", below(worst, 0.02, name="最大的相对差")),

        "table": Table(columns=["参数", "规定的标准差", "实测的标准差"], rows=rows, formats=["", ".5f", ".5f"]),
        "residual_std": Value(0.02 / math.sqrt(branches), ".5f"),
        "n_branches": Value(branches, "d"),
    }
