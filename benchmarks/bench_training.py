"""第 7 讲第 11 节的训练要多久？单线程计时（整个第 11 节在 2 核上用 2 个单线程进程并行跑）。

设置与书相同：20,000 个训练句子、2,000 个开发句子、2,000 个测试句子，8 轮，AdamW，最大学习率 3e-3，
预热 200 步，余弦衰减。模型：

- ``rnn``：第 5 讲的 LSTM 语言模型（d = 64，权重共享）；
- ``gpt``：迷你 GPT（d = 64，4 个头，2 层，可学习的位置嵌入，Pre-LN，权重共享），可读的注意力路径；
- ``gpt-sdpa``：同一个模型，注意力用 ``F.scaled_dot_product_attention``（数学相同，只比速度）。

用法::

    PYTHONPATH=src python benchmarks/bench_training.py                      # 默认：rnn gpt，批量 64
    PYTHONPATH=src python benchmarks/bench_training.py --models gpt --batch-size 32 64 128
"""

from __future__ import annotations

import argparse
import time

import torch

from transformer_book import toy_language as tl
from transformer_book.lecture07.agreement import agreement_accuracy
from transformer_book.rnn import RNNLM
from transformer_book.training import TokenData, TrainConfig, train_language_model
from transformer_book.transformer import TransformerLM, count_parameters


def make_model(name: str, vocab_size: int, max_len: int) -> torch.nn.Module:
    if name == "rnn":
        return RNNLM(vocab_size=vocab_size, d_model=64)
    impl = "sdpa" if name == "gpt-sdpa" else "manual"
    return TransformerLM(vocab_size=vocab_size, d_model=64, n_heads=4, n_layers=2, max_len=max_len,
                         pos="learned", norm="pre", tie_weights=True, attn_impl=impl)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=["rnn", "gpt"], choices=["rnn", "gpt", "gpt-sdpa"])
    parser.add_argument("--batch-size", nargs="+", type=int, default=[64])
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--n-train", type=int, default=20_000)
    parser.add_argument("--max-len", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    vocab = tl.build_vocab()
    t0 = time.perf_counter()
    train_sentences = tl.generate_corpus(args.n_train, seed=1)
    test_sentences = tl.generate_corpus(2_000, seed=3)
    train = TokenData(tl.encode_corpus(train_sentences, vocab), vocab.pad_id)
    dev = TokenData(tl.encode_corpus(tl.generate_corpus(2_000, seed=2), vocab), vocab.pad_id)
    test = TokenData(tl.encode_corpus(test_sentences, vocab), vocab.pad_id)
    print(f"数据：{len(train)} 句 / {train.n_predicted} 个被预测词元，生成与编码 {time.perf_counter() - t0:.2f} s；"
          f"测试集的困惑度下限 {tl.language_perplexity(test_sentences):.3f}；线程数 {torch.get_num_threads()}")

    agreement_sets = {k: tl.agreement_test_set(k, 1000, seed=0) for k in (0, 3, 4, 8, 10)}
    for name in args.models:
        for batch_size in args.batch_size:
            config = TrainConfig(epochs=args.epochs, batch_size=batch_size, seed=args.seed)
            result = train_language_model(lambda: make_model(name, len(vocab), args.max_len), train, dev, test, config)
            t1 = time.perf_counter()
            acc = {k: agreement_accuracy(result.model, items, vocab) for k, items in agreement_sets.items()}
            t_agree = time.perf_counter() - t1
            dev_ppl = " ".join(f"{p:.3f}" for p in result.dev_perplexity)
            acc_text = " ".join(f"{k}:{a:.1%}" for k, a in acc.items())
            print(f"{name:8s} 批量 {batch_size:4d}  参数 {count_parameters(result.model):7,d}  步数 {result.steps:5d}  "
                  f"训练+评估 {result.seconds:6.1f} s（一致性测试 {t_agree:.1f} s）\n"
                  f"    开发集困惑度 {dev_ppl}\n    测试集困惑度 {result.test_perplexity:.3f}  一致准确率 {acc_text}",
                  flush=True)


if __name__ == "__main__":
    main()
