"""实践 P08：在随书的中文语料上训练一个字符级、仅解码器的迷你 Transformer。

配方（第 20 章各页与实践 P08 都用它）：

1. 语料是 ``data/p08/*.txt``（为本书原创，约 2.4 万个汉字）。每个文件末尾约 10 % 作验证集，
   其余作训练集（:func:`transformer_book.char_tokenizer.train_val_split`）；分词器只从训练集建立，
   验证集里没见过的字符记为 ``<unk>``。
2. 每一批是从训练文本里随机截取的 B 段、每段 T + 1 个字符的窗口：前 T 个是输入，后 T 个是目标
   （错开一位）。
3. 模型是参考实现里的 :class:`transformer_book.transformer.TransformerLM`（因果、Pre-LN、权重共享）。
4. AdamW + 预热与余弦退火，梯度裁剪；验证损失在验证集所有不重叠的窗口上求平均。

另有几样第 20 章用来观察这个模型的小工具：

- 读形状、数参数：:func:`trace_ops` 记录一次前向计算里每个张量运算的输出形状，:func:`dataflow` 用
  前向钩子（forward hook）逐步记下一个 ``TransformerLM`` 的输入形状、输出形状和参数个数；
- 代价：:func:`score_matrix_entries`（注意力分数矩阵的元素个数）、:func:`kv_cache_entries`；
- 解码与注意力：:func:`decoding_distribution`（一步解码实际抽样的分布）、:func:`time_generation`
  （用与不用 KV 缓存的计时）、:func:`attention_statistics` 与 :func:`uniform_attention_baseline`
  （各头的注意力习惯及其对照）、:func:`loss_without_head`（去掉一个头的干预）。

形状记号：B 批量大小，T 序列长度（上下文窗口），d 模型宽度，h 头数，d_h 每头宽度，V 词表大小。
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from transformer_book.char_tokenizer import CharTokenizer, train_val_split
from transformer_book.shape_trace import TracedOp, shapes_of, symbolic_shape, trace_ops  # noqa: F401 (re-exported)
from transformer_book.transformer import TransformerLM, count_parameters, generate, warmup_cosine

CORPUS_DIR = Path(__file__).resolve().parents[2] / "data" / "p08"
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
        模型宽度 d、头数 h、块数 N。
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


def build_model(config: P08Config, vocab_size: int) -> TransformerLM:
    """按配置搭一个因果的 ``TransformerLM``（Pre-LN、权重共享）。初始化由调用前的随机种子决定。"""
    return TransformerLM(vocab_size=vocab_size, d_model=config.d_model, n_heads=config.n_heads,
                         n_layers=config.n_layers, max_len=config.context, pos=config.pos, causal=True,
                         norm="pre", tie_weights=True, dropout=config.dropout)


def load_model(state_dict: dict[str, torch.Tensor], config: P08Config | dict, vocab_size: int) -> TransformerLM:
    """由训练得到的参数重建模型（``eval()`` 模式）。"""
    config = P08Config(**config) if isinstance(config, dict) else config
    model = build_model(config, vocab_size)
    model.load_state_dict(state_dict)
    return model.eval()


def config_dict(config: P08Config) -> dict:
    """配置的普通字典（可 pickle，也可传回 :func:`load_model`）。"""
    return asdict(config)


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
    state_dict : dict[str, Tensor]
        训练结束时参数的副本（CPU，可 pickle）。
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
    state_dict: dict[str, torch.Tensor] = field(repr=False)
    tokenizer: CharTokenizer = field(repr=False)
    config: P08Config
    n_parameters: int
    samples_before: dict[str, str]
    samples_after: dict[str, str]
    seconds: float = field(compare=False)


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
    decay = [p for p in model.parameters() if p.dim() >= 2]  # 矩阵与词嵌入做权重衰减，偏置与 LN 不做
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": config.weight_decay},
                                   {"params": no_decay, "weight_decay": 0.0}],
                                  lr=config.max_lr, betas=(0.9, 0.99))

    start = time.perf_counter()
    x0, y0 = random_batch(data.train_ids, config.batch_size, config.context, batches)
    steps, train_loss, val_loss = [0], [mean_loss(model, x0, y0)], [mean_loss(model, val_x, val_y)]
    if progress:
        progress(0, train_loss[0], val_loss[0])
    running = torch.zeros(())
    model.train()
    for step in range(config.steps):
        lr = warmup_cosine(step, warmup_steps=config.warmup_steps, total_steps=config.steps,
                           max_lr=config.max_lr, min_lr=config.min_lr)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = random_batch(data.train_ids, config.batch_size, config.context, batches)  # (B, T) 各一
        logits = model(x)  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))  # (B·T, V) 对 (B·T,)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        running += loss.detach()
        done = step + 1
        if done % config.eval_every == 0 or done == config.steps:
            n = done - steps[-1]
            steps.append(done)
            train_loss.append(float(running) / n)
            val_loss.append(mean_loss(model, val_x, val_y))
            running.zero_()
            if progress:
                progress(done, train_loss[-1], val_loss[-1])
    seconds = time.perf_counter() - start
    model.eval()
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return P08Result(steps, train_loss, val_loss, state, tok, config, count_parameters(model),
                     samples_before, samples(), seconds)


# ---------------------------------------------------------------------------
# 3. 读出形状、参数与代价
# ---------------------------------------------------------------------------


@dataclass
class DataflowRow:
    """数据流核对表的一行：步骤、输入形状（可能有几个）、输出形状、学习参数的名称与个数。"""

    step: str
    inputs: list[tuple[int, ...]]
    output: tuple[int, ...]
    params: str
    n_params: int
    n_outputs: int = 1  # 同样形状的输出有几个（Q、K、V 是 3 个）


def _param_count(module: nn.Module, seen: set[int]) -> int:
    """module 的参数个数，跳过 ``seen`` 里已经数过的参数对象（权重共享只算一次）。"""
    n = 0
    for p in module.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            n += p.numel()
    return n


@dataclass
class Dataflow:
    """:func:`dataflow` 的结果：核对表的各行，以及两个表里没有单列的中间形状。"""

    rows: list[DataflowRow]
    scores_shape: tuple[int, ...]  # 注意力分数 / 权重 (B, h, T, T)
    ffn_hidden_shape: tuple[int, ...]  # 前馈网络的中间层 (B, T, 4d)


def dataflow(model: TransformerLM, idx: torch.Tensor, target: torch.Tensor) -> Dataflow:
    """跑一次 ``model`` 的前向计算和交叉熵，逐步读出输入形状、输出形状与参数个数。

    形状全部来自运行中的张量：模块的输入输出由前向钩子记下，模块内部的运算（拆头、注意力、残差相加）
    由 :func:`trace_ops` 记下。只细看第 1 个块（其余块与它完全相同），“其余各块”一行汇总它们的参数。
    参数按对象身份去重：权重共享时输出层一行是 0，所有行之和等于
    :func:`~transformer_book.transformer.count_parameters`。

    Parameters
    ----------
    model : TransformerLM
        因果、Pre-LN 的语言模型（可学习的位置表或正弦位置编码）。
    idx, target : LongTensor (B, T)
        输入词元与错开一位的目标。
    """
    if model.blocks[0].norm != "pre" or model.pos not in ("learned", "sinusoidal"):
        raise ValueError("dataflow 按 Pre-LN、位置向量加在输入上的模型写成")
    block = model.blocks[0]
    io: dict[str, tuple[tuple[tuple[int, ...], ...], tuple[int, ...]]] = {}
    watched = {"tok_emb": model.tok_emb, "ln1": block.ln1, "in_proj": block.attn.in_proj,
               "out_proj": block.attn.out_proj, "ln2": block.ln2, "ffn": block.ffn, "fc1": block.ffn.fc1,
               "ln_f": model.ln_f, "head": model.head}
    handles = [m.register_forward_hook(lambda mod, args, out, name=name: io.__setitem__(name, (shapes_of(args), shapes_of(out)[0])))
               for name, m in watched.items()]

    def run():
        logits = model(idx)  # (B, T, V)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1))  # 标量

    try:
        with torch.no_grad():
            loss, ops = trace_ops(run, ["add", "transpose", "softmax", "matmul", "cross_entropy", "reshape"],
                                  regions={"block": block, "later": nn.ModuleList(model.blocks[1:])})
    finally:
        for h in handles:
            h.remove()
    first = lambda pred: next(o for o in ops if pred(o))  # noqa: E731
    pos_add = first(lambda o: o.name == "add" and o.region == "")  # 词嵌入 + 位置向量
    heads = first(lambda o: o.name == "transpose" and o.region == "block")  # 拆头后的 Q：(B, h, T, d_h)
    n_split = sum(o.name == "transpose" and o.region == "block" and o.shapes == heads.shapes for o in ops)  # Q、K、V
    weights = first(lambda o: o.name == "softmax" and o.region == "block")  # (B, h, T, T)
    mixed = [o for o in ops if o.name == "matmul" and o.region == "block"][1]  # 权重 × V：(B, h, T, d_h)
    adds = [o for o in ops if o.name == "add" and o.region == "block"]  # 两次残差相加
    ce = first(lambda o: o.name == "cross_entropy")
    seen: set[int] = set()
    n = lambda m: _param_count(m, seen)  # noqa: E731 - 按顺序数，共享的参数只在第一次出现时计入
    tied = model.head.weight is model.tok_emb.weight
    rows = [
        DataflowRow("词元查表", list(io["tok_emb"][0]), io["tok_emb"][1], "嵌入矩阵", n(model.tok_emb)),
        DataflowRow("加入位置", list(pos_add.inputs), pos_add.shapes[0],
                    "位置表" if model.pos == "learned" else "无（正弦表是固定的）",
                    n(model.pos_emb) if model.pos == "learned" else 0),
        DataflowRow("层归一化（注意力之前）", list(io["ln1"][0]), io["ln1"][1], "缩放与偏置", n(block.ln1)),
        DataflowRow("Q/K/V 投影，拆成多头", list(io["in_proj"][0]), heads.shapes[0],
                    "$W^Q, W^K, W^V$ 与偏置", n(block.attn.in_proj), n_outputs=n_split),
        DataflowRow("因果注意力", [heads.shapes[0]] * 3, mixed.shapes[0], "无", 0),
        DataflowRow("合并各头，输出投影", [mixed.shapes[0]], io["out_proj"][1], "$W^O$ 与偏置",
                    n(block.attn.out_proj)),
        DataflowRow("残差相加", list(adds[0].inputs), adds[0].shapes[0], "无", 0),
        DataflowRow("层归一化（前馈之前）", list(io["ln2"][0]), io["ln2"][1], "缩放与偏置", n(block.ln2)),
        DataflowRow("前馈网络", list(io["ffn"][0]), io["ffn"][1], "两层权重与偏置", n(block.ffn)),
        DataflowRow("残差相加", list(adds[1].inputs), adds[1].shapes[0], "无", 0),
    ]
    if len(model.blocks) > 1:
        rows.append(DataflowRow(f"其余 {len(model.blocks) - 1} 个块", [adds[1].shapes[0]], adds[-1].shapes[0],
                                "同上", sum(n(b) for b in model.blocks[1:])))
    rows += [
        DataflowRow("最后的层归一化", list(io["ln_f"][0]), io["ln_f"][1], "缩放与偏置", n(model.ln_f)),
        DataflowRow("输出到词表", list(io["head"][0]), io["head"][1],
                    "输出矩阵（与嵌入矩阵共享）" if tied else "输出矩阵", n(model.head)),
        DataflowRow("交叉熵", [io["head"][1], tuple(target.shape)], ce.shapes[0], "无", 0),
    ]
    assert sum(r.n_params for r in rows) == count_parameters(model)
    return Dataflow(rows, weights.shapes[0], io["fc1"][1])


def score_matrix_entries(T: int, *, batch: int = 1, heads: int = 1, layers: int = 1) -> int:
    """标准注意力的分数矩阵有多少个元素：每个样本、每层、每个头一张 T × T 的表。"""
    if T < 0:
        raise ValueError(f"序列长度不能为负，收到 {T}")
    return batch * layers * heads * T * T


def kv_cache_entries(T: int, *, d_model: int, layers: int, batch: int = 1) -> int:
    """KV 缓存要存的元素个数：每层、每个位置各存一个 d 维的键和一个 d 维的值（所有头合起来）。"""
    return 2 * batch * layers * T * d_model


# ---------------------------------------------------------------------------
# 4. 解码与注意力的观察工具
# ---------------------------------------------------------------------------


def decoding_distribution(logits: torch.Tensor, *, temperature: float = 1.0, top_k: int | None = None,
                          top_p: float | None = None) -> torch.Tensor:
    """一步解码时真正用来抽样的分布（与 :func:`~transformer_book.transformer.generate` 的规则相同）。

    温度 0 表示贪心：概率全部给打分最高的词元。否则先除以温度；top-k 只留打分最高的 k 个；
    top-p（核采样）按概率从高到低累加，留下“累计概率刚好达到 p”的最小集合（第一个词元总会留下）。

    Parameters
    ----------
    logits : Tensor (V,)
        最后一个位置的原始打分。

    Returns
    -------
    Tensor (V,)
        概率，被排除的词元为 0。
    """
    if temperature == 0:
        return F.one_hot(logits.argmax(), logits.numel()).float()
    scaled = logits / temperature
    if top_k is not None:
        kth = torch.topk(scaled, min(top_k, scaled.numel())).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    if top_p is not None:
        probs = torch.softmax(scaled, dim=-1)
        sorted_probs, order = torch.sort(probs, descending=True)
        outside = sorted_probs.cumsum(-1) - sorted_probs >= top_p  # 排在前面的已经凑够 p
        outside[0] = False
        scaled = scaled.clone()
        scaled[order[outside]] = float("-inf")
    return torch.softmax(scaled, dim=-1)


PUNCTUATION = "，。、；：？！「」…—"


@torch.no_grad()
def attention_statistics(model: TransformerLM, x: torch.Tensor, marked: torch.Tensor | None = None) -> list[dict[str, float]]:
    """每层每个头的注意力习惯，在一批窗口 x (N, T) 的所有查询位置上平均。

    Parameters
    ----------
    model : TransformerLM
    x : LongTensor (N, T)
    marked : BoolTensor (N, T), optional
        “特别关心”的位置（例如标点）。给出时另外统计分给这些位置的权重之和。
        平均分配时的对照值见 :func:`uniform_attention_baseline`。

    Returns
    -------
    list of dict，每个头一项：``layer``、``head``（从 1 数起）、``self``（分给自己的权重）、
    ``previous``（分给前一个位置的权重，不含第 1 个位置）、``entropy``（权重分布的熵，奈特），
    以及给出 ``marked`` 时的 ``marked``（分给这些位置的权重之和）。
    """
    model.eval()
    _, weights = model(x, return_attention=True)  # 每层 (N, h, T, T)
    out = []
    for layer, w in enumerate(weights):
        diag = w.diagonal(dim1=-2, dim2=-1)  # (N, h, T)
        prev = w.diagonal(offset=-1, dim1=-2, dim2=-1)  # (N, h, T-1)
        entropy = -(w * w.clamp_min(1e-12).log()).sum(-1)  # (N, h, T)
        for head in range(w.size(1)):
            item = {"layer": layer + 1, "head": head + 1, "self": float(diag[:, head].mean()),
                    "previous": float(prev[:, head].mean()), "entropy": float(entropy[:, head].mean())}
            if marked is not None:
                m = marked[:, None, :].float()  # (N, 1, T)：按“被查看的位置”标记
                item["marked"] = float((w[:, head] * m).sum(-1).mean())
            out.append(item)
    return out


def attention_stripes(weights: torch.Tensor, threshold: float = 0.25) -> list[tuple[int, int]]:
    """热力图里的“竖条”：每一列有多少个*后面的*位置分给它至少 ``threshold`` 的权重。

    weights: (T, T)，一个头在一句话上的注意力权重。返回 [(列, 个数), …]，按个数从多到少排（个数相同按列序）；
    最后一列后面没有位置，不计入。
    """
    T = weights.size(-1)
    counts = [int((weights[c + 1:, c] >= threshold).sum()) for c in range(T - 1)]
    return sorted(enumerate(counts), key=lambda kv: (-kv[1], kv[0]))


def uniform_attention_baseline(
x: torch.Tensor, marked: torch.Tensor | None = None) -> dict[str, float]:
    """对照：每个位置把权重平均分给所有看得见的位置（因果掩码下位置 t 看得见 t+1 个位置）时，
    :func:`attention_statistics` 的各项统计会是多少。"""
    T = x.size(1)
    w = torch.ones(T, T).tril()
    w = (w / w.sum(-1, keepdim=True)).expand(x.size(0), 1, T, T)  # (N, 1, T, T)
    out = {"self": float(w.diagonal(dim1=-2, dim2=-1).mean()),
           "previous": float(w.diagonal(offset=-1, dim1=-2, dim2=-1).mean()),
           "entropy": float(-(w * w.clamp_min(1e-12).log()).sum(-1).mean())}
    if marked is not None:
        out["marked"] = float((w[:, 0] * marked[:, None, :].float()).sum(-1).mean())
    return out


def time_generation(model: TransformerLM, prompt: torch.Tensor, max_new_tokens: int, *, use_cache: bool,
                    repeats: int = 3) -> tuple[torch.Tensor, float]:
    """贪心生成 ``max_new_tokens`` 个词元，返回生成结果与 ``repeats`` 次中最快一次的 CPU 秒数。

    计的是本进程用掉的 CPU 时间（``time.process_time``），不是墙钟时间：机器上别的程序抢走的时间不算在内，
    所以机器忙的时候，两条路径的比值也不会因此走样。
    """
    best, out = math.inf, None
    for _ in range(repeats):
        t0 = time.process_time()
        out = generate(model, prompt, max_new_tokens, temperature=0, use_cache=use_cache)
        best = min(best, time.process_time() - t0)
    return out, best



@torch.no_grad()
def loss_without_head(model: TransformerLM, x: torch.Tensor, y: torch.Tensor, layer: int, head: int) -> float:
    """把第 ``layer`` 层第 ``head`` 个头（都从 1 数起）的输出置零之后的平均交叉熵。

    做法：在该层输出投影 ``out_proj`` 之前，把拼接向量里属于这个头的 d_h 维清零（前向预钩子）。
    这是一次干预（intervention）：看去掉这个头，模型的预测变差多少。
    """
    attn = model.blocks[layer - 1].attn
    lo, hi = (head - 1) * attn.d_head, head * attn.d_head

    def zero_head(_module, args):
        (y_heads,) = args  # (B, T, d)：各头输出的拼接
        y_heads = y_heads.clone()
        y_heads[..., lo:hi] = 0.0
        return (y_heads,)

    handle = attn.out_proj.register_forward_pre_hook(zero_head)
    try:
        return mean_loss(model, x, y)
    finally:
        handle.remove()
