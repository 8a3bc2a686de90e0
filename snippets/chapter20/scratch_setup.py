"""从零搭一个小 GPT：五个阶段共用的数据与设置（实践 P08 的语料与切分，scratch.ScratchConfig 的默认值）。"""

import math

from transformer_book.book import Value
from transformer_book.chapter20 import p08, scratch

DATA_FILES = ["data/p08/explanations.txt", "data/p08/letters.txt", "data/p08/notes.txt", "data/p08/stories.txt"]


def compute():
    config, data = scratch.ScratchConfig(), p08.prepare_data()
    return {
        "train_chars": Value(len(data.train_ids), ",d"),
        "val_chars": Value(len(data.val_ids), ",d"),
        "vocab_size": Value(data.tokenizer.vocab_size, ",d"),
        "uniform_loss": Value(math.log(data.tokenizer.vocab_size), ".2f"),  # 均匀猜测：ln V
        "d_model": Value(config.d_model, "d"),
        "n_heads": Value(config.n_heads, "d"),
        "d_head": Value(config.d_model // config.n_heads, "d"),
        "context": Value(config.context, "d"),
        "batch_size": Value(config.batch_size, "d"),
        "steps": Value(config.steps, "d"),
        "dropout": Value(config.dropout, ".1f"),
    }
