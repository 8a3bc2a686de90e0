"""第 20 章：KV 缓存——结果一字不差，速度快了多少？

1. 训练好的 P08 模型（上下文 64）从同一个提示续写到 64 个字，用与不用 KV 缓存各做一次，
   贪心与抽样（同一个种子）两种方式下，生成的词元必须完全相同。
2. 计时：同样的续写，不用缓存时每一步都把整个前缀重算一遍，用缓存时每一步只算最新的一个位置。
   上下文越长，重算的浪费越大。为了看到更长的上下文，另搭两个与 P08 同样宽度和层数、
   但上下文窗口为 128 和 256 的模型（未训练：计时与权重无关），各续写到窗口填满。
   每种情形取 2 次中较快的一次，计的是 CPU 时间。时间与加速比是在构建本书的机器上测得的（measured），
   换一台机器会不同；正文只依赖下面几条说法，构建核对的也是它们。
"""

import torch

from transformer_book.chapter20 import analysis, p08
from transformer_book.book import Claim, Table, Value, artifact, at_least, greater, true
from transformer_book.cost import kv_cache_entries
from transformer_book.transformer import generate

REQUIRES = ["chapter20/p08_train"]
BUDGET_SECONDS = 20
PROMPT = "一月二日，"
MEASURED = {"不用缓存（CPU 秒）": "measured", "用缓存（CPU 秒）": "measured", "加速比": "measured"}


def compute():
    model, config, tok = p08.unpack_model(artifact("chapter20/p08_train", "model"))  # 训练好的 P08 模型（eval 模式）
    prompt = torch.tensor([tok.encode(PROMPT)])  # (1, T0)
    n_new = config.context - prompt.size(1)  # 正好填满上下文窗口

    same, identical = {}, True
    for name, kwargs in [("贪心", dict(temperature=0)), ("抽样（温度 1）", dict(temperature=1.0))]:
        outs = [generate(model, prompt, n_new, use_cache=c, generator=torch.Generator().manual_seed(0), **kwargs)
                for c in (False, True)]
        identical = identical and torch.equal(outs[0], outs[1])
        same[name] = tok.decode(outs[1][0, prompt.size(1):].tolist())

    rows, speedups = [], {}
    for context in (config.context, 128, 256):
        if context == config.context:
            m = model
        else:
            torch.manual_seed(0)
            m = p08.build_model(p08.P08Config(**{**config.__dict__, "context": context}), tok.vocab_size).eval()
        n = context - prompt.size(1)
        slow_out, slow = analysis.time_generation(m, prompt, n, use_cache=False, repeats=2)
        fast_out, fast = analysis.time_generation(m, prompt, n, use_cache=True, repeats=2)
        identical = identical and torch.equal(slow_out, fast_out)
        speedups[context] = slow / fast
        rows.append([context, "P08（训练过）" if m is model else "同结构（未训练）", n, slow, fast, slow / fast])

    cache_entries = kv_cache_entries(config.context, d_model=config.d_model, layers=config.n_layers)
    return {
        "identical": Table(columns=["解码方式", "续写（用与不用缓存完全相同）"],
                           rows=[[k, p08.visible(v)] for k, v in same.items()], kind="trained"),
        "timing": Table(
            columns=["上下文窗口", "模型", "生成的词元数", *MEASURED],
            rows=rows, formats=["d", "", "d", ".3f", ".3f", ".1f"], kinds=MEASURED,
        ),
        "speedup_64": Value(speedups[config.context], ".1f", kind="measured"),
        "speedup_256": Value(speedups[256], ".0f", kind="measured"),
        "n_new": Value(n_new, "d"),
        "cache_entries": Value(cache_entries, ",d"),
        "same_tokens": Claim("用与不用 KV 缓存，生成的词元完全相同（贪心、同一种子的抽样、计时的每一次）", true(identical, name="完全相同")),
        "faster_at_256": Claim("窗口为 256 时，KV 缓存至少快 1.5 倍", at_least(speedups[256], 1.5, name="窗口 256 的加速比"),
                               uncertain="句中说明这是在构建本书的机器上量出的时间，换一台机器倍数会不同"),
        "longer_saves_more": Claim("窗口 256 时 KV 缓存的加速比大于窗口 64 时",
                                   greater(窗口256=speedups[256], 窗口64=speedups[config.context]),
                                   uncertain="句中说明倍数随机器而变，核对的只是两者的先后"),
    }
