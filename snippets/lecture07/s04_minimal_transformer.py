"""第 4.4 节：把三个补丁装上之后的“最小 Transformer”示意图。

数据从下往上流：词向量加上位置编码，经过 L 层“带因果掩码的自注意力 + 逐位置的前馈网络”，
最后由线性层和 softmax 给出下一个词的概率。右侧的灰字标出每个部件补上的是哪个缺陷。
"""

from transformer_book.book import Figure
from transformer_book.diagrams import Box, draw_stack, finish_diagram, new_diagram


def compute():
    fig, ax = new_diagram(width=6.0)
    boxes = [
        Box("输入的词", kind="text"),
        Box("词向量 + 位置编码", color="input", note="补丁一：告诉模型词序"),
        Box("自注意力（带因果掩码）", color="attention", note="补丁三：不许看未来"),
        Box("前馈网络（逐位置）", color="ffn", note="补丁二：逐位置的非线性"),
        Box("线性层 + softmax", color="output"),
        Box("下一个词的概率", kind="text"),
    ]
    draw_stack(ax, boxes, direction="up", repeat=[(2, 3, "重复 L 层")])
    finish_diagram(ax)
    return {"figure": Figure(fig)}
