"""第 20 章“试一试”：从零写的 GPT（第五步的模型，种子 0）在读者的浏览器里运行，每次构建都对着 PyTorch 核对。

1. 导出：模型的权重舍入到 float16，写成一个文件（``weights``）；页面打开时才下载它。
2. 核对：页面上的 ``gpt.js`` 在 V8 里读入同一个文件，算几段记录好的输入——一句诗、超过上下文窗口的
   一段（截成正好一个窗口）、只有一个字、夹着词表外字符的一句。每个位置的 logits 和每个头的注意力权重
   都要与 PyTorch（权重同样舍入的模型）相差不到 10⁻⁴，页面把字变成编号的做法也要与 Python 的一致。
3. 续写：三个种子，页面的抽样与它的 Python 版写出同样的字。
   另有一份故意改坏的 ``gpt.js``（去掉注意力分数的 ÷ √d_h），记下它与 PyTorch 差多少：核对抓得住真错。
4. 一个记录好的例子：提示之后最可能的十个字和一段续写（印刷版和不运行 JavaScript 的浏览器显示它）。
"""

import gzip

from matplotlib import colormaps
from matplotlib.colors import to_hex

from transformer_book.book import Claim, SiteFile, Table, Value, above, all_of, artifact, below, equal
from transformer_book.chapter20 import playground, scratch

REQUIRES = ["chapter20/scratch_block"]
DATA_FILES = ["docs/chapter20/p08b-playground/gpt.js"]  # 页面上的 JavaScript：改了它，这个片段重跑

INPUTS = {  # 名字 → 读者可能打的字
    "一句诗": "床前明月光，疑是地上霜。",
    "超过一个窗口": "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。白日依山尽，黄河入海流。",
    "一个字": "月",
    "夹着词表外的字": "Hello，明月😀",
}
PROMPT = "床前明月光，"  # 记录好的例子：从这一句往下写
SAMPLING = {"temperature": 0.8, "top_k": 20, "top_p": 0.95, "max_chars": 24}  # 页面上控件的初始值（写进模型文件）
SEEDS = (0, 1, 2)


def compute():
    trained, config, tok = scratch.unpack_model(artifact("chapter20/scratch_block", "model"))
    model = playground.rounded(trained)  # 浏览器里跑的模型：权重舍入到 float16
    colors = [to_hex(c) for c in colormaps["Blues"].resampled(64)(range(64))]  # 与书里的注意力热力图同一套颜色
    data = playground.export(trained, config, tok, colors, page=SAMPLING)

    with playground.run_js(playground.SCRIPT, data) as js:
        rows, close, same_ids = playground.check(js, model, tok, INPUTS)
        written = {s: js.generate(PROMPT, seed=s, **SAMPLING) for s in SEEDS}
    broken = playground.without_scaling(playground.SCRIPT.read_text(encoding="utf-8"))  # 故意改坏：去掉 ÷ √d_h
    ids, _ = playground.encode(tok, INPUTS["一句诗"], config.context)
    with playground.run_js(broken, data) as js:
        broken_diff = playground.compare(js.forward(ids), playground.torch_forward(model, ids))["logits"]
    python = {s: playground.sample(model, tok, PROMPT, seed=s, **SAMPLING) for s in SEEDS}

    ids, _ = playground.encode(tok, PROMPT, config.context)
    best = playground.top(playground.torch_forward(model, ids)["logits"][-1], tok)
    packed = gzip.compress(data, mtime=0)
    return {
        "weights": SiteFile(data, "bin", kind="trained"),
        "check": Table(
            columns=["输入", "送进模型的字数", "词表外的字", "logits 的最大差", "注意力权重的最大差"],
            rows=rows, formats=["", "d", "", ".1e", ".1e"],
            kinds={"logits 的最大差": "rounding", "注意力权重的最大差": "rounding"},
        ),
        "js_matches_torch": Claim("页面的 JavaScript 算出的 logits 和每个头的注意力权重，与 PyTorch 相差都不到 10⁻⁴",
                                  all_of(*close)),
        "same_ids": Claim("页面把字变成编号的做法与 Python 的相同（词表外的字去掉，超出窗口的只留最后 32 个）",
                          all_of(*same_ids)),
        "same_samples": Claim("同一个种子，页面的抽样与 Python 版写出同样的字",
                              all_of(*[equal(**{f"种子 {s} 页面": written[s], f"种子 {s} Python": python[s]})
                                       for s in SEEDS])),
        "example": Table(columns=["下一个字", "概率"], rows=[[playground.visible(c), p] for c, p in best],
                         formats=["", ".1%"], kind="trained"),
        "example_continuation": Table(columns=["种子", "续写"], rows=[[s, written[s]] for s in SEEDS],
                                      kinds={"续写": "trained"}),
        "broken_diff": Value(broken_diff, ".2f", kind="trained"),
        "broken_is_caught": Claim("去掉 ÷ √d_h 的那份 gpt.js，logits 之差至少是界的一百倍",
                                  above(broken_diff, 100 * playground.BOUND, name="改坏以后 logits 的最大差")),
        "small": Claim("模型文件压缩后不到 1 MB", below(len(packed) / 2**20, 1.0, name="压缩后（MB）")),
        "file_kb": Value(len(data) / 1024, ",.0f"),
        "gzip_kb": Value(len(packed) / 1024, ",.0f", kind="trained"),
        "n_parameters": Value(sum(p.numel() for p in model.parameters()), ",d"),
        "vocab_size": Value(tok.vocab_size, ",d"),
        "context": Value(config.context, "d"),
        "bound": Value(playground.BOUND, ".0e"),
        "prompt": Value(PROMPT),
        "temperature": Value(SAMPLING["temperature"], ".1f"),
        "top_k": Value(SAMPLING["top_k"], "d"),
        "top_p": Value(SAMPLING["top_p"], ".2f"),
        "max_chars": Value(SAMPLING["max_chars"], "d"),
    }
