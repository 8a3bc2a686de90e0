"""Finding the snippets of a book: script files under ``snippets/`` and notebook pages under ``docs/``."""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

from transformer_book.book.memo import Memo


TIMEOUT_PER_BUDGET = 10  # a snippet that declares BUDGET_SECONDS = b and no timeout is stopped after 10 b


@dataclass(frozen=True)
class Declared:
    """What a snippet file declares at its top level, read without running it (``REQUIRES``, ``TIMEOUT_SECONDS``,
    ``BUDGET_SECONDS``), or the message of the first declaration that is not a literal of the right kind."""

    requires: tuple[str, ...] = ()
    timeout: float | None = None
    budget: float | None = None
    error: str = ""


# A build asks every snippet for its declarations, and every page's notebook asks again; under ``serve`` that is
# every save, and parsing 53 sources each time took 0.05 s: remembered by the source's bytes.
_DECLARED: Memo[Declared] = Memo("snippet declarations")


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
        ``"requires"`` in the ``"book"`` entry of its metadata. A malformed one raises ``ValueError``."""
        if self.is_notebook:
            return self._notebook_requires()
        return list(self.declared().requires)

    def declared(self, source: bytes | None = None) -> Declared:
        """The snippet's top-level declarations (of ``source``, its bytes if already read); raises ``ValueError``
        naming file and line when one is not a literal of its kind. A notebook page declares only its
        ``requires`` (in its metadata)."""
        if self.is_notebook:
            return Declared(tuple(self._notebook_requires()))
        raw = self.path.read_bytes() if source is None else source
        found = _DECLARED.get(self.path, raw, lambda: _read_declarations(self.path, raw))
        if found.error:
            raise ValueError(found.error)
        return found

    def timeout(self, default: float, source: bytes | None = None) -> float:
        """Seconds this snippet may run: ``TIMEOUT_SECONDS`` if it declares it; else 10 × ``BUDGET_SECONDS``;
        else ``default`` (the build's). The one place a snippet's deadline is decided (see :class:`.types.Task`)."""
        found = self.declared(source)
        if found.timeout is not None:
            return found.timeout
        if found.budget is not None:
            return TIMEOUT_PER_BUDGET * found.budget
        return default

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


_EXAMPLES = {"REQUIRES": 'REQUIRES = ["lecture07/s11_train"]', "TIMEOUT_SECONDS": "TIMEOUT_SECONDS = 600",
             "BUDGET_SECONDS": "BUDGET_SECONDS = 60"}


def _read_declarations(path: Path, source: bytes) -> Declared:
    try:
        tree = ast.parse(source, filename=str(path))
    except (SyntaxError, ValueError):
        return Declared()  # reported when the snippet runs
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets, value_node = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):  # REQUIRES: list[str] = [...]
            targets, value_node = [node.target], node.value
        else:
            continue
        for name in (t.id for t in targets if isinstance(t, ast.Name) and t.id in _EXAMPLES):
            try:
                value = ast.literal_eval(value_node) if value_node is not None else None
            except ValueError:
                value = None
            if name == "REQUIRES":
                ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)
                what = "a literal list of snippet ids"
            else:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0
                what = "a positive number (a literal)"
            if not ok:
                return Declared(error=f"{path}:{node.lineno}: {name} must be {what}, e.g. {_EXAMPLES[name]}")
            values[name] = value
    timeout, budget = values.get("TIMEOUT_SECONDS"), values.get("BUDGET_SECONDS")
    return Declared(tuple(values.get("REQUIRES", ())),  # type: ignore[arg-type]
                    None if timeout is None else float(timeout), None if budget is None else float(budget))  # type: ignore[arg-type]


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
