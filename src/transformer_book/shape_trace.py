"""形状追踪：真的运行一次前向计算，按执行顺序记下每个张量运算的形状。

书里的形状表（第 7 讲第 6.2 节、第 20 章「多头注意力」与「一次完整的数据流核对」）都由它生成，
而不是手写。实现方式是 ``torch.overrides.TorchFunctionMode``：它截获每一次 torch 运算；只记最外层的
运算（``F.linear`` 内部的运算不会重复出现）。
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch
from torch import nn
from torch.overrides import TorchFunctionMode


@dataclass(frozen=True)
class TracedOp:
    """一次张量运算：函数名、张量输入的形状、输出形状（多个输出时有多个），以及它发生在哪个被标记的模块里。"""

    name: str
    inputs: tuple[tuple[int, ...], ...]
    shapes: tuple[tuple[int, ...], ...]
    region: str = ""


def shapes_of(values) -> tuple[tuple[int, ...], ...]:
    """一个值（或一组值）里所有张量的形状；不是张量的值略过。"""
    values = values if isinstance(values, (tuple, list)) else (values,)
    return tuple(tuple(t.shape) for t in values if isinstance(t, torch.Tensor))


class _OpRecorder(TorchFunctionMode):
    def __init__(self, names: set[str] | None) -> None:
        super().__init__()
        self.names, self.ops, self.region = names, [], ""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = getattr(func, "__name__", str(func))
        if self.names is None or name in self.names:
            shapes = shapes_of(out)
            if shapes:
                self.ops.append(TracedOp(name, shapes_of(args), shapes, self.region))
        return out


def trace_ops(fn: Callable[[], Any], names: Sequence[str] | None = None,
              regions: dict[str, nn.Module] | None = None) -> tuple[Any, list[TracedOp]]:
    """运行 ``fn()``，按执行顺序记录其中每个 torch 运算（``linear``、``view``、``transpose``、``matmul`` ……）。

    Parameters
    ----------
    fn : callable
        无参数的函数，例如 ``lambda: mha(x)``。
    names : sequence of str, optional
        只记录这些函数名（如 ``["linear", "view", "transpose", "softmax"]``）；默认全部记录。
    regions : dict[str, nn.Module], optional
        标记区域：在这些模块的前向计算之内发生的运算，``region`` 记为对应的名字（用前向钩子实现）。

    Returns
    -------
    result : fn 的返回值
    ops : list[TracedOp]
    """
    recorder = _OpRecorder(None if names is None else set(names))
    handles = []
    for region, module in (regions or {}).items():
        def enter(_module, _args, region=region):
            recorder.region = region

        def leave(_module, _args, _output):
            recorder.region = ""

        handles += [module.register_forward_pre_hook(enter), module.register_forward_hook(leave)]
    try:
        with recorder:
            result = fn()
    finally:
        for h in handles:
            h.remove()
    return result, recorder.ops


# 这些“运算”不产生新的张量形状，不进形状表
NOT_SHAPE_STEPS = frozenset({"size", "dim", "__get__", "__set__", "__setstate__", "requires_grad_"})


def trace_module(module: nn.Module, *args: Any, **kwargs: Any) -> tuple[Any, list[TracedOp]]:
    """不求梯度地运行 ``module(*args, **kwargs)``，返回（输出, 每个产生新形状的张量运算）：形状表用它。"""
    with torch.no_grad():
        out, ops = trace_ops(lambda: module(*args, **kwargs))
    return out, [op for op in ops if op.name not in NOT_SHAPE_STEPS]


def symbolic_shape(shape: Sequence[int], symbols: dict[int, str], brackets: str = "[]") -> str:
    """把具体形状写成记号，如 ``(2, 16, 128)`` 与 ``{2: "B", 16: "T", 128: "d"}`` → ``"[B, T, d]"``。

    不在 ``symbols`` 里的维度原样写数字；空形状（标量）写成 ``"标量"``。选取互不相同的尺寸，记号才不会混淆。
    ``brackets="()"`` 写成第 7 讲的 ``(B, h, T, d_h)``；默认的方括号是第 20 章的写法。
    """
    if len(shape) == 0:
        return "标量"
    return brackets[0] + ", ".join(symbols.get(int(n), str(int(n))) for n in shape) + brackets[1]
