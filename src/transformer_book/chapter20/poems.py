"""从零写一个会写诗的 GPT（实践 P08 前篇）的语料、续写和格律的量法。

语料是包里的 ``transformer_book/data/poems/wuyan.txt``：全唐诗里的五言绝句与五言律诗，转成简体，一行一首（来源、许可和筛选办法见同一目录的
``README.md``）。它适合看“每一步添了什么”：只看当前一个字的二元模型数不到五，注意力和位置却能让
模型在每五个字后面放一个标点、单句用逗号、双句用句号。

1. :func:`prepare_poems`：每二十首取一首作验证集，其余作训练集；首与首之间用换行 ``\\n`` 隔开，换行也是一个词元
   （“这首诗写完了”）。分词器只从训练文本建立。
2. :func:`write_poems`：让模型从提示续写，写到换行为止（最多 :data:`MAX_POEM_CHARS` 个字符）。
3. :func:`five_char_share`、:func:`form_share`：量一量写出来的诗像不像五言诗——一句恰好五个字的比例，整首合乎
   绝句或律诗格式的比例。

形状记号：B 批量大小，T 上下文窗口，V 词表大小。
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from transformer_book.char_tokenizer import SPECIALS, CharTokenizer

CORPUS = Path(__file__).resolve().parents[1] / "data" / "poems" / "wuyan.txt"  # 随包安装：装好的包也带着它
CORPUS_SHA256 = "7a46ac80b3b0e171f2bd7d610612c17248e134265959826dd61361d7d91c4570"  # 与 README.md 里写的一致
# 书的构建引擎据此把语料文件算进缓存键：语料一改，用到它的片段都会重跑。
BOOK_DATA_FILES = [str(CORPUS)]

VAL_EVERY = 20  # 每二十首取一首作验证集
MAX_POEM_CHARS = 60  # 续写一首诗最多写多少个字符（律诗 48 个字符，再加换行）
LINE_END = re.compile("[，。]")


def load_poems(path: Path = CORPUS) -> list[str]:
    """读入语料：一行一首诗（含标点），按文件里的顺序。随包的语料先核对 sha256，被改动过就报错。"""
    if not path.exists():
        raise FileNotFoundError(f"没有找到诗歌语料 {path}（见 transformer_book/data/poems/README.md）")
    raw = path.read_bytes()
    if path == CORPUS and hashlib.sha256(raw).hexdigest() != CORPUS_SHA256:
        raise ValueError(f"{path} 的 sha256 与 CORPUS_SHA256 不符：语料被改动过（重新生成的办法见同目录的 README.md）")
    return [line for line in raw.decode("utf-8").splitlines() if line]


@dataclass
class PoemData:
    """切分、编码好的诗歌语料。

    Attributes
    ----------
    tokenizer : CharTokenizer
        只从训练文本建立（词表里有换行 ``\\n``、逗号和句号）。
    train_poems, val_poems : list[str]
        训练集与验证集里的诗（验证集是每二十首里的最后一首）。
    train_ids, val_ids : LongTensor (N,)
        每首诗后面接一个换行，连成一条，编码成一维编号序列。
    """

    tokenizer: CharTokenizer
    train_poems: list[str]
    val_poems: list[str]
    train_ids: torch.Tensor
    val_ids: torch.Tensor


def prepare_poems(poems: Sequence[str] | None = None) -> PoemData:
    """把诗分成训练集与验证集（每 :data:`VAL_EVERY` 首取最后一首作验证集），建立分词器，再编码。"""
    poems = load_poems() if poems is None else list(poems)
    train = [p for i, p in enumerate(poems) if i % VAL_EVERY != VAL_EVERY - 1]
    val = [p for i, p in enumerate(poems) if i % VAL_EVERY == VAL_EVERY - 1]
    train_text, val_text = "\n" + "\n".join(train) + "\n", "\n" + "\n".join(val) + "\n"
    tok = CharTokenizer.from_text(train_text)
    as_tensor = lambda s: torch.tensor(tok.encode(s), dtype=torch.long)  # noqa: E731
    return PoemData(tok, train, val, as_tensor(train_text), as_tensor(val_text))


@torch.no_grad()
def write_poems(model: nn.Module, tokenizer: CharTokenizer, prompt: str, n: int, *, context: int,
                seed: int = 0, max_chars: int = MAX_POEM_CHARS) -> list[str]:
    """让模型从 ``prompt`` 出发续写 ``n`` 首诗（并排一起写），每首写到换行为止，返回提示加续写的全文（不含换行）。

    每一步把最后 ``context`` 个字符送进模型，从下一个字符的分布里按概率抽一个（温度 1，不截断，只去掉
    ``<pad>``、``<unk>`` 这两个不是字的词元）；
    抽样用种子为 ``seed`` 的发生器，同一个模型、同一个种子写出的诗完全相同。
    """
    was_training = model.training
    model.eval()
    g = torch.Generator().manual_seed(seed)
    idx = torch.tensor([tokenizer.encode("\n" + prompt)] * n, dtype=torch.long)  # (n, 提示长度)：从一首诗的开头写起
    newline = tokenizer.encode("\n")[0]
    for _ in range(max_chars - len(prompt)):
        logits = model(idx[:, -context:])[:, -1]  # (n, V)：只要最后一个位置的预测
        logits[:, :len(SPECIALS)] = float("-inf")  # <pad>、<unk> 不是字，训练文本里也没有：不让它们被抽中
        nxt = torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=g)  # (n, 1)
        idx = torch.cat([idx, nxt], dim=1)
        if bool((idx[:, 1 + len(prompt):] == newline).any(dim=1).all()):  # 每一首都写完了
            break
    model.train(was_training)
    return [tokenizer.decode(row[1:].tolist()).split("\n")[0] for row in idx]


def lines_of(poem: str) -> list[str]:
    """一首诗里写完了的句子：以逗号或句号结尾的每一段（不含标点）；最后没写完的半句不算。"""
    return LINE_END.split(poem)[:-1]


def five_char_share(poems: Sequence[str], skip: str = "") -> float:
    """写完了的句子里，恰好五个字的占多少。``skip`` 是提示：每首开头的提示不算模型写的。"""
    lines = [line for poem in poems for line in lines_of(poem[len(skip):])]
    return sum(len(line) == 5 for line in lines) / len(lines) if lines else 0.0


def is_wuyan(poem: str) -> bool:
    """整首合乎格式：4 句（绝句）或 8 句（律诗），每句五个字，单句以逗号、双句以句号结尾，句号之后就收尾。"""
    couplet = "[^，。]{5}，[^，。]{5}。"  # 一联：五字 + 逗号，五字 + 句号
    return re.fullmatch(f"(?:{couplet}){{2}}|(?:{couplet}){{4}}", poem) is not None


def form_share(poems: Sequence[str]) -> float:
    """合乎五言绝句或律诗格式的诗占多少（:func:`is_wuyan`）。"""
    return sum(is_wuyan(p) for p in poems) / len(poems) if poems else 0.0
