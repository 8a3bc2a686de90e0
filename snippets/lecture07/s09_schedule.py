"""第 9 节：学习率预热（warm-up）+ 余弦退火（cosine decay），即 ``warmup_cosine``。

超参数就是第 11 节训练迷你 GPT 的设置（``transformer_book.lecture07.experiments`` 的 ``TRAIN_CONFIG`` 与
``N_TRAIN``）：峰值 3×10⁻³，预热 200 步，最小学习率 0；20,000 个训练句子、每批 64 句、8 轮，
总步数 = 8 × ⌈20000 / 64⌉。作为对照，画出原论文的“预热后按 1/√step 衰减”，缩放到同一个峰值：
lr = 峰值 × min(step / 预热步数, √(预热步数 / step))。
"""

import math

from transformer_book.book import Figure, Value
from transformer_book.lecture07.experiments import N_TRAIN
from transformer_book.lecture07.experiments import TRAIN_CONFIG as CONFIG
from transformer_book.plotting import new_figure
from transformer_book.transformer import warmup_cosine


def inverse_sqrt(step, *, warmup_steps, max_lr):
    """原始 Transformer 的学习率形状（Vaswani 等 2017），峰值缩放成 max_lr。"""
    return max_lr * min(step / warmup_steps, math.sqrt(warmup_steps / step)) if step > 0 else 0.0


def compute():
    total = CONFIG.epochs * math.ceil(N_TRAIN / CONFIG.batch_size)
    warm, peak = CONFIG.optim.warmup_steps, CONFIG.optim.lr

    def lr(step):
        return warmup_cosine(step, warmup_steps=warm, total_steps=total, max_lr=peak, min_lr=CONFIG.optim.min_lr)

    steps = sorted(set(range(0, total + 1, 8)) | {warm, total})
    fig, ax = new_figure(width=6.4, height=3.4)
    ax.plot(steps, [lr(s) * 1e3 for s in steps], "-", label="预热 + 余弦退火（warmup_cosine）")
    ax.plot(steps, [inverse_sqrt(s, warmup_steps=warm, max_lr=peak) * 1e3 for s in steps], "--",
            label="预热 + 按 1/√step 衰减（原论文）")
    ax.axvline(warm, color="gray", lw=0.8, ls=":")
    ax.text(warm + 30, peak * 1e3 * 1.02, f"预热结束（第 {warm} 步）", fontsize=8, va="bottom")
    ax.set(xlabel="训练步数", ylabel="学习率（×10⁻³）", xlim=(0, total), ylim=(0, peak * 1e3 * 1.15))
    ax.legend(loc="upper right")

    middle = (warm + total) // 2
    milli = 1e3  # 正文里的学习率以 10⁻³ 为单位，和图的纵轴一致
    return {
        "figure": Figure(fig),
        "n_train": Value(N_TRAIN, ",d"),
        "batch_size": Value(CONFIG.batch_size, "d"),
        "epochs": Value(CONFIG.epochs, "d"),
        "total_steps": Value(total, ",d"),
        "warmup_steps": Value(warm, "d"),
        "peak_lr_milli": Value(peak * milli, "g"),
        "lr_first_step": Value(lr(0), "g"),
        "lr_half_warmup_milli": Value(lr(warm // 2) * milli, ".2f"),
        "middle_step": Value(middle, ",d"),
        "lr_middle_milli": Value(lr(middle) * milli, ".2f"),
        "lr_last": Value(lr(total), "g"),
        "inverse_sqrt_last_milli": Value(inverse_sqrt(total, warmup_steps=warm, max_lr=peak) * milli, ".2f"),
        "inverse_sqrt_last_ratio": Value(inverse_sqrt(total, warmup_steps=warm, max_lr=peak) / peak, ".0%"),
    }
