"""从零写一个会写诗的 GPT，第五步：装进一个 Transformer 块（层归一化、前馈网络）。

种子 0 训练好的模型另外交给 ``scratch_playground``：它在读者的浏览器里运行（第 20 章的“试一试”一页）。
"""

from _scratch_stage import stage_results

from transformer_book.book import Artifact
from transformer_book.chapter20 import poems, scratch

BUDGET_SECONDS = 75


def compute():
    runs = scratch.train_seeds("block")  # 三个种子各训练一次，再各写 scratch.N_POEMS 首诗
    tokenizer = poems.prepare_poems().tokenizer
    return {**stage_results("block", runs),
            "model": Artifact(scratch.pack_model(runs[0].model, scratch.ScratchConfig(), tokenizer))}
