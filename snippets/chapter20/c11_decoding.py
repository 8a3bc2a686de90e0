"""第 20 章：同一个模型、同一个提示，换一种解码策略，续写就不同。

训练好的 P08 模型从同一个提示出发，依次用贪心、三种温度、top-k 和 top-p 各续写 40 个字
（需要抽样的策略都用同一个种子）。再把第一步的候选分布摊开：温度怎样把分布压尖或摊平，
top-k 和 top-p 各留下哪些候选。
"""

import torch

from transformer_book.chapter20 import p08
from transformer_book.book import (Claim, Table, Value, all_of, artifact, below, decreasing, equal,
                                   increasing, less, true)
from transformer_book.transformer import generate, next_token_distribution

REQUIRES = ["chapter20/p08_train"]
PROMPT = "十二月"
N_NEW = 40
STRATEGIES = [  # (名称, generate 的参数)
    ("贪心（温度 0）", dict(temperature=0)),
    ("温度 0.7", dict(temperature=0.7)),
    ("温度 1.0", dict(temperature=1.0)),
    ("温度 1.5", dict(temperature=1.5)),
    ("top-k（k = 10）", dict(temperature=1.0, top_k=10)),
    ("top-p（p = 0.9）", dict(temperature=1.0, top_p=0.9)),
]
SHOWN = [("温度 0.5", dict(temperature=0.5)), ("温度 1.0", dict(temperature=1.0)), ("温度 1.5", dict(temperature=1.5)),
         ("top-k（k = 5）", dict(top_k=5)), ("top-p（p = 0.9）", dict(top_p=0.9))]



def compute():
    model, config, tok = p08.unpack_model(artifact("chapter20/p08_train", "model"))  # 训练好的 P08 模型（eval 模式）
    prompt = torch.tensor([tok.encode(PROMPT)])  # (1, T)

    rows = []
    for name, kwargs in STRATEGIES:
        out = generate(model, prompt, N_NEW, generator=torch.Generator().manual_seed(0), **kwargs)
        text = tok.decode(out[0, prompt.size(1):].tolist())
        rows.append([name, p08.visible(text), len(set(text)) / len(text)])

    diversity = [row[2] for row in rows[:4]]  # 温度 0、0.7、1.0、1.5

    with torch.no_grad():
        logits = model(prompt)[0, -1]  # (V,)：提示之后第一个字的打分
    dists = {name: next_token_distribution(logits, **kw) for name, kw in SHOWN}
    top = torch.topk(logits, 8).indices.tolist()  # 打分最高的 8 个候选
    candidates = [[p08.visible(tok.vocab[i]), *[float(d[i]) for d in dists.values()]] for i in top]
    kept = {name: int((d > 0).sum()) for name, d in dists.items()}
    top1 = [float(dists[t][top[0]]) for t in ("温度 0.5", "温度 1.0", "温度 1.5")]
    return {
        "continuations": Table(columns=["策略", f"从「{PROMPT}」续写的 {N_NEW} 个字", "不同字符的比例"], rows=rows,
                               formats=["", "", ".2f"], kind="trained", kinds={"策略": "exact"}),
        "first_step": Table(columns=["候选字", *[f"{name}" for name in dists]], rows=candidates,
                            formats=["", *[".3f"] * len(dists)], kind="trained"),
        "top_p_kept": Value(kept["top-p（p = 0.9）"], "d", kind="trained"),
        "vocab_size": Value(tok.vocab_size, ",d"),
        "top1_t05": Value(top1[0], ".2f", kind="trained"),
        "top1_t15": Value(top1[2], ".2f", kind="trained"),
        "top1_char": Value(f"「{p08.visible(tok.vocab[top[0]])}」", kind="trained"),
        "greedy_loops": Claim("贪心解码很快掉进句号之后不断换行的循环",
                              all_of(below(diversity[0], 0.3, name="贪心续写里不同字符的比例"),
                                     true("。↵↵↵↵" in rows[0][1], name="出现「。↵↵↵↵」"))),
        "hotter_more_varied": Claim("温度越高，续写里不同字符的比例越高", increasing(diversity, name="不同字符的比例")),
        "truncation_less_varied": Claim("top-k 与 top-p 续写里不同字符的比例都低于纯粹按温度 1 采样",
                                        all_of(less(topk=rows[4][2], 温度1=rows[2][2]), less(topp=rows[5][2], 温度1=rows[2][2]))),
        "cooler_sharper": Claim("温度越低，最高候选的概率越大", decreasing(top1, name="最高候选的概率")),
        "top_k_keeps_5": Claim("top-k 只留下 5 个候选", equal(留下的候选=kept["top-k（k = 5）"], 期望=5)),
    }

