"""第 5 讲的玩具语言：带修饰语的英文式句子，用来测试主谓一致（subject–verb agreement）。

一个句子的结构（从左到右）::

    <s> the [形容词] 主语名词  修饰语 × k  主动词 [the 宾语名词] </s>

- 主语名词有单数（girl）和复数（girls）两种形式，各占一半；主语前有 40% 的机会带一个形容词。
- 修饰语一个接一个，**全部修饰主语**，有两种，各占一半：

  - 介词短语（prepositional phrase）："near the [angry] trees"，名词前有 40% 的机会带形容词，3 或 4 个词；
  - 主语关系从句（subject relative clause）："that sees the boys"，从句里的动词和**主语**一致，4 个词。

- 修饰语的个数 k 按 ``modifier_probs`` 抽取（第 i 项是 k = i 的概率）。
- 主动词和主语一致（单数主语 → sees，复数主语 → see）。及物动词后面跟宾语 "the 名词"，不及物动词后面直接是 ``</s>``。

修饰语里的名词就是潜在的“干扰名词”（distractor）：单复数和主语不同的名词可能把模型引向错误的动词形式。
训练语料里，修饰语名词的单复数与主语无关（各占一半，``attractor_prob=0.5``），所以语料里没有“和最近的名词相反”
之类的捷径；主谓一致测试集默认让修饰语里**每个**名词都和主语单复数相反（``attractor_prob=1.0``），这是最难的情形。

这门语言没有歧义：每个句子只有一种生成方式，所以 :func:`parse` 能从词序列唯一地还原出结构，
:func:`sentence_log_prob` 能算出句子在这门语言里的真实概率，进而得到任何模型都无法低于的困惑度下限
（:func:`language_perplexity`）。

位置约定：句子是含 ``<s>`` 和 ``</s>`` 的词列表，``<s>`` 的位置是 0；“前缀”指主动词之前的全部词（含 ``<s>``），
所以前缀长度等于主动词的位置。
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Sequence

# ---------------------------------------------------------------------------
# 词汇表（lexicon）。每一对都是（单数形式, 复数形式）。顺序固定，词表的编号由它决定。
# ---------------------------------------------------------------------------

NOUNS: tuple[tuple[str, str], ...] = (
    ("girl", "girls"),
    ("boy", "boys"),
    ("cat", "cats"),
    ("teacher", "teachers"),
    ("house", "houses"),
    ("tree", "trees"),
)
ADJECTIVES: tuple[str, ...] = ("old", "young", "angry", "happy")
PREPOSITIONS: tuple[str, ...] = ("near", "behind", "beside")
# 动词的“单数形式”是第三人称单数（sees），“复数形式”是原形（see）。
TRANSITIVE_VERBS: tuple[tuple[str, str], ...] = (
    ("sees", "see"),
    ("likes", "like"),
    ("helps", "help"),
    ("chases", "chase"),
)
INTRANSITIVE_VERBS: tuple[tuple[str, str], ...] = (
    ("sleeps", "sleep"),
    ("runs", "run"),
    ("laughs", "laugh"),
)

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS)
DETERMINER, RELATIVIZER = "the", "that"

# ---------------------------------------------------------------------------
# 生成概率。修改它们会改变语言本身（以及困惑度下限），书中的数字都以这里为准。
# ---------------------------------------------------------------------------

ADJECTIVE_PROB = 0.4  # 主语名词、介词短语里的名词前带一个形容词的概率（宾语和从句里的名词不带）
RELATIVE_CLAUSE_PROB = 0.5  # 一个修饰语是主语关系从句（而不是介词短语）的概率
TRANSITIVE_PROB = 0.6  # 主动词是及物动词（后面跟宾语）的概率
TRAIN_MODIFIER_PROBS: tuple[float, ...] = (0.25, 0.25, 0.25, 0.25)  # 训练语料：0~3 个修饰语，各占四分之一
TRAIN_ATTRACTOR_PROB = 0.5  # 训练语料：修饰语名词与主语单复数相反的概率（0.5 = 互不相关）

_NOUN_NUMBER = {form: plural for pair in NOUNS for plural, form in enumerate(pair)}
_TRANSITIVE_NUMBER = {form: plural for pair in TRANSITIVE_VERBS for plural, form in enumerate(pair)}
_INTRANSITIVE_NUMBER = {form: plural for pair in INTRANSITIVE_VERBS for plural, form in enumerate(pair)}
_VERB_PAIR = {form: pair for pair in TRANSITIVE_VERBS + INTRANSITIVE_VERBS for form in pair}
_ADJECTIVE_SET = frozenset(ADJECTIVES)
_PREPOSITION_SET = frozenset(PREPOSITIONS)


def noun_number(word: str) -> bool | None:
    """名词的数：复数返回 True，单数返回 False，不是名词返回 None。"""
    plural = _NOUN_NUMBER.get(word)
    return None if plural is None else bool(plural)


def verb_number(word: str) -> bool | None:
    """动词的数：复数形式（原形）返回 True，第三人称单数返回 False，不是动词返回 None。"""
    plural = _TRANSITIVE_NUMBER.get(word, _INTRANSITIVE_NUMBER.get(word))
    return None if plural is None else bool(plural)


def verb_forms(word: str) -> tuple[str, str]:
    """一个动词的（单数形式, 复数形式），例如 ``verb_forms("see") == ("sees", "see")``。"""
    return _VERB_PAIR[word]


# ---------------------------------------------------------------------------
# 词表与分词器
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Vocab:
    """词级（word-level）词表：词 ↔ 编号。

    特殊词元固定在最前面：``<pad>`` = 0，``<s>`` = 1，``</s>`` = 2；其余的词按给定顺序编号。

    Parameters
    ----------
    tokens : tuple[str, ...]
        全部词元，下标就是编号。
    """

    tokens: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.tokens[: len(SPECIAL_TOKENS)] != SPECIAL_TOKENS:
            raise ValueError(f"词表必须以 {SPECIAL_TOKENS} 开头，得到 {self.tokens[:3]}")
        if len(set(self.tokens)) != len(self.tokens):
            raise ValueError("词表里有重复的词")
        object.__setattr__(self, "_index", {tok: i for i, tok in enumerate(self.tokens)})

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def pad_id(self) -> int:
        return 0

    @property
    def bos_id(self) -> int:
        return 1

    @property
    def eos_id(self) -> int:
        return 2

    def id(self, token: str) -> int:
        """一个词的编号；不在词表里的词抛出 KeyError（玩具语言没有 <unk>）。"""
        try:
            return self._index[token]  # type: ignore[attr-defined]
        except KeyError:
            raise KeyError(f"词 {token!r} 不在词表里（共 {len(self)} 个词）") from None

    def encode(self, tokens: Sequence[str]) -> list[int]:
        """词列表 → 编号列表。"""
        return [self.id(tok) for tok in tokens]

    def decode(self, ids: Sequence[int]) -> list[str]:
        """编号列表 → 词列表（不去掉特殊词元）。"""
        return [self.tokens[int(i)] for i in ids]


def build_vocab() -> Vocab:
    """玩具语言的词表。编号是确定的：特殊词元、the、that、名词、形容词、介词、动词，各按本模块里的顺序。"""
    words: list[str] = [DETERMINER, RELATIVIZER]
    words += [form for pair in NOUNS for form in pair]
    words += list(ADJECTIVES) + list(PREPOSITIONS)
    words += [form for pair in TRANSITIVE_VERBS + INTRANSITIVE_VERBS for form in pair]
    return Vocab(SPECIAL_TOKENS + tuple(words))


def encode_corpus(sentences: Sequence[Sequence[str]], vocab: Vocab) -> list[list[int]]:
    """把一批句子（词列表）编码成编号列表。"""
    return [vocab.encode(s) for s in sentences]


# ---------------------------------------------------------------------------
# 句子结构：生成与解析共用同一个描述
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Modifier:
    """一个修饰语。

    Parameters
    ----------
    kind : str
        ``"pp"``（介词短语）或 ``"rc"``（主语关系从句）。
    start : int
        修饰语第一个词（介词或 that）在句子里的位置。
    noun_pos : int
        修饰语里名词的位置。
    noun_plural : bool
        修饰语里的名词是否为复数。
    verb_pos : int | None
        关系从句里动词的位置；介词短语为 None。
    """

    kind: str
    start: int
    noun_pos: int
    noun_plural: bool
    verb_pos: int | None = None


@dataclass(frozen=True)
class Parse:
    """:func:`parse` 的结果：一个句子的完整结构（位置都以 ``<s>`` 为 0）。"""

    tokens: tuple[str, ...]
    subject_pos: int
    subject_plural: bool
    subject_has_adjective: bool
    modifiers: tuple[Modifier, ...]
    verb_pos: int
    verb_plural: bool
    verb_transitive: bool
    object_pos: int | None

    @property
    def n_modifiers(self) -> int:
        return len(self.modifiers)

    @property
    def distractor_pos(self) -> tuple[int, ...]:
        """修饰语里与主语单复数不同的名词的位置。"""
        return tuple(m.noun_pos for m in self.modifiers if m.noun_plural != self.subject_plural)

    @property
    def agrees(self) -> bool:
        """主动词和每个关系从句的动词都与主语单复数一致。"""
        rc_ok = all(self.tokens[m.verb_pos] == _verb_form(self.tokens[m.verb_pos], self.subject_plural)
                    for m in self.modifiers if m.verb_pos is not None)
        return rc_ok and self.verb_plural == self.subject_plural


def _verb_form(word: str, plural: bool) -> str:
    return verb_forms(word)[int(plural)]


def parse(tokens: Sequence[str]) -> Parse:
    """从左到右解析一个句子；不符合语法的句子抛出 ValueError（指出位置和词）。

    只检查结构（词类的顺序），不检查主谓一致——一致与否记录在结果里（:attr:`Parse.agrees`），
    这样测试和评估可以分别看待“合语法”和“一致”。
    """
    toks = tuple(tokens)
    pos = 0

    def expect(ok: bool, what: str) -> None:
        if not ok:
            got = toks[pos] if pos < len(toks) else "<句子结束>"
            raise ValueError(f"位置 {pos}：期望 {what}，得到 {got!r}；句子：{' '.join(toks)}")

    def peek() -> str | None:
        return toks[pos] if pos < len(toks) else None

    expect(peek() == BOS, BOS)
    pos += 1
    expect(peek() == DETERMINER, DETERMINER)
    pos += 1
    has_adj = peek() in _ADJECTIVE_SET
    pos += has_adj
    expect(noun_number(peek() or "") is not None, "主语名词")
    subject_pos, subject_plural = pos, bool(noun_number(toks[pos]))
    pos += 1

    modifiers: list[Modifier] = []
    while peek() in _PREPOSITION_SET or peek() == RELATIVIZER:
        start = pos
        if toks[pos] == RELATIVIZER:
            pos += 1
            expect(peek() in _TRANSITIVE_NUMBER, "关系从句里的及物动词")
            rc_verb = pos
            pos += 1
        else:
            pos += 1
            rc_verb = None
        expect(peek() == DETERMINER, DETERMINER)
        pos += 1
        if rc_verb is None:
            pos += peek() in _ADJECTIVE_SET  # 只有介词短语里的名词可以带形容词
        expect(noun_number(peek() or "") is not None, "修饰语里的名词")
        modifiers.append(Modifier("rc" if rc_verb is not None else "pp", start, pos,
                                  bool(noun_number(toks[pos])), rc_verb))
        pos += 1

    expect(verb_number(peek() or "") is not None, "主动词、介词或 that")
    verb_pos, verb_plural = pos, bool(verb_number(toks[pos]))
    transitive = toks[pos] in _TRANSITIVE_NUMBER
    pos += 1
    object_pos = None
    if transitive:
        expect(peek() == DETERMINER, "宾语前的 the")
        pos += 1
        expect(noun_number(peek() or "") is not None, "宾语名词")
        object_pos = pos
        pos += 1
    expect(peek() == EOS, EOS)
    pos += 1
    expect(pos == len(toks), "句子在 </s> 处结束")
    return Parse(toks, subject_pos, subject_plural, has_adj, tuple(modifiers), verb_pos, verb_plural,
                 transitive, object_pos)


# ---------------------------------------------------------------------------
# 生成
# ---------------------------------------------------------------------------


def _check_probs(probs: Sequence[float]) -> None:
    if not probs or any(p < 0 for p in probs) or abs(sum(probs) - 1.0) > 1e-9:
        raise ValueError(f"modifier_probs 必须是非负且和为 1 的概率，得到 {tuple(probs)}")


def _noun_phrase(rng: random.Random, plural: bool, adjective: bool) -> list[str]:
    """"the [形容词] 名词"；名词的单复数由调用者决定。"""
    words = [DETERMINER]
    if adjective and rng.random() < ADJECTIVE_PROB:
        words.append(rng.choice(ADJECTIVES))
    words.append(rng.choice(NOUNS)[int(plural)])
    return words


def sample_sentence(rng: random.Random, n_modifiers: int, *, attractor_prob: float = TRAIN_ATTRACTOR_PROB,
                    subject_plural: bool | None = None) -> list[str]:
    """生成一个恰好有 ``n_modifiers`` 个修饰语的句子（含 ``<s>`` 和 ``</s>``）。

    Parameters
    ----------
    rng : random.Random
        随机数生成器（调用者负责设种子）。
    n_modifiers : int
        修饰语个数。
    attractor_prob : float
        修饰语里的每个名词与主语单复数相反的概率。
    subject_plural : bool | None
        主语是否为复数；None 表示各占一半随机抽取。
    """
    if subject_plural is None:
        subject_plural = rng.random() < 0.5
    words = [BOS] + _noun_phrase(rng, subject_plural, adjective=True)
    for _ in range(n_modifiers):
        noun_plural = subject_plural != (rng.random() < attractor_prob)  # True 表示与主语相反
        if rng.random() < RELATIVE_CLAUSE_PROB:
            verb = rng.choice(TRANSITIVE_VERBS)[int(subject_plural)]  # 从句动词与主语一致
            words += [RELATIVIZER, verb] + _noun_phrase(rng, noun_plural, adjective=False)
        else:
            words += [rng.choice(PREPOSITIONS)] + _noun_phrase(rng, noun_plural, adjective=True)
    if rng.random() < TRANSITIVE_PROB:
        words.append(rng.choice(TRANSITIVE_VERBS)[int(subject_plural)])
        words += _noun_phrase(rng, rng.random() < 0.5, adjective=False)
    else:
        words.append(rng.choice(INTRANSITIVE_VERBS)[int(subject_plural)])
    words.append(EOS)
    return words


def generate_corpus(n: int, *, modifier_probs: Sequence[float] = TRAIN_MODIFIER_PROBS,
                    attractor_prob: float = TRAIN_ATTRACTOR_PROB, seed: int = 0) -> list[list[str]]:
    """生成 ``n`` 个句子的语料。

    Parameters
    ----------
    n : int
        句子数。
    modifier_probs : Sequence[float]
        修饰语个数的分布：第 i 项是“恰好 i 个修饰语”的概率。默认 0~3 个各占四分之一；
        第 7 讲习题 10(d) 用 ``(0.6, 0.4)``。
    attractor_prob : float
        修饰语名词与主语单复数相反的概率，默认 0.5（互不相关）。
    seed : int
        随机种子；同一个种子总是得到同一份语料。

    Returns
    -------
    list[list[str]]
        每个句子是一个词列表，以 ``<s>`` 开头、``</s>`` 结尾。
    """
    _check_probs(modifier_probs)
    rng = random.Random(seed)
    counts = rng.choices(range(len(modifier_probs)), weights=modifier_probs, k=n)
    return [sample_sentence(rng, k, attractor_prob=attractor_prob) for k in counts]


# ---------------------------------------------------------------------------
# 真实概率与困惑度下限
# ---------------------------------------------------------------------------


def sentence_log_prob(tokens: Sequence[str], *, modifier_probs: Sequence[float] = TRAIN_MODIFIER_PROBS,
                      attractor_prob: float = TRAIN_ATTRACTOR_PROB) -> float:
    """句子在这门语言里的真实对数概率（自然对数）。不一致或不合语法的句子概率为 0，返回 ``-inf``。

    语言没有歧义，所以句子的概率就是生成它时每一次选择的概率之积。
    """
    try:
        p = parse(tokens)
    except ValueError:
        return -math.inf
    if not p.agrees or p.n_modifiers >= len(modifier_probs) or modifier_probs[p.n_modifiers] == 0:
        return -math.inf
    log = math.log

    def adjective_choice(has_adj: bool) -> float:
        return log(ADJECTIVE_PROB / len(ADJECTIVES)) if has_adj else log(1 - ADJECTIVE_PROB)

    def number_choice(differs: bool) -> float:
        q = attractor_prob if differs else 1 - attractor_prob
        return log(q) if q > 0 else -math.inf

    lp = log(0.5) + adjective_choice(p.subject_has_adjective) + log(1 / len(NOUNS))  # 主语
    lp += log(modifier_probs[p.n_modifiers])
    for m in p.modifiers:
        lp += number_choice(m.noun_plural != p.subject_plural) + log(1 / len(NOUNS))
        if m.kind == "rc":
            lp += log(RELATIVE_CLAUSE_PROB) + log(1 / len(TRANSITIVE_VERBS))
        else:
            has_adj = p.tokens[m.noun_pos - 1] in _ADJECTIVE_SET
            lp += log(1 - RELATIVE_CLAUSE_PROB) + log(1 / len(PREPOSITIONS)) + adjective_choice(has_adj)
    if p.verb_transitive:
        lp += log(TRANSITIVE_PROB / len(TRANSITIVE_VERBS)) + log(0.5 / len(NOUNS))
    else:
        lp += log((1 - TRANSITIVE_PROB) / len(INTRANSITIVE_VERBS))
    return lp


def language_perplexity(sentences: Sequence[Sequence[str]], *,
                        modifier_probs: Sequence[float] = TRAIN_MODIFIER_PROBS,
                        attractor_prob: float = TRAIN_ATTRACTOR_PROB) -> float:
    """用语言本身的真实概率算出的词元级困惑度——任何模型在这批句子上的困惑度下限（期望意义上）。

    和 :mod:`transformer_book.training` 的约定相同：预测的是 ``<s>`` 之后的每个词（含 ``</s>``）。
    """
    total_lp = sum(sentence_log_prob(s, modifier_probs=modifier_probs, attractor_prob=attractor_prob)
                   for s in sentences)
    n_predicted = sum(len(s) - 1 for s in sentences)
    return math.exp(-total_lp / n_predicted)


# ---------------------------------------------------------------------------
# 主谓一致测试集
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AgreementItem:
    """主谓一致测试的一道题。

    Parameters
    ----------
    tokens : tuple[str, ...]
        完整句子（含 ``<s>``、``</s>``）；模型看到的只是 ``tokens[:verb_pos]``。
    n_modifiers : int
        修饰语个数。
    modifier_kinds : tuple[str, ...]
        每个修饰语的种类（``"pp"`` 或 ``"rc"``）。
    subject_pos : int
        主语名词的位置。
    subject_plural : bool
        主语是否为复数。
    distractor_pos : tuple[int, ...]
        干扰名词（修饰语里与主语单复数不同的名词）的位置。
    verb_pos : int
        主动词的位置，也就是前缀长度（含 ``<s>``）。
    correct_verb, wrong_verb : str
        与主语一致 / 不一致的动词形式（同一个动词）。
    """

    tokens: tuple[str, ...]
    n_modifiers: int
    modifier_kinds: tuple[str, ...]
    subject_pos: int
    subject_plural: bool
    distractor_pos: tuple[int, ...]
    verb_pos: int
    correct_verb: str
    wrong_verb: str

    @property
    def prefix(self) -> tuple[str, ...]:
        """主动词之前的词（含 ``<s>``）。"""
        return self.tokens[: self.verb_pos]

    @property
    def distance(self) -> int:
        """主语名词和主动词之间隔着的词数（没有修饰语时为 0）。"""
        return self.verb_pos - self.subject_pos - 1


def agreement_item(tokens: Sequence[str]) -> AgreementItem:
    """把一个（一致的）句子变成一道主谓一致测试题。"""
    p = parse(tokens)
    singular, plural = verb_forms(p.tokens[p.verb_pos])
    correct, wrong = (plural, singular) if p.subject_plural else (singular, plural)
    return AgreementItem(p.tokens, p.n_modifiers, tuple(m.kind for m in p.modifiers), p.subject_pos,
                         p.subject_plural, p.distractor_pos, p.verb_pos, correct, wrong)


def agreement_test_set(n_modifiers: int, n: int, *, seed: int = 0,
                       attractor_prob: float = 1.0) -> list[AgreementItem]:
    """``n`` 道恰好有 ``n_modifiers`` 个修饰语的主谓一致测试题。

    Parameters
    ----------
    n_modifiers : int
        修饰语个数（0~10 都可以；训练语料默认最多 3 个）。
    n : int
        题数。主语单数、复数交替出现（第 0、2、4… 题单数，第 1、3、5… 题复数），任取前若干题也各占一半。
    seed : int
        随机种子。不同的 ``n_modifiers`` 用同一个种子也会得到互不相关的句子。
    attractor_prob : float
        修饰语名词与主语单复数相反的概率。默认 1.0：每个修饰语名词都是干扰名词，测试最难；
        设为 0.5 则和训练语料同分布。
    """
    rng = random.Random(f"agreement/{seed}/{n_modifiers}")  # 字符串种子：不同修饰语个数互不相关
    return [agreement_item(sample_sentence(rng, n_modifiers, attractor_prob=attractor_prob,
                                           subject_plural=i % 2 == 1))
            for i in range(n)]
