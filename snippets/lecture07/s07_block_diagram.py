"""第 7.4 节：Post-LN 与 Pre-LN 两种 Transformer 块的结构图。

数据从下往上流。右侧的旁路是残差连接：子层的输入绕过子层，在圆圈“+”处与子层的输出相加。
Post-LN 在相加之后做层归一化，主干上每个子层之后都有一次 LN；Pre-LN 只对子层的输入做 LN，
主干本身只有加法，所有块之后再补一个 LN。
"""

from matplotlib.patches import Circle

from transformer_book.book import Figure
from transformer_book.diagrams import Box, draw_skip, draw_stack, finish_diagram, new_diagram

GAP = 0.8  # 方框之间的空隙：留出位置，让一个子层的“相加”与下一个子层旁路的分出点分开
JOIN = 0.18  # draw_skip 的旁路在方框出口上方这么远处汇入主干

POST_LN = [Box("输入 x", kind="text"), Box("多头自注意力", color="attention"), Box("层归一化", color="norm"),
           Box("前馈网络", color="ffn"), Box("层归一化", color="norm"), Box("输出", kind="text")]
PRE_LN = [Box("输入 x", kind="text"), Box("层归一化", color="norm"), Box("多头自注意力", color="attention"),
          Box("层归一化", color="norm"), Box("前馈网络", color="ffn"), Box("输出", kind="text")]


def plus(ax, center):
    """残差相加的地方：一个带“+”的小圆。"""
    ax.add_patch(Circle(center, 0.13, facecolor="white", edgecolor="#333333", lw=1.1, zorder=5))
    ax.text(*center, "+", ha="center", va="center", fontsize=10, zorder=6)


def compute():
    fig, ax = new_diagram(width=7.0)
    columns = [("Post-LN（原始 Transformer）", "LN(x + 子层(x))", POST_LN, 0.0, [(1, 1), (3, 3)]),
               ("Pre-LN（GPT-2 及以后）", "x + 子层(LN(x))", PRE_LN, 5.0, [(1, 2), (3, 4)])]
    for title, formula, boxes, x, skips in columns:
        layout = draw_stack(ax, boxes, x=x, width=2.6, gap=GAP)
        for i, j in skips:  # 旁路从方框 i 的入口前分出，在方框 j 的出口后汇入
            draw_skip(ax, layout, i, j, label="残差")
            plus(ax, (x, layout.top(j)[1] + JOIN))
        top = layout.top(len(boxes) - 1)[1]
        ax.text(x, top + 0.75, title, ha="center", va="bottom", fontsize=10)
        ax.text(x, top + 0.35, formula, ha="center", va="bottom", fontsize=9, color="#555555")
    ax.text(5.0, -0.6, "（堆叠时，全部块的最上方再加一个层归一化）", ha="center", va="top", fontsize=8, color="#666666")
    ax.update_datalim([(-2.2, -1.0), (7.4, top + 1.2)])
    finish_diagram(ax)
    return {"figure": Figure(fig)}
