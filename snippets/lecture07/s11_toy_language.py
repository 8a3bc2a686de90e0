"""第 11 节开头：玩具语言的样子——训练语料里的几个句子、修饰语个数的分布、句子长度、词表大小。

语料与第 11 节的训练完全相同（experiments.load_toy_data：20,000 个训练句子，种子固定）。
"""

from collections import Counter

from transformer_book import toy_language as tl
from transformer_book.book import Table, Value
from transformer_book.lecture07.experiments import load_toy_data

N_EXAMPLES = 6


def compute():
    data = load_toy_data()
    parses = [tl.parse(s) for s in data.train_sentences]

    examples = Table(
        columns=["句子", "修饰语个数", "主语", "主动词"],
        rows=[[f"`{' '.join(p.tokens)}`", p.n_modifiers, p.tokens[p.subject_pos], p.tokens[p.verb_pos]]
              for p in parses[:N_EXAMPLES]],
        formats=["", "d", "", ""],
    )

    counts = Counter(p.n_modifiers for p in parses)
    lengths = Counter(len(p.tokens) for p in parses)
    by_count = Table(
        columns=["修饰语个数", "句子数", "占比", "平均长度（词元，含 `<s>`、`</s>`）", "最长"],
        rows=[[k, counts[k], counts[k] / len(parses),
               sum(len(p.tokens) for p in parses if p.n_modifiers == k) / counts[k],
               max(len(p.tokens) for p in parses if p.n_modifiers == k)]
              for k in sorted(counts)],
        formats=["d", ",d", ".1%", ".1f", "d"],
    )
    longest = max(lengths)
    return {
        "max_modifiers": Value(max(counts), "d"),

        "examples": examples,
        "by_count": by_count,
        "vocab_size": Value(len(data.vocab), "d"),
        "n_train": Value(len(data.train_sentences), ",d"),
        "n_dev": Value(len(data.dev_sentences), ",d"),
        "n_test": Value(len(data.test_sentences), ",d"),

        "n_train_tokens": Value(data.train.n_predicted, ",d"),
        "longest_sentence": Value(longest, "d"),
        "mean_length": Value(sum(len(p.tokens) for p in parses) / len(parses), ".1f"),
    }
