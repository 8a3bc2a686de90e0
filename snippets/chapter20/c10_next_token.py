"""第 20 章：从隐藏向量到下一个词元——输入与目标错开一位，损失是交叉熵。

1. 用字符级分词器把“人工智能正在”切成词元，得到错开一位的输入与目标。
2. 取训练好的 P08 模型，读一段它训练时没见过的验证集文字，逐位置列出它给真实下一个字的概率
   p 与 −ln p；这些 −ln p 的平均就是交叉熵损失，与 ``F.cross_entropy`` 的结果相同。
"""

import math

import torch
import torch.nn.functional as F

from transformer_book.chapter20 import p08
from transformer_book.book import Claim, Table, Value, above, artifact, at_most, below
from transformer_book.char_tokenizer import CharTokenizer, shift_pairs

REQUIRES = ["chapter20/p08_train"]
PHRASE = "人工智能正在"
VALIDATION_LINE = "十一月十五日，晴，风大。"  # 出自 notes.txt 的验证部分，训练时没见过


def compute():
    toy = CharTokenizer.from_text(PHRASE)
    inp, tgt = shift_pairs(toy.encode(PHRASE))
    shift = Table(
        columns=["", *[f"位置 {t}" for t in range(len(inp))]],  # 位置从 0 数起，与全书一致
        rows=[["输入", *toy.decode(inp)], ["输入编号", *inp], ["目标", *toy.decode(tgt)], ["目标编号", *tgt]],
    )

    model, config, tok = p08.unpack_model(artifact("chapter20/p08_train", "model"))  # 训练好的 P08 模型（eval 模式）
    data = p08.prepare_data(val_fraction=config.val_fraction)
    p08.require_validation_only(VALIDATION_LINE, data)  # 例句必须是模型训练时没见过的
    ids = tok.encode(VALIDATION_LINE)
    x, y = (torch.tensor([s]) for s in shift_pairs(ids))  # 各 (1, T)
    with torch.no_grad():
        logits = model(x)  # (1, T, V)
    log_probs = torch.log_softmax(logits[0], dim=-1)  # (T, V)
    nll = -log_probs[torch.arange(y.size(1)), y[0]]  # (T,)：每个位置的 −ln p(真实的下一个字)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
    # 位置 t 读完了第 0 到 t 个字，猜的是第 t + 1 个字（位置从 0 数起，与全书一致）
    rows = [[t, VALIDATION_LINE[: t + 1], VALIDATION_LINE[t + 1], float(math.exp(-n)), float(n)] for t, n in enumerate(nll.tolist())]
    easiest, hardest = int(nll.argmin()), int(nll.argmax())
    date_end = VALIDATION_LINE.index("，")  # 日期“十一月十五日”之后的逗号
    return {
        "mean_is_cross_entropy": Claim("逐位置 −ln p 的平均就是 cross_entropy 给出的损失",
                                       below(abs(float(nll.mean()) - float(loss)), 1e-5, name="两者之差")),
        "easiest_in_date": Claim("最有把握的一步落在日期里", at_most(easiest + 1, date_end, name="最有把握的一步猜的那个字的下标")),
        "hardest_after_weather": Claim("最难的一步在天气之后", above(hardest + 1, VALIDATION_LINE.index("晴"), name="最难的一步猜的那个字的下标")),
        "shift": shift,
        "per_position": Table(
            columns=["位置", "模型已读到的文字", "真实的下一个字", "模型给它的概率 $p$", r"$-\ln p$"],
            rows=rows, formats=["d", "", "", ".3f", ".2f"],
            kinds={"模型给它的概率 $p$": "trained", r"$-\ln p$": "trained"},
        ),
        "logits_shape": Value(" × ".join(map(str, logits.shape))),
        "vocab_size": Value(tok.vocab_size, ",d"),
        "example_loss": Value(float(loss), ".2f", kind="trained"),
        "uniform_loss": Value(math.log(tok.vocab_size), ".2f"),
        "easiest_next": Value(f"「{VALIDATION_LINE[easiest + 1]}」"),
        "easiest_prefix": Value(f"「{VALIDATION_LINE[: easiest + 1]}」"),
        "easiest_p": Value(float(math.exp(-nll[easiest])), ".2f", kind="trained"),
        "hardest_next": Value(f"「{VALIDATION_LINE[hardest + 1]}」"),
        "hardest_p": Value(float(math.exp(-nll[hardest])), ".3f", kind="trained"),

    }
