"""第 7 讲第 6.2 节：参考实现的多头注意力与 PyTorch 自带的 ``nn.MultiheadAttention`` 对照。

两者的参数布局相同（一个打包的 d → 3d 输入投影、一个输出投影），复制四个参数张量之后，
同一个输入应当得到只差浮点误差的输出和注意力权重。
"""

from __future__ import annotations

import torch
from torch import nn


def to_torch_mha(ours):
    """把我们的 :class:`MultiHeadAttention` 的权重复制进一个新的 ``nn.MultiheadAttention``（batch_first）。"""
    d = ours.in_proj.in_features
    theirs = nn.MultiheadAttention(d, ours.n_heads, bias=True, batch_first=True)
    with torch.no_grad():
        theirs.in_proj_weight.copy_(ours.in_proj.weight)
        theirs.in_proj_bias.copy_(ours.in_proj.bias)
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        theirs.out_proj.bias.copy_(ours.out_proj.bias)
    return theirs


@torch.no_grad()
def compare_with_torch_mha(ours, x, mask=None):
    """同一输入下，我们的多头注意力与复制了权重的 ``nn.MultiheadAttention`` 的最大差异。

    Parameters
    ----------
    ours : MultiHeadAttention
    x : Tensor (B, T, d)
    mask : BoolTensor (T, T)，可选
        我们的约定：``True`` = 可以关注；传给 PyTorch 时取反（它的 ``True`` = 屏蔽）。

    Returns
    -------
    output_diff, weights_diff : float
        输出 (B, T, d) 与每个头的注意力权重 (B, h, T, T) 的最大绝对差。
    """
    ours.eval()
    theirs = to_torch_mha(ours).eval()
    out, weights = ours(x, mask=mask, need_weights=True)
    ref_out, ref_weights = theirs(x, x, x, attn_mask=None if mask is None else ~mask,
                                  need_weights=True, average_attn_weights=False)
    return float((out - ref_out).abs().max()), float((weights - ref_weights).abs().max())
