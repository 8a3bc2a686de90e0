"""第 11.3 节：可学习的位置表里，训练中从没读到过的那些行在训练之后是什么样子。

这些位置从没出现在训练的输入里，它们的行收不到梯度（梯度恰好是 0），Adam 的更新也就是 0。但 AdamW 的权重衰减是
*解耦*的：每一步都把参数乘以 (1 − 学习率 × λ)，不管有没有梯度，所以这些行会比初始化时略小，而不是原封不动。
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from transformer_book.checkpoint import MODELS, unpack


@dataclass
class UntrainedRows:
    """可学习位置表第 ``first`` 行起（训练中从没读到过的位置）的标准差。"""

    first: int
    trained_std: float  # 训练后的模型
    initial_std: float  # 同样的设置、同一个种子刚初始化的模型

    @property
    def ratio(self) -> float:
        return self.trained_std / self.initial_std


def untrained_rows(packed: dict[str, Any], first: int, seed: int) -> UntrainedRows:
    """``packed`` 是 :func:`~transformer_book.checkpoint.pack` 打包的、用可学习位置嵌入的模型；``seed`` 是它训练时的种子。

    刚初始化的模型在一个独立的随机数环境里建出（不打扰调用者的随机数流）。"""
    trained = unpack(packed).pos_emb.table.weight.detach()[first:]  # (T_max − first, d)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        initial = MODELS[packed["model"]](**packed["kwargs"]).pos_emb.table.weight.detach()[first:]  # (T_max − first, d)
    return UntrainedRows(first, float(trained.std()), float(initial.std()))
