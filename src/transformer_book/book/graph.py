"""The snippets' REQUIRES graph: what runs before what, what a selection needs, and the longest chains.

Plain functions of ``requires`` (snippet id → the ids it ``REQUIRES``): the session schedules with them, and
calibration reruns a selection together with what it needs.
"""

from __future__ import annotations

import graphlib


def snippet_graph(requires: dict[str, list[str]], selected: set[str]) -> graphlib.TopologicalSorter:
    """The graph of the selected snippets (an edge per ``REQUIRES`` inside the selection), prepared: a cycle
    raises ``ValueError`` naming it."""
    graph = graphlib.TopologicalSorter({sid: [r for r in requires[sid] if r in selected] for sid in selected})
    try:
        graph.prepare()
    except graphlib.CycleError as exc:
        raise ValueError("REQUIRES forms a cycle: " + " → ".join(reversed(exc.args[1]))) from None
    return graph


def closure(wanted: set[str], requires: dict[str, list[str]]) -> set[str]:
    """``wanted`` plus everything it requires, transitively."""
    out, todo = set(), list(wanted)
    while todo:
        sid = todo.pop()
        if sid not in out:
            out.add(sid)
            todo.extend(r for r in requires.get(sid, []) if r in requires)
    return out


def critical_paths(requires: dict[str, list[str]], expected: dict[str, float]) -> dict[str, float]:
    """For each snippet: its expected seconds plus the longest chain of snippets that wait for it."""
    dependents: dict[str, list[str]] = {sid: [] for sid in requires}
    for sid, reqs in requires.items():
        for r in reqs:
            if r in dependents:
                dependents[r].append(sid)
    longest: dict[str, float] = {}  # filled in depth-first order: not a cache, the recursion's own table

    def path(sid: str) -> float:
        if sid not in longest:
            longest[sid] = expected.get(sid, 1.0) + max((path(d) for d in dependents[sid]), default=0.0)
        return longest[sid]

    return {sid: path(sid) for sid in requires}
