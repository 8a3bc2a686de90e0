"""Finding snippets and computing the part of their cache key that is known before running."""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import platform
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# Bump when the meaning of a cached result changes (payload layout, seeding, rendering of figures …).
ENGINE_VERSION = "1"

# Libraries whose version can change a snippet's numbers or figures.
VERSIONED_PACKAGES = ("torch", "numpy", "matplotlib")


@dataclass(frozen=True)
class Snippet:
    """A snippet file: ``snippets/<part>/<name>.py`` has the id ``<part>/<name>``."""

    id: str
    path: Path

    @property
    def record_path(self) -> Path:
        return self.path.with_suffix(".record.json")

    def source(self) -> bytes:
        return self.path.read_bytes()

    def requires(self) -> list[str]:
        """The module-level ``REQUIRES = [...]`` list, read without running the snippet."""
        try:
            tree = ast.parse(self.source(), filename=str(self.path))
        except SyntaxError:
            return []  # reported when the snippet runs
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "REQUIRES" for t in node.targets):
                try:
                    value = ast.literal_eval(node.value)
                except ValueError as exc:
                    raise ValueError(f"{self.path}:{node.lineno}: REQUIRES must be a literal list of snippet ids") from exc
                return [str(v) for v in value]
        return []


def discover(snippets_dir: Path) -> dict[str, Snippet]:
    """All snippets under ``snippets_dir``; files whose name starts with ``_`` are helpers, not snippets."""
    found: dict[str, Snippet] = {}
    if not snippets_dir.is_dir():
        return found
    for path in sorted(snippets_dir.rglob("*.py")):
        rel = path.relative_to(snippets_dir)
        if any(part.startswith(("_", ".")) for part in rel.parts):
            continue
        sid = rel.with_suffix("").as_posix()
        found[sid] = Snippet(sid, path)
    return found


@lru_cache(maxsize=1)
def environment() -> dict[str, str]:
    """Versions that enter every cache key and every record's provenance."""
    env = {
        "engine": ENGINE_VERSION,
        "python": platform.python_version(),
        "platform": f"{platform.system()}-{platform.machine()}",
    }
    for name in VERSIONED_PACKAGES:
        try:
            env[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            env[name] = "absent"
    return env


def cache_key(snippet: Snippet, source: bytes | None = None, required: dict[str, str] | None = None) -> str:
    """Hash of what is known before running; ``required`` maps each required snippet to its fingerprint."""
    h = hashlib.sha256()
    for sid, fingerprint in sorted((required or {}).items()):
        h.update(f"requires {sid}={fingerprint}\n".encode())
    for k, v in sorted(environment().items()):
        h.update(f"{k}={v}\n".encode())
    h.update(sys.implementation.cache_tag.encode() if sys.implementation.cache_tag else b"")
    h.update(snippet.id.encode() + b"\0")
    h.update(source if source is not None else snippet.source())
    return h.hexdigest()[:32]
