"""A content-addressed cache of snippet results, stored as data only.

The key of an entry is the hash of everything that is known *before* running: the snippet's source, its
id, the fingerprints of the snippets it requires, and the environment (versions of Python, the numerical
libraries and the engine; numerical settings such as the thread count). What is only known *after* running —
which project modules the snippet imported and which data files it declared — is stored inside the entry as
``{path: sha256}``; the entry is valid only while every one of those files still hashes the same. So editing
``transformer.py`` invalidates the entries of the snippets that imported it, and no others; editing prose
invalidates nothing.

Layout (under the cache root)::

    entries/<part>__<name>/<key>.json        results as JSON, with a checksum
    entries/<part>__<name>/blobs/<sha256>    artifacts (see :mod:`.artifacts`), content-addressed

Entries are written whole or not at all (write-then-rename) and carry a checksum; blobs are named by their
hash. A truncated, corrupt or unreadable entry — or one whose blob is missing or damaged — is deleted and
recomputed, never trusted. Nothing in an entry can run code when it is read. A few entries are kept per
snippet (the most recently used), so undoing an edit finds the earlier result again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from .discover import Snippet
from .environment import fingerprint
from .files import FileHasher, atomic_write_bytes, sha256_bytes
from .results import Artifact, Result, from_data

FORMAT = "transformer-book-cache/2"
KEEP_PER_SNIPPET = 4


def cache_key(snippet: Snippet, source: bytes | None = None, required: dict[str, str] | None = None) -> str:
    """Hash of what is known before running; ``required`` maps each required snippet to its fingerprint."""
    h = hashlib.sha256()
    for sid, fp in sorted((required or {}).items()):
        h.update(f"requires {sid}={fp}\n".encode())
    for k, v in sorted(fingerprint().items()):
        h.update(f"{k}={v}\n".encode())
    h.update((sys.implementation.cache_tag or "").encode())
    h.update(snippet.id.encode() + b"\0")
    h.update(source if source is not None else snippet.source())
    return h.hexdigest()[:32]


def entry_fingerprint(key: str, deps: dict[str, str]) -> str:
    """What a consumer's key includes of a required snippet: its key and the files it actually read."""
    return sha256_bytes((key + "".join(f"{k}={v}" for k, v in sorted(deps.items()))).encode())[:32]


@dataclass
class Entry:
    """One cached run: its results, its artifacts (blob hashes) and the files it depended on."""

    key: str
    snippet: str
    deps: dict[str, str]  # project-relative path -> sha256 (imported modules and declared data files)
    results: dict[str, Result]
    seconds: float
    budget: float | None = None
    artifacts: dict[str, str] = field(default_factory=dict)  # artifact name -> sha256 of its blob

    @property
    def fingerprint(self) -> str:
        return entry_fingerprint(self.key, self.deps)

    def to_json(self) -> bytes:
        body = {
            "format": FORMAT, "key": self.key, "snippet": self.snippet, "deps": self.deps, "seconds": self.seconds,
            "budget": self.budget, "artifacts": self.artifacts,
            "results": {k: r.to_data() for k, r in self.results.items() if not isinstance(r, Artifact)},
        }
        text = json.dumps(body, ensure_ascii=False, sort_keys=True)
        return json.dumps({"checksum": sha256_bytes(text.encode("utf-8")), "body": text}, ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_json(cls, blob: bytes) -> "Entry | None":
        """The entry, or None if the bytes are not an intact entry of this format."""
        try:
            outer = json.loads(blob.decode("utf-8"))
            text = outer["body"]
            if sha256_bytes(text.encode("utf-8")) != outer["checksum"]:
                return None
            body = json.loads(text)
            if body.get("format") != FORMAT:
                return None
            results: dict[str, Result] = {k: from_data(d) for k, d in body["results"].items()}
            for name in body.get("artifacts", {}):
                results[name] = Artifact()
            return cls(body["key"], body["snippet"], dict(body["deps"]), results, float(body["seconds"]),
                       body.get("budget"), dict(body.get("artifacts", {})))
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            return None


def snippet_dir(snippet: str) -> str:
    return snippet.replace("/", "__")


class Cache:
    """Entries in a local directory (the default; :mod:`.stores` adds shared ones)."""

    def __init__(self, root: Path, project_root: Path, hasher: FileHasher | None = None) -> None:
        self.root = root
        self.project_root = project_root
        self.hash_file = hasher or FileHasher()

    # -- paths ---------------------------------------------------------------------------------------

    def _dir(self, snippet: str) -> Path:
        return self.root / "entries" / snippet_dir(snippet)

    def entry_path(self, snippet: str, key: str) -> Path:
        return self._dir(snippet) / f"{key}.json"

    def blob_dir(self, snippet: str) -> Path:
        """Where a worker writes the artifacts of ``snippet`` (named by their hash)."""
        return self._dir(snippet) / "blobs"

    def artifact_files(self, entry: Entry) -> dict[str, str]:
        return {name: str(self.blob_dir(entry.snippet) / sha) for name, sha in entry.artifacts.items()}

    # -- reading and writing -------------------------------------------------------------------------

    def load(self, snippet: str, key: str) -> Entry | None:
        """The entry if present, intact and still valid for the current files; else None."""
        path = self.entry_path(snippet, key)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        entry = Entry.from_json(blob)
        if entry is None or entry.key != key or entry.snippet != snippet or not self._blobs_intact(entry):
            self._discard(path)
            return None
        for rel, digest in entry.deps.items():
            if self.hash_file(self.project_root / rel) != digest:
                return None
        try:
            os.utime(path)  # most recently used: kept when older entries are pruned
        except OSError:
            pass
        return entry

    def _blobs_intact(self, entry: Entry) -> bool:
        for sha in entry.artifacts.values():
            if self.hash_file(self.blob_dir(entry.snippet) / sha) != sha:
                return False
        return True

    def store(self, entry: Entry) -> None:
        atomic_write_bytes(self.entry_path(entry.snippet, entry.key), entry.to_json())
        self._prune(entry.snippet)

    def _prune(self, snippet: str) -> None:
        folder = self._dir(snippet)
        entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime_ns, reverse=True)
        for old in entries[KEEP_PER_SNIPPET:]:
            self._discard(old)
        wanted: set[str] = set()
        for path in entries[:KEEP_PER_SNIPPET]:
            try:
                kept = Entry.from_json(path.read_bytes())
            except OSError:
                kept = None
            if kept is not None:
                wanted.update(kept.artifacts.values())
        blobs = self.blob_dir(snippet)
        if blobs.is_dir():
            for blob in blobs.iterdir():
                if blob.name not in wanted and not blob.name.startswith("."):
                    self._discard(blob)

    @staticmethod
    def _discard(path: Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass


def write_blob(folder: Path, data: bytes) -> str:
    """Store an artifact's bytes under their hash (atomically); returns the hash."""
    sha = sha256_bytes(data)
    path = folder / sha
    if not path.exists():
        atomic_write_bytes(path, data)
    return sha

