"""第 7 讲第 11 节的实验定义：数据、模型、训练设置、随机种子。

第 11 节的片段（``snippets/lecture07/s11_*.py``）只调用这里和 :mod:`~transformer_book.training`、
:mod:`~transformer_book.lecture07.agreement` 的函数；哪份数据、哪个模型、哪个种子，都只在本模块写一次。

- 数据：20,000 个训练句子、2,000 个开发句子、2,000 个测试句子，全部来自第 5 讲的玩具语言
  （:mod:`~transformer_book.toy_language`），0~3 个修饰语各占四分之一，三份语料用不同的种子生成。
- 模型：迷你 GPT（d = 64，4 个头，2 层，Pre-LN，权重共享，位置编码可选）与第 5 讲的 LSTM 语言模型（d = 64）。
  一个模型由 :class:`ModelSpec` 完整描述；训练好的模型以 :func:`package` 打包（用全书共用的
  :mod:`transformer_book.checkpoint`，描述与测试集困惑度作为附注），另一个片段用
  :func:`transformer_book.checkpoint.unpack` 重建。
- 训练：:data:`TRAIN_CONFIG`（8 轮，批量 64，AdamW，最大学习率 3e-3，预热 200 步，余弦衰减）；
  种子由 ``ModelSpec.seed`` 决定（初始化与打乱数据的顺序都由它决定）。
- 评估：主谓一致测试每个修饰语个数 1000 道题（:func:`~transformer_book.toy_language.agreement_test_set`）。

本模块也方便做第 7 讲的习题 10：``ModelSpec(n_layers=1)``、``ModelSpec(pos="none")``、
``load_toy_data(modifier_probs=(0.6, 0.4))``。
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from typing import Any, Sequence

import torch
from torch import nn

from transformer_book import checkpoint
from transformer_book import toy_language as tl
from transformer_book.rnn import RNNLM
from transformer_book.training import TokenData, TrainConfig, TrainResult, train_language_model
from transformer_book.transformer import TransformerLM

# ---------------------------------------------------------------------------
# 设置（书中第 11 节的全部数字都以这里为准）
# ---------------------------------------------------------------------------

N_TRAIN, N_DEV, N_TEST = 20_000, 2_000, 2_000
CORPUS_SEEDS = {"train": 1, "dev": 2, "test": 3}  # 三份语料互不重叠地抽样（同一门语言，不同的种子）
D_MODEL, N_HEADS, N_LAYERS = 64, 4, 2
MAX_LEN = 64  # 位置表的长度：10 个修饰语的前缀最长 44 个词元，64 足够
TRAIN_CONFIG = TrainConfig()  # 8 轮，批量 64，AdamW，最大学习率 3e-3，预热 200 步，余弦衰减（见 TrainConfig）

POSITION_SCHEMES: tuple[str, ...] = ("learned", "sinusoidal", "rope", "none")
POSITION_SEEDS: tuple[int, ...] = (0, 1, 2)  # 单个训练的结果会翻转，几种位置编码各训练 3 次（与第 11.1 节的三个迷你 GPT 同种子）
SCHEME_NAMES = {"learned": "可学习的位置嵌入", "sinusoidal": "正弦位置编码", "rope": "RoPE", "none": "不加位置编码"}

TRAIN_MAX_MODIFIERS = len(tl.TRAIN_MODIFIER_PROBS) - 1  # 训练语料里最多 3 个修饰语
AGREEMENT_COUNTS: tuple[int, ...] = (0, 1, 2, 3, 4, 6, 8)  # 第 11.2 节的表
LENGTH_COUNTS: tuple[int, ...] = tuple(range(11))  # 第 11.3 节：0~10 个修饰语
N_AGREEMENT = 1000  # 每个修饰语个数的题数
AGREEMENT_SEED = 0
ATTENTION_MODIFIERS = 2  # 第 11.4 节：含 2 个修饰语的句子


def show_progress() -> bool:
    """是否显示训练进度条：``python -m transformer_book run …`` 设置 ``BOOK_PROGRESS=1``；构建时不显示。"""
    return os.environ.get("BOOK_PROGRESS") == "1"


# ---------------------------------------------------------------------------
# 数据
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToyData:
    """三份语料：句子（词列表，给困惑度下限和展示用）与编码后的 :class:`~transformer_book.training.TokenData`。"""

    vocab: tl.Vocab
    train_sentences: list[list[str]]
    dev_sentences: list[list[str]]
    test_sentences: list[list[str]]
    train: TokenData
    dev: TokenData
    test: TokenData


@lru_cache(maxsize=4)
def load_toy_data(*, n_train: int = N_TRAIN, modifier_probs: tuple[float, ...] = tl.TRAIN_MODIFIER_PROBS) -> ToyData:
    """第 11 节的训练、开发、测试语料（确定性：只由 :data:`CORPUS_SEEDS` 决定）。

    ``modifier_probs`` 同时用于三份语料（习题 10(d) 用 ``(0.6, 0.4)``）。
    """
    vocab = tl.build_vocab()
    sentences = {split: tl.generate_corpus(n, modifier_probs=modifier_probs, seed=CORPUS_SEEDS[split])
                 for split, n in (("train", n_train), ("dev", N_DEV), ("test", N_TEST))}
    encoded = {split: TokenData(tl.encode_corpus(s, vocab), vocab.pad_id) for split, s in sentences.items()}
    return ToyData(vocab, sentences["train"], sentences["dev"], sentences["test"],
                   encoded["train"], encoded["dev"], encoded["test"])


# ---------------------------------------------------------------------------
# 模型
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelSpec:
    """一个实验模型的完整描述：用它和词表大小就能重建同样的模型。

    Parameters
    ----------
    kind : {"gpt", "rnn"}
        迷你 GPT（:class:`~transformer_book.transformer.TransformerLM`）或 LSTM（:class:`~transformer_book.rnn.RNNLM`）。
    pos : {"learned", "sinusoidal", "rope", "none"}
        迷你 GPT 的位置编码（RNN 忽略它）。
    n_layers : int
        迷你 GPT 的块数（RNN 总是 1 层 LSTM）。
    seed : int
        训练种子：决定初始化和每轮打乱数据的顺序。
    """

    kind: str = "gpt"
    pos: str = "learned"
    n_layers: int = N_LAYERS
    seed: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("gpt", "rnn"):
            raise ValueError(f'kind 只能是 "gpt" 或 "rnn"，收到 {self.kind!r}')
        if self.pos not in POSITION_SCHEMES:
            raise ValueError(f"pos 只能是 {POSITION_SCHEMES} 之一，收到 {self.pos!r}")

    def build(self, vocab_size: int) -> nn.Module:
        """新建（未训练的）模型；初始化用当前的全局随机状态（训练时由 ``torch.manual_seed(seed)`` 决定）。"""
        if self.kind == "rnn":
            return RNNLM(vocab_size=vocab_size, d_model=D_MODEL)
        return TransformerLM(vocab_size=vocab_size, d_model=D_MODEL, n_heads=N_HEADS, n_layers=self.n_layers,
                             max_len=MAX_LEN, pos=self.pos, norm="pre", tie_weights=True)


GPT_SPEC = ModelSpec("gpt", "learned", seed=0)  # 第 11.1 节的迷你 GPT，也是第 11.3 节“可学习、种子 0”的模型
RNN_SPEC = ModelSpec("rnn", seed=0)


def position_specs(scheme: str) -> list[ModelSpec]:
    """第 11.3 节里一种位置编码的全部模型（每个种子一个）。"""
    return [ModelSpec("gpt", scheme, seed=s) for s in POSITION_SEEDS]


def train(spec: ModelSpec, data: ToyData, *, config: TrainConfig = TRAIN_CONFIG,
          progress: bool | None = None) -> TrainResult:
    """按 ``spec`` 新建模型并训练（种子 = ``spec.seed``），返回 :class:`~transformer_book.training.TrainResult`。

    ``progress`` 为 None 时由 :func:`show_progress` 决定。
    """
    progress = show_progress() if progress is None else progress
    return train_language_model(lambda: spec.build(len(data.vocab)), data.train, data.dev, data.test,
                                replace(config, seed=spec.seed), pad_id=data.vocab.pad_id, progress=progress)


def package(spec: ModelSpec, result: TrainResult) -> dict[str, Any]:
    """把训练好的模型打包（只含数据，可放进片段的 ``Artifact``）：模型、描述、测试集困惑度与参数个数。

    用 :func:`transformer_book.checkpoint.unpack` 重建。
    """
    return checkpoint.pack(result.model, spec=asdict(spec), test_perplexity=result.test_perplexity,
                           n_parameters=result.n_parameters)


def position_models(scheme: str, data: ToyData | None = None,
                    reuse: dict[int, dict[str, Any]] | None = None) -> dict[int, dict[str, Any]]:
    """第 11.3 节里一种位置编码的全部模型（每个种子一个，见 :data:`POSITION_SEEDS`），打包好。

    ``reuse`` 给出已经训练过的种子（第 11.1 节的迷你 GPT 就是“可学习的位置嵌入、种子 0”），不再重训。
    """
    data = load_toy_data() if data is None else data
    out = {}
    for spec in position_specs(scheme):
        if reuse and spec.seed in reuse:
            packed = reuse[spec.seed]
            if ModelSpec(**packed["spec"]) != spec:
                raise ValueError(f"拿来复用的模型是 {packed['spec']}，不是 {spec}")
            out[spec.seed] = packed
        else:
            out[spec.seed] = package(spec, train(spec, data))
    return out


# ---------------------------------------------------------------------------
# 评估的小工具
# ---------------------------------------------------------------------------


def agreement_accuracies(model: nn.Module, vocab: tl.Vocab, counts: Sequence[int]) -> dict[int, float]:
    """每个修饰语个数的主谓一致准确率（各 :data:`N_AGREEMENT` 题，题目对所有模型相同）。"""
    from transformer_book.lecture07.agreement import agreement_table

    return {r.n_modifiers: r.accuracy
            for r in agreement_table(model, vocab, counts, n=N_AGREEMENT, seed=AGREEMENT_SEED)}


def first_item_with_kinds(items: Sequence[tl.AgreementItem], kinds: tuple[str, ...]) -> tl.AgreementItem:
    """测试集中第一道修饰语种类恰好是 ``kinds`` 的题（例如 ``("pp", "pp")``：两个介词短语）。"""
    for it in items:
        if it.modifier_kinds == kinds:
            return it
    raise LookupError(f"没有修饰语种类为 {kinds} 的题")


@torch.no_grad()
def attention_by_kinds(per_item: Sequence[torch.Tensor], items: Sequence[tl.AgreementItem]
                       ) -> dict[tuple[str, ...], torch.Tensor]:
    """按修饰语种类分组，每组各层各头分给主语的平均权重 (L, h)。

    ``per_item`` 是 :func:`~transformer_book.lecture07.agreement.verb_position_attention` 的结果。
    """
    groups: dict[tuple[str, ...], list[torch.Tensor]] = {}
    for w, it in zip(per_item, items):
        groups.setdefault(it.modifier_kinds, []).append(w[..., it.subject_pos])  # (L, h)
    return {kinds: torch.stack(ws).mean(0) for kinds, ws in sorted(groups.items())}


@dataclass(frozen=True)
class LengthResult:
    """一个模型在 0~10 个修饰语上的主谓一致结果，按修饰语个数和按前缀长度两种方式汇总（同一批题）。

    Attributes
    ----------
    by_count : dict[int, float]
        修饰语个数 → 准确率。
    by_prefix : dict[int, tuple[int, float]]
        前缀长度（含 ``<s>``，即主动词的位置）→（题数, 准确率）。
    """

    by_count: dict[int, float]
    by_prefix: dict[int, tuple[int, float]]


def length_generalisation(model: nn.Module, vocab: tl.Vocab, counts: Sequence[int] = LENGTH_COUNTS) -> LengthResult:
    """对每个修饰语个数做 :data:`N_AGREEMENT` 道主谓一致题，再把全部题按前缀长度重新分组。"""
    from transformer_book.lecture07.agreement import verb_margins

    by_count: dict[int, float] = {}
    per_prefix: dict[int, list[bool]] = {}
    for k in counts:
        items = tl.agreement_test_set(k, N_AGREEMENT, seed=AGREEMENT_SEED)
        correct = (verb_margins(model, items, vocab) > 0).tolist()
        by_count[k] = sum(correct) / len(correct)
        for it, ok in zip(items, correct):
            per_prefix.setdefault(it.verb_pos, []).append(ok)
    by_prefix = {t: (len(oks), sum(oks) / len(oks)) for t, oks in sorted(per_prefix.items())}
    return LengthResult(by_count, by_prefix)


@dataclass(frozen=True)
class TrainingPositions:
    """训练语料里各个位置扮演过什么角色（位置从 ``<s>`` = 0 数起）。

    Attributes
    ----------
    longest_prefix : int
        训练句子里最长的前缀（主动词的位置）：模型在位置 0 … longest_prefix − 1 上预测过主动词。
    longest_input : int
        模型读到过的最大位置 + 1（最长的句子长度 − 1，因为 ``</s>`` 只被预测、不被读入）。
        位置 longest_prefix … longest_input − 1 在训练中出现过，但只出现在主动词**之后**。
    """

    longest_prefix: int
    longest_input: int


def training_positions(sentences: Sequence[Sequence[str]]) -> TrainingPositions:
    """统计训练语料里主动词最远出现在哪个位置、模型最远读到哪个位置。"""
    return TrainingPositions(max(tl.parse(s).verb_pos for s in sentences), max(len(s) for s in sentences) - 1)


def head_label(layer: int, head: int) -> str:
    """书中给注意力头的名字：层和头都从 1 数起，``head_label(0, 3) == "1.4"``（第 1 层第 4 个头）。"""
    return f"{layer + 1}.{head + 1}"
