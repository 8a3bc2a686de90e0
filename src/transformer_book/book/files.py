"""Writing files whole or not at all, with the permissions an ordinary write would give, and hashing them."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_MODE = 0o666 & ~_umask()  # what open(path, "w") would give; mkstemp's 0600 would hide the site from a web server


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see either the old file or the whole new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _MODE)
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


class FileHasher:
    """Hashes files, remembering results by (path, size, mtime) so that a warm build rereads nothing."""

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
