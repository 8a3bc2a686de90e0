"""第 8.3 节的小实验：编码器—解码器学会把一串数字倒过来写，交叉注意力看得见它怎样对齐。

源句是 4–8 个随机数字，目标句是同样的数字倒过来。编码器读完整个源句；解码器每写一个数字，都用交叉注意力
回头查一次源句。要写对第 t 个输出（从 0 数起），它必须找到源句里倒数第 t + 1 个位置——所以训练好的模型，
交叉注意力的权重应当集中在一条反对角线上。

词表：``<pad>`` = 0，``<s>`` = 1（解码器的起始符），``</s>`` = 2（结束符），数字 0–9 是 3–12。
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from transformer_book.training import OptimConfig, fit
from transformer_book.transformer import EncoderDecoder

PAD, BOS, EOS = 0, 1, 2
DIGIT0 = 3  # 数字 d 的编号是 3 + d
VOCAB = 13


@dataclass(frozen=True)
class ReversalConfig:
    """任务与模型的设置。默认值就是书中的设置。"""

    min_len: int = 4
    max_len: int = 8
    d_model: int = 32
    n_heads: int = 2
    n_layers: int = 2
    steps: int = 500
    batch_size: int = 64
    optim: OptimConfig = OptimConfig(lr=3e-3, warmup_steps=50, weight_decay=0.0, grad_clip=1.0)
    seed: int = 0
    test_size: int = 500
    test_seed: int = 12345  # 测试题用另一个种子抽：与训练时见过的批次无关


def sample_digits(n: int, config: ReversalConfig, generator: torch.Generator) -> list[list[int]]:
    """n 串随机数字，长度在 [min_len, max_len] 之间均匀抽取。"""
    lengths = torch.randint(config.min_len, config.max_len + 1, (n,), generator=generator).tolist()
    return [torch.randint(0, 10, (t,), generator=generator).tolist() for t in lengths]


def encode_batch(seqs: list[list[int]], config: ReversalConfig):
    """把一批数字串变成张量。

    Returns
    -------
    src : LongTensor (B, S)，S = max_len
        源句（数字的编号），右侧用 ``<pad>`` 补齐。
    src_mask : BoolTensor (B, S)
        True = 真实词元。
    tgt_in : LongTensor (B, S + 1)
        解码器的输入：``<s>`` 加上倒过来的数字（右移一位）。
    tgt_out : LongTensor (B, S + 1)
        每个位置应当写出的词元：倒过来的数字，再加 ``</s>``；补齐处为 ``<pad>``（不计入损失）。
    """
    S = config.max_len
    src = torch.full((len(seqs), S), PAD)  # (B, S)
    tgt_in = torch.full((len(seqs), S + 1), PAD)  # (B, S + 1)
    tgt_out = torch.full((len(seqs), S + 1), PAD)  # (B, S + 1)
    for b, digits in enumerate(seqs):
        ids = [DIGIT0 + d for d in digits]
        rev = ids[::-1]
        src[b, : len(ids)] = torch.tensor(ids)
        tgt_in[b, : len(ids) + 1] = torch.tensor([BOS] + rev)
        tgt_out[b, : len(ids) + 1] = torch.tensor(rev + [EOS])
    return src, src != PAD, tgt_in, tgt_out


def new_model(config: ReversalConfig) -> EncoderDecoder:
    torch.manual_seed(config.seed)
    return EncoderDecoder(src_vocab=VOCAB, tgt_vocab=VOCAB, d_model=config.d_model, n_heads=config.n_heads,
                          n_layers=config.n_layers, max_len=config.max_len + 1)


def train(config: ReversalConfig = ReversalConfig()) -> tuple[EncoderDecoder, list[float]]:
    """训练一个编码器—解码器，返回模型（eval 模式）和每一步的训练损失。"""
    model = new_model(config)
    generator = torch.Generator().manual_seed(config.seed)
    losses: list[float] = []

    def step_loss(step: int) -> torch.Tensor:
        src, src_mask, tgt_in, tgt_out = encode_batch(sample_digits(config.batch_size, config, generator), config)
        logits = model(src, tgt_in, src_pad_mask=src_mask, tgt_pad_mask=tgt_in != PAD)  # (B, S + 1, V)
        return F.cross_entropy(logits.reshape(-1, VOCAB), tgt_out.reshape(-1), ignore_index=PAD)

    fit(model, step_loss, config.steps, config.optim, after_step=lambda step, loss: losses.append(float(loss)))
    model.eval()
    return model, losses


@torch.no_grad()
def greedy_reverse(model: EncoderDecoder, seqs: list[list[int]], config: ReversalConfig) -> list[list[int]]:
    """让模型一个数字一个数字地写出倒序（贪心选字，写出 ``</s>`` 或写满为止）。"""
    src, src_mask, _, _ = encode_batch(seqs, config)
    out = torch.full((len(seqs), 1), BOS)  # (B, 1)
    for _ in range(config.max_len + 1):
        logits = model(src, out, src_pad_mask=src_mask)  # (B, t, V)
        out = torch.cat([out, logits[:, -1].argmax(-1, keepdim=True)], dim=1)  # (B, t + 1)
    written = []
    for row in out[:, 1:].tolist():
        row = row[: row.index(EOS)] if EOS in row else row
        written.append([t - DIGIT0 for t in row])
    return written


def test_set(config: ReversalConfig) -> list[list[int]]:
    return sample_digits(config.test_size, config, torch.Generator().manual_seed(config.test_seed))


def sequence_accuracy(model: EncoderDecoder, seqs: list[list[int]], config: ReversalConfig) -> float:
    """整串完全写对（每个数字都对、长度也对）的比例。"""
    written = greedy_reverse(model, seqs, config)
    return sum(w == s[::-1] for w, s in zip(written, seqs)) / len(seqs)


@torch.no_grad()
def cross_attention(model: EncoderDecoder, digits: list[int], config: ReversalConfig) -> torch.Tensor:
    """一串数字在 teacher forcing 下交叉注意力的权重，形状 (L, h, T, S)：L 层、每层 h 个头，
    T = 输出位置（含最后的 ``</s>``），S = 源句的位置（不含补齐）。"""
    src, src_mask, tgt_in, _ = encode_batch([digits], config)
    n = len(digits)
    _, weights = model.forward_with_attention(src, tgt_in, src_pad_mask=src_mask, tgt_pad_mask=tgt_in != PAD)
    return torch.stack([w[0, :, : n + 1, :n] for w in weights["cross"]])  # (L, h, n + 1, n)


@torch.no_grad()
def mirrored_share(model: EncoderDecoder, seqs: list[list[int]], config: ReversalConfig) -> torch.Tensor:
    """每层每个头的交叉注意力里，有多大比例的输出数字把最大的权重给了源句里的镜像位置
    （第 t 个输出 ↔ 源句第 n − 1 − t 个位置，都从 0 数起）。不计结束符。形状 (L, h)。"""
    src, src_mask, tgt_in, _ = encode_batch(seqs, config)
    _, weights = model.forward_with_attention(src, tgt_in, src_pad_mask=src_mask, tgt_pad_mask=tgt_in != PAD)
    top = torch.stack(weights["cross"]).argmax(-1)  # (L, B, h, T)：每个输出位置权重最大的源位置
    lengths = torch.tensor([len(d) for d in seqs])  # (B,)
    t = torch.arange(top.size(-1))  # (T,)
    mirror = lengths[:, None] - 1 - t[None, :]  # (B, T)：镜像位置
    counted = t[None, :] < lengths[:, None]  # (B, T)：数字的位置（不含结束符与补齐）
    hits = (top == mirror[None, :, None, :]) & counted[None, :, None, :]  # (L, B, h, T)
    return hits.sum(dim=(1, 3)).float() / counted.sum()  # (L, h)
