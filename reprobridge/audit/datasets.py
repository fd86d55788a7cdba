"""Dataset checksums, verified before an experiment runs.

Contract: :func:`check_datasets` returns one :class:`DatasetCheck` per dataset the
experiment reads and never raises for what it finds on disk; a check that is not ``ok``
means the run must not start (the orchestrator enforces it). It raises
:class:`~reprobridge.errors.AuditError` only for an experiment id the manifest lacks.

What is hashed (``sha256`` in ``[datasets.<id>]``):

- a file: the SHA-256 of its bytes (what ``sha256sum FILE`` prints);
- a directory: the *tree hash* (:func:`tree_sha256`), the SHA-256 of the text made of one
  line ``<sha256 of the file>  <relative path>\\n`` per regular file under it, sorted by
  the path's UTF-8 bytes, with ``/`` separators. Symlinks that stay inside the
  repository are followed (datasets are often symlink farms, e.g. Hugging Face snapshots),
  a directory reached twice through links is walked once, and anything that is not a
  regular file or directory (FIFOs, sockets, devices, dangling links) is skipped, as are
  empty directories. For paths without newlines and without links out this equals::

      cd DIR && find -L . -type f -printf '%P\\0' | LC_ALL=C sort -z \\
          | xargs -0 sha256sum | sha256sum

Links out of the repository are never followed: the repository is untrusted and these
checks run on the host, so ``data -> /etc/shadow`` would otherwise put a host file's hash
and size in the evidence. A dataset path that resolves out of the repository is never
hashed (its check says so, and fails when a sha256 is declared); a link out inside a
dataset directory is left out of the tree hash and named in the check's ``links_out``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reprobridge.errors import AuditError
from reprobridge.evidence.hashing import sha256_file
from reprobridge.manifest.schema import Manifest

UNVERIFIED = "no checksum declared (unverified)"


@dataclass(frozen=True)
class DatasetCheck:
    """The check of one dataset.

    ``path`` is as declared (None when the dataset has none); ``actual_sha256`` is what was
    computed (None when nothing was hashed); ``kind`` is ``file``, ``directory`` or None,
    and ``files``/``size`` count what the hash covers.
    """

    id: str
    path: str | None
    expected_sha256: str | None
    actual_sha256: str | None
    ok: bool
    reason: str
    kind: str | None = None
    files: int | None = None
    size: int | None = None
    #: Links inside a dataset directory that lead out of the repository: never followed,
    #: left out of the tree hash (relative to the dataset's path).
    links_out: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The check as a JSON-ready dict (its fields, in order)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class TreeHash:
    """A directory's tree hash (see the module docstring), what it covers, and the links
    out of ``within`` that were left out (relative paths, sorted)."""

    sha256: str
    files: int
    size: int
    links_out: tuple[str, ...] = ()


def _inside(path: Path, within: Path) -> bool:
    """Whether ``path``, every link on it resolved, lies under ``within`` (resolved)."""
    return path.resolve().is_relative_to(within)


def _walk_files(top: Path, within: Path) -> tuple[list[tuple[bytes, Path]], list[str]]:
    """``(relative path as bytes, path)`` of every regular file under ``top``, following
    only links that stay under ``within`` (resolved); and the links that lead out."""
    found: list[tuple[bytes, Path]] = []
    out: list[str] = []
    seen: set[tuple[int, int]] = set()

    def visit(directory: Path, rel: str) -> None:
        try:
            st = directory.stat()
        except OSError:
            return
        if (st.st_dev, st.st_ino) in seen:  # a link loop, or a directory linked twice
            return
        seen.add((st.st_dev, st.st_ino))
        with os.scandir(directory) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            path = directory / name
            child = f"{rel}{name}"
            if path.is_symlink() and not _inside(path, within):
                out.append(child)  # never stat'ed, never read
                continue
            try:
                mode = path.stat().st_mode  # follows links (inside); dangling ones raise
            except OSError:
                continue
            if stat.S_ISDIR(mode):
                visit(path, child + "/")
            elif stat.S_ISREG(mode):
                found.append((os.fsencode(child), path))

    visit(top, "")
    found.sort(key=lambda item: item[0])
    return found, sorted(out)


def tree_hash(directory: Path, *, within: Path | None = None) -> TreeHash:
    """The :class:`TreeHash` of ``directory``, following links only under ``within``
    (default: ``directory`` itself). Raises ``OSError`` when a file cannot be read."""
    bound = (within or directory).resolve()
    digest = hashlib.sha256()
    total = 0
    files, links_out = _walk_files(directory, bound)
    for rel, path in files:
        # sha256_file refuses a symlink at the last component; hash what it points to
        # (under ``bound``: checked while walking).
        file_hex, size = sha256_file(path.resolve())
        total += size
        digest.update(file_hex.encode() + b"  " + rel + b"\n")
    return TreeHash(digest.hexdigest(), len(files), total, tuple(links_out))


def tree_sha256(directory: Path, *, within: Path | None = None) -> tuple[str, int, int]:
    """``(tree hash, file count, total bytes)`` of :func:`tree_hash`."""
    got = tree_hash(directory, within=within)
    return got.sha256, got.files, got.size


def check_dataset(
    dataset_id: str,
    path: str | None,
    expected: str | None,
    root: Path,
    *,
    hash_undeclared: bool = False,
    obtainable: bool = False,
) -> DatasetCheck:
    """Check one dataset at ``root / path`` against ``expected`` (see the module docstring).

    Without ``expected`` a present dataset is ok and unverified; ``hash_undeclared`` still
    hashes it (for the evidence; it may be slow on large datasets). A declared ``path``
    that is absent is missing — not ok — unless the run can obtain it (``obtainable``: the
    dataset has a URL or a library name, or the code generates it).
    """
    if not path:
        if expected is None:
            return DatasetCheck(dataset_id, None, None, None, True, UNVERIFIED)
        return DatasetCheck(
            dataset_id, None, expected, None, False, "a sha256 is declared but no `path` to check"
        )
    full = root / path
    if os.path.lexists(full) and not _inside(full, root.resolve()):
        # A link (the path's, or a directory's on it) out of the repository: a host file is
        # none of the evidence's business, so it is neither followed nor hashed.
        reason = f"{path} links out of the repository (never followed, never hashed)"
        if expected is None:
            reason += f"; {UNVERIFIED}"
        return DatasetCheck(dataset_id, path, expected, None, expected is None, reason)
    # is_file/is_dir follow links and are false for FIFOs and devices, which are never opened.
    if not (full.is_file() or full.is_dir()):
        what = "does not exist" if not os.path.lexists(full) else "is not a file or directory"
        if expected is None and obtainable:
            reason = f"{path} {what} yet (the run downloads or generates it); {UNVERIFIED}"
            return DatasetCheck(dataset_id, path, None, None, True, reason)
        reason = f"{path} {what}"
        if expected is None:
            reason += ": missing (no URL, library name or generator to obtain it)"
        return DatasetCheck(dataset_id, path, expected, None, False, reason)
    if expected is None and not hash_undeclared:
        return DatasetCheck(dataset_id, path, None, None, True, UNVERIFIED)
    links_out: tuple[str, ...] = ()
    try:
        if full.is_dir():
            tree = tree_hash(full, within=root)
            kind, actual, files, size = "directory", tree.sha256, tree.files, tree.size
            links_out = tree.links_out
        else:
            actual, size = sha256_file(full.resolve())
            kind, files = "file", 1
    except OSError as exc:
        ok = expected is None
        reason = f"{path} cannot be read ({exc.strerror or exc})"
        return DatasetCheck(dataset_id, path, expected, None, ok, reason, kind=None)
    if expected is None:
        ok, reason = True, UNVERIFIED
    elif actual == expected:
        ok, reason = True, f"sha256 matches ({kind})"
    else:
        ok, reason = False, f"sha256 mismatch ({kind}): expected {expected}, got {actual}"
    if links_out:
        reason += (
            f"; {len(links_out)} link(s) out of the repository left out (never followed): "
            + ", ".join(links_out[:5])
            + (" ..." if len(links_out) > 5 else "")
        )
    return DatasetCheck(
        dataset_id, path, expected, actual, ok, reason, kind, files, size, links_out
    )


def check_datasets(
    manifest: Manifest, exp_id: str, root: Path, *, hash_undeclared: bool = False
) -> list[DatasetCheck]:
    """One :class:`DatasetCheck` per dataset experiment ``exp_id`` reads, in declared order.

    Paths are relative to the repository ``root``. Raises :class:`AuditError` for an
    unknown experiment id.
    """
    exp = manifest.experiments.get(exp_id)
    if exp is None:
        raise AuditError(f"no experiment {exp_id!r} in the manifest")
    checks: list[DatasetCheck] = []
    for dataset_id in exp.datasets:
        dataset = manifest.datasets[dataset_id]  # the manifest model checks references resolve
        checks.append(
            check_dataset(
                dataset_id,
                dataset.path,
                dataset.sha256,
                root,
                hash_undeclared=hash_undeclared,
                obtainable=bool(dataset.url or dataset.name or dataset.generated),
            )
        )
    return checks
