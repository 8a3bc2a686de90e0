"""第 11.3 节：位置编码用可学习的位置嵌入的迷你 GPT，三个随机种子。

这三个模型就是第 11.1 节训练的迷你 GPT（同样的数据、设置和种子 0、1、2），直接取来，不再重训；
这个片段只把它们按第 11.3 节的样子交给 s11_length。
"""

from _positions import position_results

from transformer_book.book import artifact

REQUIRES = ["lecture07/s11_train"]
BUDGET_SECONDS = 30


def compute():
    reuse = {0: artifact("lecture07/s11_train", "gpt"),
             **{s: artifact("lecture07/s11_train", f"gpt_seed{s}") for s in (1, 2)}}
    return position_results("learned", reuse=reuse)
