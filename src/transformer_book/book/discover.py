"""Finding snippets and computing the part of their cache key that is known before running."""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import json
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
    """A snippet file ``snippets/<part>/<name>.py`` (id ``<part>/<name>``), or a notebook page
    ``docs/<part>/<name>.ipynb`` (same id; its record lives in ``snippets/<part>/<name>.record.json``)."""

    id: str
    path: Path
    record_path: Path

    @property
    def is_notebook(self) -> bool:
        return self.path.suffix == ".ipynb"

    def source(self) -> bytes:
        """What the cache key hashes: the file, or a notebook's cell sources (not its saved outputs)."""
        raw = self.path.read_bytes()
        if not self.is_notebook:
            return raw
        try:
            cells = json.loads(raw).get("cells", [])
        except ValueError:
            return raw  # a broken notebook: its error is reported when it runs
        return json.dumps([[c.get("cell_type"), "".join(c.get("source", []))] for c in cells], ensure_ascii=False).encode()

    def requires(self) -> list[str]:
        """The module-level ``REQUIRES = [...]`` list, read without running the snippet."""
        if self.is_notebook:
            return []
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


def discover(snippets_dir: Path, notebooks_dir: Path | None = None) -> dict[str, Snippet]:
    """All snippets under ``snippets_dir`` (files whose name starts with ``_`` are helpers, not snippets),
    and, if ``notebooks_dir`` is given, every notebook page under it."""
    found: dict[str, Snippet] = {}
    if snippets_dir.is_dir():
        for path in sorted(snippets_dir.rglob("*.py")):
            rel = path.relative_to(snippets_dir)
            if any(part.startswith(("_", ".")) for part in rel.parts):
                continue
            sid = rel.with_suffix("").as_posix()
            found[sid] = Snippet(sid, path, path.with_suffix(".record.json"))
    if notebooks_dir is not None and notebooks_dir.is_dir():
        for path in sorted(notebooks_dir.rglob("*.ipynb")):
            rel = path.relative_to(notebooks_dir)
            if any(part.startswith((".", "_")) for part in rel.parts):
                continue
            sid = rel.with_suffix("").as_posix()
            if sid in found:
                raise ValueError(f"{path}: a snippet with the id {sid!r} exists already ({found[sid].path})")
            found[sid] = Snippet(sid, path, snippets_dir / f"{sid}.record.json")
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
