"""从零写一个会写诗的 GPT：五个模型，每一个只比上一个多几行（实践 P08 前篇）。

从上往下读这个文件，就是从“只看当前这一个字”的二元模型一路走到一个完整的 Transformer 块：

1. :class:`BigramLM`：只看当前这一个字，猜下一个字；
2. :class:`AverageLM`：再加上前文的平均（用下三角矩阵 ``tril`` 挡住后文）；
3. :class:`OneHeadLM`：把平均换成一个自注意力头，权重由查询和键算出来（同时加上位置）；
4. :class:`MultiHeadLM`：把一个头换成几个窄一些的头；
5. :class:`BlockLM`：把多头注意力装进带残差连接、层归一化和前馈网络的块里。

模型用到的部件按数据流经它们的顺序排在前面：前文的平均 → 一个头 → 几个头 → 前馈网络 → 块。它们故意写得比
参考实现 :mod:`transformer_book.transformer` 短：没有掩码参数、没有 KV 缓存，只做这一页要做的事。
每个模型在输出层之前都有一个层归一化 ``ln_f``（GPT-2 这类 Pre-LN 模型在最后一个块之后也有这一层），第五步把层归一化也放进块里。

五个模型用同一份数据、同一套训练（:func:`train_stage`：同样的步数、学习率、dropout 和种子）训练，
验证损失的差别只来自模型本身。数据是五言唐诗（:mod:`transformer_book.chapter20.poems`）；训练好以后，
每个模型各写一批诗（:func:`train_seeds`），量一量它们像不像五言诗。

形状记号：B 批量大小，T 序列长度（不超过上下文窗口 T_max），d 模型宽度（代码里的 ``d_model``），h 头数，
d_h 每头宽度 = d / h，V 词表大小。
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from transformer_book.char_tokenizer import CharTokenizer
from transformer_book.chapter20.p08 import eval_windows, mean_loss, random_batch
from transformer_book.chapter20.poems import PoemData, prepare_poems, write_poems
from transformer_book.training import OptimConfig, fit

# ---------------------------------------------------------------------------
# 1. 部件：按数据流经它们的顺序
# ---------------------------------------------------------------------------


def causal_average(x):
    """每个位置取它自己和它前面所有位置的平均：第 t 行是 x_0 … x_t 的平均，看不到 t 之后。

    x: (B, T, d) → (B, T, d)。
    """
    T = x.size(1)
    weights = torch.tril(torch.ones(T, T))  # (T, T)：下三角为 1，第 t 行只有前 t+1 个位置是 1
    weights = weights / weights.sum(dim=1, keepdim=True)  # 每行除以它的个数，每行和为 1
    return weights @ x  # (T, T) @ (B, T, d) → (B, T, d)


class Head(nn.Module):
    """一个因果自注意力头：权重不再人人平分，而是由查询和键的点积算出来。"""

    def __init__(self, d_model, d_head):
        super().__init__()
        self.query = nn.Linear(d_model, d_head, bias=False)  # W^Q
        self.key = nn.Linear(d_model, d_head, bias=False)  # W^K
        self.value = nn.Linear(d_model, d_head, bias=False)  # W^V

    def forward(self, x):
        """x: (B, T, d) → (B, T, d_h)。"""
        T = x.size(1)
        q, k, v = self.query(x), self.key(x), self.value(x)  # 各 (B, T, d_h)
        scores = q @ k.transpose(-2, -1) / k.size(-1) ** 0.5  # (B, T, T)：QKᵀ / √d_h
        future = torch.tril(torch.ones(T, T)) == 0  # (T, T)：对角线以上（后文）为 True
        scores = scores.masked_fill(future, float("-inf"))  # 后文的分数记为 −∞，softmax 之后恰好是 0
        weights = torch.softmax(scores, dim=-1)  # (B, T, T)：每行和为 1
        return weights @ v  # (B, T, d_h)


class MultiHead(nn.Module):
    """h 个头并排，每个头读入整个 x、各算各的注意力；输出拼起来，再由 W^O 混合。"""

    def __init__(self, d_model, n_heads):
        super().__init__()
        self.heads = nn.ModuleList(Head(d_model, d_model // n_heads) for _ in range(n_heads))
        self.proj = nn.Linear(d_model, d_model)  # W^O

    def forward(self, x):
        """x: (B, T, d) → (B, T, d)。"""
        out = torch.cat([head(x) for head in self.heads], dim=-1)  # h 个 (B, T, d_h) 拼成 (B, T, d)
        return self.proj(out)  # (B, T, d)


class FeedForward(nn.Module):
    """逐位置的前馈网络：d → 4d → GELU → d。"""

    def __init__(self, d_model, dropout):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model),
                                 nn.Dropout(dropout))

    def forward(self, x):
        """x: (B, T, d) → (B, T, d)。"""
        return self.net(x)


class Block(nn.Module):
    """一个 Pre-LN 的 Transformer 块：两个子层各自先做层归一化，结果加回主干（残差连接）。"""

    def __init__(self, d_model, n_heads, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MultiHead(d_model, n_heads)
        self.drop = nn.Dropout(dropout)
        self.ln2 = nn.LayerNorm(d_model)
        self.ffn = FeedForward(d_model, dropout)

    def forward(self, x):
        """x: (B, T, d) → (B, T, d)。"""
        x = x + self.drop(self.attn(self.ln1(x)))  # 注意力子层：x + MHA(LN(x))
        x = x + self.ffn(self.ln2(x))  # 前馈子层：x + FFN(LN(x))
        return x


# ---------------------------------------------------------------------------
# 2. 五个模型：每一个只比上一个多几行
# ---------------------------------------------------------------------------


class BigramLM(nn.Module):
    """第一步：二元模型。只看当前这一个字：查出它的向量，归一化，再投影成词表上的 logits。"""

    def __init__(self, vocab_size, d_model, context, n_heads=1, dropout=0.0):
        # 五个模型的构造参数都一样：context（上下文窗口 T_max）第三步才用上，n_heads 第四步才用上
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)  # 每个字一个 d 维向量
        self.drop = nn.Dropout(dropout)  # 训练时随机丢掉一部分分量，防止死记训练文本
        self.ln_f = nn.LayerNorm(d_model)  # 输出层之前的层归一化
        self.lm_head = nn.Linear(d_model, vocab_size)  # d → V

    def forward(self, idx):
        """idx: (B, T) 的字的编号 → logits (B, T, V)。"""
        x = self.drop(self.tok_emb(idx))  # (B, T, d)
        return self.lm_head(self.ln_f(x))  # (B, T, V)


class AverageLM(BigramLM):
    """第二步：当前字的向量，加上前文（含它自己）的平均。前文第一次进入预测。"""

    def forward(self, idx):
        x = self.drop(self.tok_emb(idx))  # (B, T, d)
        x = x + causal_average(x)  # 新增：加上 x_0 … x_t 的平均
        return self.lm_head(self.ln_f(x))  # (B, T, V)


class OneHeadLM(BigramLM):
    """第三步：把平均换成一个自注意力头；注意力本身不知道先后，所以同时加上位置嵌入。"""

    def __init__(self, vocab_size, d_model, context, n_heads=1, dropout=0.0):
        super().__init__(vocab_size, d_model, context, n_heads, dropout)
        self.pos_emb = nn.Embedding(context, d_model)  # 新增：位置 0 … T_max−1 各一个向量
        self.attn = Head(d_model, d_model)  # 新增：一个宽度为 d 的头

    def forward(self, idx):
        T = idx.size(1)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(T)))  # (B, T, d)：字 + 位置
        x = x + self.attn(x)  # 平均换成注意力的加权平均
        return self.lm_head(self.ln_f(x))  # (B, T, V)


class MultiHeadLM(OneHeadLM):
    """第四步：一个宽的头换成 h 个窄的头（总宽度不变），``forward`` 与第三步相同。"""

    def __init__(self, vocab_size, d_model, context, n_heads=4, dropout=0.0):
        super().__init__(vocab_size, d_model, context, n_heads, dropout)
        self.attn = MultiHead(d_model, n_heads)  # 唯一的改动


class BlockLM(OneHeadLM):
    """第五步：多头注意力装进 Transformer 块（残差连接、层归一化、前馈网络）。"""

    def __init__(self, vocab_size, d_model, context, n_heads=4, dropout=0.0):
        super().__init__(vocab_size, d_model, context, n_heads, dropout)
        del self.attn  # 注意力不再单独出现：它在块里
        self.block = Block(d_model, n_heads, dropout)  # 新增：一个块

    def forward(self, idx):
        T = idx.size(1)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(torch.arange(T)))  # (B, T, d)
        x = self.block(x)  # 块里已经有残差连接：这里不再加 x
        return self.lm_head(self.ln_f(x))  # (B, T, V)


STAGES = {"bigram": BigramLM, "average": AverageLM, "head": OneHeadLM, "heads": MultiHeadLM, "block": BlockLM}
"""五个阶段，按顺序：名字 → 模型类。"""


# ---------------------------------------------------------------------------
# 3. 训练：五个模型完全相同的一套
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ScratchConfig:
    """五个阶段共用的设置（默认值是书中的设置，每个阶段每个种子在单线程 CPU 上训练十几秒）。

    Parameters
    ----------
    d_model, n_heads : int
        模型宽度 d 与头数 h（第四、五步；第三步总是一个头）。
    context : int
        上下文窗口 T_max。
    dropout : float
        dropout 概率。默认 0：八百步读过的字还不到训练文本的一遍，模型来不及背下它；语料小、训练长时才需要它。
    batch_size, steps : int
        每批窗口数与优化步数。批量 12 是为了让五个阶段、三个种子的计算守住这条路径 240 秒的预算（耗时随机器
        而变，见构建的计时表）；批量 16 时各步的结论相同，只是更慢；再省就得减步数，而 600 步时第五步在
        种子 0 上还追不上第四步。
    lr, min_lr, warmup_steps, weight_decay, grad_clip : float
        AdamW 与学习率（预热 + 余弦退火）、梯度裁剪。
    eval_every : int
        每隔多少步记录一次训练损失与验证损失。
    seed : int
        初始化与取批次的随机种子（五个阶段相同）。
    """

    d_model: int = 64
    n_heads: int = 4
    context: int = 32
    dropout: float = 0.0
    batch_size: int = 12
    steps: int = 800
    lr: float = 5e-3
    min_lr: float = 1e-4
    warmup_steps: int = 200
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 200
    seed: int = 0

    def optim(self) -> OptimConfig:
        """AdamW 与学习率的设置（全书共用的训练循环 :func:`~transformer_book.training.fit` 读它）。"""
        return OptimConfig(lr=self.lr, min_lr=self.min_lr, warmup_steps=self.warmup_steps,
                           weight_decay=self.weight_decay, betas=(0.9, 0.99), grad_clip=self.grad_clip)


def build(stage: str, vocab_size: int, config: ScratchConfig = ScratchConfig()) -> nn.Module:
    """按名字搭出一个阶段的模型：线性层 ~ N(0, 0.02²)、偏置为 0（GPT-2 的做法）；嵌入保留 PyTorch 的默认 N(0, 1)。

    嵌入不缩小：第五步的块先对它做层归一化，嵌入若只有 0.02 那么大，归一化要把它放大约五十倍，这是为本页
    这样短的训练选的设置。五个模型用同一种初始化。
    初始化的随机性由调用前的种子决定。
    """
    model = STAGES[stage](vocab_size, config.d_model, config.context, config.n_heads, config.dropout)
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
    return model


@dataclass
class StageResult:
    """一个阶段的训练结果。

    Attributes
    ----------
    stage : str
        阶段的名字（:data:`STAGES` 的键）。
    steps : list[int]
        记录点（第几步之后）；第一个是 0：训练开始前。
    train_loss : list[float]
        每个记录点之前那一段训练的平均损失（dropout 打开）；第 0 步没有训练，记为训练开始前的验证损失。
    val_loss : list[float]
        每个记录点的验证损失（验证集全部不重叠的窗口，dropout 关闭）。
    n_parameters : int
        参数个数。
    seconds : float
        训练用的墙钟时间。
    poems : list[str]
        训练好以后，模型从一首诗的开头写出的 :data:`N_POEMS` 首诗（量格式用）。
    samples : list[str]
        从提示 :data:`PROMPT` 续写的几首（放在页面上给人看）。
    model : nn.Module 或 None
        训练好的模型（``eval()`` 模式；由 :meth:`from_data` 还原的结果没有它）。
    """

    stage: str
    steps: list[int]
    train_loss: list[float]
    val_loss: list[float]
    n_parameters: int
    seconds: float = field(compare=False)
    poems: list[str] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)
    model: nn.Module | None = field(default=None, compare=False, repr=False)

    def data(self) -> dict[str, Any]:
        """纯数据（可以作为片段的 ``Artifact`` 交给别的片段）。"""
        return {"stage": self.stage, "steps": list(self.steps), "train_loss": list(self.train_loss),
                "val_loss": list(self.val_loss), "n_parameters": self.n_parameters, "seconds": self.seconds,
                "poems": list(self.poems), "samples": list(self.samples)}

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> "StageResult":
        """:meth:`data` 的逆。"""
        return cls(data["stage"], list(data["steps"]), list(data["train_loss"]), list(data["val_loss"]),
                   int(data["n_parameters"]), float(data["seconds"]), list(data["poems"]), list(data["samples"]))


SEEDS = (0, 1, 2)
"""每个阶段训练的种子（初始化与取批次的顺序都随种子变）：比较两个阶段时，每个种子上都要成立。"""

PROMPT = "床前明月光，"
"""页面上的样诗从这一句续写。"""
N_POEMS = 40
"""训练好以后，每个模型从一首诗的开头写多少首，用来量格式。"""
WRITE_SEED = 0
"""写诗时抽样的种子：同一个模型，写出的诗每次都一样。"""


def train_seeds(stage: str, seeds: tuple[int, ...] = SEEDS, config: ScratchConfig = ScratchConfig()) -> list[StageResult]:
    """同一个阶段在每个种子上各训练一次（其余设置相同），训练好以后让它写诗；返回每个种子的结果。"""
    data = prepare_poems()
    runs = []
    for seed in seeds:
        run = train_stage(stage, replace(config, seed=seed), data)
        run.poems = write_poems(run.model, data.tokenizer, "", N_POEMS, context=config.context, seed=WRITE_SEED)
        run.samples = write_poems(run.model, data.tokenizer, PROMPT, 2, context=config.context, seed=WRITE_SEED)
        runs.append(run)
    return runs


def pack_model(model: nn.Module, config: ScratchConfig, tokenizer: CharTokenizer) -> dict[str, Any]:
    """把训练好的某一阶段的模型连同设置和分词器打包成只含数据的字典（交给别的片段，见 :func:`unpack_model`）。"""
    stage = next(name for name, cls in STAGES.items() if type(model) is cls)
    state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    return {"stage": stage, "config": asdict(config), "tokenizer": tokenizer.state(), "state_dict": state}


def unpack_model(packed: dict[str, Any]) -> tuple[nn.Module, ScratchConfig, CharTokenizer]:
    """:func:`pack_model` 的逆：模型（``eval()`` 模式）、设置、分词器。"""
    config, tokenizer = ScratchConfig(**packed["config"]), CharTokenizer.from_state(packed["tokenizer"])
    model = STAGES[packed["stage"]](tokenizer.vocab_size, config.d_model, config.context, config.n_heads, config.dropout)
    model.load_state_dict(packed["state_dict"])
    return model.eval(), config, tokenizer


def train_stage(stage: str, config: ScratchConfig = ScratchConfig(), data: PoemData | None = None) -> StageResult:
    """训练一个阶段的模型，返回它的损失曲线和训练好的模型。五个阶段的数据、批次顺序、步数和种子完全相同。"""
    data = prepare_poems() if data is None else data
    torch.manual_seed(config.seed)
    model = build(stage, data.tokenizer.vocab_size, config)
    batches = torch.Generator().manual_seed(config.seed)
    val_x, val_y = eval_windows(data.val_ids, config.context)  # 验证集的全部不重叠窗口，各 (N_win, T)
    start = time.perf_counter()
    first = mean_loss(model, val_x, val_y)
    steps, train_loss, val_loss, running = [0], [first], [first], []

    def step_loss(step):
        x, y = random_batch(data.train_ids, config.batch_size, config.context, batches)  # 各 (B, T)
        logits = model(x)  # (B, T, V)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))  # (B·T, V) 对 (B·T,)

    def after_step(step, loss):
        running.append(float(loss))
        if (step + 1) % config.eval_every == 0 or step + 1 == config.steps:
            steps.append(step + 1)
            train_loss.append(sum(running) / len(running))
            val_loss.append(mean_loss(model, val_x, val_y))
            running.clear()

    fit(model, step_loss, config.steps, config.optim(), after_step=after_step)
    n_parameters = sum(p.numel() for p in model.parameters())
    return StageResult(stage, steps, train_loss, val_loss, n_parameters, time.perf_counter() - start,
                       model=model.eval())
