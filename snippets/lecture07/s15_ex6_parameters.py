"""第 15 节练习 6：一个约 LLaMA-7B 规模的解码器有多少参数（按 12d² + 13d 估算）。

V = 32000，d = 4096，32 层，RoPE（没有位置表），输出层与词嵌入不共享。最后的层归一化（2d）单独列出，
估算里忽略它。
"""

from transformer_book.book import Table, Value
from transformer_book.transformer import block_parameters

V, D, N_LAYERS = 32_000, 4096, 32


def compute():
    per_block = block_parameters(D).total
    blocks = N_LAYERS * per_block
    embedding = V * D
    total = blocks + 2 * embedding
    rows = [
        ["一个块", "$12d^2 + 13d$", per_block],
        ["32 个块", "$32\\,(12d^2 + 13d)$", blocks],
        ["词嵌入", "$Vd$", embedding],
        ["输出层（不共享）", "$Vd$", embedding],
        ["合计（估算）", "", total],
        ["（忽略的）最后的层归一化", "$2d$", 2 * D],
    ]
    return {
        "table": Table(columns=["部分", "公式", "参数量"], rows=rows, formats=["", "", ",d"]),
        "per_block_e8": Value(per_block / 1e8, ".2f"),
        "blocks_e9": Value(blocks / 1e9, ".2f"),
        "embedding_e8": Value(embedding / 1e8, ".2f"),
        "embeddings_e8": Value(2 * embedding / 1e8, ".2f"),
        "total_e9": Value(total / 1e9, ".1f"),
        "total_yi": Value(total / 1e8, ".0f"),
        "blocks_share": Value(blocks / total, ".0%"),
    }
