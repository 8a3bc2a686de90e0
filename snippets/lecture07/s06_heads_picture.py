"""第 6.2 节的步骤图：一个输入怎样被切给 2 个头、各算各的注意力，再拼接、乘 W^O。

用参考实现的 ``MultiHeadAttention``（d = 8，h = 2，d_h = 4，随机初始化）处理 the cat sat down 四个位置，
把中间的每一个矩阵取出来画成一块块色块；最后核对“拼接后乘 W^O”与模块自己的输出相同。
"""

import numpy as np
import torch

from transformer_book.book import Claim, Figure, Value, below
from transformer_book.step_pictures import multihead_flow
from transformer_book.transformer import MultiHeadAttention

T, D, H = 4, 8, 2


def compute():
    # 随机数取自 numpy、计算用 float64：torch 的随机数和 float32 运算在不同的 CPU 指令集下末位会不同，
    # 这样图上的每个数在哪台机器上都一样。参数的分布与 nn.Linear 的默认初始化相同：U(−1/√d, 1/√d)。
    rng = np.random.default_rng(0)
    mha = MultiHeadAttention(d_model=D, n_heads=H).double()
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(torch.from_numpy(rng.uniform(-D**-0.5, D**-0.5, size=tuple(p.shape))))
    x = torch.from_numpy(3 * rng.standard_normal((1, T, D)))  # (1, T, d)：放大一些，未训练的投影下两个头的权重才分得开
    with torch.no_grad():
        out, weights = mha(x, need_weights=True)  # (1, T, d)、(1, h, T, T)
        v = mha.in_proj(x).split(D, dim=-1)[2]  # (1, T, d)：值
        v = v.view(1, T, H, D // H).transpose(1, 2)  # (1, h, T, d_h)
        heads = weights @ v  # (1, h, T, d_h)：每个头的输出
        concat = heads.transpose(1, 2).reshape(1, T, D)  # (1, T, d)：按列拼接
        again = mha.out_proj(concat)  # (1, T, d)
    fig = multihead_flow(x[0].numpy(), list(weights[0].numpy()), list(heads[0].numpy()), concat[0].numpy(),
                         out[0].numpy())
    diff = float((again - out).abs().max())
    return {
        "picture": Figure(fig, heatmaps=False),
        "rebuilt_diff": Value(diff, ".1e", kind="rounding"),
        "concat_then_project": Claim("把两个头的输出拼起来再乘 W^O，就是模块的输出（差别小于 10⁻⁶）",
                                     below(diff, 1e-6, name="最大差")),
    }
