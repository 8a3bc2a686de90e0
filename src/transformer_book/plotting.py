"""画图的统一设置：中文字体与图的尺寸。

书里的每张图都用这里的 :func:`new_figure` 创建。中文字体是随包附带的 Noto Sans CJK SC 子集
（GB 2312 字符集，SIL OFL 1.1 许可，见 ``fonts/OFL.txt``），用 ``fontManager.addfont`` 注册，
所以新机器上不装系统字体也能正确显示中文标签。拉丁字母、数字和数学符号仍用 matplotlib 自带的
DejaVu Sans；DejaVu 里没有的字（汉字）由 matplotlib 的字体回退机制交给 Noto。
"""

from __future__ import annotations

from pathlib import Path

import matplotlib
import matplotlib.pyplot as plt  # the backend is the caller's choice: Agg in the build, inline in Jupyter
from matplotlib import font_manager

FONT_PATH = Path(__file__).resolve().parent / "fonts" / "NotoSansCJKsc-Regular-GB2312.otf"
# 书的构建引擎据此把字体文件算进缓存键：换了字体，图会重画。
BOOK_DATA_FILES = [str(FONT_PATH)]

_CJK_FAMILY: str | None = None


def setup_fonts() -> str:
    """注册中文字体并设为回退字体，返回它的字体族名（可重复调用）。"""
    global _CJK_FAMILY
    if _CJK_FAMILY is None:
        font_manager.fontManager.addfont(str(FONT_PATH))
        _CJK_FAMILY = font_manager.FontProperties(fname=str(FONT_PATH)).get_name()
    # 两个字体族直接写进 font.family，matplotlib 才会逐字回退（写成 sans-serif 时只取第一个）。
    matplotlib.rcParams["font.family"] = ["DejaVu Sans", _CJK_FAMILY]
    matplotlib.rcParams["axes.unicode_minus"] = True
    return _CJK_FAMILY


def new_figure(ncols: int = 1, nrows: int = 1, width: float = 6.4, height: float = 3.6, **kwargs):
    """创建一张书中的图，返回 ``(fig, axes)``；已设置好中文字体和统一的样式。"""
    setup_fonts()
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, height), layout="constrained", **kwargs)
    return fig, axes


def attention_heatmap(ax, weights, row_labels, col_labels, *, title: str = "", annotate: bool = True, vmax: float = 1.0):
    """把一个注意力权重矩阵画成热图：行是查询（谁在看），列是键（被看的位置）。

    Parameters
    ----------
    ax : matplotlib Axes
    weights : array, 形状 (n_q, n_k)
        每行是一个查询的注意力分布。
    row_labels, col_labels : 字符串序列
        行、列的标签（词）。
    title : str
        子图标题。
    annotate : bool
        是否在每格里写出权重（保留两位小数）。
    vmax : float
        颜色刻度的上限。

    Returns
    -------
    matplotlib.image.AxesImage
    """
    import numpy as np

    w = np.asarray(weights, dtype=float)
    image = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=vmax)
    ax.set_xticks(range(w.shape[1]), list(col_labels))
    ax.set_yticks(range(w.shape[0]), list(row_labels))
    ax.set_xlabel("被关注的词（键）")
    ax.set_ylabel("查询的词")
    if title:
        ax.set_title(title)
    if annotate:
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if w[i, j] > 0.6 * vmax else "black")
    return image
