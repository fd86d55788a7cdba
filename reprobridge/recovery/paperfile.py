"""Which paper file `rb init` reads, and how the manifest records it.

Contracts:

* :func:`given_paper` resolves ``--paper``: a path under the repository must stay inside it
  after symlinks are resolved (the repository is untrusted: a committed
  ``paper.pdf -> ~/.ssh/id_ed25519`` must not make rb read and quote a host file); a path
  outside is the operator's own file.
* The manifest records the paper by content (``project.paper.sha256``) and, when that is
  reasonable, by a path relative to the repository (``../p.md``: at most
  :data:`MAX_UP` folders up); never by an absolute path of the author's machine.
* :func:`recorded_paper` decides, on a refresh without ``--paper``, whether the recorded
  paper is read again. A file outside the repository is read only when its sha256 equals
  the recorded one: the manifest is repository text, and a content address lets it name
  only bytes its author already had. A paper that cannot be re-read is not a reason to
  drop what came from it: :attr:`PaperChoice.kept_label` names the evidence label whose
  values the refresh keeps as they are, and :attr:`PaperChoice.note` says why.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from reprobridge.errors import DetectionError, UnsafePathError

#: How many folders above the repository a recorded paper path may climb (``../../p.md``).
MAX_UP = 2
#: The provenance of the values rb records for ``--paper`` itself (path and hash).
PAPER_SOURCE = "rb init --paper"
#: Largest paper file hashed (the paper detector's own limit).
_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class PaperChoice:
    """The paper of one `rb init`.

    ``read``: what the paper detector reads (repository-relative, or an absolute path to the
    operator's file; None: no paper is read). ``path`` and ``sha256``: what the manifest
    records. ``kept_label``: set when a recorded paper is not read again, the evidence
    label (``p.md``) of the values derived from it, which the refresh keeps. ``note``: the
    progress line that says so, or that the paper changed.
    """

    read: str | None = None
    path: str | None = None
    sha256: str | None = None
    kept_label: str | None = None
    note: str | None = None


def _sha256_of(path: Path) -> str | None:
    """sha256 of the regular file ``path`` (never blocks on a FIFO or device), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h = hashlib.sha256()
        total = 0
        while chunk := os.read(fd, 1 << 20):
            total += len(chunk)
            if total > _MAX_BYTES:
                return None
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def _record_path(root: Path, full: Path) -> str | None:
    """``full`` relative to ``root`` (POSIX), or None when it climbs above :data:`MAX_UP`
    folders: further away, the path says more about the author's machine than it helps."""
    rel = Path(os.path.relpath(full, root))
    ups = 0
    for part in rel.parts:
        if part != "..":
            break
        ups += 1
    return rel.as_posix() if ups <= MAX_UP else None


def given_paper(root: Path, paper: str | Path, given_root: Path) -> PaperChoice:
    """``--paper``: what to read and what to record (see the module). Raises
    UnsafePathError for a repository symlink that leads out, DetectionError for a missing
    file."""
    p = Path(paper).expanduser().absolute()
    lexical = Path(os.path.normpath(p))
    bases = {root, Path(os.path.normpath(given_root.expanduser().absolute()))}
    if any(lexical.is_relative_to(b) for b in bases) and not p.resolve().is_relative_to(root):
        raise UnsafePathError(
            "the paper is a symlink (or under one) that leads out of the repository; refused",
            path=str(paper),
            hint="pass the real file's path with --paper if you trust it",
        )
    if not p.is_file():
        raise DetectionError(
            "paper file not found",
            path=str(paper),
            hint="pass --paper PATH to a .md, .tex, .pdf or .tar.gz",
        )
    full = p.resolve()
    sha = _sha256_of(full)
    if full.is_relative_to(root):
        rel = full.relative_to(root).as_posix()
        return PaperChoice(read=rel, path=rel, sha256=sha)
    return PaperChoice(read=str(full), path=_record_path(root, full), sha256=sha)


def _inside(root: Path, rel: str) -> Path | None:
    """``root/rel`` when ``rel`` is relative, stays under ``root`` lexically and crosses no
    symlink on the way; else None."""
    parts = Path(rel).parts
    if ".." in parts:
        return None
    here = root
    for part in parts:
        here = here / part
        if here.is_symlink():
            return None
    return here


def recorded_label(sources: list[str]) -> str | None:
    """The paper's evidence label from the provenance of ``project.paper.sha256``
    (``rb init --paper: p.md``), which a record without a path still has."""
    prefix = f"{PAPER_SOURCE}: "
    return next((s[len(prefix) :] for s in sources if s.startswith(prefix)), None)


def hash_sources(label: str) -> list[str]:
    """The provenance of ``project.paper.sha256`` (names the label: see recorded_label)."""
    return [f"{PAPER_SOURCE}: {label}"]


def label_of(choice: PaperChoice) -> str | None:
    """The evidence label the paper detector gives ``choice.read`` (its base name outside
    the repository, its repository path inside)."""
    if choice.read is None:
        return choice.kept_label
    return Path(choice.read).name if Path(choice.read).is_absolute() else choice.read


def recorded_paper(
    root: Path, rel: str | None, sha256: str | None, label: str | None = None
) -> PaperChoice:
    """The paper a refresh without ``--paper`` reads, from the manifest's record.

    Inside the repository (relative, no ``..``, no symlink on the way): read, and when the
    recorded hash differs the note says the paper changed. Outside (``../p.md``): read only
    when its sha256 equals the recorded one. Otherwise nothing is read and the values that
    came from the paper are kept (``kept_label``), the note says why.
    """
    if not rel and not sha256:
        return PaperChoice()
    if rel and (Path(rel).is_absolute() or "\\" in rel or not Path(rel).parts):
        # An absolute path (what older rb wrote) names a file on its author's machine.
        return _not_read(Path(rel).name, None, sha256, "its recorded path is absolute")
    if not rel:
        return _not_read(label, None, sha256, "the manifest records its hash but no path")
    inside = _inside(root, rel)
    if inside is not None:
        if not inside.is_file():
            return _not_read(rel, rel, sha256, "it is not in the repository any more")
        now = _sha256_of(inside)
        note = None
        if sha256 and now != sha256:
            note = f"the paper {rel} changed since rb recorded it (sha256 differs): read again"
        return PaperChoice(read=Path(rel).as_posix(), path=rel, sha256=now, note=note)
    full = Path(os.path.normpath(root / rel))
    if full.is_relative_to(root):
        # `a/../../x` style paths and symlinks inside: not the repository's file.
        return _not_read(full.name, rel, sha256, "its recorded path leaves through a link")
    if not sha256:
        return _not_read(full.name, rel, None, "it is outside the repository and has no hash")
    now = _sha256_of(full)
    if now is None:
        return _not_read(full.name, rel, sha256, f"{rel} does not resolve here")
    if now != sha256:
        return _not_read(full.name, rel, sha256, f"{rel} differs from it (sha256 differs)")
    return PaperChoice(read=str(full.resolve()), path=rel, sha256=sha256)


def _not_read(label: str | None, rel: str | None, sha256: str | None, why: str) -> PaperChoice:
    shown = rel or (f"sha256 {sha256[:12]}" if sha256 else "recorded")
    note = (
        f"the paper ({shown}) was not re-read: {why}; the targets, tolerances, claims and "
        "seeds derived from it are kept as they are (pass --paper PATH to re-read it)"
    )
    safe_rel = rel if rel and not Path(rel).is_absolute() else None
    return PaperChoice(path=safe_rel, sha256=sha256, kept_label=label, note=note)


def cites_paper(sources: list[str], label: str) -> bool:
    """Whether provenance ``sources`` name the paper (``label:line``). The record of the
    paper itself (path, hash: ``rb init --paper``) is not such a value: the merge
    records it again from :class:`PaperChoice`, so an absolute path older rb wrote goes."""
    return any(s.startswith(f"{label}:") for s in sources)
