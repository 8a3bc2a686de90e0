"""第 20 章：多头注意力的形状，从一次真实的前向计算里读出来。

让参考实现的 ``MultiHeadAttention``（P08 模型的宽度 d = 128、4 个头）带着因果掩码算一次，
用 ``shape_trace.trace_ops`` 记下每个张量运算的输出形状，再把数字换回记号。为了换得回去，
各尺寸取两两不同的值：B = 2，T = 6，d = 128，h = 4，d_h = 32。
另外数一数：头数变化时，多头注意力的参数个数变不变。
"""

import torch

from transformer_book.chapter20 import p08
from transformer_book.book import Claim, Table, Value, equal
from transformer_book.shape_trace import symbolic_shape, trace_ops
from transformer_book.transformer import MultiHeadAttention, count_parameters

B, T = 2, 6
CONFIG = p08.P08Config()
D, H = CONFIG.d_model, CONFIG.n_heads
SYMBOLS = {B: "B", T: "T", D: "d", H: "h", D // H: "d_h", 3 * D: "3d"}
OPS = ["linear", "split", "view", "transpose", "matmul", "div", "masked_fill", "softmax", "reshape"]
# 去掉重复之后，前向计算依次经过的运算，以及每一步在做什么
STAGES = [
    ("linear", "输入 $X$ 乘打包的 $[W^Q, W^K, W^V]$"),
    ("split", "切成 $Q$、$K$、$V$ 三份"),
    ("view", "最后一维拆成 $h$ 个头（$Q$、$K$、$V$ 各做一次）"),
    ("transpose", "把头维度挪到序列维度前面"),
    ("transpose", r"$K^\top$：交换最后两维"),
    ("matmul", r"算分数 $QK^\top$：每个头一张 $T \times T$ 的表"),
    ("div", r"除以 $\sqrt{d_h}$"),
    ("masked_fill", "因果掩码：未来位置记为 $-\\infty$"),
    ("softmax", "按行 softmax，得到注意力权重"),
    ("matmul", "权重乘 $V$"),
    ("transpose", "把头维度挪回序列维度后面"),
    ("reshape", "各头拼接：$h$ 个 $d_h$ 维拼回一个向量"),
    ("linear", "输出投影 $W^O$"),
]


def compute():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=D, n_heads=H)
    x = torch.randn(B, T, D)  # (B, T, d)
    mask = torch.ones(T, T, dtype=torch.bool).tril()  # True = 可以关注
    with torch.no_grad():
        (out, _), ops = trace_ops(lambda: mha(x, mask=mask), OPS)
    kept, seen = [], set()
    for op in ops:  # Q、K、V 各自的 view / transpose 形状相同，只留第一次；第二次 masked_fill 是防 NaN 的保护
        if (op.name, op.shapes) not in seen:
            seen.add((op.name, op.shapes))
            kept.append(op)
    if [op.name for op in kept] != [name for name, _ in STAGES]:  # 表的“阶段”一列是按这个顺序写的
        raise RuntimeError(f"MultiHeadAttention 的运算序列变了，请更新 STAGES：{[op.name for op in kept]}")

    rows = [["输入 $X$", "—", f"${symbolic_shape(x.shape, SYMBOLS)}$", " × ".join(map(str, x.shape))]]
    for op, (_, meaning) in zip(kept, STAGES):
        (shape,) = set(op.shapes)  # split 有三个形状相同的输出
        times = f"{len(op.shapes)} 个 " if len(op.shapes) > 1 else ""
        rows.append([meaning, f"`{op.name}`", times + f"${symbolic_shape(shape, SYMBOLS)}$", times + " × ".join(map(str, shape))])

    heads = [1, 2, 4, 8]
    counts = [count_parameters(MultiHeadAttention(d_model=D, n_heads=h)) for h in heads]
    return {
        "same_params": Claim("头数取 1、2、4、8，多头注意力的参数个数都一样", equal(不同的参数个数=len(set(counts)), 期望=1)),
        "same_shape": Claim("多头注意力的输出与输入形状相同", equal(输出形状=list(out.shape), 输入形状=list(x.shape))),

        "trace": Table(columns=["阶段", "代码里的运算", "形状（记号）", "本例的形状"], rows=rows),
        "params_by_heads": Table(columns=["头数 $h$", "每头宽度 $d_h$", "参数个数"],
                                 rows=[[h, D // h, n] for h, n in zip(heads, counts)], formats=["d", "d", ",d"]),
        "mha_params": Value(counts[0], ",d"),
    }
