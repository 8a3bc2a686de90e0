"""从零写一个会写诗的 GPT，第五步：装进一个 Transformer 块（层归一化、前馈网络）。"""

from _scratch_stage import stage_results

BUDGET_SECONDS = 75


def compute():
    return stage_results("block")  # 三个种子各训练一次，再各写 scratch.N_POEMS 首诗
