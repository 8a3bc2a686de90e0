"""Routes to train the §11.3 experiments for less, measured side by side on this machine (one thread).

    PYTHONPATH=src python benchmarks/bench_routes.py                # 3 rounds of 150 steps per route
    PYTHONPATH=src python benchmarks/bench_routes.py --rounds 5 --steps 200 --no-compile

One §11.3 training step (the mini GPT, a length-bucketed batch of 64 sentences, AdamW, gradient clipping),
computed four ways, each on the same batches:

- ``book``:    as the book trains it — one seed, the reference implementation's readable attention path;
- ``sdpa``:    one seed, attention through ``F.scaled_dot_product_attention`` (the fused kernel);
- ``vmap×4``:  four seeds as one computation — parameters stacked with ``torch.func.stack_module_state``, the
  loss ``vmap``-ed over them, per-seed gradient clipping, one fused AdamW; each seed keeps its own data order,
  so each step pads the four seeds' batches to the longest; reported per seed;
- ``vmap×4 shared``: as ``vmap×4``, but every seed sees seed 0's batches — the shared data order the issue allows
  if said; nothing is padded, the seeds differ only in their initialisation;
- ``compile``: one seed, the loss wrapped in ``torch.compile(dynamic=True)`` (compile time reported apart);
- ``book, 1 len`` and ``compile, 1 len``: one seed on the batches of the most common length only, eager and
  compiled for that one shape (``dynamic=False``) — the best case of compiling; the real training meets
  every sentence length, and each new length compiles again.

Prints the median milliseconds per step (per seed for vmap) and the ratio to ``book``; asserts nothing.
Machine-dependent by nature: compare routes within one run.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from torch.func import functional_call, stack_module_state, vmap

from transformer_book.lecture07.experiments import TRAIN_CONFIG, ModelSpec, load_toy_data
from transformer_book.training import lm_loss, make_optimizer

SEEDS = 4


def build(data, pos: str, seed: int, impl: str) -> torch.nn.Module:
    torch.manual_seed(seed)
    model = ModelSpec("gpt", pos, seed=seed).build(len(data.vocab))
    for module in model.modules():
        if hasattr(module, "attn_impl"):
            module.attn_impl = impl
    return model


def one_seed(data, pos: str, impl: str, compiled: bool, one_length: bool = False):
    model = build(data, pos, 0, impl)
    optimizer = make_optimizer(model, TRAIN_CONFIG.optim)
    batches = data.train.batches(64, torch.Generator().manual_seed(0))
    if one_length:  # only batches of the most common padded length: what a graph compiled for one shape sees
        lengths = [data.train.batch(b)[0].shape[1] for b in batches]
        common = max(set(lengths), key=lengths.count)
        batches = [b for b, n in zip(batches, lengths) if n == common]
    loss_of = (lambda x, mask: lm_loss(model, x, mask))
    if compiled:
        loss_of = torch.compile(loss_of, dynamic=not one_length)

    def step(i: int) -> None:
        x, mask = data.train.batch(batches[i % len(batches)])
        loss = loss_of(x, mask)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    return step


def four_seeds(data, pos: str, shared_order: bool = False):
    models = [build(data, pos, s, "manual") for s in range(SEEDS)]
    params, buffers = stack_module_state(models)  # each (S, …)
    base = copy.deepcopy(models[0])  # the structure; its tensors are replaced by the stacked ones
    flat = list(params.values())
    optimizer = torch.optim.AdamW([{"params": [p for p in flat if p.dim() >= 3], "weight_decay": 0.01},
                                   {"params": [p for p in flat if p.dim() < 3], "weight_decay": 0.0}],
                                  lr=3e-3, betas=(0.9, 0.99), fused=True)
    # shared_order: every seed sees seed 0's batches (then nothing is padded); seeds differ only in initialisation
    orders = [data.train.batches(64, torch.Generator().manual_seed(0 if shared_order else s)) for s in range(SEEDS)]
    pad = data.vocab.pad_id

    def stacked(i: int):
        index = [order[i % len(order)] for order in orders]
        lengths = [data.train.lengths[j] for j in index]
        b, t = max(len(j) for j in index), max(int(n.max()) for n in lengths)
        x = torch.full((SEEDS, b, t), pad, dtype=torch.long)  # (S, B, T)
        mask = torch.zeros((SEEDS, b, t), dtype=torch.bool)  # (S, B, T)
        mask[:, :, 0] = True  # a padding row: one token, nothing predicted
        for s, j in enumerate(index):
            x[s, : len(j), : int(lengths[s].max())] = data.train.tokens[j, : int(lengths[s].max())]
            mask[s, : len(j)] = torch.arange(t) < lengths[s][:, None]
        return x, mask

    def loss_of(p, b, x, mask):
        return lm_loss(lambda inp, pad_mask=None: functional_call(base, (p, b), (inp,), {"pad_mask": pad_mask}), x, mask)

    losses_of = vmap(loss_of)

    def step(i: int) -> None:
        x, mask = stacked(i)
        losses = losses_of(params, buffers, x, mask)  # (S,)
        optimizer.zero_grad(set_to_none=True)
        losses.sum().backward()
        grads = [p.grad for p in flat]
        norms = torch.stack([g.flatten(1).norm(dim=1) for g in grads]).norm(dim=0)  # (S,): each seed's own norm
        scale = (1.0 / (norms + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.view(-1, *[1] * (g.dim() - 1)))
        optimizer.step()

    return step


def timed(step, steps: int, warm: int = 5) -> tuple[float, float]:
    """(seconds of the first ``warm`` steps — compilation happens there, milliseconds per step after them)."""
    start = time.perf_counter()
    for i in range(warm):
        step(i)
    warm_seconds = time.perf_counter() - start
    start = time.perf_counter()
    for i in range(warm, warm + steps):
        step(i)
    return warm_seconds, (time.perf_counter() - start) / steps * 1e3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--pos", default="rope")
    parser.add_argument("--no-compile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = load_toy_data()
    routes = {"book": lambda: one_seed(data, args.pos, "manual", False),
              "sdpa": lambda: one_seed(data, args.pos, "sdpa", False),
              f"vmap×{SEEDS}": lambda: four_seeds(data, args.pos),
              f"vmap×{SEEDS} shared": lambda: four_seeds(data, args.pos, shared_order=True),
              "book, 1 len": lambda: one_seed(data, args.pos, "manual", False, one_length=True)}
    if not args.no_compile:
        routes["compile"] = lambda: one_seed(data, args.pos, "manual", True)
        routes["compile, 1 len"] = lambda: one_seed(data, args.pos, "manual", True, one_length=True)
    times: dict[str, list[float]] = {name: [] for name in routes}
    compile_seconds: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for name, make in routes.items():
            warm_seconds, per_step = timed(make(), args.steps)
            if name.startswith("compile"):
                compile_seconds.setdefault(name, []).append(warm_seconds)
            times[name].append(per_step / (SEEDS if name.startswith("vmap") else 1))
    base = statistics.median(times["book"])
    print(f"§11.3 mini GPT ({args.pos}), one thread, {args.rounds} rounds × {args.steps} steps; ms per step and seed")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"  {name:15s} {med:7.2f} ms  (range {min(values):.2f}–{max(values):.2f})  {base / med:5.2f}× the book's speed")
    for name, seconds in compile_seconds.items():
        print(f"  {name}: the first 5 steps took {', '.join(f'{x:.1f}' for x in seconds)} s in the rounds (compilation; "
              "later rounds of one process may reuse graphs)")
    order = data.train.batches(64, torch.Generator().manual_seed(0))
    lengths = {data.train.batch(b)[0].shape[1] for b in order}
    print(f"  one epoch's batches come in {len(lengths)} padded lengths ({min(lengths)}–{max(lengths)}): a graph "
          "compiled per shape compiles that many times for each model")


if __name__ == "__main__":
    main()
