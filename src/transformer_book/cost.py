"""注意力的代价：一层的计算量（第 7 讲第 10 节与练习 7）、分数矩阵与 KV 缓存的大小（第 20 章）。

两部分书共用这里的公式。计数约定（第 7 讲第 10.1 节，第 10 节表中的占比正是按它算出的）：

- 单位是**乘加运算**（multiply–accumulate）：一次乘法加一次加法记 1 次。乘一个 (a × b) 矩阵和一个
  (b × c) 矩阵记 a·b·c 次。换算成浮点运算次数（FLOPs）要乘 2；占比是两部分之比，不受影响。
- 只数**矩阵乘法**：偏置、softmax、除以 √d_k、掩码、层归一化、GELU 和残差相加都不算——它们对每个数
  只做常数次运算（总数正比于 T·d 或 h·T²），比矩阵乘法少一个宽度因子，可以忽略。
- 只数**一层**（一个块）对**一个长度为 T 的序列**做一次**前向**计算；词嵌入和输出层不在层里，也不算。
- 注意力矩阵按完整的 T × T 计算：因果掩码下有一半分数用不到，但通常的实现照样把它们算出来。
- 多头与单头一样多：h 个头各算 T × T × d_h，合计 T²·d。

于是一层的三部分是：

- 查询、键、值与输出投影（4 个 d × d 矩阵）：4·T·d²；
- 前馈网络 d → 4d → d：8·T·d²；
- 算分数 QKᵀ 与加权求和 AV：2·T²·d。

注意力矩阵的部分与其余部分之比是 2T²d / 12Td² = T / 6d，所以它占全层的份额是 T / (T + 6d)。
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerFlops:
    """一层在长度 T、宽度 d 下的乘加次数，按第 10.1 节的三部分拆开。"""

    T: int
    d: int
    projections: int  # 4·T·d²：W^Q、W^K、W^V、W^O
    ffn: int  # 8·T·d²：d → 4d 与 4d → d 两个矩阵
    attention_matrix: int  # 2·T²·d：QKᵀ 与 AV

    @property
    def linear(self) -> int:
        """对 T 线性的部分：投影加前馈网络，12·T·d²。"""
        return self.projections + self.ffn

    @property
    def total(self) -> int:
        """全层：12·T·d² + 2·T²·d。"""
        return self.linear + self.attention_matrix

    @property
    def attention_share(self) -> float:
        """注意力矩阵占全层计算的比例，等于 T / (T + 6d)。"""
        return self.attention_matrix / self.total


def layer_flops(T: int, d: int) -> LayerFlops:
    """按第 10.1 节的公式计算一层的乘加次数。

    Parameters
    ----------
    T : int
        序列长度。
    d : int
        模型宽度（前馈网络的隐藏层宽 4d）。

    Returns
    -------
    LayerFlops
    """
    if T < 1 or d < 1:
        raise ValueError(f"需要 T ≥ 1 且 d ≥ 1，收到 T = {T}、d = {d}")
    return LayerFlops(T=T, d=d, projections=4 * T * d * d, ffn=8 * T * d * d, attention_matrix=2 * T * T * d)


def attention_share(T: int, d: int) -> float:
    """注意力矩阵（QKᵀ 与 AV）占一层乘加次数的比例：2T²d / (12Td² + 2T²d) = T / (T + 6d)。"""
    return layer_flops(T, d).attention_share


def crossover_length(d: int) -> int:
    """注意力矩阵的计算量与其余部分相等时的序列长度 6d；比它长，注意力矩阵就占了大头。"""
    return 6 * d


def score_matrix_entries(T: int, *, batch: int = 1, heads: int = 1, layers: int = 1) -> int:
    """标准注意力的分数矩阵有多少个元素：每个样本、每层、每个头一张 T × T 的表。"""
    if T < 0:
        raise ValueError(f"序列长度不能为负，收到 {T}")
    return batch * layers * heads * T * T


def score_matrix_bytes(T: int, *, bytes_per_entry: int = 4, batch: int = 1, heads: int = 1, layers: int = 1) -> int:
    """这些分数矩阵占用的字节数（默认 float32，每个数 4 字节；默认一个样本、一层、一个头）。"""
    return score_matrix_entries(T, batch=batch, heads=heads, layers=layers) * bytes_per_entry


def kv_cache_entries(T: int, *, d_model: int, layers: int, batch: int = 1) -> int:
    """KV 缓存要存的元素个数：每层、每个位置各存一个 d 维的键和一个 d 维的值（所有头合起来）。"""
    return 2 * batch * layers * T * d_model


def counted_block_flops(T: int, d: int, n_heads: int) -> dict[str, int]:
    """数出本书的 ``TransformerBlock`` 对一个长度为 T 的序列做前向时实际执行的乘加次数。

    用 ``torch.utils.flop_counter.FlopCounterMode`` 记录每个矩阵乘法算子；模型和输入都放在 ``meta``
    设备上，只推导形状、不做真正的计算，所以 T = 65536 也是瞬间完成。``FlopCounterMode`` 按 FLOPs
    计数（每次乘加记 2），这里除以 2 换成乘加次数。线性层走 ``addmm``，注意力的 QKᵀ 与 AV
    走批量矩阵乘法 ``bmm``（块用默认的可读注意力路径）。

    Parameters
    ----------
    T, d, n_heads : int
        序列长度、模型宽度与头数。

    Returns
    -------
    dict
        ``{"linear": 线性层的乘加次数, "attention_matrix": QKᵀ 与 AV 的乘加次数}``
    """
    import torch  # 只有这个函数需要 torch；上面的公式不依赖它
    from torch.utils.flop_counter import FlopCounterMode

    from transformer_book.transformer import TransformerBlock

    with torch.device("meta"):
        block = TransformerBlock(d_model=d, n_heads=n_heads)
        x = torch.empty(1, T, d)  # (B, T, d)，B = 1
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        block(x)
    by_op = {str(op): flops for op, flops in counter.get_flop_counts()["Global"].items()}
    linear_ops, attention_ops = {"aten.mm", "aten.addmm"}, {"aten.bmm", "aten.baddbmm"}
    unknown = set(by_op) - linear_ops - attention_ops
    if unknown:
        raise RuntimeError(f"出现了没有归类的矩阵乘法算子：{sorted(unknown)}")
    return {
        "linear": sum(by_op.get(op, 0) for op in linear_ops) // 2,
        "attention_matrix": sum(by_op.get(op, 0) for op in attention_ops) // 2,
    }
