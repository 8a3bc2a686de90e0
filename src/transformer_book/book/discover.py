"""Finding the snippets of a book: script files under ``snippets/`` and notebook pages under ``docs/``."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path


# path -> (source, its REQUIRES or the message of the error reading it): a build asks every snippet, and every
# page's notebook asks again; under ``serve`` that is every save. Parsing 53 sources each time took 0.05 s.
_REQUIRES: dict[Path, tuple[bytes, "list[str] | str"]] = {}


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

    def source(self, raw: bytes | None = None) -> bytes:
        """What the cache key hashes: the file (its bytes ``raw``, if already read), or a notebook's cell
        sources (not its saved outputs)."""
        raw = self.path.read_bytes() if raw is None else raw
        if not self.is_notebook:
            return raw
        try:
            cells = json.loads(raw).get("cells", [])
        except ValueError:
            return raw  # a broken notebook: its error is reported when it runs
        return json.dumps([[c.get("cell_type"), "".join(c.get("source", []))] for c in cells], ensure_ascii=False).encode()

    def requires(self) -> list[str]:
        """The module-level ``REQUIRES = [...]`` list, read without running the snippet; for a notebook page,
        ``"requires"`` in the ``"book"`` entry of its metadata."""
        if self.is_notebook:
            return self._notebook_requires()
        source = self.source()
        known = _REQUIRES.get(self.path)
        if known is None or known[0] != source:
            try:
                found: list[str] | str = self._script_requires(source)
            except ValueError as exc:
                found = str(exc)
            known = _REQUIRES[self.path] = (source, found)
        if isinstance(known[1], str):
            raise ValueError(known[1])
        return list(known[1])

    def _script_requires(self, source: bytes) -> list[str]:
        try:
            tree = ast.parse(source, filename=str(self.path))
        except SyntaxError:
            return []  # reported when the snippet runs
        for node in tree.body:
            if isinstance(node, ast.Assign):
                targets, value_node = node.targets, node.value
            elif isinstance(node, ast.AnnAssign):  # REQUIRES: list[str] = [...]
                targets, value_node = [node.target], node.value
            else:
                continue
            if not any(isinstance(t, ast.Name) and t.id == "REQUIRES" for t in targets):
                continue
            try:
                value = ast.literal_eval(value_node) if value_node is not None else None
            except ValueError:
                value = None
            if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
                raise ValueError(f"{self.path}:{node.lineno}: REQUIRES must be a literal list of snippet ids, "
                                 'e.g. REQUIRES = ["lecture07/s11_train"]')
            return list(value)
        return []

    def _notebook_requires(self) -> list[str]:
        try:
            meta = json.loads(self.path.read_bytes()).get("metadata", {})
        except ValueError:
            return []  # a broken notebook: its error is reported when it runs
        value = (meta.get("book") or {}).get("requires", [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f'{self.path}: metadata "book" → "requires" must be a list of snippet ids, '
                             'e.g. ["chapter20/p08_train"]')
        return list(value)


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
