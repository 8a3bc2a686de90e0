"""第 11.3 节：位置编码用正弦位置编码（加在词嵌入上）的迷你 GPT，三个随机种子。

数据、模型的其余部分和训练设置都与第 11.1 节的迷你 GPT 相同，只换位置编码；主谓一致的评估在 s11_length 里。
"""

from _positions import position_results

BUDGET_SECONDS = 150


def compute():
    return position_results("sinusoidal")
