"""第 20 章第一步：用字符级分词器把“春风又绿江南岸”切成词元、换成编号。

两张词表对照：一张只由这句诗本身建立（七个字都认识），一张由实践 P08 的训练语料建立
（约一千多个不同的字符）。同一句话在两张词表里的编号完全不同，语料里没出现过的字变成 <unk>。
"""

from transformer_book.chapter20 import p08
from transformer_book.book import Claim, Table, Value, above, equal
from transformer_book.char_tokenizer import UNK, CharTokenizer

LINE = "春风又绿江南岸"


def shown(token):
    """特殊词元写成代码样式（<unk> 不能直接放进网页，会被当成 HTML 标签）。"""
    return f"`{token}`" if token.startswith("<") else token


def compute():
    toy = CharTokenizer.from_text(LINE)  # 词表只有这句诗的七个字（外加 <pad>、<unk>）
    corpus = p08.prepare_data().tokenizer  # 词表来自 P08 的训练语料
    corpus_chars = sum(len(text) for text in p08.load_corpus().values())  # 整份语料（训练 + 验证）的字符数
    toy_ids, corpus_ids = toy.encode(LINE), corpus.encode(LINE)
    unknown = [ch for ch, tok in zip(LINE, corpus.tokens(LINE)) if tok == UNK]

    rows = [[ch, toy_id, shown(tok), corpus_id] for ch, toy_id, tok, corpus_id in zip(LINE, toy_ids, corpus.tokens(LINE), corpus_ids)]
    frequent = corpus.vocab[2:7]  # 语料里最常见的五个字符：编号 2 到 6
    return {
        "corpus_chars": Value(corpus_chars, ",d"),
        "corpus_wan": Value(corpus_chars / 1e4, ".1f"),  # 以“万字”为单位
        "toy_round_trip": Claim(
"只由这句诗建立的词表能把它原样还原", equal(还原=toy.decode(toy_ids), 原句=LINE)),
        "has_unknown": Claim("这句诗里有 P08 训练文本中没出现过的字", above(len(unknown), 0, name="没出现过的字数")),

        "tokens": Table(columns=["字符", "玩具词表中的编号", "P08 词表中的词元", "P08 词表中的编号"], rows=rows),
        "toy_tokens": Value(" | ".join(toy.tokens(LINE))),
        "toy_ids": Value(" | ".join(str(i) for i in toy_ids)),
        "toy_vocab_size": Value(toy.vocab_size, "d"),
        "corpus_vocab_size": Value(corpus.vocab_size, ",d"),
        "n_chars": Value(len(LINE), "d"),
        "n_tokens": Value(len(corpus_ids), "d"),
        "unknown_chars": Value("、".join(f"「{ch}」" for ch in unknown)),
        "corpus_decoded": Value(f"`{corpus.decode(corpus_ids)}`"),  # 写成代码样式：<unk> 不会被当成 HTML 标签
        "most_frequent": Value("、".join(f"「{ch}」" if ch not in "\n" else "换行符" for ch in frequent)),
    }
