"""第 20 章：同一个模型、同一个提示，换一种解码策略，续写就不同。

训练好的 P08 模型从同一个提示出发，依次用贪心、三种温度、top-k 和 top-p 各续写 40 个字
（需要抽样的策略都用同一个种子）。再把第一步的候选分布摊开：温度怎样把分布压尖或摊平，
top-k 和 top-p 各留下哪些候选。
"""

import torch

from transformer_book import p08
from transformer_book.book import Table, Tolerance, Value, artifact
from transformer_book.char_tokenizer import CharTokenizer
from transformer_book.transformer import generate

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
TRAINED = Tolerance(rel=0.05, abs=2e-3, reason="训练得到的模型，不同 CPU 上训练结果略有差别")


def compute():
    config = p08.P08Config(**artifact("chapter20/p08_train", "config"))
    tok = CharTokenizer.from_state(artifact("chapter20/p08_train", "tokenizer"))
    model = p08.load_model(artifact("chapter20/p08_train", "model"), config, tok.vocab_size)
    prompt = torch.tensor([tok.encode(PROMPT)])  # (1, T)

    rows = []
    for name, kwargs in STRATEGIES:
        out = generate(model, prompt, N_NEW, generator=torch.Generator().manual_seed(0), **kwargs)
        text = tok.decode(out[0, prompt.size(1):].tolist())
        rows.append([name, p08.visible(text), len(set(text)) / len(text)])

    diversity = [row[2] for row in rows[:4]]  # 温度 0、0.7、1.0、1.5
    assert diversity[0] < 0.3 and "。↵↵↵↵" in rows[0][1], "正文说：贪心解码很快陷入句号之后不断换行的循环"
    assert max(rows[4][2], rows[5][2]) < rows[2][2], "正文说：top-k、top-p 的续写里不同字符的比例低于纯粹按温度 1 采样"
    assert diversity == sorted(diversity), f"这次运行中，温度越高，续写里不同字符的比例应当越高：{diversity}"

    with torch.no_grad():
        logits = model(prompt)[0, -1]  # (V,)：提示之后第一个字的打分
    dists = {name: p08.decoding_distribution(logits, **kw) for name, kw in SHOWN}
    top = torch.topk(logits, 8).indices.tolist()  # 打分最高的 8 个候选
    candidates = [[p08.visible(tok.vocab[i]), *[float(d[i]) for d in dists.values()]] for i in top]
    kept = {name: int((d > 0).sum()) for name, d in dists.items()}
    assert kept["top-k（k = 5）"] == 5
    assert dists["温度 0.5"][top[0]] > dists["温度 1.0"][top[0]] > dists["温度 1.5"][top[0]], "温度越低，最高的候选概率越大"
    return {
        "continuations": Table(columns=["策略", f"从「{PROMPT}」续写的 {N_NEW} 个字", "不同字符的比例"], rows=rows,
                               formats=["", "", ".2f"]),
        "first_step": Table(columns=["候选字", *[f"{name}" for name in dists]], rows=candidates,
                            formats=["", *[".3f"] * len(dists)], tolerance=TRAINED),
        "top_p_kept": Value(kept["top-p（p = 0.9）"], "d"),
        "vocab_size": Value(tok.vocab_size, ",d"),
        "top1_t05": Value(float(dists["温度 0.5"][top[0]]), ".2f", tolerance=TRAINED),
        "top1_t15": Value(float(dists["温度 1.5"][top[0]]), ".2f", tolerance=TRAINED),
        "top1_char": Value(f"「{p08.visible(tok.vocab[top[0]])}」"),
    }


if __name__ == "__main__":
    from transformer_book.book.show import main

    main(compute)
