"""从零写一个会写诗的 GPT，第三步：一个自注意力头（加上位置）。"""

from _scratch_stage import stage_results

BUDGET_SECONDS = 75


def compute():
    return stage_results("head")  # 三个种子各训练一次，再各写 scratch.N_POEMS 首诗
