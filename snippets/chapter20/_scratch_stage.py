"""从零写一个会写诗的 GPT：五个阶段的片段（``scratch_bigram.py`` … ``scratch_block.py``）共用的一段。

一个阶段在每个种子上各训练一次（``scratch.ScratchConfig()`` 的默认设置，五个阶段完全相同），训练好以后让它
写诗，记下验证损失、写出的诗像不像五言诗、两首样诗。每个种子的全部结果交给 ``scratch_losses`` 画图、比较。
以下划线开头的文件不是片段，是片段导入的普通模块。
"""

from statistics import mean

from transformer_book.book import Artifact, Value
from transformer_book.chapter20 import poems, scratch


def stage_results(stage, runs=None):
    runs = scratch.train_seeds(stage) if runs is None else runs  # 每个种子一个结果：损失曲线、训练好的模型、写出的诗
    finals = [r.val_loss[-1] for r in runs]  # 每个种子训练结束时的验证损失
    five = [poems.five_char_share(r.poems) for r in runs]  # 写完的句子里恰好五个字的比例
    form = [poems.form_share(r.poems) for r in runs]  # 整首合乎五言绝句或律诗格式的比例
    return {
        "val_loss": Value(mean(finals), ".3f", kind="trained"),  # 三个种子的平均
        **{f"val_loss_seed{s}": Value(v, ".3f", kind="trained") for s, v in zip(scratch.SEEDS, finals)},
        "five_char": Value(mean(five), ".0%", kind="trained"),
        "form": Value(mean(form), ".0%", kind="trained"),
        "n_parameters": Value(runs[0].n_parameters, ",d"),
        "result": Artifact([r.data() for r in runs]),
    }
