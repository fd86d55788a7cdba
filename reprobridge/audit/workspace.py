"""Each run starts from a clean copy of the committed repository.

The copy is ``git archive HEAD`` (hardened git: a hostile ``.git/config`` cannot run
anything; the repository's filter drivers, which ``git archive`` would run as smudge
filters, are switched off) extracted under the rules of tarfile's ``data`` filter
(:mod:`reprobridge._tarsafe`, also on a Python without tarfile's filters), members it
refuses (a link out of the tree, an absolute path, a device) skipped and recorded, plus
ReproBridge's own artifacts taken from the work tree — the manifest, flake, launchers,
check script and Python project are often not committed yet when an audit runs. What was
overlaid, and a hash of every uncommitted change, is recorded, so the evidence says exactly
what ran.

A virtual environment the repository committed (``repro/python/.venv``) is left out of the
workspace and recorded as skipped: the environment a run gets is the backend's, made in a
directory of the auditor's, and a committed ``bin/python`` would otherwise be an
interpreter the repository chose (uv executes a venv's interpreter to inspect it).
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from reprobridge import _proc
from reprobridge._tarsafe import extract_all_data
from reprobridge.constants import (
    CHECK_SCRIPT,
    DERIVE_SCRIPT,
    FLAKE_FILE,
    FLAKE_LOCK_FILE,
    LAUNCHERS_DIR,
    MANIFEST_FILE,
    PYTHON_DIR,
)
from reprobridge.errors import AuditError
from reprobridge.evidence.hashing import sha256_file

#: rb's artifacts, copied from the work tree over the committed tree.
OVERLAY = (
    MANIFEST_FILE,
    FLAKE_FILE,
    FLAKE_LOCK_FILE,
    CHECK_SCRIPT,
    DERIVE_SCRIPT,
    LAUNCHERS_DIR,
    PYTHON_DIR,
)
_SKIP_IN_OVERLAY = {".venv", "__pycache__"}
#: The committed virtual environment left out of every workspace (see the module docstring).
COMMITTED_VENV = f"{PYTHON_DIR}/.venv"


@dataclass(frozen=True)
class WorkspaceInfo:
    """What a run's workspace was made from."""

    commit: str
    overlaid: dict[str, str] = field(default_factory=dict)  # path -> sha256
    skipped: dict[str, str] = field(default_factory=dict)  # archive member -> why


def head_commit(root: Path) -> str:
    """The commit ``HEAD`` points to; AuditError for a repository without commits."""
    commit = _proc.head_commit(root)
    if commit is None:
        raise AuditError(
            "the repository has no commit to audit",
            path=str(root),
            hint="commit the code first: every run starts from a clean copy of HEAD",
        )
    return commit


def overlaid(rel: str) -> bool:
    """Whether the repository-relative path ``rel`` is one of rb's artifacts a run's
    workspace takes from the work tree (:data:`OVERLAY`), committed or not."""
    if set(rel.split("/")) & _SKIP_IN_OVERLAY:
        return False
    return any(rel == top or rel.startswith(f"{top}/") for top in OVERLAY)


def through_link(root: Path, rel: str) -> bool:
    """Whether ``rel`` or a folder on its way is a symlink (never followed out of the
    repository: ``repro -> /etc``)."""
    chain: list[Path] = [*reversed(Path(rel).parents[:-1]), Path(rel)]
    return any((root / p).is_symlink() for p in chain)


def overlay_files(root: Path) -> list[str]:
    """Relative paths of rb's artifacts present in the work tree (sorted)."""
    out: list[str] = []
    for rel in OVERLAY:
        src = root / rel
        if through_link(root, rel):
            continue  # never follow a link (``repro -> /etc``) out of the repository
        if src.is_file():
            out.append(rel)
        elif src.is_dir():
            for p in sorted(src.rglob("*")):
                parts = set(p.relative_to(root).parts)
                if p.is_file() and not p.is_symlink() and not parts & _SKIP_IN_OVERLAY:
                    out.append(p.relative_to(root).as_posix())
    return sorted(out)


def _git_archive(root: Path, commit: str) -> bytes:
    """``git archive`` of ``commit`` as a tar, the repository's filter drivers off (as
    in every :func:`reprobridge._proc.git` call)."""
    return _proc.git(root, "archive", "--format=tar", commit, timeout=600).stdout


class SourceArchive:
    """The tar of one commit, made by ``git archive`` on first use and kept in
    ``directory`` for every later workspace of the audit: three git starts per run were
    a fifth of an audited trivial run's overhead (benchmarks/audit_overhead.py).

    ``directory`` must be the auditor's own, never bound into a run's or a setup step's
    sandbox (as the audit's uv cache is): what a run could write there, later runs would
    start from.
    """

    def __init__(self, root: Path, commit: str, directory: Path) -> None:
        self.root = root
        self.commit = commit
        self.directory = directory
        self._path: Path | None = None

    def path(self) -> Path:
        """The tar file (made now if it was not yet)."""
        if self._path is None:
            path = self.directory / f"{self.commit}.tar"
            path.write_bytes(_git_archive(self.root, self.commit))
            self._path = path
        return self._path


class Removal:
    """Removes finished runs' temporary directories in a background thread, one at a time,
    while the auditor goes on to seal and start the next run (unlinking a workspace was
    ~30 ms of each run's wall time on the loaded 2-core machine, the auditor meanwhile
    mostly waiting on fsyncs and processes). :meth:`wait` before anything else looks at
    those directories (the end-of-audit sweep of leftovers) and before the audit returns.
    A killed auditor leaves the directory to ``--resume``, as before."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def remove(self, path: Path) -> None:
        """Start removing ``path`` (after the previous removal has finished)."""
        self.wait()
        self._thread = threading.Thread(
            target=shutil.rmtree,
            args=(path,),
            kwargs={"ignore_errors": True},
            name="rb-remove-workspace",
        )
        self._thread.start()

    def wait(self) -> None:
        """Return once every removal started has finished."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None


def _drop_committed_venv(dest: Path, skipped: dict[str, str]) -> None:
    """Remove :data:`COMMITTED_VENV` from the extracted ``dest`` (a link is removed, never
    followed) and record it in ``skipped`` with how many entries it held."""
    venv = dest / COMMITTED_VENV
    if not os.path.lexists(venv):
        return
    if venv.is_symlink() or not venv.is_dir():
        count = 1
        venv.unlink()
    else:
        count = sum(len(dirs) + len(files) for _, dirs, files in os.walk(venv))
        shutil.rmtree(venv)
    skipped[COMMITTED_VENV] = (
        f"a committed virtual environment ({count} entries) left out: the run's Python "
        "environment is made by the auditor, outside the workspace, and the repository's "
        "interpreter is never run to make it"
    )


def prepare_workspace(
    root: Path, dest: Path, *, commit: str | None = None, source: SourceArchive | None = None
) -> WorkspaceInfo:
    """Fill the new directory ``dest`` with HEAD of ``root`` (``commit``, or ``source``'s
    commit, extracted from its tar) plus rb's artifacts from the work tree."""
    if source is not None:
        commit = source.commit
    commit = commit or head_commit(root)
    dest.mkdir(parents=True, exist_ok=False)
    skipped: dict[str, str] = {}

    def refuse_quietly(member: tarfile.TarInfo, why: str) -> None:
        # The data filter's rules refuse absolute paths, `..`, links out and device files;
        # such a member is left out of the workspace (and recorded) instead of ending the
        # audit.
        skipped[member.name] = why

    archive = (
        source.path().open("rb") if source is not None else io.BytesIO(_git_archive(root, commit))
    )
    with archive, tarfile.open(fileobj=archive, mode="r:") as tar:
        extract_all_data(tar, dest, refuse_quietly)
    _drop_committed_venv(dest, skipped)
    overlaid: dict[str, str] = {}
    for rel in overlay_files(root):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink():
            target.unlink()
        shutil.copy2(root / rel, target)
        overlaid[rel] = sha256_file(target)[0]
    return WorkspaceInfo(commit=commit, overlaid=overlaid, skipped=skipped)
