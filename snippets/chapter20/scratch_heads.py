"""从零搭一个小 GPT，第四步：几个头。"""

from transformer_book.book import Artifact, Value
from transformer_book.chapter20 import scratch

DATA_FILES = ["data/p08/explanations.txt", "data/p08/letters.txt", "data/p08/notes.txt", "data/p08/stories.txt"]
BUDGET_SECONDS = 45


def compute():
    runs = scratch.train_seeds("heads")  # 五个阶段同一套训练（scratch.ScratchConfig() 的默认设置），每个种子各一次
    finals = [r.val_loss[-1] for r in runs]  # 每个种子训练结束时的验证损失
    return {
        "val_loss": Value(sum(finals) / len(finals), ".3f", kind="trained"),  # 三个种子的平均
        **{f"val_loss_seed{s}": Value(v, ".3f", kind="trained") for s, v in zip(scratch.SEEDS, finals)},
        "n_parameters": Value(runs[0].n_parameters, ",d"),
        "result": Artifact([r.data() for r in runs]),  # 每个种子的损失曲线，交给 scratch_losses 画图、比较
    }
