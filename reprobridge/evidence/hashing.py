"""SHA-256 of files, as fast as ``openssl dgst -sha256`` (hashlib *is* OpenSSL's SHA-256).

Contract: :func:`sha256_file` returns ``(hex digest, byte count)`` of exactly the bytes read
from one open file description, so the size and the digest always describe the same
content even if the file grows while it is read. Reads are 1 MiB ``readv`` calls into a
per-thread buffer: no allocation per read.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path

from reprobridge._fs import open_regular

#: Read size. 1 MiB amortises the syscall and Python overhead to noise per byte.
CHUNK_SIZE = 1 << 20

_local = threading.local()


def _buffer() -> tuple[bytearray, memoryview]:
    buf: tuple[bytearray, memoryview] | None = getattr(_local, "buf", None)
    if buf is None:
        arr = bytearray(CHUNK_SIZE)
        buf = (arr, memoryview(arr))
        _local.buf = buf
    return buf


def sha256_file(path: Path | str) -> tuple[str, int]:
    """Return ``(sha256 hex, size in bytes)`` of the regular file at ``path``.

    Follows no symlink at the last component (``O_NOFOLLOW``): evidence is only ever
    regular files, and a symlink there is an error (``OSError``), not something to hash.
    """
    digest, size = sha256_file_digest(path)
    return digest.hex(), size


def sha256_file_digest(path: Path | str) -> tuple[bytes, int]:
    """:func:`sha256_file` with the raw 32-byte digest: what a walk over many files keeps
    in memory (65 bytes an entry where the hex string takes 113)."""
    arr, view = _buffer()
    h = hashlib.sha256()
    size = 0
    fd = open_regular(Path(path))
    try:
        while True:
            n = os.readv(fd, [arr])
            if not n:
                break
            h.update(view[:n])
            size += n
    finally:
        os.close(fd)
    return h.digest(), size


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_files(paths: Iterable[Path], *, workers: int = 1) -> dict[Path, tuple[str, int]]:
    """Hash many files: ``{path: (hex, size)}``; the first ``OSError`` propagates.

    Sequential by default: for small files the per-file cost is Python and syscalls under
    the GIL, and threads measured 2x *slower* (benchmarks/hashing.py). ``workers > 1``
    pays off only for many large files, where hashlib releases the GIL while hashing.
    """
    items = list(paths)
    if workers <= 1 or len(items) < 2:
        return {p: sha256_file(p) for p in items}
    # Imported here: concurrent.futures pulls in logging (~10 ms of every command that
    # hashes anything, most of which never use threads).
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(items, pool.map(sha256_file, items), strict=True))
