"""从零写一个会写诗的 GPT：五个阶段共用的数据与设置（五言唐诗语料，scratch.ScratchConfig 的默认值）。"""

import math

from transformer_book.book import Value
from transformer_book.chapter20 import p08, poems, scratch


def compute():
    config, data, p08_data = scratch.ScratchConfig(), poems.prepare_poems(), p08.prepare_data()
    p08_config = p08.P08Config()
    every = data.train_poems + data.val_poems
    return {
        "poems": Value(len(every), ",d"),
        "jueju": Value(sum(len(p) == 24 for p in every), ",d"),  # 五言绝句：4 句 × (5 字 + 标点)
        "lvshi": Value(sum(len(p) == 48 for p in every), ",d"),  # 五言律诗：8 句
        "train_poems": Value(len(data.train_poems), ",d"),
        "val_poems": Value(len(data.val_poems), ",d"),
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
        "tokens_seen": Value(config.steps * config.batch_size * config.context, ",d"),
        "lr": Value(config.lr, "g"),
        "warmup": Value(config.warmup_steps, "d"),
        "prompt": Value(scratch.PROMPT),
        "seeds": Value(len(scratch.SEEDS), "d"),  # 每个阶段训练几次（几个种子）
        "n_poems": Value(scratch.N_POEMS, "d"),  # 每个训练好的模型写几首诗
        # 实践 P08 的语料（为什么这一篇不用它）：只读语料、建分词器，不训练
        "p08_train_chars": Value(len(p08_data.train_ids), ",d"),
        "p08_vocab_size": Value(p08_data.tokenizer.vocab_size, ",d"),
        "p08_tokens_seen": Value(p08_config.steps * p08_config.batch_size * p08_config.context, ",d"),  # P08 训练时读过的字符
    }
