"""第 10.1 节：一层 Transformer 的计算量里，注意力矩阵（QKᵀ 与 AV）占多少。

d = 768（GPT-2 small 的宽度），序列长度 T 从 128 翻倍到 65536。公式见 ``transformer_book.cost``：
投影 4Td² + 前馈 8Td² + 注意力矩阵 2T²d（乘加次数）。公式与我们的 TransformerBlock 实际执行的
矩阵乘法一致，由 tests/test_lecture07_s08_s15.py 用 PyTorch 的 FlopCounterMode 逐项核对。
"""

from transformer_book.book import Claim, Figure, Table, Value, below
from transformer_book.cost import attention_share, crossover_length, layer_flops, score_matrix_bytes
from transformer_book.plotting import new_figure

D = 768
LENGTHS = [2**k for k in range(7, 17)]  # 128, 256, …, 65536
D_LARGE = 4096  # 练习 7 的宽度，作对照
FIG_LENGTHS = LENGTHS + [131_072]  # 图多画一个点：练习 7 的 128K 上下文
MILLION = 1e6


def compute():
    rows = []
    for T in LENGTHS:
        f = layer_flops(T, D)
        rows.append([T, f.linear / MILLION, f.attention_matrix / MILLION, f.attention_share])
    table = Table(
        columns=["$T$", "投影与前馈 $12Td^2$（百万次乘加）", "注意力矩阵 $2T^2d$（百万次乘加）", "注意力矩阵的占比"],
        rows=rows,
        formats=["d", ",.0f", ",.0f", ".1%"],
    )

    fig, ax = new_figure(width=6.4, height=3.6)
    ax.plot(FIG_LENGTHS, [attention_share(T, D) for T in FIG_LENGTHS], "o-", label=f"d = {D}（GPT-2 small）")
    ax.plot(FIG_LENGTHS, [attention_share(T, D_LARGE) for T in FIG_LENGTHS], "s--", label=f"d = {D_LARGE}（练习 7）")
    ax.axhline(0.5, color="gray", lw=0.8, ls=":")
    for d, color in ((D, "C0"), (D_LARGE, "C1")):
        ax.axvline(crossover_length(d), color=color, lw=0.8, ls=":")
        ax.text(crossover_length(d) * 0.93, 0.03, f"6d = {crossover_length(d)}", color=color, ha="right", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(FIG_LENGTHS, [str(T) for T in FIG_LENGTHS], fontsize=7)
    ax.set(xlabel="序列长度 T", ylabel="注意力矩阵占一层计算的比例", ylim=(0, 1))
    ax.yaxis.set_major_formatter(lambda y, _: f"{y:.0%}")
    ax.legend(loc="upper left")

    gib = 2**30
    return {
        "gpt2_under_a_fifth": Claim("GPT-2 的上下文窗口 T = 1024 时，注意力矩阵不到一层计算的五分之一",
                                    below(attention_share(1024, D), 0.2, name="注意力矩阵的份额")),

        "table": table,
        "figure": Figure(fig),
        "crossover_768": Value(crossover_length(D), "d"),
        "share_gpt2_1024": Value(attention_share(1024, D), ".1%"),
        "share_shortest": Value(attention_share(LENGTHS[0], D), ".1%"),
        "share_longest": Value(attention_share(LENGTHS[-1], D), ".1%"),
        "score_matrix_gib_longest": Value(score_matrix_bytes(LENGTHS[-1]) / gib, ".0f"),
        "score_matrix_mib_1024": Value(score_matrix_bytes(1024) / 2**20, ".0f"),
    }
