"""How far each of the book's trainings is from this machine's arithmetic limit, and where the rest goes.

    PYTHONPATH=src python benchmarks/bench_flops.py                 # every training, 3 rounds
    PYTHONPATH=src python benchmarks/bench_flops.py --only s11-rope --steps 60 --rounds 5

On one thread (as every snippet runs):

1. the fp32 GEMM peak: a 1024 × 1024 ``torch.mm`` (median of the rounds), and the same at the trainings' own
   shapes (about 800 token positions × d = 64, the widths of the projections and of the feed-forward layer);
2. for each training, one real step as the book runs it (its model, batch, optimiser, gradient clipping):
   FLOPs of forward + backward counted by ``torch.utils.flop_counter`` (matrix products and attention; the
   optimiser's elementwise work is not counted, nor the LSTM's fused cell — for the RNN it is a lower bound), the seconds per step (median of the rounds, each the mean of
   ``--steps`` steps after a warm-up), achieved GFLOP/s and its ratio to the peak;
3. a ``torch.profiler`` breakdown of those steps: matrix products, the rest of the operators, the optimiser,
   and what is left of the wall time (Python, autograd bookkeeping, dispatch).

Prints figures; asserts nothing. Machine-dependent by nature: compare runs made on one machine.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from typing import Callable

import torch

MATMUL = ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear")


@dataclass
class Training:
    name: str
    what: str
    setup: Callable[[], tuple[torch.nn.Module, Callable[[int], None], Callable[[int], torch.Tensor]]]


def gemm_gflops(m: int, k: int, n: int, rounds: int) -> float:
    a, b = torch.randn(m, k), torch.randn(k, n)
    reps = max(3, int(2e9 / (2 * m * k * n)))
    for _ in range(3):
        a @ b
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(reps):
            a @ b
        times.append((time.perf_counter() - start) / reps)
    return 2 * m * k * n / statistics.median(times) / 1e9


def training_step(model: torch.nn.Module, optim, loss: Callable[[int], torch.Tensor]) -> tuple:
    """(model, step(i), loss(i)) of a book training: AdamW with the book's settings, gradient clipping."""
    from transformer_book.training import make_optimizer

    optimizer = make_optimizer(model, optim)

    def step(i: int) -> None:
        value = loss(i)
        optimizer.zero_grad(set_to_none=True)
        value.backward()
        if optim.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), optim.grad_clip)
        optimizer.step()

    return model, step, loss


def toy_batches(pad_id: int, sentences, batch_size: int) -> list:
    from transformer_book.training import TokenData

    data = sentences if isinstance(sentences, TokenData) else TokenData(sentences, pad_id)
    order = torch.Generator().manual_seed(0)
    return [data.batch(index) for index in list(data.batches(batch_size, order))[:200]]


def trainings() -> list[Training]:
    def s11(pos: str, kind: str = "gpt") -> Callable:
        def setup():
            from transformer_book.lecture07.experiments import TRAIN_CONFIG, ModelSpec, load_toy_data
            from transformer_book.training import lm_loss

            data = load_toy_data()
            batches = toy_batches(data.vocab.pad_id, data.train, TRAIN_CONFIG.batch_size)
            torch.manual_seed(0)
            model = ModelSpec(kind, pos).build(len(data.vocab))
            return training_step(model, TRAIN_CONFIG.optim,
                                 lambda i: lm_loss(model, *batches[i % len(batches)]))
        return setup

    def p08():
        import torch.nn.functional as F

        from transformer_book.chapter20 import p08 as chapter

        config = chapter.P08Config()
        data = chapter.prepare_data(val_fraction=config.val_fraction)
        torch.manual_seed(0)
        model = chapter.build_model(config, data.tokenizer.vocab_size)
        generator = torch.Generator().manual_seed(0)

        def loss(i: int) -> torch.Tensor:
            x, y = chapter.random_batch(data.train_ids, config.batch_size, config.context, generator)  # (B, T)
            logits = model(x)  # (B, T, V)
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))

        return training_step(model, config.optim(), loss)

    out = [Training(f"s11-{pos}", f"§11.3 迷你 GPT（{pos}），批量 64 句", s11(pos)) for pos in ("learned", "rope")]
    out.append(Training("s11-rnn", "§11.1 LSTM，批量 64 句", s11("learned", "rnn")))
    out.append(Training("p08", "P08 字符级模型，批量 16 × 64 字", p08))
    return out


def measure(training: Training, steps: int, rounds: int, peak: float) -> None:
    from torch.profiler import ProfilerActivity, profile
    from torch.utils.flop_counter import FlopCounterMode

    model, step, loss = training.setup()
    for i in range(10):  # warm-up: allocator, optimiser state
        step(i)
    with FlopCounterMode(display=False) as counter:
        loss(10).backward()
    model.zero_grad(set_to_none=True)
    flops = counter.get_total_flops()
    per_step = []
    for r in range(rounds):
        start = time.perf_counter()
        for i in range(steps):
            step(20 + r * steps + i)
        per_step.append((time.perf_counter() - start) / steps)
    seconds = statistics.median(per_step)
    achieved = flops / seconds / 1e9
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        for i in range(steps):
            step(1000 + i)
        wall = time.perf_counter() - start
    events = prof.key_averages()
    matmul = sum(e.self_cpu_time_total for e in events if e.key in MATMUL) / 1e6
    optimiser = sum(e.cpu_time_total for e in events if e.key.startswith("Optimizer.step")) / 1e6
    ops = sum(e.self_cpu_time_total for e in events if e.key.startswith("aten::")) / 1e6
    rest_ops = ops - matmul
    print(f"\n{training.name}: {training.what}")
    print(f"  FLOPs per step (forward + backward): {flops / 1e6:,.0f} M")
    print(f"  seconds per step: {seconds * 1e3:.2f} ms (median of {rounds} rounds × {steps} steps; "
          f"range {min(per_step) * 1e3:.2f}–{max(per_step) * 1e3:.2f})")
    print(f"  achieved: {achieved:.1f} GFLOP/s = {achieved / peak:.0%} of the 1024² GEMM peak")
    print(f"  profile of {steps} steps ({wall:.2f} s under the profiler): matrix products {matmul / wall:.0%}, "
          f"other operators {rest_ops / wall:.0%} (the optimiser's step {optimiser / wall:.0%} of the wall, "
          f"partly counted in both), Python/autograd/dispatch {max(0.0, 1 - ops / wall):.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*")
    args = parser.parse_args()
    torch.set_num_threads(1)
    peak = gemm_gflops(1024, 1024, 1024, args.rounds)
    print(f"fp32 GEMM peak, one thread (1024 × 1024 × 1024): {peak:.1f} GFLOP/s")
    for m, k, n, what in ((800, 64, 64, "a projection"), (800, 64, 256, "the feed-forward layer, in"),
                          (800, 256, 64, "the feed-forward layer, out")):
        print(f"  at {m} × {k} × {n} ({what}): {gemm_gflops(m, k, n, args.rounds):.1f} GFLOP/s")
    for training in trainings():
        if args.only and training.name not in args.only:
            continue
        measure(training, args.steps, args.rounds, peak)


if __name__ == "__main__":
    main()
