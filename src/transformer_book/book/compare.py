"""Comparisons that decide a claim: what is compared, whether it holds, and its margin (how far from flipping).

A :class:`~.results.Claim` is decided by one of these, never by a bare boolean, so that the engine knows a
claim's inputs and how close it is to turning false::

    Claim("第 2 轮结束时，迷你 GPT 的验证集困惑度还高于 RNN", greater(gpt=gd[1], rnn=rd[1]))
    Claim("最大差小于 10⁻¹²", below(max_diff, 1e-12, name="max_diff"))
    Claim("四个种子都回到 95% 以上", all_of(*(at_least(a, 0.95, name=f"种子 {i}") for i, a in enumerate(accs))))

The *margin* is signed and in the units of the inputs: ``greater(a, b)`` has margin ``a − b``, ``below(x, t)``
has ``t − x``; a comparison holds when its margin is positive (``> 0`` for strict comparisons, ``≥ 0`` for
``at_least``/``at_most``). Calibration (:mod:`.calibrate`) reruns the snippet under many perturbations and
measures how far each margin moves: a claim whose margin is inside that spread is decided by noise, and the
strict build says so unless the sentence states the uncertainty (``Claim(…, uncertain="…")``).

Comparisons of things that cannot be a little off — integers, strings, which head, exact equalities — are
*discrete* (``equal``, ``true``): their margin is ``None``, and what calibration checks is that they hold under
every perturbation. ``all_of``/``any_of`` combine comparisons; each part keeps its own margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Sequence

from transformer_book.book.plain import plain


@dataclass
class Comparison:
    """One comparison (an *atom*) or a combination of comparisons (``all_of``/``any_of``)."""

    op: str  # "greater", "less", "above", "at_least", "below", "at_most", "between", "increasing",
    #          "decreasing", "non_decreasing", "smallest", "largest", "equal", "true", "all_of", "any_of"
    inputs: dict[str, Any] = field(default_factory=dict)  # named values it compares (JSON data)
    holds: bool = False
    margin: float | None = None  # signed distance from flipping, in the inputs' units; None: discrete
    parts: list["Comparison"] = field(default_factory=list)

    # ------------------------------------------------------------------ structure
    @property
    def combined(self) -> bool:
        return self.op in ("all_of", "any_of", "seeds")

    def atoms(self, prefix: str = "") -> Iterator[tuple[str, "Comparison"]]:
        """Every atom with its path ("" for a single atom; "0", "1.2" … inside combinations)."""
        if not self.combined:
            yield prefix, self
            return
        for i, part in enumerate(self.parts):
            yield from part.atoms(f"{prefix}.{i}" if prefix else str(i))

    def at(self, path: str) -> "Comparison":
        node = self
        for step in [p for p in path.split(".") if p]:
            node = node.parts[int(step)]
        return node

    def decide(self, atom_ok: Mapping[str, bool], prefix: str = "") -> bool:
        """Combine a verdict per atom (e.g. "robust under calibration") the way this comparison combines
        its parts: all of them for ``all_of``, any of them for ``any_of``."""
        if not self.combined:
            return atom_ok.get(prefix, False)
        verdicts = [p.decide(atom_ok, f"{prefix}.{i}" if prefix else str(i)) for i, p in enumerate(self.parts)]
        return any(verdicts) if self.op == "any_of" else all(verdicts)

    # ------------------------------------------------------------------ seeds
    @property
    def seeds(self) -> list[str]:
        """The seeds of an ``every_seed`` comparison, in the order of its parts (empty for any other)."""
        return [str(s) for s in self.inputs.get("种子", [])] if self.op == "seeds" else []

    def seed_margins(self) -> list[float | None]:
        """Per seed, how far that seed's comparison is from flipping (the smallest margin of its atoms)."""
        out: list[float | None] = []
        for part in self.parts:
            ms = [a.margin for _, a in part.atoms() if a.margin is not None]
            out.append(min(ms) if ms else None)
        return out

    @property
    def effect(self) -> float | None:
        """An ``every_seed`` comparison's effect: the mean over seeds of each seed's margin."""
        ms = [m for m in self.seed_margins() if m is not None]
        return sum(ms) / len(ms) if ms and self.op == "seeds" else None

    @property
    def seed_spread(self) -> float | None:
        """How much the margin differs between seeds: largest − smallest (the scale a sentence is held to)."""
        ms = [m for m in self.seed_margins() if m is not None]
        return (max(ms) - min(ms)) if ms and self.op == "seeds" else None

    # ------------------------------------------------------------------ text
    def describe(self) -> str:
        """``gpt = 4.819 > rnn = 4.43（余量 0.389）``: the comparison with its numbers and margin."""
        if self.op == "seeds":
            held = sum(p.holds for p in self.parts)
            head = f"{len(self.parts)} 个种子中 {held} 个成立"
            if self.effect is not None:
                head += f"（效应 {_short(self.effect)}，种子间相差 {_short(self.seed_spread)}）"
            return head + "：" + "；".join(f"种子 {s}{'' if p.holds else '【不成立】'}：{p.describe()}"
                                          for s, p in zip(self.seeds, self.parts))
        if self.combined:
            word = "以下须全部成立" if self.op == "all_of" else "以下至少一个成立即可"
            return f"{word}：" + "；".join(p.describe() for p in self.parts)
        text = _TEXT[self.op](self.inputs)
        if self.margin is not None:
            text += f"（余量 {_short(self.margin)}）"
        return text

    def flat_inputs(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for _, atom in self.atoms():
            for k, v in atom.inputs.items():
                out.setdefault(k, v)
        return out

    # ------------------------------------------------------------------ data
    def to_data(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.op, "holds": self.holds}
        if self.combined:
            out["parts"] = [p.to_data() for p in self.parts]
            if self.inputs:
                out["inputs"] = self.inputs
        else:
            out["inputs"] = self.inputs
            out["margin"] = self.margin
        return out

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> "Comparison":
        if d.get("op") not in _OPS:
            raise ValueError(f"unknown comparison {d.get('op')!r}")
        margin = None if d.get("margin") is None else float(d["margin"])
        return cls(d["op"], dict(d.get("inputs", {})), bool(d["holds"]), margin,
                   [cls.from_data(p) for p in d.get("parts", [])])


def _short(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list) and len(v) > 6:
        return "[" + ", ".join(_short(x) for x in v[:6]) + ", …]"
    if isinstance(v, list):
        return "[" + ", ".join(_short(x) for x in v) + "]"
    return repr(v) if isinstance(v, str) else str(v)


def _pair(inputs: Mapping[str, Any], sign: str) -> str:
    (a, x), (b, y) = list(inputs.items())[:2]
    return f"{a} = {_short(x)} {sign} {b} = {_short(y)}"


def _bound(inputs: Mapping[str, Any], sign: str) -> str:
    (a, x), (_, t) = list(inputs.items())[:2]
    return f"{a} = {_short(x)} {sign} {_short(t)}"


_TEXT = {
    "greater": lambda i: _pair(i, ">"),
    "less": lambda i: _pair(i, "<"),
    "above": lambda i: _bound(i, ">"),
    "at_least": lambda i: _bound(i, "≥"),
    "below": lambda i: _bound(i, "<"),
    "at_most": lambda i: _bound(i, "≤"),
    "between": lambda i: "{} ≤ {} = {} ≤ {}".format(_short(i["下限"]), *[(k, _short(v)) for k, v in i.items()][0], _short(i["上限"])),
    "increasing": lambda i: "{} = {} 严格递增".format(*[(k, _short(v)) for k, v in i.items()][0]),
    "decreasing": lambda i: "{} = {} 严格递减".format(*[(k, _short(v)) for k, v in i.items()][0]),
    "non_decreasing": lambda i: "{} = {} 不减".format(*[(k, _short(v)) for k, v in i.items()][0]),
    "smallest": lambda i: f"{i['哪一个']} 最小：{_short(i['各值'])}",
    "largest": lambda i: f"{i['哪一个']} 最大：{_short(i['各值'])}",
    "equal": lambda i: _pair(i, "=="),
    "true": lambda i: "{} = {}".format(*[(k, _short(v)) for k, v in i.items()][0]),
    "all_of": lambda i: "",
    "any_of": lambda i: "",
    "seeds": lambda i: "",
}
_OPS = set(_TEXT)


# ---------------------------------------------------------------------------------------------- helpers


def _number(value: Any, what: str) -> float:
    v = plain(value)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{what}: compares numbers, got {type(value).__name__} {value!r} (use equal() or true() "
                        "for discrete facts)")
    return float(v)


def _two(args: tuple, kwargs: dict, what: str) -> list[tuple[str, float]]:
    named = [(f"{'ab'[i]}", v) for i, v in enumerate(args)] + list(kwargs.items())
    if len(named) != 2:
        raise TypeError(f"{what}() compares exactly two values, e.g. {what}(gpt=4.8, rnn=5.0); got {len(named)}")
    return [(k, _number(v, f"{what}({k}=…)")) for k, v in named]


def _atom(op: str, inputs: dict[str, Any], margin: float | None, strict: bool) -> Comparison:
    if margin is None:
        raise AssertionError("numeric atoms have a margin")
    holds = (margin > 0) if strict else (margin >= 0)
    if math.isnan(margin):
        holds = False
    return Comparison(op, {k: plain(v) for k, v in inputs.items()}, bool(holds), float(margin))


# ---------------------------------------------------------------------------------------------- builders


def greater(*args: Any, **kwargs: Any) -> Comparison:
    """``greater(gpt=g, rnn=r)``: the first is larger than the second; margin ``g − r``."""
    (a, x), (b, y) = _two(args, kwargs, "greater")
    return _atom("greater", {a: x, b: y}, x - y, strict=True)


def less(*args: Any, **kwargs: Any) -> Comparison:
    """``less(gpt=g, rnn=r)``: the first is smaller than the second; margin ``r − g``."""
    (a, x), (b, y) = _two(args, kwargs, "less")
    return _atom("less", {a: x, b: y}, y - x, strict=True)


def _threshold(op: str, value: Any, bound: float, name: str, sign: int, strict: bool) -> Comparison:
    """``value`` against a fixed ``bound``: margin ``value − bound`` (sign +1) or ``bound − value`` (sign −1)."""
    x = _number(value, f"{op}({name})")
    return _atom(op, {name: x, "界": bound}, (x - bound) if sign > 0 else (bound - x), strict=strict)


def above(value: Any, bound: float, name: str = "值") -> Comparison:
    """``value > bound``; margin ``value − bound``."""
    return _threshold("above", value, bound, name, 1, strict=True)


def at_least(value: Any, bound: float, name: str = "值") -> Comparison:
    """``value ≥ bound``; margin ``value − bound``."""
    return _threshold("at_least", value, bound, name, 1, strict=False)


def below(value: Any, bound: float, name: str = "值") -> Comparison:
    """``value < bound``; margin ``bound − value``."""
    return _threshold("below", value, bound, name, -1, strict=True)


def at_most(value: Any, bound: float, name: str = "值") -> Comparison:
    """``value ≤ bound``; margin ``bound − value``."""
    return _threshold("at_most", value, bound, name, -1, strict=False)


def between(value: Any, low: float, high: float, name: str = "值") -> Comparison:
    """``low ≤ value ≤ high``; margin the distance to the nearer end."""
    x = _number(value, f"between({name})")
    return _atom("between", {name: x, "下限": low, "上限": high}, min(x - low, high - x), strict=False)


def _sequence(op: str, values: Sequence[Any], name: str, strict: bool, sign: int) -> Comparison:
    xs = [_number(v, f"{op}({name})") for v in values]
    if len(xs) < 2:
        raise ValueError(f"{op}({name}) needs at least two values")
    margin = min(sign * (b - a) for a, b in zip(xs, xs[1:]))
    return _atom(op, {name: xs}, margin, strict=strict)


def increasing(values: Sequence[Any], name: str = "序列") -> Comparison:
    """Strictly increasing; margin the smallest step."""
    return _sequence("increasing", values, name, True, 1)


def decreasing(values: Sequence[Any], name: str = "序列") -> Comparison:
    """Strictly decreasing; margin the smallest step down."""
    return _sequence("decreasing", values, name, True, -1)


def non_decreasing(values: Sequence[Any], name: str = "序列") -> Comparison:
    """Never decreasing; margin the smallest step (0 where two are equal)."""
    return _sequence("non_decreasing", values, name, False, 1)


def _extreme(op: str, values: Mapping[str, Any], key: str, sign: int) -> Comparison:
    xs = {str(k): _number(v, f"{op}({k})") for k, v in values.items()}
    if key not in xs or len(xs) < 2:
        raise ValueError(f"{op}(): {key!r} must be one of at least two values {sorted(xs)}")
    others = [v for k, v in xs.items() if k != key]
    margin = (min(others) - xs[key]) if sign < 0 else (xs[key] - max(others))
    return _atom(op, {"哪一个": key, "各值": xs}, margin, strict=True)


def smallest(values: Mapping[str, Any], key: str) -> Comparison:
    """``values[key]`` is strictly the smallest; margin the gap to the next smallest."""
    return _extreme("smallest", values, key, -1)


def largest(values: Mapping[str, Any], key: str) -> Comparison:
    """``values[key]`` is strictly the largest; margin the gap to the next largest."""
    return _extreme("largest", values, key, 1)


def equal(*args: Any, **kwargs: Any) -> Comparison:
    """Discrete equality (counts, strings, tuples, which head …): no margin; it holds or it does not."""
    named = [(f"{'ab'[i]}", v) for i, v in enumerate(args)] + list(kwargs.items())
    if len(named) != 2:
        raise TypeError(f"equal() compares exactly two values; got {len(named)}")
    (a, x), (b, y) = [(k, plain(list(v) if isinstance(v, tuple) else v)) for k, v in named]
    return Comparison("equal", {a: x, b: y}, bool(x == y), None)


def true(flag: Any, name: str = "事实") -> Comparison:
    """A discrete fact decided by the code (two tensors are one object, an error is raised …): no margin."""
    v = plain(flag)
    if not isinstance(v, bool):
        raise TypeError(f"true({name}): a boolean, got {type(flag).__name__}")
    return Comparison("true", {name: v}, v, None)


def _parts(checks: tuple, what: str) -> list[Comparison]:
    flat: list[Comparison] = []
    for c in checks:
        if isinstance(c, (list, tuple)):
            flat.extend(_parts(tuple(c), what))
        elif isinstance(c, Comparison):
            flat.append(c)
        else:
            raise TypeError(f"{what}() combines comparisons (greater, below, …), got {type(c).__name__}")
    if not flat:
        raise ValueError(f"{what}() needs at least one comparison")
    return flat


def all_of(*checks: Any) -> Comparison:
    """Every part holds (each part keeps its own margin)."""
    parts = _parts(checks, "all_of")
    return Comparison("all_of", {}, all(p.holds for p in parts), None, parts)


def any_of(*checks: Any) -> Comparison:
    """At least one part holds."""
    parts = _parts(checks, "any_of")
    return Comparison("any_of", {}, any(p.holds for p in parts), None, parts)


MIN_SEEDS = 3


def every_seed(per_seed: Mapping[Any, Comparison]) -> Comparison:
    """The same comparison of trained runs, made once per seed: ``every_seed({s: less(a[s], b[s]) for s in SEEDS})``.

    **The rule** (one for the whole book): a claim that compares trained runs holds only if it holds for every
    seed — another seed is another draw of initialisation and data order, the honest scale of what a
    training shows, where a rerun under perturbed arithmetic only shows rounding. At least
    :data:`MIN_SEEDS` seeds. The record keeps every seed's comparison; the claims listing shows the
    *effect* (the mean margin over seeds) beside the *seed spread* (largest − smallest margin), so that a
    sentence's words can be held to them."""
    if not isinstance(per_seed, Mapping):
        raise TypeError("every_seed() takes {seed: comparison}, one comparison per seed")
    if len(per_seed) < MIN_SEEDS:
        raise ValueError(f"every_seed(): a claim about trained runs needs at least {MIN_SEEDS} seeds, got {len(per_seed)}")
    parts = _parts(tuple(per_seed.values()), "every_seed")
    if len(parts) != len(per_seed):
        raise TypeError("every_seed(): one comparison per seed")
    return Comparison("seeds", {"种子": [plain(s) for s in per_seed]}, all(p.holds for p in parts), None, parts)


BUILDERS = ("greater", "less", "above", "at_least", "below", "at_most", "between", "increasing", "decreasing",
            "non_decreasing", "smallest", "largest", "equal", "true", "all_of", "any_of", "every_seed")
