"""主谓一致（subject–verb agreement）评估：模型能不能越过修饰语找到主语？

做法（Linzen 等 2016 的思路）：把句子截到主动词之前，让模型预测下一个词，比较它给**一致**的动词形式
（主语单数 → sees）和**不一致**的形式（see）的概率。概率更大的是一致形式就算对；两者相等算错。
只比较这两个词，和模型还可能预测别的什么词（介词、that……）无关。

本模块对任何 ``forward(idx, pad_mask=None) -> logits`` 的模型都适用；注意力分析（:func:`attention_to_subject`）
额外需要模型能交出注意力权重。

形状记号：N 题数，B 批量大小，T 前缀长度，V 词表大小，L 层数，h 头数。
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import nn

from transformer_book.toy_language import AgreementItem, Vocab, agreement_test_set


def _prefix_batches(items: Sequence[AgreementItem], vocab: Vocab, batch_size: int):
    """把前缀按长度排序后分批（同一批长度相近，右侧填充）。

    产出 (下标, (B, T) 编号, (B, T) pad_mask 或 None, (B,) 预测主动词的位置)。
    """
    lengths = torch.tensor([it.verb_pos for it in items])  # (N,)
    order = torch.argsort(lengths, stable=True)
    for index in torch.split(order, batch_size):
        t = int(lengths[index].max())
        x = torch.full((len(index), t), vocab.pad_id, dtype=torch.long)  # (B, T)
        for row, i in enumerate(index.tolist()):
            x[row, : items[i].verb_pos] = torch.tensor(vocab.encode(items[i].prefix))
        mask = torch.arange(t) < lengths[index][:, None]  # (B, T)，True = 真实词元
        yield index, x, (None if bool(mask.all()) else mask), lengths[index] - 1


@torch.no_grad()
def verb_margins(model: nn.Module, items: Sequence[AgreementItem], vocab: Vocab, *,
                 batch_size: int = 500) -> torch.Tensor:
    """每道题的 log p(一致形式) − log p(不一致形式)，在前缀的最后一个位置上计算。

    Returns
    -------
    torch.Tensor, shape (N,)
        大于 0 表示模型偏好一致的形式。
    """
    was_training = model.training
    model.eval()
    margins = torch.empty(len(items))
    correct = torch.tensor([vocab.id(it.correct_verb) for it in items])  # (N,)
    wrong = torch.tensor([vocab.id(it.wrong_verb) for it in items])  # (N,)
    for index, x, mask, last in _prefix_batches(items, vocab, batch_size):
        logits = model(x, pad_mask=mask)  # (B, T, V)
        at_verb = logits[torch.arange(len(index)), last]  # (B, V)：预测主动词的那个位置
        # log-softmax 的归一化项对两个词相同，差值就是 logits 之差
        margins[index] = (at_verb.gather(1, correct[index, None]) - at_verb.gather(1, wrong[index, None])).squeeze(1)
    model.train(was_training)
    return margins


def agreement_accuracy(model: nn.Module, items: Sequence[AgreementItem], vocab: Vocab, *,
                       batch_size: int = 500) -> float:
    """一致形式的概率严格大于不一致形式的题目所占比例。"""
    correct = int((verb_margins(model, items, vocab, batch_size=batch_size) > 0).sum())
    return correct / len(items)  # 整数相除：0.856 就是 856/1000，不带 float32 求平均的舍入误差


def mean_distance(items: Sequence[AgreementItem]) -> float:
    """主语名词和主动词之间平均隔着几个词。"""
    return sum(it.distance for it in items) / len(items)


def longest_prefix(items: Sequence[AgreementItem]) -> int:
    """最长的前缀（含 ``<s>``）有几个词元。"""
    return max(it.verb_pos for it in items)


@dataclass(frozen=True)
class AgreementRow:
    """主谓一致表的一列：某个修饰语个数下的测试集统计和模型准确率。"""

    n_modifiers: int
    n_items: int
    mean_distance: float
    longest_prefix: int
    accuracy: float


def agreement_table(model: nn.Module, vocab: Vocab, modifier_counts: Sequence[int] = (0, 1, 2, 3, 4, 6, 8), *,
                    n: int = 1000, seed: int = 0, attractor_prob: float = 1.0,
                    batch_size: int = 500) -> list[AgreementRow]:
    """对每个修饰语个数生成 ``n`` 道题（:func:`~transformer_book.toy_language.agreement_test_set`），算准确率。

    同样的 ``n``、``seed`` 和 ``attractor_prob`` 给出同样的题目，所以不同模型的表可以直接对比。
    """
    rows = []
    for k in modifier_counts:
        items = agreement_test_set(k, n, seed=seed, attractor_prob=attractor_prob)
        rows.append(AgreementRow(k, len(items), mean_distance(items), longest_prefix(items),
                                 agreement_accuracy(model, items, vocab, batch_size=batch_size)))
    return rows


# ---------------------------------------------------------------------------
# 注意力分析
# ---------------------------------------------------------------------------

AttentionFn = Callable[[nn.Module, torch.Tensor, "torch.Tensor | None"], torch.Tensor]


def default_attention_fn(model: nn.Module, idx: torch.Tensor, pad_mask: torch.Tensor | None) -> torch.Tensor:
    """从模型取出每层每个头的注意力权重，形状 (L, B, h, T, T)（查询位置 × 键位置）。

    用模型的 ``forward_with_attention(idx, pad_mask)``（参考实现的 ``TransformerLM`` 有它）；
    别的模型请传自己的 ``attention_fn``。
    """
    if not hasattr(model, "forward_with_attention"):
        raise TypeError(f"{type(model).__name__} 不提供注意力权重：请给 attention_to_subject 传 attention_fn")
    _, weights = model.forward_with_attention(idx, pad_mask)
    return torch.stack(list(weights))  # (L, B, h, T, T)


@dataclass(frozen=True)
class AttentionSummary:
    """预测主动词的位置上，各层各头分给主语和干扰名词的平均注意力权重。

    Attributes
    ----------
    subject : torch.Tensor, shape (L, h)
        分给主语名词的权重，在题目上平均。
    distractor : torch.Tensor, shape (L, h)
        分给**每个**干扰名词的权重，在全部干扰名词上平均（没有干扰名词的题不参与）。
    uniform : float
        如果均匀分配，每个位置平均分到的权重（1 / 前缀长度，在题目上平均）。
    n_items, n_distractors : int
        题数和干扰名词总数。
    """

    subject: torch.Tensor
    distractor: torch.Tensor
    uniform: float
    n_items: int
    n_distractors: int


@torch.no_grad()
def verb_position_attention(model: nn.Module, items: Sequence[AgreementItem], vocab: Vocab, *,
                            attention_fn: AttentionFn | None = None, batch_size: int = 500) -> list[torch.Tensor]:
    """每道题在前缀最后一个位置（预测主动词的位置）上的注意力权重。

    Returns
    -------
    list[torch.Tensor]
        第 i 个元素形状 (L, h, T_i)，T_i = ``items[i].verb_pos``：对前缀每个词的权重。
    """
    attention_fn = attention_fn or default_attention_fn
    was_training = model.training
    model.eval()
    out: list[torch.Tensor] = [torch.empty(0)] * len(items)
    for index, x, mask, last in _prefix_batches(items, vocab, batch_size):
        weights = attention_fn(model, x, mask)  # (L, B, h, T, T)
        for row, i in enumerate(index.tolist()):
            out[i] = weights[:, row, :, int(last[row]), : items[i].verb_pos].clone()  # (L, h, T_i)
    model.train(was_training)
    return out


def attention_to_subject(model: nn.Module, items: Sequence[AgreementItem], vocab: Vocab, *,
                         attention_fn: AttentionFn | None = None, batch_size: int = 500) -> AttentionSummary:
    """每层每个头在预测主动词的位置上，分给主语名词和干扰名词的平均权重（第 7 讲第 11.4 节的表）。"""
    per_item = verb_position_attention(model, items, vocab, attention_fn=attention_fn, batch_size=batch_size)
    subject = torch.stack([w[..., it.subject_pos] for w, it in zip(per_item, items)]).mean(0)  # (L, h)
    distractor_weights = [w[..., list(it.distractor_pos)] for w, it in zip(per_item, items) if it.distractor_pos]
    n_distractors = sum(w.size(-1) for w in distractor_weights)
    if n_distractors:
        distractor = torch.cat(distractor_weights, dim=-1).mean(-1)  # (L, h)
    else:
        distractor = torch.full_like(subject, float("nan"))
    uniform = sum(1.0 / it.verb_pos for it in items) / len(items)
    return AttentionSummary(subject, distractor, uniform, len(items), n_distractors)
