"""第 7 讲第 7 节的实验与核对：深层网络里的残差与层归一化、手算层归一化、每块的参数量。

**深度实验（第 7.1 节）。** 8 层的 :class:`transformer_book.transformer.TransformerLM`，任务是在每个位置 t
说出往前第 3 个词 x_{t−3}（随机序列，瞎猜的准确率 1/V）。比较三种块：Pre-LN、Post-LN、去掉残差的 Pre-LN。

- 初始化时的“坍缩程度”：最后一个块输出的隐藏状态里，同一序列不同位置的向量两两之间的平均余弦相似度
  （:func:`mean_pairwise_cosine`）。1 表示所有位置的向量方向完全相同。另给一个不受“公共偏移”影响的量：
  相对离散度 ‖Z − 𝟏z̄‖_F / ‖Z‖_F（Dong 等 2021 的 res，z̄ 是各位置的平均向量、1 × d，𝟏 是 T 个 1 排成的列），0 表示所有位置完全相同。
- 去掉残差的块不是参考实现的一个选项，而是在这里用组合搭出来的（:class:`NoResidualBlock`）：
  它与 Pre-LN 块的子模块、初始化完全相同，只是子层的输出直接替换主干，不再加回去。
- 训练走全书共用的 :func:`transformer_book.training.fit`：AdamW，固定学习率，不预热；记录前 50 步与
  最后 50 步的平均损失，以及训练后在新序列上的准确率。

**层归一化（第 7.2 节）。** :func:`layer_norm_by_hand` 按公式一步一步算。

**参数量（第 7.5 节）。** :func:`block_parameter_breakdown` 数出一个真实块里各部分的参数（公式是
:func:`transformer_book.transformer.block_parameters`）；:func:`gpt2_small_breakdown` 在 ``meta`` 设备上
搭一个 GPT-2 small 大小的模型（不分配内存）再数。

形状记号：B 批量大小，T 序列长度，d 模型宽度，V 词表大小。
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from transformer_book.training import OptimConfig, fit
from transformer_book.transformer import BlockParameters, TransformerBlock, TransformerLM, count_parameters

# ---------------------------------------------------------------------------
# 7.1 残差、层归一化与深度
# ---------------------------------------------------------------------------

VARIANTS = {  # 名字 → (块的写法, 是否保留残差)
    "pre": ("pre", True),
    "post": ("post", True),
    "pre_no_residual": ("pre", False),
}


class NoResidualBlock(TransformerBlock):
    """Pre-LN 块去掉两条残差：x ← Attn(LN(x))，x ← FFN(LN(x))，子层的输出直接替换主干。

    只为第 7.1 节的坍缩实验而有。子模块与 :class:`TransformerBlock` 完全相同，所以能原样读入一个
    Pre-LN 块的参数（见 :func:`build_model`）。
    """

    def forward(self, x, *, mask=None, rope=None, kv_cache=None, memory=None, memory_mask=None,
                need_weights=False):
        a, weights = self.attn(self.ln1(x), mask=mask, rope=rope, kv_cache=kv_cache, need_weights=need_weights)
        x = self.drop(a)  # (B, T, d)：没有 “x +”
        x = self.drop(self.ffn(self.ln2(x)))  # (B, T, d)
        return x, weights, None


@dataclass(frozen=True)
class DepthConfig:
    """深度实验的设置。

    Parameters
    ----------
    vocab_size, seq_len, offset : int
        词表 V、序列长度 T、要取回的距离 k（位置 t 预测 x_{t−k}；只有 t ≥ k 的位置参与损失）。
    d_model, n_heads, n_layers : int
        模型宽度、头数、块数。
    steps, batch_size, lr : int, int, float
        训练步数、每批序列数、AdamW 的学习率（固定，不预热）。
    window : int
        “前 / 最后若干步的平均损失”取多少步。
    eval_sequences : int
        初始化时测坍缩、训练后测准确率用的新序列个数。
    """

    vocab_size: int = 10
    seq_len: int = 16
    offset: int = 3
    d_model: int = 32
    n_heads: int = 4
    n_layers: int = 8
    steps: int = 300
    batch_size: int = 32
    lr: float = 3e-3
    window: int = 50
    eval_sequences: int = 256


def make_batch(batch_size, config, generator):
    """随机序列 (B, T) 与目标 (B, T − k)：位置 t = k … T−1 的目标是 x_{t−k}。"""
    tokens = torch.randint(config.vocab_size, (batch_size, config.seq_len), generator=generator)  # (B, T)
    return tokens, tokens[:, : config.seq_len - config.offset]  # (B, T), (B, T − k)


def build_model(variant, config, seed):
    """按 ``VARIANTS[variant]`` 搭一个 TransformerLM（GPT-2 初始化，由 ``seed`` 决定）。

    去掉残差的变体先照常搭一个 Pre-LN 的模型（初始化与有残差时逐位相同），再把每个块换成读入了
    同样参数的 :class:`NoResidualBlock`。这里不需要注意力权重，所以用 PyTorch 的融合注意力
    （``attn_impl="sdpa"``）省时间；它与可读路径只差浮点误差。
    """
    norm, residual = VARIANTS[variant]
    torch.manual_seed(seed)
    model = TransformerLM(vocab_size=config.vocab_size, d_model=config.d_model, n_heads=config.n_heads,
                          n_layers=config.n_layers, max_len=config.seq_len, attn_impl="sdpa", norm=norm)
    if not residual:
        for i, block in enumerate(model.blocks):
            plain = NoResidualBlock(d_model=config.d_model, n_heads=config.n_heads, attn_impl="sdpa")
            plain.load_state_dict(block.state_dict())
            model.blocks[i] = plain
    return model


def mean_pairwise_cosine(h):
    """同一序列里不同位置的向量两两之间余弦相似度的平均（再对批取平均）。

    Parameters
    ----------
    h : Tensor (B, T, d)

    Returns
    -------
    float
        1 表示每个序列里所有位置的向量方向相同（完全坍缩）。
    """
    unit = F.normalize(h, dim=-1)  # (B, T, d)
    cos = unit @ unit.transpose(1, 2)  # (B, T, T)
    T = h.size(1)
    off_diagonal = ~torch.eye(T, dtype=torch.bool)
    return float(cos[:, off_diagonal].mean())


def relative_spread(h):
    """‖Z − 𝟏z̄‖_F / ‖Z‖_F（对批取平均）：各位置与它们的平均向量相差多少；0 = 所有位置相同。

    Parameters
    ----------
    h : Tensor (B, T, d)
    """
    centered = h - h.mean(dim=1, keepdim=True)  # (B, T, d)
    return float((centered.flatten(1).norm(dim=1) / h.flatten(1).norm(dim=1)).mean())


@torch.no_grad()
def states_by_layer(model, tokens):
    """主干上的隐藏状态：进入第 1 个块之前（词嵌入 + 位置），以及每个块的输出，用前向钩子读出。

    Returns
    -------
    list[Tensor]
        N + 1 个 (B, T, d)；最后一个是最后一个块的输出（Pre-LN 时在最后的层归一化之前）。
    """
    states = []
    hooks = [model.blocks[0].register_forward_pre_hook(lambda module, args: states.append(args[0]))]
    hooks += [block.register_forward_hook(lambda module, args, out: states.append(out[0]))
              for block in model.blocks]
    try:
        model(tokens)
    finally:
        for hook in hooks:
            hook.remove()
    return states


def _loss_and_logits(model, tokens, targets, config):
    logits = model(tokens)[:, config.offset:]  # (B, T − k, V)
    return F.cross_entropy(logits.reshape(-1, config.vocab_size), targets.reshape(-1)), logits


@dataclass
class DepthRun:
    """一种块的结果。

    Attributes
    ----------
    variant : str
        ``VARIANTS`` 的键。
    init_cosine, init_spread : float
        初始化时最后一个块输出的平均余弦相似度与相对离散度。
    init_cosine_by_layer : list[float]
        初始化时主干上每一层的平均余弦相似度（第 0 个是进入第 1 个块之前）。
    losses : list[float]
        每一步的训练损失。
    first_loss, last_loss : float
        前 ``window`` 步与最后 ``window`` 步的平均损失。
    accuracy : float
        训练后在新序列上的准确率。
    """

    variant: str
    init_cosine: float
    init_spread: float
    init_cosine_by_layer: list[float]
    losses: list[float]
    first_loss: float
    last_loss: float
    accuracy: float


def train_depth_variant(variant, config=DepthConfig(), seed=0):
    """测一种块在初始化时的坍缩程度，训练 ``config.steps`` 步，再测准确率。"""
    model = build_model(variant, config, seed)
    probe = torch.Generator().manual_seed(10_000 + seed)  # 测坍缩与准确率的序列，与训练数据独立
    eval_tokens, eval_targets = make_batch(config.eval_sequences, config, probe)
    model.eval()
    states = states_by_layer(model, eval_tokens)
    by_layer = [mean_pairwise_cosine(h) for h in states]
    model.train()
    data = torch.Generator().manual_seed(seed)
    losses = []

    def step_loss(step):
        tokens, targets = make_batch(config.batch_size, config, data)
        return _loss_and_logits(model, tokens, targets, config)[0]

    fit(model, step_loss, config.steps, OptimConfig(lr=config.lr, schedule="constant"),
        after_step=lambda step, loss: losses.append(float(loss)))
    model.eval()
    with torch.no_grad():
        _, logits = _loss_and_logits(model, eval_tokens, eval_targets, config)
    accuracy = float((logits.argmax(dim=-1) == eval_targets).float().mean())
    w = config.window
    return DepthRun(variant=variant, init_cosine=by_layer[-1], init_spread=relative_spread(states[-1]),
                    init_cosine_by_layer=by_layer, losses=losses,
                    first_loss=sum(losses[:w]) / w, last_loss=sum(losses[-w:]) / w, accuracy=accuracy)


def depth_study(variants=tuple(VARIANTS), config=DepthConfig(), seed=0):
    """三种块各训练一次，返回 ``{variant: DepthRun}``。"""
    return {v: train_depth_variant(v, config, seed) for v in variants}


# ---------------------------------------------------------------------------
# 7.2 层归一化
# ---------------------------------------------------------------------------


def layer_norm_by_hand(x, gamma=None, beta=None, eps=1e-5):
    """层归一化按公式计算：γ ⊙ (x − μ) / √(σ² + ε) + β，μ 与 σ² 沿最后一维，σ² 用有偏估计（除以 d）。

    Parameters
    ----------
    x : Tensor (..., d)
    gamma, beta : Tensor (d,)，可选
        缩放与平移；省略时为 1 与 0（``nn.LayerNorm`` 初始化时的值）。
    eps : float
        与 ``nn.LayerNorm`` 的默认值相同。

    Returns
    -------
    y, mu, var : Tensor
        结果 (..., d)，以及每个向量的均值与方差 (..., 1)。
    """
    mu = x.mean(dim=-1, keepdim=True)  # (..., 1)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # (..., 1)：除以 d，不是 d − 1
    y = (x - mu) / torch.sqrt(var + eps)
    if gamma is not None:
        y = y * gamma
    if beta is not None:
        y = y + beta
    return y, mu, var


# ---------------------------------------------------------------------------
# 7.5 参数量
# ---------------------------------------------------------------------------


def block_parameter_breakdown(d, n_heads=None):
    """数一个真实的 Pre-LN :class:`TransformerBlock` 里各部分的参数个数（与公式
    :func:`~transformer_book.transformer.block_parameters` 同样的四项）。"""
    with torch.device("meta"):  # 只数个数，不分配内存
        block = TransformerBlock(d_model=d, n_heads=n_heads or max(1, d // 64))
    return BlockParameters(attention=count_parameters(block.attn), ffn=count_parameters(block.ffn),
                           layer_norms=count_parameters(block.ln1) + count_parameters(block.ln2),
                           total=count_parameters(block))


def gpt2_small_breakdown(vocab_size=50257, max_len=1024, d_model=768, n_layers=12, n_heads=12):
    """GPT-2 small 大小的 TransformerLM（可学习的位置嵌入、Pre-LN、权重共享）的参数个数及各部分。

    模型搭在 ``meta`` 设备上：参数只有形状，不占内存，也不做初始化的随机数。

    Returns
    -------
    dict
        ``total``、``token_embedding``、``position_embedding``、``blocks``、``final_norm``，以及
        ``head_is_embedding``（输出层与词嵌入是否是同一个矩阵）。
    """
    with torch.device("meta"):
        model = TransformerLM(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                              max_len=max_len)
    return {
        "total": count_parameters(model),
        "token_embedding": count_parameters(model.tok_emb),
        "position_embedding": count_parameters(model.pos_emb),
        "blocks": count_parameters(model.blocks),
        "final_norm": count_parameters(model.ln_f),
        "head_is_embedding": model.head.weight is model.tok_emb.weight,
    }
