"""第 7 讲第 4–5 节的位置演示：置换等变、正弦编码的相对位置性质、RoPE 的注意力分数与范数。

位置编码本身（``sinusoidal_encoding``、``LearnedPositionEmbedding``、``rope_tables``、``apply_rope``）
在参考实现 :mod:`transformer_book.transformer` 里；这里只是把它们组织成书中的实验，输入输出都是 numpy
数组，方便放进表格。单头自注意力用 :mod:`transformer_book.attention_numpy`。

形状记号：T 序列长度，d 编码维度（或词向量宽度），d_k 查询/键的宽度，d_v 值的宽度，P 位置个数。
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from transformer_book.attention_numpy import self_attention
from transformer_book.transformer import apply_rope, rope_tables, sinusoidal_encoding

# ---------- 第 4.1 节：置换等变 ----------


def outputs_by_word(
    sentence: Sequence[str],
    embeddings: dict[str, np.ndarray],
    W_q: np.ndarray,
    W_k: np.ndarray,
    W_v: np.ndarray,
    positions: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """对一句话做一次单头自注意力，按词返回输出向量。

    Parameters
    ----------
    sentence : 词的序列，例如 ``["dog", "bites", "man"]``（词不重复）。
    embeddings : dict，词 → 形状 (d,) 的词向量
    W_q, W_k : ndarray, 形状 (d, d_k)
    W_v : ndarray, 形状 (d, d_v)
    positions : ndarray, 形状 (≥ n, d), optional
        位置向量表；给出时第 p 个词的输入是“词向量 + 第 p 行”。

    Returns
    -------
    dict
        词 → 形状 (d_v,) 的输出向量。
    """
    X = np.stack([embeddings[w] for w in sentence])  # (T, d)
    if positions is not None:
        X = X + positions[: len(sentence)]  # (T, d)：第 p 行加上位置 p 的向量
    out = self_attention(X, W_q, W_k, W_v).output  # (T, d_v)
    return dict(zip(sentence, out))


# ---------- 第 5.2 节：正弦位置编码的相对位置性质 ----------


def sinusoidal_table(max_len: int, d: int) -> np.ndarray:
    """参考实现的正弦位置编码表（float32 算出），转成 numpy，形状 (max_len, d)。"""
    return sinusoidal_encoding(max_len, d).numpy().astype(np.float64)


def frequencies(d: int, base: float = 10000.0) -> np.ndarray:
    """第 s 对维度的角速度 ω_s = base^(−2s/d)，形状 (d/2,)；与正弦编码和 RoPE 用的是同一组频率。"""
    return base ** (-np.arange(0, d, 2) / d)


def pe_dot_products(d: int, distances: Sequence[int], starts: Sequence[int]) -> np.ndarray:
    """点积 PE_p · PE_{p+k}：对每个起点 p 和每个距离 k 各算一次。

    Parameters
    ----------
    d : int
        编码维度。
    distances : 距离 k 的列表
    starts : 起点 p 的列表

    Returns
    -------
    ndarray, 形状 (len(starts), len(distances))
        第 r 行是起点 ``starts[r]`` 的结果。理论值 Σ_s cos(k·ω_s) 与 p 无关。
    """
    pe = sinusoidal_table(max(starts) + max(distances) + 1, d)  # (L, d)
    return np.array([[pe[p] @ pe[p + k] for k in distances] for p in starts])


def pe_dot_product_formula(d: int, k: int) -> float:
    """点积的闭式 Σ_s cos(k·ω_s)（由 sin a sin b + cos a cos b = cos(a − b) 得到）。"""
    return float(np.cos(k * frequencies(d)).sum())


def pe_shift_matrix(k: int, d: int) -> np.ndarray:
    """平移矩阵 M_k：对所有位置 p 都有 PE_{p+k} = M_k · PE_p。

    正弦编码按 (sin pω_i, cos pω_i) 交错排列，每一对往后挪 k 个位置相当于乘一个 2 × 2 旋转矩阵
    ``[[cos kω, sin kω], [−sin kω, cos kω]]``；M_k 是这些小块排成的分块对角矩阵，只依赖 k。

    Returns
    -------
    ndarray, 形状 (d, d)
    """
    M = np.zeros((d, d))
    for i, w in enumerate(frequencies(d)):
        c, s = np.cos(k * w), np.sin(k * w)
        M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = [[c, s], [-s, c]]  # 作用在 (sin, cos) 这一对上
    return M


def pe_shift_max_error(d: int, distances: Sequence[int], positions: Sequence[int]) -> float:
    """max |PE_{p+k} − M_k·PE_p|，对所有给定的 k 和 p 取最大；只剩 float32 编码表的舍入误差。"""
    pe = sinusoidal_table(max(positions) + max(distances) + 1, d)  # (L, d)
    p = np.asarray(positions)
    errors = [np.abs(pe[p + k] - pe[p] @ pe_shift_matrix(k, d).T).max() for k in distances]  # 每个 (P, d)
    return float(max(errors))


# ---------- 第 5.4 节：旋转位置编码（RoPE） ----------


def rope_rotate(x: np.ndarray, positions: Sequence[int], base: float = 10000.0) -> np.ndarray:
    """把同一个向量 x 分别放在若干位置上，用参考实现的 ``apply_rope`` 旋转（半分配对）。

    Parameters
    ----------
    x : ndarray, 形状 (d_k,)，d_k 为偶数
    positions : 位置 m 的列表

    Returns
    -------
    ndarray, 形状 (P, d_k)
        第 r 行是 x 在位置 ``positions[r]`` 处旋转后的结果。
    """
    m = torch.as_tensor(list(positions))
    cos, sin = rope_tables(int(m.max()) + 1, x.shape[-1], base)  # 各 (L, d_k)
    xs = torch.as_tensor(x, dtype=torch.float64).expand(len(m), -1)  # (P, d_k)
    return apply_rope(xs, cos[m].double(), sin[m].double()).numpy()  # (P, d_k)


def rope_interleaved(x: np.ndarray, positions: Sequence[int], base: float = 10000.0) -> np.ndarray:
    """原论文的 RoPE 写法：相邻两维 (2i, 2i+1) 配成一对（只用于和半分写法对照）。

    Returns
    -------
    ndarray, 形状 (P, d_k)
    """
    ang = np.asarray(positions, dtype=np.float64)[:, None] * frequencies(x.shape[-1], base)  # (P, d_k/2)
    a, b = x[0::2], x[1::2]  # 各 (d_k/2,)：每对的第一、第二个分量
    out = np.empty((len(ang), x.shape[-1]))  # (P, d_k)
    out[:, 0::2] = a * np.cos(ang) - b * np.sin(ang)
    out[:, 1::2] = b * np.cos(ang) + a * np.sin(ang)
    return out


def half_split_to_interleaved(d: int) -> np.ndarray:
    """维度置换：半分写法的第 i 维与第 i + d/2 维，挪到相邻的第 2i 维与第 2i+1 维。

    Returns
    -------
    ndarray of int, 形状 (d,)
        ``x[perm]`` 把半分排列的向量变成交错排列。
    """
    half = d // 2
    return np.stack([np.arange(half), np.arange(half) + half], axis=1).reshape(d)  # [0, h, 1, h+1, …]


def rope_scores(q: np.ndarray, k: np.ndarray, pairs: Sequence[tuple[int, int]], *, interleaved: bool = False) -> np.ndarray:
    """RoPE 下的注意力分数 q̃_m · k̃_n：查询放在位置 m、键放在位置 n，各自旋转后做点积（不除以 √d_k）。

    Parameters
    ----------
    q, k : ndarray, 形状 (d_k,)
    pairs : (m, T) 的列表
    interleaved : bool
        True 时用原论文的相邻配对（``rope_interleaved``），否则用参考实现的半分配对。

    Returns
    -------
    ndarray, 形状 (len(pairs),)
    """
    rotate = rope_interleaved if interleaved else rope_rotate
    ms, ns = [m for m, _ in pairs], [n for _, n in pairs]
    return np.sum(rotate(q, ms) * rotate(k, ns), axis=-1)


def added_pe_scores(q: np.ndarray, k: np.ndarray, pairs: Sequence[tuple[int, int]]) -> np.ndarray:
    """对照组：把正弦位置编码加到向量上再做点积，(q + PE_m) · (k + PE_n)。

    Returns
    -------
    ndarray, 形状 (len(pairs),)
    """
    pe = sinusoidal_table(max(max(p) for p in pairs) + 1, q.shape[-1])  # (L, d_k)
    return np.array([(q + pe[m]) @ (k + pe[n]) for m, n in pairs])


def rope_norms(x: np.ndarray, positions: Sequence[int]) -> np.ndarray:
    """x 在各位置旋转之后的长度 ‖x̃_m‖，形状 (P,)；旋转不改变长度，所以应处处等于 ‖x‖。"""
    return np.linalg.norm(rope_rotate(x, positions), axis=-1)
