"""第 6.2 节的步骤图：输入整块交给每个头，Q、K、V 的列按头切开，各算各的注意力，再拼接、乘 W^O。

用参考实现的 ``MultiHeadAttention``（d = 8，h = 2，d_h = 4，随机初始化）处理 the cat sat down 四个位置，
把中间的每一个矩阵取出来画成写着数值的色块，并放进图的数据里记录下来。核对两件事：
Q、K、V 的第 r 个列块正是第 r 个头用自己的 W^Q_r（W^K_r、W^V_r）读入整个 X 的结果——切开的是投影之后的
Q、K、V，不是输入；“拼接后乘 W^O”与模块自己的输出相同。
"""

import numpy as np
import torch

from transformer_book.book import Claim, Figure, Value, below
from transformer_book.step_pictures import describe_multihead, multihead_flow
from transformer_book.transformer import MultiHeadAttention

TOKENS = ["the", "cat", "sat", "down"]
T, D, H = len(TOKENS), 8, 2
D_H = D // H


def build():
    """图里的模块和输入：返回 ``(mha, x)``，x 的形状是 (1, T, d)（测试也用它核对图上的数）。"""
    # 随机数取自 numpy、计算用 float64：torch 的随机数和 float32 运算在不同的 CPU 指令集下末位会不同，
    # 这样图上的每个数在哪台机器上都一样。参数的分布与 nn.Linear 的默认初始化相同：U(−1/√d, 1/√d)。
    rng = np.random.default_rng(0)
    mha = MultiHeadAttention(d_model=D, n_heads=H).double()
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(torch.from_numpy(rng.uniform(-D**-0.5, D**-0.5, size=tuple(p.shape))))
        # 偏置置零：图上的每一步就和 6.2 节的公式一字不差（Q = XW^Q，输出 = 拼接 × W^O）；参考实现的线性层默认带偏置
        mha.in_proj.bias.zero_()
        mha.out_proj.bias.zero_()
    x = torch.from_numpy(3 * rng.standard_normal((1, T, D)))  # (1, T, d)：放大一些，未训练的投影下两个头的权重才分得开
    return mha, x


def compute():
    mha, x = build()
    with torch.no_grad():
        out, weights = mha(x, need_weights=True)  # (1, T, d)、(1, h, T, T)
        q, k, v = mha.in_proj(x).split(D, dim=-1)  # 各 (1, T, d)：与模块的 forward 一样，一次算出所有头的 Q、K、V
        q_h, k_h, v_h = (z.view(1, T, H, D_H).transpose(1, 2) for z in (q, k, v))  # 各 (1, h, T, d_h)：按列切给各头
        heads = weights @ v_h  # (1, h, T, d_h)：每个头的输出
        concat = heads.transpose(1, 2).reshape(1, T, D)  # (1, T, d)：按列拼接
        again = mha.out_proj(concat)  # (1, T, d)
        # 每个头自己的投影：in_proj.weight 存的是 [W^Q, W^K, W^V] 的转置，(3d, d)；转置回来是 (d, 3d)
        w_q, w_k, w_v = mha.in_proj.weight.T.split(D, dim=-1)  # 各 (d, d)
        own = [x[0] @ w[:, r * D_H:(r + 1) * D_H]  # (T, d_h)：X W^Q_r，第 r 个头用 W^Q 的第 r 个列块读入整个 X
               for w in (w_q, w_k, w_v) for r in range(H)]
        sliced = [z[0, r] for z in (q_h, k_h, v_h) for r in range(H)]  # 同样的顺序：Q 的各头、K 的各头、V 的各头
    split_diff = max(float((a - b).abs().max()) for a, b in zip(sliced, own))
    diff = float((again - out).abs().max())
    matrices = {
        "X": x[0].numpy(), "Q": q[0].numpy(), "K": k[0].numpy(), "V": v[0].numpy(),  # 各 (T, d)
        "head_weights": list(weights[0].numpy()),  # h 个 (T, T)
        "head_outputs": list(heads[0].numpy()),  # h 个 (T, d_h)
        "concat": concat[0].numpy(), "output": out[0].numpy(),  # 各 (T, d)
    }
    fig = multihead_flow(TOKENS, **matrices)
    data = {"tokens": TOKENS, "d_h": D_H, **{("weights" if k == "head_weights" else k): np.asarray(m).tolist()
                                               for k, m in matrices.items()}}  # 图上画的每一个矩阵，按名字记录
    return {
        "picture": Figure(fig, data=data, heatmaps=False, alt=describe_multihead(TOKENS, **matrices)),  # 图的文字版
        "split_diff": Value(split_diff, ".1e", kind="rounding"),
        "rebuilt_diff": Value(diff, ".1e", kind="rounding"),
        "heads_read_all_of_x": Claim("把 Q、K、V 的列按头切开，第 r 块正是第 r 个头用自己的 W^Q_r（W^K_r、W^V_r）"
                                     "读入整个 X 的结果（差别小于 10⁻¹²）",
                                     below(split_diff, 1e-12, name="最大差")),
        "concat_then_project": Claim("把两个头的输出拼起来再乘 W^O，就是模块的输出（差别小于 10⁻⁶）",
                                     below(diff, 1e-6, name="最大差")),
    }
