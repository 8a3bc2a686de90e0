"""``transformer_book.transformer`` 的速度基准（打印数字，不是测试）。

1. 训练一步（前向 + 反向 + AdamW）的吞吐量（词元/秒）：我们的 ``TransformerLM`` 对照用
   ``nn.TransformerEncoderLayer`` 搭的同配置模型（d、头数、层数、GELU、Pre-LN、因果掩码、嵌入 + 共享的输出层）。
   两种注意力实现（可读的 "manual" 与融合的 "sdpa"）都测。
2. 迷你 GPT 大小的模型生成 256 个词元：有无 KV 缓存的耗时与加速比。

运行::

    PYTHONPATH=src .venv/bin/python benchmarks/bench_transformer.py [--threads 2]

比值（ours / torch、无缓存 / 有缓存）在同一次运行里交替测得；机器上还有别的负载时绝对数字会偏低，
所以开头打印了 1 分钟平均负载。
"""

import argparse
import os
import statistics
import time

import torch
import torch.nn as nn

from transformer_book.transformer import TransformerLM, count_parameters, generate

class TorchReferenceLM(nn.Module):
    """与 TransformerLM(pos="learned", norm="pre", tie_weights=True) 同配置，块用 nn.TransformerEncoderLayer。"""

    def __init__(self, *, vocab_size, d_model, n_heads, n_layers, max_len):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=4 * d_model, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, n_layers, enable_nested_tensor=False)
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight

    def forward(self, idx):
        T = idx.size(1)
        x = self.tok_emb(idx) + self.pos_emb(torch.arange(T))  # (B, T, d)
        causal = nn.Transformer.generate_square_subsequent_mask(T)  # 浮点掩码，−inf = 屏蔽
        return self.head(self.ln_f(self.encoder(x, mask=causal, is_causal=True)))  # (B, T, V)


def train_step_seconds(model, idx, targets, steps, warmup=3):
    """每个训练步（前向 + 反向 + AdamW）的耗时（秒），返回所有计时步的列表。"""
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for i in range(warmup + steps):
        start = time.perf_counter()
        logits = model(idx)
        loss = loss_fn(logits.view(-1, logits.size(-1)), targets.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
    return times


def bench_training(name, *, vocab_size, d_model, n_heads, n_layers, T, B, steps, rounds=3):
    config = dict(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers, max_len=T)
    torch.manual_seed(0)
    models = {
        "ours (manual)": TransformerLM(**config, attn_impl="manual"),
        "ours (sdpa)": TransformerLM(**config, attn_impl="sdpa"),
        "torch TransformerEncoderLayer": TorchReferenceLM(**config),
    }
    n_params = {k: count_parameters(m) for k, m in models.items()}
    assert len(set(n_params.values())) == 1, n_params  # 三个模型参数量相同，才是同配置
    g = torch.Generator().manual_seed(0)
    idx = torch.randint(0, vocab_size, (B, T), generator=g)
    targets = torch.randint(0, vocab_size, (B, T), generator=g)
    times = {k: [] for k in models}
    for _ in range(rounds):  # 轮流测，减少机器负载漂移带来的偏差
        for k, m in models.items():
            times[k] += train_step_seconds(m, idx, targets, steps)
    print(f"\n[训练吞吐] {name}: d={d_model}, h={n_heads}, N={n_layers}, V={vocab_size}, B={B}, T={T}, "
          f"参数 {n_params['ours (manual)']:,}；每个模型 {rounds}×{steps} 步，取中位数")
    torch_rate = B * T / statistics.median(times["torch TransformerEncoderLayer"])
    for k in models:
        rate = B * T / statistics.median(times[k])
        print(f"  {k:<32s} {rate:>10,.0f} 词元/秒   相对 torch: {rate / torch_rate:.2f}×")


def bench_generation(*, batch_sizes=(1, 8), new_tokens=256, repeats=3):
    config = dict(vocab_size=50, d_model=64, n_heads=4, n_layers=2, max_len=320)
    print(f"\n[生成] 迷你 GPT: {config}；提示 1 个词元，贪心生成 {new_tokens} 个，取 {repeats} 次中最快")
    for B, impl in ((B, impl) for B in batch_sizes for impl in ("manual", "sdpa")):
        torch.manual_seed(0)
        model = TransformerLM(**config, attn_impl=impl)
        prompt = torch.zeros(B, 1, dtype=torch.long)
        seconds, outputs = {}, {}
        for use_cache in (False, True):
            runs = []
            for _ in range(repeats):
                start = time.perf_counter()
                outputs[use_cache] = generate(model, prompt, new_tokens, temperature=0, use_cache=use_cache)
                runs.append(time.perf_counter() - start)
            seconds[use_cache] = min(runs)
        same = torch.equal(outputs[False], outputs[True])
        print(f"  B={B:<2d} attn_impl={impl:<7s} 无缓存 {seconds[False] * 1e3:7.1f} ms   "
              f"有缓存 {seconds[True] * 1e3:7.1f} ms   加速 {seconds[False] / seconds[True]:4.1f}×   词元相同: {same}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2, help="torch.set_num_threads 的值（默认 2）")
    torch.set_num_threads(parser.parse_args().threads)
    print(f"torch {torch.__version__}，torch.get_num_threads() = {torch.get_num_threads()}，"
          f"CPU 核数 {os.cpu_count()}，1 分钟平均负载 {os.getloadavg()[0]:.2f}")
    bench_training("小型配置", vocab_size=512, d_model=128, n_heads=4, n_layers=4, T=128, B=16, steps=10)
    bench_training("迷你 GPT", vocab_size=50, d_model=64, n_heads=4, n_layers=2, T=64, B=32, steps=20)
    bench_generation()


if __name__ == "__main__":
    main()
