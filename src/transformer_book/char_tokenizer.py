"""字符级分词器（tokenizer）：一个字符就是一个词元（token）。

第 20 章第一步和实践 P08 用它把中文文本变成编号。规则全部写在这里，结果完全确定：

- 词表的前两个编号留给特殊词元：``0 = <pad>``（填充），``1 = <unk>``（未知字符）。
- 其余字符按**出现次数从多到少**编号，次数相同时按 **Unicode 码位从小到大**。于是最常见的字符编号最小，
  同一段训练文本总是得到同一张词表，与 Python 的字典顺序、集合顺序都无关。
- 编码时，词表里没有的字符一律变成 ``<unk>``；解码时 ``<pad>`` 被略去，``<unk>`` 原样写成 ``<unk>``。
- 换行符也是普通字符，有自己的编号（段落结构因此能被模型学到）。

另有一个把文本切成训练集与验证集的小函数 :func:`train_val_split`。
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Iterable, Sequence

PAD, UNK = "<pad>", "<unk>"
PAD_ID, UNK_ID = 0, 1
SPECIALS = (PAD, UNK)


@dataclass(frozen=True)
class CharTokenizer:
    """字符级分词器。用 :meth:`from_text` 从训练文本建立，不要直接改 ``vocab``。

    Attributes
    ----------
    vocab : tuple[str, ...]
        编号 → 词元：``vocab[0] = "<pad>"``，``vocab[1] = "<unk>"``，之后是按频率（再按码位）排好的字符。
    """

    vocab: tuple[str, ...]

    def __post_init__(self) -> None:
        if tuple(self.vocab[:2]) != SPECIALS:
            raise ValueError(f"词表的前两项必须是 {SPECIALS}，收到 {tuple(self.vocab[:2])}")
        if len(set(self.vocab)) != len(self.vocab):
            raise ValueError("词表里有重复的词元")
        object.__setattr__(self, "_ids", {tok: i for i, tok in enumerate(self.vocab)})

    @classmethod
    def from_text(cls, text: str | Iterable[str]) -> "CharTokenizer":
        """从文本建立词表：特殊词元在前，字符按出现次数降序、码位升序编号。

        Parameters
        ----------
        text : str 或 str 的可迭代对象
            训练文本（给多段时合在一起统计）。
        """
        counts: Counter[str] = Counter()
        for part in [text] if isinstance(text, str) else text:
            counts.update(part)
        chars = sorted(counts, key=lambda c: (-counts[c], ord(c)))
        return cls(SPECIALS + tuple(chars))

    @property
    def vocab_size(self) -> int:
        """词表大小 V（含两个特殊词元）。"""
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        """文本 → 编号列表，每个字符一个编号；词表外的字符记为 ``UNK_ID``。"""
        ids = self._ids  # type: ignore[attr-defined]
        return [ids.get(ch, UNK_ID) for ch in text]

    def decode(self, ids: Iterable[int]) -> str:
        """编号 → 文本：略去 ``<pad>``，``<unk>`` 写成 ``"<unk>"``。"""
        return "".join(self.vocab[int(i)] for i in ids if int(i) != PAD_ID)

    def tokens(self, text: str) -> list[str]:
        """文本切成的词元（词表外的字符显示为 ``<unk>``），与 :meth:`encode` 一一对应。"""
        return [self.vocab[i] for i in self.encode(text)]

    def state(self) -> dict:
        """可以 pickle / JSON 的状态（交给其他代码片段）。"""
        return {"vocab": list(self.vocab)}

    @classmethod
    def from_state(cls, state: dict) -> "CharTokenizer":
        """由 :meth:`state` 的返回值重建。"""
        return cls(tuple(state["vocab"]))


def train_val_split(text: str, val_fraction: float = 0.1) -> tuple[str, str]:
    """把一段文本切成训练部分和验证部分：末尾约 ``val_fraction`` 的内容作验证集。

    切点从“按比例算出的位置”往前找最近的段落分隔（空行），找不到就找换行，再找不到就按字符切，
    这样验证集尽量从一个完整段落开始。不打乱顺序：验证集是训练时从未见过的连续文字。

    Parameters
    ----------
    text : str
    val_fraction : float
        0 < val_fraction < 1。

    Returns
    -------
    train, val : str
        ``train + val == text``。
    """
    if not 0.0 < val_fraction < 1.0:
        raise ValueError(f"val_fraction 必须在 0 与 1 之间，收到 {val_fraction}")
    cut = int(round(len(text) * (1.0 - val_fraction)))
    for sep in ("\n\n", "\n"):
        pos = text.rfind(sep, 0, cut)
        if pos > 0:
            cut = pos + len(sep)
            break
    return text[:cut], text[cut:]


def shift_pairs(ids: Sequence[int]) -> tuple[list[int], list[int]]:
    """语言模型的输入与目标：输入去掉最后一个词元，目标去掉第一个词元（错开一位）。"""
    if len(ids) < 2:
        raise ValueError("至少需要 2 个词元才能构成一对（输入, 目标）")
    return list(ids[:-1]), list(ids[1:])
