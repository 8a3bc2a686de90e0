"""实践 P08：在随书的中文语料上训练一个字符级、仅解码器的迷你 Transformer。

配方（第 20 章各页与实践 P08 都用它）：

1. 语料是包里的 ``data/p08/*.txt``（为本书原创的中文短文）。每个文件末尾约 10 % 作验证集，
   其余作训练集（:func:`transformer_book.char_tokenizer.train_val_split`）；分词器只从训练集建立，
   验证集里没见过的字符记为 ``<unk>``。
2. 每一批是从训练文本里随机截取的 B 段、每段 T + 1 个字符的窗口：前 T 个是输入，后 T 个是目标
   （错开一位）。
3. 模型是参考实现里的 :class:`transformer_book.transformer.TransformerLM`（因果、Pre-LN、权重共享）。
4. 训练走全书共用的 :func:`transformer_book.training.fit`：AdamW，预热与余弦退火，梯度裁剪；
   验证损失在验证集所有不重叠的窗口上求平均。

训练好的模型用 :mod:`transformer_book.checkpoint` 打包（:func:`pack_model`、:func:`unpack_model`），
交给第 20 章的其他片段。对这个模型的观察（数据流、注意力统计、计时）在 :mod:`.analysis` 里。

形状记号：B 批量大小，T 序列长度（上下文窗口），d 模型宽度，h 头数，d_h 每头宽度，V 词表大小。
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from transformer_book import checkpoint
from transformer_book.char_tokenizer import CharTokenizer, train_val_split
from transformer_book.training import OptimConfig, fit
from transformer_book.transformer import TransformerLM, count_parameters, generate

CORPUS_DIR = Path(__file__).resolve().parents[1] / "data" / "p08"  # 随包安装：不在本书的项目目录里也找得到
CORPUS_FILES = tuple(sorted(CORPUS_DIR.glob("*.txt")))
# 书的构建引擎据此把语料文件算进缓存键：语料一改，用到它的片段都会重跑。
BOOK_DATA_FILES = [str(p) for p in CORPUS_FILES]


# ---------------------------------------------------------------------------
# 1. 数据
# ---------------------------------------------------------------------------


def load_corpus(files: Sequence[Path] = CORPUS_FILES) -> dict[str, str]:
    """读入语料：文件名（不含扩展名）→ 全文（UTF-8）。"""
    if not files:
        raise FileNotFoundError(f"在 {CORPUS_DIR} 里没有找到语料文件 *.txt")
    return {Path(f).stem: Path(f).read_text(encoding="utf-8") for f in files}


@dataclass
class P08Data:
    """切分、编码好的数据。

    Attributes
    ----------
    tokenizer : CharTokenizer
        只从训练文本建立。
    train_text, val_text : str
        各文件的训练部分（或验证部分）按文件名顺序连在一起。
    train_ids, val_ids : LongTensor (N,)
        编码后的一维编号序列。
    """

    tokenizer: CharTokenizer
    train_text: str
    val_text: str
    train_ids: torch.Tensor
    val_ids: torch.Tensor


def prepare_data(texts: dict[str, str] | None = None, val_fraction: float = 0.1) -> P08Data:
    """把每个文件切成训练 / 验证两部分，从训练部分建立分词器，再编码。"""
    texts = load_corpus() if texts is None else texts
    parts = [train_val_split(texts[name], val_fraction) for name in sorted(texts)]
    train_text = "".join(t for t, _ in parts)
    val_text = "".join(v for _, v in parts)
    tok = CharTokenizer.from_text(train_text)
    as_tensor = lambda s: torch.tensor(tok.encode(s), dtype=torch.long)  # noqa: E731
    return P08Data(tok, train_text, val_text, as_tensor(train_text), as_tensor(val_text))


def random_batch(ids: torch.Tensor, batch_size: int, context: int,
                 generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """随机截取 ``batch_size`` 个长 ``context + 1`` 的窗口，返回输入 x 与错开一位的目标 y，各 (B, T)。"""
    if len(ids) < context + 1:
        raise ValueError(f"文本只有 {len(ids)} 个词元，不够截取长 {context + 1} 的窗口")
    starts = torch.randint(0, len(ids) - context, (batch_size,), generator=generator)  # (B,)
    offsets = torch.arange(context + 1)  # (T + 1,)
    windows = ids[starts[:, None] + offsets]  # (B, T + 1)
    return windows[:, :-1], windows[:, 1:]  # (B, T), (B, T)


def eval_windows(ids: torch.Tensor, context: int) -> tuple[torch.Tensor, torch.Tensor]:
    """验证用的全部不重叠窗口（固定、不随机），返回 x 与 y，各 (N_win, T)。"""
    n = (len(ids) - 1) // context
    if n == 0:
        raise ValueError(f"文本只有 {len(ids)} 个词元，不够一个长 {context + 1} 的窗口")
    x = ids[: n * context].view(n, context)  # (N_win, T)
    y = ids[1 : n * context + 1].view(n, context)  # (N_win, T)
    return x, y


def visible(text: str) -> str:
    """把换行显示成 ↵（放进表格的一个单元格时不会断行）。"""
    return text.replace("\n", "↵")


def require_validation_only(line: str, data: "P08Data") -> None:
    """例句必须只出现在验证集里（模型训练时没见过它）；否则报错——这是写片段时的前提，不是结论。"""
    if line not in data.val_text or line in data.train_text:
        raise ValueError(f"例句 {line!r} 应当只出现在验证集里：换一句，或检查 val_fraction")



def unigram_loss(data: P08Data) -> float:
    """只看字频、不看上下文的基线：按训练集字频（加一平滑）预测验证集每个字符的平均交叉熵。

    一个语言模型若不比它好，就说明它没有用上下文；比它好多少，才是“上下文”带来的收益。
    """
    counts = torch.bincount(data.train_ids, minlength=data.tokenizer.vocab_size).double() + 1.0  # (V,)
    log_p = counts.log() - counts.sum().log()  # (V,)
    return float(-log_p[data.val_ids[1:]].mean())  # 与模型一样，第一个字符不被预测


# ---------------------------------------------------------------------------
# 2. 模型与训练
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class P08Config:
    """P08 的全部超参数。默认值是书中使用的设置（单线程 CPU 上训练不到一分钟）。

    Parameters
    ----------
    d_model, n_heads, n_layers : int
        模型宽度 d、头数 h、块数（层数）L。
    context : int
        上下文窗口 T（也是模型的 max_len）。
    pos : str
        位置编码，见 :class:`~transformer_book.transformer.TransformerLM`。
    dropout : float
        dropout 概率（语料很小，模型很快就会背下训练集）。
    batch_size, steps : int
        每批窗口数与优化步数。
    max_lr, min_lr, warmup_steps, weight_decay, grad_clip :
        AdamW 与学习率（预热 + 余弦退火）。
    eval_every : int
        每隔多少步记录一次训练损失（这段时间的平均）和验证损失。
    val_fraction : float
        每个文件末尾划给验证集的比例。
    seed : int
        初始化与取批次的随机种子。
    """

    d_model: int = 128
    n_heads: int = 4
    n_layers: int = 2
    context: int = 64
    pos: str = "learned"
    dropout: float = 0.2
    batch_size: int = 16
    steps: int = 400
    max_lr: float = 3e-3
    min_lr: float = 1e-4
    warmup_steps: int = 40
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    eval_every: int = 25
    val_fraction: float = 0.1
    seed: int = 0

    def optim(self) -> OptimConfig:
        """AdamW 与学习率的设置（全书共用的训练循环 :func:`~transformer_book.training.fit` 读它）。"""
        return OptimConfig(lr=self.max_lr, min_lr=self.min_lr, warmup_steps=self.warmup_steps,
                           weight_decay=self.weight_decay, betas=(0.9, 0.99), grad_clip=self.grad_clip)


def build_model(config: P08Config, vocab_size: int) -> TransformerLM:
    """按配置搭一个因果的 ``TransformerLM``（Pre-LN、权重共享）。初始化由调用前的随机种子决定。"""
    return TransformerLM(vocab_size=vocab_size, d_model=config.d_model, n_heads=config.n_heads,
                         n_layers=config.n_layers, max_len=config.context, pos=config.pos, causal=True,
                         norm="pre", tie_weights=True, dropout=config.dropout)


def pack_model(model: TransformerLM, config: P08Config, tokenizer: CharTokenizer) -> dict[str, Any]:
    """把训练好的模型连同它的配置和分词器打包（只含数据，见 :mod:`transformer_book.checkpoint`）。"""
    return checkpoint.pack(model, config=asdict(config), tokenizer=tokenizer.state())


def unpack_model(packed: dict[str, Any]) -> tuple[TransformerLM, P08Config, CharTokenizer]:
    """:func:`pack_model` 的逆：模型（``eval()`` 模式）、配置、分词器。"""
    return checkpoint.unpack(packed), P08Config(**packed["config"]), CharTokenizer.from_state(packed["tokenizer"])


@torch.no_grad()
def mean_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 64) -> float:
    """(N, T) 的输入与目标上的平均交叉熵（每个被预测的词元权重相同），``eval()`` 模式下计算。"""
    was_training = model.training
    model.eval()
    total = 0.0
    for i in range(0, len(x), batch_size):
        logits = model(x[i:i + batch_size])  # (b, T, V)
        total += float(F.cross_entropy(logits.reshape(-1, logits.size(-1)), y[i:i + batch_size].reshape(-1),
                                       reduction="sum"))
    model.train(was_training)
    return total / y.numel()


def sample_text(model: TransformerLM, tokenizer: CharTokenizer, prompt: str, max_new_tokens: int, *,
                seed: int = 0, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
                use_cache: bool = True) -> str:
    """从 ``prompt`` 续写 ``max_new_tokens`` 个字符（只返回续写的部分）。采样用种子为 ``seed`` 的发生器。"""
    idx = torch.tensor([tokenizer.encode(prompt)], dtype=torch.long)  # (1, T)
    g = torch.Generator().manual_seed(seed)
    out = generate(model, idx, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                   generator=g, use_cache=use_cache)  # (1, T + max_new_tokens)
    return tokenizer.decode(out[0, idx.size(1):].tolist())


@dataclass
class P08Result:
    """一次 P08 训练的结果。

    Attributes
    ----------
    steps : list[int]
        记录点（第几步之后）。第一个点是 0：训练开始前。
    train_loss : list[float]
        每个记录点之前那段训练的平均损失（第 0 步是初始模型在一批训练窗口上的损失）。
    val_loss : list[float]
        每个记录点的验证损失。
    model : TransformerLM
        训练好的模型（``eval()`` 模式）；交给别的片段时用 :func:`pack_model` 打包。
    tokenizer : CharTokenizer
    config : P08Config
    n_parameters : int
        参数个数（共享的权重只算一次）。
    samples_before, samples_after : dict[str, str]
        训练前后，从各个提示续写的文字。
    seconds : float
        训练用的墙钟时间（不含采样）。
    """

    steps: list[int]
    train_loss: list[float]
    val_loss: list[float]
    model: TransformerLM = field(repr=False, compare=False)
    tokenizer: CharTokenizer = field(repr=False)
    config: P08Config
    n_parameters: int
    samples_before: dict[str, str]
    samples_after: dict[str, str]
    seconds: float = field(compare=False)


def result_data(result: P08Result) -> dict[str, Any]:
    """把一次训练的结果打包成纯数据（模型用 :func:`pack_model`），可以作为片段的 ``Artifact`` 交出去。"""
    return {"steps": list(result.steps), "train_loss": list(result.train_loss), "val_loss": list(result.val_loss),
            "model": pack_model(result.model, result.config, result.tokenizer), "n_parameters": result.n_parameters,
            "samples_before": dict(result.samples_before), "samples_after": dict(result.samples_after),
            "seconds": result.seconds}


def result_from_data(data: dict[str, Any]) -> P08Result:
    """:func:`result_data` 的逆：与当初训练得到的 :class:`P08Result` 相同（模型为 ``eval()`` 模式）。"""
    model, config, tokenizer = unpack_model(data["model"])
    return P08Result(list(data["steps"]), list(data["train_loss"]), list(data["val_loss"]), model, tokenizer, config,
                     int(data["n_parameters"]), dict(data["samples_before"]), dict(data["samples_after"]),
                     float(data["seconds"]))


def train_p08(config: P08Config = P08Config(), data: P08Data | None = None, *,
              prompts: Sequence[str] = (), sample_tokens: int = 40, sample_seed: int = 0,
              progress: Callable[[int, float, float], None] | None = None) -> P08Result:
    """训练 P08 的模型并返回损失曲线、参数与训练前后的样本。

    Parameters
    ----------
    config : P08Config
    data : P08Data, optional
        默认用 :func:`prepare_data` 读入随书语料。
    prompts : sequence of str
        训练前后各续写一次的提示（温度 1 采样，种子 ``sample_seed``）。
    sample_tokens : int
        每个样本续写的字符数。
    progress : callable, optional
        每个记录点调用 ``progress(step, train_loss, val_loss)``。
    """
    data = prepare_data(val_fraction=config.val_fraction) if data is None else data
    tok = data.tokenizer
    torch.manual_seed(config.seed)
    model = build_model(config, tok.vocab_size)
    batches = torch.Generator().manual_seed(config.seed)
    val_x, val_y = eval_windows(data.val_ids, config.context)

    def samples() -> dict[str, str]:  # 每个提示用各自的种子，训练前的样本才不会彼此相同
        return {p: sample_text(model, tok, p, sample_tokens, seed=sample_seed + i) for i, p in enumerate(prompts)}

    samples_before = samples()
    start = time.perf_counter()
    x0, y0 = random_batch(data.train_ids, config.batch_size, config.context, batches)
    steps, train_loss, val_loss = [0], [mean_loss(model, x0, y0)], [mean_loss(model, val_x, val_y)]
    if progress:
        progress(0, train_loss[0], val_loss[0])
    running = torch.zeros(())  # 这一段的损失之和

    def step_loss(step: int) -> torch.Tensor:
        x, y = random_batch(data.train_ids, config.batch_size, config.context, batches)  # (B, T) 各一
        logits = model(x)  # (B, T, V)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))  # (B·T, V) 对 (B·T,)

    def after_step(step: int, loss: torch.Tensor) -> None:
        nonlocal running
        running += loss
        done = step + 1
        if done % config.eval_every == 0 or done == config.steps:  # 记录点：这一段的训练损失与验证损失
            steps.append(done)
            train_loss.append(float(running) / (done - steps[-2]))
            val_loss.append(mean_loss(model, val_x, val_y))
            running = torch.zeros(())
            if progress:
                progress(done, train_loss[-1], val_loss[-1])

    fit(model, step_loss, config.steps, config.optim(), after_step=after_step)
    seconds = time.perf_counter() - start
    model.eval()
    return P08Result(steps, train_loss, val_loss, model, tok, config, count_parameters(model),
                     samples_before, samples(), seconds)
