"""Transformer 的参考实现：从注意力到生成，一个文件读完。

本书每一章都指向这里，实验也都跑在这里。代码按数据流经模型的顺序排列：

缩放点积注意力 → 多头注意力 → 位置编码（正弦 / 可学习 / RoPE / 无）→ 前馈网络 → Transformer 块
→ 语言模型 ``TransformerLM``（解码器；``causal=False`` 时是编码器）→ 编码器—解码器 ``EncoderDecoder``
→ 生成：一步的抽样规则 ``next_token_distribution``、``generate``（含 KV 缓存）→ 学习率 ``warmup_cosine``
→ 参数计数。

形状记号（全文件通用，与书中的记号表相同）::

    B      批量大小（batch size）
    T      序列长度（sequence length）；有 KV 缓存时键的长度 T_k = 已缓存长度 + T
    S      交叉注意力里记忆（memory，即编码器输出）的长度
    d      模型宽度；构造参数的关键字是 ``d_model``
    h      头数（number of heads），构造参数 ``n_heads``；第 r 个头（r = 1 … h）的投影记作 W^Q_r、W^K_r、W^V_r
    d_h    每头宽度 = d / h（属性 ``d_head``）；多头注意力里查询、键、值的宽度 d_k = d_v = d_h
    L      层数（块数），构造参数 ``n_layers``
    T_max  模型能读的最大长度，即位置表与因果掩码的行数，构造参数 ``max_len``（报错信息里写作 L_max）
    V      词表大小（vocabulary size）

位置从 0 数起：第一个词元在位置 0。向量一律是行向量，矩阵乘在右边：x 的形状是 (…, d)，
Q = X W^Q，前馈网络 FFN(x) = GELU(x W_1 + b_1) W_2 + b_2。``nn.Linear(d_in, d_out)`` 算的也是 x W + b
（W 是书中 d_in × d_out 的矩阵），但它的 ``weight`` 存的是转置 Wᵀ，形状 (d_out, d_in)：例如 ``fc1.weight`` 是 W_1ᵀ。

掩码约定（全包统一）：布尔张量，``True`` = 可以关注（may attend），与
``torch.nn.functional.scaled_dot_product_attention`` 相同。``nn.MultiheadAttention`` 的 ``attn_mask``、
``key_padding_mask`` 极性相反（``True`` = 屏蔽），和它对照时要取反（``~mask``）。
"""

import math
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---------- 1. 注意力 ----------


def scaled_dot_product_attention(q, k, v, mask=None, *, dropout_p=0.0):
    """缩放点积注意力（scaled dot-product attention）：softmax(Q Kᵀ / √d_k) V，多头注意力里每个头的 d_k = d_h。

    书中讲解：第 7 讲第 2–3 节（自注意力与缩放），第 4.3 节（掩码）。

    这是教学用的“可读路径”，测试保证它与 ``F.scaled_dot_product_attention`` 一致。

    Parameters
    ----------
    q : Tensor，形状 (..., T_q, d_h)
        查询（query）。单头时最后一维就是 d_k；多头时是每个头的 d_h。
    k, v : Tensor，形状 (..., T_k, d_h)
        键（key）与值（value）。
    mask : BoolTensor，可广播到 (..., T_q, T_k)，可选
        ``True`` = 可以关注。注意 ``nn.MultiheadAttention`` 的 ``attn_mask`` 极性相反（``True`` = 屏蔽）。
    dropout_p : float
        注意力权重上的 dropout 概率；调用者只在训练时传入非零值。

    Returns
    -------
    output : Tensor，形状 (..., T_q, d_h)
        值的加权平均。
    weights : Tensor，形状 (..., T_q, T_k)
        softmax 之后、dropout 之前的注意力权重。每行和为 1；整行都被屏蔽的行全为 0，对应的输出也是 0。
    """
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (..., T_q, T_k)：注意力分数，softmax 之前
    if mask is not None:
        # 被屏蔽的位置记为 −∞，softmax 之后恰好是 0（不用 −1e9 这样的魔法数）
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if mask is not None:
        # 整行被屏蔽时 softmax(−∞, …, −∞) = NaN；规定这样的行权重全 0、输出为 0（与 PyTorch 的 SDPA 在 CPU 上一致）
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    dropped = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights  # (..., T_q, d_h), (..., T_q, T_k)


class MultiHeadAttention(nn.Module):
    """多头注意力（multi-head attention），可做自注意力，也可做交叉注意力（cross-attention）。

    书中讲解：第 7 讲第 6 节；第 20 章「多头注意力」。

    head_r = Attention(X W^Q_r, X W^K_r, X W^V_r)（r = 1 … h，W^Q_r 等是 d × d_h 的矩阵），
    MHA(X) = Concat(head_1, …, head_h) W^O。实现时不建 h 组小矩阵：h 个 W^Q_r 按列并排正好是一个 d × d 的 W^Q，
    一次矩阵乘法算出所有头的 Q，再把最后一维拆成 (h, d_h)。

    参数布局与 ``nn.MultiheadAttention`` 相同：``in_proj`` 是打包的 d → 3d 线性层，算的是 X [W^Q, W^K, W^V]
    （输出依次是 Q、K、V）；按 ``nn.Linear`` 的惯例，``in_proj.weight`` 存的是它的转置，形状 (3d, d)，
    按行依次是 W^Qᵀ、W^Kᵀ、W^Vᵀ。``out_proj`` 是输出投影 W^O（``out_proj.weight`` 是 W^Oᵀ）。
    把权重搬进 ``nn.MultiheadAttention`` 只需四次复制::

        theirs.in_proj_weight.copy_(ours.in_proj.weight); theirs.in_proj_bias.copy_(ours.in_proj.bias)
        theirs.out_proj.weight.copy_(ours.out_proj.weight); theirs.out_proj.bias.copy_(ours.out_proj.bias)

    Parameters
    ----------
    d_model, n_heads : int
        模型宽度 d 与头数 h（h 须整除 d）。
    dropout : float
        注意力权重上的 dropout 概率。
    attn_impl : {"manual", "sdpa"}
        ``"manual"`` 用上面的可读函数（教学路径，默认）；``"sdpa"`` 调用 PyTorch 的融合实现，更快，
        结果只差浮点误差。需要返回注意力权重时总是走 ``"manual"``。
    """

    def __init__(self, *, d_model, n_heads, dropout=0.0, attn_impl="manual"):
        super().__init__()
        if d_model % n_heads != 0:
            raise ValueError(f"d_model = {d_model} 不能被 n_heads = {n_heads} 整除")
        if attn_impl not in ("manual", "sdpa"):
            raise ValueError(f'attn_impl 只能是 "manual" 或 "sdpa"，收到 {attn_impl!r}')
        self.n_heads, self.d_head = n_heads, d_model // n_heads
        self.dropout, self.attn_impl = dropout, attn_impl
        self.in_proj = nn.Linear(d_model, 3 * d_model)  # X [W^Q, W^K, W^V]：打包成一个 d → 3d 的层
        self.out_proj = nn.Linear(d_model, d_model)  # W^O：把各头的结果混合起来

    def forward(self, x, memory=None, *, mask=None, rope=None, kv_cache=None, need_weights=False):
        """计算多头注意力。

        Parameters
        ----------
        x : Tensor (B, T, d)
            查询来自 x；自注意力时键和值也来自 x。
        memory : Tensor (B, S, d)，可选
            给出时做交叉注意力：键和值来自 memory（编码器的输出）。
        mask : BoolTensor，可广播到 (B, h, T, T_k)，可选
            ``True`` = 可以关注。
        rope : (cos, sin)，各 (T, d_h)，可选
            给出时对 Q、K 施加旋转位置编码（只用于自注意力）。
        kv_cache : dict，可选
            本层的 KV 缓存：``"k"``、``"v"`` 各 (B, h, T_past, d_h)，本步的 K、V 就地接到后面。
        need_weights : bool
            是否返回每个头的注意力权重。

        Returns
        -------
        out : Tensor (B, T, d)
            每个位置的输出。
        weights : Tensor (B, h, T, T_k) 或 None
            每个头的注意力权重；``need_weights=False`` 时为 None。
        """
        B, T, d = x.shape
        if memory is None:  # 自注意力：一次矩阵乘法同时算出 Q、K、V
            q, k, v = self.in_proj(x).split(d, dim=-1)  # 各 (B, T, d)
        else:  # 交叉注意力：打包的 weight 按行依次是 W^Qᵀ、W^Kᵀ、W^Vᵀ，拆成 W^Qᵀ 与 [W^K, W^V]ᵀ（nn.MultiheadAttention 也这样拆）
            w_q, w_kv = self.in_proj.weight.split([d, 2 * d])
            b_q, b_kv = self.in_proj.bias.split([d, 2 * d])
            q = F.linear(x, w_q, b_q)  # (B, T, d)
            k, v = F.linear(memory, w_kv, b_kv).split(d, dim=-1)  # 各 (B, S, d)
        q = q.view(B, T, self.n_heads, self.d_head).transpose(1, 2)  # (B, h, T, d_h)
        k = k.view(B, k.size(1), self.n_heads, self.d_head).transpose(1, 2)  # (B, h, T_k, d_h)
        v = v.view(B, v.size(1), self.n_heads, self.d_head).transpose(1, 2)  # (B, h, T_k, d_h)
        if rope is not None:  # RoPE 只旋转 Q 和 K（V 不带位置信息），在每个头内部各自进行
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        if kv_cache is not None:  # 把本步的 K、V 接在缓存后面；缓存里的 K 已经按各自的位置旋转过
            if "k" in kv_cache:
                k = torch.cat([kv_cache["k"], k], dim=2)  # (B, h, T_past + T, d_h)
                v = torch.cat([kv_cache["v"], v], dim=2)  # (B, h, T_past + T, d_h)
            kv_cache["k"], kv_cache["v"] = k, v
        p = self.dropout if self.training else 0.0
        if need_weights or self.attn_impl == "manual":
            y, weights = scaled_dot_product_attention(q, k, v, mask, dropout_p=p)
        else:
            y, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p), None
        y = y.transpose(1, 2).reshape(B, T, d)  # (B, T, d)：把 h 个头拼回来
        return self.out_proj(y), (weights if need_weights else None)


# ---------- 2. 位置编码：正弦、可学习、RoPE；"none" 就是什么都不加 ----------


def sinusoidal_encoding(max_len, d):
    """正弦位置编码表（Vaswani 等 2017）：PE[p, 2s] = sin(p·ω_s)，PE[p, 2s+1] = cos(p·ω_s)，ω_s = 10000^(−2s/d)，位置 p 从 0 数起。

    书中讲解：第 7 讲第 5.2 节。

    Parameters
    ----------
    max_len, d : int
        表的行数（位置 0 … max_len−1）与编码维度（须为偶数）。

    Returns
    -------
    Tensor，形状 (max_len, d)
        取值都在 [−1, 1] 之间；按原论文交错排列（偶数维 sin，奇数维 cos）。
    """
    if d % 2 != 0:
        raise ValueError(f"正弦位置编码要求 d 为偶数，收到 d = {d}")
    omega = 1.0 / 10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d)  # (d/2,)
    angles = torch.arange(max_len, dtype=torch.float32)[:, None] * omega  # (max_len, d/2)
    return torch.stack([angles.sin(), angles.cos()], dim=-1).view(max_len, d)  # (max_len, d)


class LearnedPositionEmbedding(nn.Module):
    """可学习的位置嵌入：一张 T_max × d 的表，每个位置一行（BERT、GPT-2 的做法）；位置 0 是第 0 行。

    书中讲解：第 7 讲第 5.3 节。

    Parameters
    ----------
    max_len, d_model : int
        表的行数 T_max（位置 T_max 及以后没有定义，请求时报错；报错信息里写作 L_max）与模型宽度 d。
    """

    def __init__(self, *, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.table = nn.Embedding(max_len, d_model)

    def forward(self, length, offset=0):
        """位置 offset … offset+length−1 的向量，形状 (T, d)；offset 在 KV 缓存生成时等于已缓存的长度。"""
        if offset + length > self.max_len:
            raise ValueError(
                f"可学习的位置表只有 L_max = {self.max_len} 个位置，"
                f"请求的长度是 {offset + length}（位置 {offset} 到 {offset + length - 1}）"
            )
        return self.table.weight[offset:offset + length]  # (T, d)：表的第 offset … offset+T−1 行


def rope_tables(max_len, d_head, base=10000.0):
    """RoPE 的 cos / sin 表：位置 m 的第 s 对维度转过角度 m·θ_s，θ_s = base^(−2s/d_h)。

    Parameters
    ----------
    max_len, d_head : int
        位置个数与每头宽度 d_h（须为偶数）。
    base : float
        频率的底，沿用正弦编码的 10000。

    Returns
    -------
    cos, sin : Tensor，各形状 (max_len, d_h)
        前一半与后一半相同（第 s 维与第 s+d_h/2 维共用 θ_s），配合 ``apply_rope`` 的半分配对。
    """
    if d_head % 2 != 0:
        raise ValueError(f"RoPE 要求每头宽度 d_h 为偶数，收到 d_h = {d_head}")
    theta = 1.0 / base ** (torch.arange(0, d_head, 2, dtype=torch.float32) / d_head)  # (d_h/2,)
    angles = torch.arange(max_len, dtype=torch.float32)[:, None] * theta  # (max_len, d_h/2)
    angles = torch.cat([angles, angles], dim=-1)  # (max_len, d_h)
    return angles.cos(), angles.sin()


def apply_rope(x, cos, sin):
    """旋转位置编码（RoPE，Su 等 2021）：把每对维度按位置转一个角度。

    配对方式选“半分”：第 i 维与第 i+d_h/2 维配成一对（GPT-NeoX、Hugging Face 的 LLaMA 实现），
    而不是原论文与 Meta 的 LLaMA 代码里的“相邻两维 (2i, 2i+1)”。两者只差一个固定的维度置换
    （把 W^Q、W^K 的输出维度重新排列即可互换），模型能力完全相同；半分写法只需切片和拼接。

    Parameters
    ----------
    x : Tensor，形状 (..., T, d_h)
        每个头的查询或键。
    cos, sin : Tensor，形状 (T, d_h)
        ``rope_tables`` 中 x 各位置对应的行，例如位置从 offset 开始时取 ``cos[offset:offset + T]``。

    Returns
    -------
    Tensor，形状与 x 相同
        旋转后的向量；长度（范数）不变，旋转后的 q·k 只依赖两者的位置差。
    """
    x1, x2 = x.chunk(2, dim=-1)  # 各 (..., T, d_h/2)
    rotated = torch.cat([-x2, x1], dim=-1)  # (..., T, d_h)：每对 (a, b) 变成 (−b, a)，即转 90°
    return x * cos + rotated * sin  # 每对 (a, b) → (a·cosα − b·sinα, b·cosα + a·sinα)，α = mθ_s


# ---------- 3. 前馈网络与 Transformer 块 ----------


class FeedForward(nn.Module):
    """逐位置的前馈网络（feed-forward network）：d → 4d → GELU → d。

    书中讲解：第 7 讲第 4.2 节与第 7.3 节；第 20 章「注意力之后，为什么还要前馈网络」。

    按行向量写（与原论文、与书中相同）：FFN(x) = GELU(x W_1 + b_1) W_2 + b_2，W_1 ∈ ℝ^{d×4d}，W_2 ∈ ℝ^{4d×d}。
    ``nn.Linear`` 存的是转置：``fc1.weight`` 是 W_1ᵀ，形状 (4d, d)，它的第 k 行是 W_1 的第 k 列
    （Geva 等 2021 所说的第 k 个“键”）；``fc2.weight`` 是 W_2ᵀ，形状 (d, 4d)，它的第 k 列是 W_2 的第 k 行
    （第 k 个“值”）。用列向量的文献写成 W_2 GELU(W_1 x + b_1) + b_2，那里的 W_1、W_2 恰好是 ``fc1.weight``、
    ``fc2.weight``。

    Parameters
    ----------
    d_model : int
        模型宽度 d；隐藏层宽度为 4d。
    """

    def __init__(self, *, d_model):
        super().__init__()
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)

    def forward(self, x):
        """x: (B, T, d) → (B, T, d)。"""
        # GELU 用精确形式 x·Φ(x)（F.gelu 的默认）：与 nn.TransformerEncoderLayer(activation="gelu") 相同，
        # 测试才能在浮点舍入以内对照；GPT-2 用的是 tanh 近似，两者处处相差不到 1e-3。
        return self.fc2(F.gelu(self.fc1(x)))  # GELU(x W_1 + b_1) W_2 + b_2：(B, T, d) → (B, T, 4d) → (B, T, d)


class TransformerBlock(nn.Module):
    """一个 Transformer 块：自注意力子层 +（可选）交叉注意力子层 + 前馈子层，各带残差与层归一化。

    Parameters
    ----------
    d_model, n_heads : int
        模型宽度 d 与头数 h。
    dropout : float
        注意力权重与每个子层输出上的 dropout 概率。
    norm : {"pre", "post"}
        ``"pre"``：每个子层 F 都是 x + F(LN(x))，各子层有自己的 LN（GPT-2 及以后的大多数模型，本书默认）；
        ``"post"``：LN(x + F(x))（原始 Transformer，2017）。
    cross_attention : bool
        True 时在自注意力与前馈之间加一个交叉注意力子层（编码器—解码器里的解码器块）。
    attn_impl : {"manual", "sdpa"}
        见 ``MultiHeadAttention``。
    """

    def __init__(self, *, d_model, n_heads, dropout=0.0, norm="pre", cross_attention=False, attn_impl="manual"):
        super().__init__()
        if norm not in ("pre", "post"):
            raise ValueError(f'norm 只能是 "pre" 或 "post"，收到 {norm!r}')
        self.norm = norm
        # 层归一化：ε = 1e-5（PyTorch 与 GPT-2 的默认值）；方差用有偏估计（除以 d 而非 d−1），与第 7.2 节公式一致
        self.ln1 = nn.LayerNorm(d_model, eps=1e-5)
        self.attn = MultiHeadAttention(d_model=d_model, n_heads=n_heads, dropout=dropout, attn_impl=attn_impl)
        if cross_attention:
            self.ln_cross = nn.LayerNorm(d_model, eps=1e-5)
            self.cross_attn = MultiHeadAttention(d_model=d_model, n_heads=n_heads, dropout=dropout,
                                                 attn_impl=attn_impl)
        else:
            self.cross_attn = None
        self.ln2 = nn.LayerNorm(d_model, eps=1e-5)
        self.ffn = FeedForward(d_model=d_model)
        self.drop = nn.Dropout(dropout)

    def _add(self, x, y, ln):
        """把子层输出 y 接回主干 x：Pre-LN 直接相加；Post-LN 相加之后再归一化。"""
        x = x + self.drop(y)
        return x if self.norm == "pre" else ln(x)

    def forward(self, x, *, mask=None, rope=None, kv_cache=None, memory=None, memory_mask=None,
                need_weights=False):
        """一个块的前向计算。

        Parameters
        ----------
        x : Tensor (B, T, d)
        mask, rope, kv_cache, need_weights :
            自注意力的参数，见 ``MultiHeadAttention.forward``。
        memory : Tensor (B, S, d)
            编码器输出，供交叉注意力使用：有交叉注意力的块必须给，没有的块不能给。
        memory_mask : BoolTensor，可广播到 (B, h, T, S)，可选
            交叉注意力的掩码（通常只屏蔽源句的填充位置）。

        Returns
        -------
        x : Tensor (B, T, d)
        self_weights, cross_weights : Tensor (B, h, T, T_k) 与 (B, h, T, S)，或 None
        """
        if (memory is None) != (self.cross_attn is None):
            raise ValueError("带交叉注意力的块需要 memory（编码器的输出）" if memory is None
                             else "这个块没有交叉注意力子层，不能接收 memory")
        pre = self.norm == "pre"  # Pre-LN：子层读 LN(x)，结果加回 x；Post-LN：子层读 x，相加之后再 LN
        a, self_weights = self.attn(self.ln1(x) if pre else x, mask=mask, rope=rope, kv_cache=kv_cache,
                                    need_weights=need_weights)
        x = self._add(x, a, self.ln1)
        cross_weights = None
        if self.cross_attn is not None:
            c, cross_weights = self.cross_attn(self.ln_cross(x) if pre else x, memory, mask=memory_mask,
                                               need_weights=need_weights)
            x = self._add(x, c, self.ln_cross)
        x = self._add(x, self.ffn(self.ln2(x) if pre else x), self.ln2)
        return x, self_weights, cross_weights


# ---------- 4. 模型：语言模型（解码器 / 编码器）与编码器—解码器 ----------


class TransformerLM(nn.Module):
    """Transformer 语言模型：词嵌入 + 位置 → L 个块 →（Pre-LN 时）最后的层归一化 → 输出层。

    书中讲解：第 7 讲第 7–8 节（结构）、第 11 节（实验）；第 20 章「一个解码器块的完整旅程」。

    ``causal=True`` 是 GPT 式的解码器；``causal=False`` 是 BERT 式的编码器（双向）。

    Parameters
    ----------
    vocab_size, d_model, n_heads, n_layers : int
        词表大小 V、模型宽度 d、头数 h、层数（块数）L。
    max_len : int
        最大序列长度 T_max（报错信息里写作 L_max）；任何位置编码下超过它都报错（``generate`` 会先裁剪上下文）。
    pos : {"learned", "sinusoidal", "rope", "none"}
        位置编码：可学习的位置表、正弦表（词嵌入先乘 √d 再加上正弦表，同原论文）、每层注意力里的 RoPE、不加位置信息。
    causal : bool
        是否加因果掩码（位置 t 只能看到 0…t）。
    norm : {"pre", "post"}
        见 ``TransformerBlock``。
    tie_weights : bool
        输出层与词嵌入共用同一个矩阵（同一个 Parameter 对象）。
    dropout : float
        嵌入之后、注意力权重、每个子层输出上的 dropout 概率。
    cross_attention : bool
        True 时每个块带交叉注意力子层（``EncoderDecoder`` 的解码器用）。
    attn_impl : {"manual", "sdpa"}
        见 ``MultiHeadAttention``。
    """

    def __init__(self, *, vocab_size, d_model, n_heads, n_layers, max_len, pos="learned", causal=True,
                 norm="pre", tie_weights=True, dropout=0.0, cross_attention=False, attn_impl="manual"):
        super().__init__()
        # 构造参数原样留下：保存训练好的模型时与参数一起存，恢复时原样传回（transformer_book.checkpoint）
        self.init_kwargs = dict(vocab_size=vocab_size, d_model=d_model, n_heads=n_heads, n_layers=n_layers,
                                max_len=max_len, pos=pos, causal=causal, norm=norm, tie_weights=tie_weights,
                                dropout=dropout, cross_attention=cross_attention, attn_impl=attn_impl)
        if pos not in ("learned", "sinusoidal", "rope", "none"):
            raise ValueError(f'pos 只能是 "learned"、"sinusoidal"、"rope" 或 "none"，收到 {pos!r}')
        self.max_len, self.pos, self.causal, self.d_model = max_len, pos, causal, d_model
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        if pos == "learned":
            self.pos_emb = LearnedPositionEmbedding(max_len=max_len, d_model=d_model)
        elif pos == "sinusoidal":
            self.register_buffer("sinusoidal_table", sinusoidal_encoding(max_len, d_model), persistent=False)
        elif pos == "rope":
            rope_cos, rope_sin = rope_tables(max_len, d_model // n_heads)
            self.register_buffer("rope_cos", rope_cos, persistent=False)  # (T_max, d_h)
            self.register_buffer("rope_sin", rope_sin, persistent=False)  # (T_max, d_h)
        if causal:  # 下三角为 True：第 i 行（查询位置 i）可以关注第 0…i 列
            causal_mask = torch.ones(max_len, max_len, dtype=torch.bool).tril()
            self.register_buffer("causal_mask", causal_mask, persistent=False)  # (T_max, T_max)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(
            TransformerBlock(d_model=d_model, n_heads=n_heads, dropout=dropout, norm=norm,
                             cross_attention=cross_attention, attn_impl=attn_impl)
            for _ in range(n_layers)
        )
        # Pre-LN 的主干上没有归一化，最后补一个 LN；Post-LN 的每个块已经以 LN 结尾
        self.ln_f = nn.LayerNorm(d_model, eps=1e-5) if norm == "pre" else nn.Identity()
        self.head = nn.Linear(d_model, vocab_size, bias=False)
        self._init_gpt2(n_residual_branches=(3 if cross_attention else 2) * n_layers)
        if tie_weights:  # 权重共享（Press & Wolf 2017）：输出层与词嵌入是同一个 Parameter 对象
            self.head.weight = self.tok_emb.weight

    def _init_gpt2(self, n_residual_branches):
        """nanoGPT 写法的“GPT-2 式初始化”：线性层与嵌入（位置表也一样）~ N(0, 0.02²)，偏置为 0，LayerNorm 保持
        γ = 1、β = 0；残差分支的最后一层再除以 √(残差分支数)。OpenAI 公开的 GPT-2 代码里位置表用 0.01，也没有这一步缩放。"""
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)
        # 残差分支的输出投影（注意力的 out_proj、前馈的 fc2）再缩小 1/√(2L)：每个块往主干上加两个分支，
        # L 层共 2L 个，初始化时它们近似独立、方差相加；这样主干的方差不随层数增长（有交叉注意力时是 3L 个）。
        for name, p in self.named_parameters():
            if name.endswith(("out_proj.weight", "fc2.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(n_residual_branches))

    def new_kv_cache(self):
        """一个空的 KV 缓存：每层一个 dict，``generate`` 与 ``forward(..., kv_cache=...)`` 就地填充。"""
        return [{} for _ in self.blocks]

    def features(self, idx, pad_mask=None, *, memory=None, memory_pad_mask=None, kv_cache=None,
                 need_weights=False):
        """最后一层（含最后的 LN）的隐藏状态，以及每层的注意力权重。

        Parameters
        ----------
        idx : LongTensor (B, T)
            词元编号。
        pad_mask : BoolTensor (B, T)，可选
            ``True`` = 真实词元（可以被关注），``False`` = 填充。不能与 ``kv_cache`` 同时使用。
        memory, memory_pad_mask : Tensor (B, S, d) 与 BoolTensor (B, S)，可选
            编码器输出及源句的填充掩码（仅 ``cross_attention=True`` 的模型）。
        kv_cache : list[dict]，可选
            ``new_kv_cache()`` 的返回值；本段的位置从已缓存的长度开始编号。
        need_weights : bool
            是否收集注意力权重。

        Returns
        -------
        h : Tensor (B, T, d)
        self_weights, cross_weights : list[Tensor]
            每层一个 (B, h, T, T_k) 与 (B, h, T, S)；不收集或没有交叉注意力时为空列表。
        """
        B, T = idx.shape
        offset = kv_cache[0]["k"].size(2) if kv_cache is not None and "k" in kv_cache[0] else 0
        if offset + T > self.max_len:
            raise ValueError(f"序列长度 {offset + T} 超过了模型的最大长度 L_max = max_len = {self.max_len}")
        if kv_cache is not None and pad_mask is not None:
            raise ValueError("pad_mask 不能与 kv_cache 同时使用")
        x = self.tok_emb(idx)  # (B, T, d)
        if self.pos == "learned":
            x = x + self.pos_emb(T, offset)  # (T, d) 广播到 (B, T, d)
        elif self.pos == "sinusoidal":
            # 变体选择：像原论文（Vaswani 等 §3.4）那样先把词嵌入乘以 √d 再加正弦表。GPT-2 式初始化下词向量
            # 的范数只有约 0.02·√d，而正弦表每行的范数是 √(d/2)，不放大的话位置信号远远压过词的信号。
            x = x * math.sqrt(self.d_model) + self.sinusoidal_table[offset:offset + T]  # (B, T, d)
        rope = None
        if self.pos == "rope":  # RoPE 不加在输入上，而是把本段位置的 cos/sin 行交给每层的注意力
            rope = (self.rope_cos[offset:offset + T], self.rope_sin[offset:offset + T])  # 各 (T, d_h)
        x = self.drop(x)
        mask = None  # 自注意力掩码，True = 可以关注
        if self.causal and T > 1:  # 查询位置 offset…offset+T−1，键位置 0…offset+T−1（有缓存时“右下对齐”）
            mask = self.causal_mask[offset:offset + T, :offset + T]  # (T, T_k)；T = 1 时整行可见，省掉
        if pad_mask is not None:  # 只屏蔽作为“键”的填充位置；填充位置自己的输出没有意义，由损失忽略
            keys = pad_mask[:, None, None, :]  # (B, 1, 1, T)
            mask = keys if mask is None else mask & keys  # (B, 1, T, T)
        memory_mask = None if memory_pad_mask is None else memory_pad_mask[:, None, None, :]  # (B, 1, 1, S)
        self_weights, cross_weights = [], []
        for i, block in enumerate(self.blocks):
            x, w, cw = block(x, mask=mask, rope=rope, kv_cache=None if kv_cache is None else kv_cache[i],
                             memory=memory, memory_mask=memory_mask, need_weights=need_weights)
            self_weights += [w] if w is not None else []
            cross_weights += [cw] if cw is not None else []
        return self.ln_f(x), self_weights, cross_weights

    def forward(self, idx, pad_mask=None, *, kv_cache=None):
        """计算每个位置上下一个词元的 logits（词表上每一项的未归一化分数，softmax 之前）。

        Parameters
        ----------
        idx, pad_mask, kv_cache :
            见 ``features``；``pad_mask`` 中 ``True`` = 真实词元，``False`` = 填充。

        Returns
        -------
        logits : Tensor (B, T, V)
        """
        h, _, _ = self.features(idx, pad_mask, kv_cache=kv_cache)
        return self.head(h)  # (B, T, V)

    def forward_with_attention(self, idx, pad_mask=None):
        """同 ``forward``，另外返回每层每个头的注意力权重（总是走可读的注意力路径）。

        Returns
        -------
        logits : Tensor (B, T, V)
        attention : list[Tensor]
            每层一个 (B, h, T, T)，``attention[layer][b, head, t]`` 是位置 t 分给各位置的权重。
        """
        h, weights, _ = self.features(idx, pad_mask, need_weights=True)
        return self.head(h), weights  # (B, T, V)，每层 (B, h, T, T)


class EncoderDecoder(nn.Module):
    """编码器—解码器（原始 Transformer 的结构）：双向编码器读源句，带交叉注意力的因果解码器写目标句。

    书中讲解：第 7 讲第 8.3 节。

    两边都是 ``TransformerLM``，由同样的块搭成。编码器的输出层与它的词嵌入共享（不增加参数），
    这里只用它的 ``features``。

    Parameters
    ----------
    src_vocab, tgt_vocab : int
        源语言与目标语言的词表大小。
    d_model, n_heads, n_layers, max_len : int
        两边共用的宽度、头数、层数（每边 n_layers 个块）与最大长度。
    pos, norm, dropout, attn_impl :
        见 ``TransformerLM``；位置编码默认用原论文的正弦表。
    tie_weights : bool
        解码器的输出层是否与目标语言词嵌入共享。
    """

    def __init__(self, *, src_vocab, tgt_vocab, d_model, n_heads, n_layers, max_len, pos="sinusoidal",
                 norm="pre", tie_weights=True, dropout=0.0, attn_impl="manual"):
        super().__init__()
        common = dict(d_model=d_model, n_heads=n_heads, n_layers=n_layers, max_len=max_len, pos=pos,
                      norm=norm, dropout=dropout, attn_impl=attn_impl)
        self.encoder = TransformerLM(vocab_size=src_vocab, causal=False, tie_weights=True, **common)
        self.decoder = TransformerLM(vocab_size=tgt_vocab, causal=True, tie_weights=tie_weights,
                                     cross_attention=True, **common)

    def forward(self, src, tgt, src_pad_mask=None, tgt_pad_mask=None):
        """教师强制（teacher forcing）下目标句每个位置的 logits。

        Parameters
        ----------
        src, tgt : LongTensor (B, S) 与 (B, T)
            源句与目标句（右移后的输入）。
        src_pad_mask, tgt_pad_mask : BoolTensor (B, S) 与 (B, T)，可选
            ``True`` = 真实词元。源句的填充在编码器自注意力与解码器交叉注意力里都被屏蔽。

        Returns
        -------
        logits : Tensor (B, T, V_tgt)
        """
        return self.forward_with_attention(src, tgt, src_pad_mask, tgt_pad_mask, need_weights=False)[0]

    def forward_with_attention(self, src, tgt, src_pad_mask=None, tgt_pad_mask=None, *, need_weights=True):
        """同 ``forward``，另外返回注意力权重 ``{"encoder": [...], "decoder": [...], "cross": [...]}``：
        每层一个 (B, h, S, S)、(B, h, T, T)、(B, h, T, S)（``need_weights=False`` 时都是空列表）。"""
        memory, enc_w, _ = self.encoder.features(src, src_pad_mask, need_weights=need_weights)  # (B, S, d)
        h, dec_w, cross_w = self.decoder.features(tgt, tgt_pad_mask, memory=memory, memory_pad_mask=src_pad_mask,
                                                  need_weights=need_weights)  # (B, T, d)
        return self.decoder.head(h), {"encoder": enc_w, "decoder": dec_w, "cross": cross_w}  # (B, T, V_tgt)


# ---------- 5. 生成 ----------


def next_token_distribution(logits, *, temperature=1.0, top_k=None, top_p=None):
    """一步解码真正用来抽样的分布：``generate`` 每一步都从它里面抽下一个词元。

    书中讲解：第 20 章「并行训练，顺序生成」（解码策略）。

    温度 0 是贪心：概率全部给 logits 最高的词元。否则先把 logits 除以温度；top-k 只留 logits 最高的 k 个（k 超过词表时取
    整个词表）；top-p（核采样）按概率从高到低累加，留下“累计概率刚好达到 p”的最小集合（概率最高的词总会留下）。

    Parameters
    ----------
    logits : Tensor (..., V)
        最后一个位置的 logits（未经温度缩放）。

    Returns
    -------
    Tensor (..., V)
        概率，被排除的词元为 0。
    """
    if temperature == 0:  # 贪心解码
        return F.one_hot(logits.argmax(dim=-1), logits.size(-1)).to(logits.dtype)
    logits = logits / temperature
    if top_k is not None:  # 只保留 logits 最高的 k 个
        kth_best = torch.topk(logits, min(top_k, logits.size(-1)), dim=-1).values[..., -1:]  # (..., 1)
        logits = logits.masked_fill(logits < kth_best, float("-inf"))
    if top_p is not None:  # 核采样：保留累计概率刚好达到 p 的最小词集合
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (..., V)
        probs = torch.softmax(sorted_logits, dim=-1)
        outside = probs.cumsum(dim=-1) - probs >= top_p  # 排在它前面的词已经凑够 p
        outside[..., 0] = False  # 概率最高的词总会留下（top_p 很小时即为贪心）
        sorted_logits = sorted_logits.masked_fill(outside, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, order, sorted_logits)  # 还原词表顺序
    return torch.softmax(logits, dim=-1)  # (..., V)


def generate(model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None, generator=None,
             use_cache=True):
    """自回归地续写 ``max_new_tokens`` 个词元。

    书中讲解：第 20 章「并行训练，顺序生成」（解码策略与 KV 缓存）。

    上下文超过 ``model.max_len`` 时只保留最后 max_len 个词元（位置重新从 0 编号）。有缓存时，
    此后每一步都从裁剪后的窗口重建缓存，因此两条路径给出的词元完全相同，只是超过 max_len 后不再加速。

    Parameters
    ----------
    model : TransformerLM
        因果模型（``causal=True``）；生成期间切到 ``eval()``，结束后恢复原来的模式。
    idx : LongTensor (B, T)
        提示（prompt）。
    max_new_tokens : int
        要生成的词元个数。
    temperature : float
        温度；0 表示贪心解码（每步取 logits 最高的词）。
    top_k, top_p : int 与 float，可选
        只从 logits 最高的 k 个词里采样（k 大于词表时等于整个词表）；核采样（nucleus sampling）的累计概率阈值。
    generator : torch.Generator，可选
        采样用的随机数发生器；给定种子即可复现。
    use_cache : bool
        是否使用 KV 缓存。

    Returns
    -------
    idx : LongTensor (B, T + max_new_tokens)
    """
    return generate_with_logits(model, idx, max_new_tokens, temperature=temperature, top_k=top_k, top_p=top_p,
                                generator=generator, use_cache=use_cache)[0]


@torch.inference_mode()  # 比 no_grad 更省：生成时不需要任何自动求导的记账
def generate_with_logits(model, idx, max_new_tokens, *, temperature=1.0, top_k=None, top_p=None, generator=None,
                         use_cache=True):
    """同 ``generate``，另外返回每一步最后一个位置的 logits（除以温度之前）。

    Returns
    -------
    idx : LongTensor (B, T + max_new_tokens)
    logits : Tensor (B, max_new_tokens, V)
    """
    if not model.causal:
        raise ValueError("generate 需要因果模型（causal=True）；编码器能看到右边，不能逐词生成")
    if temperature < 0:
        raise ValueError(f"temperature 不能为负，收到 {temperature}")
    was_training = model.training
    model.eval()
    cache, step_logits = None, []
    try:
        for _ in range(max_new_tokens):
            if use_cache and cache is not None and idx.size(1) <= model.max_len:
                logits = model(idx[:, -1:], kv_cache=cache)  # 只喂最新的一个词元：(B, 1, V)
            else:  # 第一步、不用缓存、或超过 max_len 需要裁剪：整段重新计算
                cache = model.new_kv_cache() if use_cache else None
                logits = model(idx[:, -model.max_len:], kv_cache=cache)  # (B, T, V)
            logits = logits[:, -1, :]  # (B, V)
            step_logits.append(logits)
            if temperature == 0:  # 贪心：直接取 logits 最高的词元，不抽样
                next_id = logits.argmax(dim=-1, keepdim=True)  # (B, 1)
            else:
                probs = next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)  # (B, V)
                next_id = torch.multinomial(probs, num_samples=1, generator=generator)  # (B, 1)
            idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
    finally:
        model.train(was_training)
    return idx, torch.stack(step_logits, dim=1)  # (B, max_new_tokens, V)


# ---------- 6. 训练与参数量 ----------


def warmup_cosine(step, *, warmup_steps, total_steps, max_lr, min_lr=0.0):
    """学习率预热（warm-up）+ 余弦衰减（cosine decay）。

    第 0 步为 0（若 warmup_steps > 0），线性升到第 warmup_steps 步的 max_lr，再按余弦降到第 total_steps
    步的 min_lr，之后保持 min_lr。配合 ``torch.optim.lr_scheduler.LambdaLR`` 时除以 max_lr 即可。

    Parameters
    ----------
    step : int
        当前步数（从 0 开始）。
    warmup_steps, total_steps : int
        预热步数与衰减结束的步数，0 ≤ warmup_steps ≤ total_steps。
    max_lr, min_lr : float
        最大与最小学习率。

    Returns
    -------
    float
    """
    if step < 0 or not 0 <= warmup_steps <= total_steps:
        raise ValueError(f"需要 step ≥ 0 且 0 ≤ warmup_steps ≤ total_steps，"
                         f"收到 step = {step}、warmup_steps = {warmup_steps}、total_steps = {total_steps}")
    if step < warmup_steps:
        return max_lr * step / warmup_steps
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)  # 从 0 到 1
    return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + math.cos(math.pi * progress))


def count_parameters(module):
    """参数个数，按对象身份去重：共享的权重（如权重共享时的词嵌入与输出层）只算一次。

    书中讲解：第 7 讲第 7.5 节。

    Parameters
    ----------
    module : nn.Module

    Returns
    -------
    int
    """
    unique = {id(p): p for _, p in module.named_parameters(remove_duplicate=False)}
    return sum(p.numel() for p in unique.values())


class BlockParameters(NamedTuple):
    """一个块的参数个数，按部分：注意力、前馈网络、两个层归一化，以及合计。"""

    attention: int
    ffn: int
    layer_norms: int
    total: int


def block_parameters(d):
    """一个 Transformer 块（含偏置，不含交叉注意力）的参数个数：合计 12d² + 13d。

    书中讲解：第 7 讲第 7.5 节。

    注意力 4d² + 4d（打包的 Q、K、V 为 3d² + 3d，输出投影 d² + d），
    前馈 8d² + 5d（d → 4d 为 4d² + 4d，4d → d 为 4d² + d），两个层归一化 4d。

    Parameters
    ----------
    d : int
        模型宽度。

    Returns
    -------
    BlockParameters
    """
    attention, ffn, layer_norms = 4 * d * d + 4 * d, 8 * d * d + 5 * d, 4 * d
    return BlockParameters(attention, ffn, layer_norms, attention + ffn + layer_norms)

