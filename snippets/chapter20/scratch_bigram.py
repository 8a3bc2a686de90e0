"""从零写一个会写诗的 GPT，第一步：二元模型，只看当前这一个字。"""

from _scratch_stage import stage_results

BUDGET_SECONDS = 75


def compute():
    return stage_results("bigram")  # 三个种子各训练一次，再各写 scratch.N_POEMS 首诗
