"""书里从零训练的 GPT 在读者的浏览器里运行：导出权重，用 PyTorch 算出对照，在构建时运行页面自己的 JavaScript。

第 20 章“试一试”一页上的模型是从零写 GPT 的第五步（:class:`~transformer_book.chapter20.scratch.BlockLM`，
种子 0）。浏览器里的计算由 ``docs/chapter20/p08b-playground/gpt.js`` 完成：纯 JavaScript，不用任何库，
按数据流的顺序一部分一个函数。这里的几件事让它可信：

1. :func:`export` 把模型写成一个文件（页面只在读者打开这一页时下载它）：权重存成 float16，文件小一半。
   :func:`rounded` 是同一个模型、权重同样舍入到 float16 再转回 float32——浏览器里跑的就是它。
2. :func:`torch_forward` 用 PyTorch 算这个舍入后的模型：每个位置的 logits，和每个头的注意力权重。
3. :func:`run_js` 在 V8（``mini-racer``，pip 安装、不需要 Node）里运行页面上同一个 ``gpt.js``，读入同一个文件，
   算同样的输入。:func:`compare` 给出两边的最大差。构建时每个记录的输入都要差不到 :data:`BOUND`。
4. :func:`sample` 是页面抽样方法的 Python 版本（同一个伪随机数发生器、同样的温度、top-k、top-p）：
   给定种子，两边续写出的字应当一样。

为什么界是 10⁻⁴：两边用的是同样舍入过的权重，只差在算法上——PyTorch 用 float32 计算（每次运算的相对
舍入误差约 6 × 10⁻⁸），JavaScript 的数是 float64，``gpt.js`` 的 GELU 里的 erf 用的是一个误差不超过 1.5 × 10⁻⁷
的近似公式。几十到几百项相加之后，这些只让两边在远小于 10⁻⁴ 的量级上不同（构建记下每段输入上的最大差）。
而真写错的一处，比如去掉注意力分数的 ÷ √d_h（构建时真的运行一份这样改坏的 ``gpt.js``，记下它的差），
差别要大得多。页面上的概率只显示到 0.1%、注意力权重只显示到 0.01，这个界也保证显示出来的数字与 PyTorch 的
一致（恰好落在舍入边界上的除外）。只让结果差一点点的错（比如层归一化的 ε 写错），这个界未必抓得住。
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from transformer_book.char_tokenizer import SPECIALS, CharTokenizer
from transformer_book.chapter20.scratch import BlockLM, ScratchConfig

FORMAT = "transformer-book-gpt/1"
"""文件格式的名字（写在文件头里；``gpt.js`` 读到别的名字就拒绝）。"""
BOUND = 1e-4
"""浏览器与 PyTorch 的 logits、注意力权重之差的上界（为什么是它，见模块说明）。"""
SCRIPT = Path(__file__).resolve().parents[3] / "docs" / "chapter20" / "p08b-playground" / "gpt.js"
"""页面上的 JavaScript（在书的项目里；只装了这个包的读者没有它）。"""
START = "\n"
"""一首诗的开头：训练文本里每首诗前面是一个换行，页面把读者打的字接在它后面送进模型。"""


# ---------------------------------------------------------------------------
# 1. 导出
# ---------------------------------------------------------------------------


def rounded(model: BlockLM) -> BlockLM:
    """同一个模型，每个参数舍入到 float16 再转回 float32（浏览器里跑的就是这些数）。"""
    copy = type(model)(model.tok_emb.num_embeddings, model.tok_emb.embedding_dim, model.pos_emb.num_embeddings,
                       len(model.block.attn.heads))
    copy.load_state_dict({k: v.half().float() for k, v in model.state_dict().items()})
    return copy.eval()


def export(model: BlockLM, config: ScratchConfig, tokenizer: CharTokenizer, colors: Sequence[str] = (),
           page: dict[str, Any] | None = None) -> bytes:
    """模型写成一个文件：4 个字节（小端 uint32）的文件头长度 n，n 个字节的文件头（UTF-8 的 JSON：格式名、设置、
    词表、每个张量的名字和形状，页面画热力图用的颜色，以及页面控件的初始值 ``page``：温度、top-k、top-p、
    一次续写几个字），然后是每个张量的 float16（小端），按文件头的顺序首尾相接。文件头补空格到偶数长度，
    float16 从偶数字节开始。"""
    state = model.state_dict()
    header = {
        "format": FORMAT,
        "config": {"vocab_size": tokenizer.vocab_size, "d_model": config.d_model, "n_heads": config.n_heads,
                   "context": config.context, "specials": len(SPECIALS)},
        "vocab": list(tokenizer.vocab),
        "tensors": [[name, list(t.shape)] for name, t in state.items()],
        "colors": list(colors),
        "page": dict(page or {}),
    }
    head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    head += b" " * (len(head) % 2)
    body = b"".join(t.detach().cpu().numpy().astype("<f2").tobytes() for t in state.values())
    return struct.pack("<I", len(head)) + head + body


# ---------------------------------------------------------------------------
# 2. PyTorch 的对照
# ---------------------------------------------------------------------------


def encode(tokenizer: CharTokenizer, text: str, context: int) -> tuple[list[int], list[str]]:
    """页面的做法：开头加一个换行，去掉词表里没有的字（返回它们），只留最后 ``context`` 个。"""
    chars = set(tokenizer.vocab[len(SPECIALS):])
    known = [c for c in text if c in chars]
    missing = list(dict.fromkeys(c for c in text if c not in chars))  # 每个只列一次
    ids = tokenizer.encode(START + "".join(known))
    return ids[-context:], missing


@torch.no_grad()
def torch_forward(model: BlockLM, ids: Sequence[int]) -> dict[str, Any]:
    """``ids`` 每个位置的 logits (T, V)，和第 h 个头的注意力权重 (T, T)（一个块，4 个头）。

    logits 就是 ``model(ids)``；注意力权重用模型自己的模块、按 :class:`~transformer_book.chapter20.scratch.Head`
    的同样几步重算一遍（``Head.forward`` 只返回加权平均，不返回权重）。
    """
    idx = torch.tensor([list(ids)])  # (1, T)
    T = idx.size(1)
    x = model.tok_emb(idx) + model.pos_emb(torch.arange(T))  # (1, T, d)
    h = model.block.ln1(x)
    weights = []
    for head in model.block.attn.heads:
        q, k = head.query(h), head.key(h)  # 各 (1, T, d_h)
        scores = q @ k.transpose(-2, -1) / k.size(-1) ** 0.5  # (1, T, T)
        scores = scores.masked_fill(torch.tril(torch.ones(T, T)) == 0, float("-inf"))
        weights.append(torch.softmax(scores, dim=-1)[0].numpy().astype(np.float64))  # (T, T)
    return {"logits": model(idx)[0].numpy().astype(np.float64), "attention": weights}


# ---------------------------------------------------------------------------
# 3. 同一个 gpt.js，在 V8 里
# ---------------------------------------------------------------------------

_HARNESS = r"""
function bookBase64(s) {  // V8 本身没有 atob：这里自己解码
  var table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", map = {};
  for (var i = 0; i < 64; i++) map[table.charAt(i)] = i;
  var clean = s.replace(/=+$/, ""), out = new Uint8Array(Math.floor(clean.length * 3 / 4)), o = 0, buf = 0, bits = 0;
  for (var j = 0; j < clean.length; j++) {
    buf = (buf << 6) | map[clean.charAt(j)]; bits += 6;
    if (bits >= 8) { bits -= 8; out[o++] = (buf >> bits) & 255; }
  }
  return out.buffer;
}
var bookModel = null;
function bookLoad(b64) { bookModel = BookGPT.load(bookBase64(b64)); return bookModel.vocab.length; }
function bookForward(ids) {
  var r = BookGPT.forward(bookModel, ids, true);
  return JSON.stringify({logits: Array.from(r.logits), attention: r.attention.map(function (w) { return Array.from(w); })});
}
function bookPrepare(text) { return JSON.stringify(BookGPT.prepare(bookModel, text)); }
function bookSample(text, options) { return BookGPT.generate(bookModel, text, options).text; }
"""


class JSModel:
    """``gpt.js`` 在一个 V8 里读入导出的文件；:meth:`forward` 与 :meth:`generate` 调用页面上的同名函数。"""

    def __init__(self, script: str, weights: bytes) -> None:
        import base64

        from py_mini_racer import MiniRacer

        self._ctx = MiniRacer()
        self._ctx.eval(script)
        self._ctx.eval(_HARNESS)
        self.vocab_size = int(self._ctx.call("bookLoad", base64.b64encode(weights).decode("ascii")))

    def forward(self, ids: Sequence[int]) -> dict[str, Any]:
        """与 :func:`torch_forward` 同样的两样东西：logits (T, V) 与每个头的注意力权重 (T, T)。"""
        out = json.loads(self._ctx.call("bookForward", list(ids)))
        T = len(ids)
        return {"logits": np.array(out["logits"]).reshape(T, -1),
                "attention": [np.array(w).reshape(T, T) for w in out["attention"]]}

    def prepare(self, text: str) -> dict[str, Any]:
        """页面怎样把 ``text`` 变成编号：``ids``（开头的换行在内，至多 context 个）、``missing``（词表外的字）、
        ``cut``（从开头截掉了几个）。"""
        return json.loads(self._ctx.call("bookPrepare", text))

    def generate(self, text: str, **options: Any) -> str:
        """页面的续写（``options``：temperature、top_k、top_p、seed、max_chars）。"""
        return str(self._ctx.call("bookSample", text, options))

    def close(self) -> None:
        self._ctx.close()

    def __enter__(self) -> "JSModel":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def run_js(script: Path | str, weights: bytes) -> JSModel:
    """在 V8 里读入 ``script``（页面上的 ``gpt.js``，路径或源码）和导出的文件。"""
    source = script.read_text(encoding="utf-8") if isinstance(script, Path) else script
    return JSModel(source, weights)


def check(js: JSModel, model: BlockLM, tokenizer: CharTokenizer, inputs: dict[str, str]) -> tuple[list[list[Any]], list[Any], list[Any]]:
    """构建时的核对：``inputs``（名字 → 文字）逐段算两遍，页面的 JavaScript 与 PyTorch（``model``，权重已舍入）。

    返回表格的行（名字、送进模型的字数、词表外的字、logits 与注意力权重的最大差），每段每个张量一个
    “差小于 :data:`BOUND`”的比较（名字里写着是哪段输入、哪个张量：不成立时构建失败并说出它），以及每段
    “页面把字变成编号的做法与 Python 相同”的比较。
    """
    from transformer_book.book import below, equal

    context = model.pos_emb.num_embeddings
    rows, close, same = [], [], []
    for name, text in inputs.items():
        ids, missing = encode(tokenizer, text, context)
        page = js.prepare(text)
        same.append(equal(**{f"「{name}」页面的编号": page["ids"] + page["missing"], f"「{name}」Python 的编号": ids + missing}))
        diff = compare(js.forward(ids), torch_forward(model, ids))
        rows.append([name, len(ids), "、".join(missing) or "—", diff["logits"],
                     max(v for k, v in diff.items() if k != "logits")])
        close += [below(v, BOUND, name=f"「{name}」" + ("的 logits " if k == "logits" else k) + "之差") for k, v in diff.items()]
    return rows, close, same


def load(data: bytes) -> tuple[BlockLM, CharTokenizer]:
    """:func:`export` 的逆（下载了页面上的模型文件的读者，在 Python 里这样读它）：模型（``eval()`` 模式，
    float16 的权重转成 float32）和分词器。"""
    (n,) = struct.unpack_from("<I", data, 0)
    header = json.loads(data[4:4 + n].decode("utf-8"))
    if header.get("format") != FORMAT:
        raise ValueError(f"不认识的模型文件：{header.get('format')!r}")
    cfg, offset, state = header["config"], 4 + n, {}
    for name, shape in header["tensors"]:
        size = int(np.prod(shape))
        state[name] = torch.from_numpy(np.frombuffer(data, "<f2", size, offset).astype(np.float32).reshape(shape))
        offset += 2 * size
    model = BlockLM(cfg["vocab_size"], cfg["d_model"], cfg["context"], cfg["n_heads"])
    model.load_state_dict(state)
    return model.eval(), CharTokenizer(tuple(header["vocab"]))


SCALED = "w[t * T + s] = dot / scale;"
"""``gpt.js`` 里注意力分数除以 √d_h 的那一行。"""


def without_scaling(script: str) -> str:
    """故意改坏的 ``gpt.js``：注意力分数不再除以 √d_h（核对应当抓住它）。找不到那一行就报错。"""
    if SCALED not in script:
        raise ValueError(f"gpt.js 里没有这一行：{SCALED}")
    return script.replace(SCALED, "w[t * T + s] = dot;")


def compare(js: dict[str, Any], reference: dict[str, Any]) -> dict[str, float]:
    """两边的最大绝对差：logits 一个数，每个头的注意力权重各一个数（掩掉的位置两边都是 0，也算在内）。"""
    out = {"logits": float(np.max(np.abs(js["logits"] - reference["logits"])))}
    for h, (a, b) in enumerate(zip(js["attention"], reference["attention"])):
        out[f"头 {h + 1} 的注意力权重"] = float(np.max(np.abs(a - b)))
    return out


# ---------------------------------------------------------------------------
# 4. 抽样：页面的做法，Python 版
# ---------------------------------------------------------------------------


def mulberry32(seed: int):
    """页面用的伪随机数发生器 Mulberry32（32 位整数运算，两边逐位相同），返回一个每次给出 [0, 1) 中一个数的函数。"""
    state = seed & 0xFFFFFFFF

    def imul(a: int, b: int) -> int:
        return (a * b) & 0xFFFFFFFF

    def next_value() -> float:
        nonlocal state
        state = (state + 0x6D2B79F5) & 0xFFFFFFFF
        t = imul(state ^ (state >> 15), 1 | state)
        t = ((t + imul(t ^ (t >> 7), 61 | t)) & 0xFFFFFFFF) ^ t
        return ((t ^ (t >> 14)) & 0xFFFFFFFF) / 4294967296

    return next_value


def probabilities(logits: np.ndarray, temperature: float, specials: int) -> np.ndarray:
    """最后一个位置的 logits → 概率（页面的 ``probabilities``）：除以温度，特殊词元记为 0，softmax。"""
    z = np.array(logits, dtype=np.float64) / temperature
    z[:specials] = -np.inf
    p = np.exp(z - z.max())
    return p / p.sum()


def choose(logits: np.ndarray, u: float, temperature: float, top_k: int, top_p: float, specials: int) -> int:
    """由最后一个位置的 logits 抽一个字（页面的 ``choose``，顺序与 :func:`transformer_book.transformer.next_token_distribution`
    相同）：去掉特殊词元，除以温度，softmax，按概率从大到小排（一样大的编号小的在前）；留前 ``top_k`` 个（0 = 全留），
    在它们里面重新归一化；再留下累计概率刚到 ``top_p`` 的最短前缀（排第一的总会留下）；归一化后用 ``u`` 选出一个。"""
    p = probabilities(logits, temperature, specials)
    order = sorted(range(len(p)), key=lambda i: (-p[i], i))
    if top_k > 0:
        order = order[:top_k]
    order = [i for i in order if p[i] > 0]  # 概率为 0 的（特殊词元）不留
    mass = sum(p[i] for i in order)
    kept, cum = [], 0.0
    for i in order:
        if kept and cum >= top_p:
            break
        kept.append(i)
        cum += p[i] / mass
    total = sum(p[i] for i in kept)
    acc = 0.0
    for i in kept:
        acc += p[i] / total
        if u < acc:
            return i
    return kept[-1]


def sample(model: BlockLM, tokenizer: CharTokenizer, text: str, *, temperature: float, top_k: int, top_p: float,
           seed: int, max_chars: int) -> str:
    """页面的续写方法，用 PyTorch 算 logits：一次一个字，写到换行或 ``max_chars`` 个字为止，返回续写的字。"""
    context = model.pos_emb.num_embeddings
    ids, _ = encode(tokenizer, text, 10**9)
    rand = mulberry32(seed)
    out = []
    newline = tokenizer.encode(START)[0]
    for _ in range(max_chars):
        with torch.no_grad():
            logits = model(torch.tensor([ids[-context:]]))[0, -1].numpy()  # (V,)：只要最后一个位置的
        nxt = choose(logits, rand(), temperature, top_k, top_p, len(SPECIALS))
        if nxt == newline:
            break
        out.append(tokenizer.vocab[nxt])
        ids.append(nxt)
    return "".join(out)


def top(logits: np.ndarray, tokenizer: CharTokenizer, n: int = 10) -> list[tuple[str, float]]:
    """最后一个位置最可能的 ``n`` 个字和它们的概率（温度 1，不算特殊词元）。"""
    p = probabilities(logits, 1.0, len(SPECIALS))
    order = sorted(range(len(p)), key=lambda i: (-p[i], i))[:n]
    return [(tokenizer.vocab[i], float(p[i])) for i in order]


def visible(ch: str) -> str:
    """页面上怎样写一个字：换行写成“↵”。"""
    return "↵" if ch == "\n" else ch

