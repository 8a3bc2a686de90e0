"""第 6.2 节：多头注意力前向计算中每一步的形状，以及与 PyTorch 自带的 nn.MultiheadAttention 对照。

形状不是手写的：让参考实现的 ``MultiHeadAttention`` 真的算一次，用 ``shape_trace.trace_module`` 记下每个张量运算的
输出形状。为了能把数字换回符号，各个尺寸取两两不同的值：B = 2，T = 5，d = 12，h = 3，d_h = 4。
然后把同一组权重复制进 ``torch.nn.MultiheadAttention``（d = 64，8 个头，带因果掩码），比较两者的输出
和每个头的注意力权重。
"""

import torch

from transformer_book.book import Claim, Table, Value, all_of, below
from transformer_book.lecture07.mha_vs_torch import compare_with_torch_mha
from transformer_book.shape_trace import symbolic_shape, trace_module
from transformer_book.transformer import MultiHeadAttention

B, T, D, H = 2, 5, 12, 3
NAMES = {B: "B", T: "T", D: "d", H: "h", D // H: "d_h", 3 * D: "3d"}  # 尺寸两两不同，才能换回符号

# 参考实现的前向计算依次调用的运算，以及每一步在做什么
EXPECTED = [
    ("linear", "in_proj：一次矩阵乘法算出 Q、K、V"),
    ("split", "沿最后一维切成 Q、K、V"),
    ("view", "Q：最后一维拆成 $h$ 个头，每头 $d_h$ 维"),
    ("transpose", "Q：把“头”挪到序列前面"),
    ("view", "K：同上"),
    ("transpose", "K：同上"),
    ("view", "V：同上"),
    ("transpose", "V：同上"),
    ("transpose", r"$K^\top$：交换最后两维"),
    ("matmul", r"分数 $QK^\top$：每个头一个 $T \times T$ 矩阵"),
    ("div", r"除以 $\sqrt{d_h}$（多头时 $d_k = d_h$）"),
    ("softmax", "按行 softmax，得到注意力权重"),
    ("matmul", "权重乘 V"),
    ("transpose", "把“头”挪回序列后面"),
    ("reshape", "$h$ 个头拼回 $d$ 维"),
    ("linear", "out_proj：乘 $W^O$，混合各头"),
]



def compute():
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=D, n_heads=H)
    x = torch.randn(B, T, D)  # (B, T, d)
    _, steps = trace_module(mha, x)
    if [s.name for s in steps] != [op for op, _ in EXPECTED]:  # 表的“作用”一列是按这个顺序写的
        raise RuntimeError(f"MultiHeadAttention 的运算序列变了，请更新 EXPECTED：{[s.name for s in steps]}")
    rows = []
    for step, (_, meaning) in zip(steps, EXPECTED):
        (shape,) = set(step.shapes)  # 只有 split 有多个输出（三个形状相同）
        times = f"{len(step.shapes)} 个 " if len(step.shapes) > 1 else ""
        numeric, symbolic = times + str(shape), times + f"${symbolic_shape(shape, NAMES, brackets='()')}$"
        rows.append([f"`{step.name}`", meaning, numeric, symbolic])
    shapes = Table(columns=["运算", "作用", "输出形状（实际）", "输出形状（符号）"], rows=rows)

    big = MultiHeadAttention(d_model=64, n_heads=8)
    x_big = torch.randn(4, 10, 64)  # (B, T, d)
    causal = torch.ones(10, 10, dtype=torch.bool).tril()  # True = 可以关注
    out_diff, weight_diff = compare_with_torch_mha(big, x_big, causal)
    return {
        "shapes": shapes,
        "output_diff": Value(out_diff, ".1e", kind="rounding"),  # 舍入误差本身：取决于求和顺序
        "weights_diff": Value(weight_diff, ".1e", kind="rounding"),
        "equals_torch": Claim("复制权重之后，与 nn.MultiheadAttention 只差 float32 的舍入（小于 10⁻⁵）",
                              all_of(below(out_diff, 1e-5, name="输出的最大差"), below(weight_diff, 1e-5, name="权重的最大差"))),
    }

