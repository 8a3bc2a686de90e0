"""第 20 章：注意力分数矩阵随序列长度按平方增长。

对每个长度 T 数出一个样本、一层、一个头的分数矩阵有多少个元素（T²），以及用 float32 存下它要多少字节；
再与 KV 缓存（随 T 线性增长）对照。小的长度上，元素个数直接从参考实现算出的注意力权重张量上读取，
与公式核对。
"""

import torch

from transformer_book.chapter20 import p08
from transformer_book.book import Claim, Figure, Table, Value, all_of, equal
from transformer_book.cost import kv_cache_entries, score_matrix_entries
from transformer_book.plotting import new_figure
from transformer_book.transformer import scaled_dot_product_attention

LENGTHS = [4, 8, 1_000, 2_000, 4_000, 8_000, 32_000, 128_000]
MEASURED = [4, 8, 1_000, 2_000]  # 这几个长度真的跑一次注意力，读出权重张量的大小
BYTES_FLOAT32 = 4


def storage(n_bytes):
    """字节数写成读得出大小的样子：64 B、61.0 MiB（短序列的几十个字节不会显示成 0.00 MiB）。"""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:,.1f} {unit}"
    return f"{n_bytes} B"


def compute():
    read = {}
    for T in MEASURED:
        q = torch.zeros(1, 1, T, 8)  # (B, h, T, d_h)：内容无关紧要，只看权重张量的大小
        _, weights = scaled_dot_product_attention(q, q, q)
        read[T] = weights.numel()

    config = p08.P08Config()
    rows, previous = [], None
    for T in LENGTHS:
        entries = score_matrix_entries(T)
        kv = kv_cache_entries(T, d_model=config.d_model, layers=config.n_layers)
        ratio = "—" if previous is None else f"{entries / score_matrix_entries(previous):g} 倍（长度 {T / previous:g} 倍）"
        rows.append([T, entries, ratio, storage(entries * BYTES_FLOAT32), kv])
        previous = T

    fig, ax = new_figure(width=6.0, height=3.6)
    ax.plot(LENGTHS, [score_matrix_entries(T) for T in LENGTHS], "o-", label="分数矩阵元素（一层、一个头）：T²")
    ax.plot(LENGTHS, [kv_cache_entries(T, d_model=config.d_model, layers=config.n_layers) for T in LENGTHS], "s--",
            label="KV 缓存元素（与 P08 同宽、同层数的模型，全部层）：2·L·T·d")
    ax.set(xscale="log", yscale="log", xlabel="序列长度 T", ylabel="元素个数")
    ax.legend()

    per_step = score_matrix_entries(config.context, batch=config.batch_size, heads=config.n_heads,
                                        layers=config.n_layers)
    return {
        "formula_matches_tensors": Claim("较小的几个长度上，从注意力权重张量读出的元素个数与公式 T² 一致",
                                         all_of(*(equal(**{f"T{T}时读出": n, "公式": score_matrix_entries(T)})
                                                  for T, n in read.items()))),

        "growth": Table(columns=["序列长度 $T$", "分数矩阵元素 $T^2$", "与上一行相比", "float32 存储", "KV 缓存元素（与 P08 同宽、同层数的模型）"],
                        rows=rows, formats=[",d", ",d", "", "", ",d"]),
        "figure": Figure(fig),
        "entries_4": Value(score_matrix_entries(4), ",d"),
        "entries_4000": Value(score_matrix_entries(4_000), ",d"),
        "entries_4000_millions": Value(score_matrix_entries(4_000) / 1e6, ".0f"),
        "doubling_factor": Value(score_matrix_entries(8_000) / score_matrix_entries(4_000), ".0f"),
        "mib_4000": Value(score_matrix_entries(4_000) * BYTES_FLOAT32 / 2**20, ".0f"),
        "gib_128k": Value(score_matrix_entries(128_000) * BYTES_FLOAT32 / 2**30, ",.0f"),
        "p08_step_entries": Value(per_step, ",d"),
        # 上面这个数用到的 P08 设置（正文写出它们时从这里取）
        "p08_batch": Value(config.batch_size, "d"),
        "p08_context": Value(config.context, "d"),
        "p08_layers": Value(config.n_layers, "d"),
        "p08_heads": Value(config.n_heads, "d"),
    }
