"""The layout promises: folders that mirror the book, an engine that knows nothing of the rest of the package,
one job per engine module, and snippets that show readers the computation and nothing else."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "transformer_book"
ENGINE = PACKAGE / "book"
ENGINE_FILES = sorted(ENGINE.rglob("*.py"))  # the engine and its rooms (execution/, storage/, checking/ …)
SNIPPETS = ROOT / "snippets"


def engine_id(path: Path) -> str:
    return path.relative_to(ENGINE).as_posix()


def imported_modules(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports resolved against the package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                found.add(".".join(base + ([node.module] if node.module else [])))
            elif node.module:
                found.add(node.module)
    return found


@pytest.mark.parametrize("path", ENGINE_FILES, ids=engine_id)
def test_the_engine_imports_nothing_from_the_rest_of_the_package(path: Path) -> None:
    outside = {m for m in imported_modules(path) if m.startswith("transformer_book") and not m.startswith("transformer_book.book")}
    assert outside == set(), f"{path.name} imports {sorted(outside)}: the engine must know nothing about Transformers"


@pytest.mark.parametrize("path", ENGINE_FILES, ids=engine_id)
def test_every_engine_module_states_its_one_job_in_its_first_line(path: Path) -> None:
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert doc, f"{path.name} has no module docstring"
    first = doc.splitlines()[0]
    assert first.strip() and len(first) <= 120, f"{path.name}: the first line should state its job in one line"


def test_no_engine_module_reaches_for_another_modules_private_names() -> None:
    offenders = []
    for path in ENGINE_FILES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("transformer_book")):
                offenders += [f"{engine_id(path)}: from {node.module} import {a.name}" for a in node.names
                              if a.name.startswith("_") and a.name != "__version__"]
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                owner = node.value
                # os._exit is the standard library's documented exit without teardown, not a private name
                if isinstance(owner, ast.Name) and owner.id not in ("self", "cls") and (owner.id, node.attr) != ("os", "_exit"):
                    offenders.append(f"{engine_id(path)}:{node.lineno}: {owner.id}.{node.attr}")
    assert offenders == []


def test_part_specific_code_lives_in_a_folder_named_after_its_part() -> None:
    """A newcomer writing 第20章 knows their three folders: docs/chapter20, snippets/chapter20, the package's chapter20."""
    for part in ("lecture07", "chapter20"):
        assert (ROOT / "docs" / part).is_dir() and (SNIPPETS / part).is_dir() and (PACKAGE / part).is_dir()
    shared = {p.stem for p in PACKAGE.glob("*.py")}
    for part in ("lecture07", "chapter20"):
        assert not shared & {p.stem for p in (PACKAGE / part).glob("*.py") if p.stem != "__init__"}
    # shared modules never import part-specific ones
    for path in PACKAGE.glob("*.py"):
        parts = {m for m in imported_modules(path) if m.startswith(("transformer_book.lecture07", "transformer_book.chapter20"))}
        assert parts == set(), f"shared module {path.name} imports part-specific {sorted(parts)}"


def snippet_files() -> list[Path]:
    return sorted(SNIPPETS.rglob("*.py"))


@pytest.mark.parametrize("path", snippet_files(), ids=lambda p: p.relative_to(SNIPPETS).as_posix())
def test_snippets_carry_no_runner_boilerplate_and_no_asserts(path: Path) -> None:
    """What a reader sees in a code fold is the computation: claims replace asserts, the engine runs the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    mains = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Compare) and isinstance(n.left, ast.Name)
             and n.left.id == "__name__"]
    asserts = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Assert)]
    assert mains == [] and asserts == [], f"__name__ checks at {mains}, asserts at {asserts}"


def test_the_engine_is_laid_out_in_rooms_each_saying_its_job() -> None:
    """A newcomer names a job and finds its room: the rooms the authors' guide lists, each a package whose
    docstring says what it does, and no room reaching into the site's MkDocs wiring."""
    rooms = {p.name for p in ENGINE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert rooms == {"execution", "storage", "checking", "rendering", "site", "cli"}
    for room in rooms:
        assert ast.get_docstring(ast.parse((ENGINE / room / "__init__.py").read_text(encoding="utf-8")))
    for path in ENGINE_FILES:
        if path.parent.name in ("site", "cli"):
            continue
        site = {m for m in imported_modules(path) if m.startswith("transformer_book.book.site")}
        assert site == set(), f"{engine_id(path)} imports {sorted(site)}: only the site and the entry points use MkDocs' wiring"


def engine_module(name: str) -> str | None:
    """The engine module (``session``, ``checking.records``, ``checking`` for a package's ``__init__``, ``""``
    for the package itself) that an imported name refers to, or None outside the engine."""
    if name != "transformer_book.book" and not name.startswith("transformer_book.book."):
        return None
    rel = name.removeprefix("transformer_book.book").lstrip(".")
    parts = rel.split(".") if rel else []
    while parts and not ((ENGINE / Path(*parts)).with_suffix(".py").exists() or (ENGINE / Path(*parts)).is_dir()):
        parts.pop()  # "from …checking.records import load" names checking.records.load: the module is records
    return ".".join(parts)


def engine_imports() -> dict[str, set[str]]:
    """Each engine module → the engine modules it imports, wherever in the file (a function-level import is an
    import all the same); ``from package import module`` counts as importing the module."""
    graph: dict[str, set[str]] = {}
    for path in ENGINE_FILES:
        rel = path.relative_to(ENGINE).with_suffix("")
        me = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        found = set()
        tree = ast.parse(path.read_text(encoding="utf-8"))
        package = ".".join(path.relative_to(ROOT / "src").with_suffix("").parts[:-1])
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
                names = [f"{base}.{a.name}" for a in node.names]  # a module, or a name in the module ``base``
            for name in names:
                target = engine_module(name)
                if target is not None and target != me:
                    found.add(target)
        graph[me] = found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one node (Tarjan), each as a sorted list."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_engine_module_imports_itself_back_through_others() -> None:
    """A newcomer reads the engine bottom-up: whatever a module imports is below it, never something that
    imports it again — module by module, and room by room (session ↔ checking, rendering ↔ checking …)."""
    graph = engine_imports()
    assert cycles(graph) == []
    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        room = module.split(".")[0]
        rooms.setdefault(room, set()).update(t.split(".")[0] for t in targets if t.split(".")[0] != room)
    assert cycles(rooms) == []
