"""第 7 讲第 6.1 节的实验：一个需要“同时看几个位置”的检索任务。

**检索任务。** 随机词序列（词表 V 个词，均匀、独立地抽取），在每个位置 t 同时预测 x_{t−1}、x_{t−2}、
x_{t−4}（偏移量可配置）。只有 t ≥ 最大偏移的位置参与损失和准确率，那里三个目标都存在。
序列是随机的，所以这三个词无法从别处推断：模型必须真的“去那个位置取”。

**模型。** 词嵌入 + 可学习的位置嵌入 → 一层带因果掩码的多头注意力（书里的
:class:`transformer_book.transformer.MultiHeadAttention`）→ 每个目标一个线性分类器，三个分类器读同一个
特征向量。没有残差、前馈网络和层归一化：位置 t 上能用的信息只有注意力取回来的东西。
总宽度 d 固定，头数 h 只决定投影输出的 d 维分给几个头（每个头 d_h = d / h 维，读入的仍是整个向量），所以参数量与 h 无关。

训练走全书共用的 :func:`transformer_book.training.fit`。

形状记号：B 批量大小，T 序列长度，d 模型宽度，h 头数，d_h 每头宽度，V 词表大小，K 目标个数。
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from transformer_book.training import OptimConfig, fit
from transformer_book.transformer import MultiHeadAttention, count_parameters

# ---------------------------------------------------------------------------
# 任务
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RetrievalConfig:
    """检索实验的设置。

    Parameters
    ----------
    vocab_size : int
        词表大小 V；瞎猜的准确率是 1/V。
    seq_len : int
        序列长度 T。
    offsets : tuple[int, ...]
        要取回的相对位置：位置 t 预测 x_{t−k}，k 取遍 offsets。
    d_model : int
        总宽度 d（所有头加起来）。
    steps, batch_size, lr : int, int, float
        训练步数、每批序列数、AdamW 的学习率（余弦衰减到 0，不预热）。
    eval_sequences : int
        评估用的新序列个数（与训练数据独立抽取）。
    """

    vocab_size: int = 10
    seq_len: int = 16
    offsets: tuple[int, ...] = (1, 2, 4)
    d_model: int = 24
    steps: int = 400
    batch_size: int = 64
    lr: float = 1e-2
    eval_sequences: int = 1000


def make_batch(batch_size, config, generator):
    """抽一批随机序列及其目标。

    Returns
    -------
    tokens : LongTensor (B, T)
        均匀抽取的词编号。
    targets : LongTensor (B, T_v, K)
        ``targets[b, i, j]`` = 位置 t = max(offsets) + i 上的第 j 个目标 x_{t − offsets[j]}；
        T_v = T − max(offsets) 是三个目标都存在的位置数。
    """
    tokens = torch.randint(config.vocab_size, (batch_size, config.seq_len), generator=generator)  # (B, T)
    first = max(config.offsets)
    positions = torch.arange(first, config.seq_len)  # (T_v,)
    targets = torch.stack([tokens[:, positions - k] for k in config.offsets], dim=-1)  # (B, T_v, K)
    return tokens, targets


class RetrievalModel(nn.Module):
    """一层多头注意力 + K 个线性分类器（每个目标一个，读同一个特征）。

    Parameters
    ----------
    vocab_size, seq_len, d_model, n_heads : int
        词表 V、序列长度 T、总宽度 d、头数 h（d_h = d / h）。
    n_targets : int
        目标个数 K。
    """

    def __init__(self, *, vocab_size, seq_len, d_model, n_heads, n_targets):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(seq_len, d_model)  # 可学习的位置嵌入：要“取前面第 k 个”，必须知道位置
        self.attn = MultiHeadAttention(d_model=d_model, n_heads=n_heads)
        self.readouts = nn.ModuleList(nn.Linear(d_model, vocab_size) for _ in range(n_targets))
        causal = torch.ones(seq_len, seq_len, dtype=torch.bool).tril()  # True = 可以关注
        self.register_buffer("causal_mask", causal, persistent=False)

    def forward(self, tokens):
        """tokens: (B, T) → logits (B, T, K, V)。"""
        return self.forward_with_attention(tokens, need_weights=False)[0]

    def forward_with_attention(self, tokens, need_weights=True):
        """tokens: (B, T) → (logits (B, T, K, V), 注意力权重 (B, h, T, T))。"""
        T = tokens.size(1)
        x = self.tok_emb(tokens) + self.pos_emb.weight[:T]  # (B, T, d)
        features, weights = self.attn(x, mask=self.causal_mask[:T, :T], need_weights=need_weights)  # (B, T, d)
        return torch.stack([head(features) for head in self.readouts], dim=2), weights  # (B, T, K, V)


def build_model(n_heads, config, seed):
    """按 ``config`` 搭一个 h 头的模型；参数用 ``seed`` 初始化（PyTorch 的默认初始化）。"""
    torch.manual_seed(seed)
    return RetrievalModel(vocab_size=config.vocab_size, seq_len=config.seq_len, d_model=config.d_model,
                          n_heads=n_heads, n_targets=len(config.offsets))


def _valid_logits(model, tokens, config):
    """只保留三个目标都存在的位置：(B, T_v, K, V)。"""
    return model(tokens)[:, max(config.offsets):]


@torch.no_grad()
def accuracy(model, config, generator):
    """在 ``config.eval_sequences`` 条新序列上，每个目标的准确率，形状 (K,)。"""
    model.eval()
    tokens, targets = make_batch(config.eval_sequences, config, generator)
    predictions = _valid_logits(model, tokens, config).argmax(dim=-1)  # (B, T_v, K)
    model.train()
    return (predictions == targets).float().mean(dim=(0, 1))


@torch.no_grad()
def attention_by_offset(model, config, generator, max_offset=6):
    """每个头平均把多少注意力放在“往前第 k 个位置”上，k = 0 … max_offset。

    对 ``config.eval_sequences`` 条新序列、所有 t ≥ max(offsets) 的位置取平均。

    Returns
    -------
    Tensor (h, max_offset + 1)
        ``[head, k]`` = 位置 t 分给位置 t − k 的平均权重。
    """
    model.eval()
    tokens, _ = make_batch(config.eval_sequences, config, generator)
    _, weights = model.forward_with_attention(tokens)  # (B, h, T, T)
    model.train()
    t = torch.arange(max(config.offsets), config.seq_len)  # (T_v,)
    ks = torch.arange(max_offset + 1)
    keys = (t[:, None] - ks).clamp(min=0)  # (T_v, k)；t − k < 0 的格子下面置 0
    picked = weights[:, :, t[:, None], keys]  # (B, h, T_v, k)
    picked = picked * (t[:, None] - ks >= 0)
    return picked.mean(dim=(0, 2))  # (h, k)


@torch.no_grad()
def dominant_token_accuracy(weights, config, generator):
    """假想的读出规则：每个目标都猜“混合里份量最大的那个词”，各目标的准确率。

    单头注意力取回的是几个位置的值向量按权重的混合；线性分类器大致只能按份量排序。本函数在
    ``config.eval_sequences`` 条新序列上模拟这条规则：位置 t 上词 v 的份量是 Σ_k weights[k]·[x_{t−k} = v]
    （k 取遍 offsets），所有目标都预测份量最大的词（并列时取编号小的）。

    Parameters
    ----------
    weights : sequence of float
        放在各目标位置上的注意力权重，与 ``config.offsets`` 一一对应。

    Returns
    -------
    Tensor (K,)
    """
    tokens, targets = make_batch(config.eval_sequences, config, generator)  # targets: (B, T_v, K)
    one_hot = F.one_hot(targets, config.vocab_size).float()  # (B, T_v, K, V)
    share = (one_hot * torch.tensor(weights, dtype=torch.float32)[:, None]).sum(dim=2)  # (B, T_v, V)
    guess = share.argmax(dim=-1, keepdim=True)  # (B, T_v, 1)
    return (guess == targets).float().mean(dim=(0, 1))


@dataclass
class RetrievalRun:
    """一次训练的结果。

    Attributes
    ----------
    n_heads, seed, n_parameters : int
    target_accuracy : list[float]
        每个目标的准确率，按 ``config.offsets`` 的顺序。
    final_loss : float
        最后一步的训练损失（K 个交叉熵之和）。
    attention : list[list[float]]
        :func:`attention_by_offset` 的结果，每个头一行。
    """

    n_heads: int
    seed: int
    n_parameters: int
    target_accuracy: list[float]
    final_loss: float
    attention: list[list[float]]

    @property
    def worst(self):
        """最差的目标的准确率。"""
        return min(self.target_accuracy)


def train_retrieval(n_heads, seed, config=RetrievalConfig()):
    """训练一个 h 头的模型并评估。数据、初始化都由 ``seed`` 决定。

    损失是 K 个目标的交叉熵之和（对位置取平均）；AdamW，学习率从 ``config.lr`` 余弦衰减到 0，不预热，
    不做权重衰减。
    """
    model = build_model(n_heads, config, seed)
    data = torch.Generator().manual_seed(seed)
    losses = []

    def step_loss(step):
        tokens, targets = make_batch(config.batch_size, config, data)
        logits = _valid_logits(model, tokens, config)  # (B, T_v, K, V)
        return F.cross_entropy(logits.reshape(-1, config.vocab_size), targets.reshape(-1)) * len(config.offsets)

    fit(model, step_loss, config.steps, OptimConfig(lr=config.lr), after_step=lambda step, loss: losses.append(loss))
    loss = losses[-1]
    evaluation = torch.Generator().manual_seed(10_000 + seed)  # 评估数据与训练数据独立
    acc = accuracy(model, config, evaluation)
    profile = attention_by_offset(model, config, evaluation)
    return RetrievalRun(n_heads=n_heads, seed=seed, n_parameters=count_parameters(model),
                        target_accuracy=acc.tolist(), final_loss=float(loss.detach()),
                        attention=profile.tolist())


def retrieval_study(heads=(1, 2, 3, 6), seeds=(0, 1, 2), config=RetrievalConfig()):
    """对每个头数、每个种子训练一次，返回 ``{h: [RetrievalRun, …]}``。"""
    return {h: [train_retrieval(h, s, config) for s in seeds] for h in heads}
