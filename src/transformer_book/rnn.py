"""第 5 讲的 RNN 语言模型：第 7 讲第 11 节和迷你 GPT 比较的基线。

结构：词嵌入 → 一层 LSTM → 线性输出层（默认与词嵌入共享权重）。循环单元用的是 LSTM
（长短期记忆网络，long short-term memory），不是最简单的 tanh RNN：书中说的“RNN”都指这个模型。

接口与 :class:`transformer_book.transformer.TransformerLM` 相同——``forward(idx, pad_mask=None)`` 接收
(B, T) 的词编号，返回 (B, T, V) 的 logits——所以训练和评估代码不必区分两种模型。

形状记号：B 批量大小，T 序列长度，d 嵌入 / 隐藏状态宽度，V 词表大小。
"""

from __future__ import annotations

import torch
from torch import nn

from transformer_book.transformer import count_parameters  # 共享的参数计数：按对象去重

__all__ = ["RNNLM", "count_parameters"]


class RNNLM(nn.Module):
    """LSTM 语言模型：在每个位置预测下一个词。

    Parameters
    ----------
    vocab_size : int
        词表大小 V。
    d_model : int
        词嵌入宽度，也是 LSTM 隐藏状态的宽度 d（共享权重要求两者相等）。
    n_layers : int
        LSTM 层数。
    tie_weights : bool
        输出层是否与词嵌入共享权重（``head.weight is embed.weight``）。
    dropout : float
        词嵌入之后、输出层之前的 dropout 概率（多层时层与层之间也用）。
    """

    def __init__(self, *, vocab_size: int, d_model: int = 64, n_layers: int = 1, tie_weights: bool = True,
                 dropout: float = 0.0) -> None:
        super().__init__()
        # 构造参数原样留下：保存训练好的模型时与参数一起存，恢复时原样传回（transformer_book.checkpoint）
        self.init_kwargs = dict(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, tie_weights=tie_weights,
                                dropout=dropout)
        self.vocab_size, self.d_model, self.n_layers = vocab_size, d_model, n_layers

        self.embed = nn.Embedding(vocab_size, d_model)
        self.drop = nn.Dropout(dropout)
        # PyTorch 的 LSTM 每个门有两份偏置（b_ih 和 b_hh），参数个数 = 4d(d_in + d) + 8d。
        self.lstm = nn.LSTM(d_model, d_model, num_layers=n_layers, batch_first=True,
                            dropout=dropout if n_layers > 1 else 0.0)
        self.head = nn.Linear(d_model, vocab_size)
        # 初始化：词嵌入 N(0, 0.1²)（共享权重时也是输出层的初始值）。比 GPT 的 0.02 大：LSTM 的门是
        # 输入的仿射函数，输入太小时各个词几乎无法区分，模型要多花两三轮才学会主谓一致。
        # LSTM 保留 PyTorch 默认的 U(-1/√d, 1/√d)；输出层偏置为 0。
        nn.init.normal_(self.embed.weight, mean=0.0, std=0.1)
        nn.init.zeros_(self.head.bias)
        if tie_weights:
            self.head.weight = self.embed.weight  # 同一个 Parameter 对象，不是复制
        else:
            nn.init.normal_(self.head.weight, mean=0.0, std=0.1)

    def forward(self, idx: torch.Tensor, pad_mask: torch.Tensor | None = None) -> torch.Tensor:
        """计算每个位置上“下一个词”的 logits。

        Parameters
        ----------
        idx : torch.LongTensor, shape (B, T)
            词编号。
        pad_mask : torch.BoolTensor, shape (B, T), optional
            True 表示真实的词，False 表示填充。LSTM 从左往右读，填充只能在句子末尾（右侧填充），
            这时真实位置的输出根本不受填充影响，所以这里只检查填充确实在右侧，不需要别的处理。

        Returns
        -------
        torch.Tensor, shape (B, T, V)
        """
        if pad_mask is not None and bool((pad_mask[:, 1:] & ~pad_mask[:, :-1]).any()):
            raise ValueError("RNNLM 只支持右侧填充：pad_mask 里 False（填充）之后不能再出现 True")
        x = self.drop(self.embed(idx))  # (B, T, d)
        h, _ = self.lstm(x)  # (B, T, d)，初始隐藏状态为 0
        return self.head(self.drop(h))  # (B, T, V)
