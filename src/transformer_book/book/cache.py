"""A content-addressed cache of snippet results.

The key of an entry is the hash of everything that is known *before* running: the snippet's source, its
id, and the versions of Python, the numerical libraries and the engine. What is only known *after*
running — which project modules the snippet imported and which data files it declared — is stored inside
the entry as ``{path: sha256}``; the entry is valid only while every one of those files still hashes the
same. So editing ``transformer.py`` invalidates the entries of the snippets that imported it, and no
others; editing prose invalidates nothing.

Entries are written atomically (temporary file + ``os.replace``) and carry a checksum of their payload: a
truncated, corrupt or unreadable entry is deleted and recomputed, never trusted.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAGIC = b"TBCACHE1"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FileHasher:
    """Hashes files, remembering results by (path, size, mtime) so a warm build rereads nothing."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[int, int, str]] = {}

    def __call__(self, path: Path) -> str | None:
        try:
            st = path.stat()
        except OSError:
            return None
        key = str(path)
        hit = self._memo.get(key)
        if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
            return hit[2]
        digest = sha256_bytes(path.read_bytes())
        self._memo[key] = (st.st_size, st.st_mtime_ns, digest)
        return digest


@dataclass
class Entry:
    """One cached run: the results payload plus the files it depended on."""

    key: str
    snippet: str
    deps: dict[str, str]  # project-relative path -> sha256 (imported modules and declared data files)
    payload: Any  # the worker's result object (results dict, meta)
    seconds: float
    meta: dict[str, Any] = field(default_factory=dict)


class Cache:
    def __init__(self, root: Path, project_root: Path, hasher: FileHasher | None = None) -> None:
        self.root = root
        self.project_root = project_root
        self.hash_file = hasher or FileHasher()

    def entry_path(self, snippet: str, key: str) -> Path:
        return self._path(snippet, key)

    def _path(self, snippet: str, key: str) -> Path:
        return self.root / "entries" / snippet.replace("/", "__") / f"{key}.pkl"

    def load(self, snippet: str, key: str) -> Entry | None:
        """Return the entry if present, intact and still valid for the current files; else None."""
        path = self._path(snippet, key)
        try:
            blob = path.read_bytes()
        except OSError:
            return None
        entry = self._decode(blob)
        if entry is None or entry.key != key or entry.snippet != snippet:
            self._discard(path)
            return None
        for rel, digest in entry.deps.items():
            if self.hash_file(self.project_root / rel) != digest:
                return None
        return entry

    def store(self, entry: Entry) -> None:
        path = self._path(entry.snippet, entry.key)
        path.parent.mkdir(parents=True, exist_ok=True)
        # Older entries of this snippet can never be hit again once its source changed; keep one per key.
        body = pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL)
        blob = MAGIC + sha256_bytes(body).encode() + body
        atomic_write_bytes(path, blob)
        for old in path.parent.glob("*.pkl"):
            if old != path:
                self._discard(old)

    @staticmethod
    def _decode(blob: bytes) -> Entry | None:
        if not blob.startswith(MAGIC) or len(blob) < len(MAGIC) + 64:
            return None
        digest = blob[len(MAGIC) : len(MAGIC) + 64].decode("ascii", "replace")
        body = blob[len(MAGIC) + 64 :]
        if sha256_bytes(body) != digest:
            return None
        try:
            entry = pickle.loads(body)
        except Exception:  # a stale class layout or a damaged pickle: recompute
            return None
        return entry if isinstance(entry, Entry) else None

    @staticmethod
    def _discard(path: Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
