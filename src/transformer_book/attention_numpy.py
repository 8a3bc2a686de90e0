"""用 numpy 写的单头自注意力：第 7 讲第 2–4 节的演示都用它。

这里的代码只依赖 numpy，一行对应一个公式，方便和书中的推导逐行对照。PyTorch 版的多头实现见
:mod:`transformer_book.transformer`；两者采用同一个掩码约定：**布尔掩码，True 表示“可以关注”**
（和 ``torch.nn.functional.scaled_dot_product_attention`` 相同）。

形状记号：T 序列长度，d 输入宽度，d_k 查询/键的宽度，d_v 值的宽度。
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """数值稳定的 softmax：先减去每行的最大值，再取指数、归一化。

    Parameters
    ----------
    x : ndarray
        任意形状的注意力分数；``-inf`` 表示该位置被屏蔽。
    axis : int
        沿哪一维归一化。

    Returns
    -------
    ndarray
        与 ``x`` 同形状的概率，沿 ``axis`` 求和为 1。整行都是 ``-inf`` 时返回全 0（而不是 NaN）。
    """
    m = np.max(x, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)  # 整行被屏蔽时最大值是 -inf，换成 0 以免 inf - inf
    e = np.exp(x - m)
    s = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s > 0)


def soft_lookup(query: np.ndarray, keys: np.ndarray, values: np.ndarray, scale: bool = False):
    """注意力作为“软的”字典查找（第 2.1 节）。

    查询和每个键做点积，softmax 成权重，返回值的加权平均。

    Parameters
    ----------
    query : ndarray, 形状 (d_k,)
    keys : ndarray, 形状 (m, d_k)
        m 个键。
    values : ndarray, 形状 (m,) 或 (m, d_v)
    scale : bool
        是否除以 √d_k。第 2.1 节的例子不缩放，以便看清分数大小如何决定 softmax 的“尖锐”程度。

    Returns
    -------
    weights : ndarray, 形状 (m,)
    output : float 或 ndarray, 形状 (d_v,)
    """
    scores = keys @ query  # (m,)
    if scale:
        scores = scores / np.sqrt(keys.shape[-1])
    weights = softmax(scores)
    return weights, weights @ values


@dataclass
class AttentionTrace:
    """一次自注意力计算的全部中间量（第 2.3 节逐一打印它们）。"""

    Q: np.ndarray  # (T, d_k)
    K: np.ndarray  # (T, d_k)
    V: np.ndarray  # (T, d_v)
    scores: np.ndarray  # (T, T)，已除以 √d_k，被屏蔽处为 -inf
    weights: np.ndarray  # (T, T)，每行和为 1
    output: np.ndarray  # (T, d_v)


def attention(Q: np.ndarray, K: np.ndarray, V: np.ndarray, mask: np.ndarray | None = None, scale: bool = True):
    """缩放点积注意力的矩阵形式：softmax(QKᵀ/√d_k) V。

    Parameters
    ----------
    Q : ndarray, 形状 (T, d_k)
    K : ndarray, 形状 (m, d_k)
    V : ndarray, 形状 (m, d_v)
    mask : ndarray of bool, 形状 (T, m), optional（m 是键的个数）
        True 表示第 i 个查询可以关注第 j 个键；False 处的分数置为 -inf，softmax 后权重恰好为 0。
    scale : bool
        是否除以 √d_k（第 3 节解释为什么要除）。

    Returns
    -------
    output : ndarray, 形状 (T, d_v)
    weights : ndarray, 形状 (T, m)
    scores : ndarray, 形状 (T, m)
    """
    scores = Q @ K.T  # (T, m)：第 i 行第 j 列是词 i 对词 j 的分数
    if scale:
        scores = scores / np.sqrt(K.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    weights = softmax(scores, axis=-1)  # (T, m)，按行归一化
    return weights @ V, weights, scores  # (T, d_v)


def self_attention(X: np.ndarray, W_q: np.ndarray, W_k: np.ndarray, W_v: np.ndarray, mask: np.ndarray | None = None) -> AttentionTrace:
    """自注意力：同一个序列既提供查询，也提供键和值（第 2.2–2.3 节）。

    Parameters
    ----------
    X : ndarray, 形状 (T, d)
        每行一个词的向量。
    W_q, W_k : ndarray, 形状 (d, d_k)
    W_v : ndarray, 形状 (d, d_v)
    mask : ndarray of bool, 形状 (T, T), optional
        例如 :func:`causal_mask` 的结果。

    Returns
    -------
    AttentionTrace
        Q、K、V、分数、权重和输出。
    """
    Q, K, V = X @ W_q, X @ W_k, X @ W_v  # (T, d_k), (T, d_k), (T, d_v)
    output, weights, scores = attention(Q, K, V, mask)
    return AttentionTrace(Q, K, V, scores, weights, output)


def self_attention_loop(X: np.ndarray, W_q: np.ndarray, W_k: np.ndarray, W_v: np.ndarray) -> np.ndarray:
    """同一个计算的“逐词循环”写法，一行对应第 2.2 节的一个公式；用来验证矩阵形式。

    Returns
    -------
    ndarray, 形状 (T, d_v)
    """
    T, d_k = X.shape[0], W_q.shape[1]
    outputs = []
    for i in range(T):
        q_i = X[i] @ W_q  # (d_k,)
        e_i = np.array([q_i @ (X[j] @ W_k) / np.sqrt(d_k) for j in range(T)])  # (T,) 分数 e_ij
        alpha_i = softmax(e_i)  # (T,) 权重 α_ij
        o_i = sum(alpha_i[j] * (X[j] @ W_v) for j in range(T))  # (d_v,) 值的加权和
        outputs.append(o_i)
    return np.stack(outputs)  # (T, d_v)


def causal_mask(T: int) -> np.ndarray:
    """因果掩码：下三角为 True（位置 i 只能关注 j ≤ i），形状 (T, T)。"""
    return np.tril(np.ones((T, T), dtype=bool))


def softmax_jacobian(weights: np.ndarray) -> np.ndarray:
    """softmax 的雅可比矩阵 ∂α_i/∂e_j = α_i(δ_ij − α_j)。

    Parameters
    ----------
    weights : ndarray, 形状 (..., m)
        softmax 的输出 α。

    Returns
    -------
    ndarray, 形状 (..., m, m)
    """
    diag = weights[..., :, None] * np.eye(weights.shape[-1])  # (..., m, m)
    return diag - weights[..., :, None] * weights[..., None, :]


@dataclass
class ScalingRow:
    """缩放研究里一个 d_k 的统计量（第 3.3 节的一行）。"""

    d_k: int
    dot_std: float  # 点积 q·k 的标准差（不缩放）
    max_weight_unscaled: float  # 不缩放时，最大注意力权重的平均值
    grad_norm_unscaled: float  # 不缩放时，softmax 雅可比矩阵 Frobenius 范数的平均值
    max_weight_scaled: float
    grad_norm_scaled: float


def scaling_study(d_ks, n_trials: int = 2000, n_keys: int = 10, rng: np.random.Generator | None = None) -> list[ScalingRow]:
    """第 3.3 节的实验：点积是否除以 √d_k，对 softmax 饱和与梯度的影响。

    对每个 d_k 做 ``n_trials`` 次试验：1 个查询、``n_keys`` 个键，每一维都是标准正态随机数。
    “梯度范数”是 softmax 雅可比矩阵的 Frobenius 范数，衡量有多少梯度能从权重传回分数。

    Parameters
    ----------
    d_ks : iterable of int
    n_trials : int
    n_keys : int
    rng : numpy.random.Generator, optional
        默认 ``np.random.default_rng(0)``。

    Returns
    -------
    list of ScalingRow
    """
    rng = rng if rng is not None else np.random.default_rng(0)
    rows = []
    for d_k in d_ks:
        q = rng.standard_normal((n_trials, 1, d_k))  # (trials, 1, d_k)
        k = rng.standard_normal((n_trials, n_keys, d_k))  # (trials, n_keys, d_k)
        dots = np.sum(q * k, axis=-1)  # (trials, n_keys)
        stats = []
        for scores in (dots, dots / np.sqrt(d_k)):
            a = softmax(scores)  # (trials, n_keys)
            jac = softmax_jacobian(a)  # (trials, n_keys, n_keys)
            stats.append((a.max(axis=-1).mean(), np.linalg.norm(jac, axis=(-2, -1)).mean()))
        rows.append(ScalingRow(int(d_k), float(dots.std()), *map(float, stats[0]), *map(float, stats[1])))
    return rows
