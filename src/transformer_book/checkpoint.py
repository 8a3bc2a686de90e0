"""保存与恢复训练好的模型：一份只含数据的字典——模型的类名、构造参数、参数张量，外加调用者的附注。

书里训练过的每个模型（第 7 讲第 11 节的迷你 GPT 与 RNN、第 20 章的 P08 模型）都用这一种方式交给别的片段，
也可以用 ``torch.save`` 存到磁盘、用 ``torch.load(..., weights_only=True)`` 读回：字典里没有任何需要
运行代码才能还原的对象。
"""

from __future__ import annotations

from typing import Any

from torch import nn

from transformer_book.rnn import RNNLM
from transformer_book.transformer import TransformerLM

MODELS = {"TransformerLM": TransformerLM, "RNNLM": RNNLM}  # 能打包的模型：它们都记下了自己的构造参数


def pack(model: nn.Module, **notes: Any) -> dict[str, Any]:
    """把模型打包成 ``{"model": 类名, "kwargs": 构造参数, "state_dict": 参数, **notes}``。

    ``notes`` 是调用者想一起存下的数据（训练配置、测试集困惑度……），必须是数字、字符串、列表或字典。
    """
    name = type(model).__name__
    if name not in MODELS:
        raise TypeError(f"只能打包 {', '.join(MODELS)}，收到 {name}")
    clash = set(notes) & {"model", "kwargs", "state_dict"}
    if clash:
        raise ValueError(f"附注不能叫 {', '.join(sorted(clash))}")
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return {"model": name, "kwargs": dict(model.init_kwargs), "state_dict": state, **notes}


def unpack(packed: dict[str, Any]) -> nn.Module:
    """由 :func:`pack` 的结果重建模型（``eval()`` 模式）；附注原样留在字典里。"""
    model = MODELS[packed["model"]](**packed["kwargs"])
    model.load_state_dict(packed["state_dict"])
    return model.eval()
