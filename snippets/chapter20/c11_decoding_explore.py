"""第 20 章（可调的图）：温度、top-k、top-p 怎样改变 P08 模型下一个字的分布，以及抽出来的续写。

提示与表 16、表 17 相同；每一种组合都在构建时算好：打分最高的 8 个候选字实际被抽中的概率、
留下的候选个数，以及用同一个种子续写的 20 个字。
"""

import torch

from transformer_book.chapter20 import p08
from transformer_book.book import Bars, Claim, Control, Explorable, Text, all_of, artifact, decreasing, equal
from transformer_book.transformer import generate, next_token_distribution

REQUIRES = ["chapter20/p08_train"]
PROMPT = "十二月"
N_NEW = 20
TEMPERATURES = [0.0, 0.5, 0.7, 1.0, 1.5]
TOP_K = [None, 10, 5]
TOP_P = [None, 0.9, 0.5]


def compute():
    model, config, tok = p08.unpack_model(artifact("chapter20/p08_train", "model"))  # 训练好的 P08 模型（eval 模式）
    prompt = torch.tensor([tok.encode(PROMPT)])  # (1, T)
    with torch.no_grad():
        logits = model(prompt)[0, -1]  # (V,)：提示之后第一个字的打分
    top = torch.topk(logits, 8).indices.tolist()  # 打分最高的 8 个候选

    def state(temperature, top_k, top_p):
        probs = next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)  # (V,)
        out = generate(model, prompt, N_NEW, temperature=temperature, top_k=top_k, top_p=top_p,
                       generator=torch.Generator().manual_seed(0))
        return {"probs": [float(probs[i]) for i in top], "kept": int((probs > 0).sum()),
                "text": p08.visible(tok.decode(out[0, prompt.size(1):].tolist()))}

    explore = Explorable(
        [Control("温度", TEMPERATURES, default=1.0, labels=["0（贪心）", "0.5", "0.7", "1.0", "1.5"]),
         Control("top-k", TOP_K, labels=["不截断", "10", "5"]),
         Control("top-p", TOP_P, labels=["不截断", "0.9", "0.5"])],
        state,
        show=[Bars("probs", [p08.visible(tok.vocab[i]) for i in top], title=f"「{PROMPT}」之后第一个字：打分最高的 8 个候选被抽中的概率",
                   scale=1.0),
              Text("kept", "留下的候选", "d"),
              Text("text", f"用同一个种子续写 {N_NEW} 个字")],
        caption="图 5　可调：温度 × top-k × top-p（P08 模型，↵ 表示换行）",
        kind="trained",
    )
    plain = [explore.states[explore.combos().index((t, None, None))] for t in TEMPERATURES[1:]]
    kept_k5 = [s["kept"] for c, s in zip(explore.combos(), explore.states) if c[1] == 5 and c[0] > 0 and c[2] is None]
    return {
        "explore": explore,
        "cooler_sharper": Claim("不截断时，温度越低，最高候选的概率越大",
                                decreasing([s["probs"][0] for s in plain], name="最高候选的概率（温度 0.5、0.7、1.0、1.5）")),
        "top_k_keeps_k": Claim("top-k = 5、top-p 不截断、温度大于 0 时，都恰好留下 5 个候选",
                               all_of(*(equal(留下的候选=n, 期望=5) for n in kept_k5))),
    }
