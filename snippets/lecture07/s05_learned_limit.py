"""第 5.3 节：可学习的位置表只有 T_max 行，超出就报错。

用参考实现的 ``LearnedPositionEmbedding`` 建一张 T_max = 512、d = 16 的表（BERT 的长度），
先取 512 个位置（可以），再取 513 个位置，记下错误信息。
"""

import torch

from transformer_book.book import Claim, Value, true

from transformer_book.transformer import LearnedPositionEmbedding

L_MAX, D = 512, 16


def compute():
    torch.manual_seed(0)
    table = LearnedPositionEmbedding(max_len=L_MAX, d_model=D)
    full = table(L_MAX)  # (T_max, d)：每个位置一行
    try:
        table(L_MAX + 1)
    except ValueError as error:
        message = str(error)
    else:
        message = ""
    return {
        "refuses": Claim("要第 513 个位置时，代码拒绝执行，并在错误信息里写出表的长度",
                         true(f"L_max = {L_MAX}" in message, name="错误信息写出了表的长度")),
        "shape": Value(f"{tuple(full.shape)}"),
        "parameters": Value(table.table.weight.numel(), ",d"),
        "error": Value(message),
    }
