"""第 20 章：训练与生成不是同一条计算路径——教师强制与自由生成并排看。

用训练好的 P08 模型读一句验证集里的话（训练时没见过）：
- 教师强制：一次前向计算，模型在每个位置看着*真实*的前文猜下一个字；
- 自由生成：只给前 4 个字，模型每次贪心地选出一个字，接到*自己写的*前文后面再猜。
"""

import torch

from transformer_book.chapter20 import p08
from transformer_book.book import Claim, Table, Value, artifact, less
from transformer_book.transformer import generate

REQUIRES = ["chapter20/p08_train"]
LINE = "海边的一座小岛上，有一座白色的灯塔。"  # 出自 stories.txt 的验证部分
PROMPT_LEN = 4


def compute():
    model, config, tok = p08.unpack_model(artifact("chapter20/p08_train", "model"))  # 训练好的 P08 模型（eval 模式）
    data = p08.prepare_data(val_fraction=config.val_fraction)
    p08.require_validation_only(LINE, data)  # 例句必须是模型训练时没见过的

    ids = torch.tensor([tok.encode(LINE)])  # (1, T)
    with torch.no_grad():
        guesses = model(ids[:, :-1]).argmax(-1)[0]  # 一次前向：每个位置看真实前文猜下一个字，(T-1,)
    forced = tok.decode(guesses.tolist())
    free = generate(model, ids[:, :PROMPT_LEN], ids.size(1) - PROMPT_LEN, temperature=0)  # 逐字生成
    written = tok.decode(free[0, PROMPT_LEN:].tolist())

    truth = LINE[1:]
    forced_hits = sum(a == b for a, b in zip(forced, truth))
    free_hits = sum(a == b for a, b in zip(written, LINE[PROMPT_LEN:]))
    # 同样这些位置上教师强制猜对几个：forced[i] 猜的是 LINE[i + 1]，自由生成写的是 LINE[PROMPT_LEN:]
    forced_hits_free_span = sum(a == b for a, b in zip(forced[PROMPT_LEN - 1:], LINE[PROMPT_LEN:]))
    val_x, val_y = p08.eval_windows(data.val_ids, config.context)
    with torch.no_grad():
        val_acc = float((model(val_x).argmax(-1) == val_y).float().mean())

    pad = "　"  # 全角空格，让三行的字上下对齐
    return {
        "paths": Table(
            columns=["", "文字（每个字与上一行同一位置对齐）", "前向计算的次数"],
            rows=[
                ["原文", LINE, "—"],
                ["教师强制：看真实前文，猜下一个字", pad + p08.visible(forced), 1],
                [f"自由生成：给前 {PROMPT_LEN} 个字，其余自己写", LINE[:PROMPT_LEN] + p08.visible(written), len(written)],
            ],
            kinds={"文字（每个字与上一行同一位置对齐）": "trained"},
        ),
        "forced_hits": Value(forced_hits, "d", kind="trained"),
        "n_forced": Value(len(truth), "d"),
        "forced_hits_free_span": Value(forced_hits_free_span, "d", kind="trained"),
        "free_hits": Value(free_hits, "d", kind="trained"),
        "n_free": Value(len(written), "d"),
        "prompt": Value(f"「{LINE[:PROMPT_LEN]}」"),
        "val_next_char_accuracy": Value(val_acc, ".1%", kind="trained"),
        "free_drifts": Claim("在自由生成写出的那些位置上，与原文相同的字少于教师强制在同样位置上猜对的字",
                             less(自由生成=free_hits, 教师强制=forced_hits_free_span)),
    }

