"""Where the result cache keeps its files: a local folder (the default) or any fsspec URL, behind one small interface.

The cache (:mod:`.cache`) names its files by ``/``-separated keys — ``entries/<snippet>/<key>.json`` and
``entries/<snippet>/blobs/<sha256>`` — and touches them only through a :class:`Store`:

- :class:`LocalStore`: a folder on this machine, written as always: a temporary file, fsync, rename.
- :class:`FsspecStore`: an fsspec URL (``s3://bucket/prefix``, ``gs://…``, ``file:///shared/dir``, ``memory://…``
  in tests). An object store receives each object in one PUT, which is atomic per object; a file system gets a
  temporary name and a rename. Either way a reader sees the old object, the whole new one, or none — never a
  torn or mixed one — however many builds write the same entry at once.

A store reached through a URL is *shared*: other machines write into it, so the cache does not trust what it
reads there (every blob is hashed and must decode as data before it is used, see :mod:`.cache`). Credentials
and endpoints are those of fsspec and the cloud SDK (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL_S3``,
``FSSPEC_S3_…``, fsspec's config files): nothing secret is written into ``mkdocs.yml`` or sent to workers.

Only the result cache lives in a store; the build report, the serve stamps and the other local files stay in
the local cache folder.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any, Protocol

from transformer_book.book.files import atomic_write_bytes

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+://")

# fsspec protocols whose whole-object put is atomic (a reader never sees part of an object).
OBJECT_STORES = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "memory"}


def is_url(location: str | Path) -> bool:
    return isinstance(location, str) and bool(_URL.match(location))


def cache_location(value: str, project_root: Path) -> Path | str:
    """``cache_dir`` / ``BOOK_CACHE_DIR`` as given: a URL stays a URL, a path is relative to the project."""
    return value.rstrip("/") if is_url(value) else project_root / value


class Store(Protocol):
    location: str  # what another machine opens to reach the same files (a URL or an absolute path)
    shared: bool  # reached through a URL: what is read there is not trusted

    def get(self, key: str) -> bytes | None: ...
    def put(self, key: str, data: bytes) -> None: ...  # atomic: all of ``data`` or the old object
    def exists(self, key: str) -> bool: ...
    def delete(self, key: str) -> None: ...
    def list(self, folder: str) -> dict[str, float]: ...  # file name -> modification time (s), temporaries excluded
    def touch(self, key: str) -> None: ...  # mark as recently used (where the store can)


def open_store(location: Path | str) -> Store:
    return FsspecStore(location) if is_url(location) else LocalStore(Path(location))


class LocalStore:
    """A folder on this machine (the default): write-then-rename, modification times for recency."""

    shared = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self.location = str(root.resolve())

    def path(self, key: str) -> Path:
        return self.root / key

    def get(self, key: str) -> bytes | None:
        try:
            return self.path(key).read_bytes()
        except OSError:
            return None

    def put(self, key: str, data: bytes) -> None:
        atomic_write_bytes(self.path(key), data)

    def exists(self, key: str) -> bool:
        return self.path(key).is_file()

    def delete(self, key: str) -> None:
        try:
            self.path(key).unlink()
        except OSError:
            pass

    def list(self, folder: str) -> dict[str, float]:
        out: dict[str, float] = {}
        try:
            children = list(self.path(folder).iterdir())
        except OSError:
            return out
        for p in children:
            if p.name.startswith("."):
                continue
            try:
                st = p.stat()
            except OSError:
                continue
            if p.is_file():
                out[p.name] = st.st_mtime_ns / 1e9
        return out

    def touch(self, key: str) -> None:
        try:
            os.utime(self.path(key))
        except OSError:
            pass


def _mtime(info: dict[str, Any]) -> float:
    for name in ("mtime", "LastModified", "last_modified", "updated", "created", "modified"):
        value = info.get(name)
        if value is None:
            continue
        if isinstance(value, str):
            try:
                value = _dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
        return value.timestamp() if hasattr(value, "timestamp") else float(value)
    return 0.0


RETRY_SECONDS = (0.5, 2.0, 5.0)  # waits between the attempts of one read of a shared store


class StoreUnavailable(RuntimeError):
    """A shared store that kept failing after the retries: the build stops and says which store."""


def _patiently(action: Any, what: str) -> Any:
    """``action()``, tried again after a transient failure (a timeout, a dropped connection) — a network
    store fails now and then, and one failure must not abort a build of an hour. A missing file is an
    answer, not a failure; after the last retry the failure is reported, naming the store."""
    for attempt, wait in enumerate((*RETRY_SECONDS, None)):
        try:
            return action()
        except FileNotFoundError:
            raise
        except (OSError, TimeoutError) as exc:
            if wait is None:
                raise StoreUnavailable(f"the shared cache did not answer while {what}: {type(exc).__name__}: {exc} "
                                       f"({attempt + 1} attempts)") from exc
            time.sleep(wait)
    return None  # pragma: no cover - the loop returns or raises


class FsspecStore:
    """Any fsspec file system, addressed by URL; shared between machines."""

    shared = True

    def __init__(self, url: str) -> None:
        try:
            import fsspec
        except ImportError:  # pragma: no cover - fsspec comes with the book's dependencies
            raise RuntimeError(f"a cache at {url} needs fsspec: pip install fsspec") from None
        self.location = url.rstrip("/")
        try:
            self.fs, base = fsspec.url_to_fs(self.location)
        except (ImportError, ValueError) as exc:
            raise RuntimeError(f"cannot open the cache at {url}: {exc} (an s3:// cache needs: pip install s3fs)") from None
        self.base = base.rstrip("/")
        protocol = self.fs.protocol if isinstance(self.fs.protocol, str) else self.fs.protocol[0]
        self.object_store = protocol in OBJECT_STORES
        self.local_fs = protocol in ("file", "local")

    def path(self, key: str) -> str:
        return f"{self.base}/{key}"

    def get(self, key: str) -> bytes | None:
        return _patiently(lambda: self._get(key), f"reading {self.location}/{key}")

    def _get(self, key: str) -> bytes | None:
        try:
            return self.fs.cat_file(self.path(key))
        except FileNotFoundError:
            return None

    def put(self, key: str, data: bytes) -> None:
        path = self.path(key)
        if self.object_store:
            self.fs.pipe_file(path, data)  # one PUT: atomic per object
            return
        folder, name = path.rsplit("/", 1)
        self.fs.makedirs(folder, exist_ok=True)
        tmp = f"{folder}/.{name}.{uuid.uuid4().hex}.tmp"
        try:
            self.fs.pipe_file(tmp, data)
            self.fs.mv(tmp, path)  # a rename within the folder
        except BaseException:
            try:
                self.fs.rm_file(tmp)
            except (OSError, FileNotFoundError):
                pass
            raise

    def exists(self, key: str) -> bool:
        path = self.path(key)
        self.fs.invalidate_cache(path)  # another machine may have written or deleted it since
        return bool(_patiently(lambda: self.fs.isfile(path), f"looking for {self.location}/{key}"))

    def delete(self, key: str) -> None:
        try:
            self.fs.rm_file(self.path(key))
        except FileNotFoundError:
            pass
        self.fs.invalidate_cache(self.path(key))

    def list(self, folder: str) -> dict[str, float]:
        path = self.path(folder).rstrip("/")
        self.fs.invalidate_cache(path)
        try:
            infos = self.fs.ls(path, detail=True)
        except FileNotFoundError:
            return {}
        out = {}
        for info in infos:
            name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
            if info.get("type") == "file" and not name.startswith("."):
                out[name] = _mtime(info)
        return out

    def touch(self, key: str) -> None:
        # Object stores cannot change an object's time without rewriting it: there, recency is write time.
        if self.local_fs:
            try:
                self.fs.touch(self.path(key), truncate=False)
            except OSError:
                pass
