"""The evidence directory of a repository (``repro/evidence``): which audits it holds and
which of them are finished. Every reader (``rb report``, ``rb verify``, ``rb archive``,
``rb audit --resume``) finds bundles here, so *finished* has one meaning.

The auditor writes a bundle in this order: the directory, ``plan.json``, the runs,
``audit.json``, then ``SHA256SUMS`` (the seal), then optionally the signature. So a bundle is

* ``finished``: ``plan.json``, ``audit.json`` and ``SHA256SUMS`` all exist;
* ``unfinished``: no ``SHA256SUMS`` yet (still running, or the auditor was killed; this
  includes a bundle killed between ``audit.json`` and the seal, and one without even a
  ``plan.json``). Only ``rb audit --resume`` completes it; every reader refuses it;
* ``broken``: sealed, but ``plan.json`` or ``audit.json`` is missing, which the writer's
  order never produces (a file removed after sealing). Neither finished nor resumable.

These checks look at which files exist, nothing more: whether their bytes are intact is
``rb verify``'s question (:mod:`reprobridge.evidence.verify`).

Whose a bundle is is a separate question (:mod:`reprobridge.evidence.provenance`): only
the operator's own bundles are "the latest" (:meth:`EvidenceStore.latest`) or resumable
(:meth:`EvidenceStore.resumable`); a bundle the repository brought (committed, or never
started here) is read only when named, and shown as foreign.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from reprobridge.evidence.errors import EvidenceError
from reprobridge.evidence.layout import AUDIT_FILE, AUDIT_ID, PLAN_FILE, SUMS_FILE
from reprobridge.evidence.provenance import provenance

BundleState = Literal["finished", "unfinished", "broken"]


def bundle_state(path: Path) -> BundleState:
    """The state of the bundle directory ``path`` (see the module docstring)."""
    if not (path / SUMS_FILE).is_file():
        return "unfinished"
    if (path / PLAN_FILE).is_file() and (path / AUDIT_FILE).is_file():
        return "finished"
    return "broken"


def unfinished_error(path: Path) -> EvidenceError:
    """The one refusal of an unfinished bundle, with the command that completes it."""
    return EvidenceError(
        f"audit {path.name} is not finished (not sealed: no {SUMS_FILE}); "
        "it is still running or was interrupted",
        path=str(path),
        hint=f"resume it: rb audit --resume {path.name}",
    )


def broken_error(path: Path) -> EvidenceError:
    missing = [n for n in (PLAN_FILE, AUDIT_FILE) if not (path / n).is_file()]
    return EvidenceError(
        f"audit {path.name} is sealed but {' and '.join(missing)} missing: "
        "files were removed after sealing",
        path=str(path),
        hint=f"check it with: rb verify {path}",
    )


class EvidenceStore:
    """The bundles under ``root`` (``<repo>/repro/evidence``), oldest first.

    A bundle is a real directory (not a link) named like an audit id; hidden entries
    (``.workspaces``, ``.slurm``) are the auditor's machinery. Ids start with the audit's
    UTC start time, so sorting by id is sorting by start.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def bundles(self) -> list[Path]:
        """Every bundle directory, oldest first."""
        if not self.root.is_dir():
            return []
        return sorted(
            p
            for p in self.root.iterdir()
            if AUDIT_ID.match(p.name) and not p.is_symlink() and p.is_dir()
        )

    def state(self, path: Path) -> BundleState:
        """See :func:`bundle_state`."""
        return bundle_state(path)

    def finished(self) -> list[Path]:
        """The finished bundles, oldest first."""
        return [p for p in self.bundles() if bundle_state(p) == "finished"]

    def unfinished(self) -> list[Path]:
        """The unfinished bundles, oldest first, whoever started them."""
        return [p for p in self.bundles() if bundle_state(p) == "unfinished"]

    def resumable(self) -> Path | None:
        """The newest unfinished bundle this operator started, or None. Ids are times the
        writer chose, so a foreign bundle dated in the future would otherwise win."""
        return next((p for p in reversed(self.unfinished()) if provenance(p).own), None)

    def latest(self) -> Path | None:
        """The newest finished bundle this operator started, or None (see
        :meth:`resumable` for why foreign bundles are skipped)."""
        return next((p for p in reversed(self.finished()) if provenance(p).own), None)

    def find(self, spec: str | Path) -> Path | None:
        """The bundle ``spec`` names: a path to a bundle directory, or an audit id here;
        None when there is none. The state is not checked (see :meth:`resolve`)."""
        as_path = Path(spec)
        candidates = [as_path] if as_path.is_dir() and (as_path / PLAN_FILE).exists() else []
        if as_path.name == str(spec) and AUDIT_ID.match(str(spec)):  # a bare id
            candidates.append(self.root / str(spec))
        for candidate in candidates:
            if candidate.is_dir() and not candidate.is_symlink():
                return candidate
        return None

    def resolve(self, spec: str | Path | None) -> Path:
        """The finished bundle ``spec`` names (None: the newest finished one).

        Raises EvidenceError when there is none, or when it is unfinished or broken
        (naming what to do: resume it, or verify it).
        """
        if spec is None:
            latest = self.latest()
            if latest is None:
                raise EvidenceError(
                    "no finished audit here",
                    path=str(self.root),
                    hint="run `rb audit` first, or name a bundle",
                )
            return latest
        path = self.find(spec)
        if path is None:
            raise EvidenceError(f"no evidence bundle {str(spec)!r}", path=str(self.root))
        state = bundle_state(path)
        if state == "unfinished":
            raise unfinished_error(path)
        if state == "broken":
            raise broken_error(path)
        return path
