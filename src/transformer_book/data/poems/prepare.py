"""从 chinese-poetry 的《全唐诗》数据生成五言绝句 / 律诗语料 wuyan.txt。

本脚本供第 20 章「从零写一个会写诗的 GPT」（P08 前篇）准备训练语料，
需要手动运行一次，不属于本书的构建或测试流程。生成的 wuyan.txt 已随仓库提交，
读者一般无需重跑；这里保留脚本，是为了说明语料的来龙去脉，并让结果可以复现。

准备工作
--------
1. 获取数据包（npm 上的 chinese-poetry 2.0.1，数据来自 GitHub 上的
   chinese-poetry/chinese-poetry 仓库，MIT 许可）::

       cd /tmp && npm pack chinese-poetry@2.0.1
       tar xzf chinese-poetry-2.0.1.tgz      # 解压得到 /tmp/package/

   《全唐诗》位于 package/dist/quantangshi/poet.tang.<编号>.json，
   编号为 0, 1000, 2000, …, 57000，共 58 个文件。同目录下 error/ 子目录里的
   同名文件是上游标出的“有错误的诗”清单，本脚本不读取它们。

2. 安装繁体→简体转换器 opencc-purepy 1.5.0（纯 Python，词典随包附带，
   安装后可离线使用）。不想污染系统环境时，可以装进一个临时虚拟环境::

       python3 -m venv /tmp/cc-venv
       /tmp/cc-venv/bin/pip install opencc-purepy==1.5.0

运行
----
::

    /tmp/cc-venv/bin/python src/transformer_book/data/poems/prepare.py /tmp/package

参数是解压后的包目录（含 dist/ 的那一层；也可以直接给
dist/quantangshi 目录）。默认输出到本脚本所在目录下的 wuyan.txt，
可用 --out 指定别的位置。

处理步骤（结果完全确定，重复运行得到逐字节相同的文件）
------------------------------------------------------
1. 按文件名中的数字编号升序读取全部 poet.tang.*.json，文件内保持原顺序；
2. 每首诗的每个 paragraph 分别用 OpenCC 的 t2s 配置转为简体，再拼接成全文；
3. 只保留五言绝句（4 句）和五言律诗（8 句）：每句恰好 5 个汉字
   （U+4E00–U+9FFF），第 1、3、5、7 句以「，」结尾，第 2、4、6、8 句以「。」结尾；
   全文中出现任何其他字符（括号、□、注释、问号等）的诗一律丢弃；
4. 全文完全相同的诗只保留第一次出现的那一首；
5. 统计剩余诗中每个汉字的出现次数，按“次数从高到低、同次数按码位从小到大”
   排序，取前 3000 个汉字作为字表，丢弃含字表外汉字的诗（只做一轮）；
6. 每首诗一行写入 wuyan.txt（UTF-8，只有正文和标点，不含标题、作者和空格，
   按读取顺序排列，文件以换行结尾），并打印统计数字和文件的 sha256。
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path

# 转换器的名字和本书使用的版本；版本不同时结果可能略有差异，脚本会给出提醒
CONVERTER_NAME = "opencc-purepy"
CONVERTER_VERSION = "1.5.0"

# 字表上限：最多保留多少个不同的汉字
VOCAB_SIZE = 3000

HAN = "\u4e00-\u9fff"
# 一联（两句）：五个汉字 +「，」+ 五个汉字 +「。」
COUPLET = f"[{HAN}]{{5}}，[{HAN}]{{5}}。"
# 绝句是两联，律诗是四联；整首诗必须从头到尾完全匹配
JUEJU_RE = re.compile(f"(?:{COUPLET}){{2}}")
LVSHI_RE = re.compile(f"(?:{COUPLET}){{4}}")
HAN_RE = re.compile(f"[{HAN}]")

FILE_RE = re.compile(r"^poet\.tang\.(\d+)\.json$")


def load_converter():
    """载入 OpenCC 的繁体→简体转换函数；缺少依赖时给出安装提示并退出。"""
    try:
        from opencc_purepy import OpenCC
    except ImportError:
        sys.exit(
            f"找不到 {CONVERTER_NAME}，请先安装：pip install "
            f"{CONVERTER_NAME}=={CONVERTER_VERSION}（见本脚本开头的说明）"
        )
    try:
        from importlib.metadata import version

        installed = version(CONVERTER_NAME)
    except Exception:  # 读不到版本号时不影响转换本身
        installed = "未知"
    if installed != CONVERTER_VERSION:
        print(
            f"提醒：已安装的 {CONVERTER_NAME} 版本是 {installed}，"
            f"本书使用的是 {CONVERTER_VERSION}，结果可能与 README 中的 sha256 不同。",
            file=sys.stderr,
        )
    converter = OpenCC("t2s")
    if converter.get_last_error():
        sys.exit(f"OpenCC 词典载入失败：{converter.get_last_error()}")
    return converter.t2s, installed


def find_tang_files(package_dir: Path) -> list[Path]:
    """找到全部 poet.tang.<编号>.json，并按编号从小到大排序。"""
    candidates = [package_dir / "dist" / "quantangshi", package_dir]
    for folder in candidates:
        files = [p for p in folder.glob("poet.tang.*.json") if FILE_RE.match(p.name)]
        if files:
            return sorted(files, key=lambda p: int(FILE_RE.match(p.name).group(1)))
    sys.exit(f"在 {package_dir} 下找不到 poet.tang.*.json，请检查参数是否为解压后的包目录")


def read_poems(files: list[Path], to_simplified) -> tuple[int, list[str]]:
    """按文件顺序读取所有诗，逐段转为简体后拼成全文；返回总首数和全文列表。"""
    total = 0
    texts = []
    for path in files:
        with path.open(encoding="utf-8") as f:
            poems = json.load(f)
        for poem in poems:
            total += 1
            paragraphs = poem.get("paragraphs") or []
            texts.append("".join(to_simplified(p) for p in paragraphs))
    return total, texts


def is_wuyan(text: str) -> bool:
    """是否为格式规整的五言绝句或五言律诗。"""
    return bool(JUEJU_RE.fullmatch(text) or LVSHI_RE.fullmatch(text))


def build_vocab(texts: list[str], size: int) -> set[str]:
    """统计汉字频次，取最常见的 size 个；同频次按码位排序，保证结果确定。"""
    counts = Counter(ch for t in texts for ch in HAN_RE.findall(t))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    print(f"  过滤前共有 {len(counts)} 个不同汉字")
    return {ch for ch, _ in ranked[:size]}


def main() -> None:
    parser = argparse.ArgumentParser(description="生成五言绝句 / 律诗语料 wuyan.txt")
    parser.add_argument("package_dir", type=Path, help="解压后的 chinese-poetry 包目录")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path(__file__).resolve().parent / "wuyan.txt",
        help="输出文件（默认：本脚本所在目录下的 wuyan.txt）",
    )
    args = parser.parse_args()

    to_simplified, installed = load_converter()
    print(f"转换器：{CONVERTER_NAME} {installed}（OpenCC t2s）")

    files = find_tang_files(args.package_dir)
    print(f"读取 {len(files)} 个文件：{files[0].name} … {files[-1].name}")
    total, texts = read_poems(files, to_simplified)
    print(f"全唐诗共 {total} 首")

    # 第一步：只留格式规整的五言绝句和律诗
    shaped = [t for t in texts if is_wuyan(t)]
    print(f"格式符合五言绝句 / 律诗：{len(shaped)} 首")

    # 第二步：去掉全文完全相同的重复诗，保留第一次出现的
    seen: set[str] = set()
    unique = []
    for t in shaped:
        if t not in seen:
            seen.add(t)
            unique.append(t)
    print(f"去重后：{len(unique)} 首（去掉 {len(shaped) - len(unique)} 首重复）")

    # 第三步：限制字表，丢弃含生僻字的诗
    vocab = build_vocab(unique, VOCAB_SIZE)
    kept = [t for t in unique if all(ch in vocab for ch in HAN_RE.findall(t))]
    print(
        f"限制字表为最常见的 {len(vocab)} 个汉字后：{len(kept)} 首"
        f"（去掉 {len(unique) - len(kept)} 首）"
    )

    data = "".join(t + "\n" for t in kept).encode("utf-8")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(data)

    jueju = sum(1 for t in kept if len(t) == 24)
    lvshi = sum(1 for t in kept if len(t) == 48)
    han = [ch for t in kept for ch in HAN_RE.findall(t)]
    symbols = set("".join(kept))
    print()
    print(f"写入 {args.out}（{len(data)} 字节）")
    print(f"  诗：{len(kept)} 首（五言绝句 {jueju} 首，五言律诗 {lvshi} 首）")
    print(f"  汉字：{len(han)} 个，不同汉字 {len(set(han))} 个")
    print(
        f"  字符（含标点，不含换行）：{sum(len(t) for t in kept)} 个，"
        f"不同字符 {len(symbols)} 个"
    )
    print(f"  sha256：{hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main()
