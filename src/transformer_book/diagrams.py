"""用 matplotlib 画结构示意图：一列带文字的方框、方框之间的箭头、标出“重复 N 层”的括号。

书里的结构图（第 4.4 节的最小 Transformer，第 7.4 节的 Transformer 块……）都由代码画出，
这样改一个标签只需改一行代码。坐标用数据坐标，一个单位大约是一行字的高度；``draw_stack``
返回每个方框的位置（:class:`StackLayout`），调用者可以在上面再画别的东西（例如残差连接的旁路箭头）。

典型用法::

    fig, ax = new_diagram(width=5.0)
    layout = draw_stack(ax, [Box("词嵌入"), Box("自注意力"), Box("前馈网络")], repeat=[(1, 2, "× N")])
    draw_skip(ax, layout, 1, 2)   # 从方框 1 的下方绕到方框 2 的上方
    finish_diagram(ax)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

from transformer_book.plotting import new_figure

# 几种柔和的填充色，按作用取用（同一种作用在全书的图里用同一种颜色）。
COLORS = {
    "input": "#eeeeee",  # 输入、嵌入
    "attention": "#fde2c8",  # 注意力
    "ffn": "#d8ecd2",  # 前馈网络
    "norm": "#f6f1c1",  # 归一化
    "output": "#dbe4f3",  # 输出层
    "plain": "#ffffff",
}


@dataclass
class Box:
    """图中的一个方框。

    Parameters
    ----------
    label : str
        框里的文字（可以含换行）。中文和 ``$数学$`` 不要写在同一个字符串里。
    color : str
        填充色，可以用 ``COLORS`` 里的名字或任何 matplotlib 颜色。
    note : str
        写在方框右侧的灰色小字（说明、形状……），空串表示不写。
    kind : {"box", "text"}
        ``"text"`` 只写文字、不画框（用于“输入的词”“输出的概率”这样的端点）。
    """

    label: str
    color: str = "plain"
    note: str = ""
    kind: str = "box"


@dataclass
class StackLayout:
    """``draw_stack`` 画出的各方框的位置（数据坐标）。"""

    centers: list[tuple[float, float]] = field(default_factory=list)  # 每个方框中心 (x, y)
    width: float = 0.0
    height: float = 0.0
    direction: str = "up"

    def top(self, i: int) -> tuple[float, float]:
        """方框 i 上边的中点。"""
        x, y = self.centers[i]
        return x, y + self.height / 2

    def bottom(self, i: int) -> tuple[float, float]:
        """方框 i 下边的中点。"""
        x, y = self.centers[i]
        return x, y - self.height / 2

    def left(self, i: int) -> tuple[float, float]:
        """方框 i 左边的中点。"""
        x, y = self.centers[i]
        return x - self.width / 2, y

    def right(self, i: int) -> tuple[float, float]:
        """方框 i 右边的中点。"""
        x, y = self.centers[i]
        return x + self.width / 2, y


def new_diagram(width: float = 5.0, height: float = 5.0):
    """一张没有坐标轴的空白图，返回 ``(fig, ax)``；画完后调用 :func:`finish_diagram`（它会重设高度）。"""
    fig, ax = new_figure(width=width, height=height)
    ax.set_axis_off()
    return fig, ax


def finish_diagram(ax, margin: float = 0.2) -> None:
    """按已画内容设定坐标范围（等比例，留出边距），并按内容的宽高比调整图的高度（宽度不变）。"""
    ax.set_aspect("equal")
    ax.autoscale_view()
    x0, x1 = ax.get_xlim()
    y0, y1 = ax.get_ylim()
    ax.set_xlim(x0 - margin, x1 + margin)
    ax.set_ylim(y0 - margin, y1 + margin)
    fig = ax.figure
    width = fig.get_figwidth()
    fig.set_figheight(width * (y1 - y0 + 2 * margin) / (x1 - x0 + 2 * margin))


def draw_arrow(ax, start: tuple[float, float], end: tuple[float, float], *, color: str = "#333333",
               connectionstyle: str = "arc3", lw: float = 1.2) -> None:
    """从 start 到 end 画一个箭头（数据坐标）。``connectionstyle`` 可以让箭头拐弯，例如 ``"arc3,rad=0.3"``。"""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=color, lw=lw,
                                 connectionstyle=connectionstyle, shrinkA=0, shrinkB=0))


def draw_bracket(ax, x: float, y0: float, y1: float, label: str, *, side: str = "left", tick: float = 0.15,
                 fontsize: float = 9) -> None:
    """在 x 处画一个竖直的方括号，覆盖 y0…y1，旁边写 label（例如“重复 N 层”）。

    Parameters
    ----------
    side : {"left", "right"}
        括号开口朝向方框：在方框左边时开口朝右。
    """
    sign = 1 if side == "left" else -1  # 括号两端的短横线伸向方框一侧
    ax.plot([x + sign * tick, x, x, x + sign * tick], [y0, y0, y1, y1], color="#555555", lw=1.0)
    ha = "right" if side == "left" else "left"
    ax.text(x - sign * 0.12, (y0 + y1) / 2, label, ha=ha, va="center", fontsize=fontsize, color="#333333")


def draw_stack(ax, boxes: Sequence[Box], *, direction: str = "up", x: float = 0.0, width: float = 3.6,
               height: float = 0.62, gap: float = 0.5,
               repeat: Sequence[tuple[int, int, str]] = (), fontsize: float = 10) -> StackLayout:
    """画一列方框，相邻方框之间用箭头连起来（数据沿箭头方向流动）。

    Parameters
    ----------
    ax : matplotlib Axes
        通常来自 :func:`new_diagram`。
    boxes : Box 的序列
        按数据流动的顺序给出：``boxes[0]`` 是输入。
    direction : {"up", "down"}
        ``"up"``：输入在最下面、数据往上流（原论文与 GPT 示意图的习惯）；``"down"``：从上往下。
    x : float
        这一列的中心横坐标。
    width, height, gap : float
        方框的宽、高与方框之间的空隙（数据坐标）。
    repeat : (first, last, label) 的序列
        在方框 first…last（含两端）左侧画括号并写 label，表示这几个方框组成的层重复若干次。
    fontsize : float
        框内文字的字号。

    Returns
    -------
    StackLayout
        每个方框的中心和尺寸。
    """
    if direction not in ("up", "down"):
        raise ValueError(f'direction 只能是 "up" 或 "down"，收到 {direction!r}')
    step = (height + gap) * (1 if direction == "up" else -1)
    layout = StackLayout(width=width, height=height, direction=direction)
    for i, box in enumerate(boxes):
        cx, cy = x, i * step
        layout.centers.append((cx, cy))
        if box.kind == "box":
            ax.add_patch(FancyBboxPatch((cx - width / 2, cy - height / 2), width, height,
                                        boxstyle="round,pad=0.02,rounding_size=0.12",
                                        facecolor=COLORS.get(box.color, box.color), edgecolor="#444444", lw=1.0))
        elif box.kind != "text":
            raise ValueError(f'Box.kind 只能是 "box" 或 "text"，收到 {box.kind!r}')
        ax.text(cx, cy, box.label, ha="center", va="center", fontsize=fontsize)
        if box.note:
            ax.text(cx + width / 2 + 0.2, cy, box.note, ha="left", va="center", fontsize=fontsize - 1,
                    color="#666666")
    for i in range(len(boxes) - 1):  # 箭头从一个方框的出口指向下一个方框的入口
        if direction == "up":
            draw_arrow(ax, layout.top(i), layout.bottom(i + 1))
        else:
            draw_arrow(ax, layout.bottom(i), layout.top(i + 1))
    for first, last, label in repeat:
        ys = [layout.centers[i][1] for i in (first, last)]
        draw_bracket(ax, x - width / 2 - 0.25, min(ys) - height / 2, max(ys) + height / 2, label)
    # 让 autoscale 把方框和说明文字都算进去（patch 会参与，文字不会）
    ax.update_datalim([(x - width / 2 - (1.6 if repeat else 0.2), min(c[1] for c in layout.centers) - height / 2),
                       (x + width / 2 + (2.9 if any(b.note for b in boxes) else 0.2),
                        max(c[1] for c in layout.centers) + height / 2)])
    return layout


def draw_skip(ax, layout: StackLayout, i: int, j: int, *, side: str = "right", offset: float = 0.45,
              label: str = "", plus: bool = True) -> None:
    """画一条绕过方框 i…j 的旁路箭头（例如残差连接）：从方框 i 的入口前分出，回到方框 j 的出口后。

    Parameters
    ----------
    layout : StackLayout
        ``draw_stack`` 的返回值。
    i, j : int
        被绕过的第一个与最后一个方框（含两端）。
    side : {"left", "right"}
        旁路画在哪一侧。
    offset : float
        旁路离方框边缘的距离。
    label : str
        写在旁路旁边的文字。
    plus : bool
        是否在汇入点画一个 ⊕（表示相加）。
    """
    up = layout.direction == "up"
    gap_in = layout.bottom(i) if up else layout.top(i)  # 方框 i 的入口
    gap_out = layout.top(j) if up else layout.bottom(j)  # 方框 j 的出口
    shift = 0.18 if up else -0.18  # 分出点和汇入点离开方框一点，落在箭头上
    y_from, y_to = gap_in[1] - shift, gap_out[1] + shift
    sign = 1 if side == "right" else -1
    x_side = layout.centers[i][0] + sign * (layout.width / 2 + offset)
    x_mid = layout.centers[i][0]
    ax.plot([x_mid, x_side, x_side], [y_from, y_from, y_to], color="#333333", lw=1.2)
    r = 0.11  # ⊕ 的半径
    draw_arrow(ax, (x_side, y_to), (x_mid + sign * (r if plus else 0.0), y_to))
    if plus:
        ax.add_patch(Circle((x_mid, y_to), r, facecolor="white", edgecolor="#333333", lw=1.0, zorder=3))
        ax.plot([x_mid - r, x_mid + r], [y_to, y_to], color="#333333", lw=1.0, zorder=4)
        ax.plot([x_mid, x_mid], [y_to - r, y_to + r], color="#333333", lw=1.0, zorder=4)
    ax.update_datalim([(x_side + sign * 0.9, y_from)])  # 把旁路和它的文字算进画面
    if label:
        ax.text(x_side + sign * 0.1, (y_from + y_to) / 2, label, ha="left" if sign > 0 else "right",
                va="center", fontsize=9, color="#333333")
