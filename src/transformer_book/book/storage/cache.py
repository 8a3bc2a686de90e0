"""A content-addressed cache of snippet results, stored as data only.

The key of an entry is the hash of everything that is known *before* running: the snippet's source, its
id, the fingerprints of the snippets it requires, and the environment (versions of Python, the numerical
libraries and the engine; numerical settings such as the thread count). What is only known *after* running —
which project modules the snippet imported and which data files it declared — is stored inside the entry as
``{path: digest}``; the entry is valid only while every one of those files still hashes the same. So editing
``transformer.py`` invalidates the entries of the snippets that imported it, and no others; editing prose
invalidates nothing — nor does editing a project module's docstrings or comments, for a project module is
recorded by its code (:func:`..files.dependency_digest`).

Layout (in the cache's store, :mod:`.store`: the local cache folder by default, or a shared URL)::

    entries/<part>__<name>/<key>.json        results as JSON, with a checksum
    entries/<part>__<name>/blobs/<sha256>    artifacts (see :mod:`.artifacts`), content-addressed

Entries are written whole or not at all (write-then-rename, or the store's atomic put) and carry a checksum;
blobs are named by their hash, and are in the store before the entry that names them. A truncated, corrupt or
unreadable entry — or one whose blob is missing or damaged — is deleted and recomputed, never trusted. Nothing
in an entry can run code when it is read. A few entries are kept per snippet (the most recently used; in an
object store, where reading leaves no trace, the most recently written), so undoing an edit finds the earlier
result again.

A shared store (a URL) is a trust boundary: whoever can write there may plant anything. Its blobs are copied
into the local cache folder (``shared/<store>/…``) only after their hash matches and they decode as data
(:func:`.artifacts.decode`, a weights-only loader); an entry whose blob fails is deleted and recomputed.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from transformer_book.book.artifacts import decode, is_known_format
from transformer_book.book.discover import Snippet
from transformer_book.book.environment import fingerprint
from transformer_book.book.files import FileHasher, atomic_write_bytes, sha256_bytes
from transformer_book.book.results import Artifact, Result, from_data
from transformer_book.book.storage.store import LocalStore, Store, is_url, open_store

FORMAT = "transformer-book-cache/4"  # 3: where and when it was measured; 4: keys in the order the snippet gave them
KEEP_PER_SNIPPET = 4
SHARED_BLOB_GRACE_SECONDS = 600  # an unreferenced blob younger than this may belong to an entry being written


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


def entry_fingerprint(key: str, deps: dict[str, str], artifacts: dict[str, str] | None = None) -> str:
    """What a consumer's key includes of a required snippet: its key, the files it actually read, and the
    artifacts it made (a producer recomputed under the same key — fresh, on another machine — may train
    other weights; its consumers must not keep results computed from the old ones)."""
    text = key + "".join(f"{k}={v}" for k, v in sorted(deps.items()))
    text += "".join(f"artifact {k}={v}" for k, v in sorted((artifacts or {}).items()))
    return sha256_bytes(text.encode())[:32]


@dataclass
class Entry:
    """One cached run: its results, its artifacts (blob hashes) and the files it depended on."""

    key: str
    snippet: str
    deps: dict[str, str]  # project-relative path -> digest (imported modules by code, data files by bytes)
    results: dict[str, Result]
    seconds: float
    budget: float | None = None
    artifacts: dict[str, str] = field(default_factory=dict)  # artifact name -> sha256 of its blob
    measured_on: str = ""  # the machine that ran it and the day (see worker.Outcome)

    @property
    def fingerprint(self) -> str:
        return entry_fingerprint(self.key, self.deps, self.artifacts)

    def to_json(self) -> bytes:
        body = {
            "format": FORMAT, "key": self.key, "snippet": self.snippet, "deps": self.deps, "seconds": self.seconds,
            "budget": self.budget, "artifacts": self.artifacts, "measured_on": self.measured_on,
            "results": {k: r.to_data() for k, r in self.results.items() if r.recorded},
        }
        # Keys stay in the order the snippet gave them (a claim's inputs are read in that order: "输出形状 = … ==
        # 输入形状 = …"), so a warm build shows what a fresh one shows; the order is deterministic, as the results are.
        text = json.dumps(body, ensure_ascii=False)
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
                       body.get("budget"), dict(body.get("artifacts", {})), str(body.get("measured_on", "")))
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
            return None


def snippet_dir(snippet: str) -> str:
    return snippet.replace("/", "__")


class Cache:
    """Entries in a store: the local folder ``root`` (the default) or a shared one (:mod:`.store`).

    ``root`` is always a local folder: with a shared store it holds the verified local copies of its blobs
    (the files that snippets and pages read) and everything else that is never shared."""

    def __init__(self, root: Path, project_root: Path, hasher: FileHasher | None = None,
                 storage: Store | None = None) -> None:
        self.root = root
        self.project_root = project_root
        self.hash_file = hasher or FileHasher()
        self.storage: Store = storage or LocalStore(root)

    # -- keys and paths ------------------------------------------------------------------------------

    @staticmethod
    def entry_key(snippet: str, key: str) -> str:
        return f"entries/{snippet_dir(snippet)}/{key}.json"

    @staticmethod
    def blob_key(snippet: str, sha: str) -> str:
        return f"entries/{snippet_dir(snippet)}/blobs/{sha}"

    def _dir(self, snippet: str) -> Path:
        if self.storage.shared:
            tag = sha256_bytes(self.storage.location.encode())[:12]
            return self.root / "shared" / tag / "entries" / snippet_dir(snippet)
        return self.root / "entries" / snippet_dir(snippet)

    def entry_path(self, snippet: str, key: str) -> Path:
        return self._dir(snippet) / f"{key}.json"

    def blob_dir(self, snippet: str) -> Path:
        """Where a local worker writes the artifacts of ``snippet`` (named by their hash); with a shared
        store, the verified local copies of its blobs."""
        return self._dir(snippet) / "blobs"

    def artifact_files(self, entry: Entry) -> dict[str, str]:
        """Local files holding ``entry``'s artifacts (a shared store's blobs are fetched and verified first)."""
        for sha in entry.artifacts.values():
            self._local_blob(entry.snippet, sha)
        return {name: str(self.blob_dir(entry.snippet) / sha) for name, sha in entry.artifacts.items()}

    def has_entries(self) -> bool:
        """Whether this cache may hold results: False only for a local cache with none (a fresh clone's)."""
        if self.storage.shared:
            return True  # listing a remote store to find out would cost more than it saves
        entries = self.root / "entries"
        return entries.is_dir() and any(entries.iterdir())

    # -- reading and writing -------------------------------------------------------------------------

    def load(self, snippet: str, key: str) -> Entry | None:
        """The entry if present, intact and still valid for the current files; else None."""
        name = self.entry_key(snippet, key)
        blob = self.storage.get(name)
        if blob is None:
            return None
        entry = Entry.from_json(blob)
        if entry is None and _of_another_version(blob):
            return None  # intact, written by another version of the engine: not ours to use, nor to delete
        if entry is None or entry.key != key or entry.snippet != snippet or not self._blobs_intact(entry):
            self.storage.delete(name)
            return None
        for rel, digest in entry.deps.items():
            if self.hash_file.like(self.project_root / rel, digest) != digest:
                return None
        self.storage.touch(name)  # most recently used: kept when older entries are pruned
        return entry

    def _blobs_intact(self, entry: Entry) -> bool:
        return all(self._local_blob(entry.snippet, sha) for sha in entry.artifacts.values())

    def _local_blob(self, snippet: str, sha: str) -> bool:
        """Is blob ``sha`` in this machine's folder, intact? From a shared store it is fetched and verified."""
        path = self.blob_dir(snippet) / sha
        if self.hash_file(path) == sha:
            return True
        if not self.storage.shared:
            return False
        data = fetch_blob(self.storage, self.blob_key(snippet, sha), sha)
        if data is None:
            return False
        atomic_write_bytes(path, data)
        return True

    def store(self, entry: Entry) -> None:
        for sha in entry.artifacts.values():  # the blobs first: an entry never names a blob the store lacks
            name = self.blob_key(entry.snippet, sha)
            if not self.storage.exists(name):  # (a cluster worker has put it there already)
                self.storage.put(name, (self.blob_dir(entry.snippet) / sha).read_bytes())
        self.storage.put(self.entry_key(entry.snippet, entry.key), entry.to_json())
        self._prune(entry.snippet, keep=f"{entry.key}.json")

    def _prune(self, snippet: str, keep: str = "") -> None:
        folder = f"entries/{snippet_dir(snippet)}"
        listed = self.storage.list(folder)
        # Newest first; the entry just written always stays (a store's clock may not tell it from the others).
        names = sorted((n for n in listed if n.endswith(".json")), key=lambda n: (n == keep, listed[n]), reverse=True)
        for old in names[KEEP_PER_SNIPPET:]:
            self.storage.delete(f"{folder}/{old}")
        wanted: set[str] = set()
        for name in names[:KEEP_PER_SNIPPET]:
            data = self.storage.get(f"{folder}/{name}")
            kept = Entry.from_json(data) if data is not None else None
            if kept is not None:
                wanted.update(kept.artifacts.values())
        # In a shared store another build may be writing an entry whose blob is already there: let it be.
        young = time.time() - SHARED_BLOB_GRACE_SECONDS if self.storage.shared else float("inf")
        for blob, mtime in self.storage.list(f"{folder}/blobs").items():
            if blob not in wanted and mtime < young:
                self.storage.delete(f"{folder}/blobs/{blob}")
        local = self.blob_dir(snippet)
        if self.storage.shared and local.is_dir():  # the local copies follow the shared store
            for copy in local.iterdir():
                if copy.name not in wanted and not copy.name.startswith("."):
                    self._discard(copy)

    @staticmethod
    def _discard(path: Path) -> None:
        try:
            path.unlink()
        except OSError:
            pass


def open_cache(location: Path | str, project_root: Path, hasher: FileHasher | None = None) -> Cache:
    """The cache at a local folder, or at a URL (then local files go to the project's ``.book-cache``)."""
    if is_url(location):
        return Cache(project_root / ".book-cache", project_root, hasher, open_store(location))
    return Cache(Path(location), project_root, hasher)


def _of_another_version(blob: bytes) -> bool:
    """An intact entry (its checksum holds) of another cache format: another engine's, shared in one store."""
    try:
        outer = json.loads(blob.decode("utf-8"))
        text = outer["body"]
        if sha256_bytes(text.encode("utf-8")) != outer["checksum"]:
            return False
        fmt = json.loads(text).get("format", "")
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        return False
    return isinstance(fmt, str) and fmt.startswith("transformer-book-cache/") and fmt != FORMAT


def fetch_blob(storage: Store, name: str, sha: str) -> bytes | None:
    """Blob ``sha`` from ``storage``, or None: it must hash to ``sha`` and decode as data (weights only), else
    it is deleted from the store — whoever wrote it, it cannot run code here. An intact blob in an artifact
    format this engine does not know (another version's) is refused here and left for the builds that do."""
    data = storage.get(name)
    if data is None:
        return None
    try:
        if sha256_bytes(data) != sha:
            raise ValueError("hash mismatch")
        if not is_known_format(data):
            return None
        decode(data)
    except Exception:  # noqa: BLE001 - truncated, tampered, or not data: refused alike
        storage.delete(name)
        return None
    return data


def write_blob(folder: Path, data: bytes) -> str:
    """Store an artifact's bytes under their hash (atomically); returns the hash."""
    sha = sha256_bytes(data)
    path = folder / sha
    if not path.exists():
        atomic_write_bytes(path, data)
    return sha

