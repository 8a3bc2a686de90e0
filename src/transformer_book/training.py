"""书里所有训练共用的一个训练循环，以及语言模型的数据分批与困惑度。

:func:`fit` 是唯一的训练循环：第 6 节的检索实验、第 7 节的深度实验、第 11 节的玩具语言模型、第 20 章的
P08 都经过它。每一步依次是：设定这一步的学习率 → 算损失（由调用者给出）→ 清零梯度 → 反向传播 →
（可选）梯度裁剪 → AdamW 更新。各个实验不同的只是 :class:`OptimConfig` 里的设置和“这一步的损失怎么算”。

- 优化：AdamW（融合实现 ``fused=True``：把所有参数的更新合成一个内核，数学与普通 AdamW 相同）；
  只对矩阵（二维及以上的参数，含词嵌入）做权重衰减，偏置和 LayerNorm 的参数不衰减（nanoGPT 的做法）。
- 学习率：``"cosine"`` 按 :func:`transformer_book.transformer.warmup_cosine` 先线性预热、再余弦衰减（第 step
  次更新用 ``warmup_cosine(step)``，step 从 0 数起，有预热时第一次更新的学习率是 0）；``"constant"`` 不变。
- 可复现：随机种子由调用者设定（建模型之前 ``torch.manual_seed``；数据用各自的 ``torch.Generator``）；
  线程数也由调用者设定，这里不改。

语言模型（:func:`train_language_model`，第 11 节）的约定：

- 数据是编号序列的列表，每个序列以 ``<s>`` 开头、``</s>`` 结尾；模型读 ``x[:-1]``，预测 ``x[1:]``。
- 困惑度（perplexity）按词元计算：exp(全部被预测词元的平均负对数似然)。被预测的词元包括 ``</s>``，
  不包括 ``<s>``（它从不被预测）和填充。
- 分批：按长度分桶（bucketing）——每轮先随机打乱，再按长度稳定排序、切成批、再打乱批的顺序。
  同一批里的句子长度几乎相同，填充很少；填充都在右侧，并用 ``pad_mask``（True = 真实词元）告诉模型。
- 返回最后一轮的模型，不挑“开发集最好的一轮”。

形状记号：B 批量大小，T 序列长度，V 词表大小，N 句子数。
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from transformer_book.transformer import count_parameters, warmup_cosine

IGNORE_INDEX = -100  # cross_entropy 跳过的目标值，用来排除填充位置


@dataclass
class TrainResult:
    """一次训练的结果。

    Attributes
    ----------
    dev_perplexity : list[float]
        每轮结束时开发集的困惑度。
    train_loss : list[float]
        每轮训练损失（每步平均负对数似然）的平均值。
    test_perplexity : float
        训练结束时测试集的困惑度。
    state_dict : dict[str, torch.Tensor]
        训练结束时模型参数的副本（在 CPU 上，可以 pickle）。
    n_parameters : int
        参数个数（共享的权重只算一次）。
    steps : int
        优化步数。
    seconds : float
        训练加评估用的墙钟时间；不参与相等比较。
    model : nn.Module | None
        训练好的模型本身；不参与相等比较，也不在 repr 里出现。
    """

    dev_perplexity: list[float]
    train_loss: list[float]
    test_perplexity: float
    state_dict: dict[str, torch.Tensor] = field(repr=False)
    n_parameters: int
    steps: int
    seconds: float = field(compare=False)
    model: nn.Module | None = field(default=None, compare=False, repr=False)


# ---------------------------------------------------------------------------
# 分批
# ---------------------------------------------------------------------------


class TokenData:
    """一批编号序列，预先填充成一个 (N, T_max) 的张量，分批时只做整块的索引和切片。

    Parameters
    ----------
    sequences : Sequence[Sequence[int]]
        编号序列（每个至少 2 个词元）。
    pad_id : int
        填充用的编号。
    """

    def __init__(self, sequences: Sequence[Sequence[int]], pad_id: int) -> None:
        if not sequences:
            raise ValueError("数据为空")
        self.lengths = torch.tensor([len(s) for s in sequences])  # (N,)
        if int(self.lengths.min()) < 2:
            raise ValueError("每个序列至少要有 2 个词元（<s> 和一个被预测的词）")
        self.pad_id = pad_id
        self.tokens = torch.full((len(sequences), int(self.lengths.max())), pad_id, dtype=torch.long)  # (N, T_max)
        for i, s in enumerate(sequences):  # 只在构造时循环一次
            self.tokens[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def n_predicted(self) -> int:
        """被预测的词元总数（每个序列 len - 1）。"""
        return int((self.lengths - 1).sum())

    def batches(self, batch_size: int, generator: torch.Generator | None = None) -> list[torch.Tensor]:
        """按长度分桶，返回每批句子的下标。

        ``generator`` 为 None 时不打乱（评估用）：按长度排好后依次切批。
        """
        if generator is None:
            order = torch.argsort(self.lengths, stable=True)
        else:
            perm = torch.randperm(len(self), generator=generator)  # 先随机打乱 ……
            order = perm[torch.argsort(self.lengths[perm], stable=True)]  # …… 再按长度稳定排序：同长度内顺序随机
        chunks = list(torch.split(order, batch_size))
        if generator is not None:
            chunks = [chunks[i] for i in torch.randperm(len(chunks), generator=generator).tolist()]
        return chunks

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """取出一批：(B, T) 的编号和 (B, T) 的 pad_mask（这批没有填充时为 None）。"""
        lengths = self.lengths[index]  # (B,)
        t = int(lengths.max())
        x = self.tokens[index, :t]  # (B, T)
        if int(lengths.min()) == t:
            return x, None
        mask = torch.arange(t) < lengths[:, None]  # (B, T)，True = 真实词元
        return x, mask


def _as_data(data: TokenData | Sequence[Sequence[int]], pad_id: int) -> TokenData:
    return data if isinstance(data, TokenData) else TokenData(data, pad_id)


# ---------------------------------------------------------------------------
# 损失与困惑度
# ---------------------------------------------------------------------------


def lm_loss(model: nn.Module, x: torch.Tensor, mask: torch.Tensor | None,
            reduction: str = "mean") -> torch.Tensor:
    """下一个词预测的交叉熵：读 ``x[:, :-1]``，预测 ``x[:, 1:]``，跳过填充的目标。

    Parameters
    ----------
    x : torch.LongTensor, shape (B, T)
    mask : torch.BoolTensor, shape (B, T) or None
        True = 真实词元；None 表示没有填充。
    reduction : str
        ``"mean"``（每个被预测词元的平均）或 ``"sum"``。
    """
    inp, target = x[:, :-1], x[:, 1:]  # (B, T-1)
    inp_mask = None
    if mask is not None:
        inp_mask = mask[:, :-1]  # (B, T-1)
        target = target.masked_fill(~mask[:, 1:], IGNORE_INDEX)
    logits = model(inp, pad_mask=inp_mask)  # (B, T-1, V)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1),  # (B·(T-1), V)
                           ignore_index=IGNORE_INDEX, reduction=reduction)


@torch.no_grad()
def perplexity(model: nn.Module, data: TokenData | Sequence[Sequence[int]], *, pad_id: int = 0,
               batch_size: int = 512) -> float:
    """词元级困惑度：exp(总负对数似然 / 被预测词元数)，含 ``</s>``、不含 ``<s>`` 和填充。

    评估时切换到 ``eval()``（关掉 dropout），结束后恢复模型原来的模式。
    """
    data = _as_data(data, pad_id)
    was_training = model.training
    model.eval()
    total_nll = 0.0
    for index in data.batches(batch_size):
        x, mask = data.batch(index)
        total_nll += float(lm_loss(model, x, mask, reduction="sum"))
    model.train(was_training)
    return math.exp(total_nll / data.n_predicted)


# ---------------------------------------------------------------------------
# 一个训练循环
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class OptimConfig:
    """优化器与学习率的设置。

    Parameters
    ----------
    lr, min_lr : float
        学习率的峰值，以及余弦衰减的终点。
    warmup_steps : int
        线性预热的步数（``schedule="cosine"`` 时）。
    schedule : {"cosine", "constant"}
        预热 + 余弦衰减，或者从头到尾不变。
    weight_decay : float
        AdamW 的权重衰减（只作用于矩阵）。
    betas : tuple[float, float]
        AdamW 的动量系数。
    grad_clip : float
        梯度的全局 L2 范数上限；0 表示不裁剪。
    """

    lr: float = 3e-3
    min_lr: float = 0.0
    warmup_steps: int = 0
    schedule: str = "cosine"
    weight_decay: float = 0.0
    betas: tuple[float, float] = (0.9, 0.999)
    grad_clip: float = 0.0

    def __post_init__(self) -> None:
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f'schedule 只能是 "cosine" 或 "constant"，收到 {self.schedule!r}')

    def learning_rate(self, step: int, total_steps: int) -> float:
        """第 step 次更新（从 0 数起）用的学习率。"""
        if self.schedule == "constant":
            return self.lr
        return warmup_cosine(step, warmup_steps=self.warmup_steps, total_steps=total_steps, max_lr=self.lr,
                             min_lr=self.min_lr)


def make_optimizer(model: nn.Module, config: OptimConfig) -> torch.optim.AdamW:
    """AdamW：二维及以上的参数（矩阵、词嵌入）做权重衰减，其余（偏置、LayerNorm）不做。"""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    # fused=True：把所有参数的更新合成一个内核（CPU 上也支持），数学与普通 AdamW 相同，小模型上每步快约 0.7 ms
    return torch.optim.AdamW(groups, lr=config.lr, betas=config.betas, fused=True)


def fit(model: nn.Module, step_loss: Callable[[int], torch.Tensor], steps: int, config: OptimConfig, *,
        after_step: Callable[[int, torch.Tensor], None] | None = None, progress: Iterable[int] | None = None) -> None:
    """训练 ``steps`` 步：每一步用 ``step_loss(step)`` 算出损失（一个标量张量），再更新一次参数。

    Parameters
    ----------
    model : nn.Module
        要训练的模型（就地训练）；训练期间处于 ``train()`` 模式，结束后也保持这个模式。
    step_loss : Callable[[int], Tensor]
        第 step 步（从 0 数起）的损失：调用者在这里取一批数据、做前向计算。
    steps : int
        总步数，也是余弦衰减结束的那一步。
    config : OptimConfig
    after_step : Callable[[int, Tensor], None], optional
        每次更新之后调用 ``after_step(step, loss)``（loss 已经 detach）：记录损失、定期评估都在这里做。
    progress : Iterable[int], optional
        代替 ``range(steps)`` 的步数序列（例如一个 tqdm 进度条）。
    """
    optimizer = make_optimizer(model, config)
    model.train()
    for step in progress if progress is not None else range(steps):
        lr = config.learning_rate(step, steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = step_loss(step)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if config.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        if after_step is not None:
            after_step(step, loss.detach())


# ---------------------------------------------------------------------------
# 语言模型（第 11 节）
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainConfig:
    """第 11 节训练语言模型的设置。默认值就是书中的设置。

    Parameters
    ----------
    epochs : int
        训练轮数。
    batch_size : int
        每批句子数。
    optim : OptimConfig
        AdamW 与学习率：峰值 3e-3，预热 200 步后余弦衰减到 0，权重衰减 0.01，β = (0.9, 0.99)，梯度裁剪到 1。
    seed : int
        随机种子：决定初始化（用工厂函数建模型时）、dropout 和每轮打乱数据的顺序。
    eval_batch_size : int
        评估困惑度时每批句子数（不影响结果，只影响速度）。
    """

    epochs: int = 8
    batch_size: int = 64
    optim: OptimConfig = OptimConfig(lr=3e-3, warmup_steps=200, weight_decay=0.01, betas=(0.9, 0.99), grad_clip=1.0)
    seed: int = 0
    eval_batch_size: int = 512


def _progress(total: int, enabled: bool, desc: str) -> Iterable[int] | None:
    if not enabled:
        return None
    from tqdm.auto import tqdm  # 只在需要进度条时导入

    return tqdm(range(total), desc=desc, leave=False)


def train_language_model(model: nn.Module | Callable[[], nn.Module],
                         train: TokenData | Sequence[Sequence[int]],
                         dev: TokenData | Sequence[Sequence[int]],
                         test: TokenData | Sequence[Sequence[int]] | None = None,
                         config: TrainConfig = TrainConfig(), *, pad_id: int = 0,
                         progress: bool = False) -> TrainResult:
    """训练一个语言模型，每轮结束时在开发集上算困惑度，最后在测试集上算困惑度。

    Parameters
    ----------
    model : nn.Module or Callable[[], nn.Module]
        要训练的模型（就地训练），或者一个创建模型的函数。传函数时，模型在 ``torch.manual_seed(seed)``
        之后创建，初始化也由 ``config.seed`` 决定；传模型时，初始化的随机性由调用者负责。
    train, dev, test : TokenData or Sequence[Sequence[int]]
        编号序列（以 ``<s>`` 开头、``</s>`` 结尾）。``test`` 为 None 时测试集困惑度记为 nan。
    config : TrainConfig
        超参数。
    pad_id : int
        填充编号（玩具语言的词表里是 0）。
    progress : bool
        是否显示 tqdm 进度条（默认不显示）。

    Returns
    -------
    TrainResult
    """
    start = time.perf_counter()
    torch.manual_seed(config.seed)
    if not isinstance(model, nn.Module):
        model = model()
    train_data, dev_data = _as_data(train, pad_id), _as_data(dev, pad_id)
    test_data = None if test is None else _as_data(test, pad_id)

    shuffle = torch.Generator().manual_seed(config.seed)
    steps_per_epoch = math.ceil(len(train_data) / config.batch_size)
    total_steps = config.epochs * steps_per_epoch

    def batches() -> Iterator[torch.Tensor]:  # 每轮开始时重新打乱、分桶
        for _ in range(config.epochs):
            yield from train_data.batches(config.batch_size, shuffle)

    stream = batches()
    dev_ppl: list[float] = []
    train_loss: list[float] = []
    epoch_loss = torch.zeros(())  # 这一轮的损失之和

    def step_loss(step: int) -> torch.Tensor:
        x, mask = train_data.batch(next(stream))
        return lm_loss(model, x, mask)

    def after_step(step: int, loss: torch.Tensor) -> None:
        nonlocal epoch_loss
        epoch_loss += loss
        if (step + 1) % steps_per_epoch == 0:  # 一轮结束：记下平均训练损失和开发集困惑度
            train_loss.append(float(epoch_loss) / steps_per_epoch)
            dev_ppl.append(perplexity(model, dev_data, batch_size=config.eval_batch_size))
            epoch_loss = torch.zeros(())
            model.train()

    fit(model, step_loss, total_steps, config.optim, after_step=after_step,
        progress=_progress(total_steps, progress, "训练"))

    test_ppl = math.nan if test_data is None else perplexity(model, test_data, batch_size=config.eval_batch_size)
    model.eval()
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    n_params = count_parameters(model)  # 共享的权重只算一次
    return TrainResult(dev_ppl, train_loss, test_ppl, state, n_params, total_steps,
                       time.perf_counter() - start, model)
