"""从零搭一个小 GPT，第五步：一个 Transformer 块（残差连接、层归一化、前馈网络）。"""

from transformer_book.book import Artifact, Value
from transformer_book.chapter20 import scratch

DATA_FILES = ["data/p08/explanations.txt", "data/p08/letters.txt", "data/p08/notes.txt", "data/p08/stories.txt"]
BUDGET_SECONDS = 20


def compute():
    result = scratch.train_stage("block")  # 五个阶段同一套训练：scratch.ScratchConfig() 的默认设置
    return {
        "val_loss": Value(result.val_loss[-1], ".3f", kind="trained"),
        "n_parameters": Value(result.n_parameters, ",d"),
        "result": Artifact(result.data()),  # 损失曲线，交给 scratch_losses 画图、比较
    }
