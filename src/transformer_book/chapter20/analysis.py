"""第 20 章对 P08 模型的观察：数据流核对表、各头的注意力习惯与热力图里的竖条、去掉一个头的干预、生成计时。

- :func:`dataflow` 用前向钩子（forward hook）与 :func:`transformer_book.shape_trace.trace_ops`
  逐步记下一个 ``TransformerLM`` 的输入形状、输出形状和参数个数；
- :func:`attention_statistics` 与 :func:`uniform_attention_baseline`：各头的注意力习惯及其对照；
  :func:`attention_stripes`：热力图里“竖条”落在哪些列；
- :func:`loss_without_head`：把一个头的输出置零，看验证损失变化多少；
- :func:`time_generation`：用与不用 KV 缓存的生成计时（CPU 时间）。

形状记号：B 批量大小，T 序列长度，d 模型宽度，h 头数，d_h 每头宽度，V 词表大小。
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from transformer_book.chapter20.p08 import mean_loss
from transformer_book.shape_trace import shapes_of, trace_ops
from transformer_book.transformer import TransformerLM, count_parameters, generate


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
    _, weights = model.forward_with_attention(x)  # 每层 (N, h, T, T)
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

    只数平均分配时每格也不到 ``threshold`` 的那些行（位置 t 看得见 t + 1 个位置，平均每格 1/(t+1)）：开头几行
    只看得见几个位置，就算平均分配也超过门槛，算不上竖条。
    weights: (T, T)，一个头在一句话上的注意力权重。返回 [(列, 个数), …]，按个数从多到少排（个数相同按列序）；
    最后一列后面没有位置，不计入。
    """
    T = weights.size(-1)
    first = math.floor(1 / threshold)  # 从这一行起，1/(t+1) < threshold
    counts = [int((weights[max(c + 1, first):, c] >= threshold).sum()) for c in range(T - 1)]
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
    所以机器忙的时候，两条路径的比值也不会因此走样。计时在单线程下进行（之后恢复原来的线程数）：
    多个线程时，等待别的线程的那些时间也算进 CPU 时间，两条路径的比值会走样。
    例外：用 ``BOOK_THREADS`` 扰动的构建（校准）把线程数钉死，这里的单线程设置在那时不起作用。
    """
    best, out = math.inf, None
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for _ in range(repeats):
            t0 = time.process_time()
            out = generate(model, prompt, max_new_tokens, temperature=0, use_cache=use_cache)
            best = min(best, time.process_time() - t0)
    finally:
        torch.set_num_threads(threads)
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
