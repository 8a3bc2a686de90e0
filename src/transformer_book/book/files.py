"""Writing files whole or not at all, with the permissions an ordinary write would give, and hashing them.

Two kinds of hash: a file's bytes (:func:`sha256_bytes`), and a project module's *code*
(:func:`code_digest`, written ``code:…``). A result depends on what a module does, not on how it is
documented: the book's modules (``transformer.py``, ``training.py``, the experiments) carry the Chinese
docstrings that the API reference shows, and fixing one of them is an edit of prose — it must not rerun the
trainings that import the module. So a snippet's entry records each project module it ran by its code: the
syntax tree without the string statements that only document (docstrings, attribute docstrings) and without
line numbers; comments are not in the tree at all. Any change to what the module computes changes the digest.

The engine's own modules (this folder) stay hashed by their bytes: they are hashed at every start of the
forkserver and of every build, where parsing sixty files would cost 0.2 s, and their docstrings are not the
book's prose. A recorded digest says which kind it is, so an entry is checked the way it was written.
"""

from __future__ import annotations

import ast
import hashlib
import os
import tempfile
from pathlib import Path

from transformer_book.book.memo import Memo, file_version

ENGINE_DIR = Path(__file__).resolve().parent  # the whole engine: transformer_book/book/
CODE = "code:"  # the prefix of a code digest


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def keyed_by_code(path: Path) -> bool:
    """Whether a file a snippet ran is recorded by its code: a Python module outside the engine."""
    return path.suffix == ".py" and not path.resolve().is_relative_to(ENGINE_DIR)


def _documents_only(stmt: ast.stmt) -> bool:
    """A statement that is a bare string (a docstring): evaluating it does nothing."""
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def code_digest(tree: ast.Module) -> str:
    """``code:`` + sha256 of a module's code: ``tree`` without its documenting strings, dumped without line
    numbers. Changes ``tree`` (drops those strings): compile from it first."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            stmts = getattr(node, field, None)
            if isinstance(stmts, list) and stmts and isinstance(stmts[0], ast.stmt):
                kept = [s for s in stmts if not _documents_only(s)]
                setattr(node, field, kept or [ast.Pass()])  # a body of only a docstring does nothing either
    return CODE + sha256_bytes(ast.dump(tree).encode("utf-8"))


def dependency_digest(path: Path, data: bytes) -> str:
    """How a snippet's entry records a file it ran or read: a project module by its code, anything else (the
    engine, data files) by its bytes — also a module that does not parse, which cannot have run."""
    if keyed_by_code(path):
        try:
            return code_digest(ast.parse(data, str(path)))
        except (SyntaxError, ValueError):
            pass
    return sha256_bytes(data)


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
    """Hashes files, remembering each digest by the file's version (:func:`.memo.file_version`: mtime and size),
    so that a warm build rereads nothing."""

    def __init__(self) -> None:
        self._digests: Memo[str] = Memo("file digests")

    def __call__(self, path: Path) -> str | None:
        """sha256 of the file's bytes; None if it cannot be read."""
        return self._hash(path, code=False)

    def like(self, path: Path, recorded: str) -> str | None:
        """The file's digest of the same kind as ``recorded`` (code or bytes, see :func:`dependency_digest`):
        equal to it exactly when the entry that recorded it is still valid for this file."""
        return self._hash(path, code=recorded.startswith(CODE))

    def _hash(self, path: Path, *, code: bool) -> str | None:
        version = file_version(path)
        if version is None:
            return None

        def digest() -> str:
            data = path.read_bytes()
            return dependency_digest(path, data) if code else sha256_bytes(data)

        try:
            return self._digests.get((str(path), code), version, digest)
        except OSError:
            return None
