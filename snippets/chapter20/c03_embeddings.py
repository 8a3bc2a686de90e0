"""第 20 章第二步：编号经嵌入矩阵查表变成向量。

先看形状：P08 模型的嵌入矩阵是 V × d，一批 B 段、每段 T 个编号查表后得到 B × T × d 的张量，
查表与“独热向量乘嵌入矩阵”结果完全相同。再看内容：训练前后，几个字在嵌入空间里最近的邻居
（余弦相似度）——训练前是随机的，训练后相近用法的字靠到了一起。
"""

import torch

from transformer_book.chapter20 import p08
from transformer_book.book import Claim, Table, Value, all_of, artifact, at_least, at_most, true

from transformer_book.transformer import count_parameters

REQUIRES = ["chapter20/p08_train"]
LINES = ["春风又绿江南岸", "一月二日，晴。"]  # 两段，各 7 个字：B = 2，T = 7
PROBES = ["春", "他", "说", "红", "一"]
# 每个字的“同类字”：正文据此说相近用法的字靠到了一起
KINDRED = {"春": "夏秋冬", "他": "她我你您它们", "说": "问讲笑听看喊答叫", "红": "绿蓝紫橙黄白黑灰", "一": "两几三四五六七八九十半每这那"}


def neighbours(embedding, tokenizer, ch, k=5):
    """与字 ch 余弦相似度最高的 k 个字（不含它自己和特殊词元）及相似度。"""
    E = torch.nn.functional.normalize(embedding, dim=1)  # (V, d)，每行长度为 1
    sims = E @ E[tokenizer.encode(ch)[0]]  # (V,)
    sims[:2] = -2.0  # 不考虑 <pad>、<unk>
    sims[tokenizer.encode(ch)[0]] = -2.0
    top = sims.topk(k)
    return [tokenizer.vocab[i] for i in top.indices.tolist()], top.values.tolist()


def compute():
    trained, config, tok = p08.unpack_model(artifact("chapter20/p08_train", "model"))  # 训练好的 P08 模型
    torch.manual_seed(config.seed)
    untrained = p08.build_model(config, tok.vocab_size).eval()  # 与训练开始时同样的初始化


    ids = torch.tensor([tok.encode(line) for line in LINES])  # (B, T)
    E = untrained.tok_emb.weight.detach()  # (V, d)
    with torch.no_grad():
        X = untrained.tok_emb(ids)  # (B, T, d)
    one_hot = torch.nn.functional.one_hot(ids, tok.vocab_size).float()  # (B, T, V)
    lookup_vs_matmul = float((one_hot @ E - X).abs().max())

    def shape(t):
        return " × ".join(str(n) for n in t.shape)

    shapes = Table(
        columns=["张量", "形状", "含义"],
        rows=[
            ["词元编号", shape(ids), "B 段文字，每段 T 个编号"],
            ["嵌入矩阵 $E$", shape(E), "词表里每个词元一行，每行 d 个数"],
            ["查表结果 $X$", shape(X), "每个编号换成了 $E$ 中对应的那一行"],
        ],
    )

    rows, kin = [], {}
    for ch in PROBES:
        before, _ = neighbours(untrained.tok_emb.weight.detach(), tok, ch)
        after, sims = neighbours(trained.tok_emb.weight.detach(), tok, ch)
        kin[ch] = sum(c in KINDRED[ch] for c in after)  # 最近的 5 个字里有几个同类字
        rows.append([ch, " ".join(before), " ".join(after), sims[0]])
    n_emb = E.numel()
    return {
        "shapes": shapes,
        "neighbours": Table(
            columns=["字", "训练前最近的 5 个字", "训练后最近的 5 个字", "训练后最高的余弦相似度"],
            rows=rows, formats=["", "", "", ".2f"],
            kinds={"训练后最近的 5 个字": "trained", "训练后最高的余弦相似度": "trained"},
        ),
        "kindred_neighbours": Claim("训练之后，每个字最近的 5 个字里都至少有 2 个同类字（季节、人称代词、"
                                    "说听看笑一类的动作、颜色、数词与指示代词）", all_of(*(at_least(v, 2, name=k) for k, v in kin.items()))),
        "lookup_is_matmul": Claim("查表与独热向量乘嵌入矩阵的结果完全相同", all_of(at_most(lookup_vs_matmul, 0.0, name="最大差"),
                                         true(bool(torch.equal(X[0, 0], E[ids[0, 0]])), name="逐位相同"))),

        "vocab_size": Value(tok.vocab_size, ",d"),
        "d_model": Value(config.d_model, "d"),
        "embedding_params": Value(n_emb, ",d"),
        "embedding_share": Value(n_emb / count_parameters(untrained), ".0%"),
        "lookup_vs_matmul": Value(lookup_vs_matmul, ".1f"),
    }
