"""Which libraries a book's snippets can import, read from their source without running anything.

Used for one decision: whether the worker forkserver should import torch up front (the plugin's ``preload``
option left at its default). A snippet that never reaches torch — neither itself nor through the modules it
imports — starts faster from a forkserver without it (about 3 s of imports saved per forkserver: per build, per
calibration run); a book whose snippets train models wants it preloaded once instead of imported in every
snippet process.

The search follows ``import`` statements (at any depth of the code: imports inside ``compute()`` count) through
every module that is source on this machine outside site-packages — the project's own package, an editable
install — and stops at installed libraries, which are what it looks for. It over-approximates (an import in a
branch never taken counts), which costs at most a preload not needed; it cannot miss an import written as a
statement. An import made by ``importlib`` with a computed name is not seen: such a snippet imports torch
itself and is seeded then (:func:`.execution.worker._prepare_torch`), only a few seconds slower.
"""

from __future__ import annotations

import ast
import importlib.util
import json
from collections.abc import Iterable
from pathlib import Path

ENGINE_DIR = Path(__file__).resolve().parent  # transformer_book.book


def _imported_names(tree: ast.AST, package: str) -> Iterable[str]:
    """Every module name the code imports (``from a import b`` gives ``a`` and ``a.b``: ``b`` may be a module)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: resolved against the importing module's package
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join(p for p in [*parts, base] if p)
            if base:
                yield base
                yield from (f"{base}.{alias.name}" for alias in node.names if alias.name != "*")


def _source_of(name: str, roots: dict[str, Path | None]) -> tuple[Path | None, bool]:
    """(the file of module ``name`` if it is source to follow, whether it is a package)."""
    top = name.split(".")[0]
    if top not in roots:
        try:
            spec = importlib.util.find_spec(top)  # a top-level name: found without running anything
        except (ImportError, ValueError):
            spec = None
        places = list(spec.submodule_search_locations or []) if spec is not None else []
        origin = spec.origin if spec is not None else None
        where = Path(places[0]) if places else (Path(origin).parent if origin else None)
        roots[top] = where if where is not None and "site-packages" not in where.parts else None
    base = roots[top]
    if base is None:
        return None, False
    rel = name.split(".")[1:]
    package = base.joinpath(*rel)
    if (package / "__init__.py").is_file():
        return package / "__init__.py", True
    module = base.joinpath(*rel[:-1], rel[-1] + ".py") if rel else None
    return (module, False) if module is not None and module.is_file() else (None, False)


def _code(path: Path) -> bytes:
    """A module's source, or a notebook's code cells (their ``%`` and ``!`` lines left out)."""
    raw = path.read_bytes()
    if path.suffix != ".ipynb":
        return raw
    cells = json.loads(raw).get("cells", [])
    lines = [line for c in cells if c.get("cell_type") == "code"
             for line in "".join(c.get("source", [])).splitlines() if not line.lstrip().startswith(("%", "!"))]
    return "\n".join(lines).encode()


def reaches(files: Iterable[Path], library: str) -> bool:
    """Whether code in ``files`` imports ``library`` (or one of its submodules), itself or through source
    modules it imports (with the packages around them, whose ``__init__`` runs first)."""
    roots: dict[str, Path | None] = {}
    todo: list[tuple[Path, str]] = [(Path(f), "") for f in files]
    seen: set[Path] = set()
    while todo:
        path, package = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        try:
            tree = ast.parse(_code(path), filename=str(path))
        except (OSError, SyntaxError, ValueError):
            continue  # the build reports a snippet that does not parse; here it imports nothing
        for name in _imported_names(tree, package):
            if name == library or name.startswith(library + "."):
                return True
            parts = name.split(".")
            for i in range(1, len(parts) + 1):  # a.b.c runs a/__init__, a/b/__init__, then a/b/c
                prefix = ".".join(parts[:i])
                found, is_package = _source_of(prefix, roots)
                if found is not None and found.is_relative_to(ENGINE_DIR) and found != ENGINE_DIR / "__init__.py":
                    break  # the engine (Value, Table …) imports torch only to read what a snippet made with it
                if found is not None and found not in seen:
                    todo.append((found, prefix if is_package else ".".join(parts[: i - 1])))
    return False
